# SPDX-License-Identifier: Apache-2.0
"""Test doubles for runtimes that cannot be installed in CI (usdrt ships only with Kit)."""

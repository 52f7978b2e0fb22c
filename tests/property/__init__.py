# SPDX-License-Identifier: Apache-2.0
"""Property-based suites: random stages and random call sequences checked against an independent float64 truth."""

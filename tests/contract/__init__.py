# SPDX-License-Identifier: Apache-2.0
"""The contract suite: the same tests against every FrameView backend (see conftest.BACKENDS)."""

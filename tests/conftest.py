# SPDX-License-Identifier: Apache-2.0
"""Shared pytest fixtures: Warp set up quietly, and the device parameter (``cpu``, ``cuda:0`` when present)."""

from __future__ import annotations

import pytest
import warp as wp

if hasattr(wp, "LOG_WARNING"):  # Warp >= 1.19 logs module loads at INFO; older Warp has config.quiet
    wp.config.log_level = wp.LOG_WARNING
wp.config.quiet = True
wp.init()

HAS_CUDA = wp.get_cuda_device_count() > 0
CUDA_SKIP_REASON = "no CUDA device (wp.get_cuda_device_count() == 0)"

DEVICES = [
    pytest.param("cpu", id="cpu"),
    pytest.param(
        "cuda:0", id="cuda", marks=[pytest.mark.cuda, pytest.mark.skipif(not HAS_CUDA, reason=CUDA_SKIP_REASON)]
    ),
]


@pytest.fixture(params=DEVICES)
def device(request: pytest.FixtureRequest) -> str:
    """A Warp device name: ``"cpu"`` and, when a GPU is present, ``"cuda:0"``."""
    return request.param

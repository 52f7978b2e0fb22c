# SPDX-License-Identifier: Apache-2.0
"""Shared pytest fixtures: Warp set up quietly, and the device parameter (``cpu``, ``cuda:0`` when present)."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
import warp as wp

if hasattr(wp, "LOG_WARNING"):  # Warp >= 1.19 logs module loads at INFO; older Warp has config.quiet
    wp.config.log_level = wp.LOG_WARNING
wp.config.quiet = True
wp.init()

HAS_CUDA = wp.get_cuda_device_count() > 0
CUDA_SKIP_REASON = "no CUDA device (wp.get_cuda_device_count() == 0)"
_CUDA_SKIP_LINE = inspect.currentframe().f_lineno - 1  # type: ignore[union-attr]  # the line above, for -ra

DEVICES = [
    pytest.param("cpu", id="cpu"),
    pytest.param(
        "cuda:0", id="cuda", marks=[pytest.mark.cuda, pytest.mark.skipif(not HAS_CUDA, reason=CUDA_SKIP_REASON)]
    ),
]


_CUDA_FOLD_LINE = (
    "no CUDA device (wp.get_cuda_device_count() == 0): every test or variant that needs one (cuda:0, CUDA graphs, "
    "several GPUs) is skipped"
)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> object:
    """On a machine without CUDA, report every skip for want of CUDA under one location and reason, so that ``-ra``
    prints one line with their count instead of one line per test."""
    outcome = yield
    if HAS_CUDA:
        return
    report = outcome.get_result()
    longrepr = report.longrepr
    if report.skipped and isinstance(longrepr, tuple) and len(longrepr) == 3 and "cuda" in str(longrepr[2]).lower():
        report.longrepr = (__file__, _CUDA_SKIP_LINE, _CUDA_FOLD_LINE)


@pytest.fixture(params=DEVICES)
def device(request: pytest.FixtureRequest) -> str:
    """A Warp device name: ``"cpu"`` and, when a GPU is present, ``"cuda:0"``."""
    return request.param


@pytest.fixture
def newton_manager(monkeypatch: pytest.MonkeyPatch, device: str) -> Any:
    """The Isaac Lab ``NewtonManager`` stand-in (tests/newton_manager_fake.py) over a stepped 4-env simulation of
    tests/test_physics_newton.py, installed in ``sys.modules`` under Isaac Lab's module name."""
    import sys
    import types

    pytest.importorskip("newton")
    from newton_manager_fake import FakeNewtonManager
    from test_physics_newton import Sim

    sim = Sim(device, envs=4)
    sim.step(5)
    monkeypatch.setattr(FakeNewtonManager, "sim", sim)
    monkeypatch.setattr(FakeNewtonManager, "kinematics_dirty", False)
    monkeypatch.setattr(FakeNewtonManager, "forward_calls", 0)
    masks = {"_fk_reset_mask": sim.model.articulation_count, "_world_reset_mask": sim.model.world_count + 1}
    for name, size in masks.items():
        monkeypatch.setattr(FakeNewtonManager, name, wp.zeros(size, dtype=wp.bool, device=device))
    module = types.ModuleType("isaaclab_newton.physics.newton_manager")
    module.NewtonManager = FakeNewtonManager  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "isaaclab_newton.physics.newton_manager", module)
    return FakeNewtonManager

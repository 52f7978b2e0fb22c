# SPDX-License-Identifier: Apache-2.0
"""Shared constants and helpers of the reliability suite (truth from pxr XformCache, never from frameview)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from backends import PXR_BACKENDS
from helpers import decompose_all, xform_cache_local, xform_cache_world
from hypothesis import HealthCheck, settings
from pxr import Usd

import frameview as fv

N = 8
ROBOTS = "/World/envs/env_.*/Robot"
CAMERAS = "/World/envs/env_.*/Robot/Camera"

BACKENDS = PXR_BACKENDS
"""The suite's backends: ``usd`` and ``fabric`` from the one registry (tests/backends.py)."""

PROPERTY = settings(
    max_examples=50,
    deadline=None,
    derandomize=True,  # the same examples on every CI run
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
"""Hypothesis settings for the suite: few examples (the CI box has 2 cores), reproducible."""

PROPERTY_FEW = settings(PROPERTY, max_examples=15)
"""For tests that pytest already parametrises (one property per case)."""


def snapshot(view: fv.BaseFrameView) -> dict[str, np.ndarray]:
    """Copies of everything the view reads (its buffers are reused by the next call)."""
    wpos, wquat = view.get_world_poses()
    out = {"world_pos": wpos.numpy().copy(), "world_quat": wquat.numpy().copy()}
    lpos, lquat = view.get_local_poses()
    out |= {"local_pos": lpos.numpy().copy(), "local_quat": lquat.numpy().copy()}
    out["local_scale"] = view.get_local_scales().numpy().copy()
    return out


def assert_unchanged(before: dict[str, np.ndarray], after: dict[str, np.ndarray]) -> None:
    """Bit-identical snapshots: nothing was written."""
    for key, value in before.items():
        np.testing.assert_array_equal(after[key], value, err_msg=f"{key} changed")


def truth_world_positions(stage: Usd.Stage, paths: Sequence[str]) -> np.ndarray:
    """(N, 3) float64 world positions from a fresh UsdGeom.XformCache."""
    return decompose_all(xform_cache_world(stage, paths))[0]


def truth_local(stage: Usd.Stage, paths: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Local (translation, xyzw quaternion, scale) from a fresh UsdGeom.XformCache."""
    return decompose_all(xform_cache_local(stage, paths))

# SPDX-License-Identifier: Apache-2.0
"""perf/bench_newton.py in CI sizes: its Sdf-authored scene is the one it describes, and a small run checks its reset
against float64 truth and falls as semi-implicit Euler says. No timing assertions."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import quat_to_rotation
from newton_helpers import newton_module

BENCH = Path(__file__).resolve().parents[1] / "perf" / "bench_newton.py"


@pytest.fixture(scope="module")
def bench():
    newton_module()
    spec = importlib.util.spec_from_file_location("frameview_perf_bench_newton", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_authored_stage_places_bodies_and_cameras(bench) -> None:
    """Sdf batch authoring gives each env a rigid body with a collider and a camera at the fixed offset: world poses
    from ``UsdGeom.XformCache`` match float64 truth built from the scene's parameters."""
    from pxr import Usd, UsdGeom, UsdPhysics

    envs = 5
    stage, _phases = bench.build_stage(envs)
    assert UsdGeom.GetStageMetersPerUnit(stage) == 1.0
    cache = UsdGeom.XformCache(Usd.TimeCode.Default())
    origins, yaws = bench.env_origins(envs), bench.body_yaws(envs)
    for i in range(envs):
        body = stage.GetPrimAtPath(f"/World/envs/env_{i}/Body")
        assert body.HasAPI(UsdPhysics.RigidBodyAPI) and body.HasAPI(UsdPhysics.MassAPI)
        assert stage.GetPrimAtPath(f"/World/envs/env_{i}/Body/Collider").HasAPI(UsdPhysics.CollisionAPI)
        body_world = np.eye(4)
        body_world[:3, :3] = quat_to_rotation([0.0, 0.0, np.sin(yaws[i] / 2), np.cos(yaws[i] / 2)])
        body_world[3, :3] = origins[i] + [0.0, 0.0, bench.BODY_HEIGHT]
        np.testing.assert_allclose(np.array(cache.GetLocalToWorldTransform(body)), body_world, atol=1e-6)
        camera = stage.GetPrimAtPath(f"/World/envs/env_{i}/Body/Camera")
        want = bench.camera_local() @ body_world
        np.testing.assert_allclose(np.array(cache.GetLocalToWorldTransform(camera)), want, atol=1e-6)


def test_a_small_run_is_correct(bench) -> None:
    """16 envs, 5 reset, 2 XPBD steps: every row is timed, the reset matches float64 truth, and the bodies fell
    ``(1 + 2) g dt^2`` (semi-implicit Euler from rest)."""
    case = bench.run_case("cpu", 16, 5, reps=3, steps=2, budget_s=5.0)
    assert set(case["median_us"]) == {
        "get_world_poses", "reset_read", "reset_read_mask", "camera_read_ros", "reset", "set_world_poses_frames",
    }  # fmt: skip
    assert case["check_max_abs_error"]["position"] < 1e-5
    assert case["check_max_abs_error"]["orientation"] < 1e-5
    assert case["mean_fall_m"] == pytest.approx(3 * 9.81 * bench.DT**2, rel=1e-4)

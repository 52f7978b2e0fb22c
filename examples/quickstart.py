# SPDX-License-Identifier: Apache-2.0
# The README's quickstart, as a file: ./scripts/run examples/quickstart.py
# (tests/test_readme_quickstart.py checks that the two stay the same). Runs on the CPU;
# builds its own small stage, reads and writes camera poses, swaps the backend.
import dataclasses

import numpy as np
import warp as wp
from pxr import Usd, UsdGeom

import frameview as fv

wp.config.log_level = wp.LOG_WARNING  # no Warp banner nor "Module ... took N ms" lines

# A small stage of its own: 16 envs, each /World/envs/env_<i>/Robot/Camera,
# the camera 1.5 m above its robot.
stage = Usd.Stage.CreateInMemory()
for i in range(16):
    robot = UsdGeom.Xform.Define(stage, f"/World/envs/env_{i}/Robot")
    robot.AddTranslateOp().Set((2.0 * i, 0.0, 0.0))
    camera = UsdGeom.Camera.Define(stage, f"/World/envs/env_{i}/Robot/Camera")
    camera.AddTranslateOp().Set((0.0, 0.0, 1.5))

results = {}
for backend in ("fabric", "usd"):  # swapping the backend is one config field
    cfg = fv.FrameViewCfg.from_dict(
        {
            "prim_path": "/World/envs/env_.*/Robot/Camera",
            "backend": backend,
            "device": "cpu",  # "cuda:0" on a GPU
        }
    )
    robots_cfg = dataclasses.replace(cfg, prim_path="/World/envs/env_.*/Robot")
    with (
        fv.make_frame_view(cfg, stage) as cameras,
        fv.make_frame_view(robots_cfg, stage) as robots,
    ):
        pos, quat = cameras.get_world_poses()  # (16,) vec3f, (16,) quatf xyzw, world
        row = pos.numpy()[3]
        print(cameras.backend, cameras.count, row)  # fabric:memory 16 [6. 0. 1.5]

        # reset envs 3 and 7: move their robots, turn them 90 degrees about +Z (xyzw)
        yaw90 = [0.0, 0.0, np.sqrt(0.5), np.sqrt(0.5)]
        robots.set_world_poses(
            positions=np.array([[0.0, 5.0, 0.0], [1.0, 5.0, 0.0]], np.float32),
            orientations=np.array([yaw90, yaw90], np.float32),
            indices=[3, 7],
        )
        pos, quat = cameras.get_world_poses(indices=[3, 7])  # followed their robots
        # copy: the next read reuses these buffers
        results[backend] = (pos.numpy().copy(), quat.numpy().copy())
        moved = results[backend][0].tolist()
        print(backend, moved)  # fabric [[0.0, 5.0, 1.5], [1.0, 5.0, 1.5]], then usd

# same poses from both backends (each wrote its own store: Fabric, then USD)
np.testing.assert_allclose(results["fabric"][0], results["usd"][0], atol=1e-5)
np.testing.assert_allclose(results["fabric"][1], results["usd"][1], atol=1e-5)
print("ok: the fabric and usd backends read the same camera poses")

# SPDX-License-Identifier: Apache-2.0
"""The reset's launches, launched plainly, for Nsight Compute: where a masked reset's GPU time goes.

A masked write of 256 robots of 8192 (``_solve_flat``, ``_commit_flat``; cameras follow) and the masked read of
their cameras (``_mask_poses``), recorded through ``FabricFrameView.launch_trace`` (the benchmarks' seam) and then
launched three times each. Run it under ``ncu``, e.g.::

    ncu --kernel-name regex:"solve_flat|commit_flat|mask_poses" --launch-skip 3 --launch-count 3 \\
        --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \\
        python perf/ncu_reset.py
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import warp as wp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_kernels import reset_inputs, traced_launches
from harness.scenes import PROVIDERS, scene_arrays

import frameview as fv


def main(device: str = "cuda:0", envs: int = 8192, reset: int = 256) -> None:
    scene = PROVIDERS["memory"].build(scene_arrays(envs, 0, seed=1), device)
    robots = fv.FabricFrameView("/World/envs/env_.*/Robot", stage=scene.stage, device=device)
    cams = fv.FabricFrameView("/World/envs/env_.*/Robot/Camera", stage=scene.stage, device=device)
    with robots, cams:
        mask, pos, quat = reset_inputs(envs, reset, device, np.random.default_rng(5))
        write = traced_launches(robots, lambda: robots.set_world_poses(pos, quat, mask=mask))
        read = traced_launches(cams, lambda: cams.get_world_poses(mask=mask))
        for _ in range(3):
            for kernel, dim, params in [*write, *read]:
                wp.launch(kernel, dim=dim, inputs=params, device=device, block_dim=32)
        wp.synchronize_device(device)
        print("launched", [kernel.key for kernel, _dim, _params in [*write, *read]])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda:0", help="Warp device (default cuda:0)")
    parser.add_argument("--envs", type=int, default=8192)
    parser.add_argument("--reset", type=int, default=256, help="envs reset per call (default 256)")
    args = parser.parse_args()
    main(args.device, args.envs, args.reset)

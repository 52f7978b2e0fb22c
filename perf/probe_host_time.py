# SPDX-License-Identifier: Apache-2.0
"""Host time of one reset write per input kind: where the time over the Warp-native call goes.

8192 envs on the embedded Fabric model, a 256-env write of the robots, 200 calls per kind: prints the host time
per call before the closing drain, the drain, and the top cProfile entries (tottime). Kinds: ``warp`` (vec3f / quatf,
int32 Warp ids), ``torch_ids`` (Warp data, torch int64 ids), ``torch`` (torch data and int64 ids), ``numpy``
(NumPy data and ids), ``scope`` (the Warp-native write through ``xform_world_space_writer``).

Usage::

    python perf/probe_host_time.py --device cuda:0
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

import numpy as np
import warp as wp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness.scenes import PROVIDERS, scene_arrays

import frameview as fv


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--envs", type=int, default=8192)
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--cases", nargs="*", default=None, help="only these kinds (default: all)")
    p.add_argument("--sort", default="tottime", help="cProfile sort key (tottime, cumulative)")
    p.add_argument("--top", type=int, default=10, help="cProfile lines per kind")
    args = p.parse_args(argv)
    import torch

    wp.config.log_level = wp.LOG_WARNING  # no start-up banner nor module-load lines
    wp.init()
    dev = args.device
    tdev = "cpu" if dev == "cpu" else str(wp.device_to_torch(dev))
    scene = PROVIDERS["memory"].build(scene_arrays(args.envs, 0, seed=1), dev)
    robots = fv.FabricFrameView("/World/envs/env_.*/Robot", stage=scene.stage, device=dev)
    ids = np.sort(np.random.default_rng(0).choice(args.envs, 256, replace=False))
    t_ids = torch.tensor(ids, device=tdev)
    t_pos = torch.rand(256, 3, device=tdev)
    t_quat = torch.nn.functional.normalize(torch.rand(256, 4, device=tdev), dim=1)
    pos, quat = wp.from_torch(t_pos, dtype=wp.vec3f), wp.from_torch(t_quat, dtype=wp.quatf)
    wids = wp.array(ids.astype(np.int32), dtype=wp.int32, device=dev)
    np_pos, np_quat = t_pos.cpu().numpy(), t_quat.cpu().numpy()

    def scope() -> None:
        with robots.xform_world_space_writer() as w:
            w.set_poses(pos, quat, wids)

    def scope_torch() -> None:
        with robots.xform_world_space_writer() as w:
            w.set_poses(t_pos, t_quat, t_ids)

    state = torch.zeros((256, 13), device=tdev)
    state[:, :3], state[:, 3:7] = t_pos, t_quat
    cases = {
        "warp": lambda: robots.set_world_poses(pos, quat, wids),
        "torch_ids": lambda: robots.set_world_poses(pos, quat, t_ids),
        "torch": lambda: robots.set_world_poses(t_pos, t_quat, t_ids),
        "slices": lambda: robots.set_world_poses(state[:, :3], state[:, 3:7], t_ids),
        "numpy": lambda: robots.set_world_poses(np_pos, np_quat, ids),
        "scope": scope,
        "scope_torch": scope_torch,
    }
    cases = {name: call for name, call in cases.items() if not args.cases or name in args.cases}
    try:
        for name, call in cases.items():
            for _ in range(20):
                call()
            wp.synchronize_device(dev)
            t0 = time.perf_counter()
            for _ in range(args.calls):
                call()
            t1 = time.perf_counter()
            wp.synchronize_device(dev)
            t2 = time.perf_counter()
            print(f"== {name}: host {1e6 * (t1 - t0) / args.calls:.1f} us/call, then drain {1e6 * (t2 - t1):.0f} us")
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(args.calls):
                call()
            wp.synchronize_device(dev)
            prof.disable()
            out = io.StringIO()
            pstats.Stats(prof, stream=out).sort_stats(args.sort).print_stats(args.top)
            print("\n".join(out.getvalue().splitlines()[6 : 8 + args.top]))
    finally:
        robots.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

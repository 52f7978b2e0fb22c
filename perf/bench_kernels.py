# SPDX-License-Identifier: Apache-2.0
"""GPU time of each launch on the reset path, apart from the host: where a captured reset's time goes.

The launches are those the views make (``FabricFrameView.launch_trace``, a seam for benchmarks, records them while
public calls drive the views): a masked write of the robots (``_solve_flat``, ``_commit_flat``: 256 of the envs,
cameras follow), the masked read of the cameras (``_mask_poses``, row ``scatter_masked``) and the full read
(``_scatter_poses``). Each is captured ``--chain`` times back to back in one CUDA graph and timed between two
CUDA events; a row is the median over ``--reps`` replays, divided by the chain length. An empty kernel over the
same rows gives the floor a launch costs in a graph. ``reset_masked_captured`` chains the same three launches as
made inside the caller's own capture, which compare the stage's layout epoch first (``frameview.fabric.epoch``).
``reset_graph`` replays the captured write + read as ``bench_reset.py`` does (host, launch and synchronisation
included), ``graph_floor`` a graph of one empty kernel the same way.

Usage::

    python perf/bench_kernels.py --device cuda:0                      # perf/out/kernels_cuda0.json
    python perf/bench_kernels.py --device cuda:0 --save-as h200       # perf/results/kernels_h200.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import warp as wp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness.scenes import PROVIDERS, scene_arrays

import frameview as fv

ROOT = Path(__file__).resolve().parent


@wp.kernel(enable_backward=False)
def _empty(n: int):
    pass


def reset_inputs(envs: int, reset: int, device: str, rng: np.random.Generator) -> tuple[wp.array, wp.array, wp.array]:
    """A reset's device inputs: a boolean (envs,) mask of ``reset`` random envs, (envs,) positions and unit xyzw
    quaternions."""
    mask_host = np.zeros(envs, dtype=bool)
    mask_host[rng.choice(envs, size=reset, replace=False)] = True
    mask = wp.array(mask_host, dtype=wp.bool, device=device)
    quat = rng.normal(size=(envs, 4))
    quat /= np.linalg.norm(quat, axis=1, keepdims=True)
    pos = wp.array(rng.uniform(-1, 1, (envs, 3)).astype(np.float32), dtype=wp.vec3f, device=device)
    return mask, pos, wp.array(quat.astype(np.float32), dtype=wp.quatf, device=device)


def traced_launches(view: Any, call: Any) -> list[tuple]:
    """The (kernel, dim, params) of the launches ``call`` makes through ``view`` (traced on a second, warm call)."""
    call()
    view.check()
    with view.launch_trace() as launches:
        call()
    view.check()
    return launches


class _Timer:
    def __init__(self, device: str, reps: int) -> None:
        self.device, self.reps = device, reps
        self.start = wp.Event(device, enable_timing=True)
        self.end = wp.Event(device, enable_timing=True)

    def chain_us(self, launches: list[tuple], chain: int) -> float:
        """Median GPU time per pass of ``launches`` captured ``chain`` times in one graph."""
        stream = wp.Stream(self.device)
        with wp.ScopedCapture(device=self.device, stream=stream, force_module_load=False) as capture:
            for _ in range(chain):
                for kernel, dim, params in launches:
                    wp.launch(kernel, dim=dim, inputs=params, device=self.device, block_dim=32, stream=stream)
        wp.capture_launch(capture.graph)
        wp.synchronize_device(self.device)
        times = []
        for _ in range(self.reps):
            wp.record_event(self.start)
            wp.capture_launch(capture.graph)
            wp.record_event(self.end)
            wp.synchronize_device(self.device)
            times.append(wp.get_event_elapsed_time(self.start, self.end) * 1e3 / chain)
        return statistics.median(times)

    def wall_us(self, graph: Any) -> float:
        """Median wall time of a graph replay and the synchronisation after it (what bench_reset times)."""
        for _ in range(20):
            wp.capture_launch(graph)
        wp.synchronize_device(self.device)
        times = []
        for _ in range(self.reps):
            t0 = time.perf_counter()
            wp.capture_launch(graph)
            wp.synchronize_device(self.device)
            times.append(time.perf_counter() - t0)
        return statistics.median(times) * 1e6


def run(device: str, envs: int, filler: int, reset: int, reps: int, chain: int) -> dict[str, Any]:
    scene = PROVIDERS["memory"].build(scene_arrays(envs, filler, seed=1), device)
    rng = np.random.default_rng(5)
    robots = fv.FabricFrameView("/World/envs/env_.*/Robot", stage=scene.stage, device=device)
    cams = fv.FabricFrameView("/World/envs/env_.*/Robot/Camera", stage=scene.stage, device=device)
    timer = _Timer(device, reps)
    rows: dict[str, float] = {}
    try:
        mask, pos, quat = reset_inputs(envs, reset, device, rng)
        write = traced_launches(robots, lambda: robots.set_world_poses(pos, quat, mask=mask))
        masked_read = traced_launches(cams, lambda: cams.get_world_poses(mask=mask))
        names = [kernel.key for kernel, _dim, _params in write]
        if names != ["_solve_flat", "_commit_flat"] or len(masked_read) != 1:
            raise RuntimeError(f"unexpected launches: write {names}, masked read {len(masked_read)}")
        solve, commit = write
        scatter = masked_read[0]
        full_read = traced_launches(cams, cams.get_world_poses)
        if len(full_read) != 1:
            raise RuntimeError(f"unexpected launches of the full read: {len(full_read)}")
        full = full_read[0]
        rows["empty"] = timer.chain_us([(_empty, envs, [0])], chain)
        rows["empty_2d"] = timer.chain_us([(_empty, commit[1], [0])], chain)
        rows["solve_flat_masked"] = timer.chain_us([solve], chain)
        rows["commit_flat_masked"] = timer.chain_us([commit], chain)
        rows["scatter_masked"] = timer.chain_us([scatter], chain)
        rows["scatter_full"] = timer.chain_us([full], chain)
        rows["write_masked"] = timer.chain_us([solve, commit], chain)
        rows["reset_masked"] = timer.chain_us([solve, commit, scatter], chain)
        with wp.ScopedCapture(device=device, force_module_load=False):  # as launched inside the caller's capture
            with robots.launch_trace() as captured_write:
                robots.set_world_poses(pos, quat, mask=mask)
            with cams.launch_trace() as captured_read:
                cams.get_world_poses(mask=mask)
        rows["reset_masked_captured"] = timer.chain_us([*captured_write, *captured_read], chain)
        robots.set_world_poses(pos, quat, mask=mask)
        cams.get_world_poses(mask=mask)
        with wp.ScopedCapture(device=device, force_module_load=False) as capture:
            robots.set_world_poses(pos, quat, mask=mask)
            cams.get_world_poses(mask=mask)
        rows["reset_graph"] = timer.wall_us(capture.graph)
        with wp.ScopedCapture(device=device, force_module_load=False) as floor:
            wp.launch(_empty, dim=1, inputs=[0], device=device)
        rows["graph_floor"] = timer.wall_us(floor.graph)
        robots.check()
        cams.check()
    finally:
        cams.close()
        robots.close()
    return {"device": device, "envs": envs, "filler": filler, "reset_envs": reset, "chain": chain,
            "median_us": rows}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--envs", type=int, default=8192)
    p.add_argument("--filler", type=int, default=0)
    p.add_argument("--reset", type=int, default=256, help="envs in the mask (default 256)")
    p.add_argument("--reps", type=int, default=60)
    p.add_argument("--chain", type=int, default=20, help="launches of a kernel per graph (default 20)")
    p.add_argument("--save-as", default=None, help="write perf/results/kernels_NAME.json (committed results)")
    args = p.parse_args(argv)
    wp.config.log_level = wp.LOG_WARNING  # no start-up banner nor module-load lines
    wp.init()
    if not wp.get_device(args.device).is_cuda:
        print("bench_kernels times CUDA graphs: pass a CUDA device (--device cuda:0)")
        return 2
    result = run(args.device, args.envs, args.filler, args.reset, args.reps, args.chain)
    for name, value in result["median_us"].items():
        print(f"{name:22s} {value:8.2f} us")
    out_dir = ROOT / "results" if args.save_as else ROOT / "out"
    out_dir.mkdir(parents=True, exist_ok=True)
    name = f"kernels_{args.save_as}.json" if args.save_as else f"kernels_{args.device.replace(':', '')}.json"
    result = {"command": " ".join(["python", "perf/bench_kernels.py", *(argv or sys.argv[1:])]),
              "warp": wp.__version__, **result}  # fmt: skip
    (out_dir / name).write_text(json.dumps(result, indent=1))
    print(f"wrote {out_dir / name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

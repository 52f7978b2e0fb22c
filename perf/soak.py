# SPDX-License-Identifier: Apache-2.0
"""Scale and soak: the embedded Fabric model's memory per prim at ~1.1M prims, and a reset loop that must not grow.

Builds the scaling harness's layout (``/World/envs/env_i`` grid translation, ``.../Robot`` random rotation and uniform
scale, ``.../Robot/Camera`` random rotation, ``env_i/f_j`` filler Xforms up to ``--prims`` prims) straight from arrays
with ``MemoryFabricStage.from_arrays``, then:

1. **Memory**: RSS before and after the build (the input arrays freed), the model's column bytes (capacity
   included) and its host bookkeeping (path strings, path -> id dict, NumPy tables), per prim; peak RSS
   (``ru_maxrss``) of the whole run.
2. **Soak**: a robots view and a cameras view (FabricFrameView); ``--resets`` times: pick a random subset of envs
   (1 to envs/4; the same 100 subsets and poses repeat in every block of 100 resets, so that the first and the
   last 100 resets do the same work), write the robots' world poses there (indexed), read every camera (full
   read), read the subset's cameras (indexed) and check them against float64 NumPy truth (camera local @ robot
   world). Per reset: CPU and wall time (Warp synchronised before each clock read), RSS every ``--sample`` resets.
   Verdict: median time of the last 100 resets over the first 100 (after 20 warm-up resets, excluded), the
   least-squares slope of time per reset, both for process CPU time (steady on a shared machine) and wall time,
   and RSS growth from the end of the first 100 resets to the end.

Usage::

    python perf/soak.py                       # 8192 envs, 1.1M prims, 1000 resets (~12 s) -> perf/out/soak_cpu.json
    python perf/soak.py --quick               # 1024 envs, 100k prims, 200 resets (~2 s)
    python perf/soak.py --envs 4096 --prims 500000 --resets 300 --out /tmp/soak.json
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import resource
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import warp as wp

ROBOTS = "/World/envs/env_.*/Robot"
CAMERAS = "/World/envs/env_.*/Robot/Camera"
WARMUP = 20
WINDOW = 100


def rss_mib() -> float:
    """Resident set size now, MiB (/proc/self/statm)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_rss_mib() -> float:
    """Peak resident set size of the process so far, MiB (ru_maxrss is KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def host_bytes(model: Any) -> dict[str, int]:
    """Bytes the model holds on the host besides its columns: path strings and list, path -> id dict, NumPy tables
    (``MemoryFabricStage.host_nbytes``)."""
    return model.host_nbytes()


def _rows_to_quat(rot: np.ndarray) -> np.ndarray:
    """(n, 3, 3) row-vector rotations -> (n, 4) xyzw (w >= 0)."""
    m = np.transpose(rot, (0, 2, 1))  # column-vector form
    w = np.sqrt(np.maximum(0.0, 1.0 + m[:, 0, 0] + m[:, 1, 1] + m[:, 2, 2])) / 2
    x = np.copysign(np.sqrt(np.maximum(0.0, 1.0 + m[:, 0, 0] - m[:, 1, 1] - m[:, 2, 2])) / 2, m[:, 2, 1] - m[:, 1, 2])
    y = np.copysign(np.sqrt(np.maximum(0.0, 1.0 - m[:, 0, 0] + m[:, 1, 1] - m[:, 2, 2])) / 2, m[:, 0, 2] - m[:, 2, 0])
    z = np.copysign(np.sqrt(np.maximum(0.0, 1.0 - m[:, 0, 0] - m[:, 1, 1] + m[:, 2, 2])) / 2, m[:, 1, 0] - m[:, 0, 1])
    return np.stack([x, y, z, w], axis=1)


def _quat_to_rows(q: np.ndarray) -> np.ndarray:
    """(n, 4) xyzw -> (n, 3, 3) row-vector rotations (rows are the rotated axes)."""
    x, y, z, w = q.T
    r = np.empty((q.shape[0], 3, 3))
    r[:, 0] = np.stack([1 - 2 * (y * y + z * z), 2 * (x * y + z * w), 2 * (x * z - y * w)], axis=1)
    r[:, 1] = np.stack([2 * (x * y - z * w), 1 - 2 * (x * x + z * z), 2 * (y * z + x * w)], axis=1)
    r[:, 2] = np.stack([2 * (x * z + y * w), 2 * (y * z - x * w), 1 - 2 * (x * x + y * y)], axis=1)
    return r


@dataclass
class Scene:
    """The scene as flat arrays, parents before children."""

    paths: list[str]
    parents: np.ndarray  # (N,) int64, -1 for the root
    local: np.ndarray  # (N, 4, 4) float64 row-vector
    type_names: list[str]
    env_rows: np.ndarray
    robot_rows: np.ndarray
    camera_rows: np.ndarray


def build_scene(envs: int, filler: int, seed: int) -> Scene:
    """``/World``, ``/World/envs``, then per env: ``env_i``, ``env_i/Robot``, ``env_i/Robot/Camera`` and its share of
    the ``filler`` Xforms ``env_i/f_j``. Vectorised except for the path strings."""
    rng = np.random.default_rng(seed)
    per_env, extra = divmod(filler, envs)
    fill = np.full(envs, per_env, dtype=np.int64)
    fill[:extra] += 1
    starts = 2 + np.concatenate([[0], np.cumsum(3 + fill)[:-1]]).astype(np.int64)
    n = int(2 + (3 + fill).sum())
    paths = ["/World", "/World/envs"]
    for i in range(envs):
        env = f"/World/envs/env_{i}"
        paths += [env, env + "/Robot", env + "/Robot/Camera", *(f"{env}/f_{j}" for j in range(int(fill[i])))]
    parents = np.empty(n, dtype=np.int64)
    parents[:2] = [-1, 0]
    parents[starts], parents[starts + 1], parents[starts + 2] = 1, starts, starts + 1
    filler_rows = np.setdiff1d(np.arange(2, n), np.concatenate([starts, starts + 1, starts + 2]))
    parents[filler_rows] = np.repeat(starts, fill)
    local = np.tile(np.eye(4), (n, 1, 1))
    side = int(np.ceil(np.sqrt(envs)))
    local[starts, 3, 0], local[starts, 3, 1] = 2.5 * (np.arange(envs) % side), 2.5 * (np.arange(envs) // side)
    q = rng.normal(size=(2 * envs, 4))
    rot = _quat_to_rows(q / np.linalg.norm(q, axis=1, keepdims=True))
    local[starts + 1, :3, :3] = rng.uniform(0.5, 2.0, size=(envs, 1, 1)) * rot[:envs]
    local[starts + 1, 3, :3] = rng.uniform(-0.5, 0.5, size=(envs, 3))
    local[starts + 2, :3, :3] = rot[envs:]
    local[starts + 2, 3, :3] = rng.uniform(-0.2, 0.2, size=(envs, 3))
    local[filler_rows, 3, :3] = rng.uniform(-1.0, 1.0, size=(filler_rows.size, 3))
    types = ["Xform"] * n
    for r in (starts + 2).tolist():
        types[r] = "Camera"
    return Scene(paths, parents, local, types, starts, starts + 1, starts + 2)


def run(envs: int, prims: int, resets: int, device: str = "cpu", seed: int = 0, sample: int = 50) -> dict:
    """Build the scene, measure its memory, run the reset loop; returns the results (see the module docstring)."""
    from frameview.fabric.providers.memory import MemoryFabricStage
    from frameview.fabric.view import FabricFrameView

    filler = max(0, prims - 2 - 3 * envs)
    gc.collect()
    rss_start = rss_mib()
    t0 = time.perf_counter()
    arrays = build_scene(envs, filler, seed)
    t1 = time.perf_counter()
    model = MemoryFabricStage.from_arrays(
        arrays.paths, arrays.parents, arrays.local, type_names=arrays.type_names, device=device
    )
    wp.synchronize_device(device)
    t2 = time.perf_counter()
    n = model.prim_count
    # truth inputs kept small: env world (translation only), robot local scale, camera local
    env_world = arrays.local[arrays.env_rows].copy()
    robot_scale = np.linalg.norm(arrays.local[arrays.robot_rows, :3, :3], axis=2)
    cam_local = arrays.local[arrays.camera_rows].copy()
    del arrays
    gc.collect()
    rss_model = rss_mib()
    columns = model.nbytes()
    host = host_bytes(model)
    memory = {
        "prims": n,
        "build_arrays_s": t1 - t0,
        "build_model_s": t2 - t1,
        "rss_before_mib": rss_start,
        "rss_after_build_mib": rss_model,
        "rss_per_prim_bytes": (rss_model - rss_start) * 2**20 / n,
        "columns_bytes": columns,
        "columns_per_prim_bytes": columns / n,
        "host_bytes": host,
        "host_per_prim_bytes": sum(host.values()) / n,
    }

    robots = FabricFrameView(ROBOTS, stage=model, device=device)
    cameras = FabricFrameView(CAMERAS, stage=model, device=device)
    t3 = time.perf_counter()
    cameras.get_world_poses()
    wp.synchronize_device(device)
    memory["first_access_s"] = time.perf_counter() - t3
    memory["rss_with_views_mib"] = rss_mib()

    times: list[float] = []
    cpu_times: list[float] = []  # process CPU time: steadier than wall time on a shared machine
    rss_samples: list[tuple[int, float]] = []
    max_err = 0.0
    for k in range(WARMUP + resets):
        rng = np.random.default_rng((seed, k % WINDOW))  # every block of 100 resets does the same work
        ids = np.sort(rng.choice(envs, size=int(rng.integers(1, max(2, envs // 4) + 1)), replace=False))
        pos = rng.uniform(-1.0, 1.0, size=(ids.size, 3)) + env_world[ids, 3, :3]
        quat = rng.normal(size=(ids.size, 4))
        quat /= np.linalg.norm(quat, axis=1, keepdims=True)
        wp.synchronize_device(device)
        t, c = time.perf_counter(), time.process_time()
        robots.set_world_poses(pos, quat, ids)
        cameras.get_world_poses()  # full read first: the indexed read below reuses (overwrites) the same buffers
        cam_pos, cam_quat = cameras.get_world_poses(ids)
        wp.synchronize_device(device)
        elapsed, cpu = time.perf_counter() - t, time.process_time() - c
        # truth: robot world = S(local scale) R(q) T(p) (the env parent is a translation); camera = local @ robot
        robot_world = np.zeros((ids.size, 4, 4))
        robot_world[:, :3, :3] = robot_scale[ids][:, :, None] * _quat_to_rows(quat)
        robot_world[:, 3, :3] = pos
        robot_world[:, 3, 3] = 1.0
        cam_world = cam_local[ids] @ robot_world
        scale = np.linalg.norm(cam_world[:, :3, :3], axis=2)
        err_pos = np.abs(cam_pos.numpy() - cam_world[:, 3, :3]).max()
        want_q = _rows_to_quat(cam_world[:, :3, :3] / scale[:, :, None])
        got_q = cam_quat.numpy()
        err_q = np.minimum(np.abs(got_q - want_q).max(axis=1), np.abs(got_q + want_q).max(axis=1)).max()
        max_err = max(max_err, float(err_pos), float(err_q))
        if max_err > 1e-3:
            raise AssertionError(f"reset {k}: camera poses differ from float64 truth by {max_err:.3g}")
        if k >= WARMUP:
            times.append(elapsed)
            cpu_times.append(cpu)
            if (k - WARMUP + 1) % sample == 0:
                rss_samples.append((k - WARMUP + 1, rss_mib()))
    robots.close()
    cameras.close()

    t_ms, c_ms = np.array(times) * 1e3, np.array(cpu_times) * 1e3

    def trend(x: np.ndarray) -> dict:
        first, last = x[:WINDOW], x[-WINDOW:]
        return {
            "median": float(np.median(x)),
            "min": float(x.min()),
            "max": float(x.max()),
            "first100_median": float(np.median(first)),
            "last100_median": float(np.median(last)),
            "growth_pct": float((np.median(last) / np.median(first) - 1) * 100),
            "slope_per_1000_resets": float(np.polyfit(np.arange(x.size), x, 1)[0]) * 1000 if x.size > 1 else 0.0,
            "per_50_resets_median": [float(np.median(x[i : i + 50])) for i in range(0, x.size, 50)],
        }

    base = next((r for i, r in rss_samples if i >= WINDOW), rss_samples[0][1] if rss_samples else rss_mib())
    soak = {
        "resets": resets,
        "warmup_resets": WARMUP,
        "subset_envs": [1, max(2, envs // 4)],
        "wall_ms": trend(t_ms),
        "cpu_ms": trend(c_ms),
        "rss_samples_mib": rss_samples,
        "rss_growth_mib": float(rss_samples[-1][1] - base) if rss_samples else 0.0,
        "max_pose_error": max_err,
    }
    return {"memory": memory, "soak": soak, "peak_rss_mib": peak_rss_mib()}


def _trend_rows(kind: str, t: dict, resets: int) -> list[tuple[str, str]]:
    return [
        (f"reset {kind} time (write subset + 2 reads), {resets} resets",
         f"median {t['median']:.2f} ms (min {t['min']:.2f}, max {t['max']:.2f})"),
        (f"reset {kind} time, first 100 / last 100 (median)",
         f"{t['first100_median']:.2f} / {t['last100_median']:.2f} ms ({t['growth_pct']:+.1f} %), "
         f"slope {t['slope_per_1000_resets']:+.2f} ms per 1000 resets"),
    ]  # fmt: skip


def summary(result: dict) -> str:
    """A Markdown table of the headline numbers."""
    m, s = result["memory"], result["soak"]
    c = result["config"]
    rows = [
        ("scene", f"{c['envs']} envs, {m['prims']:,} prims, {c['device']}"),
        ("model build (from arrays)", f"{m['build_model_s']:.1f} s"),
        ("Fabric columns per prim (capacity incl.)", f"{m['columns_per_prim_bytes']:.0f} B"),
        ("host bookkeeping per prim", f"{m['host_per_prim_bytes']:.0f} B"),
        ("RSS growth per prim (model built)", f"{m['rss_per_prim_bytes']:.0f} B"),
        ("RSS after build / peak RSS", f"{m['rss_after_build_mib']:.0f} MiB / {result['peak_rss_mib']:.0f} MiB"),
        *(row for kind in ("cpu", "wall") for row in _trend_rows(kind, s[f"{kind}_ms"], s["resets"])),
        ("RSS growth after the first 100 resets", f"{s['rss_growth_mib']:+.1f} MiB"),
        ("max pose error vs float64 truth", f"{s['max_pose_error']:.2e}"),
    ]  # fmt: skip
    return "\n".join(["| metric | value |", "| --- | --- |", *(f"| {a} | {b} |" for a, b in rows)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", type=int, default=8192)
    parser.add_argument("--prims", type=int, default=1_100_000, help="total prims (filler fills up to this)")
    parser.add_argument("--resets", type=int, default=1000)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sample", type=int, default=50, help="RSS sample period, in resets")
    parser.add_argument("--quick", action="store_true", help="1024 envs, 100k prims, 200 resets")
    parser.add_argument(
        "--out", type=Path, default=None, help="JSON output (default perf/out/soak_<dev>.json, git-ignored)"
    )
    parser.add_argument(
        "--save-as",
        default=None,
        metavar="NAME",
        help="write perf/results/soak_NAME.json (committed results) instead of --out",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.envs, args.prims, args.resets = 1024, 100_000, 200
    wp.config.log_level = wp.LOG_WARNING  # no start-up banner nor module-load lines
    wp.init()
    started = time.time()
    load = os.getloadavg()[0]
    result = run(args.envs, args.prims, args.resets, args.device, args.seed, args.sample)
    import frameview

    result["config"] = {
        "envs": args.envs,
        "prims_requested": args.prims,
        "resets": args.resets,
        "device": args.device,
        "seed": args.seed,
        "quick": args.quick,
        "command": " ".join(["python perf/soak.py", *(argv if argv is not None else sys.argv[1:])]),
    }
    result["machine"] = {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "loadavg_1min_start_end": [load, os.getloadavg()[0]],
        "warp": wp.config.version,
        "frameview": getattr(frameview, "__version__", "?"),
        "wall_s": time.time() - started,
    }
    if args.save_as is not None:
        args.out = Path(__file__).resolve().parent / "results" / f"soak_{args.save_as}.json"
    out = args.out or Path(__file__).resolve().parent / "out" / f"soak_{args.device.split(':')[0]}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(summary(result))
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

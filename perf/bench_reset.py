# SPDX-License-Identifier: Apache-2.0
"""The reset path, measured as users run it: write the robots of the reset envs (their cameras follow), then read
those cameras.

Scene (perf/harness/scenes.py): ``envs`` envs, each ``env_i/Robot/Camera`` plus filler prims, in the embedded Fabric
model (or ovstage). Two views through the public API only: ``robots`` (``/World/envs/env_.*/Robot``, whose cameras are
children) and ``cameras`` (``/World/envs/env_.*/Robot/Camera``). Every time is a median over repetitions, each
ending in ``wp.synchronize_device`` (so it includes the GPU work), after warm-up calls. Rows:

- ``get_world_poses``: all cameras (the full read, for reference);
- ``reset_read`` / ``reset_read_mask``: the cameras of ``reset`` envs, int32 device indices / a boolean device mask;
- ``camera_read_ros`` / ``camera_read_ros_mask``: ``CameraPoses.read(indices, "ros")`` for those envs / with the mask;
- ``reset_write`` / ``reset_write_mask``: ``robots.set_world_poses`` of those envs (device data, cameras follow);
- ``set_world_poses_parents``: every robot (cameras follow); ``set_world_poses_leaf``: every camera (no children);
- ``reset``: ``reset_write`` then ``reset_read`` (one reset, end to end);
- ``reset_graph`` (CUDA): the masked write + read captured once in a CUDA graph, replayed with fresh data;
- the inputs users pass, beside those Warp-native rows: ``reset_write_f32_2d`` (float32 (M, 3) / (M, 4) Warp
  arrays), ``reset_write_numpy`` (NumPy data and int64 ids), ``writer_scope`` (the write through
  ``xform_world_space_writer``) and, with torch: ``reset_write_torch_ids`` (Warp data, torch int64 ids),
  ``reset_write_torch`` (torch data and int64 ids), ``reset_write_torch_slices`` (``state[:, :3]``,
  ``state[:, 3:7]`` of an (M, 13) tensor), ``reset_write_mask_torch`` (torch data, bool mask), ``reset_read_torch``,
  ``reset_read_mask_torch``, ``get_world_poses_torch`` (outputs through ``fv.as_torch``), ``writer_scope_torch``.

Each input row is timed in turns with the Warp-native call it stands for (``reset_write``, ``reset_write_mask``,
``reset_read``, ``reset_read_mask`` or ``get_world_poses``), in blocks of 25 calls, and ``paired_ratio`` holds the
ratio of the two medians of that pair (printed after the row): a host whose speed drifts during the run moves both
alike.

Before timing, one reset is checked against float64 truth (camera world = camera local @ new robot world).
Results go to perf/out/ (git-ignored) unless ``--save-as NAME`` writes perf/results/reset_NAME.json.

Usage::

    python perf/bench_reset.py                                  # CPU: 1024 and 8192 envs, 0 and 100k filler
    python perf/bench_reset.py --device cuda:0 --filler 0 1000000 --save-as h200
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
TARGETS_US = {  # H200 targets of the reset-path issue (8192 envs)
    "reset_write": 30.0,
    "set_world_poses_parents": 40.0,
    "reset_read": 20.0,
    "reset_read_mask": 20.0,
    "camera_read_ros": 25.0,
    "reset_graph": 20.0,
    "get_world_poses": 15.0,
}


def _median_us(fn: Any, device: str, reps: int, warmup: int = 3) -> float:
    for _ in range(warmup):
        fn()
    wp.synchronize_device(device)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        wp.synchronize_device(device)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def _paired_us(base: Any, fn: Any, device: str, reps: int, block: int = 25) -> tuple[float, float]:
    """Medians (us) of ``base`` and ``fn``, each timed ``reps`` times in blocks of ``block`` calls taking turns (base,
    fn, fn, base, ...): a host whose speed drifts during the run moves both alike, and within a block each call
    finds its own launches and caches as a loop of that call does (calls alternating one by one would re-pack each
    other's arguments)."""
    times: tuple[list[float], list[float]] = ([], [])
    for k in range(max(1, reps // block)):
        for which in (0, 1) if k % 2 == 0 else (1, 0):
            call = (base, fn)[which]
            call(), call()  # warm-up of the block: the other call ran last
            wp.synchronize_device(device)
            for _ in range(block):
                t0 = time.perf_counter()
                call()
                wp.synchronize_device(device)
                times[which].append(time.perf_counter() - t0)
    return statistics.median(times[0]) * 1e6, statistics.median(times[1]) * 1e6


def _quat_rows(rng: np.random.Generator, n: int) -> np.ndarray:
    q = rng.normal(size=(n, 4))
    return (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32)


def _check_reset(robots: Any, cams: Any, ids: np.ndarray, pos: np.ndarray, quat: np.ndarray) -> float:
    """Largest error of the reset envs' camera positions against float64 truth (local @ new robot world)."""
    robots.set_world_poses(pos, quat, ids)
    robot_scale = robots.get_world_scales(ids).numpy().astype(np.float64)
    cam_local_pos, cam_local_quat = (a.numpy().astype(np.float64) for a in cams.get_local_poses(ids))
    cam_pos = cams.get_world_poses(ids)[0].numpy().astype(np.float64)
    err = 0.0
    for k in range(ids.size):
        x, y, z, w = quat[k].astype(np.float64)
        rot = np.array(
            [  # row-vector rotation: rows are the rotated axes
                [1 - 2 * (y * y + z * z), 2 * (x * y + z * w), 2 * (x * z - y * w)],
                [2 * (x * y - z * w), 1 - 2 * (x * x + z * z), 2 * (y * z + x * w)],
                [2 * (x * z + y * w), 2 * (y * z - x * w), 1 - 2 * (x * x + y * y)],
            ]
        )
        truth = cam_local_pos[k] @ (robot_scale[k][:, None] * rot) + pos[k]
        err = max(err, float(np.abs(truth - cam_pos[k]).max()))
    _ = cam_local_quat
    return err


def run_case(
    provider: str, device: str, envs: int, filler: int, reset: int, reps: int, profile: bool = False
) -> dict[str, Any]:
    scene = PROVIDERS[provider].build(scene_arrays(envs, filler, seed=1), device)
    rng = np.random.default_rng(5)
    rows: dict[str, float] = {}
    robots = fv.FabricFrameView("/World/envs/env_.*/Robot", stage=scene.stage, device=device)
    cams = fv.FabricFrameView("/World/envs/env_.*/Robot/Camera", stage=scene.stage, device=device)
    try:
        ids_host = np.sort(rng.choice(envs, size=reset, replace=False)).astype(np.int32)
        ids = wp.array(ids_host, dtype=wp.int32, device=device)
        mask_host = np.zeros(envs, dtype=bool)
        mask_host[ids_host] = True
        mask = wp.array(mask_host, dtype=wp.bool, device=device)
        pos_host = rng.uniform(-1, 1, (reset, 3)).astype(np.float32)
        quat_host = _quat_rows(rng, reset)
        max_err = _check_reset(robots, cams, ids_host, pos_host, quat_host)
        pos = wp.array(pos_host, dtype=wp.vec3f, device=device)
        quat = wp.array(quat_host, dtype=wp.quatf, device=device)
        full_pos = wp.array(rng.uniform(-1, 1, (envs, 3)).astype(np.float32), dtype=wp.vec3f, device=device)
        full_quat = wp.array(_quat_rows(rng, envs), dtype=wp.quatf, device=device)
        camera_poses = fv.CameraPoses(cams)

        def reset_once() -> None:
            robots.set_world_poses(pos, quat, ids)
            cams.get_world_poses(ids)

        bases = {"get_world_poses": cams.get_world_poses,  # the Warp-native calls the input rows are timed against
                 "reset_read": lambda: cams.get_world_poses(ids),
                 "reset_read_mask": lambda: cams.get_world_poses(mask=mask),
                 "reset_write": lambda: robots.set_world_poses(pos, quat, ids),
                 "reset_write_mask": lambda: robots.set_world_poses(full_pos, full_quat, mask=mask)}  # fmt: skip
        for name in ("get_world_poses", "reset_read", "reset_read_mask"):
            rows[name] = _median_us(bases[name], device, reps)
        rows["camera_read_ros"] = _median_us(lambda: camera_poses.read(ids, "ros"), device, reps)
        rows["camera_read_ros_mask"] = _median_us(lambda: camera_poses.read(convention="ros", mask=mask), device, reps)
        for name in ("reset_write", "reset_write_mask"):
            rows[name] = _median_us(bases[name], device, reps)
        rows["set_world_poses_parents"] = _median_us(lambda: robots.set_world_poses(full_pos, full_quat), device, reps)
        rows["set_world_poses_leaf"] = _median_us(lambda: cams.set_world_poses(full_pos, full_quat), device, reps)
        rows["reset"] = _median_us(reset_once, device, reps)
        input_rows, ratios = _input_rows(robots, cams, ids_host, pos_host, quat_host, mask_host, device, reps, bases)
        rows.update(input_rows)
        if profile:
            import cProfile
            import pstats

            prof = cProfile.Profile()
            prof.enable()
            for _ in range(reps):
                reset_once()
            wp.synchronize_device(device)
            prof.disable()
            print(f"--- host profile of {reps} resets (envs={envs}, filler={filler})")
            pstats.Stats(prof).sort_stats("tottime").print_stats(18)
        if wp.get_device(device).is_cuda:
            rows["reset_graph"] = _graph_replay_us(robots, cams, full_pos, full_quat, mask, device, reps)
        robots.check()
        cams.check()
    finally:
        cams.close()
        robots.close()
    return {"provider": provider, "device": device, "envs": envs, "filler": filler, "reset_envs": reset,
            "prims": scene.prim_count, "check_max_abs_error": max_err, "median_us": rows,
            "paired_ratio": ratios}  # fmt: skip


def _input_rows(robots: Any, cams: Any, ids_host: np.ndarray, pos_host: np.ndarray, quat_host: np.ndarray,
                mask_host: np.ndarray, device: str, reps: int,
                bases: dict[str, Any]) -> tuple[dict[str, float], dict[str, float]]:  # fmt: skip
    """The reset's calls with the inputs users pass, beside the Warp-native rows: float32 (M, 3) / (M, 4) Warp
    arrays, NumPy host data and ids, and (when torch is installed) torch data, int64 ids, bool masks, column slices
    of an (M, 13) root-state tensor, outputs as torch tensors, a writer scope. Each is timed in turns with the
    Warp-native call it stands for (``bases``: row name -> call, :func:`_paired_us`); returns the medians and the
    ratio of each pair's medians."""
    n = mask_host.size
    ids = wp.array(ids_host, dtype=wp.int32, device=device)
    pos, quat = wp.array(pos_host, dtype=wp.vec3f, device=device), wp.array(quat_host, dtype=wp.quatf, device=device)
    pos2d, quat2d = (wp.array(a, dtype=wp.float32, device=device) for a in (pos_host, quat_host))
    ids64_host = ids_host.astype(np.int64)

    def scope(p: Any, q: Any, i: Any) -> None:
        with robots.xform_world_space_writer() as w:
            w.set_poses(p, q, i)

    calls: list[tuple[str, str, Any]] = [  # (row, the Warp-native row it is timed against, call)
        ("reset_write_f32_2d", "reset_write", lambda: robots.set_world_poses(pos2d, quat2d, ids)),
        ("reset_write_numpy", "reset_write", lambda: robots.set_world_poses(pos_host, quat_host, ids64_host)),
        ("writer_scope", "reset_write", lambda: scope(pos, quat, ids)),
    ]
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        tdev = "cpu" if device == "cpu" else str(wp.device_to_torch(device))
        t_ids = torch.tensor(ids64_host, device=tdev)
        t_pos, t_quat = torch.tensor(pos_host, device=tdev), torch.tensor(quat_host, device=tdev)
        state = torch.zeros((ids_host.size, 13), device=tdev)
        state[:, :3], state[:, 3:7] = t_pos, t_quat
        t_mask = torch.tensor(mask_host, device=tdev)
        rng = np.random.default_rng(9)
        full_pos = torch.tensor(rng.uniform(-1, 1, (n, 3)).astype(np.float32), device=tdev)
        full_quat = torch.nn.functional.normalize(torch.tensor(rng.normal(size=(n, 4)), device=tdev).float(), dim=1)
        as_torch = getattr(fv, "as_torch", wp.to_torch)  # wp.to_torch: a library from before fv.as_torch

        def read_as_torch() -> None:
            p, q = cams.get_world_poses()
            as_torch(p), as_torch(q)

        calls += [
            ("reset_write_torch_ids", "reset_write", lambda: robots.set_world_poses(pos, quat, t_ids)),
            ("reset_write_torch", "reset_write", lambda: robots.set_world_poses(t_pos, t_quat, t_ids)),
            ("reset_write_torch_slices", "reset_write",
             lambda: robots.set_world_poses(state[:, :3], state[:, 3:7], t_ids)),
            ("reset_write_mask_torch", "reset_write_mask",
             lambda: robots.set_world_poses(full_pos, full_quat, mask=t_mask)),
            ("reset_read_torch", "reset_read", lambda: cams.get_world_poses(t_ids)),
            ("reset_read_mask_torch", "reset_read_mask", lambda: cams.get_world_poses(mask=t_mask)),
            ("get_world_poses_torch", "get_world_poses", read_as_torch),
            ("writer_scope_torch", "reset_write", lambda: scope(t_pos, t_quat, t_ids)),
        ]  # fmt: skip
    rows: dict[str, float] = {}
    ratios: dict[str, float] = {}
    for name, base, call in calls:
        base_us, rows[name] = _paired_us(bases[base], call, device, reps)
        ratios[name] = rows[name] / base_us
    if torch is not None:
        rows.update(_varied_rows(robots, ids_host, pos_host, quat_host, device, tdev, reps))
    return rows, ratios


def _varied_rows(robots: Any, ids_host: np.ndarray, pos_host: np.ndarray, quat_host: np.ndarray, device: str,
                 tdev: str, reps: int) -> dict[str, float]:  # fmt: skip
    """Resets as an RL loop makes them: each call a new set of env ids (its own tensors, and a count that changes
    from call to call), cycled over 8 sets made beforehand (so the row times the library, not the making of the
    tensors): Warp int32 ids with Warp data, and torch int64 ids with torch data."""
    import torch

    n = ids_host.size
    counts = [max(1, n - 8 * k) for k in range(8)]
    warp_sets = [(wp.array(pos_host[:c], dtype=wp.vec3f, device=device), wp.array(quat_host[:c], dtype=wp.quatf,
                  device=device), wp.array(ids_host[:c], dtype=wp.int32, device=device)) for c in counts]  # fmt: skip
    torch_sets = [(torch.tensor(pos_host[:c], device=tdev), torch.tensor(quat_host[:c], device=tdev),
                   torch.tensor(ids_host[:c].astype(np.int64), device=tdev)) for c in counts]  # fmt: skip

    def cycled(sets: list) -> Any:
        state = [0]

        def call() -> None:
            p, q, i = sets[state[0] % len(sets)]
            state[0] += 1
            robots.set_world_poses(p, q, i)

        return call

    return {"reset_write_varied": _median_us(cycled(warp_sets), device, reps),
            "reset_write_torch_varied": _median_us(cycled(torch_sets), device, reps)}  # fmt: skip


def _graph_replay_us(robots: Any, cams: Any, pos: wp.array, quat: wp.array, mask: wp.array, device: str,
                     reps: int) -> float:  # fmt: skip
    """Capture the masked reset (write + read) once, then time graph replays (fresh inputs are written in place)."""
    robots.set_world_poses(pos, quat, mask=mask)  # warm: record launches, compile
    cams.get_world_poses(mask=mask)
    with wp.ScopedCapture(device=device, force_module_load=False) as capture:
        robots.set_world_poses(pos, quat, mask=mask)
        cams.get_world_poses(mask=mask)
    return _median_us(lambda: wp.capture_launch(capture.graph), device, reps)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--device", default="cpu", help="Warp device: cpu or cuda:N (default cpu)")
    p.add_argument("--provider", default="memory", choices=sorted(PROVIDERS), help="Fabric provider (default memory)")
    p.add_argument("--envs", type=int, nargs="+", default=[1024, 8192], help="env counts (default 1024 8192)")
    p.add_argument("--filler", type=int, nargs="+", default=[0, 100_000], help="filler prims (default 0 100000)")
    p.add_argument("--reset", type=int, default=256, help="envs reset per call (default 256)")
    p.add_argument("--reps", type=int, default=200, help="timed repetitions per row (default 200)")
    p.add_argument("--save-as", default=None, help="write perf/results/reset_NAME.json (committed results)")
    p.add_argument("--profile", action="store_true", help="print a cProfile of the reset loop (host time)")
    args = p.parse_args(argv)
    wp.config.log_level = wp.LOG_WARNING  # no start-up banner nor module-load lines
    wp.init()
    cases = []
    for envs in args.envs:
        for filler in args.filler:
            case = run_case(args.provider, args.device, envs, filler, min(args.reset, envs), args.reps, args.profile)
            cases.append(case)
            ratios = case["paired_ratio"]
            cells = "\n".join(f"  {k:<28} {v:>10.1f} us" + (f"   {ratios[k]:5.2f}x" if k in ratios else "")
                              for k, v in case["median_us"].items())  # fmt: skip
            print(
                f"envs={envs:,} filler={filler:,}: check against float64 truth, largest error "
                f"{case['check_max_abs_error']:.2e} (stage units); median per call (after an input row: its ratio to "
                f"the Warp-native call it was timed in turns with):\n{cells}",
                flush=True,
            )
    out_dir = ROOT / "results" if args.save_as else ROOT / "out"
    out_dir.mkdir(parents=True, exist_ok=True)
    name = f"reset_{args.save_as}.json" if args.save_as else f"reset_{args.device.replace(':', '')}.json"
    result = {"command": " ".join(["python", "perf/bench_reset.py", *(argv or sys.argv[1:])]),
              "warp": wp.__version__, "targets_us_h200_8192": TARGETS_US, "cases": cases}  # fmt: skip
    (out_dir / name).write_text(json.dumps(result, indent=1))
    print(f"wrote {out_dir / name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

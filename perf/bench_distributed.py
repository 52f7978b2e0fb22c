# SPDX-License-Identifier: Apache-2.0
"""The reset benchmark across processes: one rank per GPU (or CPU rank), each with its own scene slice, joined by
torch.distributed (NCCL on GPUs, gloo on the CPU).

Each rank builds ``--envs`` envs (perf/harness/scenes.py, embedded Fabric model) on ``cuda:<local rank>`` or the CPU,
checks one reset against float64 truth, then times, all ranks at once (a barrier before each row), the reset loop of
perf/bench_reset.py and the gathers:

- ``reset_write``: ``robots.set_world_poses`` of ``--reset`` envs (device data and int32 device indices);
- ``reset_read``: ``cameras.get_world_poses`` of those envs; ``reset``: the write then the read;
- ``get_world_poses``: all cameras; ``set_world_poses_parents``: all robots (the cameras follow);
- ``gather_poses``: ``fv.all_gather_poses`` of every camera pose already read (counts exchanged first);
  ``gather_poses_counts``: the same with ``counts=`` given (one collective); ``gather_view``: ``all_gather_poses``
  of the camera view (its full read, then the gather).

Every time is a median (min and max in the JSON) over ``--reps`` repetitions after warm-up; each repetition ends
with ``wp.synchronize_device`` and, on CUDA, ``torch.cuda.synchronize`` (so it includes the GPU work and NCCL).
Rank 0 gathers every rank's medians (``torch.distributed.gather_object``) and writes one JSON and a table. The
weak-scaling ratio of a row is the slowest rank's median with N ranks over the median of the same run with one
rank: 1.0 is perfect weak scaling.

Two ways to launch (ranks get ``NCCL_NVLS_ENABLE=0``: NVLink multicast stays off):

- ``python perf/bench_distributed.py --nproc 2``: this script starts the ranks itself on loopback
  (``MASTER_ADDR=127.0.0.1``), first one rank alone (the baseline), then ``--nproc`` ranks, and writes both runs and
  the ratios into one JSON;
- ``torchrun --nproc-per-node 2 perf/bench_distributed.py``: one run of torchrun's ranks; pass the JSON of an
  earlier ``torchrun --nproc-per-node 1`` run with ``--baseline FILE`` for the ratios.

Results go to perf/out/ (git-ignored) unless ``--save-as NAME`` writes perf/results/distributed_NAME.json.

Usage::

    python perf/bench_distributed.py --nproc 2 --device cpu --envs 256 --reps 30     # CPU, gloo (a quick check)
    python perf/bench_distributed.py --nproc 2 --device cuda --save-as h200x2        # 2 GPUs, NCCL, 8192 envs each
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import warp as wp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_reset import _check_reset, _quat_rows
from harness.scenes import PROVIDERS, scene_arrays

import frameview as fv

ROOT = Path(__file__).resolve().parent
RESET_ROWS = ("reset_write", "reset_read", "reset", "get_world_poses", "set_world_poses_parents")
GATHER_ROWS = ("gather_poses", "gather_poses_counts", "gather_view")
RANK_ENV = {"NCCL_NVLS_ENABLE": "0"}
"""Set in every rank's environment: NVLink multicast (NVLS) off."""


# ---------------------------------------------------------------- one rank


def _timed(fn: Callable[[], Any], sync: Callable[[], None], reps: int, warmup: int = 3) -> dict[str, float]:
    """Median, min and max in microseconds of ``fn(); sync()`` over ``reps`` runs, after ``warmup`` runs."""
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - t0) * 1e6)
    return {"median": statistics.median(times), "min": min(times), "max": max(times), "reps": reps}


def _active_contexts() -> list[int] | None:
    """CUDA ordinals whose primary context is active in this process (None without a CUDA driver): a rank that
    shows another rank's GPU here touched it."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    count = ctypes.c_int()
    if lib.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return None
    active = []
    for ordinal in range(count.value):
        dev, flags, state = ctypes.c_int(), ctypes.c_uint(), ctypes.c_int()
        if lib.cuDeviceGet(ctypes.byref(dev), ordinal) == 0 and (
            lib.cuDevicePrimaryCtxGetState(dev, ctypes.byref(flags), ctypes.byref(state)) == 0 and state.value
        ):
            active.append(ordinal)
    return active


def _init_group(device: str, timeout_s: float) -> Any:
    """torch.distributed from torchrun's / the launcher's environment: NCCL on CUDA (bound to this rank's GPU), gloo
    on the CPU."""
    import torch
    import torch.distributed as dist

    timeout = datetime.timedelta(seconds=timeout_s)
    if device == "cpu":
        dist.init_process_group("gloo", timeout=timeout)
    else:
        torch.cuda.set_device(torch.device(device))  # before NCCL: its communicator binds to the current device
        try:
            dist.init_process_group("nccl", timeout=timeout, device_id=torch.device(device))
        except TypeError:  # torch < 2.3: no device_id
            dist.init_process_group("nccl", timeout=timeout)
    return dist


def run_rank(args: argparse.Namespace) -> dict[str, Any] | None:
    """One rank: build its scene slice, time the rows with every rank at once; rank 0 returns every rank's results."""
    import torch

    os.environ.update(RANK_ENV)  # torchrun's ranks too (NCCL reads it when the communicator is made)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    wp.init()
    device = "cpu" if args.device == "cpu" else fv.rank_device(local_rank)  # raises for a rank without its own GPU
    if device == "cpu" and args.device == "cuda":
        raise RuntimeError(f"rank {rank}: --device cuda, but no CUDA device is visible")
    dist = _init_group(device, args.timeout)
    say = print if rank == 0 else (lambda *_a, **_k: None)
    try:
        backend = str(dist.get_backend())
        say(f"[world {world}] {backend}, {args.envs} envs per rank on {device if world == 1 else args.device}",
            flush=True)  # fmt: skip

        def sync() -> None:
            wp.synchronize_device(device)
            if device != "cpu":
                torch.cuda.synchronize(device)

        t0 = time.perf_counter()
        scene = PROVIDERS["memory"].build(scene_arrays(args.envs, args.filler, seed=1 + rank), device)
        build_s = time.perf_counter() - t0
        rng = np.random.default_rng(5 + rank)
        reset = min(args.reset, args.envs)
        rows: dict[str, dict[str, float]] = {}
        robots = fv.FabricFrameView("/World/envs/env_.*/Robot", stage=scene.stage, device=device)
        cams = fv.FabricFrameView("/World/envs/env_.*/Robot/Camera", stage=scene.stage, device=device)
        try:
            ids_host = np.sort(rng.choice(args.envs, size=reset, replace=False)).astype(np.int32)
            pos_host, quat_host = rng.uniform(-1, 1, (reset, 3)).astype(np.float32), _quat_rows(rng, reset)
            max_err = _check_reset(robots, cams, ids_host, pos_host, quat_host)
            ids = wp.array(ids_host, dtype=wp.int32, device=device)
            pos = wp.array(pos_host, dtype=wp.vec3f, device=device)
            quat = wp.array(quat_host, dtype=wp.quatf, device=device)
            full_pos = wp.array(rng.uniform(-1, 1, (args.envs, 3)).astype(np.float32), dtype=wp.vec3f, device=device)
            full_quat = wp.array(_quat_rows(rng, args.envs), dtype=wp.quatf, device=device)

            def reset_once() -> None:
                robots.set_world_poses(pos, quat, ids)
                cams.get_world_poses(ids)

            calls: dict[str, Callable[[], Any]] = {
                "reset_write": lambda: robots.set_world_poses(pos, quat, ids),
                "reset_read": lambda: cams.get_world_poses(ids),
                "reset": reset_once,
                "get_world_poses": cams.get_world_poses,
                "set_world_poses_parents": lambda: robots.set_world_poses(full_pos, full_quat),
            }
            all_pos, all_quat = (wp.clone(a) for a in cams.get_world_poses())
            counts = [args.envs] * world
            calls["gather_poses"] = lambda: fv.all_gather_poses((all_pos, all_quat))
            calls["gather_poses_counts"] = lambda: fv.all_gather_poses((all_pos, all_quat), counts=counts)
            calls["gather_view"] = lambda: fv.all_gather_poses(cams)
            for name, fn in calls.items():
                dist.barrier()
                rows[name] = _timed(fn, sync, args.reps)
                say(f"[world {world}] {name:<24} rank 0 median {rows[name]['median']:9.1f} us", flush=True)
            gathered = fv.all_gather_poses(cams)
            own = gathered.per_rank()[rank] if gathered is not None else None
            mine = [wp.to_torch(a) for a in cams.get_world_poses()]
            gather_ok = own is not None and all(torch.equal(a, b) for a, b in zip(own, mine, strict=True))
            robots.check()
            cams.check()
        finally:
            cams.close()
            robots.close()
        result = {"rank": rank, "local_rank": local_rank, "device": device, "envs": args.envs, "filler": args.filler,
                  "reset_envs": reset, "prims": scene.prim_count, "build_s": build_s, "check_max_abs_error": max_err,
                  "gather_own_rows_equal": bool(gather_ok), "gathered_rows": int(sum(gathered.counts)),
                  "cuda_contexts": _active_contexts() if device != "cpu" else None, "median_us": rows}  # fmt: skip
        every: list[Any] | None = [None] * world if rank == 0 else None
        dist.gather_object(result, every, dst=0)
        if rank != 0:
            return None
        return {"world_size": world, "backend": backend, "ranks": every}
    finally:
        dist.destroy_process_group()


# ---------------------------------------------------------------- launcher and report


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _launch_world(world: int, rank_args: list[str], timeout_s: float) -> dict[str, Any]:
    """Start ``world`` ranks of this script on loopback and return rank 0's results; any failure or a hang past
    ``timeout_s`` stops every rank and raises."""
    with tempfile.TemporaryDirectory(prefix="frameview_dist_") as tmp:
        result_file = Path(tmp) / "world.json"
        env = {**os.environ, **RANK_ENV, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port()),
               "WORLD_SIZE": str(world), "LOCAL_WORLD_SIZE": str(world)}  # fmt: skip
        env.setdefault("GLOO_SOCKET_IFNAME", "lo")  # gloo's own connections on loopback too
        cmd = [sys.executable, str(Path(__file__).resolve()), *rank_args, "--result-file", str(result_file)]
        procs = [subprocess.Popen(cmd, env={**env, "RANK": str(r), "LOCAL_RANK": str(r)}) for r in range(world)]
        deadline = time.monotonic() + timeout_s
        try:
            while any(p.poll() is None for p in procs):
                if any(p.returncode not in (None, 0) for p in procs):
                    raise RuntimeError(f"a rank of world {world} failed: exit codes {[p.poll() for p in procs]}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"world {world} still running after {timeout_s:.0f} s (a hang?)")
                time.sleep(0.2)
            if any(p.returncode != 0 for p in procs):
                raise RuntimeError(f"a rank of world {world} failed: exit codes {[p.returncode for p in procs]}")
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        return json.loads(result_file.read_text())


def _rank_args(argv: list[str]) -> list[str]:
    """The command line without the launcher's own options (what each rank is started with)."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg in ("--nproc", "--save-as", "--baseline"):
            skip = True
            continue
        if arg.startswith(("--nproc=", "--save-as=", "--baseline=")) or arg == "--no-baseline":
            continue
        out.append(arg)
    return out


def report(runs: dict[str, dict[str, Any]], args: argparse.Namespace, argv: list[str]) -> dict[str, Any]:
    """One result: every run, per-rank medians, the weak-scaling ratios; the table is printed."""
    worlds = sorted(runs, key=int)
    scaled, base = runs[worlds[-1]], runs.get("1")
    ratios: dict[str, float] = {}
    if base is not None and scaled is not base:
        for row in (*RESET_ROWS, *GATHER_ROWS):
            slowest = max(r["median_us"][row]["median"] for r in scaled["ranks"])
            ratios[row] = slowest / base["ranks"][0]["median_us"][row]["median"]
    header = ["row (median us)"]
    for w in worlds:
        header += [f"w{w} r{r['rank']} {r['device']}" for r in runs[w]["ranks"]]
    if ratios:
        header.append(f"ratio w{worlds[-1]}/w1")
    lines = [" | ".join(header), " | ".join("---" for _ in header)]
    for row in (*RESET_ROWS, *GATHER_ROWS):
        cells = [row]
        for w in worlds:
            cells += [f"{r['median_us'][row]['median']:.1f}" for r in runs[w]["ranks"]]
        if ratios:
            cells.append(f"{ratios[row]:.2f}")
        lines.append(" | ".join(cells))
    print("\n".join(f"| {line} |" for line in lines))
    for w in worlds:
        for r in runs[w]["ranks"]:
            print(f"world {w} rank {r['rank']} ({r['device']}): {r['prims']} prims, check err "
                  f"{r['check_max_abs_error']:.2e}, own rows in gather equal: {r['gather_own_rows_equal']}, "
                  f"CUDA contexts: {r['cuda_contexts']}")  # fmt: skip
    import torch

    return {"command": " ".join(["python", "perf/bench_distributed.py", *argv]), "warp": wp.__version__,
            "torch": torch.__version__, "device": args.device, "envs_per_rank": args.envs, "filler": args.filler,
            "reset_envs": args.reset, "reps": args.reps, "nccl_nvls_enable": RANK_ENV["NCCL_NVLS_ENABLE"],
            "baseline_file": args.baseline, "runs": runs, "weak_scaling_ratio": ratios}  # fmt: skip


def _write(result: dict[str, Any], args: argparse.Namespace) -> None:
    out_dir = ROOT / "results" if args.save_as else ROOT / "out"
    out_dir.mkdir(parents=True, exist_ok=True)
    name = f"distributed_{args.save_as}.json" if args.save_as else f"distributed_{args.device}.json"
    (out_dir / name).write_text(json.dumps(result, indent=1))
    print(f"wrote {out_dir / name}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    wp.config.quiet = True
    if hasattr(wp, "LOG_WARNING"):  # Warp >= 1.19 logs module loads at INFO
        wp.config.log_level = wp.LOG_WARNING
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument(
        "--device",
        choices=("auto", "cpu", "cuda"),
        default="auto",
        help="cuda: rank r on cuda:<local rank>, NCCL; cpu: gloo; auto: cuda when a GPU is visible",
    )
    p.add_argument("--nproc", type=int, default=2, help="ranks this script starts itself (not under torchrun)")
    p.add_argument("--envs", type=int, default=8192, help="envs per rank (default 8192)")
    p.add_argument("--filler", type=int, default=0, help="filler prims per rank (default 0)")
    p.add_argument("--reset", type=int, default=256, help="envs reset per call (default 256)")
    p.add_argument("--reps", type=int, default=200)
    p.add_argument("--no-baseline", action="store_true", help="skip the one-rank run (no weak-scaling ratio)")
    p.add_argument("--baseline", default=None, help="under torchrun: a JSON of this script with one rank")
    p.add_argument("--save-as", default=None, help="write perf/results/distributed_NAME.json (committed results)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds before a hung run fails (default 600)")
    p.add_argument("--result-file", default=None, help=argparse.SUPPRESS)  # the launcher's ranks write here
    args = p.parse_args(argv)
    if args.device == "auto":
        args.device = "cuda" if wp.get_cuda_device_count() > 0 else "cpu"
        argv = [*argv, "--device", args.device]
    if "RANK" in os.environ:  # a rank: started by torchrun or by this script
        world = run_rank(args)
        if world is None:
            return 0
        if args.result_file:
            Path(args.result_file).write_text(json.dumps(world))
            return 0
        runs = {str(world["world_size"]): world}
        if args.baseline:
            base = json.loads(Path(args.baseline).read_text())["runs"]["1"]
            runs.setdefault("1", base)
        _write(report(runs, args, argv), args)
        return 0
    if args.nproc < 1:
        raise SystemExit(f"--nproc: expected >= 1, got {args.nproc}")
    rank_args = _rank_args(argv)
    worlds = [args.nproc] if args.no_baseline or args.nproc == 1 else [1, args.nproc]
    runs = {str(w): _launch_world(w, rank_args, args.timeout) for w in worlds}
    _write(report(runs, args, argv), args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

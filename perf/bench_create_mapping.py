# SPDX-License-Identifier: Apache-2.0
"""Benchmark ``fv.create_mapping`` against the quadratic ``list.index`` reference and a bare dict comprehension.

The source paths are the target paths in reversed order (the worst case for ``list.index``), built as separate
string objects, as a second backend would produce them. Every implementation's output is checked to be identical
at every N. Prints a Markdown table (median / min / max seconds per call) and writes JSON + Markdown results.

Examples::

    python perf/bench_create_mapping.py            # full sweep: 75 s to ~2 min on 2 cores, mostly list.index
    python perf/bench_create_mapping.py --quick    # N <= 20k, ~20-25 s, prints only (unless --out is given)

Durations measured on the 2-core dev machine with a load average of about 3: full sweep 75 s (the committed
``create_mapping_cpu.json``) and 126 s; ``--quick`` 21-25 s. Results go to ``perf/out/`` (git-ignored) unless
``--out`` names a file (``--out perf/results/create_mapping_cpu.json`` for the committed one).
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import warp as wp
from harness.machine import machine_info  # one machine description for every perf script

import frameview as fv

FULL_SIZES = (1_000, 5_000, 20_000, 50_000, 100_000, 200_000, 1_000_000)
QUICK_SIZES = (1_000, 5_000, 20_000)
DEFAULT_OUT = Path(__file__).resolve().parent / "out" / "create_mapping_cpu.json"  # git-ignored
BODIES_PER_ENV = 25  # ~200k rigid bodies at 8192 envs


def make_paths(n: int) -> tuple[list[str], list[str]]:
    """Target paths in backend order and the same paths reversed, as distinct string objects."""
    target = [f"/World/envs/env_{i // BODIES_PER_ENV}/Robot/link_{i % BODIES_PER_ENV}" for i in range(n)]
    source = [f"/World/envs/env_{i // BODIES_PER_ENV}/Robot/link_{i % BODIES_PER_ENV}" for i in range(n - 1, -1, -1)]
    return source, target


def list_index_mapping(source: list[str], target: list[str]) -> list[int]:
    """The quadratic reference (the code the issue replaces): one ``list.index`` scan per source path."""
    mapping = []
    for path in source:
        try:
            mapping.append(target.index(path))
        except ValueError:
            mapping.append(-1)
    return mapping


def bare_dict_mapping(source: list[str], target: list[str]) -> list[int]:
    """An unguarded dict comprehension (last occurrence wins) and one lookup per path: the floor to compare with."""
    index = {p: i for i, p in enumerate(target)}
    return [index.get(p, -1) for p in source]


def reps_for(n: int, fast: bool) -> int:
    """Repetitions per size: many for cheap calls, few for the expensive ones."""
    if fast:
        return 21 if n <= 50_000 else 11 if n <= 200_000 else 7
    return 5 if n <= 1_000 else 3 if n <= 5_000 else 1


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def calls_per_sample(func: Callable[[], Any], device: wp.Device, min_sample_s: float = 0.01) -> int:
    """How many back-to-back calls make one sample of at least ``min_sample_s`` (1 for slow functions)."""
    wp.synchronize_device(device)
    start = time.perf_counter()
    func()
    wp.synchronize_device(device)
    single = time.perf_counter() - start
    return max(1, min(1000, int(min_sample_s / max(single, 1e-7))))


def time_calls(
    funcs: dict[str, Callable[[], Any]],
    reps: dict[str, int],
    number: dict[str, int],
    device: wp.Device,
    clock: Callable[[], float],
) -> dict[str, list[float]]:
    """Seconds per call: ``reps[name]`` samples of ``number[name]`` calls each, the implementations taking turns.

    Interleaving spreads machine noise over all functions alike; as in ``timeit``, the garbage collector is
    collected before and disabled during each sample, and Warp is synchronised before every clock read.
    ``clock`` is wall time (``time.perf_counter``) or this process's CPU time (``time.process_time``, which
    leaves out the time the process waits for a core on a shared machine).
    """
    times: dict[str, list[float]] = {name: [] for name in funcs}
    for rep in range(max(reps.values())):
        for name, func in funcs.items():
            if rep >= reps[name]:
                continue
            gc.collect()
            gc.disable()
            try:
                wp.synchronize_device(device)
                start = clock()
                for _ in range(number[name]):
                    func()
                wp.synchronize_device(device)
                elapsed = clock() - start
            finally:
                gc.enable()
            times[name].append(elapsed / number[name])
    return times


def summary(samples: list[float]) -> dict[str, float | int]:
    return {
        "median_s": statistics.median(samples),
        "min_s": min(samples),
        "max_s": max(samples),
        "reps": len(samples),
    }


def git_revision() -> str | None:
    """HEAD's short hash, with ``+uncommitted`` when the measured code differs from it."""
    here = Path(__file__).resolve().parent
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True, cwd=here
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "../src/frameview/scene_data", Path(__file__).name],
            capture_output=True,
            text=True,
            check=True,
            cwd=here,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return f"{rev}+uncommitted" if dirty else rev or None


def run_size(n: int, device: wp.Device, max_index_n: int, clock: Callable[[], float]) -> dict[str, Any]:
    source, target = make_paths(n)
    # warm-up (excluded): first call initialises Warp and touches every string's hash
    mapping = fv.create_mapping(source, target, device=device)
    bare = bare_dict_mapping(source, target)
    expected = np.arange(n - 1, -1, -1, dtype=np.int32)
    verified = mapping is not None and np.array_equal(mapping.numpy(), expected) and bare == expected.tolist()
    mapping_np = mapping.numpy() if mapping is not None else expected

    funcs: dict[str, Callable[[], Any]] = {
        "create_mapping": lambda: fv.create_mapping(source, target, device=device),
        "bare_dict": lambda: bare_dict_mapping(source, target),
        # the Warp array creation inside create_mapping, on its own
        "wp_array": lambda: wp.array(mapping_np, dtype=wp.int32, device=device, copy=False),
    }
    reps = {name: reps_for(n, fast=True) for name in funcs}
    run_index = n <= max_index_n
    if run_index:
        reference = list_index_mapping(source, target)
        verified = verified and reference == expected.tolist()
        funcs["list_index"] = lambda: list_index_mapping(source, target)
        reps["list_index"] = reps_for(n, fast=False)
    number = {name: 1 if name == "list_index" else calls_per_sample(func, device) for name, func in funcs.items()}
    times = time_calls(funcs, reps, number, device, clock)
    row: dict[str, Any] = {"n": n, "verified_identical": bool(verified)}
    for name in ("create_mapping", "bare_dict", "wp_array", "list_index"):
        row[name] = summary(times[name]) | {"calls_per_sample": number[name]} if name in times else None
    cm = row["create_mapping"]["median_s"]
    row["ns_per_path"] = cm / n * 1e9
    row["ratio_vs_bare_dict"] = cm / row["bare_dict"]["median_s"]
    row["ratio_vs_bare_dict_of_mins"] = row["create_mapping"]["min_s"] / row["bare_dict"]["min_s"]
    row["speedup_vs_list_index"] = row["list_index"]["median_s"] / cm if run_index else None
    return row


def fmt_s(entry: dict[str, Any] | None) -> str:
    if entry is None:
        return "—"
    return f"{entry['median_s']:.4g} ({entry['min_s']:.3g}-{entry['max_s']:.3g}, n={entry['reps']})"


def markdown_table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| N | create_mapping s: median (min-max, reps) | bare dict s | list.index s | "
        "vs bare (medians) | vs bare (mins) | vs list.index | ns/path | of which wp.array s | identical |",
        "|---:|---|---|---|---:|---:|---:|---:|---:|:---:|",
    ]
    for r in rows:
        speedup = f"{r['speedup_vs_list_index']:.0f}x" if r["speedup_vs_list_index"] is not None else "—"
        lines.append(
            f"| {r['n']:,} | {fmt_s(r['create_mapping'])} | {fmt_s(r['bare_dict'])} | {fmt_s(r['list_index'])} | "
            f"{r['ratio_vs_bare_dict']:.2f}x | {r['ratio_vs_bare_dict_of_mins']:.2f}x | {speedup} | "
            f"{r['ns_per_path']:.0f} | "
            f"{r['wp_array']['median_s']:.2g} | {'yes' if r['verified_identical'] else 'NO'} |"
        )
    return "\n".join(lines)


def expectations(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The issue's expectations, evaluated on the measured medians (None where a size was not run)."""
    by_n = {r["n"]: r for r in rows}
    out: dict[str, Any] = {}
    if 100_000 in by_n and 1_000_000 in by_n:
        for name in ("create_mapping", "bare_dict"):
            ratio = by_n[1_000_000][name]["median_s"] / by_n[100_000][name]["median_s"]
            out[f"{name}_1M_over_100k"] = ratio
        out["linear_1M_over_100k_le_12x"] = out["create_mapping_1M_over_100k"] <= 12.0
    out["max_ratio_vs_bare_dict"] = max(r["ratio_vs_bare_dict"] for r in rows)
    out["within_1.1x_of_bare_dict"] = out["max_ratio_vs_bare_dict"] <= 1.1
    large = [r["ratio_vs_bare_dict"] for r in rows if r["n"] >= 20_000]
    if large:  # below 20k a fixed ~30 us (Warp array, identity and type checks) dominates
        out["max_ratio_vs_bare_dict_n_ge_20k"] = max(large)
        out["within_1.1x_of_bare_dict_n_ge_20k"] = max(large) <= 1.1
    if 50_000 in by_n and by_n[50_000]["speedup_vs_list_index"] is not None:
        out["speedup_vs_list_index_at_50k"] = by_n[50_000]["speedup_vs_list_index"]
        out["ge_500x_vs_list_index_at_50k"] = out["speedup_vs_list_index_at_50k"] >= 500.0
    out["all_verified_identical"] = all(r["verified_identical"] for r in rows)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help=f"sizes {QUICK_SIZES} only; writes files only with --out")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help=f"JSON output path (default {DEFAULT_OUT}; a .md table is written next to it)",
    )
    parser.add_argument(
        "--save-as",
        default=None,
        metavar="NAME",
        help="write perf/results/create_mapping_NAME.json (committed results) instead of --out",
    )
    parser.add_argument("--sizes", type=str, default=None, help="comma-separated N values, overriding the sweep")
    parser.add_argument("--max-index-n", type=int, default=50_000, help="largest N to run list.index at")
    parser.add_argument("--device", type=str, default="cpu", help="Warp device of the mapping array")
    parser.add_argument(
        "--clock",
        choices=sorted(CLOCKS),
        default="wall",
        help="wall: time.perf_counter; cpu: time.process_time (robust to other processes on a shared machine)",
    )
    args = parser.parse_args(argv)

    wp.config.log_level = wp.LOG_WARNING  # no start-up banner nor module-load lines
    wp.init()
    device = wp.get_device(args.device)
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else list(QUICK_SIZES if args.quick else FULL_SIZES)
    if args.save_as is not None:
        args.out = Path(__file__).resolve().parent / "results" / f"create_mapping_{args.save_as}.json"
    out = args.out if args.out is not None else (None if args.quick or args.sizes else DEFAULT_OUT)

    rows = []
    load_before = os.getloadavg()
    start = time.perf_counter()
    for n in sizes:
        row = run_size(n, device, args.max_index_n, CLOCKS[args.clock])
        rows.append(row)
        print(
            f"N={n:>9,}: create_mapping {row['create_mapping']['median_s']:.4g} s, "
            f"bare dict {row['bare_dict']['median_s']:.4g} s, list.index {fmt_s(row['list_index'])}",
            file=sys.stderr,
            flush=True,
        )
    elapsed = time.perf_counter() - start
    table = markdown_table(rows)
    checks = expectations(rows)
    print(table)
    print()
    print(
        "Expectations: " + ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in checks.items())
    )
    print(f"Total wall time {elapsed:.1f} s")

    if out is not None:
        result = {
            "benchmark": "create_mapping",
            "machine": machine_info("cpu"),
            "frameview_version": fv.__version__,
            "git_revision": git_revision(),
            "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "command": "python " + " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
            "device": str(device),
            "clock": args.clock,
            "load_average_1_5_15_before_after": [list(load_before), list(os.getloadavg())],
            "source_order": "reversed target order, distinct string objects",
            "expectations": checks,
            "wall_time_s": elapsed,
            "rows": rows,
        }
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2) + "\n")
        md = out.with_suffix(".md")
        header = (
            f"# create_mapping benchmark ({result['timestamp']})\n\n"
            f"Machine: {result['machine']['cpu']}, {result['machine']['logical_cpus']} cores, Python "
            f"{result['machine']['python']}, Warp {result['machine']['warp']}; device {device}. "
            f"Source = target reversed. Seconds per call, {args.clock} clock; 1-min load average "
            f"{load_before[0]:.2f} before, {os.getloadavg()[0]:.2f} after.\n\n"
            f"Command: `{result['command']}`\n\n"
        )
        md.write_text(header + table + "\n\nExpectations: `" + json.dumps(checks) + "`\n")
        print(f"Wrote {out} and {md}", file=sys.stderr)
    return 0 if checks["all_verified_identical"] else 1


if __name__ == "__main__":
    sys.exit(main())

# SPDX-License-Identifier: Apache-2.0
"""Benchmark prim path pattern resolution: scoped (level by level) vs a stage-wide traversal baseline.

Builds, for each filler size, a pxr stage with ``/World/envs/env_i/Robot/Camera`` for ``--envs`` envs plus
``F`` unrelated Xform "filler" prims spread evenly over the envs, then times
``resolve_prim_paths("/World/envs/env_.*/Robot/Camera", stage)`` against a baseline that traverses the whole
stage and full-matches every path's components. Filler layouts:

- ``nested``: ``env_i/Filler/f_j`` -- filler below a sibling of ``Robot``; nothing the pattern lists sees it.
- ``siblings``: ``env_i/f_j`` -- filler as direct children of each env, next to ``Robot``: the literal
  ``Robot`` lookup below ``env_.*`` must stay one hash lookup, not a scan of the env's children.

A second scoped metric, ``resolve_list``, resolves the explicit list of the ``--envs`` camera paths.
Timings are wall-clock (``time.perf_counter``) and process CPU time (``time.process_time``), garbage collection
disabled while timing (as ``timeit`` does), one warm-up call excluded, median / min / max over the reps. CPU only:
resolution touches no device. On a shared machine wall times include waiting for a core; the 1-minute load
average is recorded at start and end, and CPU times are the steadier comparison.

Usage::

    python perf/bench_paths.py                      # 8192 envs, filler 0 / 100k / 1M -> perf/out/paths_cpu.json
    python perf/bench_paths.py --quick              # < 30 s smoke run
    python perf/bench_paths.py --envs 1024 --filler 0 10000 --out /tmp/paths.json
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import resource
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from harness.machine import machine_info  # one machine description for every perf script
from pxr import Sdf, Usd

import frameview
from frameview import resolve_prim_paths

PATTERN = "/World/envs/env_.*/Robot/Camera"


def build_stage(envs: int, filler: int, layout: str) -> tuple[Usd.Stage, dict]:
    """Author the stage with Sdf batch edits inside one change block, then open it.

    Returns:
        The stage, and build facts: ``stage_prims`` (authored prims), ``build_layer_s``, ``open_stage_s``.
    """
    t0 = time.perf_counter()
    layer = Sdf.Layer.CreateAnonymous()
    per_env, extra = divmod(filler, envs)
    with Sdf.ChangeBlock():
        world = Sdf.PrimSpec(layer, "World", Sdf.SpecifierDef, "Xform")
        env_root = Sdf.PrimSpec(world, "envs", Sdf.SpecifierDef, "Xform")
        for i in range(envs):
            env = Sdf.PrimSpec(env_root, f"env_{i}", Sdf.SpecifierDef, "Xform")
            robot = Sdf.PrimSpec(env, "Robot", Sdf.SpecifierDef, "Xform")
            Sdf.PrimSpec(robot, "Camera", Sdf.SpecifierDef, "Camera")
            count = per_env + (i < extra)
            if count:
                parent = Sdf.PrimSpec(env, "Filler", Sdf.SpecifierDef, "Xform") if layout == "nested" else env
                for j in range(count):
                    Sdf.PrimSpec(parent, f"f_{j}", Sdf.SpecifierDef, "Xform")
    t1 = time.perf_counter()
    stage = Usd.Stage.Open(layer)
    t2 = time.perf_counter()
    groups = envs if layout == "nested" and filler else 0
    facts = {"stage_prims": 2 + 3 * envs + groups + filler, "build_layer_s": t1 - t0, "open_stage_s": t2 - t1}
    return stage, facts


def resolve_stage_wide(pattern: str, stage: Usd.Stage) -> list[str]:
    """Baseline: traverse the whole stage and full-match every path's components (what the resolver avoids)."""
    matchers = [re.compile(c) for c in pattern[1:].split("/")]
    depth = len(matchers)
    out = []
    for prim in stage.Traverse():
        path = prim.GetPath().pathString
        names = path[1:].split("/")
        if len(names) == depth and all(m.fullmatch(n) for m, n in zip(matchers, names, strict=True)):
            out.append(path)
    return out


def time_call(fn: Callable[[], object], reps: int) -> dict:
    """Wall and process-CPU seconds of ``fn`` over ``reps`` calls after one warm-up call, with gc disabled.

    Returns:
        ``median_s`` / ``min_s`` / ``max_s`` (wall clock), the same with ``_cpu_s`` (process CPU time, which a
        shared machine's other processes barely disturb), and ``reps``.
    """
    fn()  # warm-up, excluded
    wall, cpu = [], []
    gc.collect()
    gc.disable()
    try:
        for _ in range(reps):
            t, c = time.perf_counter(), time.process_time()
            fn()
            cpu.append(time.process_time() - c)
            wall.append(time.perf_counter() - t)
    finally:
        gc.enable()
    return {
        "median_s": statistics.median(wall),
        "min_s": min(wall),
        "max_s": max(wall),
        "median_cpu_s": statistics.median(cpu),
        "min_cpu_s": min(cpu),
        "max_cpu_s": max(cpu),
        "reps": reps,
    }


def run_case(envs: int, filler: int, layout: str, reps: int, baseline_reps: int) -> tuple[list[dict], dict]:
    stage, facts = build_stage(envs, filler, layout)
    expected = [f"/World/envs/env_{i}/Robot/Camera" for i in range(envs)]
    scoped = resolve_prim_paths(PATTERN, stage)
    stage_wide = resolve_stage_wide(PATTERN, stage)
    if scoped != expected or stage_wide != expected:
        raise RuntimeError(f"wrong result at envs={envs} filler={filler} layout={layout}")
    visited = sum(1 for _ in stage.Traverse())
    if visited != facts["stage_prims"]:
        raise RuntimeError(f"stage has {visited} prims, expected {facts['stage_prims']}")
    base = {"envs": envs, "filler": filler, "layout": layout, "stage_prims": facts["stage_prims"]}
    base |= {"provider": "pxr", "device": "cpu", "matched": envs}
    rows = [
        base
        | {"method": "scoped", "metric": "resolve_pattern"}
        | time_call(lambda: resolve_prim_paths(PATTERN, stage), reps),
        base
        | {"method": "stage_wide", "metric": "resolve_pattern"}
        | time_call(lambda: resolve_stage_wide(PATTERN, stage), baseline_reps),
        base
        | {"method": "scoped", "metric": "resolve_list"}
        | time_call(lambda: resolve_prim_paths(expected, stage), reps),
    ]
    facts |= {"envs": envs, "filler": filler, "layout": layout, "peak_rss_gib": peak_rss_gib()}
    return rows, facts  # the stage and its anonymous layer die with this frame


def peak_rss_gib() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)  # ru_maxrss is KiB on Linux


def markdown_table(rows: list[dict]) -> str:
    """One line per stage: wall-clock median (min-max) and CPU-time median, in ms."""

    def ms(row: dict) -> str:
        wall = f"{row['median_s'] * 1e3:.1f} ({row['min_s'] * 1e3:.1f}-{row['max_s'] * 1e3:.1f})"
        return f"{wall} | {row['median_cpu_s'] * 1e3:.1f}"

    lines = [
        "| layout | filler | stage prims | matched | scoped pattern: wall ms (min-max) | CPU ms "
        "| stage-wide pattern: wall ms (min-max) | CPU ms | stage-wide / scoped (CPU) "
        "| scoped list: wall ms (min-max) | CPU ms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    keys = sorted({(r["layout"], r["filler"]) for r in rows}, key=lambda k: (k[1], k[0]))
    for layout, filler in keys:
        case = {(r["method"], r["metric"]): r for r in rows if r["layout"] == layout and r["filler"] == filler}
        scoped, wide = case[("scoped", "resolve_pattern")], case[("stage_wide", "resolve_pattern")]
        lst = case[("scoped", "resolve_list")]
        lines.append(
            f"| {layout} | {filler:,} | {scoped['stage_prims']:,} | {scoped['matched']:,} | {ms(scoped)} | {ms(wide)} "
            f"| {wide['median_cpu_s'] / scoped['median_cpu_s']:.0f}x | {ms(lst)} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", type=int, default=8192, help="number of envs (default 8192)")
    parser.add_argument(
        "--filler", type=int, nargs="+", default=None, help="filler prim counts (default 0 100000 1000000)"
    )
    parser.add_argument("--layouts", nargs="+", default=["nested", "siblings"], choices=["nested", "siblings"])
    parser.add_argument("--reps", type=int, default=None, help="timed reps of scoped resolution (default 20; quick 5)")
    parser.add_argument(
        "--baseline-reps", type=int, default=None, help="timed reps of the baseline (default 5; quick 2)"
    )
    parser.add_argument("--quick", action="store_true", help="smoke run in < 30 s: filler 0 and 100000, fewer reps")
    parser.add_argument(
        "--out", type=Path, default=None, help="JSON output (default perf/out/paths_cpu.json, git-ignored; quick: none)"
    )
    parser.add_argument(
        "--save-as",
        default=None,
        metavar="NAME",
        help="write perf/results/paths_NAME.json (committed results) instead of --out",
    )
    args = parser.parse_args(argv)
    fillers = args.filler or ([0, 100_000] if args.quick else [0, 100_000, 1_000_000])
    reps = args.reps or (5 if args.quick else 20)
    baseline_reps = args.baseline_reps or (2 if args.quick else 5)
    if args.save_as is not None:
        args.out = Path(__file__).resolve().parent / "results" / f"paths_{args.save_as}.json"
    out = args.out or (None if args.quick else Path(__file__).parent / "out" / "paths_cpu.json")

    machine = machine_info("cpu")
    rows: list[dict] = []
    stages: list[dict] = []
    t_start = time.perf_counter()
    for filler in fillers:
        for layout in args.layouts if filler else ["none"]:
            case_rows, facts = run_case(args.envs, filler, layout, reps, baseline_reps)
            rows += case_rows
            stages.append(facts)
            gc.collect()  # free the previous stage before building the next size
            build_s = facts["build_layer_s"] + facts["open_stage_s"]
            print(
                f"envs={args.envs} filler={filler:,} layout={layout}: {facts['stage_prims']:,} prims built in "
                f"{build_s:.1f} s (layer {facts['build_layer_s']:.1f} s + open {facts['open_stage_s']:.1f} s), "
                f"peak RSS {facts['peak_rss_gib']} GiB",
                file=sys.stderr,
                flush=True,
            )
    print(markdown_table(rows))
    print(f"total {time.perf_counter() - t_start:.1f} s")
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        machine["loadavg_1min_at_end"] = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
        result = {"machine": machine, "frameview_version": frameview.__version__, "pattern": PATTERN}
        result |= {"stages": stages, "rows": rows}
        out.write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

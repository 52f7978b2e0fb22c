# SPDX-License-Identifier: Apache-2.0
"""The sweep: ``perf/scaling.py``'s main (scenes, measurements, result files, the closing summary)."""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from pathlib import Path
from typing import Any

import warp as wp

import frameview

from . import plots, report
from .baselines import _as_sdf_paths
from .cli import parse_args
from .console import NOTES, _tqdm, bar, log, note
from .fmt import SLOT_REBUILD_LEGEND
from .machine import HostLoad, machine_info
from .measure import measure_fabric, measure_interleaved, measure_usd
from .profiling import _profile_child, run_profile, summarize_speedscope
from .scenes import PATTERN, PROVIDERS, scene_arrays
from .targets import short_targets, targets_table
from .timing import Timer


def from_json(paths: list[Path], plot_dir: Path | None = None) -> int:
    runs = {}
    for path in paths:
        data = report.read_json(path)
        runs[Path(path).stem] = data["rows"]
    for name, rows in runs.items():
        print(f"\n## {name}\n\n{report.short_table(rows)}\n\n{report.summary_table(rows)}")
        print(f"\n{report.pr_table(rows)}")
        if plot_dir is not None:
            written = plots.plot(rows, plot_dir, name)
            print("\nplots: " + ", ".join(_shown(p) for p in written))
    print(f"\n## Targets\n\n{targets_table(runs)}")
    return 0


def _shown(path: Path) -> str:
    """A path as the user would type it: relative to the working directory when it is below it."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


class Sweep:
    """One run: its rows, pose checks, skipped cases and scene records, and the ``[i/n]`` step counter of the log."""

    def __init__(self, args: argparse.Namespace, usd_fillers: list[int], interleave: bool) -> None:
        self.args, self.usd_fillers, self.interleave = args, usd_fillers, interleave
        self.timer = Timer(args.device, args.reps, args.budget_s)
        self.rows: list[dict] = []
        self.checks: list[dict] = []
        self.skipped: list[str] = []
        self.scenes: list[dict] = []
        self.step = 0
        self.steps_total = len(args.envs) * (len(args.filler) + len(usd_fillers)) + int(interleave)

    def next_step(self) -> str:
        self.step += 1
        return f"[{self.step}/{self.steps_total}]"

    def run(self) -> None:
        """Every scene of the sweep in order: per envs, the Fabric scenes, then USD; then the interleaved check."""
        for envs in self.args.envs:
            for filler in self.args.filler:
                self.fabric_scene(envs, filler)
            rate = 60e-6  # seconds per authored prim, refined by each build
            for filler in self.usd_fillers:
                rate = self.usd_scene(envs, filler, rate)
        if self.interleave:
            self.interleaved(max(self.args.envs))

    def fabric_scene(self, envs: int, filler: int) -> None:
        """frameview (scoped) and the stage-wide baseline on one Fabric scene."""
        args = self.args
        t0 = time.perf_counter()
        arrays = scene_arrays(envs, filler)
        t_arrays = time.perf_counter() - t0
        where = self.next_step()
        with bar(1, f"build {args.provider} model: {arrays.prim_count:,} prims", "model"):
            scene = PROVIDERS[args.provider].build(arrays, args.device)
        if args.baseline_paths == "sdf":
            scene.selection_paths = _as_sdf_paths(scene.selection_paths)
        log(
            f"{where} frameview + stage-wide, envs={envs} filler={filler:,}: {arrays.prim_count:,} prims, "
            f"arrays {t_arrays:.2f} s, {args.provider} model {scene.build_s:.2f} s"
        )
        t1 = time.perf_counter()
        with HostLoad() as load:
            self.rows += measure_fabric(scene, args, self.timer, self.checks)
        measured = time.perf_counter() - t1
        self.scenes.append(
            {
                "envs": envs,
                "filler": filler,
                "stage_prims": arrays.prim_count,
                "methods": "scoped+stage_wide",
                "build_s": round(scene.build_s, 3),
                "measure_s": round(measured, 1),
                "other_cpus_busy": load.other_cpus,
            }
        )
        log(f"{where} measured in {measured:.1f} s (other processes: {load.other_cpus} CPUs)")
        del scene
        gc.collect()

    def usd_scene(self, envs: int, filler: int, rate: float) -> float:
        """UsdFrameView on the pxr stage of one scene, unless its predicted build exceeds ``--usd-budget-s``.

        ``rate``: seconds per authored prim so far; returns it refined by this build."""
        args = self.args
        where = self.next_step()
        arrays = scene_arrays(envs, filler)
        predicted = rate * arrays.prim_count * 1.2
        if predicted > args.usd_budget_s:
            self.skipped.append(
                f"usd envs={envs} filler={filler}: predicted pxr build {predicted:.0f} s > "
                f"--usd-budget-s {args.usd_budget_s:.0f} s"
            )
            note(f"{where} {self.skipped[-1]} (not measured, not extrapolated)")
            return rate
        log(f"{where} USD (pxr), envs={envs} filler={filler:,}: authoring {arrays.prim_count:,} prims")
        t0 = time.perf_counter()
        with HostLoad() as load:
            usd_rows = measure_usd(arrays, args, self.timer, self.checks)
        self.scenes.append(
            {
                "envs": envs,
                "filler": filler,
                "stage_prims": arrays.prim_count,
                "methods": "usd",
                "measure_s": round(time.perf_counter() - t0, 1),
                "other_cpus_busy": load.other_cpus,
            }
        )
        build = next(r["median_s"] for r in usd_rows if r["metric"] == "build_stage")
        rate = build / arrays.prim_count
        self.rows += usd_rows
        log(f"{where} pxr stage {build:.1f} s, measured in {time.perf_counter() - t0:.1f} s")
        del arrays
        gc.collect()
        return rate

    def interleaved(self, envs: int) -> None:
        """The scoped slot rebuild on every filler size at once (see :func:`measure_interleaved`)."""
        where = self.next_step()
        log(f"{where} interleaved slot rebuild, envs={envs}, filler {self.args.filler}")
        t0 = time.perf_counter()
        with HostLoad() as load:
            self.rows += measure_interleaved(envs, self.args)
        self.scenes.append(
            {
                "envs": envs,
                "filler": "all",
                "methods": "scoped (interleaved slot rebuild)",
                "measure_s": round(time.perf_counter() - t0, 1),
                "other_cpus_busy": load.other_cpus,
            }
        )
        log(f"{where} measured in {time.perf_counter() - t0:.1f} s")


def _start(args: argparse.Namespace) -> int | None:
    """Warp up on the asked device, optional dependencies checked; an exit status when the run cannot go on."""
    wp.init()
    if args.device.startswith("cuda") and wp.get_cuda_device_count() == 0:
        print(f"--device {args.device}: no CUDA device is visible to Warp; use --device cpu", file=sys.stderr)
        return 2
    wp.get_device(args.device)  # raises on an unknown device
    if args._profile_child:
        return _profile_child(args)
    if _tqdm is None:
        note("tqdm is not installed: progress is logged every 10 s instead of shown as bars (pip install tqdm)")
    if not args.no_usd:
        try:
            from frameview import UsdFrameView  # noqa: F401 - the usd method needs pxr and the USD backend
        except ImportError as exc:
            note(f"the usd method is skipped: UsdFrameView is not importable ({exc})")
            args.no_usd = True
    return None


def _write(
    args: argparse.Namespace, sweep: Sweep, machine: dict, mode: str
) -> tuple[Path, Path, str, list[Path], dict]:
    """The JSON, the Markdown report, the plots and (``--profile``) the py-spy files of a finished sweep."""
    rows = sweep.rows
    args.out_dir.mkdir(parents=True, exist_ok=True)
    json_path = args.out_dir / f"{args.name}.json"
    settings = {
        "envs": args.envs,
        "filler": args.filler,
        "usd_filler": sweep.usd_fillers,
        "reps": args.reps,
        "budget_s": args.budget_s,
        "usd_budget_s": args.usd_budget_s,
        "quick": args.quick,
        "pattern": PATTERN,
        "baseline_paths": args.baseline_paths,
    }
    extra: dict[str, Any] = {
        "settings": settings,
        "scenes": sweep.scenes,
        "checks": sweep.checks,
        "skipped": sweep.skipped,
        "notes": NOTES,
    }
    profile_md = []
    if args.profile:
        profiles = run_profile(args, args.out_dir)
        extra["profiles"] = [p.name for p in profiles]
        profile_md = [f"## py-spy: {p.name}\n\n{summarize_speedscope(p)}" for p in profiles]
    report.write_json(json_path, machine, frameview.__version__, rows, **extra)
    header = (
        f"{mode}; {machine['device_name']} ({args.device}), provider {args.provider}; wall {machine['wall_s']:.0f} s; "
        f"git {machine.get('git_commit')}"
    )
    md_path = args.out_dir / f"{args.name}.md"
    md_path.write_text(report.markdown_report(rows, args.name, header) + "".join("\n" + m + "\n" for m in profile_md))
    written: list[Path] = []
    if not args.no_plots:
        try:
            written = plots.plot(rows, args.out_dir, args.name)
        except ImportError:
            note("matplotlib is not installed: no plots (pip install matplotlib)")
            report.write_json(json_path, machine, frameview.__version__, rows, **extra)
    return json_path, md_path, header, written, extra


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.from_json:
        return from_json(args.from_json, args.out_dir if args.plot else None)
    status = _start(args)
    if status is not None:
        return status
    usd_fillers = [] if args.no_usd else [f for f in args.filler if f in args.usd_filler]
    interleave = not args.no_interleave and len(args.filler) > 1
    mode = "quick (--full for the whole sweep)" if args.quick else "full sweep"
    log(
        f"{mode}: envs {args.envs}, filler {args.filler}, usd at filler {usd_fillers or 'none'}, "
        f"{args.device}, provider {args.provider}; writing to {_shown(args.out_dir)}/{args.name}.*"
    )
    t_start = time.perf_counter()
    machine = machine_info(args.device)
    sweep = Sweep(args, usd_fillers, interleave)
    sweep.run()
    machine["wall_s"] = round(time.perf_counter() - t_start, 1)
    machine["loadavg_1min_at_end"] = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    json_path, md_path, header, written, extra = _write(args, sweep, machine, mode)
    rows, checks = sweep.rows, sweep.checks
    bad = [c for c in checks if not c["ok"]]
    print(f"\n## {args.name}: {header}\n")
    print(report.short_table(rows))
    print(f"\nTargets at {max(args.envs):,} envs (CPU runs report the GPU-only targets without judging them):\n")
    print(short_targets(rows, envs=max(args.envs)))
    print(f"\n({SLOT_REBUILD_LEGEND}.)")
    checked = f"{len(checks) - len(bad)}/{len(checks)} pose checks against float64 truth passed"
    print(f"\n{checked}." if not bad else f"\n**{len(bad)} pose check(s) failed**: {bad}")
    print(f"\nEvery table: {_shown(md_path)}   rows: {_shown(json_path)}")
    if written:
        print(f"plots: {_shown(args.out_dir)}/{args.name}_<metric>.png ({len(written)} files)")
    for p in extra.get("profiles", []):
        print(f"profile: {_shown(args.out_dir / p)} (summary in {_shown(md_path)})")
    return 1 if bad else 0

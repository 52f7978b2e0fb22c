# SPDX-License-Identifier: Apache-2.0
"""Scaling harness: FabricFrameView's scoped selections against the stage-wide baseline, and against UsdFrameView.

For each (envs, filler, provider, device) it builds the scene of :mod:`harness.scenes` (N envs, each an env Xform, a
Robot and a Camera, plus ``filler`` unrelated xformables), views the N cameras (``/World/envs/env_.*/Robot/Camera``;
their N robots are the parents) and measures:

- ``build_stage``: building the Fabric model (``from_arrays``) or the pxr stage (Sdf authoring + open); one shot.
- ``resolve_pattern``: scoped = level-by-level resolution on the Fabric stage; stage_wide = full-match every path of
  the stage-wide selection; usd = the same resolver on the pxr stage.
- ``selection_size`` / ``selection_size_parents``: prims in the child / parent selection (count, ``value``).
- ``slot_rebuild_children`` / ``_parents`` / ``_full``: the slot table rebuilt as on every access. scoped =
  ``prepare_for_reuse()`` + count check + fabric arrays (when buckets changed) + one ``invert_tag_column`` launch
  over a selection requiring the view's tag; stage_wide = the PR's "develop" rebuild: a selection requiring only
  ``[worldMatrix, localMatrix]`` (children) or ``[worldMatrix]`` (parents), its paths (usdrt's ``GetPaths()``), a
  host dict path -> slot over all of them, the view's paths looked up in it and the slots copied to the device.
  Both run every rep (the stage-wide dict is rebuilt each time, as after every bucket change).
- ``first_access``: scoped = construct FabricFrameView (resolve + tag + selections) and one get_world_poses;
  stage_wide = resolve + parents + stage-wide rebuild of both tables + one gather read; usd = construct
  UsdFrameView and one get_world_poses.
- ``get_world_poses``, ``get_world_poses_indexed`` (every other prim), ``get_local_poses``, ``set_world_poses``
  (all prims, positions and orientations): the view's public calls.
- ``close`` and ``close_per_prim`` (close() time / tagged prims, children + parents).

Timing: ``time.perf_counter`` with ``wp.synchronize_device()`` before every clock read; one warm-up call excluded;
garbage collection disabled while timing; up to ``--reps`` reps, stopping early (after 3) once a metric has used
``--budget-s``. Median, min, max and the number of reps are reported.

Quick mode is the default: the 8192-env view on stages with 0 and 100k filler prims, USD at 0 filler, few reps
(< 2 min on 2 cores). ``--full`` switches to the whole sweep's defaults. ``--envs``, ``--filler`` and ``--reps``
override the defaults of either mode; a run with other sizes than its mode's defaults is named after them
(``cpu-quick-envs1024-filler0-10k``; another provider adds its name), so it never replaces the default run's
files. Results go to the git-ignored ``perf/out/`` unless a name under ``perf/results/`` is asked for
(``--save-as NAME``).

Examples::

    python perf/scaling.py                                  # quick: 8192 envs, filler 0 and 100k -> perf/out/
    python perf/scaling.py --full                           # envs 1024 8192, filler 0 10k 100k 1M -> perf/out/
    python perf/scaling.py --full --save-as cpu             # the same, written to perf/results/cpu.json + plots
    python perf/scaling.py --full --device cuda:0 --save-as h200 --usd-budget-s 40   # on a GPU
    python perf/scaling.py --envs 8192 --filler 1000000 --no-usd --profile   # py-spy profiles of the hot loops
    python perf/scaling.py --from-json perf/results/cpu.json perf/results/h200.json   # tables only, no run
    python perf/scaling.py --from-json perf/results/cpu.json --plot   # plots of a result file -> perf/out/
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from .fmt import format_count
from .scenes import PROVIDERS

PERF = Path(__file__).resolve().parents[1]
RESULTS = PERF / "results"  # committed results: written only when asked for by name
LOCAL_OUT = PERF / "out"  # git-ignored: the default for every run


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n\n".join(__doc__.split("\n\n")[1:]),
    )
    p.add_argument(
        "--full",
        action="store_true",
        help="the full sweep's defaults (~4 min on 2 cores): envs 1024 8192, filler 0 10k 100k 1M, 50 reps. Without "
        "it the quick defaults (< 2 min on 2 cores): envs 8192, filler 0 100k, 10 reps, USD at the smallest filler. "
        "--envs, --filler, --reps and the budgets override either",
    )
    p.add_argument("--quick", action="store_true", help=argparse.SUPPRESS)  # the default; kept for old commands
    p.add_argument("--envs", type=int, nargs="+", default=None, help="view sizes (quick: 8192; full: 1024 8192)")
    p.add_argument(
        "--filler",
        type=int,
        nargs="+",
        default=None,
        help="filler prim counts (quick: 0 100000; full: 0 10000 100000 1000000)",
    )
    p.add_argument("--device", default="cpu", help="Warp device: cpu or cuda:0 (default cpu)")
    p.add_argument("--provider", default="memory", choices=sorted(PROVIDERS), help="Fabric provider (default memory)")
    p.add_argument("--reps", type=int, default=None, help="max timed reps per metric (quick 10; full 50)")
    p.add_argument(
        "--budget-s",
        type=float,
        default=None,
        help="stop a metric after this many seconds once it has 3 reps (quick 1; full 3)",
    )
    p.add_argument(
        "--usd-budget-s",
        type=float,
        default=None,
        help="largest predicted pxr stage build for the usd method, seconds (quick 10; full 60)",
    )
    p.add_argument(
        "--usd-filler",
        type=int,
        nargs="+",
        default=None,
        help="filler sizes the usd method runs at (quick: the smallest --filler; full: every --filler)",
    )
    p.add_argument("--no-usd", action="store_true", help="skip the UsdFrameView (usd) method")
    p.add_argument(
        "--no-interleave",
        action="store_true",
        help="skip the interleaved slot-rebuild check (all filler sizes of the largest envs held at once)",
    )
    p.add_argument(
        "--baseline-paths",
        choices=["str", "sdf"],
        default="str",
        help="paths the stage-wide baseline builds its dict from: Python str (default; a lower bound) or pxr "
        "Sdf.Path objects converted with str() per path, as with usdrt's GetPaths()",
    )
    p.add_argument(
        "--save-as",
        default=None,
        metavar="NAME",
        help="write perf/results/NAME.json, NAME.md and NAME_<metric>.png: the committed results (e.g. cpu, h200). "
        "Without it nothing under perf/results/ is touched",
    )
    p.add_argument(
        "--name",
        default=None,
        help="output name (default: cpu-quick / cpu, cuda-quick / cuda, ..., plus the sizes when they are not the "
        "mode's defaults)",
    )
    p.add_argument("--out-dir", type=Path, default=None, help="output folder (default perf/out/, git-ignored)")
    p.add_argument("--no-plots", action="store_true", help="do not write PNG plots")
    p.add_argument(
        "--profile",
        action="store_true",
        help="after the sweep, py-spy the hot loops of the largest scene (speedscope files beside the JSON)",
    )
    p.add_argument("--profile-seconds", type=float, default=8.0, help="seconds per profiled phase (default 8)")
    p.add_argument(
        "--from-json",
        type=Path,
        nargs="+",
        default=None,
        help="print the tables and targets of existing result files (one target column each); no run",
    )
    p.add_argument("--plot", action="store_true", help="with --from-json: also write each file's plots to --out-dir")
    p.add_argument("--_profile-child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.save_as is not None:
        if args.name is not None or args.out_dir is not None:
            p.error("--save-as NAME writes perf/results/NAME.*: pass it without --name / --out-dir")
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", args.save_as):
            p.error(f"--save-as: expected a plain file name such as 'cpu' or 'h200', got {args.save_as!r}")
        args.name, args.out_dir = args.save_as, RESULTS
    args.out_dir = args.out_dir or LOCAL_OUT
    args.quick = not args.full
    default_envs = [8192] if args.quick else [1024, 8192]
    default_filler = [0, 100_000] if args.quick else [0, 10_000, 100_000, 1_000_000]
    args.envs = sorted(set(args.envs or default_envs))
    args.filler = sorted(set(args.filler or default_filler))
    args.usd_filler = sorted(set(args.usd_filler or (args.filler[:1] if args.quick else args.filler)))
    args.reps = args.reps or (10 if args.quick else 50)
    args.budget_s = args.budget_s if args.budget_s is not None else (1.0 if args.quick else 3.0)
    args.usd_budget_s = args.usd_budget_s if args.usd_budget_s is not None else (10.0 if args.quick else 60.0)
    base = "cpu" if args.device == "cpu" else re.sub(r"[^A-Za-z0-9]+", "", args.device.split(":")[0])
    sizes = ""  # a run of other sizes than its mode's defaults gets its own name
    if args.envs != default_envs or args.filler != default_filler:
        sizes = "-envs{}-filler{}".format("-".join(map(str, args.envs)), "-".join(format_count(f) for f in args.filler))
    if args.provider != "memory":
        sizes = f"-{args.provider}{sizes}"
    args.name = args.name or (f"{base}-quick{sizes}" if args.quick else f"{base}{sizes}")
    return args

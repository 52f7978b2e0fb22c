# SPDX-License-Identifier: Apache-2.0
"""Scaling harness: FabricFrameView's scoped selections against the stage-wide baseline, and against UsdFrameView.

For each (envs, filler, provider, device) it builds the scene of :mod:`_scene` (N envs, each an env Xform, a Robot
and a Camera, plus ``filler`` unrelated xformables), views the N cameras (``/World/envs/env_.*/Robot/Camera``; their
N robots are the parents) and measures:

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
(< 2 min on 2 cores). ``--full`` runs the whole sweep, whatever else is passed. Results go to the git-ignored
``perf/out/`` unless a name under ``perf/results/`` is asked for (``--save-as NAME``).

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
import contextlib
import datetime
import gc
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import warp as wp

# Warp's banner and module-load lines would go to stdout, into the Markdown
wp.config.quiet = True
if hasattr(wp, "LOG_WARNING"):  # Warp >= 1.19 gates them on the log level
    wp.config.log_level = wp.LOG_WARNING

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _report  # noqa: E402
from _scene import PATTERN, PROVIDERS, Scene, SceneArrays, build_usd_stage, scene_arrays  # noqa: E402

import frameview  # noqa: E402
from frameview.fabric.stage import LOCAL_MATRIX, WORLD_MATRIX  # noqa: E402
from frameview.kernels.transforms import decompose_matrix  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"  # committed results: written only when asked for by name
LOCAL_OUT = Path(__file__).resolve().parent / "out"  # git-ignored: the default for every run
NOTES: list[str] = []


def note(msg: str) -> None:
    """A note for stderr and for the JSON."""
    NOTES.append(msg)
    print(f"[scaling] note: {msg}", file=sys.stderr, flush=True)


def log(msg: str) -> None:
    print(f"[scaling] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------------- optional deps

try:
    from tqdm import tqdm as _tqdm
except ImportError:  # pragma: no cover - degrade to no bar
    _tqdm = None


class Progress:
    """Progress of one step: a tqdm bar when stderr is a terminal, else a ``[scaling]`` line every ``every_s`` s.

    In a log (stderr not a terminal, or no tqdm) a long step still says how far it got, without a bar's redraws.
    """

    every_s = 10.0

    def __init__(self, total: int, desc: str, unit: str = "it") -> None:
        self.total, self.desc, self.unit = total, desc, unit
        self.n, self.postfix = 0, ""
        self.t0 = self._last = time.perf_counter()
        self._bar = None
        if _tqdm is not None and sys.stderr.isatty():
            self._bar = _tqdm(total=total, desc=desc, unit=unit, leave=False, dynamic_ncols=True, file=sys.stderr)

    def update(self, n: int = 1) -> None:
        self.n += n
        if self._bar is not None:
            self._bar.update(n)
            return
        now = time.perf_counter()
        if now - self._last >= self.every_s:
            self._last = now
            post = f", {self.postfix}" if self.postfix else ""
            log(f"  {self.desc}: {self.n:,}/{self.total:,} {self.unit} after {now - self.t0:.0f} s{post}")

    def set_postfix_str(self, s: str) -> None:
        self.postfix = s
        if self._bar is not None:
            self._bar.set_postfix_str(s)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def bar(total: int, desc: str, unit: str = "it") -> Progress:
    """Progress of one step (see :class:`Progress`)."""
    return Progress(total, desc, unit)


# ---------------------------------------------------------------------------------------------------- kernels


@wp.kernel
def gather_world_poses(
    # inputs
    mats: wp.fabricarray(dtype=wp.mat44d),
    slots: wp.array(dtype=wp.int32),
    # outputs
    pos_out: wp.array(dtype=wp.vec3f),
    quat_out: wp.array(dtype=wp.quatf),
):
    """The stage-wide baseline's read: ``pos_out[i], quat_out[i] = decompose(mats[slots[i]])``."""
    i = wp.tid()
    t, q, _s = decompose_matrix(mats[slots[i]])
    pos_out[i] = wp.vec3f(t)
    quat_out[i] = wp.quatf(q)


# ---------------------------------------------------------------------------------------------------- timing


class Timer:
    """Times callables with device synchronisation before every clock read."""

    def __init__(self, device: str, reps: int, budget_s: float, min_reps: int = 3) -> None:
        self.device = device
        self.reps = reps
        self.budget_s = budget_s
        self.min_reps = min(min_reps, reps)

    def sync(self) -> None:
        wp.synchronize_device(self.device)

    def __call__(
        self,
        fn: Callable[[], Any],
        *,
        setup: Callable[[], Any] | None = None,
        teardown: Callable[[], Any] | None = None,
        reps: int | None = None,
        warmup: int = 1,
    ) -> dict:
        """Median / min / max seconds of ``fn()``; ``setup`` / ``teardown`` run around each call, untimed."""
        reps = reps or self.reps
        for _ in range(warmup):
            if setup:
                setup()
            fn()
            self.sync()
            if teardown:
                teardown()
        times: list[float] = []
        gc.collect()
        gc.disable()
        start = time.perf_counter()
        try:
            while len(times) < reps:
                if setup:
                    setup()
                self.sync()
                t0 = time.perf_counter()
                fn()
                self.sync()
                times.append(time.perf_counter() - t0)
                if teardown:
                    teardown()
                if len(times) >= self.min_reps and time.perf_counter() - start > self.budget_s:
                    break
        finally:
            gc.enable()
        return {"median_s": statistics.median(times), "min_s": min(times), "max_s": max(times), "reps": len(times)}


# ---------------------------------------------------------------------------------------------------- slot tables


class ScopedRebuild:
    """The scoped slot-table rebuild exactly as FabricFrameView runs it on every access, through the view's own
    seam :meth:`FabricFrameView.rebuild_slot_table` (``prepare_for_reuse()``, the count check, fabric arrays rebuilt
    only when buckets changed, and the one ``invert_tag_column`` launch, replayed as a CUDA graph once buckets are
    stable)."""

    def __init__(self, view: Any, parents: bool) -> None:
        self.view, self.parents = view, parents
        self.slots, world = view.rebuild_slot_table(parents)
        self.arrays = {WORLD_MATRIX: world}

    def __call__(self) -> None:
        self.view.rebuild_slot_table(self.parents)

    def selection_size(self) -> int:
        return self.view.selection_size(self.parents)


class StageWideRebuild:
    """The PR's "develop" rebuild: a stage-wide selection and a host dict over every path it holds."""

    def __init__(self, scene: Scene, require: tuple[str, ...], lookup: Sequence[str], write: bool) -> None:
        self.scene, self.require, self.lookup = scene, require, list(lookup)
        self.sel = scene.fabric.select(list(require), write=write)
        self.arrays: dict[str, Any] = {}
        self.slots = wp.empty(max(len(self.lookup), 1), dtype=wp.int32, device=scene.device)

    def __call__(self) -> None:
        sel = self.sel
        try:
            changed = sel.prepare_for_reuse()
            if changed or not self.arrays:
                self.arrays = {name: wp.fabricarray(sel, name) for name in self.require}
            path_to_idx = {str(p): i for i, p in enumerate(self.scene.selection_paths(sel))}
            host = np.fromiter((path_to_idx[p] for p in self.lookup), dtype=np.int32, count=len(self.lookup))
            self.slots.assign(host)
        finally:
            sel.release()

    def selection_size(self) -> int:
        self.sel.prepare_for_reuse()
        n = self.sel.count
        self.sel.release()
        return n


def _as_sdf_paths(selection_paths: Callable[[Any], list[str]]) -> Callable[[Any], list[Any]]:
    """``--baseline-paths sdf``: hand the baseline ``Sdf.Path`` objects, as usdrt's ``GetPaths()`` does."""
    from pxr import Sdf

    def paths(sel: Any) -> list[Any]:
        return [Sdf.Path(p) for p in selection_paths(sel)]

    return paths


def stage_wide_first_access(scene: Scene, pos: wp.array, quat: wp.array) -> None:
    """develop's first access: resolve, find parents, build both slot tables stage-wide, read once."""
    from frameview import resolve_prim_paths

    fabric = scene.fabric
    with fabric.lock:
        paths = resolve_prim_paths(PATTERN, fabric)
        parents = list(dict.fromkeys(p for p in fabric.xform_parents(paths) if p is not None))
        children = StageWideRebuild(scene, (WORLD_MATRIX, LOCAL_MATRIX), paths, write=True)
        children()
        StageWideRebuild(scene, (WORLD_MATRIX,), parents, write=False)()
        wp.launch(
            gather_world_poses,
            dim=len(paths),
            inputs=[children.arrays[WORLD_MATRIX], children.slots],
            outputs=[pos, quat],
            device=scene.device,
        )


def stage_wide_resolve(scene: Scene, sel: Any) -> list[str]:
    """Baseline pattern resolution: list every path of the stage-wide selection and full-match each component."""
    matchers = [re.compile(c) for c in PATTERN[1:].split("/")]
    depth = len(matchers)
    out = []
    sel.prepare_for_reuse()
    try:
        for p in scene.selection_paths(sel):
            path = str(p)
            names = path[1:].split("/")
            if len(names) == depth and all(m.fullmatch(n) for m, n in zip(matchers, names, strict=True)):
                out.append(path)
    finally:
        sel.release()
    return out


# ---------------------------------------------------------------------------------------------------- measurements


def _row(scene_key: dict, method: str, metric: str, result: dict | int | float) -> dict:
    row = dict(scene_key, method=method, metric=metric)
    if isinstance(result, dict):
        row.update(result)
    else:
        row["value"] = result
    return row


def check_poses(arrays: SceneArrays, pos: np.ndarray, quat: np.ndarray, what: str) -> dict:
    """Compare camera world poses to the float64 truth of the scene arrays."""
    from _scene import _row_rotations_to_quats

    world = arrays.camera_world()
    rot = world[:, :3, :3] / np.linalg.norm(world[:, :3, :3], axis=2)[:, :, None]
    q_ref = _row_rotations_to_quats(rot)
    pos_err = float(np.abs(pos - world[:, 3, :3]).max())
    quat_err = float((1.0 - np.abs(np.sum(quat * q_ref, axis=1))).max())
    ok = pos_err < 1e-3 and quat_err < 1e-5
    if not ok:
        note(f"{what}: world poses differ from the float64 truth (pos {pos_err:.2e}, quat {quat_err:.2e})")
    return {"what": what, "max_pos_err": pos_err, "max_quat_err": quat_err, "ok": ok}


def measure_fabric(scene: Scene, args: argparse.Namespace, timer: Timer, checks: list[dict]) -> list[dict]:
    """Every scoped and stage-wide metric on one built scene."""
    from frameview import FabricFrameView, resolve_prim_paths

    a = scene.arrays
    device = scene.device
    key = {
        "envs": a.envs,
        "filler": a.filler,
        "stage_prims": a.prim_count,
        "provider": scene.provider,
        "device": device,
    }
    rows = [
        _row(
            key,
            "scoped",
            "build_stage",
            {"median_s": scene.build_s, "min_s": scene.build_s, "max_s": scene.build_s, "reps": 1},
        )
    ]
    fabric = scene.fabric
    heavy = max(3, min(args.reps, 5)) if a.prim_count > 200_000 else None
    steps = bar(17, f"measure envs={a.envs} filler={a.filler:,}", "metrics")

    def done(metric: str) -> None:
        steps.update()
        steps.set_postfix_str(metric)

    def view() -> FabricFrameView:
        return FabricFrameView(PATTERN, stage=scene.stage, device=device, fabric_provider=scene.provider)

    # path resolution
    rows.append(_row(key, "scoped", "resolve_pattern", timer(lambda: resolve_prim_paths(PATTERN, fabric))))
    done("resolve_pattern")
    wide_sel = fabric.select([WORLD_MATRIX, LOCAL_MATRIX], write=False)
    if stage_wide_resolve(scene, wide_sel) != resolve_prim_paths(PATTERN, fabric):
        raise RuntimeError(f"scoped and stage-wide resolution of {PATTERN!r} disagree at {a.envs}/{a.filler}")
    rows.append(
        _row(key, "stage_wide", "resolve_pattern", timer(lambda: stage_wide_resolve(scene, wide_sel), reps=heavy))
    )
    done("resolve_pattern (stage-wide)")

    # first access: construct + first read; close untimed
    held: list[Any] = []

    def first_access() -> None:
        v = view()
        v.get_world_poses()
        held.append(v)

    rows.append(_row(key, "scoped", "first_access", timer(first_access, teardown=lambda: held.pop().close())))
    done("first_access")
    pos_buf = wp.empty(a.envs, dtype=wp.vec3f, device=device)
    quat_buf = wp.empty(a.envs, dtype=wp.quatf, device=device)
    rows.append(
        _row(
            key,
            "stage_wide",
            "first_access",
            timer(lambda: stage_wide_first_access(scene, pos_buf, quat_buf), reps=heavy),
        )
    )
    checks.append(check_poses(a, pos_buf.numpy(), quat_buf.numpy(), f"stage_wide {a.envs}/{a.filler}"))
    done("first_access (stage-wide)")

    # close(): construct untimed, close timed
    tagged: list[int] = []

    def make() -> None:
        v = view()
        tagged.append(v.count + len(v.parent_paths))
        held.append(v)

    close = timer(lambda: held.pop().close(), setup=make, reps=heavy)
    per = tagged[-1]
    rows.append(_row(key, "scoped", "close", close))
    rows.append(
        _row(
            key,
            "scoped",
            "close_per_prim",
            {
                "median_s": close["median_s"] / per,
                "min_s": close["min_s"] / per,
                "max_s": close["max_s"] / per,
                "reps": close["reps"],
            },
        )
    )
    done("close")

    # one live view for the steady-state metrics
    v = view()
    try:
        pos, quat = v.get_world_poses()
        checks.append(check_poses(a, pos.numpy(), quat.numpy(), f"scoped {a.envs}/{a.filler}"))
        with fabric.lock:
            child = ScopedRebuild(v, parents=False)
            parent = ScopedRebuild(v, parents=True)
            wide_child = StageWideRebuild(scene, (WORLD_MATRIX, LOCAL_MATRIX), v.prim_paths, write=True)
            wide_parent = StageWideRebuild(scene, (WORLD_MATRIX,), v.parent_paths, write=False)
            rows.append(_row(key, "scoped", "selection_size", child.selection_size()))
            rows.append(_row(key, "scoped", "selection_size_parents", parent.selection_size()))
            rows.append(_row(key, "stage_wide", "selection_size", wide_child.selection_size()))
            rows.append(_row(key, "stage_wide", "selection_size_parents", wide_parent.selection_size()))
            done("selection_size")
            for method, c, p in (("scoped", child, parent), ("stage_wide", wide_child, wide_parent)):
                r = None if method == "scoped" else heavy
                rows.append(_row(key, method, "slot_rebuild_children", timer(c, reps=r)))
                done(f"slot_rebuild_children ({method})")
                rows.append(_row(key, method, "slot_rebuild_parents", timer(p, reps=r)))
                done(f"slot_rebuild_parents ({method})")
                rows.append(_row(key, method, "slot_rebuild_full", timer(lambda c=c, p=p: (c(), p()), reps=r)))
                done(f"slot_rebuild_full ({method})")
            # both slot tables point at the right prims: read the cameras through each, check against the truth
            for method, table in (("scoped", child), ("stage_wide", wide_child)):
                wp.launch(
                    gather_world_poses,
                    dim=v.count,
                    inputs=[table.arrays[WORLD_MATRIX], table.slots],
                    outputs=[pos_buf, quat_buf],
                    device=device,
                )
                checks.append(check_poses(a, pos_buf.numpy(), quat_buf.numpy(), f"{method} slots {a.envs}/{a.filler}"))
        rows.append(_row(key, "scoped", "get_world_poses", timer(v.get_world_poses)))
        done("get_world_poses")
        idx = wp.array(np.arange(0, v.count, 2, dtype=np.int32), dtype=wp.int32, device=device)
        rows.append(_row(key, "scoped", "get_world_poses_indexed", timer(lambda: v.get_world_poses(idx))))
        done("get_world_poses_indexed")
        rows.append(_row(key, "scoped", "get_local_poses", timer(v.get_local_poses)))
        done("get_local_poses")
        p0, q0 = (wp.clone(x) for x in v.get_world_poses())
        rows.append(_row(key, "scoped", "set_world_poses", timer(lambda: v.set_world_poses(p0, q0))))
        done("set_world_poses")
        pos, quat = v.get_world_poses()
        checks.append(check_poses(a, pos.numpy(), quat.numpy(), f"scoped after set {a.envs}/{a.filler}"))
    finally:
        v.close()
        steps.close()
    return rows


def measure_interleaved(envs: int, args: argparse.Namespace, rounds: int = 20, per_round: int = 25) -> list[dict]:
    """The scoped slot rebuild on every filler size at once, in interleaved rounds.

    All scenes of one envs value are held together and measured in turn, round after round, so that anything else
    running on the host slows every stage size alike: the flatness check (max/min over stage sizes) then compares
    stage sizes, not moments. Metrics ``slot_rebuild_children_interleaved`` / ``slot_rebuild_parents_interleaved``.
    """
    from frameview import FabricFrameView

    cases = []
    try:
        for filler in args.filler:
            scene = PROVIDERS[args.provider].build(scene_arrays(envs, filler), args.device)
            v = FabricFrameView(PATTERN, stage=scene.stage, device=scene.device, fabric_provider=scene.provider)
            with scene.fabric.lock:
                child = ScopedRebuild(v, parents=False)
                parent = ScopedRebuild(v, parents=True)
            cases.append(
                (scene, v, {"slot_rebuild_children_interleaved": child, "slot_rebuild_parents_interleaved": parent})
            )
        samples: dict[tuple[int, str], list[float]] = {}
        sync = Timer(args.device, 1, 0.0).sync
        for fn in (fn for _, _, fns in cases for fn in fns.values()):
            fn()  # warm-up
        gc.collect()
        gc.disable()
        try:
            with bar(rounds, f"interleaved rebuild, envs={envs}", "rounds") as b:
                for _ in range(rounds):
                    for scene, _v, fns in cases:
                        with scene.fabric.lock:
                            for metric, fn in fns.items():
                                out = samples.setdefault((scene.arrays.filler, metric), [])
                                for _ in range(per_round):
                                    sync()
                                    t0 = time.perf_counter()
                                    fn()
                                    sync()
                                    out.append(time.perf_counter() - t0)
                    b.update()
        finally:
            gc.enable()
        rows = []
        for scene, _v, fns in cases:
            a = scene.arrays
            key = {
                "envs": a.envs,
                "filler": a.filler,
                "stage_prims": a.prim_count,
                "provider": scene.provider,
                "device": scene.device,
            }
            for metric in fns:
                t = samples[(a.filler, metric)]
                rows.append(
                    _row(
                        key,
                        "scoped",
                        metric,
                        {"median_s": statistics.median(t), "min_s": min(t), "max_s": max(t), "reps": len(t)},
                    )
                )
        return rows
    finally:
        for _scene, v, _fns in cases:
            v.close()
        cases.clear()
        gc.collect()


def measure_usd(arrays: SceneArrays, args: argparse.Namespace, timer: Timer, checks: list[dict]) -> list[dict]:
    """UsdFrameView on a pxr stage of the same scene."""
    from frameview import UsdFrameView, resolve_prim_paths

    with bar(arrays.prim_count, f"author pxr envs={arrays.envs} filler={arrays.filler:,}", "prims") as b:
        stage, author_s, open_s = build_usd_stage(arrays, b.update)
    key = {
        "envs": arrays.envs,
        "filler": arrays.filler,
        "stage_prims": arrays.prim_count,
        "provider": "pxr",
        "device": args.device,
    }
    build = author_s + open_s
    rows = [
        _row(key, "usd", "build_stage", {"median_s": build, "min_s": build, "max_s": build, "reps": 1}),
        _row(key, "usd", "build_stage_author", {"median_s": author_s, "min_s": author_s, "max_s": author_s, "reps": 1}),
        _row(key, "usd", "build_stage_open", {"median_s": open_s, "min_s": open_s, "max_s": open_s, "reps": 1}),
    ]
    few = max(3, min(args.reps, 5))
    rows.append(_row(key, "usd", "resolve_pattern", timer(lambda: resolve_prim_paths(PATTERN, stage), reps=few)))

    def first_access() -> None:
        UsdFrameView(PATTERN, stage=stage, device=args.device).get_world_poses()

    rows.append(_row(key, "usd", "first_access", timer(first_access, reps=few)))
    v = UsdFrameView(PATTERN, stage=stage, device=args.device)
    try:
        pos, quat = v.get_world_poses()
        checks.append(check_poses(arrays, pos.numpy(), quat.numpy(), f"usd {arrays.envs}/{arrays.filler}"))
        rows.append(_row(key, "usd", "get_world_poses", timer(v.get_world_poses, reps=few)))
        rows.append(_row(key, "usd", "get_local_poses", timer(v.get_local_poses, reps=few)))
        p0, q0 = (wp.clone(x) for x in v.get_world_poses())
        rows.append(_row(key, "usd", "set_world_poses", timer(lambda: v.set_world_poses(p0, q0), reps=few)))
    finally:
        v.close()
    return rows


# ---------------------------------------------------------------------------------------------------- machine


class HostLoad:
    """CPU time other processes used while a block ran, in CPUs (1.0 = one core fully busy), from /proc/stat.

    The 2-core development VM is shared: another process on the sibling hardware thread slows every measurement
    (up to ~1.8x here), so each scene records how busy the rest of the machine was while it was measured.
    """

    def __enter__(self) -> HostLoad:
        self.other_cpus: float | None = None
        self._start = self._sample()
        return self

    def __exit__(self, *exc: object) -> None:
        end = self._sample()
        if self._start is None or end is None:
            return
        (w0, busy0, own0), (w1, busy1, own1) = self._start, end
        if w1 > w0:
            self.other_cpus = round(max(0.0, (busy1 - busy0) - (own1 - own0)) / (w1 - w0), 2)

    @staticmethod
    def _sample() -> tuple[float, float, float] | None:
        try:
            with open("/proc/stat") as f:
                fields = [int(x) for x in f.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        busy = (sum(fields[:8]) - fields[3] - fields[4]) / hz  # all but idle and iowait
        t = os.times()
        return time.perf_counter(), busy, t.user + t.system


def machine_info(device: str) -> dict:
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    mem = None
    try:
        with open("/proc/meminfo") as f:
            mem = round(int(next(ln for ln in f if ln.startswith("MemTotal")).split()[1]) / 2**20, 1)
    except (OSError, StopIteration):
        pass
    info: dict[str, Any] = {
        "hostname": platform.node(),
        "platform": platform.platform(),
        "cpu": cpu,
        "logical_cpus": os.cpu_count(),
        "memory_gib": mem,
        "loadavg_1min_at_start": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "warp": wp.config.version,
        "device": device,
        "device_name": wp.get_device(device).name,
        "cuda_devices": wp.get_cuda_device_count(),
        "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "argv": sys.argv[1:],
    }
    try:
        from pxr import Usd

        info["usd"] = ".".join(map(str, Usd.GetVersion()))
    except ImportError:
        info["usd"] = None
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            cwd=Path(__file__).parent,
        )
        info["git_commit"] = commit.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        info["git_commit"] = None
    if device.startswith("cuda"):
        d = wp.get_device(device)
        info["device_memory_gib"] = round(getattr(d, "total_memory", 0) / 2**30, 1)
    return info


# ---------------------------------------------------------------------------------------------------- profile


def _profile_child(args: argparse.Namespace) -> int:
    """Child of ``--profile``: build the scene, then run each hot loop when the parent says "go" on stdin."""
    from frameview import FabricFrameView

    envs, filler = args.envs[-1], args.filler[-1]
    scene = PROVIDERS[args.provider].build(scene_arrays(envs, filler), args.device)
    device = scene.device
    v = FabricFrameView(PATTERN, stage=scene.stage, device=device, fabric_provider=scene.provider)
    p0, q0 = (wp.clone(x) for x in v.get_world_poses())
    child = ScopedRebuild(v, parents=False)
    wide = StageWideRebuild(scene, (WORLD_MATRIX, LOCAL_MATRIX), v.prim_paths, write=True)

    def scoped_loop() -> None:
        for _ in range(20):
            v.get_world_poses()
            wp.synchronize_device(device)
        for _ in range(20):
            child()
            wp.synchronize_device(device)
        for _ in range(5):
            v.set_world_poses(p0, q0)
            wp.synchronize_device(device)
        w = FabricFrameView(PATTERN, stage=scene.stage, device=device, fabric_provider=scene.provider)
        w.get_world_poses()
        wp.synchronize_device(device)
        w.close()

    def wide_loop() -> None:
        wide()
        wp.synchronize_device(device)

    for phase, loop in (("scoped", scoped_loop), ("stage_wide", wide_loop)):
        print(f"READY {phase}", flush=True)
        if sys.stdin.readline().strip() != "go":
            return 1
        end = time.perf_counter() + args.profile_seconds
        while time.perf_counter() < end:
            loop()
        print(f"DONE {phase}", flush=True)
    v.close()
    return 0


def _next_protocol_line(child: subprocess.Popen) -> str:
    """The child's next READY/DONE line (anything else it prints is skipped); '' at end of output."""
    for line in child.stdout:
        if line.startswith(("READY ", "DONE ")):
            return line.strip()
    return ""


def run_profile(args: argparse.Namespace, out_dir: Path) -> list[Path]:
    """Profile the hot loops of the largest scene with py-spy, attached once the scene is built."""
    pyspy = shutil.which("py-spy")
    if pyspy is None:
        note("--profile: py-spy is not installed (pip install py-spy); no profile written")
        return []
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--_profile-child",
        "--envs",
        str(args.envs[-1]),
        "--filler",
        str(args.filler[-1]),
        "--device",
        args.device,
        "--provider",
        args.provider,
        "--profile-seconds",
        str(args.profile_seconds),
    ]
    log(f"profiling envs={args.envs[-1]} filler={args.filler[-1]:,} with py-spy ({args.profile_seconds:.0f} s/phase)")
    child = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    written: list[Path] = []
    try:
        for phase in ("scoped", "stage_wide"):
            line = _next_protocol_line(child)
            if line != f"READY {phase}":
                note(f"--profile: child said {line!r}, expected 'READY {phase}'")
                break
            path = out_dir / f"{args.name}-profile-{phase}.speedscope.json"
            spy = subprocess.Popen(
                [
                    pyspy,
                    "record",
                    "--pid",
                    str(child.pid),
                    "-o",
                    str(path),
                    "--format",
                    "speedscope",
                    "--rate",
                    "200",
                    "--nonblocking",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            time.sleep(1.5)  # let py-spy attach
            child.stdin.write("go\n")
            child.stdin.flush()
            line = _next_protocol_line(child)
            spy.send_signal(signal.SIGINT)
            try:
                _, err = spy.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                spy.kill()
                _, err = spy.communicate()
            if path.exists():
                written.append(path)
                log(f"profile written: {path}")
            else:
                note(f"--profile: py-spy wrote no file for {phase}: {err.strip()[-300:]}")
    finally:
        if child.poll() is None:
            with contextlib.suppress(OSError):
                child.stdin.close()
            try:
                child.wait(timeout=30)
            except subprocess.TimeoutExpired:
                child.kill()
    return written


# ---------------------------------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n\n".join(__doc__.split("\n\n")[1:]),
    )
    p.add_argument(
        "--full",
        action="store_true",
        help="the full sweep (~4 min on 2 cores): envs 1024 8192, filler 0 10k 100k 1M, 50 reps. Without it the "
        "run is quick, whatever else is passed: envs 8192, filler 0 100k, 10 reps (< 2 min on 2 cores)",
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
    p.add_argument("--name", default=None, help="output name (default: cpu-quick / cpu, cuda-quick / cuda, ...)")
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
    args.envs = args.envs or ([8192] if args.quick else [1024, 8192])
    args.filler = args.filler or ([0, 100_000] if args.quick else [0, 10_000, 100_000, 1_000_000])
    args.envs, args.filler = sorted(set(args.envs)), sorted(set(args.filler))
    args.usd_filler = sorted(set(args.usd_filler or (args.filler[:1] if args.quick else args.filler)))
    args.reps = args.reps or (10 if args.quick else 50)
    args.budget_s = args.budget_s if args.budget_s is not None else (1.0 if args.quick else 3.0)
    args.usd_budget_s = args.usd_budget_s if args.usd_budget_s is not None else (10.0 if args.quick else 60.0)
    base = "cpu" if args.device == "cpu" else re.sub(r"[^A-Za-z0-9]+", "", args.device.split(":")[0])
    args.name = args.name or (f"{base}-quick" if args.quick else base)
    return args


def from_json(paths: list[Path], plot_dir: Path | None = None) -> int:
    runs = {}
    for path in paths:
        data = _report.read_json(path)
        runs[Path(path).stem] = data["rows"]
    for name, rows in runs.items():
        print(f"\n## {name}\n\n{_report.short_table(rows)}\n\n{_report.summary_table(rows)}")
        print(f"\n{_report.pr_table(rows)}")
        if plot_dir is not None:
            written = _report.plot(rows, plot_dir, name)
            print("\nplots: " + ", ".join(_shown(p) for p in written))
    print(f"\n## Targets\n\n{_report.targets_table(runs)}")
    return 0


def _shown(path: Path) -> str:
    """A path as the user would type it: relative to the working directory when it is below it."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.from_json:
        return from_json(args.from_json, args.out_dir if args.plot else None)
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
    usd_fillers = [] if args.no_usd else [f for f in args.filler if f in args.usd_filler]
    interleave = not args.no_interleave and len(args.filler) > 1
    steps_total = len(args.envs) * (len(args.filler) + len(usd_fillers)) + int(interleave)
    step = 0

    def next_step() -> str:
        nonlocal step
        step += 1
        return f"[{step}/{steps_total}]"

    mode = "quick (--full for the whole sweep)" if args.quick else "full sweep"
    log(
        f"{mode}: envs {args.envs}, filler {args.filler}, usd at filler {usd_fillers or 'none'}, "
        f"{args.device}, provider {args.provider}; writing to {_shown(args.out_dir)}/{args.name}.*"
    )
    t_start = time.perf_counter()
    machine = machine_info(args.device)
    timer = Timer(args.device, args.reps, args.budget_s)
    rows: list[dict] = []
    checks: list[dict] = []
    skipped: list[str] = []
    scenes: list[dict] = []
    for envs in args.envs:
        for filler in args.filler:
            t0 = time.perf_counter()
            arrays = scene_arrays(envs, filler)
            t_arrays = time.perf_counter() - t0
            where = next_step()
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
                rows += measure_fabric(scene, args, timer, checks)
            measured = time.perf_counter() - t1
            scenes.append(
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
        rate = 60e-6  # seconds per authored prim, refined by each build
        for filler in usd_fillers:
            where = next_step()
            arrays = scene_arrays(envs, filler)
            predicted = rate * arrays.prim_count * 1.2
            if predicted > args.usd_budget_s:
                skipped.append(
                    f"usd envs={envs} filler={filler}: predicted pxr build {predicted:.0f} s > "
                    f"--usd-budget-s {args.usd_budget_s:.0f} s"
                )
                note(f"{where} {skipped[-1]} (not measured, not extrapolated)")
                continue
            log(f"{where} USD (pxr), envs={envs} filler={filler:,}: authoring {arrays.prim_count:,} prims")
            t0 = time.perf_counter()
            with HostLoad() as load:
                usd_rows = measure_usd(arrays, args, timer, checks)
            scenes.append(
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
            rows += usd_rows
            log(f"{where} pxr stage {build:.1f} s, measured in {time.perf_counter() - t0:.1f} s")
            del arrays
            gc.collect()

    if interleave:
        envs = max(args.envs)
        where = next_step()
        log(f"{where} interleaved slot rebuild, envs={envs}, filler {args.filler}")
        t0 = time.perf_counter()
        with HostLoad() as load:
            rows += measure_interleaved(envs, args)
        scenes.append(
            {
                "envs": envs,
                "filler": "all",
                "methods": "scoped (interleaved slot rebuild)",
                "measure_s": round(time.perf_counter() - t0, 1),
                "other_cpus_busy": load.other_cpus,
            }
        )
        log(f"{where} measured in {time.perf_counter() - t0:.1f} s")
    machine["wall_s"] = round(time.perf_counter() - t_start, 1)
    machine["loadavg_1min_at_end"] = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    args.out_dir.mkdir(parents=True, exist_ok=True)
    json_path = args.out_dir / f"{args.name}.json"
    settings = {
        "envs": args.envs,
        "filler": args.filler,
        "usd_filler": usd_fillers,
        "reps": args.reps,
        "budget_s": args.budget_s,
        "usd_budget_s": args.usd_budget_s,
        "quick": args.quick,
        "pattern": PATTERN,
        "baseline_paths": args.baseline_paths,
    }
    extra: dict[str, Any] = {
        "settings": settings,
        "scenes": scenes,
        "checks": checks,
        "skipped": skipped,
        "notes": NOTES,
    }
    profile_md = []
    if args.profile:
        profiles = run_profile(args, args.out_dir)
        extra["profiles"] = [p.name for p in profiles]
        profile_md = [f"## py-spy: {p.name}\n\n{_report.summarize_speedscope(p)}" for p in profiles]
    _report.write_json(json_path, machine, frameview.__version__, rows, **extra)
    header = (
        f"{mode}; {machine['device_name']} ({args.device}), provider {args.provider}; wall {machine['wall_s']:.0f} s; "
        f"git {machine.get('git_commit')}"
    )
    md_path = args.out_dir / f"{args.name}.md"
    md_path.write_text(_report.markdown_report(rows, args.name, header) + "".join("\n" + m + "\n" for m in profile_md))
    written: list[Path] = []
    if not args.no_plots:
        try:
            written = _report.plot(rows, args.out_dir, args.name)
        except ImportError:
            note("matplotlib is not installed: no plots (pip install matplotlib)")
            _report.write_json(json_path, machine, frameview.__version__, rows, **extra)
    bad = [c for c in checks if not c["ok"]]
    print(f"\n## {args.name}: {header}\n")
    print(_report.short_table(rows))
    print(f"\nTargets at {max(args.envs):,} envs (CPU runs report the GPU-only targets without judging them):\n")
    print(_report.short_targets(rows, envs=max(args.envs)))
    checked = f"{len(checks) - len(bad)}/{len(checks)} pose checks against float64 truth passed"
    print(f"\n{checked}." if not bad else f"\n**{len(bad)} pose check(s) failed**: {bad}")
    print(f"\nEvery table: {_shown(md_path)}   rows: {_shown(json_path)}")
    if written:
        print(f"plots: {_shown(args.out_dir)}/{args.name}_<metric>.png ({len(written)} files)")
    for p in extra.get("profiles", []):
        print(f"profile: {_shown(args.out_dir / p)} (summary in {_shown(md_path)})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

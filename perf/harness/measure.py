# SPDX-License-Identifier: Apache-2.0
"""The measurements of one scene: scoped and stage-wide on a Fabric stage, the interleaved slot rebuild, and USD."""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from typing import Any

import numpy as np
import warp as wp

from frameview.fabric.stage import LOCAL_MATRIX, WORLD_MATRIX

from .baselines import ScopedRebuild, StageWideRebuild, gather_world_poses, stage_wide_first_access, stage_wide_resolve
from .console import bar
from .scenes import PATTERN, PROVIDERS, Scene, SceneArrays, build_usd_stage, check_poses, scene_arrays
from .timing import Timer


def _row(scene_key: dict, method: str, metric: str, result: dict | int | float) -> dict:
    row = dict(scene_key, method=method, metric=metric)
    if isinstance(result, dict):
        row.update(result)
    else:
        row["value"] = result
    return row


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


def measure_interleaved(envs: int, args: argparse.Namespace, passes: int = 20, per_pass: int = 25) -> list[dict]:
    """The scoped slot rebuild on every filler size at once, in interleaved passes.

    All scenes of one envs value are held together and measured in turn, pass after pass, so that anything else
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
            with bar(passes, f"interleaved rebuild, envs={envs}", "passes") as b:
                for _ in range(passes):
                    for scene, _v, fns in cases:
                        with scene.fabric.lock:
                            for metric, fn in fns.items():
                                out = samples.setdefault((scene.arrays.filler, metric), [])
                                for _ in range(per_pass):
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

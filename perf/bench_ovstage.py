# SPDX-License-Identifier: Apache-2.0
"""Benchmark the ovstage provider (real Fabric, no Kit) against the embedded Fabric model on the same scene.

The scene is the scaling harness's (:mod:`harness.scenes`): N envs of ``env_i/Robot/Camera`` plus filler Xforms up to
``--stage-prims`` prims. The memory model is built from the arrays (``MemoryFabricStage.from_arrays``); the ovstage
stage is populated from the same scene authored in pxr and exported to a USDA string. A FabricFrameView over the N
cameras (``/World/envs/env_.*/Robot/Camera``) is measured on both providers:

- ``build_stage``: model from arrays / pxr authoring + USDA export + ovstage population (one shot; parts in
  ``stages``).
- ``resolve_pattern``: level-by-level pattern resolution through the provider (``child_names`` / ``has_prim``).
- ``first_access``: construct the view (resolve, validate, parents, tag) and one ``get_world_poses``.
- ``tag`` / ``untag``: ``set_uint_attribute`` / ``remove_attribute`` of one uint attribute over the N cameras.
- ``slot_rebuild`` / ``slot_rebuild_parents``: the per-access slot table, as the view does it: ``prepare_for_reuse``,
  count check, fabric arrays when the buckets changed, one ``invert_tag_column`` launch, ``release``.
- ``get_world_poses`` (full), ``get_world_poses_indexed`` (every other prim), ``get_local_poses``,
  ``set_world_poses`` (positions and orientations of all N).
- ovstage on the CPU only, ``*_gathered``: the same with the columns gathered into staging buffers first
  (``OvstageFabricStage.zero_copy = False``: what a CUDA device and every write access do), against the default
  zero-copy read (one pointer per bucket, one launch over a multi-bucket fabric array).
- ``close``: remove both tags (N children + N parents).
- The reset (what users do when envs reset), 256 envs picked at random, int32 Warp indices on the view's device:
  ``reset_write`` (``set_world_poses`` of the robots; the cameras follow), ``reset_read`` (``get_world_poses`` of
  those envs' cameras) and ``reset`` (both). The robots move by a fixed world offset and back: after each write the
  cameras must have moved by exactly that offset (checked, float64), and after the last one they equal the scene's
  truth. On a CUDA device also ``reset_write_device``: the write handed to ovstage as the CUDA column placed on the
  GPU (``OvstageFabricStage.write_placement = "device"``) instead of from the host (the default).
  And ``*_device_reads``: the same reads with ``read_placement = "device"`` (ovstage places the columns on the GPU).
- ovstage's own floor on the same scene, raw ovstage calls (frameview only tagged the prims): ``raw_read_floor``
  (the cameras' tag and world columns read through a kept ``HAS`` query, groups fetched and released: what a read
  cannot avoid; on a CUDA device also ``raw_read_floor_device``, the same read placed on the GPU),
  ``raw_read_floor_new_query`` (the same with a new query each time), ``raw_write_floor`` (the local
  matrices of the 256 robots written as one masked ``semantic=MATRIX`` write from the host, then sealed; ovstage
  updates the hierarchy), and on a CUDA device ``raw_write_floor_device`` (the same from a CUDA array placed on the
  GPU).

``--hierarchy`` creates the ovstage stages with that hierarchy computation model (``ovstage.StageConfig``; the model
is process-wide, so one model per run).

Timing: ``harness.timing.Timer`` (``wp.synchronize_device()`` around every clock read, one warm-up excluded, GC off,
median / min / max over up to ``--reps`` reps or ``--budget-s`` per metric). Every read is checked against the
scene's float64 truth. Rows go to ``perf/out/ovstage_<device>.json`` (git-ignored); ``--out`` names another file,
e.g. the committed ``perf/results/ovstage_cpu.json``.

Usage::

    python perf/bench_ovstage.py                       # 1024 and 8192 envs on 100k-prim stages
    python perf/bench_ovstage.py --quick               # 1024 envs on a 20k-prim stage, few reps
    python perf/bench_ovstage.py --stage-prims 100000 1000000 --envs 8192
    python perf/bench_ovstage.py --device cuda:0 --envs 8192 --stage-prims 24578 1000000 --hierarchy gpu-incremental
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import warp as wp

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness.baselines import ScopedRebuild
from harness.machine import machine_info
from harness.scenes import PATTERN, SceneArrays, build_usd_stage, check_poses, scene_arrays
from harness.timing import Timer

import frameview
from frameview import FabricFrameView, resolve_prim_paths

RESET_ENVS = 256
HIERARCHY_MODELS = {"cpu-incremental": "CPU_INCREMENTAL", "gpu-incremental": "GPU_INCREMENTAL",
                    "gpu-global": "GPU_GLOBAL"}  # fmt: skip
LOCAL_OUT = Path(__file__).resolve().parent / "out"  # git-ignored; committed results only with --out perf/results/...
BENCH_TAG = "frameview:bench:tag"


def log(msg: str) -> None:
    print(f"[bench_ovstage] {msg}", file=sys.stderr, flush=True)


def peak_rss_gib() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)


# ---------------------------------------------------------------------------------------------------- scenes


def build_memory(arrays: SceneArrays, device: str) -> tuple[Any, dict]:
    """The embedded model from the arrays."""
    from frameview.fabric.providers.memory import MemoryFabricStage

    t0 = time.perf_counter()
    model = MemoryFabricStage.from_arrays(
        arrays.paths, arrays.parents, arrays.local, type_names=arrays.type_names, device=device
    )
    return model, {"build_s": time.perf_counter() - t0}


def build_ovstage(arrays: SceneArrays, hierarchy: str | None = None) -> tuple[Any, dict]:
    """An ovstage stage populated from the scene authored in pxr and exported to USDA text (``hierarchy``: the
    stage's hierarchy computation model, one of :data:`HIERARCHY_MODELS`; ``None``: ovstage's process default)."""
    import ovstage

    stage, author_s, open_s = build_usd_stage(arrays)
    t0 = time.perf_counter()
    text = stage.GetRootLayer().ExportToString()
    export_s = time.perf_counter() - t0
    del stage
    config = None
    if hierarchy is not None:
        model = getattr(ovstage.HierarchyComputationModel, HIERARCHY_MODELS[hierarchy])
        config = ovstage.StageConfig(runtime_default_hierarchy_computation_model=model)
    ovs = ovstage.Stage(f"bench_{arrays.envs}_{arrays.prim_count}", config)
    t0 = time.perf_counter()
    ovstage.population.open_usd_from_string(ovs, text, ordinal=1)
    populate_s = time.perf_counter() - t0
    facts = {
        "author_s": author_s,
        "open_pxr_s": open_s,
        "export_usda_s": export_s,
        "usda_mib": round(len(text) / 2**20, 1),
        "populate_s": populate_s,
        "build_s": author_s + open_s + export_s + populate_s,
    }
    return ovs, facts


# ---------------------------------------------------------------------------------------------------- metrics


def row(key: dict, metric: str, result: dict | float | int) -> dict:
    out = dict(key, method="scoped", metric=metric)
    if isinstance(result, dict):
        out.update(result)
    else:
        out["value"] = result
    return out


def measure(
    provider: str,
    stage: Any,
    fabric: Any,
    arrays: SceneArrays,
    device: str,
    timer: Timer,
    checks: list[dict],
    build_s: float,
) -> list[dict]:
    """Every metric of one provider on one scene."""
    key = {
        "envs": arrays.envs,
        "filler": arrays.filler,
        "stage_prims": arrays.prim_count,
        "provider": provider,
        "device": device,
    }
    if provider == "ovstage":
        key["hierarchy_model"] = fabric.hierarchy_model
    rows = [row(key, "build_stage", {"median_s": build_s, "min_s": build_s, "max_s": build_s, "reps": 1})]
    cameras = resolve_prim_paths(PATTERN, fabric)
    assert len(cameras) == arrays.envs, (len(cameras), arrays.envs)
    rows.append(row(key, "resolve_pattern", timer(lambda: resolve_prim_paths(PATTERN, fabric), reps=5)))
    log(f"{provider} {arrays.envs}: resolve {rows[-1]['median_s'] * 1e3:.1f} ms")

    def view() -> FabricFrameView:
        return FabricFrameView(PATTERN, stage=stage, device=device, fabric_provider=provider)

    held: list[Any] = []

    def first_access() -> None:
        v = view()
        v.get_world_poses()
        held.append(v)

    rows.append(row(key, "first_access", timer(first_access, teardown=lambda: held.pop().close(), reps=5)))
    log(f"{provider} {arrays.envs}: first_access {rows[-1]['median_s'] * 1e3:.1f} ms")

    values = np.arange(len(cameras), dtype=np.uint32)
    with fabric.lock:
        rows.append(
            row(
                key,
                "tag",
                timer(
                    lambda: fabric.set_uint_attribute(cameras, BENCH_TAG, values),
                    teardown=lambda: fabric.remove_attribute(cameras, BENCH_TAG),
                ),
            )
        )
        rows.append(
            row(
                key,
                "untag",
                timer(
                    lambda: fabric.remove_attribute(cameras, BENCH_TAG),
                    setup=lambda: fabric.set_uint_attribute(cameras, BENCH_TAG, values),
                ),
            )
        )
    log(f"{provider} {arrays.envs}: tag {rows[-2]['median_s'] * 1e3:.1f} ms, untag {rows[-1]['median_s'] * 1e3:.1f} ms")

    tagged: list[int] = []

    def make() -> None:
        v = view()
        tagged.append(v.count + len(v.parent_paths))
        held.append(v)

    rows.append(row(key, "close", timer(lambda: held.pop().close(), setup=make, reps=5)))

    v = view()
    try:
        pos, quat = v.get_world_poses()
        checks.append(check_poses(arrays, pos.numpy(), quat.numpy(), f"{provider} {arrays.envs}"))
        gathered = provider == "ovstage" and fabric.zero_copy  # CPU: also time reads that gather, as CUDA does
        variants = [("", True)] + ([("_gathered", False)] if gathered else [])
        for suffix, zero_copy in variants:
            if gathered:
                fabric.zero_copy = zero_copy  # the provider's documented switch (OvstageFabricStage.zero_copy)
            with fabric.lock:
                child = ScopedRebuild(v, parents=False)
                parent = ScopedRebuild(v, parents=True)
                if not suffix:
                    rows.append(row(key, "selection_size", child.selection_size()))
                rows.append(row(key, f"slot_rebuild{suffix}", timer(child)))
                rows.append(row(key, f"slot_rebuild_parents{suffix}", timer(parent)))
            if provider == "ovstage":  # the column mode changed: a fresh view builds its fabric arrays in the new one
                v.close()
                v = view()
            rows.append(row(key, f"get_world_poses{suffix}", timer(v.get_world_poses)))
            pos, quat = v.get_world_poses()
            checks.append(check_poses(arrays, pos.numpy(), quat.numpy(), f"{provider}{suffix} {arrays.envs}"))
            idx = wp.array(np.arange(0, v.count, 2, dtype=np.int32), dtype=wp.int32, device=device)
            indexed = timer(lambda idx=idx, v=v: v.get_world_poses(idx))
            rows.append(row(key, f"get_world_poses_indexed{suffix}", indexed))
            rows.append(row(key, f"get_local_poses{suffix}", timer(v.get_local_poses)))
            log(f"{provider}{suffix} {arrays.envs}: get_world_poses {rows[-3]['median_s'] * 1e3:.2f} ms")
        if gathered:
            fabric.zero_copy = True
        p0, q0 = (wp.clone(x) for x in v.get_world_poses())
        rows.append(row(key, "set_world_poses", timer(lambda: v.set_world_poses(p0, q0))))
        log(f"{provider} {arrays.envs}: set_world_poses {rows[-1]['median_s'] * 1e3:.2f} ms")
        pos, quat = v.get_world_poses()
        checks.append(check_poses(arrays, pos.numpy(), quat.numpy(), f"{provider} after set {arrays.envs}"))
    finally:
        v.close()
    rows += reset_rows(key, provider, stage, fabric, arrays, device, timer, checks)
    if provider == "ovstage":
        rows += floor_rows(key, stage, fabric, arrays, device, timer)
    return rows


def reset_rows(
    key: dict, provider: str, stage: Any, fabric: Any, arrays: SceneArrays, device: str, timer: Timer, checks: list
) -> list[dict]:
    """The reset of :data:`RESET_ENVS` random envs: robots written in world space, their cameras read."""
    rng = np.random.default_rng(1)
    picked = np.sort(rng.choice(arrays.envs, size=min(RESET_ENVS, arrays.envs), replace=False)).astype(np.int32)
    idx = wp.array(picked, dtype=wp.int32, device=device)
    robots = FabricFrameView(PATTERN.rsplit("/", 1)[0], stage=stage, device=device, fabric_provider=provider)
    cameras = FabricFrameView(PATTERN, stage=stage, device=device, fabric_provider=provider)
    out: list[dict] = []
    try:
        p0, q0 = (wp.clone(x) for x in robots.get_world_poses(idx))
        c0 = cameras.get_world_poses(idx)[0].numpy().astype(np.float64)
        shift = np.array([0.5, -0.25, 1.0])
        p1 = wp.array(p0.numpy() + shift.astype(np.float32), dtype=wp.vec3f, device=device)
        targets = [p1, p0]
        step = [0]

        def write() -> None:
            robots.set_world_poses(targets[step[0] % 2], q0, idx)
            step[0] += 1

        def reset() -> None:
            write()
            cameras.get_world_poses(idx)

        what = f"{provider} reset {arrays.envs}"
        write()  # the cameras of the picked envs moved by exactly the shift, in world space
        moved = cameras.get_world_poses(idx)[0].numpy().astype(np.float64) - c0
        err = float(np.abs(moved - shift).max())
        checks.append({"what": f"{what}: cameras follow the robots' shift", "max_pos_err": err, "ok": err < 1e-4})
        write()
        out.append(row(key, "reset_read", timer(lambda: cameras.get_world_poses(idx))))
        out.append(row(key, "reset_write", timer(write)))
        out.append(row(key, "reset", timer(reset)))
        if provider == "ovstage" and not wp.get_device(device).is_cpu:
            fabric.write_placement = "device"
            try:
                out.append(row(key, "reset_write_device", timer(write)))
            finally:
                fabric.write_placement = "host"
            fabric.read_placement = "device"  # reads placed on the GPU, in place where ovstage allows
            try:
                out.append(row(key, "get_world_poses_device_reads", timer(cameras.get_world_poses)))
                out.append(row(key, "reset_read_device_reads", timer(lambda: cameras.get_world_poses(idx))))
                out.append(row(key, "reset_device_reads", timer(reset)))
                write()
                moved = cameras.get_world_poses(idx)[0].numpy().astype(np.float64) - c0
                err = float(np.abs(moved - shift * (step[0] % 2)).max())
                checks.append({"what": f"{what}: device reads", "max_pos_err": err, "ok": err < 1e-4})
            finally:
                fabric.read_placement = "host"
        if step[0] % 2:
            write()
        pos, quat = cameras.get_world_poses()
        checks.append(check_poses(arrays, pos.numpy(), quat.numpy(), f"{what}: written back"))
        log(f"{what}: write {out[1]['median_s'] * 1e6:.0f} us, read {out[0]['median_s'] * 1e6:.0f} us")
    finally:
        robots.close()
        cameras.close()
    return out


def floor_rows(key: dict, ovs: Any, fabric: Any, arrays: SceneArrays, device: str, timer: Timer) -> list[dict]:
    """ovstage's own cost of the same accesses on the same scene, raw calls on the views' tags."""
    from ovstage import AttributeSemantic, Filter, FilterOp, OrdinalRange, Predicate

    latest = OrdinalRange.latest((1 << 64) - 1)
    core = fabric.core
    wm, lm = core.token("omni:fabric:worldMatrix"), core.token("omni:fabric:localMatrix")
    robots = FabricFrameView(PATTERN.rsplit("/", 1)[0], stage=ovs, device=device, fabric_provider="ovstage")
    cameras = FabricFrameView(PATTERN, stage=ovs, device=device, fabric_provider="ovstage")
    out: list[dict] = []
    queries: list[Any] = []
    try:
        cam_tag, robot_tag = core.token(cameras.tag_names[0]), core.token(robots.tag_names[0])

        def read(query: Any, placement: Any = None) -> None:
            with ovs.read_attributes(query, [cam_tag, wm], latest, placement=placement) as r:
                r.wait()
                for g in r.groups():
                    g.release()

        def issue(tag: int) -> Any:
            query = ovs.query(Filter([Predicate(tag, FilterOp.HAS), Predicate(wm, FilterOp.HAS)]))
            query.wait()
            queries.append(query)
            return query

        kept = issue(cam_tag)

        def new_query() -> None:
            query = issue(cam_tag)
            read(query)
            queries.remove(query)
            query.release().wait()

        with fabric.lock:
            out.append(row(key, "raw_read_floor", timer(lambda: read(kept))))
            out.append(row(key, "raw_read_floor_new_query", timer(new_query)))
            if not wp.get_device(device).is_cpu:  # the same read placed on the GPU
                placed_read = fabric.read_placement_on_device
                fabric.read_placement = "device"
                try:
                    out.append(row(key, "raw_read_floor_device", timer(lambda: read(kept, placed_read()))))
                finally:
                    fabric.read_placement = "host"
            # the robots' rows in the query's order (tag value = view row), their local matrices, the reset mask
            query = issue(robot_tag)
            view_rows, local = [], []
            with ovs.read_attributes(query, [robot_tag, lm], latest) as r:
                r.wait()
                for g in r.groups():
                    with g:
                        data = np.array(g.array(0))
                        rows_of = g.data_row_index
                        values = np.stack([data[rows_of(i)] for i in range(g.prim_count)]) if g.prim_count else data
                        (view_rows if g.attribute == robot_tag else local).append(values)
            order = np.concatenate(view_rows).astype(np.int64).reshape(-1)
            mats = np.concatenate(local).reshape(-1, 4, 4)
            rng = np.random.default_rng(1)
            picked = np.sort(rng.choice(arrays.envs, size=min(RESET_ENVS, arrays.envs), replace=False))
            written = np.zeros(order.size + (-order.size % 64), dtype=bool)
            written[np.flatnonzero(np.isin(order, picked))] = True
            words = np.packbits(written, bitorder="little").view(np.uint64).tolist()
            cuda = not wp.get_device(device).is_cpu
            variants = [("raw_write_floor", False)] + ([("raw_write_floor_device", True)] if cuda else [])
            for metric, placed in variants:
                source: Any = mats
                extra: dict[str, Any] = {}
                if placed:
                    from ovstage import Placement

                    dev = wp.get_device(device)
                    source = wp.array(mats, dtype=wp.mat44d, device=device)
                    stream = int(wp.get_stream(dev).cuda_stream)
                    extra = {"placement": Placement(device_type=2, device_id=dev.ordinal, stream=stream),
                             "cuda_stream": stream}  # fmt: skip

                def write(source: Any = source, extra: dict = extra) -> None:
                    core.release_pinned()
                    ordinal = core.next_ordinal([lm, wm])
                    ovs.write_attribute(query, lm, ordinal, source, is_array=False, semantic=AttributeSemantic.MATRIX,
                                        mask=words, count=order.size, **extra).wait()  # fmt: skip
                    core.seal(ordinal, [lm, wm])

                out.append(row(key, metric, timer(write)))
        log(f"ovstage {arrays.envs}: floors read {out[0]['median_s'] * 1e6:.0f} us, write "
            f"{out[2]['median_s'] * 1e6:.0f} us")  # fmt: skip
    finally:
        for query in queries:
            query.release().wait()
        robots.close()
        cameras.close()
    return out


# ---------------------------------------------------------------------------------------------------- report


def table(rows: list[dict]) -> str:
    """Markdown: one line per (scene, metric), memory and ovstage side by side."""
    by = {(r["envs"], r["stage_prims"], r["provider"], r["metric"]): r for r in rows}
    scenes = sorted({(r["envs"], r["stage_prims"]) for r in rows})
    metrics = list(dict.fromkeys(r["metric"] for r in rows))
    floors = {"get_world_poses": "raw_read_floor", "reset_read": "raw_read_floor", "reset_write": "raw_write_floor",
              "reset_write_device": "raw_write_floor_device", "get_world_poses_device_reads": "raw_read_floor_device",
              "reset_read_device_reads": "raw_read_floor_device"}  # fmt: skip
    out = ["| envs | stage prims | metric | memory | ovstage | ovstage / memory | ovstage / raw floor |",
           "|---:|---:|---|---:|---:|---:|---:|"]  # fmt: skip

    def fmt(r: dict | None) -> str:
        if r is None:
            return "-"
        if "value" in r:
            return f"{r['value']:,}"
        return f"{r['median_s'] * 1e3:.3f} ms"

    for envs, prims in scenes:
        for m in metrics:
            mem, ovs = by.get((envs, prims, "memory", m)), by.get((envs, prims, "ovstage", m))
            if mem is None and ovs is None:
                continue
            ratio = "-"
            if mem and ovs and "median_s" in mem and "median_s" in ovs and mem["median_s"] > 0:
                ratio = f"{ovs['median_s'] / mem['median_s']:.2f}x"
            floor, to_floor = by.get((envs, prims, "ovstage", floors.get(m, ""))), "-"
            if floor and ovs and "median_s" in ovs:
                to_floor = f"{ovs['median_s'] / floor['median_s']:.2f}x"
            out.append(f"| {envs:,} | {prims:,} | {m} | {fmt(mem)} | {fmt(ovs)} | {ratio} | {to_floor} |")
    return "\n".join(out)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--envs", type=int, nargs="+", default=[1024, 8192], help="views of this many cameras")
    p.add_argument("--stage-prims", type=int, nargs="+", default=[100_000], help="total prims of each stage")
    p.add_argument("--device", default="cpu", help="Warp device of the views")
    p.add_argument("--reps", type=int, default=20, help="max reps per metric")
    p.add_argument("--budget-s", type=float, default=3.0, help="stop a metric after this long (>= 3 reps)")
    p.add_argument("--quick", action="store_true", help="1024 envs on a 20k-prim stage, 5 reps")
    p.add_argument(
        "--hierarchy",
        choices=sorted(HIERARCHY_MODELS),
        default=None,
        help="hierarchy computation model of the ovstage stages (default: ovstage's, the CPU model)",
    )
    p.add_argument("--providers", nargs="+", default=["memory", "ovstage"], choices=["memory", "ovstage"])
    p.add_argument("--out", type=Path, default=None, help="JSON path (default perf/out/ovstage_<device>.json)")
    p.add_argument(
        "--save-as",
        default=None,
        metavar="NAME",
        help="write perf/results/ovstage_NAME.json (committed results) instead of --out",
    )
    args = p.parse_args(argv)
    if args.quick:
        args.envs, args.stage_prims, args.reps, args.budget_s = [1024], [20_000], 5, 1.0
    if args.save_as is not None:
        args.out = Path(__file__).resolve().parent / "results" / f"ovstage_{args.save_as}.json"
    if args.out is None:
        args.out = LOCAL_OUT / f"ovstage_{'cpu' if args.device == 'cpu' else args.device.replace(':', '')}.json"
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    wp.init()
    timer = Timer(args.device, args.reps, args.budget_s)
    machine = machine_info(args.device)
    try:
        import ovstage

        machine["ovstage"] = ovstage.__version__
    except ImportError:
        log("ovstage is not importable: measuring the memory provider only (pip install 'frameview[ovstage]')")
        args.providers = [p for p in args.providers if p != "ovstage"]
    rows: list[dict] = []
    stages: list[dict] = []
    checks: list[dict] = []
    for prims in args.stage_prims:
        for envs in args.envs:
            filler = prims - (2 + 3 * envs)
            if filler < 0:
                log(f"skip envs={envs}: a {prims}-prim stage cannot hold them")
                continue
            arrays = scene_arrays(envs, filler)
            for provider in args.providers:
                log(f"building {provider}: {envs} envs, {arrays.prim_count:,} prims")
                if provider == "memory":
                    fabric, facts = build_memory(arrays, args.device)
                    stage = fabric
                else:
                    from frameview.fabric.providers.ovstage import attach

                    stage, facts = build_ovstage(arrays, args.hierarchy)
                    fabric = attach(stage, args.device)
                    machine["hierarchy_model"] = fabric.hierarchy_model
                    machine["write_placement"] = fabric.write_placement
                stages.append(
                    dict(facts, envs=envs, stage_prims=arrays.prim_count, provider=provider, rss_gib=peak_rss_gib())
                )
                log(f"built in {facts['build_s']:.1f} s: {facts}")
                rows += measure(provider, stage, fabric, arrays, args.device, timer, checks, facts["build_s"])
                del fabric, stage
                gc.collect()
    machine["loadavg_1min_at_end"] = __import__("os").getloadavg()[0]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "machine": machine,
        "frameview_version": frameview.__version__,
        "rows": rows,
        "stages": stages,
        "checks": checks,
        "pattern": PATTERN,
    }
    args.out.write_text(json.dumps(payload, indent=1) + "\n")
    print(table(rows))
    bad = [c for c in checks if not c["ok"]]
    for c in bad:
        log(f"CHECK FAILED: {c}")
    log(f"wrote {args.out}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())

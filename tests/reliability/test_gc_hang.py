# SPDX-License-Identifier: Apache-2.0
"""Garbage collection at any point of any library call: no hang, no crash, no wrong pose.

Each scenario runs in a fresh interpreter (``subprocess.run(..., timeout=120)``) so that a deadlock fails the test
instead of blocking CI; inside it, ``faulthandler`` dumps every thread's stack 30 s before the timeout, so a hang
names the line it is stuck on. Garbage is made of pxr stages in reference cycles, with Fabric views closed, Fabric and
USD views dropped without ``close()`` (inside the cycles and outside), and stages whose only view was closed.

- ``exact_repro``: the reported hang. A view on stage A, closed; A put in a garbage cycle and dropped; then a
  FabricFrameView on a 2000-prim stage B with the default GC thresholds. Building B's embedded model allocates enough
  to trigger a collection, which finalises A and runs the memory model registry's ``_forget`` while ``attach``
  holds the model registry's lock: with a plain ``threading.Lock`` the thread waits for itself forever.
- ``gc_at_every_call_point``: for every public entry point of both backends (constructors on new and known stages,
  ``make_frame_view``, the four getters, the three setters, ``close``), one run per call point: a profile hook
  counts the calls into frameview's Python functions and runs ``gc.collect()`` exactly at the k-th, with fresh
  garbage waiting; k sweeps the call points (all of them, or 40 evenly spread; ``FRAMEVIEW_GC_POINTS`` changes the
  cap). The results are checked (written poses read back).
- ``gc_threshold_1``: ``gc.set_threshold(1, 1, 1)`` (a collection at nearly every allocation), garbage made between
  calls, 6 rounds of every entry point on both backends; a ``gc.callbacks`` hook counts the collections that ran
  inside a frameview call (the test asserts there were some).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TIMEOUT_S = 120
"""Wall-clock limit of one scenario's interpreter (each takes under 25 s on the 2-core CI box)."""

DUMP_AFTER_S = 90
"""The interpreter's faulthandler prints every thread's stack and exits after this long: a hang names its line."""

CHILD = r'''
import faulthandler
import gc
import logging
import os
import sys
import time

scenario, dump_after = sys.argv[1], float(sys.argv[2])
faulthandler.dump_traceback_later(dump_after, exit=True)  # a hang prints where every thread is stuck, then exits 1

import numpy as np
import warp as wp

if hasattr(wp, "LOG_WARNING"):
    wp.config.log_level = wp.LOG_WARNING
wp.config.quiet = True
wp.init()
from pxr import Gf, Usd, UsdGeom

import frameview as fv
from frameview.fabric.providers.memory import attach
from frameview.fabric.view import FabricFrameView
from frameview.usd import UsdFrameView

logging.getLogger("frameview").setLevel(logging.ERROR)  # views dropped without close() warn by design
FV_DIR = os.path.dirname(os.path.abspath(fv.__file__)) + os.sep
BACKENDS = {"fabric": FabricFrameView, "usd": UsdFrameView}
START = time.perf_counter()
ROUNDS = 6  # gc_threshold_1: rounds of every entry point
MAX_POINTS = int(os.environ.get("FRAMEVIEW_GC_POINTS", "40"))  # call points swept per entry point


def build(envs):
    """/World, then env_i (translate, non-uniform scale) each with a Cam child: 1 + 2 * envs prims."""
    stage = Usd.Stage.CreateInMemory()
    UsdGeom.Xform.Define(stage, "/World").AddTranslateOp().Set(Gf.Vec3d(1.0, 2.0, 3.0))
    for i in range(envs):
        env = UsdGeom.Xform.Define(stage, f"/World/env_{i}")
        env.AddTranslateOp().Set(Gf.Vec3d(float(i), 0.0, 0.0))
        env.AddScaleOp().Set(Gf.Vec3f(1.0, 2.0, 1.0))
        UsdGeom.Xform.Define(stage, f"/World/env_{i}/Cam").AddTranslateOp().Set(Gf.Vec3d(0.0, 0.0, 1.0))
    return stage


def make_garbage(full=True):
    """Stages in reference cycles with closed and unclosed views, and views dropped without close()."""
    a = build(1)
    in_cycle = FabricFrameView("/World/env_0/Cam", stage=a)  # dropped without close(), collected with its stage
    usd_in_cycle = UsdFrameView("/World/env_0", stage=a)
    holder = [a, in_cycle, usd_in_cycle]
    holder.append(holder)
    b = build(1)
    attach(b)  # what a closed view leaves behind: the stage's embedded model, forgotten when the stage goes
    loop = {"stage": b}
    loop["self"] = loop
    del a, b, in_cycle, usd_in_cycle, holder, loop
    if full:
        d = build(1)
        closed = FabricFrameView("/World/env_0", stage=d)
        closed.close()
        ring = [d]
        ring.append(ring)
        del d, closed, ring
        c = build(2)
        view_cycle = FabricFrameView("/World/env_.*/Cam", stage=c)  # a view in a cycle of its own, stage alive
        view_cycle.set_local_poses(np.zeros((2, 3)))
        view_cycle.cycle = view_cycle
        FabricFrameView("/World/env_1", stage=c).get_local_scales()  # dropped at once (refcount), no cycle
        del c, view_cycle


def inside_frameview():
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename.startswith(FV_DIR):
            return True
        frame = frame.f_back
    return False


def ops(backend):
    """(name, setup, run, check): setup and check run unarmed, run is the call under test."""
    cls = BACKENDS[backend]
    shared = build(4)
    view = cls("/World/env_.*/Cam", stage=shared)
    n = view.count
    pos = np.arange(3 * n, dtype=np.float64).reshape(n, 3) * 0.25 - 1.0
    quat = np.tile([0.0, 0.0, np.sqrt(0.5), np.sqrt(0.5)], (n, 1))
    cfg = {"prim_path": "/World/env_.*", "backend": backend}

    def world_positions_are(expected, rows=None):
        got = view.get_world_poses(rows)[0].numpy()
        assert np.allclose(got, expected, atol=1e-4), f"{backend}: world positions {got.tolist()} != {expected}"

    def local_are(rows, t, s):
        got_t = view.get_local_poses(rows)[0].numpy()
        got_s = view.get_local_scales(rows).numpy()
        assert np.allclose(got_t, t, atol=1e-5) and np.allclose(got_s, s, atol=1e-5), (backend, got_t, got_s)

    def closed(v, _):
        assert v.is_closed

    def read_ok(_, out):
        arrays = out if isinstance(out, tuple) else (out,)
        assert all(np.isfinite(a.numpy()).all() for a in arrays), f"{backend}: non-finite read"

    table = [
        ("constructor on a new stage", lambda: build(3), lambda s: cls("/World/env_.*", stage=s),
         lambda s, v: v.close()),
        ("constructor on a known stage", lambda: shared, lambda s: cls(["/World/env_0", "/World/env_1/Cam"], stage=s),
         lambda s, v: v.close()),
        ("make_frame_view", lambda: build(2), lambda s: fv.make_frame_view(cfg, s), lambda s, v: v.close()),
        ("get_world_poses", lambda: None, lambda _: view.get_world_poses(), read_ok),
        ("get_local_poses", lambda: None, lambda _: view.get_local_poses([1, 0]), read_ok),
        ("get_world_scales", lambda: None, lambda _: view.get_world_scales([3]), read_ok),
        ("get_local_scales", lambda: None, lambda _: view.get_local_scales(), read_ok),
        ("set_world_poses", lambda: None, lambda _: view.set_world_poses(pos, quat),
         lambda _, __: world_positions_are(pos)),
        ("set_local_poses", lambda: None, lambda _: view.set_local_poses(pos[:2] * 0.5, None, [2, 0]),
         lambda _, __: local_are([2, 0], pos[:2] * 0.5, np.ones((2, 3)))),
        ("set_local_scales", lambda: None, lambda _: view.set_local_scales(np.full((1, 3), 1.5), [1]),
         lambda _, __: local_are([1], view.get_local_poses([1])[0].numpy(), np.full((1, 3), 1.5))),
        ("close", lambda: cls("/World/env_.*", stage=shared), lambda v: v.close(), closed),
    ]
    return view, table


class Trigger:
    """Profile hook: counts Python calls made into frameview's code and collects garbage exactly at call number
    ``target``."""

    def __init__(self):
        self.count = 0
        self.target = -1
        self.fired = 0

    def __call__(self, frame, event, arg):
        if event == "call" and frame.f_code.co_filename.startswith(FV_DIR):
            self.count += 1
            if self.count == self.target:
                gc.collect()
                self.fired += 1

    def run(self, target, fn, *args):
        self.count, self.target = 0, target
        sys.setprofile(self)
        try:
            return fn(*args)
        finally:
            sys.setprofile(None)


if scenario == "exact_repro":
    b = build(1000)  # 2001 prims
    a = build(2)
    view = FabricFrameView("/World/env_.*", stage=a)
    view.get_world_poses()
    view.close()
    del view
    holder = [a]
    holder.append(holder)
    del a, holder
    assert gc.get_threshold()[0] == 700, gc.get_threshold()  # the default thresholds
    big = FabricFrameView("/World/env_.*/Cam", stage=b)
    pos = big.get_world_poses()[0].numpy()
    assert pos.shape == (1000, 3) and np.allclose(pos[:, 2], 4.0), pos[:3]
    big.close()
    print("exact repro: view on the 2001-prim stage built")

elif scenario == "gc_at_every_call_point":
    gc.collect()
    gc.freeze()  # imports stay out of every collection: each collect() below only walks new objects
    trigger = Trigger()
    total = 0
    for backend in BACKENDS:
        view, table = ops(backend)
        for name, setup, run, check in table:
            ctx = setup()
            check(ctx, trigger.run(-1, run, ctx))  # counting run: no collection
            points = trigger.count
            stride = max(1, -(-points // MAX_POINTS))  # every call point, or MAX_POINTS evenly spread
            for target in range(1, points + 1, stride):
                make_garbage(full=False)
                ctx = setup()
                out = trigger.run(target, run, ctx)
                check(ctx, out)
            total += len(range(1, points + 1, stride))
            print(f"{backend} {name}: {points} call points, collected at every {stride}")
        view.close()
    assert trigger.fired > 0
    print(f"{total} runs, {trigger.fired} collections inside library calls, {time.perf_counter() - START:.1f} s")

elif scenario == "gc_threshold_1":
    inside = [0]

    def count(phase, info):
        if phase == "start" and inside_frameview():
            inside[0] += 1

    gc.callbacks.append(count)
    views = {b: ops(b) for b in BACKENDS}
    gc.set_threshold(1, 1, 1)
    for _ in range(ROUNDS):
        for backend, (view, table) in views.items():
            for name, setup, run, check in table:
                make_garbage()
                ctx = setup()
                check(ctx, run(ctx))
    gc.set_threshold(700, 10, 10)
    gc.callbacks.remove(count)
    for view, _ in views.values():
        view.close()
    assert inside[0] > 0, "no collection ran inside a frameview call"
    print(f"{inside[0]} collections inside frameview calls, {time.perf_counter() - START:.1f} s")

else:
    raise SystemExit(f"unknown scenario {scenario!r}")
print(f"GC-OK {scenario}")
'''

SCENARIOS = ["exact_repro", "gc_at_every_call_point", "gc_threshold_1"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_gc_at_any_point_does_not_hang(scenario: str) -> None:
    """Collections inside library calls (finalising stages, models and views) neither hang, crash nor corrupt."""
    tests = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (tests, os.environ.get("PYTHONPATH", "")) if p)}
    cmd = [sys.executable, "-c", CHILD, scenario, str(DUMP_AFTER_S)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired as exc:  # faulthandler did not even fire: a hard hang
        out = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err = (exc.stderr or b"").decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        pytest.fail(f"{scenario}: hung for {TIMEOUT_S} s\nstdout:\n{out[-4000:]}\nstderr:\n{err[-8000:]}")
    hung = "Timeout (" in proc.stderr and "Thread" in proc.stderr
    assert proc.returncode == 0 and f"GC-OK {scenario}" in proc.stdout, (
        f"{scenario}: {'HUNG (faulthandler stacks below)' if hung else f'exit code {proc.returncode}'}\n"
        f"stdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-8000:]}"
    )

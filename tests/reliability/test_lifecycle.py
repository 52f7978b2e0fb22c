# SPDX-License-Identifier: Apache-2.0
"""Lifecycles on both backends: use after close(), close() twice, a view outliving its stage, create/close cycles
(memory and attributes flat), views dropped without close(), garbage collection during an access, and exit."""

from __future__ import annotations

import gc
import logging
import os
import subprocess
import sys
import textwrap
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import build_env_stage
from pxr import Usd, UsdGeom

import frameview as fv
from frameview.fabric.providers.memory import attach

from ._support import BACKENDS, CAMERAS, ROBOTS, N, truth_world_positions

TESTS = Path(__file__).resolve().parents[1]

CALLS: dict[str, Callable[[fv.BaseFrameView], Any]] = {
    "get_world_poses": lambda v: v.get_world_poses(),
    "get_local_poses": lambda v: v.get_local_poses([0]),
    "get_world_scales": lambda v: v.get_world_scales(),
    "get_local_scales": lambda v: v.get_local_scales([1, 0]),
    "set_world_poses": lambda v: v.set_world_poses(np.zeros((v.count, 3))),
    "set_local_poses": lambda v: v.set_local_poses(None, np.tile([0.0, 0.0, 0.0, 1.0], (v.count, 1))),
    "set_local_scales": lambda v: v.set_local_scales(np.ones((1, 3)), [0]),
}


def _rss_mib() -> float:
    """Resident set size of this process, MiB (/proc/self/statm)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _run_python(code: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter (tests/ on the path), capturing stdout and stderr."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120, env=env
    )


# ---------------------------------------------------------------- close


@pytest.mark.parametrize("call", list(CALLS))
def test_every_method_after_close_raises(make_view, stage: Usd.Stage, call: str) -> None:
    """After close(), every getter and setter raises RuntimeError saying to create a new view; properties work."""
    view = make_view(ROBOTS, stage)
    view.close()
    with pytest.raises(RuntimeError, match=r"closed.*create a new view"):
        CALLS[call](view)
    with pytest.raises(RuntimeError, match="closed"):
        view.__enter__()
    assert view.is_closed and view.count == N and len(view) == N and "closed" in repr(view)
    assert view.prim_paths[0] == "/World/envs/env_0/Robot" and view.backend.split(":")[0] in ("usd", "fabric")


def test_close_twice_and_with_after_close(make_view, stage: Usd.Stage) -> None:
    """close() is idempotent, also after a ``with`` block closed the view; other views on the stage keep working."""
    other = make_view(ROBOTS, stage)
    with make_view(ROBOTS, stage) as view:
        view.get_world_poses()
    view.close()
    view.close()
    np.testing.assert_allclose(
        other.get_world_poses()[0].numpy(), truth_world_positions(stage, other.prim_paths), atol=1e-4
    )


# ---------------------------------------------------------------- stage lifetime


def test_fabric_view_outliving_its_stage_raises() -> None:
    """A Fabric view whose pxr stage was dropped raises RuntimeError on every call; close() still works (twice)."""
    stage = build_env_stage(2, seed=1)
    view = fv.FabricFrameView(CAMERAS, stage=stage)
    view.get_world_poses()
    alive = weakref.ref(stage)
    del stage
    gc.collect()
    assert alive() is None, "the Fabric view must not keep the stage alive"
    for call in CALLS.values():
        with pytest.raises(RuntimeError, match=r"stage was released.*create the view again"):
            call(view)
    view.close()
    view.close()


def test_usd_view_keeps_its_stage_alive() -> None:
    """A USD view holds its stage: dropping the caller's reference keeps it alive and reads stay correct."""
    stage = build_env_stage(2, seed=1)
    view = fv.UsdFrameView(CAMERAS, stage=stage)
    alive = weakref.ref(stage)
    del stage
    gc.collect()
    assert alive() is not None
    np.testing.assert_allclose(
        view.get_world_poses()[0].numpy(), truth_world_positions(view.stage, view.prim_paths), atol=1e-4
    )
    view.close()


# ---------------------------------------------------------------- cycles


def _attribute_counts(stage: Usd.Stage, paths: list[str]) -> list[int]:
    return [len(stage.GetPrimAtPath(p).GetAttributes()) for p in paths]


def test_create_read_close_cycles_keep_memory_and_attributes_flat(backend: str) -> None:
    """1000 create/read/write/close cycles on one stage: RSS, each prim's attribute count (USD and Fabric), and the
    Fabric model's buckets and column bytes stay flat after a warm-up."""
    stage = build_env_stage(16, seed=4)
    paths = [f"/World/envs/env_{i}/Robot{leaf}" for i in range(16) for leaf in ("", "/Camera")]
    model = attach(stage) if backend == "fabric" else None

    def fabric_state() -> tuple:
        if model is None:
            return ()
        return ([len(model.attribute_names(p)) for p in paths], sum(1 for b in model.buckets if b.columns),
                model.nbytes())  # fmt: skip

    def cycle(k: int) -> None:
        view = BACKENDS[backend](CAMERAS, stage, "cpu")
        view.get_world_poses()
        view.get_local_scales([k % 16])
        view.set_local_poses(np.full((1, 3), 0.01 * (k % 7)), None, [k % 16])
        view.close()

    for k in range(100):  # warm-up: kernels loaded, buffers and caches at their steady size
        cycle(k)
    gc.collect()
    rss0, usd0, fabric0 = _rss_mib(), _attribute_counts(stage, paths), fabric_state()
    for k in range(900):
        cycle(k)
    gc.collect()
    rss1 = _rss_mib()
    assert _attribute_counts(stage, paths) == usd0
    assert fabric_state() == fabric0
    assert rss1 - rss0 < 8.0, f"RSS grew by {rss1 - rss0:.1f} MiB over 900 cycles"


# ---------------------------------------------------------------- garbage collection


def test_dropped_fabric_view_is_cleaned_up_by_gc_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    """A Fabric view in a reference cycle, dropped without close(), loses its tags (prims and parents) when
    collected, and a warning names it."""
    stage = build_env_stage(3, seed=2)
    model = attach(stage)
    before = {p: model.attribute_names(p) for p in ("/World/envs/env_1/Robot", "/World/envs/env_1/Robot/Camera")}
    view = fv.FabricFrameView(CAMERAS, stage=stage)
    view.cycle = view
    del view
    with caplog.at_level(logging.WARNING, logger="frameview.fabric.view"):
        gc.collect()
    assert {p: model.attribute_names(p) for p in before} == before
    assert any("without close()" in r.getMessage() and CAMERAS in r.getMessage() for r in caplog.records)


def test_dropped_usd_view_needs_no_cleanup(caplog: pytest.LogCaptureFixture) -> None:
    """A USD view holds nothing on the stage: dropping it without close() logs nothing and leaves the stage as is."""
    stage = build_env_stage(2, seed=2)
    layer_before = stage.GetRootLayer().ExportToString()
    view = fv.UsdFrameView(CAMERAS, stage=stage)
    view.get_world_poses()
    with caplog.at_level(logging.DEBUG, logger="frameview"):
        del view
        gc.collect()
    assert not caplog.records
    assert stage.GetRootLayer().ExportToString() == layer_before


def test_gc_during_another_access_defers_cleanup() -> None:
    """A dropped Fabric view collected in the middle of another view's read (GC runs wherever an allocation triggers
    it) does not touch the stage then: the read is correct, the tags go at the next access. In a subprocess: this
    used to crash the interpreter (SIGSEGV)."""
    result = _run_python(
        """
        import gc
        import numpy as np, warp as wp
        wp.config.quiet = True
        from helpers import build_env_stage, decompose_all, xform_cache_world
        import frameview as fv
        from frameview.fabric.providers.memory import attach

        stage = build_env_stage(8, seed=3)
        model = attach(stage)
        cam = "/World/envs/env_0/Robot/Camera"
        order = [7, 3, 0, 1, 2, 4, 5, 6]
        truth = decompose_all(xform_cache_world(stage, [f"/World/envs/env_{i}/Robot/Camera" for i in order]))[0]
        reader = fv.FabricFrameView("/World/envs/env_.*/Robot/Camera", stage=stage)
        dropped = fv.FabricFrameView("/World/envs/env_.*/Robot/Camera", stage=stage)
        dropped.cycle = dropped
        tag = dropped.tag_names[0]
        del dropped
        launch, seen = wp.launch, {}
        def collecting_launch(*args, **kwargs):
            if not seen:
                gc.collect()  # the dropped view is finalised here, inside reader's access
                seen["tagged"] = tag in model.attribute_names(cam)
            return launch(*args, **kwargs)
        wp.launch = collecting_launch
        pos = reader.get_world_poses(order)[0].numpy()
        wp.launch = launch
        assert np.allclose(pos, truth, atol=1e-4), "wrong read"
        assert seen["tagged"], "tags removed in the middle of an access"
        reader.get_world_poses()
        assert tag not in model.attribute_names(cam), "deferred tags not removed at the next access"
        reader.close()
        print("ok")
        """
    )
    assert result.returncode == 0, f"rc={result.returncode}\n{result.stdout}\n{result.stderr}"
    assert result.stdout.strip().endswith("ok")


def test_live_views_at_interpreter_exit_print_nothing() -> None:
    """A process that exits with live views of both backends (one in a reference cycle, one whose stage is gone)
    runs no cleanup at shutdown: no warning, no traceback, exit code 0, even with DEBUG logging on."""
    result = _run_python(
        """
        import logging, sys
        logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)
        import numpy as np, warp as wp
        wp.config.quiet = True
        from helpers import build_env_stage
        import frameview as fv

        stage = build_env_stage(3, seed=1)
        views = [fv.FabricFrameView("/World/envs/env_.*/Robot", stage=stage),
                 fv.UsdFrameView("/World/envs/env_.*/Robot", stage=stage)]
        cyclic = fv.FabricFrameView("/World/envs/env_.*/Robot/Camera", stage=stage)
        cyclic.cycle = cyclic
        orphan_stage = build_env_stage(1, seed=2)
        orphan = fv.FabricFrameView("/World/envs/env_0/Robot", stage=orphan_stage)
        for v in (*views, cyclic, orphan):
            v.get_world_poses()
        del orphan_stage
        logging.getLogger().handlers[0].flush()
        print("MARK", file=sys.stderr, flush=True)
        """
    )
    assert result.returncode == 0, result.stderr
    after_exit = result.stderr.split("MARK", 1)[1]
    assert after_exit.strip() == "", f"output at interpreter exit:\n{after_exit}"


def test_usd_edits_after_close_are_not_tracked_by_the_view(make_view, stage: Usd.Stage) -> None:
    """A closed view ignores later stage edits (no listener left behind): editing the stage after close() is safe."""
    view = make_view(CAMERAS, stage)
    view.get_world_poses()
    view.close()
    UsdGeom.Xformable(stage.GetPrimAtPath("/World/envs/env_0/Robot")).GetOrderedXformOps()[0].Set((1.0, 2.0, 3.0))
    stage.RemovePrim("/World/envs/env_1")
    with make_view(CAMERAS, stage) as fresh:
        np.testing.assert_allclose(
            fresh.get_world_poses()[0].numpy(), truth_world_positions(stage, fresh.prim_paths), atol=1e-4
        )

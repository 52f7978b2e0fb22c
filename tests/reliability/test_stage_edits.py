# SPDX-License-Identifier: Apache-2.0
"""Stage edits under a live view, on both backends: each edit gives the correct pose (checked against a fresh
``UsdGeom.XformCache``) or a RuntimeError naming the prim: never another prim's data, never a partial write."""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pytest
from helpers import assert_quats_close, build_env_stage, decompose_all, xform_cache_world
from pxr import Gf, Sdf, Usd, UsdGeom

import frameview as fv

from ._support import BACKENDS, CAMERAS, N

TARGET = "/World/envs/env_2/Robot/Camera"
ROBOT = "/World/envs/env_2/Robot"
ROW = 2  # TARGET's view index


def _define_camera(stage: Usd.Stage, path: str = TARGET) -> None:
    camera = UsdGeom.Camera.Define(stage, path)
    camera.AddTranslateOp().Set(Gf.Vec3d(0.25, -0.5, 0.75))
    camera.AddRotateZOp().Set(90.0)  # right angles only: the robot's non-uniform scale must not shear the camera


def _remove(stage: Usd.Stage, view: fv.BaseFrameView) -> None:
    stage.RemovePrim(TARGET)


def _remove_access_recreate(stage: Usd.Stage, view: fv.BaseFrameView) -> None:
    stage.RemovePrim(TARGET)
    with pytest.raises(RuntimeError):
        view.get_world_poses()
    _define_camera(stage)


def _remove_recreate(stage: Usd.Stage, view: fv.BaseFrameView) -> None:
    stage.RemovePrim(TARGET)
    _define_camera(stage)


def _sdf_remove_recreate(stage: Usd.Stage, view: fv.BaseFrameView) -> None:
    edit = Sdf.BatchNamespaceEdit()
    edit.Add(TARGET, Sdf.Path.emptyPath)
    assert stage.GetRootLayer().Apply(edit)
    _define_camera(stage)


def _deactivate(stage: Usd.Stage, view: fv.BaseFrameView) -> None:
    stage.GetPrimAtPath(TARGET).SetActive(False)


def _deactivate_parent(stage: Usd.Stage, view: fv.BaseFrameView) -> None:
    stage.GetPrimAtPath(ROBOT).SetActive(False)


def _change_op_stack(stage: Usd.Stage, view: fv.BaseFrameView) -> None:
    xf = UsdGeom.Xformable(stage.GetPrimAtPath(TARGET))
    xf.ClearXformOpOrder()
    xf.AddTranslateOp(opSuffix="offset").Set(Gf.Vec3d(0.0, 1.0, 0.5))
    xf.AddRotateXYZOp().Set(Gf.Vec3f(90.0, 0.0, 180.0))  # right angles: no shear under the robot's scale
    xf.AddScaleOp(UsdGeom.XformOp.PrecisionDouble).Set(Gf.Vec3d(2.0, 2.0, 2.0))


def _reorder_parent_ops(stage: Usd.Stage, view: fv.BaseFrameView) -> None:
    xf = UsdGeom.Xformable(stage.GetPrimAtPath(ROBOT))
    translate, orient, scale = xf.GetOrderedXformOps()
    xf.SetXformOpOrder([orient, scale, translate])  # the translation now rotated and scaled (no shear)


def _reset_stack(stage: Usd.Stage, view: fv.BaseFrameView) -> None:
    UsdGeom.Xformable(stage.GetPrimAtPath(TARGET)).SetResetXformStack(True)


def _reset_parent_stack(stage: Usd.Stage, view: fv.BaseFrameView) -> None:
    UsdGeom.Xformable(stage.GetPrimAtPath(ROBOT)).SetResetXformStack(True)


def _reparent_namespace_edit(stage: Usd.Stage, view: fv.BaseFrameView) -> None:
    edit = Sdf.BatchNamespaceEdit()
    edit.Add(ROBOT, "/World/envs/env_1/Robot2")
    assert stage.GetRootLayer().Apply(edit)


def _reparent_copy_remove(stage: Usd.Stage, view: fv.BaseFrameView) -> None:
    layer = stage.GetRootLayer()
    assert Sdf.CopySpec(layer, ROBOT, layer, "/World/Robot2")
    stage.RemovePrim(ROBOT)


def _retype(stage: Usd.Stage, view: fv.BaseFrameView) -> None:
    stage.GetPrimAtPath(TARGET).SetTypeName("Scope")


def _move_parent(stage: Usd.Stage, view: fv.BaseFrameView) -> None:
    ops = UsdGeom.Xformable(stage.GetPrimAtPath(ROBOT)).GetOrderedXformOps()
    ops[0].Set(Gf.Vec3d(3.0, -2.0, 1.0))


def _bulk_churn(stage: Usd.Stage, view: fv.BaseFrameView) -> None:
    for k in range(300):
        UsdGeom.Xform.Define(stage, f"/World/filler/x_{k}").AddTranslateOp().Set(Gf.Vec3d(k, 0.0, 0.0))
    view.get_world_poses()
    for k in range(0, 300, 2):
        stage.RemovePrim(f"/World/filler/x_{k}")
    for i in range(N):
        UsdGeom.Xform.Define(stage, f"/World/envs/env_{i}/Robot/Sibling")
    view.get_world_poses()
    stage.RemovePrim("/World/filler")
    stage.RemovePrim("/World/envs/env_5/Robot/Sibling")


# case -> (edit, outcome on usd, outcome on fabric); "correct" or "raises"
CASES: dict[str, tuple[Callable, str, str]] = {
    "removed": (_remove, "raises", "raises"),
    "removed_access_recreated": (_remove_access_recreate, "raises", "raises"),
    "removed_and_recreated": (_remove_recreate, "raises", "correct"),
    "sdf_removed_and_recreated": (_sdf_remove_recreate, "raises", "correct"),
    "deactivated": (_deactivate, "raises", "raises"),
    "parent_deactivated": (_deactivate_parent, "raises", "raises"),
    "op_stack_replaced": (_change_op_stack, "correct", "correct"),
    "parent_ops_reordered": (_reorder_parent_ops, "correct", "correct"),
    "reset_xform_stack": (_reset_stack, "correct", "raises"),
    "parent_reset_xform_stack": (_reset_parent_stack, "correct", "raises"),
    "parent_reparented_namespace_edit": (_reparent_namespace_edit, "raises", "raises"),
    "parent_reparented_copy_remove": (_reparent_copy_remove, "raises", "raises"),
    "retyped_to_scope": (_retype, "raises", "raises"),
    "parent_moved": (_move_parent, "correct", "correct"),
    "bulk_add_remove_others": (_bulk_churn, "correct", "correct"),
}


def _posable(stage: Usd.Stage, paths: tuple[str, ...]) -> list[str]:
    """The paths that still hold an active Xformable prim."""
    prims = [stage.GetPrimAtPath(p) for p in paths]
    return [p for p, prim in zip(paths, prims, strict=True) if prim and prim.IsActive() and prim.IsA(UsdGeom.Xformable)]


def _assert_reads_truth(stage: Usd.Stage, view: fv.BaseFrameView, rows: list[int] | None = None) -> None:
    """World positions/orientations (all rows, or ``rows`` through indices) equal a fresh XformCache."""
    paths = list(view.prim_paths) if rows is None else [view.prim_paths[r] for r in rows]
    t, q, _ = decompose_all(xform_cache_world(stage, paths))
    pos, quat = view.get_world_poses(rows)
    np.testing.assert_allclose(pos.numpy(), t, atol=1e-4)
    assert_quats_close(quat.numpy(), q, atol=1e-4)


@pytest.mark.parametrize("case", list(CASES))
def test_stage_edit_under_a_live_view(backend: str, device: str, case: str) -> None:
    """Each stage edit gives the correct pose or a RuntimeError naming the edited prim, as the policy table says;
    a rejected write changes no prim, and a view made after the edit reads the correct poses."""
    edit, on_usd, on_fabric = CASES[case]
    expected = on_usd if backend == "usd" else on_fabric
    stage = build_env_stage(N, seed=31)
    view = BACKENDS[backend](CAMERAS, stage, device)
    try:
        view.get_world_poses()
        edit(stage, view)
        with BACKENDS[backend](_posable(stage, view.prim_paths), stage, device) as fresh:  # made after the edit
            _assert_reads_truth(stage, fresh)
        if expected == "correct":
            _assert_reads_truth(stage, view)
            _assert_reads_truth(stage, view, [ROW, 0, ROW])
            target = np.array([[1.0, -2.0, 0.5]])
            view.set_world_poses(target, None, [ROW])
            np.testing.assert_allclose(view.get_world_poses([ROW])[0].numpy(), target, atol=1e-4)
        else:
            name = re.escape(TARGET)
            for call in (
                view.get_world_poses,
                lambda: view.get_local_poses([ROW]),
                view.get_world_scales,
                lambda: view.set_world_poses(np.zeros((N, 3)), None),
                lambda: view.set_local_poses(np.zeros((1, 3)), None, [ROW]),
            ):
                with pytest.raises(RuntimeError, match=name):
                    call()
            others = [i for i in range(N) if i != ROW]
            if backend == "usd":  # the USD view checks the prims it touches: other rows still read correctly
                _assert_reads_truth(stage, view, others)
            # nothing was written by the rejected writes: the other prims are where USD says
            with BACKENDS[backend]([view.prim_paths[i] for i in others], stage, device) as rest:
                _assert_reads_truth(stage, rest)
    finally:
        view.close()


def test_world_write_under_a_singular_parent_raises_and_writes_nothing(backend: str, device: str) -> None:
    """A parent with a zero scale admits no world pose: the write raises ValueError naming the prim and writes no
    row (the other rows of the same call included); local writes still work."""
    stage = build_env_stage(N, seed=32)
    UsdGeom.Xformable(stage.GetPrimAtPath(ROBOT)).GetOrderedXformOps()[2].Set(Gf.Vec3d(0.0, 1.0, 1.0))
    with BACKENDS[backend](CAMERAS, stage, device) as view:
        before = [a.numpy().copy() for a in view.get_local_poses()]
        with pytest.raises(ValueError, match=re.escape(TARGET)):
            view.set_world_poses(np.ones((N, 3)), None)
        with pytest.raises(ValueError, match=re.escape(TARGET)):
            view.set_world_poses(None, np.tile([0.0, 0.0, 0.0, 1.0], (2, 1)), [0, ROW])
        for got, want in zip(view.get_local_poses(), before, strict=True):
            np.testing.assert_array_equal(got.numpy(), want)
        view.set_local_poses(np.full((1, 3), 0.5), None, [ROW])
        np.testing.assert_allclose(view.get_local_poses([ROW])[0].numpy(), [[0.5, 0.5, 0.5]], atol=1e-6)


def test_fabric_view_survives_other_views_and_usd_churn_interleaved(device: str) -> None:
    """Bucket churn from both sources at once (other views tagging/untagging, USD prims added/removed between
    reads) never makes a Fabric view return another prim's pose."""
    stage = build_env_stage(N, seed=33)
    rng = np.random.default_rng(5)
    with fv.FabricFrameView(CAMERAS, stage=stage, device=device) as view:
        others: list[fv.FabricFrameView] = []
        for step in range(30):
            if others and rng.random() < 0.4:
                others.pop(int(rng.integers(len(others)))).close()
            else:
                pick = sorted(rng.choice(N, size=int(rng.integers(1, N)), replace=False).tolist())
                others.append(fv.FabricFrameView([f"/World/envs/env_{i}/Robot" for i in pick], stage=stage,
                                                 device=device))  # fmt: skip
            for k in range(int(rng.integers(0, 40))):
                UsdGeom.Xform.Define(stage, f"/World/churn_{step}/x_{k}")
            if step % 3 == 2:
                stage.RemovePrim(f"/World/churn_{step - 1}")
            rows = rng.permutation(N)[: int(rng.integers(1, N + 1))].tolist()
            _assert_reads_truth(stage, view)
            _assert_reads_truth(stage, view, rows)
        for other in others:
            other.close()

# SPDX-License-Identifier: Apache-2.0
"""What is specific to UsdFrameView: the xformOps it authors, op stacks it meets, resetXformStack, stale prims."""

from __future__ import annotations

import doctest
import logging

import numpy as np
import pytest
from helpers import (
    PoseModel,
    assert_quats_close,
    build_env_stage,
    compose,
    decompose,
    decompose_all,
    env_paths,
    random_quats,
    xform_cache_local,
    xform_cache_world,
)
from pxr import Gf, Sdf, Tf, Usd, UsdGeom

import frameview as fv
import frameview.usd.view

N = 4
ROBOTS = "/World/envs/env_.*/Robot"
ROBOT_PATHS = env_paths(N, "/Robot")
CAMERA_PATHS = env_paths(N, "/Robot/Camera")


def _f32(values: np.ndarray) -> np.ndarray:
    return np.asarray(values, dtype=np.float32).astype(np.float64)


def _op_order(stage: Usd.Stage, path: str) -> list[str]:
    return [str(name) for name in UsdGeom.Xformable(stage.GetPrimAtPath(path)).GetXformOpOrderAttr().Get() or []]


def _attr(stage: Usd.Stage, path: str, name: str) -> Usd.Attribute:
    return stage.GetPrimAtPath(path).GetAttribute(name)


def _xform(stage: Usd.Stage, path: str) -> UsdGeom.Xform:
    return UsdGeom.Xform.Define(stage, path)


# ---------------------------------------------------------------- construction


def test_backend_and_stage(device: str) -> None:
    """backend is "usd", the stage is kept, and the class docstring example runs."""
    stage = build_env_stage(N, seed=0)
    with fv.UsdFrameView(ROBOTS, stage=stage, device=device) as view:
        assert view.backend == "usd" and view.stage is stage
        assert "UsdFrameView" in repr(view) and "'usd'" in repr(view)
    assert doctest.testmod(frameview.usd.view, verbose=False).failed == 0


@pytest.mark.parametrize("bad", [None, "stage.usda", Sdf.Layer.CreateAnonymous()], ids=["none", "str", "layer"])
def test_stage_must_be_a_usd_stage(bad: object) -> None:
    """Anything but a pxr Usd.Stage raises TypeError naming the argument."""
    with pytest.raises(TypeError, match=r"stage: expected a pxr Usd.Stage"):
        fv.UsdFrameView("/World", stage=bad)


def test_options_are_keyword_only() -> None:
    """One positional operand: the stage and device are keyword-only."""
    stage = build_env_stage(1, seed=0)
    with pytest.raises(TypeError):
        fv.UsdFrameView(ROBOTS, stage, "cpu")  # type: ignore[misc]


def test_non_xformable_prim_rejected() -> None:
    """A prim that is not Xformable (a Scope, a typeless prim) raises ValueError naming it."""
    stage = Usd.Stage.CreateInMemory()
    UsdGeom.Scope.Define(stage, "/Looks")
    stage.DefinePrim("/Typeless")
    _xform(stage, "/Fine")
    with pytest.raises(ValueError, match=r"'/Looks' is a Scope, expected an Xformable"):
        fv.UsdFrameView(["/Fine", "/Looks"], stage=stage)
    with pytest.raises(ValueError, match=r"'/Typeless' is a typeless prim"):
        fv.UsdFrameView("/Typeless", stage=stage)


def test_pattern_matching_nothing_raises() -> None:
    """A pattern that matches no prim raises ValueError."""
    with pytest.raises(ValueError):
        fv.UsdFrameView("/World/envs/env_.*/Nope", stage=build_env_stage(2, seed=0))


# ---------------------------------------------------------------- authored ops


def test_writes_author_translate_orient_scale(device: str) -> None:
    """Writes to a translate-only prim give [translate, orient, scale] (double3/quatd/double3), quats as (w, xyz)."""
    stage = Usd.Stage.CreateInMemory()
    _xform(stage, "/A").AddTranslateOp().Set(Gf.Vec3d(1.0, 2.0, 3.0))
    q = _f32(random_quats(np.random.default_rng(0), 1))
    with fv.UsdFrameView("/A", stage=stage, device=device) as view:
        view.set_local_poses(orientations=q)
        view.set_local_scales(np.array([[1.0, 2.0, 0.5]]))
    assert _op_order(stage, "/A") == ["xformOp:translate", "xformOp:orient", "xformOp:scale"]
    orient = _attr(stage, "/A", "xformOp:orient")
    assert str(orient.GetTypeName()) == "quatd"
    assert str(_attr(stage, "/A", "xformOp:scale").GetTypeName()) == "double3"
    value = orient.Get()
    stored = np.array([*value.GetImaginary(), value.GetReal()])
    assert_quats_close(stored[None], q, atol=1e-7)
    assert _attr(stage, "/A", "xformOp:translate").Get() == Gf.Vec3d(1.0, 2.0, 3.0)
    assert _attr(stage, "/A", "xformOp:scale").Get() == Gf.Vec3d(1.0, 2.0, 0.5)


def test_existing_precision_is_kept() -> None:
    """float3 / quatf / half3 ops keep their type when written."""
    stage = Usd.Stage.CreateInMemory()
    xf = _xform(stage, "/A")
    xf.AddTranslateOp(UsdGeom.XformOp.PrecisionFloat).Set(Gf.Vec3f(1.0, 2.0, 3.0))
    xf.AddOrientOp(UsdGeom.XformOp.PrecisionFloat).Set(Gf.Quatf(1.0))
    xf.AddScaleOp(UsdGeom.XformOp.PrecisionHalf).Set(Gf.Vec3h(1.0, 1.0, 1.0))
    h = np.sqrt(0.5)
    with fv.UsdFrameView("/A", stage=stage) as view:
        view.set_world_poses(np.array([[4.0, 5.0, 6.0]]), np.array([[0.0, 0.0, h, h]]))
        view.set_local_scales(np.array([[2.0, 3.0, 4.0]]))
    types = [str(_attr(stage, "/A", f"xformOp:{n}").GetTypeName()) for n in ("translate", "orient", "scale")]
    assert types == ["float3", "quatf", "half3"]
    assert _attr(stage, "/A", "xformOp:translate").Get() == Gf.Vec3f(4.0, 5.0, 6.0)
    assert _attr(stage, "/A", "xformOp:scale").Get() == Gf.Vec3h(2.0, 3.0, 4.0)
    np.testing.assert_allclose(
        xform_cache_world(stage, ["/A"])[0], compose([4, 5, 6], [0, 0, h, h], [2, 3, 4]), atol=1e-6
    )


def test_partial_write_authors_only_the_written_op() -> None:
    """A position-only write changes xformOp:translate only; orient and scale keep their exact authored values."""
    stage = build_env_stage(N, seed=1)
    orient = [_attr(stage, p, "xformOp:orient").Get() for p in ROBOT_PATHS]
    scale = [_attr(stage, p, "xformOp:scale").Get() for p in ROBOT_PATHS]
    with fv.UsdFrameView(ROBOTS, stage=stage) as view:
        view.set_world_poses(positions=np.ones((N, 3)))
    assert [_attr(stage, p, "xformOp:orient").Get() for p in ROBOT_PATHS] == orient
    assert [_attr(stage, p, "xformOp:scale").Get() for p in ROBOT_PATHS] == scale
    np.testing.assert_allclose(xform_cache_world(stage, ROBOT_PATHS)[:, 3, :3], np.ones((N, 3)), atol=1e-12)


def test_writes_reach_usd_and_match_the_model(device: str) -> None:
    """After world, local and scale writes, pxr XformCache on the stage equals the float64 model (USD is written)."""
    stage = build_env_stage(N, seed=2)
    model = PoseModel(stage, ROBOT_PATHS + CAMERA_PATHS)
    rng = np.random.default_rng(2)
    with fv.UsdFrameView(ROBOTS, stage=stage, device=device) as view:
        p, q = _f32(rng.uniform(-2, 2, (N, 3))), _f32(random_quats(rng, N))
        view.set_world_poses(p, q)
        model.set_world(ROBOT_PATHS, p, q)
        t = _f32(rng.uniform(-2, 2, (2, 3)))
        view.set_local_poses(translations=t, indices=[3, 0])
        model.set_local([ROBOT_PATHS[3], ROBOT_PATHS[0]], t)
        s = _f32(rng.uniform(0.5, 2, (N, 3)))
        view.set_local_scales(s)
        model.set_local_scales(ROBOT_PATHS, s)
    paths = ROBOT_PATHS + CAMERA_PATHS
    np.testing.assert_allclose(xform_cache_world(stage, paths), model.worlds(paths), atol=1e-9)
    np.testing.assert_allclose(xform_cache_local(stage, paths), model.locals(paths), atol=1e-9)


def test_writes_are_one_change_block() -> None:
    """A bulk write reaches the stage's listeners as one notice (authored inside one Sdf.ChangeBlock)."""
    stage = build_env_stage(N, seed=3)
    notices = []
    listener = Tf.Notice.Register(Usd.Notice.ObjectsChanged, lambda notice, sender: notices.append(notice), stage)
    with fv.UsdFrameView(ROBOTS, stage=stage) as view:
        view.set_world_poses(np.zeros((N, 3)), random_quats(np.random.default_rng(3), N))
    listener.Revoke()
    assert len(notices) == 1


# ---------------------------------------------------------------- op stacks


def _odd_stage() -> tuple[Usd.Stage, list[str]]:
    """Prims with non-standard op stacks under a rotated, scaled parent (no shear anywhere)."""
    stage = Usd.Stage.CreateInMemory()
    parent = _xform(stage, "/P")
    parent.AddTranslateOp().Set(Gf.Vec3d(1.0, -2.0, 0.5))
    parent.AddRotateXYZOp().Set(Gf.Vec3f(10.0, 20.0, 30.0))
    parent.AddScaleOp().Set(Gf.Vec3f(1.5, 1.5, 1.5))
    rot = _xform(stage, "/P/RotateXYZ")
    rot.AddTranslateOp().Set(Gf.Vec3d(1.0, 2.0, 3.0))
    rot.AddRotateXYZOp().Set(Gf.Vec3f(30.0, -45.0, 60.0))
    rot.AddScaleOp().Set(Gf.Vec3f(1.0, 2.0, 3.0))
    mat = _xform(stage, "/P/Matrix")
    mat.AddTransformOp().Set(Gf.Matrix4d(compose([0.5, 0.0, -1.0], [0.1, 0.2, 0.3, 0.9], [2.0, 1.0, 0.5]).tolist()))
    piv = _xform(stage, "/P/Pivot")
    piv.AddTranslateOp().Set(Gf.Vec3d(3.0, 0.0, 0.0))
    pivot = piv.AddTranslateOp(opSuffix="pivot")
    pivot.Set(Gf.Vec3d(0.0, 1.0, 0.0))
    piv.AddRotateZOp().Set(45.0)
    piv.AddTranslateOp(opSuffix="pivot", isInverseOp=True)
    order = _xform(stage, "/P/ScaleFirst")
    order.AddScaleOp().Set(Gf.Vec3f(2.0, 2.0, 2.0))
    order.AddTranslateOp().Set(Gf.Vec3d(0.0, 0.0, 1.0))
    return stage, ["/P/RotateXYZ", "/P/Matrix", "/P/Pivot", "/P/ScaleFirst"]


def test_non_standard_stacks_are_read_as_composed(device: str) -> None:
    """rotateXYZ, matrix, pivot and out-of-order stacks read like pxr XformCache composes them."""
    stage, paths = _odd_stage()
    with fv.UsdFrameView(paths, stage=stage, device=device) as view:
        for read, mats in ((view.get_world_poses, xform_cache_world), (view.get_local_poses, xform_cache_local)):
            pos, quat = read()
            expected_pos, expected_quat, _ = decompose_all(mats(stage, paths))
            np.testing.assert_allclose(pos.numpy(), expected_pos, atol=1e-5)
            assert_quats_close(quat.numpy(), expected_quat, atol=1e-5)
        _, _, expected_scale = decompose_all(xform_cache_local(stage, paths))
        np.testing.assert_allclose(view.get_local_scales().numpy(), expected_scale, rtol=1e-6)


def test_non_standard_stacks_are_standardised_on_first_write(caplog: pytest.LogCaptureFixture) -> None:
    """The first write replaces a non-standard stack by the equivalent [translate, orient, scale], logged once."""
    stage, paths = _odd_stage()
    model = PoseModel(stage, paths)
    new_pos = _f32(np.arange(len(paths) * 3).reshape(-1, 3) / 3.0)
    with caplog.at_level(logging.INFO, logger="frameview.usd"), fv.UsdFrameView(paths, stage=stage) as view:
        view.set_world_poses(positions=new_pos[:2], indices=[0, 1])
        view.set_world_poses(positions=new_pos[2:], indices=[2, 3])
    model.set_world(paths, new_pos)
    for path in paths:
        assert _op_order(stage, path) == ["xformOp:translate", "xformOp:orient", "xformOp:scale"], path
    np.testing.assert_allclose(xform_cache_world(stage, paths), model.worlds(paths), atol=1e-6)
    records = [r for r in caplog.records if "replaced the xformOp stack" in r.getMessage()]
    assert len(records) == 1 and "/P/RotateXYZ" in records[0].getMessage()


def test_sheared_local_rotation_write_raises_and_writes_nothing() -> None:
    """A prim whose local matrix has shear is readable; a rotation write (which would drop the shear) raises
    ValueError naming it and writes nothing, as on the Fabric backend."""
    stage = Usd.Stage.CreateInMemory()
    _xform(stage, "/Fine").AddTranslateOp().Set(Gf.Vec3d(1.0, 0.0, 0.0))
    sheared = np.eye(4)
    sheared[1, 0] = 0.5
    sheared[3, :3] = [0.0, 2.0, 0.0]
    _xform(stage, "/Sheared").AddTransformOp().Set(Gf.Matrix4d(sheared.tolist()))
    quats = np.tile([0.0, 0.0, 0.0, 1.0], (2, 1))
    with fv.UsdFrameView(["/Fine", "/Sheared"], stage=stage) as view:
        np.testing.assert_allclose(view.get_world_poses()[0].numpy(), [[1.0, 0.0, 0.0], [0.0, 2.0, 0.0]])
        before = stage.GetRootLayer().ExportToString()
        for call in (view.set_world_poses, view.set_local_poses):
            with pytest.raises(ValueError, match=r"'/Sheared'.*shear.*nothing was written"):
                call(None, quats)
            assert stage.GetRootLayer().ExportToString() == before
        with pytest.raises(ValueError, match=r"'/Sheared'.*shear.*nothing was written"):
            view.set_local_scales(np.ones((2, 3)))
        assert stage.GetRootLayer().ExportToString() == before
        view.set_world_poses(positions=np.zeros((1, 3)), indices=[0])  # the other prim is still writable
    assert _attr(stage, "/Fine", "xformOp:translate").Get() == Gf.Vec3d(0.0, 0.0, 0.0)


def test_sheared_local_translation_write_keeps_the_shear() -> None:
    """A translation-only write on a sheared prim is exact and keeps the upper 3x3 (shear included) bit for bit."""
    stage = Usd.Stage.CreateInMemory()
    sheared = np.eye(4)
    sheared[1, 0] = 0.5
    sheared[3, :3] = [0.0, 2.0, 0.0]
    _xform(stage, "/Sheared").AddTransformOp().Set(Gf.Matrix4d(sheared.tolist()))
    child = _xform(stage, "/Sheared/Child")
    child.AddTranslateOp().Set(Gf.Vec3d(1.0, 1.0, 0.0))
    with fv.UsdFrameView("/Sheared", stage=stage) as view:
        view.set_local_poses(translations=np.array([[3.0, 4.0, 5.0]]))
        local = xform_cache_local(stage, ["/Sheared"])[0]
        np.testing.assert_array_equal(local[:3, :3], sheared[:3, :3])
        np.testing.assert_allclose(local[3, :3], [3.0, 4.0, 5.0])
        view.set_world_poses(positions=np.array([[-1.0, 0.5, 2.0]]))
        np.testing.assert_allclose(xform_cache_world(stage, ["/Sheared"])[0][3, :3], [-1.0, 0.5, 2.0], atol=1e-12)
        np.testing.assert_array_equal(xform_cache_local(stage, ["/Sheared"])[0][:3, :3], sheared[:3, :3])
    truth = np.array([1.0, 1.0, 0.0, 1.0]) @ xform_cache_world(stage, ["/Sheared"])[0]
    np.testing.assert_allclose(xform_cache_world(stage, ["/Sheared/Child"])[0][3, :3], truth[:3], atol=1e-12)


# ---------------------------------------------------------------- hierarchy corner cases


def test_reset_xform_stack_world_is_local(device: str) -> None:
    """A !resetXformStack! prim ignores its parents: world == local, and world writes keep the reset."""
    stage = Usd.Stage.CreateInMemory()
    parent = _xform(stage, "/P")
    parent.AddTranslateOp().Set(Gf.Vec3d(10.0, 0.0, 0.0))
    parent.AddScaleOp().Set(Gf.Vec3f(2.0, 2.0, 2.0))
    child = _xform(stage, "/P/Reset")
    child.SetResetXformStack(True)
    child.AddTranslateOp().Set(Gf.Vec3d(1.0, 2.0, 3.0))
    with fv.UsdFrameView("/P/Reset", stage=stage, device=device) as view:
        np.testing.assert_allclose(view.get_world_poses()[0].numpy(), [[1.0, 2.0, 3.0]])
        h = np.sqrt(0.5)
        view.set_world_poses(np.array([[4.0, 5.0, 6.0]]), np.array([[h, 0.0, 0.0, h]]))
        np.testing.assert_allclose(view.get_local_poses()[0].numpy(), [[4.0, 5.0, 6.0]], atol=1e-6)
        assert_quats_close(view.get_local_poses()[1].numpy(), [[h, 0.0, 0.0, h]], atol=1e-6)
    assert child.GetResetXformStack()
    np.testing.assert_allclose(xform_cache_world(stage, ["/P/Reset"])[0][3, :3], [4.0, 5.0, 6.0], atol=1e-6)


def test_root_prim_and_scope_parent() -> None:
    """Prims under the pseudo-root or a non-Xformable Scope have world == local, for reads and world writes."""
    stage = Usd.Stage.CreateInMemory()
    _xform(stage, "/Root").AddTranslateOp().Set(Gf.Vec3d(1.0, 0.0, 0.0))
    UsdGeom.Scope.Define(stage, "/Scope")
    _xform(stage, "/Scope/Child").AddTranslateOp().Set(Gf.Vec3d(0.0, 1.0, 0.0))
    with fv.UsdFrameView(["/Root", "/Scope/Child"], stage=stage) as view:
        pos = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
        view.set_world_poses(positions=pos)
        np.testing.assert_allclose(view.get_local_poses()[0].numpy(), pos)
    np.testing.assert_allclose(xform_cache_world(stage, ["/Root", "/Scope/Child"])[:, 3, :3], pos)


def test_edits_made_by_others_are_seen() -> None:
    """Nothing is cached: an edit made on the stage after a read is seen by the next read."""
    stage = build_env_stage(N, seed=4)
    with fv.UsdFrameView(ROBOTS, stage=stage) as view:
        view.get_world_poses()
        _attr(stage, "/World/envs/env_2", "xformOp:translate").Set(Gf.Vec3d(100.0, 0.0, 0.0))
        expected, _, _ = decompose(xform_cache_world(stage, [ROBOT_PATHS[2]])[0])
        np.testing.assert_allclose(view.get_world_poses([2])[0].numpy()[0], expected, atol=1e-4)


def test_removed_prim_raises_runtime_error() -> None:
    """A prim removed after the view was made raises RuntimeError naming it; other rows stay readable."""
    stage = build_env_stage(N, seed=5)
    with fv.UsdFrameView(ROBOTS, stage=stage) as view:
        stage.RemovePrim(ROBOT_PATHS[1])
        message = rf"prim '{ROBOT_PATHS[1]}' was removed from the stage.*recreate the view"
        with pytest.raises(RuntimeError, match=message):
            view.get_world_poses()
        with pytest.raises(RuntimeError, match=message):
            view.set_local_scales(np.ones((N, 3)))
        with pytest.raises(RuntimeError, match=message):
            view.get_local_poses([1])
        assert view.get_world_poses([0, 2, 3])[0].shape == (3,)


def test_world_write_under_a_singular_parent_raises() -> None:
    """A world write under a parent with a zero scale raises ValueError naming the prim; nothing is written."""
    stage = Usd.Stage.CreateInMemory()
    _xform(stage, "/Flat").AddScaleOp().Set(Gf.Vec3f(0.0, 1.0, 1.0))
    _xform(stage, "/Flat/Child").AddTranslateOp().Set(Gf.Vec3d(0.0, 1.0, 0.0))
    with fv.UsdFrameView("/Flat/Child", stage=stage) as view:
        before = stage.GetRootLayer().ExportToString()
        with pytest.raises(ValueError, match=r"'/Flat/Child'.*singular.*nothing was written"):
            view.set_world_poses(positions=np.ones((1, 3)))
        assert stage.GetRootLayer().ExportToString() == before
        view.set_local_poses(translations=np.ones((1, 3)))  # local writes need no inverse
    assert _attr(stage, "/Flat/Child", "xformOp:translate").Get() == Gf.Vec3d(1.0, 1.0, 1.0)

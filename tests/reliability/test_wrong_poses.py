# SPDX-License-Identifier: Apache-2.0
"""The "no silent wrong pose" defects, one test each, against float64 truth (pxr Gf / NumPy), on both backends.

Fabric writes change Fabric only, so the truth for the fabric backend is what the write asked for composed with the
stage's other transforms in float64; the usd backend is checked against ``UsdGeom.XformCache`` after the write.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from helpers import assert_quats_close, compose, decompose, random_quats, xform_cache_local, xform_cache_world
from pxr import Gf, Sdf, Usd, UsdGeom

import frameview as fv

BACKENDS = ("usd", "fabric")


def _view(backend: str, paths: Any, stage: Usd.Stage, device: str) -> fv.BaseFrameView:
    cls = fv.UsdFrameView if backend == "usd" else fv.FabricFrameView
    return cls(paths, stage=stage, device=device)


def _xform(stage: Usd.Stage, path: str, t=(0.0, 0.0, 0.0), q=None, s=None) -> UsdGeom.Xform:
    xf = UsdGeom.Xform.Define(stage, path)
    xf.AddTranslateOp().Set(Gf.Vec3d(*t))
    if q is not None:
        x, y, z, w = q
        xf.AddOrientOp(UsdGeom.XformOp.PrecisionDouble).Set(Gf.Quatd(w, Gf.Vec3d(x, y, z)).GetNormalized())
    if s is not None:
        xf.AddScaleOp(UsdGeom.XformOp.PrecisionDouble).Set(Gf.Vec3d(*s))
    return xf


def _read(view: fv.BaseFrameView, space: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    get = view.get_world_poses if space == "world" else view.get_local_poses
    scales = view.get_world_scales if space == "world" else view.get_local_scales
    pos, quat = get()
    return pos.numpy().copy(), quat.numpy().copy(), scales().numpy().copy()


# ---------------------------------------------------------------- 3, 4: a prim and its descendant in one call


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("order", list(itertools.permutations(range(3))))
@pytest.mark.parametrize("space", ["world", "local"])
def test_nested_prims_written_in_one_call_hold_the_request(backend: str, order, space: str, device: str) -> None:
    """A prim, its child and its grandchild (an unviewed prim between) written in one call, in every row order:
    each holds exactly the requested pose; the unviewed prims below follow."""
    stage = Usd.Stage.CreateInMemory()
    mid_q = np.array([0.2, 0.0, 0.0, 0.98]) / np.linalg.norm([0.2, 0.0, 0.0, 0.98])
    _xform(stage, "/A", (1.0, 2.0, 3.0), (0.1, 0.2, 0.3, 0.9), (2.0, 2.0, 2.0))
    _xform(stage, "/A/B", (0.5, 0.0, 0.0), (0.0, 0.3, 0.0, 0.95))
    _xform(stage, "/A/B/Mid", (0.0, 1.0, 0.0), mid_q, (0.5, 0.5, 0.5))
    _xform(stage, "/A/B/Mid/C", (0.0, 0.0, 1.0))
    _xform(stage, "/A/B/Mid/C/Leaf", (0.3, 0.2, 0.1))
    names = ["/A", "/A/B", "/A/B/Mid/C"]
    paths = [names[k] for k in order]
    rng = np.random.default_rng(3)
    req_pos, req_quat = rng.uniform(-2, 2, (3, 3)), random_quats(rng, 3)
    pos, quat = {p: req_pos[k] for k, p in enumerate(paths)}, {p: req_quat[k] for k, p in enumerate(paths)}
    if space == "world":  # world scales: A 2, B 2 (under A), C 1 (2 * 0.5)
        world = {p: compose(pos[p], quat[p], (s, s, s)) for p, s in zip(names, (2.0, 2.0, 1.0), strict=True)}
    else:
        world = {"/A": compose(pos["/A"], quat["/A"], (2.0, 2.0, 2.0))}
        world["/A/B"] = compose(pos["/A/B"], quat["/A/B"], (1.0, 1.0, 1.0)) @ world["/A"]
        mid = compose((0.0, 1.0, 0.0), mid_q, (0.5, 0.5, 0.5)) @ world["/A/B"]
        world["/A/B/Mid/C"] = compose(pos["/A/B/Mid/C"], quat["/A/B/Mid/C"], (1.0, 1.0, 1.0)) @ mid
    world["/A/B/Mid/C/Leaf"] = compose((0.3, 0.2, 0.1), (0.0, 0.0, 0.0, 1.0), (1.0, 1.0, 1.0)) @ world["/A/B/Mid/C"]
    with _view(backend, paths, stage, device) as view:
        (view.set_world_poses if space == "world" else view.set_local_poses)(req_pos, req_quat)
        got_pos, got_quat, _ = _read(view, space)
        np.testing.assert_allclose(got_pos, req_pos, atol=1e-5)
        assert_quats_close(got_quat, req_quat, atol=1e-5)
        everything = [*paths, "/A/B/Mid/C/Leaf"]
        with _view(backend, everything, stage, device) as observer:
            got_pos, got_quat, got_scale = _read(observer, "world")
            for k, path in enumerate(everything):
                t, q, sc = decompose(world[path])
                np.testing.assert_allclose(got_pos[k], t, atol=1e-5, err_msg=path)
                assert_quats_close(got_quat[k : k + 1], q[None], atol=1e-5)
                np.testing.assert_allclose(got_scale[k], sc, atol=1e-5, err_msg=path)
    if backend == "usd":
        leaf = xform_cache_world(stage, ["/A/B/Mid/C/Leaf"])[0]
        np.testing.assert_allclose(leaf, world["/A/B/Mid/C/Leaf"], atol=1e-5)


# ---------------------------------------------------------------- 5, 6: parents that are mirrored or not uniform

PARENT_SCALES = {
    "uniform": (1.5, 1.5, 1.5),
    "non-uniform": (1.0, 2.0, 0.5),
    "mirror-all": (-1.0, -1.0, -1.0),
    "mirror-y": (1.0, -1.0, 1.0),
    "mirror-scaled": (-2.0, 2.0, 2.0),
}


def _parent_child_stage(parent_scale) -> Usd.Stage:
    stage = Usd.Stage.CreateInMemory()
    _xform(stage, "/P", (1.0, -2.0, 0.5), (0.3, -0.2, 0.1, 0.9), parent_scale)
    _xform(stage, "/P/C", (0.4, 0.3, -0.2), (0.0, 0.4, 0.1, 0.9), (1.0, 1.5, 0.7))
    _xform(stage, "/P/C/G", (0.1, 0.2, 0.3))
    return stage


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("parent", list(PARENT_SCALES))
def test_position_only_world_writes_keep_the_local_3x3(backend: str, parent: str, device: str) -> None:
    """orientations=None: the local rotation and scale are kept exactly, the world position is exact, and ten
    repeated writes do not drift (a position-only write under a non-uniform or mirrored parent rotated the prim)."""
    stage = _parent_child_stage(PARENT_SCALES[parent])
    before = xform_cache_local(stage, ["/P/C"])[0]
    target = np.array([[0.7, -1.1, 2.2]])
    with _view(backend, "/P/C", stage, device) as view:
        for _ in range(10):
            view.set_world_poses(positions=target)
            np.testing.assert_allclose(view.get_world_poses()[0].numpy(), target, atol=1e-5)
        local_pos, local_quat, local_scale = _read(view, "local")
    _t0, q0, s0 = decompose(before)
    assert_quats_close(local_quat, q0[None], atol=1e-6)
    np.testing.assert_allclose(local_scale[0], s0, atol=1e-6)
    parent_world = xform_cache_world(stage, ["/P"])[0]
    np.testing.assert_allclose((np.append(local_pos[0], 1.0) @ parent_world)[:3], target[0], atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("parent", [p for p in PARENT_SCALES if p != "non-uniform"])
def test_world_orientation_under_a_similarity_parent_reads_back(backend: str, parent: str, device: str) -> None:
    """Under any similarity parent (uniform scale, mirrors included) a world pose write reads back exactly, the
    local scale is kept, and the grandchild follows."""
    stage = _parent_child_stage(PARENT_SCALES[parent])
    rng = np.random.default_rng(7)
    parent_world = xform_cache_world(stage, ["/P"])[0]
    _t, _q, local_scale = decompose(xform_cache_local(stage, ["/P/C"])[0])
    with _view(backend, "/P/C", stage, device) as view, _view(backend, "/P/C/G", stage, device) as grandchild:
        for pos, quat in zip(rng.uniform(-3, 3, (5, 1, 3)), random_quats(rng, 5)[:, None], strict=True):
            view.set_world_poses(pos, quat)
            got_pos, got_quat = view.get_world_poses()
            np.testing.assert_allclose(got_pos.numpy(), pos, atol=1e-5)
            assert_quats_close(got_quat.numpy(), quat, atol=1e-5)
            np.testing.assert_allclose(np.abs(view.get_local_scales().numpy()[0]), np.abs(local_scale), atol=1e-5)
            # the child's world matrix, from float64 truth: local kept scale, world rotation and position requested
            world_scale = np.abs(local_scale) * abs(np.linalg.det(parent_world[:3, :3])) ** (1.0 / 3.0)
            sign = np.sign(np.linalg.det(parent_world[:3, :3]) * np.prod(np.sign(local_scale)))
            child_world = compose(pos[0], quat[0], world_scale * np.array([sign, 1.0, 1.0]))
            truth = np.array([0.1, 0.2, 0.3, 1.0]) @ child_world
            np.testing.assert_allclose(grandchild.get_world_poses()[0].numpy()[0], truth[:3], atol=1e-5)


# ---------------------------------------------------------------- 7: a negative scale op and an orientation write


@pytest.mark.parametrize("device_", ["cpu"])
def test_orientation_write_over_a_negative_scale_op_agrees_across_backends(device_: str) -> None:
    """A prim whose scale op is (1, -1, 1): a local orientation write reads back on both backends and both hold
    the same local matrix (the USD backend authored the orient alone, and the kept scale flipped the rotation)."""
    quat = np.array([[0.2, -0.4, 0.1, 0.85]])
    quat /= np.linalg.norm(quat)
    mats = {}
    for backend in BACKENDS:
        stage = Usd.Stage.CreateInMemory()
        _xform(stage, "/P", (0.0, 0.0, 1.0))
        _xform(stage, "/P/C", (0.4, 0.3, -0.2), (0.0, 0.0, 0.0, 1.0), (1.0, -1.0, 1.0))
        with _view(backend, "/P/C", stage, device_) as view:
            view.set_local_poses(orientations=quat)
            assert_quats_close(view.get_local_poses()[1].numpy(), quat, atol=1e-6)
            pos, q, scale = _read(view, "local")
            mats[backend] = compose(pos[0], q[0], scale[0])
        if backend == "usd":
            np.testing.assert_allclose(xform_cache_local(stage, ["/P/C"])[0], mats["usd"], atol=1e-6)
    np.testing.assert_allclose(mats["fabric"], mats["usd"], atol=1e-6)
    assert np.linalg.det(mats["usd"][:3, :3]) < 0  # still mirrored


# ---------------------------------------------------------------- 8: a viewed prim becomes an instance proxy


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_prim_that_becomes_an_instance_proxy_raises_naming_it(backend: str, device: str) -> None:
    """An ancestor made instanceable turns the viewed prim into an instance proxy: the next access raises an
    error that names the prim and says so (it kept a stale pose on Fabric)."""
    stage = Usd.Stage.CreateInMemory()
    _xform(stage, "/Proto", (0.0, 0.0, 0.0))
    _xform(stage, "/Proto/Cam", (0.0, 2.0, 0.0))
    _xform(stage, "/World/Env", (1.0, 0.0, 0.0)).GetPrim().GetReferences().AddInternalReference("/Proto")
    _xform(stage, "/World/Other", (0.0, 0.0, 3.0))
    with _view(backend, ["/World/Other", "/World/Env/Cam"], stage, device) as view:
        view.get_world_poses()
        stage.GetPrimAtPath("/World/Env").SetInstanceable(True)
        with pytest.raises(RuntimeError, match=r"/World/Env/Cam.*instance proxy"):
            view.get_world_poses()


# ---------------------------------------------------------------- 9: shear


@pytest.mark.parametrize("backend", BACKENDS)
def test_shear_is_kept_by_translation_writes_and_rejected_by_rotation_writes(backend: str, device: str) -> None:
    """Both backends accept a translation-only write on a sheared prim and keep its upper 3x3 (its child stays
    put relative to it), and both reject a rotation or scale write naming it, writing nothing."""
    stage = Usd.Stage.CreateInMemory()
    sheared = np.eye(4)
    sheared[1, 0] = 0.5
    sheared[3, :3] = [0.0, 2.0, 0.0]
    UsdGeom.Xform.Define(stage, "/S").AddTransformOp().Set(Gf.Matrix4d(sheared.tolist()))
    _xform(stage, "/S/Child", (1.0, 1.0, 0.0))
    with _view(backend, "/S", stage, device) as view, _view(backend, "/S/Child", stage, device) as child:
        view.set_local_poses(translations=np.array([[3.0, 4.0, 5.0]]))
        expected = sheared.copy()
        expected[3, :3] = [3.0, 4.0, 5.0]
        truth = np.array([1.0, 1.0, 0.0, 1.0]) @ expected
        np.testing.assert_allclose(child.get_world_poses()[0].numpy()[0], truth[:3], atol=1e-6)
        before = child.get_world_poses()[0].numpy().copy()
        for call in (
            lambda: view.set_local_poses(orientations=np.array([[0.0, 0.0, 0.3, 0.95]])),
            lambda: view.set_world_poses(orientations=np.array([[0.0, 0.0, 0.3, 0.95]])),
            lambda: view.set_local_scales(np.array([[1.0, 2.0, 1.0]])),
        ):
            with pytest.raises(ValueError, match=r"'/S'.*shear.*nothing was written"):
                call()
        np.testing.assert_allclose(child.get_world_poses()[0].numpy(), before, atol=0)
    if backend == "usd":
        np.testing.assert_allclose(xform_cache_local(stage, ["/S"])[0], expected, atol=1e-12)


# ---------------------------------------------------------------- 2: USD edits that do not touch transforms


def _focal(stage: Usd.Stage) -> None:
    UsdGeom.Camera(stage.GetPrimAtPath("/R/Cam")).GetFocalLengthAttr().Set(35.0)


NON_TRANSFORM_EDITS = {
    "focal length set for the first time": _focal,
    "attribute created": lambda st: st.GetPrimAtPath("/R").CreateAttribute("x:foo", Sdf.ValueTypeNames.Float).Set(1.0),
    "attribute removed": lambda st: st.GetPrimAtPath("/R").RemoveProperty("x:bar"),
    "made invisible": lambda st: UsdGeom.Imageable(st.GetPrimAtPath("/R")).MakeInvisible(),
    "kind set": lambda st: Usd.ModelAPI(st.GetPrimAtPath("/R")).SetKind("component"),
    "API schema applied": lambda st: UsdGeom.ModelAPI.Apply(st.GetPrimAtPath("/R")),
}


@pytest.mark.parametrize("edit", list(NON_TRANSFORM_EDITS))
def test_non_transform_usd_edits_keep_fabric_writes(edit: str, device: str) -> None:
    """After Fabric writes (a robot's world pose, its camera's local pose), USD edits that touch no transform leave
    Fabric as written; an xformOp edit of the camera then re-reads the camera (and only it) from USD."""
    stage = Usd.Stage.CreateInMemory()
    _xform(stage, "/R", (1.0, 0.0, 0.0))
    stage.GetPrimAtPath("/R").CreateAttribute("x:bar", Sdf.ValueTypeNames.Float).Set(2.0)
    cam = UsdGeom.Camera.Define(stage, "/R/Cam")
    cam.AddTranslateOp().Set(Gf.Vec3d(0.0, 0.5, 0.0))
    robot_pos, cam_local = np.array([[3.0, 2.0, 1.0]]), np.array([[0.0, 0.0, 0.25]])
    with fv.FabricFrameView("/R", stage=stage, device=device) as robots, fv.FabricFrameView(
        "/R/Cam", stage=stage, device=device
    ) as cams:
        robots.set_world_poses(positions=robot_pos)
        cams.set_local_poses(translations=cam_local)
        NON_TRANSFORM_EDITS[edit](stage)
        np.testing.assert_allclose(robots.get_world_poses()[0].numpy(), robot_pos, atol=1e-6)
        np.testing.assert_allclose(cams.get_world_poses()[0].numpy(), robot_pos + cam_local, atol=1e-6)
        cam.GetOrderedXformOps()[0].Set(Gf.Vec3d(0.0, 0.0, 1.0))  # a transform edit: USD wins for the camera
        moved = robot_pos + np.array([0.0, 0.0, 1.0])
        np.testing.assert_allclose(cams.get_world_poses()[0].numpy(), moved, atol=1e-6)
        np.testing.assert_allclose(robots.get_world_poses()[0].numpy(), robot_pos, atol=1e-6)

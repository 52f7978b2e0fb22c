# SPDX-License-Identifier: Apache-2.0
"""The usdrt provider (frameview.fabric.providers.usdrt) on the CI stand-in for usdrt: what is specific to it.

The shared contract runs on it too (tests/contract, backend "usdrt"). What the stand-in cannot confirm is listed in
docs/usdrt.md.
"""

from __future__ import annotations

import gc
import logging
import re
import weakref
from collections.abc import Iterator

import numpy as np
import pytest
import warp as wp
from fakes.usdrt_standin import RESET_XFORM_STACK, StandinRuntime, installed
from helpers import PoseModel, build_env_stage, decompose_all, env_paths, xform_cache_local, xform_cache_world
from pxr import Gf, Usd, UsdGeom, UsdUtils

import frameview as fv
from frameview.fabric.providers import usdrt as provider_module
from frameview.fabric.stage import LOCAL_MATRIX, WORLD_MATRIX

ROBOTS = "/World/envs/env_.*/Robot"
CAMERAS = "/World/envs/env_.*/Robot/Camera"


@pytest.fixture
def standin(device: str) -> Iterator[StandinRuntime]:
    """The usdrt stand-in in sys.modules (Fabric Scene Delegate on, buckets shuffled in selections)."""
    with installed(device, shuffle_seed=1) as runtime:
        yield runtime


@pytest.fixture
def standin_no_fsd(device: str) -> Iterator[StandinRuntime]:
    """The usdrt stand-in without the Fabric Scene Delegate: prims carry no Fabric matrices until created."""
    with installed(device, fabric_scene_delegate=False) as runtime:
        yield runtime


def _parents_stage() -> Usd.Stage:
    """Isaac Lab's fixture with a typeless prim and a reset stack: /World/Parent_i at (0, 0, 1), Child at
    (0.1, 0, 0.05) under it, Child/Group (typeless, no transform) / Leaf at (0, 1, 0), and Child/Reset at (5, 0, 0)
    with a reset xform stack."""
    stage = Usd.Stage.CreateInMemory()
    UsdGeom.Xform.Define(stage, "/World")
    for i in range(3):
        UsdGeom.Xform.Define(stage, f"/World/Parent_{i}").AddTranslateOp().Set(Gf.Vec3d(0.0, 0.0, 1.0))
        child = f"/World/Parent_{i}/Child"
        UsdGeom.Xform.Define(stage, child).AddTranslateOp().Set(Gf.Vec3d(0.1, 0.0, 0.05))
        stage.DefinePrim(f"{child}/Group")
        UsdGeom.Xform.Define(stage, f"{child}/Group/Leaf").AddTranslateOp().Set(Gf.Vec3d(0.0, 1.0, 0.0))
        reset = UsdGeom.Xform.Define(stage, f"{child}/Reset")
        reset.SetResetXformStack(True)
        reset.AddTranslateOp().Set(Gf.Vec3d(5.0, 0.0, 0.0))
    return stage


def _assert_world_matches(view: fv.FabricFrameView, stage: Usd.Stage, paths: list[str] | None = None) -> None:
    t, q, s = decompose_all(xform_cache_world(stage, paths or view.prim_paths))
    pos, quat = view.get_world_poses()
    np.testing.assert_allclose(pos.numpy(), t, atol=2e-5)
    err = np.minimum(np.abs(quat.numpy() - q).max(1), np.abs(quat.numpy() + q).max(1))
    assert err.max() < 2e-5
    np.testing.assert_allclose(view.get_world_scales().numpy(), s, rtol=2e-6)


# ---------------------------------------------------------------- construction


def test_auto_chooses_usdrt_and_attaches_through_the_stage_cache(
    standin: StandinRuntime, device: str, caplog: pytest.LogCaptureFixture
) -> None:
    """With usdrt importable, "auto" picks usdrt for a pxr stage (and logs it); the stage is attached once, by its
    UsdUtils.StageCache id, and every view of one (stage, device) shares one provider and one lock."""
    stage = build_env_stage(4, seed=0)
    with caplog.at_level(logging.INFO, logger="frameview.fabric.providers"):
        cameras = fv.FabricFrameView(CAMERAS, stage=stage, device=device)
    assert "chose 'usdrt'" in caplog.text
    with cameras, fv.FabricFrameView(ROBOTS, stage=stage, device=device) as robots:
        assert cameras.backend == robots.backend == "fabric:usdrt"
        assert cameras.fabric_stage is robots.fabric_stage
        assert isinstance(cameras.fabric_stage, provider_module.UsdrtFabricStage)
        assert standin.calls["Stage.Attach"] == 1
        sid = UsdUtils.StageCache.Get().GetId(stage).ToLongInt()
        assert list(standin.stores) == [sid]
        assert provider_module.attach(stage, device) is cameras.fabric_stage


def test_reads_match_xform_cache(standin: StandinRuntime, device: str) -> None:
    """World and local poses and scales read through usdrt selections equal UsdGeom.XformCache."""
    stage = build_env_stage(6, seed=3)
    with fv.FabricFrameView(CAMERAS, stage=stage, device=device) as view:
        _assert_world_matches(view, stage)
        t, _, s = decompose_all(xform_cache_local(stage, view.prim_paths))
        np.testing.assert_allclose(view.get_local_poses()[0].numpy(), t, atol=2e-5)
        np.testing.assert_allclose(view.get_local_scales().numpy(), s, rtol=2e-6)
        full = view.get_world_poses()[0].numpy().copy()  # outputs are reused by the next read
        rows = [5, 0, 5]
        np.testing.assert_allclose(view.get_world_poses(rows)[0].numpy(), full[rows])


def test_tags_are_usdrt_attributes_and_close_removes_them(standin: StandinRuntime, device: str) -> None:
    """Construction authors one UInt attribute per prim (index) and per parent (parentIndex) through
    Prim.CreateAttribute; close() removes them with Prim.RemoveProperty and restores each prim's attributes."""
    stage = build_env_stage(3, seed=2)
    view = fv.FabricFrameView(CAMERAS, stage=stage, device=device)
    fabric = view.fabric_stage
    tag, parent_tag = view.tag_names
    robots = env_paths(3, "/Robot")
    for k, path in enumerate(view.prim_paths):
        prim = fabric.rt_stage.GetPrimAtPath(path)
        assert prim.GetAttribute(tag).Get() == k
        assert tag in fabric.attribute_names(path)
    assert [fabric.rt_stage.GetPrimAtPath(p).GetAttribute(parent_tag).Get() for p in robots] == [0, 1, 2]
    assert view.parent_paths == tuple(robots)
    assert standin.calls["Prim.CreateAttribute"] == 3 + 3
    view.close()
    for path in [*view.prim_paths, *robots]:
        assert fabric.attribute_names(path) == sorted([LOCAL_MATRIX, WORLD_MATRIX, "visibility", "_worldVisibility"])
    assert standin.calls["Prim.RemoveProperty"] == 3 + 3
    view.close()  # idempotent
    assert standin.calls["Prim.RemoveProperty"] == 3 + 3


def test_pattern_with_slash_class_on_a_usdrt_stage(standin: StandinRuntime, device: str) -> None:
    """A usdrt stage handed over directly resolves patterns through the provider's PrimTree (child_names,
    has_prim), "/World/Parent_[^/]*/Child" included, and reads Isaac Lab's fixture: world (0.1, 0, 1.05)."""
    stage = _parents_stage()
    sid = UsdUtils.StageCache.Get().Insert(stage).ToLongInt()
    import usdrt

    rt_stage = usdrt.Usd.Stage.Attach(sid)
    fabric = provider_module.attach(rt_stage, device)
    assert fabric.child_names("/") == ["World"]
    assert fabric.child_names("/World/Parent_0/Child") == ["Group", "Reset"]
    assert fabric.child_names("/World/Nowhere") == []
    assert fabric.has_prim("/World/Parent_2") and not fabric.has_prim("/World/Parent_3")
    with fv.FabricFrameView("/World/Parent_[^/]*/Child", stage=rt_stage, device=device) as view:
        assert view.backend == "fabric:usdrt"
        assert list(view.prim_paths) == [f"/World/Parent_{i}/Child" for i in range(3)]
        np.testing.assert_allclose(view.get_world_poses()[0].numpy(), np.tile([0.1, 0.0, 1.05], (3, 1)), atol=1e-6)


def test_parents_skip_prims_without_matrices_and_stop_at_a_reset_stack(standin: StandinRuntime, device: str) -> None:
    """A typeless prim (no Fabric matrices) is skipped when looking for the parent; a prim that resets the xform
    stack has none; both read their USD world poses."""
    stage = _parents_stage()
    leaves = [f"/World/Parent_{i}/Child/Group/Leaf" for i in range(3)]
    resets = [f"/World/Parent_{i}/Child/Reset" for i in range(3)]
    with fv.FabricFrameView(leaves + resets, stage=stage, device=device) as view:
        assert view.parent_paths == tuple(f"/World/Parent_{i}/Child" for i in range(3))
        fabric = view.fabric_stage
        assert fabric.xform_parents(resets) == [None, None, None]
        assert fabric.rt_stage.GetPrimAtPath(resets[0]).GetAttribute(RESET_XFORM_STACK).Get() is True
        _assert_world_matches(view, stage)
        np.testing.assert_allclose(view.get_world_poses()[0].numpy()[3:], np.tile([5.0, 0.0, 0.0], (3, 1)))
    with pytest.raises(KeyError, match="'/World/Nowhere' is not on the usdrt stage"):
        fabric.xform_parents(["/World/Nowhere"])


def test_provider_arguments_are_checked(standin: StandinRuntime, device: str) -> None:
    """Bad values, missing prims and foreign selections raise clear errors; removing absent tags is a no-op."""
    stage = _parents_stage()
    fabric = provider_module.attach(stage, device)
    paths = ["/World/Parent_0", "/World/Parent_1"]
    with pytest.raises(ValueError, match=r"values: expected shape \(2,\), got \(3,\)"):
        fabric.set_uint_attribute(paths, "test:tag", np.arange(3))
    with pytest.raises(KeyError, match=r"prims not on the usdrt stage: \['/World/Nowhere'\] \(1 of 3\)"):
        fabric.set_uint_attribute([*paths, "/World/Nowhere"], "test:tag", np.arange(3))
    with pytest.raises(KeyError, match="'/World/Nowhere' is not on the usdrt stage"):
        fabric.attribute_names("/World/Nowhere")
    fabric.remove_attribute([*paths, "/World/Nowhere"], "test:absent")  # skipped silently
    with pytest.raises(TypeError, match="selection: expected a UsdrtSelection, got object"):
        fabric.propagate_world(object(), wp.zeros(1, dtype=wp.int32, device=device))
    with pytest.raises(ValueError, match=r"world_update: expected one of \['descendants', 'hierarchy'\], got 'x'"):
        provider_module.attach(stage, device, world_update="x")
    assert fabric.missing_prims(["/World/Parent_0/Child/Group", "/World/Nowhere", *paths]) == [
        "/World/Parent_0/Child/Group",
        "/World/Nowhere",
    ]


# ---------------------------------------------------------------- writes and world propagation


@pytest.mark.parametrize("world_update", ["descendants", "hierarchy"])
def test_writes_move_children(
    standin: StandinRuntime, device: str, world_update: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """World and local writes on robots land in Fabric and their cameras follow, whether frameview recomputes the
    descendants itself (default) or calls IFabricHierarchy.update_world_xforms() (FRAMEVIEW_USDRT_WORLD_UPDATE)."""
    monkeypatch.setenv(provider_module.WORLD_UPDATE_ENV, world_update)
    stage = build_env_stage(4, seed=5)
    robots, cameras = env_paths(4, "/Robot"), env_paths(4, "/Robot/Camera")
    model = PoseModel(stage, robots + cameras)
    rng = np.random.default_rng(0)
    with (
        fv.FabricFrameView(ROBOTS, stage=stage, device=device) as robot_view,
        fv.FabricFrameView(CAMERAS, stage=stage, device=device) as camera_view,
    ):
        assert robot_view.fabric_stage.world_update == world_update
        positions = rng.uniform(-2, 2, size=(4, 3)).astype(np.float32)
        robot_view.set_world_poses(positions=positions)
        model.set_world(robots, p=positions.astype(np.float64))
        translations = rng.uniform(-1, 1, size=(2, 3)).astype(np.float32)
        robot_view.set_local_poses(translations=translations, indices=[3, 1])
        model.set_local([robots[3], robots[1]], t=translations.astype(np.float64))
        for view, paths in ((robot_view, robots), (camera_view, cameras)):
            t, _, _ = decompose_all(model.worlds(paths))
            np.testing.assert_allclose(view.get_world_poses()[0].numpy(), t, atol=2e-5)
            t, _, _ = decompose_all(model.locals(paths))
            np.testing.assert_allclose(view.get_local_poses()[0].numpy(), t, atol=2e-5)
    updates = standin.calls["FabricHierarchy.update_world_xforms"]
    assert updates == (2 if world_update == "hierarchy" else 0)
    _assert_world_matches_usd_unchanged(stage, cameras)


def _assert_world_matches_usd_unchanged(stage: Usd.Stage, cameras: list[str]) -> None:
    """Fabric writes never reach USD: the stage still has its initial camera poses."""
    fresh = build_env_stage(4, seed=5)
    np.testing.assert_allclose(xform_cache_world(stage, cameras), xform_cache_world(fresh, cameras))


def test_descendants_below_a_typeless_prim_follow(standin: StandinRuntime, device: str) -> None:
    """frameview's own propagation walks through a prim without matrices and leaves a reset-stack child in place."""
    stage = _parents_stage()
    with fv.FabricFrameView("/World/Parent_[^/]*/Child", stage=stage, device=device) as children:
        children.set_world_poses(positions=np.array([[1.0, 2.0, 3.0]] * 3, dtype=np.float32))
    leaves = [f"/World/Parent_{i}/Child/Group/Leaf" for i in range(3)]
    resets = [f"/World/Parent_{i}/Child/Reset" for i in range(3)]
    with fv.FabricFrameView(leaves + resets, stage=stage, device=device) as view:
        pos = view.get_world_poses()[0].numpy()
    np.testing.assert_allclose(pos[:3], np.tile([1.0, 3.0, 3.0], (3, 1)), atol=1e-6)
    np.testing.assert_allclose(pos[3:], np.tile([5.0, 0.0, 0.0], (3, 1)), atol=1e-6)


def test_an_empty_write_propagates_nothing(standin: StandinRuntime, device: str) -> None:
    """propagate_world with no written slot reads no matrix and asks for no paths."""
    stage = _parents_stage()
    with fv.FabricFrameView("/World/Parent_[^/]*", stage=stage, device=device) as view:
        fabric = view.fabric_stage
        selection = fabric.select([view.tag_names[0], WORLD_MATRIX, LOCAL_MATRIX], write=True)
        assert selection.prepare_for_reuse() is True  # the first call always reports a change
        assert selection.count == 3 and len(selection.paths()) == 3
        gets = standin.calls["Attribute.Get"]
        fabric.propagate_world(selection, wp.zeros(0, dtype=wp.int32, device=device))
        assert standin.calls["Attribute.Get"] == gets
        selection.release()


# ---------------------------------------------------------------- lifetime


def test_a_released_stage_makes_views_raise(standin: StandinRuntime, device: str) -> None:
    """When Kit releases the stage, the provider is no longer alive and the view says to recreate it."""
    stage = _parents_stage()
    view = fv.FabricFrameView("/World/Parent_[^/]*/Child", stage=stage, device=device)
    sid = UsdUtils.StageCache.Get().GetId(stage).ToLongInt()
    standin.release(sid)
    assert not view.fabric_stage.is_alive()
    with pytest.raises(RuntimeError, match="its stage was released; create the view again on a live stage"):
        view.get_world_poses()
    view.close()


def test_a_collected_pxr_stage_ends_the_provider(standin: StandinRuntime, device: str) -> None:
    """The provider of a pxr stage dies with the stage (it holds only a weak reference); attach makes a new one."""
    stage = _parents_stage()
    fabric = provider_module.attach(stage, device)
    assert fabric.is_alive()
    UsdUtils.StageCache.Get().Erase(stage)
    del stage
    gc.collect()
    assert not fabric.is_alive()


def test_a_dead_owner_ends_the_provider(standin: StandinRuntime, device: str) -> None:
    """A provider whose owner reference is gone is not alive, whatever its usdrt stage says."""

    class Owner:
        pass

    owner = Owner()
    live = provider_module.attach(_parents_stage(), device)
    fabric = provider_module.UsdrtFabricStage(live.rt_stage, device, live.lock, "descendants", weakref.ref(owner))
    assert fabric.is_alive()
    del owner
    assert not fabric.is_alive()


def test_world_update_mode_is_part_of_the_provider(standin: StandinRuntime, device: str) -> None:
    """attach() returns the cached provider for the same mode and a new one when the mode changes."""
    stage = _parents_stage()
    first = provider_module.attach(stage, device)
    assert provider_module.attach(stage, device) is first
    hierarchy = provider_module.attach(stage, device, world_update="hierarchy")
    assert hierarchy is not first and hierarchy.world_update == "hierarchy"
    assert hierarchy.lock is first.lock


# ---------------------------------------------------------------- prims without Fabric matrices


def test_prims_without_matrices_get_them_and_non_xformables_are_refused(
    standin_no_fsd: StandinRuntime, device: str
) -> None:
    """Without the Fabric Scene Delegate, an xformable prim gets its Fabric matrices through usdrt.Rt.Xformable on
    first use; a prim that is not xformable is refused by name."""
    stage = _parents_stage()
    fabric = provider_module.attach(stage, device)
    assert not fabric.rt_stage.GetPrimAtPath("/World/Parent_0").HasAttribute(WORLD_MATRIX)
    assert fabric.missing_prims(["/World/Parent_0", "/World/Parent_0/Child/Group"]) == ["/World/Parent_0/Child/Group"]
    # the Fabric Hierarchy matrices only (filled from pxr), not OmniHydra's _localMatrix/_world* attributes
    assert set(fabric.attribute_names("/World/Parent_0")) >= {LOCAL_MATRIX, WORLD_MATRIX}
    assert not {"_localMatrix", "_worldPosition"} & set(fabric.attribute_names("/World/Parent_0"))
    with pytest.raises(ValueError, match=re.escape("carry no Fabric world/local matrices")):
        fv.FabricFrameView("/World/Parent_0/Child/Group", stage=stage, device=device)


def test_failing_matrix_authoring_counts_as_missing(
    standin_no_fsd: StandinRuntime, device: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When usdrt refuses to author the matrices (RuntimeError), the prim is reported missing, not raised."""
    import usdrt

    def refuse(prim):
        raise RuntimeError("refused")

    monkeypatch.setattr(usdrt.Rt, "Xformable", refuse)
    fabric = provider_module.attach(_parents_stage(), device)
    assert fabric.missing_prims(["/World/Parent_0"]) == ["/World/Parent_0"]


def test_matrices_authored_on_first_use_hold_the_usd_transform(standin_no_fsd: StandinRuntime, device: str) -> None:
    """Matrices created on first use hold the prims' USD transforms, so the view reads the XformCache poses."""
    stage = _parents_stage()
    with fv.FabricFrameView("/World/Parent_[^/]*/Child", stage=stage, device=device) as view:
        _assert_world_matches(view, stage)

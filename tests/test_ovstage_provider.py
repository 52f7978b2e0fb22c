# SPDX-License-Identifier: Apache-2.0
"""The ovstage provider against real Fabric (ovstage 0.3), checked against pxr ``UsdGeom.XformCache`` and float64
NumPy composition of the same scene, authored in pxr and copied into ovstage through a USDA string."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import warp as wp
from helpers import (
    PoseModel,
    assert_quats_close,
    build_env_stage,
    compose,
    decompose_all,
    env_paths,
    random_quats,
    xform_cache_local,
    xform_cache_world,
)
from ovstage_helpers import (
    LOCAL_MATRIX,
    WORLD_MATRIX,
    child_paths,
    count_with,
    delete_prims,
    has_groups,
    ovstage_from_pxr,
    read_matrices,
    read_rows,
    requires_ovstage,
)
from pxr import Gf, Usd, UsdGeom, UsdShade

import frameview as fv

try:
    from frameview.fabric.providers.ovstage import attach
except ImportError:  # ovstage missing: every test is skipped by requires_ovstage
    attach = None

pytestmark = requires_ovstage

N = 6
ROBOTS = "/World/envs/env_.*/Robot"
CAMERAS = "/World/envs/env_.*/Robot/Camera"
ROBOT_PATHS = env_paths(N, "/Robot")
CAMERA_PATHS = env_paths(N, "/Robot/Camera")
POS_ATOL = 2e-5
QUAT_ATOL = 2e-5


@pytest.fixture
def scene() -> tuple[Usd.Stage, object]:
    """(pxr stage, its ovstage copy): 6 envs (rotated, scaled levels, non-uniform robot scale) and 1500 filler prims."""
    stage = build_env_stage(N, seed=3, filler=1500)
    ovs = ovstage_from_pxr(stage)
    yield stage, ovs
    ovs.destroy()


def f32(values: np.ndarray) -> np.ndarray:
    """What the view stores of a value: float32, back in float64."""
    return np.asarray(values, dtype=np.float32).astype(np.float64)


def assert_poses(view: fv.FabricFrameView, world: np.ndarray, local: np.ndarray | None = None) -> None:
    """The view's world (and local) poses equal the decomposition of the given float64 matrices."""
    pos, quat = view.get_world_poses()
    t, q, _ = decompose_all(world)
    np.testing.assert_allclose(pos.numpy(), t, atol=POS_ATOL, err_msg="world positions")
    assert_quats_close(quat.numpy(), q, atol=QUAT_ATOL)
    if local is not None:
        pos, quat = view.get_local_poses()
        t, q, _ = decompose_all(local)
        np.testing.assert_allclose(pos.numpy(), t, atol=POS_ATOL, err_msg="local positions")
        assert_quats_close(quat.numpy(), q, atol=QUAT_ATOL)


# ---------------------------------------------------------------- reads


def test_reads_match_xform_cache(scene, device: str) -> None:
    """World and local poses and scales of robots and cameras equal pxr XformCache's, through the ovstage provider."""
    stage, ovs = scene
    for pattern, paths in ((ROBOTS, ROBOT_PATHS), (CAMERAS, CAMERA_PATHS)):
        with fv.FabricFrameView(pattern, stage=ovs, device=device) as view:
            assert view.backend == "fabric:ovstage"
            assert list(view.prim_paths) == paths
            world, local = xform_cache_world(stage, paths), xform_cache_local(stage, paths)
            assert_poses(view, world, local)
            np.testing.assert_allclose(view.get_world_scales().numpy(), decompose_all(world)[2], rtol=2e-6)
            np.testing.assert_allclose(view.get_local_scales().numpy(), decompose_all(local)[2], rtol=2e-6)


def test_indexed_reads(scene, device: str) -> None:
    """Indexed reads return the rows asked for, in the order given."""
    stage, ovs = scene
    with fv.FabricFrameView(CAMERAS, stage=ovs, device=device) as view:
        order = np.array([4, 0, 5, 0, 2], dtype=np.int32)
        pos, quat = view.get_world_poses(indices=wp.array(order, device=device))
        t, q, _ = decompose_all(xform_cache_world(stage, [CAMERA_PATHS[i] for i in order]))
        np.testing.assert_allclose(pos.numpy(), t, atol=POS_ATOL)
        assert_quats_close(quat.numpy(), q, atol=QUAT_ATOL)


def test_selection_size_is_view_size_with_filler(scene, device: str) -> None:
    """The tag-scoped selection spans exactly the view's prims, though 1500 filler Xforms share their bucket type."""
    _, ovs = scene
    with fv.FabricFrameView(CAMERAS, stage=ovs, device=device) as view:
        tag = view.tag_names[0]
        sel = view.fabric_stage.select([tag, WORLD_MATRIX, LOCAL_MATRIX])
        try:
            assert sel.prepare_for_reuse() is True
            assert sel.count == view.count == N
        finally:
            sel.release()
        assert count_with(ovs, tag) == N
        assert count_with(ovs, WORLD_MATRIX) > 1500


def test_view_over_mixed_prim_types_spans_several_buckets(device: str) -> None:
    """A view over Xforms, Cameras and a Scope (several Fabric buckets) reads and writes every row correctly."""
    stage = build_env_stage(3, seed=5)
    for i in range(3):
        UsdGeom.Scope.Define(stage, f"/World/envs/env_{i}/Scope")
        UsdGeom.Xform.Define(stage, f"/World/envs/env_{i}/Scope/Leaf").AddTranslateOp().Set(Gf.Vec3d(0, 0, i + 1.0))
    paths = [
        "/World/envs/env_0/Robot/Camera",
        "/World/envs/env_1/Robot",
        "/World/envs/env_2/Scope",
        "/World/envs/env_0/Scope/Leaf",
        "/World/envs/env_2/Robot/Camera",
    ]
    ovs = ovstage_from_pxr(stage)
    try:
        with fv.FabricFrameView(paths, stage=ovs, device=device) as view:
            groups = has_groups(ovs, [view.tag_names[0], WORLD_MATRIX])
            assert len({a for a, _, _ in groups}) == 2 and len(groups) >= 4, "expected several buckets"
            assert_poses(view, xform_cache_world(stage, paths), xform_cache_local(stage, paths))
            targets = np.arange(15, dtype=np.float32).reshape(5, 3)
            view.set_world_poses(positions=targets, indices=None)
            np.testing.assert_allclose(view.get_world_poses()[0].numpy(), targets, atol=POS_ATOL)
            np.testing.assert_allclose(read_matrices(ovs, paths)[:, 3, :3], targets, atol=1e-5)
    finally:
        ovs.destroy()


def test_groups_are_row_aligned_across_attributes(scene) -> None:
    """One read of [tag, worldMatrix] gives, per bucket, groups whose rows are the same prims; tags name them."""
    _, ovs = scene
    with fv.FabricFrameView(CAMERA_PATHS + ROBOT_PATHS, stage=ovs) as view:
        tag = view.tag_names[0]
        groups = has_groups(ovs, [tag, WORLD_MATRIX, LOCAL_MATRIX])
        by_attr: dict[str, list[tuple[list[str], np.ndarray]]] = {}
        for attr, paths, values in groups:
            by_attr.setdefault(attr, []).append((paths, values))
        assert set(by_attr) == {tag, WORLD_MATRIX, LOCAL_MATRIX}
        tag_groups = by_attr[tag]
        for attr in (WORLD_MATRIX, LOCAL_MATRIX):
            assert [p for p, _ in by_attr[attr]] == [p for p, _ in tag_groups], f"{attr} rows differ from tag rows"
        for paths, values in tag_groups:
            assert [view.prim_paths[int(v)] for v in values] == paths


# ---------------------------------------------------------------- writes


@pytest.mark.parametrize("space", ["world", "local"])
def test_writes_move_children(scene, device: str, space: str) -> None:
    """Writes in either space set the robots and move their cameras; truth is float64 NumPy composition."""
    stage, ovs = scene
    model = PoseModel(stage, ROBOT_PATHS + CAMERA_PATHS)
    rng = np.random.default_rng(11)
    with (
        fv.FabricFrameView(ROBOTS, stage=ovs, device=device) as robots,
        fv.FabricFrameView(CAMERAS, stage=ovs, device=device) as cameras,
    ):
        p, q = f32(rng.uniform(-3, 3, size=(N, 3))), f32(random_quats(rng, N))
        if space == "world":
            robots.set_world_poses(positions=p, orientations=q)
            model.set_world(ROBOT_PATHS, p, q)
        else:
            robots.set_local_poses(translations=p, orientations=q)
            model.set_local(ROBOT_PATHS, p, q)
        assert_poses(robots, model.worlds(ROBOT_PATHS), model.locals(ROBOT_PATHS))
        assert_poses(cameras, model.worlds(CAMERA_PATHS), model.locals(CAMERA_PATHS))
        # Fabric itself holds the new matrices (not only the view): raw read of the cameras' world matrices
        np.testing.assert_allclose(read_matrices(ovs, CAMERA_PATHS), model.worlds(CAMERA_PATHS), atol=1e-5)


def test_indexed_write_touches_only_its_rows(scene, device: str) -> None:
    """An indexed world write changes the given robots (and their cameras) only."""
    stage, ovs = scene
    model = PoseModel(stage, ROBOT_PATHS + CAMERA_PATHS)
    with (
        fv.FabricFrameView(ROBOTS, stage=ovs, device=device) as robots,
        fv.FabricFrameView(CAMERAS, stage=ovs, device=device) as cameras,
    ):
        idx = np.array([4, 1], dtype=np.int32)
        p = f32([[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0]])
        robots.set_world_poses(positions=p, indices=idx)
        model.set_world([ROBOT_PATHS[i] for i in idx], p, None)
        assert_poses(robots, model.worlds(ROBOT_PATHS), model.locals(ROBOT_PATHS))
        assert_poses(cameras, model.worlds(CAMERA_PATHS))


def test_local_scale_write(scene, device: str) -> None:
    """set_local_scales changes the robots' scale and the cameras follow."""
    stage, ovs = scene
    model = PoseModel(stage, ROBOT_PATHS + CAMERA_PATHS)
    scales = f32(np.linspace(0.5, 2.0, 3 * N).reshape(N, 3))
    with (
        fv.FabricFrameView(ROBOTS, stage=ovs, device=device) as robots,
        fv.FabricFrameView(CAMERAS, stage=ovs, device=device) as cameras,
    ):
        robots.set_local_scales(scales)
        model.set_local_scales(ROBOT_PATHS, scales)
        np.testing.assert_allclose(robots.get_local_scales().numpy(), scales, rtol=2e-6)
        assert_poses(cameras, model.worlds(CAMERA_PATHS))


def test_two_views_on_one_stage(scene, device: str) -> None:
    """Two views share the provider (one lock) but not their tags; a write through one is read by the other."""
    _, ovs = scene
    with (
        fv.FabricFrameView(ROBOTS, stage=ovs, device=device) as first,
        fv.FabricFrameView([ROBOT_PATHS[2], ROBOT_PATHS[0]], stage=ovs, device=device) as second,
    ):
        assert first.fabric_stage is second.fabric_stage
        assert first.tag_names[0] != second.tag_names[0]
        first.set_world_poses(positions=np.full((N, 3), 7.0, np.float32))
        np.testing.assert_allclose(second.get_world_poses()[0].numpy(), np.full((2, 3), 7.0), atol=POS_ATOL)
        second.set_world_poses(positions=np.array([[1, 1, 1], [2, 2, 2]], np.float32))
        expected = np.full((N, 3), 7.0)
        expected[2], expected[0] = 1.0, 2.0
        np.testing.assert_allclose(first.get_world_poses()[0].numpy(), expected, atol=POS_ATOL)


# ---------------------------------------------------------------- lifecycle and errors


def test_close_removes_tags(scene) -> None:
    """close() deletes both tag attributes from every prim (HAS query counts drop to 0)."""
    _, ovs = scene
    view = fv.FabricFrameView(CAMERAS, stage=ovs)
    tag, parent_tag = view.tag_names
    assert count_with(ovs, tag) == N and count_with(ovs, parent_tag) == N
    assert tag in view.fabric_stage.attribute_names(CAMERA_PATHS[0])
    view.close()
    view.close()
    assert count_with(ovs, tag) == 0 and count_with(ovs, parent_tag) == 0
    assert tag not in view.fabric_stage.attribute_names(CAMERA_PATHS[0])


def test_removed_prim_raises(scene) -> None:
    """A viewed prim deleted from Fabric makes the next access raise RuntimeError (never a read of another prim)."""
    _, ovs = scene
    with fv.FabricFrameView(CAMERAS, stage=ovs) as view:
        ordinal = view.fabric_stage.ordinal + 10
        delete_prims(ovs, [CAMERA_PATHS[3]], ordinal)
        with pytest.raises(RuntimeError, match="recreate the view"):
            view.get_world_poses()
        with pytest.raises(RuntimeError, match="recreate the view"):
            view.set_world_poses(positions=np.zeros((N, 3), np.float32))


def test_destroyed_stage_raises(scene) -> None:
    """A view whose ovstage.Stage was destroyed raises RuntimeError; close() still works."""
    _, ovs = scene
    view = fv.FabricFrameView(ROBOTS, stage=ovs)
    ovs.destroy()
    with pytest.raises(RuntimeError, match="create the view again"):
        view.get_world_poses()
    view.close()


def test_unknown_paths_are_never_created(scene) -> None:
    """Tagging or untagging a path that is not on the stage writes nothing and creates no ghost prim."""
    _, ovs = scene
    provider = attach(ovs, "cpu")
    ghost = "/World/envs/ghost"
    with pytest.raises(KeyError, match="ghost"):
        provider.set_uint_attribute([ROBOT_PATHS[0], ghost], "test:tag", np.array([1, 2], np.uint32))
    provider.remove_attribute([ghost, ROBOT_PATHS[1]], "test:tag")
    assert not provider.has_prim(ghost)
    assert ghost not in child_paths(ovs, "/World/envs")
    assert count_with(ovs, "test:tag") == 0
    with pytest.raises(ValueError, match="ghost"):
        fv.FabricFrameView([ROBOT_PATHS[0], ghost], stage=ovs)
    assert not provider.has_prim(ghost)


def test_missing_prims_and_parents(device: str) -> None:
    """missing_prims flags absent prims; xform_parents skips to the nearest carrier and honours resetXformStack."""
    stage = Usd.Stage.CreateInMemory()
    UsdGeom.Xform.Define(stage, "/A")
    UsdGeom.Scope.Define(stage, "/A/S")
    UsdGeom.Xform.Define(stage, "/A/S/B")
    reset = UsdGeom.Xform.Define(stage, "/A/R")
    reset.SetResetXformStack(True)
    reset.AddTranslateOp().Set(Gf.Vec3d(0, 0, 4))
    UsdShade.Material.Define(stage, "/A/Looks")
    ovs = ovstage_from_pxr(stage)
    try:
        provider = attach(ovs, device)
        assert provider.missing_prims(["/A", "/A/nope", "/A/S/B", "/Z", "/A/Looks"]) == ["/A/nope", "/Z", "/A/Looks"]
        assert provider.xform_parents(["/A", "/A/S", "/A/S/B", "/A/R"]) == [None, "/A", "/A/S", None]
        assert provider.child_names("/") == ["A"]
        assert provider.child_names("/A") == ["S", "R", "Looks"]
        assert provider.child_names("/nope") == []
        with fv.FabricFrameView("/A/R", stage=ovs, device=device) as view:
            np.testing.assert_allclose(view.get_world_poses()[0].numpy(), [[0, 0, 4]], atol=POS_ATOL)
        with pytest.raises(ValueError, match="carry no Fabric"):
            fv.FabricFrameView(["/A", "/A/Looks"], stage=ovs, device=device)
    finally:
        ovs.destroy()


def test_pattern_resolution_matches_pxr(scene) -> None:
    """Patterns resolved level by level on ovstage give the same prims, in the same order, as on the pxr stage."""
    stage, ovs = scene
    from frameview.paths import resolve_prim_paths

    provider = attach(ovs, "cpu")
    for pattern in (CAMERAS, ROBOTS, "/World/envs/env_[13]/Robot", "/World/filler/group_1/x_1.*"):
        assert resolve_prim_paths(pattern, provider) == resolve_prim_paths(pattern, stage)


def test_attach_is_one_provider_per_stage_and_device(scene) -> None:
    """attach() returns the same provider for the same stage and device, and one lock for every device."""
    _, ovs = scene
    a, b = attach(ovs, "cpu"), attach(ovs, "cpu")
    assert a is b
    other = ovstage_from_pxr(build_env_stage(1, seed=0))
    try:
        assert attach(other, "cpu") is not a and attach(other, "cpu").lock is not a.lock
    finally:
        other.destroy()
    if wp.get_cuda_device_count():
        assert attach(ovs, "cuda:0").lock is a.lock


def test_zero_copy_reads_and_staged_writes(scene) -> None:
    """On the CPU a read selection points into Fabric storage (stable across accesses); writes need staging."""
    _, ovs = scene
    with fv.FabricFrameView(ROBOTS, stage=ovs) as view:
        provider = view.fabric_stage
        sel = provider.select([view.tag_names[0], WORLD_MATRIX, LOCAL_MATRIX], write=True)
        try:
            assert sel.prepare_for_reuse() is True and not sel.staged
            pointers = sel.__fabric_arrays_interface__["attribs"][WORLD_MATRIX]["pointers"]
            sel.release()
            assert sel.prepare_for_reuse() is False, "pointers moved without a layout change"
            assert sel.__fabric_arrays_interface__["attribs"][WORLD_MATRIX]["pointers"] == pointers
            with pytest.raises(RuntimeError, match="prepare_for_write"):
                provider.propagate_world(sel, wp.array([0], dtype=wp.int32))
            sel.release()
            assert sel.prepare_for_write() is True and sel.staged
            assert sel.__fabric_arrays_interface__["attribs"][WORLD_MATRIX]["pointers"] != pointers
        finally:
            sel.release()


def test_zero_copy_switch_gathers_reads(scene, device: str) -> None:
    """zero_copy=False makes CPU reads gather into staging columns (same poses); CUDA refuses zero_copy=True."""
    _, ovs = scene
    provider = attach(ovs, device)
    if device != "cpu":
        assert not provider.zero_copy
        with pytest.raises(ValueError, match="zero_copy"):
            provider.zero_copy = True
        return
    with fv.FabricFrameView(ROBOTS, stage=ovs) as view:
        expected = view.get_world_poses()[0].numpy().copy()
        sel = provider.select([view.tag_names[0], WORLD_MATRIX])
        try:
            assert provider.zero_copy
            provider.zero_copy = False
            sel.prepare_for_reuse()
            assert sel.staged
            with fv.FabricFrameView(ROBOTS, stage=ovs) as gathered:
                np.testing.assert_allclose(gathered.get_world_poses()[0].numpy(), expected, atol=POS_ATOL)
        finally:
            sel.release()
            provider.zero_copy = True


def test_foreign_writes_are_read(scene, device: str) -> None:
    """A local-matrix write made by someone else (a simulator's sync step) is what the view reads next."""
    stage, ovs = scene
    with fv.FabricFrameView(CAMERAS, stage=ovs, device=device) as cameras:
        cameras.get_world_poses()
        robot_local = compose((1.0, 2.0, 3.0), (0.0, 0.0, 0.0, 1.0), (1.0, 1.0, 1.0))
        provider = cameras.fabric_stage
        from ovstage import AttributeSemantic, PathDictionary, Scope

        pd = PathDictionary(ovs)
        ordinal = provider.ordinal + 1
        with pd.create_path_list_from_strings(ROBOT_PATHS) as plist, ovs.query_from_path_list(plist) as query:
            mats = np.repeat(robot_local[None], N, axis=0)
            ovs.write_attribute(
                query, LOCAL_MATRIX, ordinal, mats, is_array=False, semantic=AttributeSemantic.MATRIX
            ).wait()
        ovs.compute_hierarchy(ordinal, ordinal)
        tokens = [pd.intern_token(LOCAL_MATRIX), pd.intern_token(WORLD_MATRIX)]
        ovs.advance_write_floor(ordinal, Scope.INCLUDE, tokens).wait()
        env_world = xform_cache_world(stage, env_paths(N))
        cam_local = xform_cache_local(stage, CAMERA_PATHS)
        expected = np.einsum("nij,jk,nkl->nil", cam_local, robot_local, env_world)
        assert_poses(cameras, expected)
        # the provider's next write uses an ordinal above the foreign one
        cameras.set_local_poses(translations=np.zeros((N, 3), np.float32))
        assert provider.ordinal > ordinal


# ---------------------------------------------------------------- threads


def test_lock_serialises_threads(scene) -> None:
    """A writer and a reader thread on one view never crash and never see a half-applied write."""
    _, ovs = scene
    errors: list[BaseException] = []
    torn: list[np.ndarray] = []
    with fv.FabricFrameView(ROBOTS, stage=ovs) as view:
        view.set_world_poses(positions=np.zeros((N, 3), np.float32))

        def writer() -> None:
            try:
                for k in range(1, 41):
                    view.set_world_poses(positions=np.full((N, 3), float(k), np.float32))
            except BaseException as exc:
                errors.append(exc)

        def reader() -> None:
            try:
                for _ in range(60):
                    pos = view.get_world_poses()[0].numpy().copy()
                    if not np.allclose(pos, pos[0, 0], atol=1e-4) or abs(pos[0, 0] - round(pos[0, 0])) > 1e-4:
                        torn.append(pos)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=writer), threading.Thread(target=reader)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not any(t.is_alive() for t in threads), "a thread hung"
        assert not errors, errors[0]
        assert not torn, f"{len(torn)} torn reads, e.g. {torn[0]}"
        np.testing.assert_allclose(view.get_world_poses()[0].numpy(), np.full((N, 3), 40.0), atol=POS_ATOL)
        assert read_rows(ovs, ROBOT_PATHS, WORLD_MATRIX)[ROBOT_PATHS[0]][3, 0] == pytest.approx(40.0, abs=1e-5)


def test_world_update_without_and_with_compute_hierarchy(scene) -> None:
    """Local writes alone update descendants' world matrices (no stage-wide compute); forcing compute agrees."""
    stage, ovs = scene
    model = PoseModel(stage, ROBOT_PATHS + CAMERA_PATHS)
    with fv.FabricFrameView(ROBOTS, stage=ovs) as robots, fv.FabricFrameView(CAMERAS, stage=ovs) as cameras:
        core = robots.fabric_stage._core
        for explicit, offset in ((False, 1.0), (True, 2.0)):
            core.explicit_hierarchy = explicit
            t = f32(np.full((N, 3), offset))
            robots.set_local_poses(translations=t)
            model.set_local(ROBOT_PATHS, t)
            assert core.auto_update_checked and not (core.explicit_hierarchy and not explicit)
            np.testing.assert_allclose(read_matrices(ovs, CAMERA_PATHS), model.worlds(CAMERA_PATHS), atol=1e-5)
            assert_poses(cameras, model.worlds(CAMERA_PATHS))


def test_has_prim_batch_answers_once(scene) -> None:
    """After a listing, has_prim answers siblings from one batch, once each; asking again re-checks the stage."""
    _, ovs = scene
    provider = attach(ovs, "cpu")
    assert provider.child_names("/World/envs") == [f"env_{i}" for i in range(N)]
    assert provider.has_prim(ROBOT_PATHS[0]) and provider.has_prim("/World/envs/env_1/Robot")
    assert not provider.has_prim("/World/envs/env_2/Nope")
    delete_prims(ovs, [ROBOT_PATHS[0]], provider.ordinal + 5)
    assert not provider.has_prim(ROBOT_PATHS[0]), "a second ask must see the deletion"
    assert provider.has_prim(ROBOT_PATHS[1])

# SPDX-License-Identifier: Apache-2.0
"""FabricFrameView and the embedded Fabric model: what is specific to Fabric (the shared contract is in contract/)."""

from __future__ import annotations

import gc
import logging

import numpy as np
import pytest
import warp as wp
from helpers import build_env_stage, decompose_all, xform_cache_world
from pxr import Gf, Sdf, UsdGeom

import frameview as fv
from frameview.fabric.providers.memory import MemoryFabricStage, attach
from frameview.fabric.stage import LOCAL_MATRIX, WORLD_MATRIX

CAMERAS = "/World/envs/env_.*/Robot/Camera"
ROBOTS = "/World/envs/env_.*/Robot"


def _flat_model(envs: int, filler: int, device: str = "cpu") -> MemoryFabricStage:
    """A model built from arrays: env_i/Robot/Camera plus ``filler`` xformables spread over the envs."""
    paths = ["/World", "/World/envs"]
    parents = [-1, 0]
    per_env = filler // envs
    extra = filler - per_env * envs
    for i in range(envs):
        env = len(paths)
        paths += [f"/World/envs/env_{i}", f"/World/envs/env_{i}/Robot", f"/World/envs/env_{i}/Robot/Camera"]
        parents += [1, env, env + 1]
        for j in range(per_env + (1 if i < extra else 0)):
            paths.append(f"/World/envs/env_{i}/filler_{j}")
            parents.append(env)
    rng = np.random.default_rng(envs + filler)
    local = np.tile(np.eye(4), (len(paths), 1, 1))
    local[:, 3, :3] = rng.uniform(-1, 1, size=(len(paths), 3))
    return MemoryFabricStage.from_arrays(paths, np.asarray(parents), local, device=device)


def _world_truth_flat(model: MemoryFabricStage, paths: list[str]) -> np.ndarray:
    """World translations composed in float64 numpy from the model's own local matrices (pure translations)."""
    out = []
    for p in paths:
        total = np.zeros(3)
        pid = model._pid_of[p]
        while pid >= 0:
            total += model._read_matrices(np.array([pid]), LOCAL_MATRIX)[0][3, :3]
            pid = model._parent[pid]
        out.append(total)
    return np.array(out)


# ---------------------------------------------------------------- scoped selections


@pytest.mark.parametrize("filler", [0, 10_000, 100_000])
def test_selection_size_equals_view_size(filler: int) -> None:
    """The tag-scoped selections hold exactly the view's prims and parents, whatever the filler count."""
    model = _flat_model(64, filler)
    with fv.FabricFrameView(CAMERAS, stage=model) as view:
        view.get_world_poses()
        assert view.selection_size() == 64
        assert view.selection_size(parents=True) == 64
        untagged = model.select([WORLD_MATRIX, LOCAL_MATRIX])
        untagged.prepare_for_reuse()
        assert untagged.count == model.prim_count == 2 + 3 * 64 + filler


def test_reads_match_float64_truth_with_filler() -> None:
    """World poses through the tag-scoped selection equal float64 composition of the locals."""
    model = _flat_model(32, 5000)
    with fv.FabricFrameView(CAMERAS, stage=model) as view:
        pos, quat = view.get_world_poses()
        np.testing.assert_allclose(pos.numpy(), _world_truth_flat(model, list(view.prim_paths)), atol=1e-5)
        np.testing.assert_allclose(quat.numpy(), np.tile([0, 0, 0, 1.0], (32, 1)), atol=1e-6)


def test_reads_match_xform_cache(device: str) -> None:
    """World, local poses and scales on a pxr-populated model equal UsdGeom.XformCache."""
    stage = build_env_stage(6, seed=3)
    with fv.FabricFrameView(CAMERAS, stage=stage, device=device) as view:
        t, q, s = decompose_all(xform_cache_world(stage, view.prim_paths))
        pos, quat = view.get_world_poses()
        np.testing.assert_allclose(pos.numpy(), t, atol=1e-4)
        err = np.minimum(np.abs(quat.numpy() - q).max(1), np.abs(quat.numpy() + q).max(1))
        assert err.max() < 1e-4
        np.testing.assert_allclose(view.get_world_scales().numpy(), s, atol=1e-4)
        rows = [4, 0, 4]
        np.testing.assert_allclose(view.get_world_poses(rows)[0].numpy(), t[rows], atol=1e-4)


# ---------------------------------------------------------------- tags and lifecycle


def test_tags_are_unique_per_view_and_removed_on_close() -> None:
    """Each view authors its own uid-named tags; close() restores each prim's attributes; a second close is a no-op."""
    stage = build_env_stage(4, seed=0)
    model = attach(stage)
    cam = "/World/envs/env_0/Robot/Camera"
    before = model.attribute_names(cam)
    a = fv.FabricFrameView(CAMERAS, stage=stage)
    b = fv.FabricFrameView(CAMERAS, stage=stage)
    assert a.tag_names[0] != b.tag_names[0] and a.tag_names[1] != b.tag_names[1]
    assert a.tag_names[0].startswith("frameview:") and a.tag_names[0].endswith(":index")
    assert set(model.attribute_names(cam)) == {*before, a.tag_names[0], b.tag_names[0]}
    a.close()
    assert set(model.attribute_names(cam)) == {*before, b.tag_names[0]}
    a.close()
    b.close()
    assert model.attribute_names(cam) == before
    assert model.attribute_names("/World/envs/env_0/Robot") == before


def test_two_views_never_interfere() -> None:
    """A write through one view is seen by another view over the same prims, and each reads its own rows."""
    stage = build_env_stage(5, seed=1)
    with (
        fv.FabricFrameView(CAMERAS, stage=stage) as a,
        fv.FabricFrameView(["/World/envs/env_3/Robot/Camera", "/World/envs/env_1/Robot/Camera"], stage=stage) as b,
    ):
        a.set_world_poses(np.array([[1.0, 2.0, 3.0]] * 5) * np.arange(5)[:, None], None)
        np.testing.assert_allclose(b.get_world_poses()[0].numpy(), [[3, 6, 9], [1, 2, 3]], atol=1e-4)
        b.set_world_poses(np.array([[9.0, 9.0, 9.0]]), None, indices=[1])
        np.testing.assert_allclose(a.get_world_poses()[0].numpy()[1], [9, 9, 9], atol=1e-4)
        np.testing.assert_allclose(a.get_world_poses()[0].numpy()[3], [3, 6, 9], atol=1e-4)


def test_garbage_collected_view_removes_tags_and_warns(caplog: pytest.LogCaptureFixture) -> None:
    """A view dropped without close() removes its tags when collected and logs a warning naming it."""
    stage = build_env_stage(3, seed=2)
    model = attach(stage)
    cam = "/World/envs/env_1/Robot/Camera"
    before = model.attribute_names(cam)
    view = fv.FabricFrameView(CAMERAS, stage=stage)
    tag = view.tag_names[0]
    assert tag in model.attribute_names(cam)
    with caplog.at_level(logging.WARNING, logger="frameview.fabric.view"):
        del view
        gc.collect()
    assert model.attribute_names(cam) == before
    assert any("without close()" in r.getMessage() and CAMERAS in r.getMessage() for r in caplog.records)


def test_use_after_close_raises() -> None:
    """Every access after close() raises RuntimeError naming the view."""
    stage = build_env_stage(2, seed=0)
    view = fv.FabricFrameView(CAMERAS, stage=stage)
    view.close()
    for call in (view.get_world_poses, view.get_local_poses, view.get_world_scales, view.get_local_scales):
        with pytest.raises(RuntimeError, match="closed"):
            call()
    with pytest.raises(RuntimeError, match="closed"):
        view.set_world_poses(np.zeros((2, 3)), None)


def test_create_close_cycles_keep_one_tag_at_most() -> None:
    """200 create/read/close cycles over the same prims never leave more than one tag per prim behind."""
    model = _flat_model(16, 200)
    cam = "/World/envs/env_0/Robot/Camera"
    base = len(model.attribute_names(cam))
    buckets_after_first = None
    for i in range(200):
        view = fv.FabricFrameView(CAMERAS, stage=model)
        view.get_world_poses()
        assert len(model.attribute_names(cam)) == base + 1
        view.close()
        assert len(model.attribute_names(cam)) == base
        if i == 0:
            buckets_after_first = sum(1 for b in model.buckets if b.size)
    assert sum(1 for b in model.buckets if b.size) == buckets_after_first


# ---------------------------------------------------------------- stale views


def test_prim_removed_from_usd_raises() -> None:
    """A viewed prim removed on the USD stage makes the next access raise RuntimeError, never another prim's data."""
    stage = build_env_stage(4, seed=5)
    with fv.FabricFrameView(CAMERAS, stage=stage) as view:
        view.get_world_poses()
        stage.RemovePrim("/World/envs/env_2/Robot/Camera")
        with pytest.raises(RuntimeError, match="recreate the view"):
            view.get_world_poses()


def test_parent_removed_from_usd_raises_on_write() -> None:
    """Removing a viewed prim's parent subtree is detected (count mismatch), not silently mis-read."""
    stage = build_env_stage(3, seed=6)
    with fv.FabricFrameView(CAMERAS, stage=stage) as view:
        stage.RemovePrim("/World/envs/env_0/Robot")
        with pytest.raises(RuntimeError, match="recreate the view"):
            view.set_world_poses(np.zeros((3, 3)), None)


def test_usd_xform_edit_reaches_fabric() -> None:
    """An xformOp edit on the USD stage is picked up (change notices) by the next Fabric read, children included."""
    stage = build_env_stage(3, seed=7)
    with fv.FabricFrameView(CAMERAS, stage=stage) as view:
        view.get_world_poses()
        robot = UsdGeom.Xformable(stage.GetPrimAtPath("/World/envs/env_1/Robot"))
        robot.GetOrderedXformOps()[0].Set(Gf.Vec3d(5.0, -4.0, 3.0))
        t, _, _ = decompose_all(xform_cache_world(stage, view.prim_paths))
        np.testing.assert_allclose(view.get_world_poses()[0].numpy(), t, atol=1e-4)


def test_prims_added_on_usd_join_the_model() -> None:
    """Prims defined on the USD stage after attach appear in Fabric with correct world matrices."""
    stage = build_env_stage(2, seed=8)
    attach(stage)
    xf = UsdGeom.Xform.Define(stage, "/World/envs/env_1/Robot/Extra")
    xf.AddTranslateOp().Set(Gf.Vec3d(0.25, 0.5, 0.75))
    with fv.FabricFrameView("/World/envs/env_1/Robot/Extra", stage=stage) as view:
        t, _, _ = decompose_all(xform_cache_world(stage, view.prim_paths))
        np.testing.assert_allclose(view.get_world_poses()[0].numpy(), t, atol=1e-4)


# ---------------------------------------------------------------- bucket churn


def test_bucket_churn_never_yields_a_wrong_pose() -> None:
    """Other views tagging and untagging overlapping prims between reads (swap-removes) never stale the slot table
    (full, indexed and masked reads)."""
    stage = build_env_stage(12, seed=9)
    rng = np.random.default_rng(0)
    with fv.FabricFrameView(CAMERAS, stage=stage) as view:
        expected = rng.uniform(-5, 5, size=(12, 3))
        view.set_world_poses(expected, None)
        others: list[fv.FabricFrameView] = []
        for _ in range(40):
            if others and rng.random() < 0.5:
                others.pop(rng.integers(len(others))).close()
            else:
                pick = sorted(rng.choice(12, size=rng.integers(1, 12), replace=False).tolist())
                leaf = "/Robot/Camera" if rng.random() < 0.5 else "/Robot"
                others.append(fv.FabricFrameView([f"/World/envs/env_{i}{leaf}" for i in pick], stage=stage))
            rows = rng.choice(12, size=5, replace=False)
            mask = np.zeros(12, dtype=bool)
            mask[rows] = True
            np.testing.assert_allclose(view.get_world_poses()[0].numpy(), expected, atol=1e-4)
            np.testing.assert_allclose(view.get_world_poses(rows)[0].numpy(), expected[rows], atol=1e-4)
            masked = view.get_world_poses(mask=wp.array(mask, dtype=wp.bool))[0].numpy()
            np.testing.assert_allclose(masked[rows], expected[rows], atol=1e-4)
        for other in others:
            other.close()


# ---------------------------------------------------------------- the embedded model itself


def test_model_swap_remove_moves_other_prims() -> None:
    """Tagging a prim moves it to another bucket and moves the source bucket's last prim into its slot."""
    model = _flat_model(4, 0)
    sel = model.select([WORLD_MATRIX, LOCAL_MATRIX])
    sel.prepare_for_reuse()
    before = sel.pids().tolist()
    first = model._paths[before[0]]
    model.set_uint_attribute([first], "test:tag", np.array([7], dtype=np.uint32))
    assert sel.prepare_for_reuse() is True
    after = sel.pids().tolist()
    assert sorted(after) == sorted(before)
    assert after[0] == before[-1], "the last prim of the bucket fills the hole"
    assert sel.prepare_for_reuse() is False


def test_model_exposes_columns_to_warp_fabricarray() -> None:
    """wp.fabricarray reads the model's columns through __fabric_arrays_interface__, across buckets."""
    model = _flat_model(3, 0)
    model.set_uint_attribute(["/World/envs/env_1/Robot"], "test:tag", np.array([1], dtype=np.uint32))
    sel = model.select([WORLD_MATRIX])
    sel.prepare_for_reuse()
    fa = wp.fabricarray(sel, WORLD_MATRIX)
    assert fa.size == sel.count == model.prim_count
    assert len(sel.__fabric_arrays_interface__["attribs"][WORLD_MATRIX]["pointers"]) == 2
    truth = model._read_matrices(sel.pids(), WORLD_MATRIX)
    out = wp.empty(fa.size, dtype=wp.mat44d)

    np.testing.assert_allclose(_copy_fabric(fa, out), truth)


@wp.kernel
def _copy_fabric_kernel(src: wp.fabricarray(dtype=wp.mat44d), dst: wp.array(dtype=wp.mat44d)):
    i = wp.tid()
    dst[i] = src[i]


def _copy_fabric(fa: wp.fabricarray, out: wp.array) -> np.ndarray:
    wp.launch(_copy_fabric_kernel, dim=fa.size, inputs=[fa, out], device=out.device)
    return out.numpy()


def test_local_write_updates_descendants_in_warp(device: str) -> None:
    """Moving robots through a Fabric view moves their cameras (world recomputed level by level)."""
    stage = build_env_stage(4, seed=11)
    with (
        fv.FabricFrameView(ROBOTS, stage=stage, device=device) as robots,
        fv.FabricFrameView(CAMERAS, stage=stage, device=device) as cams,
    ):
        cam_local = np.array([np.array(UsdGeom.XformCache().GetLocalTransformation(stage.GetPrimAtPath(p))[0])
                              for p in cams.prim_paths])  # fmt: skip
        robots.set_local_poses(np.array([[1.0, 2.0, 3.0]] * 4), None)
        robot_world = np.zeros((4, 4, 4))
        pos, quat = robots.get_world_poses()
        scale = robots.get_world_scales().numpy()
        for i in range(4):
            x, y, z, w = (float(v) for v in quat.numpy()[i])
            robot_world[i] = np.array(
                Gf.Matrix4d().SetScale(Gf.Vec3d(*scale[i].tolist()))
                * Gf.Matrix4d().SetRotate(Gf.Quatd(w, x, y, z))
                * Gf.Matrix4d().SetTranslate(Gf.Vec3d(*pos.numpy()[i].tolist()))
            )
        expected = np.einsum("nij,njk->nik", cam_local, robot_world)[:, 3, :3]
        np.testing.assert_allclose(cams.get_world_poses()[0].numpy(), expected, atol=1e-4)


def test_models_are_per_stage_and_device() -> None:
    """attach() returns one model per (stage, device) and a new one for a new stage."""
    a, b = build_env_stage(1, seed=0), build_env_stage(1, seed=0)
    assert attach(a) is attach(a)
    assert attach(a) is not attach(b)


def test_inactive_prim_is_rejected_with_its_path() -> None:
    """A list entry naming a prim that carries no Fabric matrices is a ValueError naming it."""
    stage = build_env_stage(2, seed=0)
    UsdGeom.Scope.Define(stage, "/World/NotXformable")
    with pytest.raises(ValueError, match="NotXformable"):
        fv.FabricFrameView(["/World/NotXformable"], stage=stage)


def test_stage_released_raises() -> None:
    """A view whose pxr stage was dropped raises a clear RuntimeError on use."""
    stage = build_env_stage(2, seed=0)
    view = fv.FabricFrameView(CAMERAS, stage=stage)
    layer = stage.GetRootLayer()
    del stage
    gc.collect()
    assert isinstance(layer, Sdf.Layer)
    with pytest.raises(RuntimeError, match="stage was released"):
        view.get_world_poses()
    view.close()


def test_indexed_reads_of_varying_sizes_reuse_nothing_stale(device: str) -> None:
    """Consecutive indexed reads of different lengths and orders (recorded gather re-parameterised, cached buffer
    heads, staged indices) each return exactly their rows, for poses and scales, and a full read still matches."""
    model = _flat_model(40, 100, device=device)
    rng = np.random.default_rng(5)
    with fv.FabricFrameView(CAMERAS, stage=model, device=device) as view:
        full_pos = view.get_world_poses()[0].numpy().copy()
        full_scale = view.get_world_scales().numpy().copy()
        np.testing.assert_allclose(full_pos, _world_truth_flat(model, list(view.prim_paths)), atol=1e-5)
        for size in (1, 7, 40, 3, 80, 12, 1, 39):
            rows = rng.integers(0, 40, size=size) if size > 40 else rng.permutation(40)[:size]
            np.testing.assert_allclose(view.get_world_poses(rows)[0].numpy(), full_pos[rows], atol=1e-6)
            np.testing.assert_allclose(view.get_world_scales(rows.tolist()).numpy(), full_scale[rows], atol=1e-6)
        np.testing.assert_allclose(view.get_world_poses()[0].numpy(), full_pos, atol=1e-6)


@wp.kernel
def _gather_world(
    # inputs
    mats: wp.fabricarray(dtype=wp.mat44d),
    slots: wp.array(dtype=wp.int32),
    # outputs
    out: wp.array(dtype=wp.mat44d),
):
    i = wp.tid()
    out[i] = mats[slots[i]]


@pytest.mark.parametrize("parents", [False, True], ids=["prims", "parents"])
def test_rebuild_slot_table_seam_indexes_each_rows_world_matrix(device: str, parents: bool) -> None:
    """The benchmark seam: row i of the slot table is the Fabric slot of prim i (or parent i), checked by reading its
    world matrix through the returned column against pxr's XformCache; the selection size is the view's."""
    stage = build_env_stage(6, seed=17, filler=300)
    with fv.FabricFrameView("/World/envs/env_.*/Robot/Camera", stage=stage, device=device) as view:
        paths = view.parent_paths if parents else view.prim_paths
        slots, world = view.rebuild_slot_table(parents)
        out = wp.empty(len(paths), dtype=wp.mat44d, device=device)
        wp.launch(_gather_world, dim=len(paths), inputs=[world, slots], outputs=[out], device=device)
        np.testing.assert_allclose(out.numpy(), xform_cache_world(stage, paths), atol=1e-9)
        assert view.selection_size(parents) == len(paths)


def test_alternating_writes_replay_a_graph_each(device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two writes taking turns (two sets of env ids, each with its own buffers refilled in place) each land on
    their rows, cameras following, against float64 truth; on CUDA each is captured once, on its second call, and
    replayed from then on (a key kept per call, not only the last one)."""
    import frameview.fabric.launches as launches

    captures = []

    def counting(*args: object) -> object:
        captures.append(args)
        return real(*args)

    real = launches.captured
    model = _flat_model(16, 0, device=device)
    rng = np.random.default_rng(3)
    sets = [np.arange(0, 16, 2, dtype=np.int32), np.arange(1, 16, 2, dtype=np.int32)]
    written = np.zeros((16, 3))
    with fv.FabricFrameView(ROBOTS, stage=model, device=device) as robots:
        robot_paths = list(robots.prim_paths)
        cam_paths = [p + "/Camera" for p in robot_paths]
        arrays = [(wp.array(ids, device=device), wp.zeros(ids.size, dtype=wp.vec3f, device=device),
                   wp.array(np.tile([0.0, 0.0, 0.0, 1.0], (ids.size, 1)), dtype=wp.quatf, device=device))
                  for ids in sets]  # fmt: skip
        monkeypatch.setattr(launches, "captured", counting)
        for turn in range(8):
            ids, pos, quat = arrays[turn % 2]
            values = rng.uniform(-2, 2, (ids.shape[0], 3))
            pos.assign(values.astype(np.float32))
            written[sets[turn % 2]] = values
            robots.set_world_poses(pos, quat, ids)
        monkeypatch.setattr(launches, "captured", real)
        got = robots.get_world_poses()[0].numpy()
        np.testing.assert_allclose(got, written, atol=1e-5)
        np.testing.assert_allclose(got, _world_truth_flat(model, robot_paths), atol=1e-5)
        with fv.FabricFrameView(CAMERAS, stage=model, device=device) as cameras:
            np.testing.assert_allclose(cameras.get_world_poses()[0].numpy(), _world_truth_flat(model, cam_paths),
                                       atol=1e-5)  # fmt: skip
    assert len(captures) == (2 if wp.get_device(device).is_cuda else 0)

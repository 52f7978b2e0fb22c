# SPDX-License-Identifier: Apache-2.0
"""The FrameView contract, run against every backend and device.

Truth: the initial poses come from pxr ``UsdGeom.XformCache`` on the stage; after writes, from
:class:`helpers.PoseModel` (float64 NumPy composition of the initial local matrices and the values written). Backends
that write Fabric only never change USD, so nothing here reads the stage after a write; only views do.
"""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp
from helpers import (
    PoseModel,
    assert_quats_close,
    assert_w_nonnegative,
    build_env_stage,
    compose,
    decompose_all,
    env_paths,
    quat_to_rotation,
    random_quats,
    right_angle_quats,
    rotation_to_quat,
    xform_cache_local,
    xform_cache_world,
)
from pxr import Gf, Usd, UsdGeom

N = 8
ROBOTS = "/World/envs/env_.*/Robot"
CAMERAS = "/World/envs/env_.*/Robot/Camera"
ROBOT_PATHS = env_paths(N, "/Robot")
CAMERA_PATHS = env_paths(N, "/Robot/Camera")
POS_ATOL = 2e-5  # float32 outputs of values up to ~20 stage units
QUAT_ATOL = 2e-5
SCALE_RTOL = 2e-6


@pytest.fixture
def stage() -> Usd.Stage:
    """8 envs: rotated/uniformly scaled env levels, robots with random rotation and non-uniform scale, cameras."""
    return build_env_stage(N, seed=7)


@pytest.fixture
def model(stage: Usd.Stage) -> PoseModel:
    """The float64 truth over robots and cameras, from the stage's initial state."""
    return PoseModel(stage, ROBOT_PATHS + CAMERA_PATHS)


def f32(values: np.ndarray) -> np.ndarray:
    """Round to float32 (what the views store) and back, so that the model sees exactly what was written."""
    return np.asarray(values, dtype=np.float32).astype(np.float64)


def snapshot(view) -> dict[str, np.ndarray]:
    """Copies of everything a view reads (its output buffers are reused by the next call)."""
    wpos, wquat = view.get_world_poses()
    out = {"world_pos": wpos.numpy().copy(), "world_quat": wquat.numpy().copy()}
    lpos, lquat = view.get_local_poses()
    out |= {"local_pos": lpos.numpy().copy(), "local_quat": lquat.numpy().copy()}
    out["world_scale"] = view.get_world_scales().numpy().copy()
    out["local_scale"] = view.get_local_scales().numpy().copy()
    return out


def assert_matches(actual: dict[str, np.ndarray], world: np.ndarray, local: np.ndarray) -> None:
    """A :func:`snapshot` equals the decomposition of the expected world and local matrices."""
    for space, mats in (("world", world), ("local", local)):
        pos, quat, scale = decompose_all(mats)
        np.testing.assert_allclose(actual[f"{space}_pos"], pos, atol=POS_ATOL, err_msg=f"{space} positions")
        assert_quats_close(actual[f"{space}_quat"], quat, atol=QUAT_ATOL)
        assert_w_nonnegative(actual[f"{space}_quat"])
        np.testing.assert_allclose(actual[f"{space}_scale"], scale, rtol=SCALE_RTOL, err_msg=f"{space} scales")


def assert_view_matches_model(view, model: PoseModel, paths: list[str]) -> None:
    """Everything the view reads equals the model."""
    assert_matches(snapshot(view), model.worlds(paths), model.locals(paths))


# ---------------------------------------------------------------- reads


def test_view_metadata(make_view, stage: Usd.Stage, device: str) -> None:
    """count, prim_paths (depth-first order for a pattern, given order for a list), device and backend."""
    view = make_view(CAMERAS, stage, device)
    assert view.count == len(view) == N
    assert view.prim_paths == tuple(CAMERA_PATHS)
    assert view.device == str(wp.get_device(device))
    assert isinstance(view.backend, str) and view.backend
    listed = make_view([ROBOT_PATHS[3], ROBOT_PATHS[1]], stage, device)
    assert listed.prim_paths == (ROBOT_PATHS[3], ROBOT_PATHS[1])


def test_initial_poses_match_xform_cache(make_view, stage: Usd.Stage, device: str) -> None:
    """World and local poses and scales of robots and cameras equal pxr XformCache's on the untouched stage."""
    for pattern, paths in ((ROBOTS, ROBOT_PATHS), (CAMERAS, CAMERA_PATHS)):
        view = make_view(pattern, stage, device)
        got = snapshot(view)
        assert_matches(got, xform_cache_world(stage, paths), xform_cache_local(stage, paths))
        pos, quat = view.get_world_poses()
        assert pos.device == wp.get_device(device) and pos.dtype == wp.vec3f and quat.dtype == wp.quatf


def test_filler_prims_change_nothing(make_view, device: str) -> None:
    """Prims outside the view (filler) neither enter the view nor change its poses."""
    stage = build_env_stage(4, seed=3, filler=200)
    view = make_view(CAMERAS, stage, device)
    assert view.count == 4
    paths = env_paths(4, "/Robot/Camera")
    assert_matches(snapshot(view), xform_cache_world(stage, paths), xform_cache_local(stage, paths))


def test_world_is_local_composed_with_parent_world(make_view, stage: Usd.Stage, device: str) -> None:
    """Through views only: camera world == camera local @ robot world (float64 Gf composition of what they read)."""
    cameras, robots = make_view(CAMERAS, stage, device), make_view(ROBOTS, stage, device)
    cam, rob = snapshot(cameras), snapshot(robots)
    for k in range(N):
        local = compose(cam["local_pos"][k], cam["local_quat"][k], cam["local_scale"][k])
        parent = compose(rob["world_pos"][k], rob["world_quat"][k], rob["world_scale"][k])
        world = local @ parent
        np.testing.assert_allclose(cam["world_pos"][k], world[3, :3], atol=1e-4)
        assert_quats_close(cam["world_quat"][k], decompose_all(world[None])[1], atol=1e-4)
        np.testing.assert_allclose(cam["world_scale"][k], np.linalg.norm(world[:3, :3], axis=1), rtol=1e-5)


def test_indexed_reads_follow_the_given_order(make_view, stage: Usd.Stage, device: str) -> None:
    """Indexed reads return the requested rows in the requested order, repeated indices included."""
    view = make_view(CAMERAS, stage, device)
    full = snapshot(view)
    order = [7, 2, 5, 0, 2]
    pos, quat = view.get_world_poses(order)
    np.testing.assert_array_equal(pos.numpy(), full["world_pos"][order])
    np.testing.assert_array_equal(quat.numpy(), full["world_quat"][order])
    np.testing.assert_array_equal(view.get_local_poses(order)[0].numpy(), full["local_pos"][order])
    np.testing.assert_array_equal(view.get_world_scales(order).numpy(), full["world_scale"][order])
    np.testing.assert_array_equal(view.get_local_scales(order).numpy(), full["local_scale"][order])


# ---------------------------------------------------------------- writes


def test_set_local_poses(make_view, stage: Usd.Stage, model: PoseModel, device: str) -> None:
    """Local writes land in local space, world follows (local @ parent world), the local scale is kept."""
    robots, cameras = make_view(ROBOTS, stage, device), make_view(CAMERAS, stage, device)
    rng = np.random.default_rng(1)
    t, q = f32(rng.uniform(-2, 2, (N, 3))), f32(random_quats(rng, N))
    robots.set_local_poses(t, q)
    model.set_local(ROBOT_PATHS, t, q)
    assert_view_matches_model(robots, model, ROBOT_PATHS)
    assert_view_matches_model(cameras, model, CAMERA_PATHS)


def test_set_world_poses(make_view, stage: Usd.Stage, model: PoseModel, device: str) -> None:
    """World writes read back exactly, local = world @ inverse(parent world), the local scale is kept."""
    robots = make_view(ROBOTS, stage, device)
    rng = np.random.default_rng(2)
    p, q = f32(rng.uniform(-5, 5, (N, 3))), f32(random_quats(rng, N))
    robots.set_world_poses(p, q)
    model.set_world(ROBOT_PATHS, p, q)
    pos, quat = robots.get_world_poses()
    np.testing.assert_allclose(pos.numpy(), p, atol=POS_ATOL)
    assert_quats_close(quat.numpy(), q, atol=QUAT_ATOL)
    assert_view_matches_model(robots, model, ROBOT_PATHS)


@pytest.mark.parametrize("space", ["world", "local"])
@pytest.mark.parametrize("component", ["position", "orientation"])
def test_partial_write_keeps_the_other_component(
    make_view, stage: Usd.Stage, model: PoseModel, device: str, space: str, component: str
) -> None:
    """Writing only positions (or only orientations) keeps the other component, in that space, and the scales."""
    robots = make_view(ROBOTS, stage, device)
    before = snapshot(robots)
    rng = np.random.default_rng(3)
    values = f32(rng.uniform(-3, 3, (N, 3))) if component == "position" else f32(random_quats(rng, N))
    args = (values, None) if component == "position" else (None, values)
    if space == "world":
        robots.set_world_poses(*args)
        model.set_world(ROBOT_PATHS, *args)
    else:
        robots.set_local_poses(*args)
        model.set_local(ROBOT_PATHS, *args)
    after = snapshot(robots)
    if component == "position":
        assert_quats_close(after[f"{space}_quat"], before[f"{space}_quat"], atol=QUAT_ATOL)
    else:
        np.testing.assert_allclose(after[f"{space}_pos"], before[f"{space}_pos"], atol=POS_ATOL)
    np.testing.assert_allclose(after["local_scale"], before["local_scale"], rtol=SCALE_RTOL)
    assert_view_matches_model(robots, model, ROBOT_PATHS)


@pytest.mark.parametrize("space", ["world", "local", "scale"])
def test_indexed_write_touches_only_its_rows(
    make_view, stage: Usd.Stage, model: PoseModel, device: str, space: str
) -> None:
    """An indexed write changes only the named prims (and their children); row k of the input goes to indices[k]."""
    robots, cameras = make_view(ROBOTS, stage, device), make_view(CAMERAS, stage, device)
    before_robots, before_cameras = snapshot(robots), snapshot(cameras)
    indices = [6, 1, 4]
    paths = [ROBOT_PATHS[i] for i in indices]
    rng = np.random.default_rng(4)
    p, q, s = f32(rng.uniform(-3, 3, (3, 3))), f32(random_quats(rng, 3)), f32(rng.uniform(0.5, 2, (3, 3)))
    if space == "world":
        robots.set_world_poses(p, q, indices=np.array(indices, dtype=np.int64))
        model.set_world(paths, p, q)
    elif space == "local":
        robots.set_local_poses(p, q, indices=wp.array(indices, dtype=wp.int32, device=device))
        model.set_local(paths, p, q)
    else:
        robots.set_local_scales(s, indices=indices)
        model.set_local_scales(paths, s)
    after_robots, after_cameras = snapshot(robots), snapshot(cameras)
    untouched = [i for i in range(N) if i not in indices]
    for key in before_robots:
        np.testing.assert_array_equal(after_robots[key][untouched], before_robots[key][untouched], err_msg=key)
        np.testing.assert_array_equal(after_cameras[key][untouched], before_cameras[key][untouched], err_msg=key)
    assert_view_matches_model(robots, model, ROBOT_PATHS)
    assert_view_matches_model(cameras, model, CAMERA_PATHS)


def test_children_follow_a_moved_parent(make_view, stage: Usd.Stage, model: PoseModel, device: str) -> None:
    """Moving robots (world, then local) moves their cameras; the cameras' local poses do not change."""
    robots, cameras = make_view(ROBOTS, stage, device), make_view(CAMERAS, stage, device)
    camera_local = snapshot(cameras)
    rng = np.random.default_rng(5)
    p, q = f32(rng.uniform(-3, 3, (N, 3))), f32(random_quats(rng, N))
    robots.set_world_poses(p, q)
    model.set_world(ROBOT_PATHS, p, q)
    assert_view_matches_model(cameras, model, CAMERA_PATHS)
    t = f32(rng.uniform(-3, 3, (N, 3)))
    robots.set_local_poses(translations=t)
    model.set_local(ROBOT_PATHS, t)
    after = snapshot(cameras)
    assert_view_matches_model(cameras, model, CAMERA_PATHS)
    np.testing.assert_allclose(after["local_pos"], camera_local["local_pos"], atol=POS_ATOL)
    assert_quats_close(after["local_quat"], camera_local["local_quat"], atol=QUAT_ATOL)


def test_local_and_world_stay_consistent_over_mixed_writes(
    make_view, stage: Usd.Stage, model: PoseModel, device: str
) -> None:
    """World, local, scale and world writes in turn, on parents and children, keep both spaces consistent."""
    robots, cameras = make_view(ROBOTS, stage, device), make_view(CAMERAS, stage, device)
    rng = np.random.default_rng(6)
    right = right_angle_quats()
    p, q = f32(rng.uniform(-3, 3, (N, 3))), f32(random_quats(rng, N))
    robots.set_world_poses(p, q)
    model.set_world(ROBOT_PATHS, p, q)
    # cameras keep a right-angle rotation relative to their non-uniformly scaled robot: no shear
    t, cq = f32(rng.uniform(-1, 1, (N, 3))), f32(right[rng.integers(len(right), size=N)])
    cameras.set_local_poses(t, cq)
    model.set_local(CAMERA_PATHS, t, cq)
    s = f32(rng.uniform(0.5, 2.0, (N, 3)))
    robots.set_local_scales(s)
    model.set_local_scales(ROBOT_PATHS, s)
    p = f32(rng.uniform(-3, 3, (N, 3)))
    cameras.set_world_poses(positions=p)
    model.set_world(CAMERA_PATHS, p)
    assert_view_matches_model(robots, model, ROBOT_PATHS)
    assert_view_matches_model(cameras, model, CAMERA_PATHS)


def test_set_local_scales(make_view, stage: Usd.Stage, model: PoseModel, device: str) -> None:
    """Local scales read back; local translation and rotation are kept; world scales of prims and children follow."""
    robots, cameras = make_view(ROBOTS, stage, device), make_view(CAMERAS, stage, device)
    before = snapshot(robots)
    s = f32(np.random.default_rng(7).uniform(0.25, 3.0, (N, 3)))
    robots.set_local_scales(s)
    model.set_local_scales(ROBOT_PATHS, s)
    after = snapshot(robots)
    np.testing.assert_allclose(after["local_scale"], s, rtol=SCALE_RTOL)
    np.testing.assert_allclose(after["local_pos"], before["local_pos"], atol=POS_ATOL)
    assert_quats_close(after["local_quat"], before["local_quat"], atol=QUAT_ATOL)
    np.testing.assert_allclose(after["world_pos"], before["world_pos"], atol=POS_ATOL)
    assert_view_matches_model(robots, model, ROBOT_PATHS)
    assert_view_matches_model(cameras, model, CAMERA_PATHS)


def test_world_writes_under_nonuniform_parent_scale_keep_local_scale(
    make_view, stage: Usd.Stage, model: PoseModel, device: str
) -> None:
    """Under non-uniformly scaled, rotated robots, a camera world write reads back exactly and keeps its local scale.

    Target rotations are right-angle rotations relative to the robot, the case a translate/orient/scale local can
    reach exactly; the world scale then becomes the local scale carried through the robot's scale axes.
    """
    cameras = make_view(CAMERAS, stage, device)
    before = snapshot(cameras)
    rng = np.random.default_rng(8)
    right = right_angle_quats()
    parent_q = decompose_all(model.worlds(ROBOT_PATHS))[1]
    rel = right[rng.integers(len(right), size=N)]
    q = f32([rotation_to_quat(quat_to_rotation(a) @ quat_to_rotation(b)) for a, b in zip(rel, parent_q, strict=True)])
    p = f32(rng.uniform(-3, 3, (N, 3)))
    cameras.set_world_poses(p, q)
    model.set_world(CAMERA_PATHS, p, q)
    after = snapshot(cameras)
    np.testing.assert_allclose(after["world_pos"], p, atol=POS_ATOL)
    assert_quats_close(after["world_quat"], q, atol=1e-4)
    np.testing.assert_allclose(after["local_scale"], before["local_scale"], rtol=SCALE_RTOL)
    assert_view_matches_model(cameras, model, CAMERA_PATHS)


def test_random_world_rotation_under_uniformly_scaled_parent(make_view, device: str) -> None:
    """Under uniformly scaled parents any world rotation is reachable: it reads back and the local scale is kept."""
    stage = build_env_stage(N, seed=9, robot_scale="uniform", camera_rotation="random")
    model = PoseModel(stage, ROBOT_PATHS + CAMERA_PATHS)
    cameras = make_view(CAMERAS, stage, device)
    before = snapshot(cameras)
    rng = np.random.default_rng(9)
    p, q = f32(rng.uniform(-3, 3, (N, 3))), f32(random_quats(rng, N))
    cameras.set_world_poses(p, q)
    model.set_world(CAMERA_PATHS, p, q)
    after = snapshot(cameras)
    np.testing.assert_allclose(after["world_pos"], p, atol=POS_ATOL)
    assert_quats_close(after["world_quat"], q, atol=1e-4)
    np.testing.assert_allclose(after["local_scale"], before["local_scale"], rtol=SCALE_RTOL)
    assert_view_matches_model(cameras, model, CAMERA_PATHS)


def test_right_angle_parent_with_nonuniform_scale_by_hand(make_view, device: str) -> None:
    """Hand-computed numbers: parent at (10, 0, 0), yaw +90 degrees, scale (1, 2, 3); child at local (0, 1, 0).

    Local +y is scaled to 2 then yawed onto -x: world (8, 0, 0). Writing world (10, 4, 0) gives local (4, 0, 0):
    undo the translation (0, 4, 0), the yaw (4, 0, 0) and the scale (4, 0, 0).
    """
    stage = Usd.Stage.CreateInMemory()
    parent = UsdGeom.Xform.Define(stage, "/Parent")
    parent.AddTranslateOp().Set(Gf.Vec3d(10.0, 0.0, 0.0))
    parent.AddOrientOp().Set(Gf.Quatf(float(np.sqrt(0.5)), 0.0, 0.0, float(np.sqrt(0.5))))
    parent.AddScaleOp().Set(Gf.Vec3f(1.0, 2.0, 3.0))
    child = UsdGeom.Xform.Define(stage, "/Parent/Child")
    child.AddTranslateOp().Set(Gf.Vec3d(0.0, 1.0, 0.0))
    view = make_view("/Parent/Child", stage, device)
    pos, quat = view.get_world_poses()
    np.testing.assert_allclose(pos.numpy(), [[8.0, 0.0, 0.0]], atol=1e-5)
    h = np.sqrt(0.5)
    assert_quats_close(quat.numpy(), [[0.0, 0.0, h, h]], atol=1e-6)
    np.testing.assert_allclose(view.get_world_scales().numpy(), [[1.0, 2.0, 3.0]], rtol=1e-6)
    view.set_world_poses(positions=np.array([[10.0, 4.0, 0.0]]))
    np.testing.assert_allclose(view.get_local_poses()[0].numpy(), [[4.0, 0.0, 0.0]], atol=1e-5)
    np.testing.assert_allclose(view.get_world_poses()[0].numpy(), [[10.0, 4.0, 0.0]], atol=1e-5)
    # a world yaw of 180 degrees is a local yaw of +90 degrees under the parent
    view.set_world_poses(orientations=np.array([[0.0, 0.0, 1.0, 0.0]]))
    assert_quats_close(view.get_local_poses()[1].numpy(), [[0.0, 0.0, h, h]], atol=1e-6)
    np.testing.assert_allclose(view.get_local_scales().numpy(), [[1.0, 1.0, 1.0]], rtol=1e-6)
    np.testing.assert_allclose(view.get_world_scales().numpy(), [[2.0, 1.0, 3.0]], rtol=1e-6)


def test_two_views_on_one_stage(make_view, stage: Usd.Stage, model: PoseModel, device: str) -> None:
    """Two views over the same prims (one a reordered subset) see each other's writes."""
    first = make_view(ROBOTS, stage, device)
    subset_paths = [ROBOT_PATHS[5], ROBOT_PATHS[2]]
    second = make_view(subset_paths, stage, device)
    rng = np.random.default_rng(10)
    p, q = f32(rng.uniform(-3, 3, (N, 3))), f32(random_quats(rng, N))
    first.set_world_poses(p, q)
    model.set_world(ROBOT_PATHS, p, q)
    assert_view_matches_model(second, model, subset_paths)
    t = f32(rng.uniform(-3, 3, (2, 3)))
    second.set_local_poses(translations=t)
    model.set_local(subset_paths, t)
    assert_view_matches_model(first, model, ROBOT_PATHS)
    third = make_view(ROBOTS, stage, device)  # created after the writes: sees them too
    assert_view_matches_model(third, model, ROBOT_PATHS)


# ---------------------------------------------------------------- bad inputs


def test_bad_inputs_raise_and_write_nothing(make_view, stage: Usd.Stage, device: str) -> None:
    """Wrong shapes, NaN, out-of-range indices and zero quaternions raise before anything is written."""
    robots = make_view(ROBOTS, stage, device)
    before = snapshot(robots)
    with pytest.raises(ValueError, match=r"positions: expected shape"):
        robots.set_world_poses(positions=np.zeros((N, 4)))
    nan = np.zeros((N, 3))
    nan[5, 2] = np.nan
    with pytest.raises(ValueError, match="translations: row 5"):
        robots.set_local_poses(translations=nan)
    with pytest.raises(IndexError, match=f"index {N}"):
        robots.set_local_scales(np.ones((1, 3)), indices=[N])
    with pytest.raises(ValueError, match="orientations: row 0 holds a zero-norm quaternion"):
        robots.set_world_poses(np.zeros((N, 3)), np.zeros((N, 4)))
    with pytest.raises(TypeError, match="indices"):
        robots.get_world_poses([0.5])
    robots.set_world_poses(np.zeros((0, 3)), np.zeros((0, 4)), indices=[])
    after = snapshot(robots)
    for key, value in before.items():
        np.testing.assert_array_equal(after[key], value, err_msg=key)


def test_closed_view_raises(make_view, stage: Usd.Stage, device: str) -> None:
    """A closed view raises RuntimeError on use; close() twice is fine; other views keep working."""
    closed, other = make_view(ROBOTS, stage, device), make_view(ROBOTS, stage, device)
    closed.close()
    closed.close()
    with pytest.raises(RuntimeError, match="closed"):
        closed.get_world_poses()
    with pytest.raises(RuntimeError, match="closed"):
        closed.set_local_scales(np.ones((N, 3)))
    assert other.get_world_poses()[0].shape == (N,)

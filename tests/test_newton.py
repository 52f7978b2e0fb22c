# SPDX-License-Identifier: Apache-2.0
"""The Newton backend beyond the contract suite: frames riding on simulated bodies, checked against independent truth.

Truth: the analytic semi-implicit Euler fall of a free body under gravity, the frame's fixed offset on its body
computed in float64 NumPy from pxr ``UsdGeom.XformCache``, and the ``body_q`` values the tests write themselves.
The contract suite (tests/contract) runs the same backend through the shared FrameView contract.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import warp as wp
from helpers import (
    assert_quats_close,
    decompose_all,
    has_shear,
    quat_to_rotation,
    random_quats,
    rotation_to_quat,
    xform_cache_local,
)
from newton_helpers import falling_model, falling_stage, newton_module, rigid_pose
from pxr import Gf, Usd, UsdGeom, UsdPhysics

import frameview as fv
from frameview.kernels.transforms import decompose_matrices

HAS_CUDA = wp.get_cuda_device_count() > 0
N = 4
CAMERAS = "/World/envs/env_.*/Body/Mount/Camera"
MOUNTS = "/World/envs/env_.*/Body/Mount"
GRAVITY = -9.81
POS_ATOL = 1e-5
QUAT_ATOL = 1e-5


@pytest.fixture(scope="module")
def newton():
    """The newton package (the module is skipped without it)."""
    return newton_module()


@pytest.fixture
def scene(newton, device: str) -> dict:
    """A stage of N falling bodies with a mounted camera each, its model and a state holder (``sim["state"]``)."""
    stage = falling_stage(N)
    model = falling_model(stage, device)
    return {"stage": stage, "model": model, "sim": {"state": model.state()}}


def view_of(scene: dict, pattern: str = CAMERAS) -> fv.NewtonFrameView:
    sim = scene["sim"]
    return fv.NewtonFrameView(pattern, stage=scene["stage"], model=scene["model"], state=lambda: sim["state"])


def usd_world(stage: Usd.Stage, paths) -> np.ndarray:
    cache = UsdGeom.XformCache(Usd.TimeCode.Default())
    return np.array([np.array(cache.GetLocalToWorldTransform(stage.GetPrimAtPath(p))) for p in paths])


def pose_matrix(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Row-vector rigid matrix of a position and xyzw quaternion (float64)."""
    m = np.eye(4)
    m[:3, :3] = quat_to_rotation(q)
    m[3, :3] = p
    return m


def body_matrices(body_q: np.ndarray) -> np.ndarray:
    return np.array([pose_matrix(x[:3].astype(np.float64), x[3:].astype(np.float64)) for x in body_q])


def offsets(stage: Usd.Stage, view: fv.NewtonFrameView) -> np.ndarray:
    """Each frame's world matrix relative to its body's rigid USD pose: ``W_usd @ inv(rigid(body_usd))``."""
    bodies = [str(stage.GetPrimAtPath(p).GetParent().GetParent().GetPath()) for p in view.prim_paths]
    frames, body_world = usd_world(stage, view.prim_paths), usd_world(stage, bodies)
    return np.array([f @ np.linalg.inv(pose_matrix(*rigid_pose(b))) for f, b in zip(frames, body_world, strict=True)])


def assert_view_at(view: fv.NewtonFrameView, worlds: np.ndarray, atol: float = POS_ATOL) -> None:
    pos, quat = view.get_world_poses()
    p, q, _s = decompose_all(worlds)
    np.testing.assert_allclose(pos.numpy(), p, atol=atol)
    assert_quats_close(quat.numpy(), q, atol=QUAT_ATOL)


# ---------------------------------------------------------------- physics


@pytest.mark.slow
def test_camera_follows_the_analytic_fall(newton, device: str) -> None:
    """After every XPBD step, each camera is at the analytic semi-implicit Euler fall of its body times its fixed
    offset from USD (position, and xyzw orientation unchanged by the fall)."""
    stage = falling_stage(N)
    model = falling_model(stage, device)
    assert model.body_count == N
    np.testing.assert_allclose(model.gravity.numpy()[0], [0.0, 0.0, GRAVITY], rtol=1e-6)
    solver = newton.solvers.SolverXPBD(model)
    sim = {"state": model.state(), "next": model.state()}
    control = model.control()
    view = fv.NewtonFrameView(CAMERAS, stage=stage, model=model, state=lambda: sim["state"])
    offset = offsets(stage, view)
    start = body_matrices(model.body_q.numpy())
    dt, z, v = 1.0 / 60.0, 0.0, 0.0
    for _step in range(30):
        solver.step(sim["state"], sim["next"], control, None, dt)
        sim["state"], sim["next"] = sim["next"], sim["state"]
        v += GRAVITY * dt  # semi-implicit Euler: velocity first, then position with the new velocity
        z += v * dt
        bodies = start.copy()
        bodies[:, 3, 2] += z
        assert_view_at(view, offset @ bodies, atol=1e-4)  # float32 integration over ~1.3 m
    assert z < -1.0


def test_reads_follow_body_q(scene: dict, device: str) -> None:
    """World poses are body_q * offset for arbitrary body poses written into the state; local poses never change."""
    view = view_of(scene)
    offset = offsets(scene["stage"], view)
    local_before = [a.numpy().copy() for a in view.get_local_poses()]
    rng = np.random.default_rng(0)
    body_q = np.concatenate([rng.uniform(-3, 3, (N, 3)), random_quats(rng, N)], axis=1).astype(np.float32)
    scene["sim"]["state"].body_q.assign(body_q)
    assert_view_at(view, offset @ body_matrices(body_q))
    for before, after in zip(local_before, view.get_local_poses(), strict=True):
        np.testing.assert_allclose(after.numpy(), before, atol=1e-6)


def test_construction_defers_the_offsets_to_the_first_call(scene: dict, device: str) -> None:
    """Building a view reads the stage and launches nothing: the cached offsets are computed by the first read or
    write of any view of the model, a write first included, and a later view's frames never disturb an earlier
    view's reads (float64 truth from USD and body_q)."""
    stage = scene["stage"]
    rng = np.random.default_rng(5)
    body_q = np.concatenate([rng.uniform(-3, 3, (N, 3)), random_quats(rng, N)], axis=1).astype(np.float32)
    scene["sim"]["state"].body_q.assign(body_q)
    mounts = view_of(scene, MOUNTS)
    store = mounts._store
    assert store.offsets_stale, "construction computed the offsets (a launch)"
    # the first call is a write of one mount: the other rows must read their stage offsets afterwards
    target = pose_matrix(np.array([0.5, -1.0, 2.0]), np.array([0.0, 0.0, np.sin(0.4), np.cos(0.4)]))
    mounts.set_world_poses(np.array([target[3, :3]], dtype=np.float32),
                           np.array([[0.0, 0.0, np.sin(0.4), np.cos(0.4)]], dtype=np.float32), indices=[2])  # fmt: skip
    assert not store.offsets_stale
    bodies = [path.rsplit("/", 1)[0] for path in mounts.prim_paths]  # a mount sits right on its body
    body_usd = usd_world(stage, bodies)
    mount_offsets = [m @ np.linalg.inv(pose_matrix(*rigid_pose(b))) for m, b in
                     zip(usd_world(stage, mounts.prim_paths), body_usd, strict=True)]  # fmt: skip
    expected = np.array(mount_offsets) @ body_matrices(body_q)
    expected[2] = target
    assert_view_at(mounts, expected)
    cameras = view_of(scene)  # adds the cameras below the mounts: stale again, the mounts' reads unchanged
    assert store.offsets_stale
    assert_view_at(mounts, expected)
    camera_local = np.array([np.array(UsdGeom.XformCache().GetLocalTransformation(stage.GetPrimAtPath(p))[0])
                             for p in cameras.prim_paths])  # fmt: skip
    assert_view_at(cameras, camera_local @ expected)


MOUNT_SCALES = [(2.0, 2.0, 2.0), (1.0, 2.0, 0.5), (1.0, -1.0, 1.0), (1.0, 1.0, 3.0)]
"""Per env: a uniform, a non-uniform, a mirroring and a one-axis scale on the Mount. The pitched camera below a
Mount whose x and z scales differ (envs 1 and 3) has a sheared world matrix."""


def test_reads_under_scaled_mirrored_and_sheared_mounts(newton, device: str) -> None:
    """Cameras below scaled, mirrored and shearing mounts, on bodies at random poses: positions match float64 truth
    (``offset @ body``, the offset from pxr); orientations match Gf's rotation of the truth where it has no shear,
    and where it has shear, the decomposition every backend applies to a world matrix (closest rotation from the
    unit rows, ``decompose_matrices``). At the bodies' USD poses the Newton view reads what the USD view reads."""
    stage = falling_stage(N)
    for i, scale in enumerate(MOUNT_SCALES):
        UsdGeom.Xformable(stage.GetPrimAtPath(f"/World/envs/env_{i}/Body/Mount")).AddScaleOp().Set(Gf.Vec3f(*scale))
    model = falling_model(stage, device)
    sim = {"state": model.state()}
    view = fv.NewtonFrameView(CAMERAS, stage=stage, model=model, state=lambda: sim["state"])
    offset = offsets(stage, view)
    sheared = np.array([has_shear(m) for m in offset])
    assert sheared.tolist() == [False, True, False, True]
    usd_p, usd_q = fv.UsdFrameView(CAMERAS, stage=stage).get_world_poses()
    pos, quat = view.get_world_poses()  # the initial state: every body at its USD pose
    np.testing.assert_allclose(pos.numpy(), usd_p.numpy(), atol=POS_ATOL)
    assert_quats_close(quat.numpy(), usd_q.numpy(), atol=QUAT_ATOL)
    rng = np.random.default_rng(7)
    body_q = np.concatenate([rng.uniform(-3, 3, (N, 3)), random_quats(rng, N)], axis=1).astype(np.float32)
    sim["state"].body_q.assign(body_q)
    truth = offset @ body_matrices(body_q)
    pos, quat = view.get_world_poses()
    p, q, _s = decompose_all(truth)
    np.testing.assert_allclose(pos.numpy(), p, atol=POS_ATOL)
    assert_quats_close(quat.numpy()[~sheared], q[~sheared], atol=QUAT_ATOL)
    mats = wp.array(truth[sheared], dtype=wp.mat44d, device="cpu")
    outs = [wp.empty(int(sheared.sum()), dtype=t, device="cpu") for t in (wp.vec3f, wp.quatf, wp.vec3f)]
    wp.launch(decompose_matrices, dim=mats.shape[0], inputs=[mats], outputs=outs, device="cpu")
    assert_quats_close(quat.numpy()[sheared], outs[1].numpy(), atol=QUAT_ATOL)
    view.close()


def test_swapped_states_are_never_stale(scene: dict, device: str) -> None:
    """A view given a callable reads whichever state it returns now: swapping states swaps the poses read."""
    view = view_of(scene)
    offset = offsets(scene["stage"], view)
    first, second = scene["sim"]["state"], scene["model"].state()
    moved = first.body_q.numpy()
    moved[:, 2] -= 2.0
    second.body_q.assign(moved)
    for state, body_q in ((second, moved), (first, first.body_q.numpy()), (second, moved)):
        scene["sim"]["state"] = state
        assert view.state is state
        assert_view_at(view, offset @ body_matrices(body_q))


def test_a_fixed_state_is_read_in_place(scene: dict, device: str) -> None:
    """Given a State (not a callable), the view reads its body_q at each call, even after it is replaced."""
    state = scene["sim"]["state"]
    view = fv.NewtonFrameView(CAMERAS, stage=scene["stage"], model=scene["model"], state=state)
    offset = offsets(scene["stage"], view)
    moved = state.body_q.numpy()
    moved[:, 0] += 1.0
    state.body_q = wp.array(moved, dtype=wp.transformf, device=device)
    assert_view_at(view, offset @ body_matrices(moved))


# ---------------------------------------------------------------- writes


@pytest.mark.parametrize("space", ["world", "local"])
def test_writes_round_trip_and_never_move_a_body(scene: dict, device: str, space: str) -> None:
    """World and local writes read back, keep the other space consistent, move no body, write no USD; the written
    offset then rides on the body (a moved body carries the frame with it)."""
    stage, state = scene["stage"], scene["sim"]["state"]
    view = view_of(scene)
    usd_before = usd_world(stage, view.prim_paths)
    body_q = state.body_q.numpy().copy()
    rng = np.random.default_rng(1)
    p, q = rng.uniform(-2, 2, (N, 3)).astype(np.float32), random_quats(rng, N).astype(np.float32)
    if space == "world":
        view.set_world_poses(p, q)
        got_p, got_q = view.get_world_poses()
    else:
        view.set_local_poses(p, q)
        got_p, got_q = view.get_local_poses()
    np.testing.assert_allclose(got_p.numpy(), p, atol=POS_ATOL)
    assert_quats_close(got_q.numpy(), q, atol=QUAT_ATOL)
    np.testing.assert_array_equal(state.body_q.numpy(), body_q)
    np.testing.assert_array_equal(usd_world(stage, view.prim_paths), usd_before)
    # world = local @ parent world, the parent (Mount) riding on the body
    mounts = view_of(scene, MOUNTS)
    lp, lq = view.get_local_poses()
    ls = view.get_local_scales()
    mp, mq = (a.numpy().copy() for a in mounts.get_world_poses())
    expected = np.array([pose_matrix(lp.numpy()[k], lq.numpy()[k]) @ pose_matrix(mp[k], mq[k]) for k in range(N)])
    np.testing.assert_allclose(ls.numpy(), 1.0, rtol=1e-6)
    assert_view_at(view, expected)
    # the written pose rides on the body from now on
    worlds = np.array([pose_matrix(a, b) for a, b in zip(*(x.numpy() for x in view.get_world_poses()), strict=True)])
    moved = body_q.copy()
    moved[:, :3] += [0.5, -1.0, 2.0]
    state.body_q.assign(moved)
    assert_view_at(view, worlds @ np.linalg.inv(body_matrices(body_q)) @ body_matrices(moved))


def test_none_keeps_a_component(scene: dict, device: str) -> None:
    """positions=None keeps the world position, orientations=None the world orientation."""
    view = view_of(scene)
    p0, _q0 = (a.numpy().copy() for a in view.get_world_poses())
    rng = np.random.default_rng(2)
    q = random_quats(rng, N).astype(np.float32)
    view.set_world_poses(None, q)
    p1, q1 = view.get_world_poses()
    np.testing.assert_allclose(p1.numpy(), p0, atol=POS_ATOL)
    assert_quats_close(q1.numpy(), q, atol=QUAT_ATOL)
    p = rng.uniform(-1, 1, (N, 3)).astype(np.float32)
    view.set_world_poses(p, None)
    p2, q2 = view.get_world_poses()
    np.testing.assert_allclose(p2.numpy(), p, atol=POS_ATOL)
    assert_quats_close(q2.numpy(), q, atol=QUAT_ATOL)


def test_frames_below_a_written_frame_follow(scene: dict, device: str) -> None:
    """Writing a Mount moves its Camera (viewed before the Mount view existed); other envs do not move."""
    cameras = view_of(scene)  # built first: its cameras anchor on the mounts once the mount view adds them
    cam_local = [a.numpy().copy() for a in cameras.get_local_poses()]
    cam_before = [a.numpy().copy() for a in cameras.get_world_poses()]
    mounts = view_of(scene, MOUNTS)
    target = np.array([[1.0, 2.0, 3.0]], dtype=np.float32)
    mounts.set_world_poses(target, indices=[2])
    cam_after = [a.numpy() for a in cameras.get_world_poses()]
    mp, mq = (a.numpy() for a in mounts.get_world_poses([2]))
    expected = pose_matrix(cam_local[0][2], cam_local[1][2]) @ pose_matrix(mp[0], mq[0])
    np.testing.assert_allclose(cam_after[0][2], expected[3, :3], atol=POS_ATOL)
    for k in (0, 1, 3):
        np.testing.assert_array_equal(cam_after[0][k], cam_before[0][k])
    for before, after in zip(cam_local, cameras.get_local_poses(), strict=True):
        np.testing.assert_allclose(after.numpy(), before, atol=1e-6)


def test_a_mount_and_its_camera_in_one_world_write(scene: dict, device: str) -> None:
    """A view over mounts and cameras written in one world call places both exactly (parents solved first)."""
    paths = [f"/World/envs/env_{i}/Body/Mount{leaf}" for i in range(N) for leaf in ("/Camera", "")]
    view = view_of(scene, paths)
    rng = np.random.default_rng(3)
    p, q = rng.uniform(-2, 2, (2 * N, 3)).astype(np.float32), random_quats(rng, 2 * N).astype(np.float32)
    view.set_world_poses(p, q)
    got_p, got_q = view.get_world_poses()
    np.testing.assert_allclose(got_p.numpy(), p, atol=POS_ATOL)
    assert_quats_close(got_q.numpy(), q, atol=QUAT_ATOL)


@pytest.mark.parametrize("parts", ["both", "pos", "quat"])
def test_world_writes_on_scaled_and_mirrored_mounts(newton, device: str, parts: str) -> None:
    """World writes of mounts right below their bodies (uniform, non-uniform, mirroring and one-axis scales), on
    bodies at random poses: each mount's world matrix becomes ``diag(s) R(q)`` at the position written, ``s`` its
    local scale with the mirror on x (kept), a component not written kept; the cameras below follow. Truth in
    float64: the mount's local matrix from pxr before the write, the cameras' from pxr, the bodies' poses."""
    stage = falling_stage(N)
    mounts_paths = [f"/World/envs/env_{i}/Body/Mount" for i in range(N)]
    for path, scale in zip(mounts_paths, MOUNT_SCALES, strict=True):
        UsdGeom.Xformable(stage.GetPrimAtPath(path)).AddScaleOp().Set(Gf.Vec3f(*scale))
    model = falling_model(stage, device)
    sim = {"state": model.state()}
    rng = np.random.default_rng(11)
    body_q = np.concatenate([rng.uniform(-3, 3, (N, 3)), random_quats(rng, N)], axis=1).astype(np.float32)
    sim["state"].body_q.assign(body_q)
    mounts = fv.NewtonFrameView(MOUNTS, stage=stage, model=model, state=lambda: sim["state"])
    cameras = fv.NewtonFrameView(CAMERAS, stage=stage, model=model, state=lambda: sim["state"])
    bodies = body_matrices(body_q)
    mount_local = np.array([m @ np.linalg.inv(pose_matrix(*rigid_pose(b)))
                            for m, b in zip(usd_world(stage, mounts_paths),
                                            usd_world(stage, [p.rsplit("/", 1)[0] for p in mounts_paths]),
                                            strict=True)])  # fmt: skip
    world_before = mount_local @ bodies
    _t0, _q0, s0 = decompose_all(world_before)  # s0: the kept scale, the mirror on x
    p = rng.uniform(-2, 2, (N, 3)).astype(np.float32)
    q = random_quats(rng, N).astype(np.float32)
    want = world_before.copy()
    if parts != "pos":
        want[:, :3, :3] = [np.diag(s) @ quat_to_rotation(r) for s, r in zip(s0, q.astype(np.float64), strict=True)]
    if parts != "quat":
        want[:, 3, :3] = p
    mounts.set_world_poses(p if parts != "quat" else None, q if parts != "pos" else None)
    pos, quat = mounts.get_world_poses()
    wp_, wq, ws = decompose_all(want)
    np.testing.assert_allclose(pos.numpy(), wp_, atol=POS_ATOL)
    assert_quats_close(quat.numpy(), wq, atol=QUAT_ATOL)
    np.testing.assert_allclose(mounts.get_world_scales().numpy(), ws, atol=1e-5)
    camera_local = xform_cache_local(stage, cameras.prim_paths)
    np.testing.assert_allclose(cameras.get_world_poses()[0].numpy(), (camera_local @ want)[:, 3, :3], atol=POS_ATOL)
    cameras.close()
    mounts.close()


def test_set_local_scales(scene: dict, device: str) -> None:
    """Local scales change the frame's scale (world scale follows); translation and rotation are kept."""
    view = view_of(scene, MOUNTS)
    cameras = view_of(scene)
    before = [a.numpy().copy() for a in view.get_world_poses()]
    s = np.array([[1.0, 2.0, 3.0]] * N, dtype=np.float32)
    view.set_local_scales(s)
    np.testing.assert_allclose(view.get_local_scales().numpy(), s, rtol=1e-6)
    np.testing.assert_allclose(view.get_world_scales().numpy(), s, rtol=1e-6)
    for b, a in zip(before, view.get_world_poses(), strict=True):
        np.testing.assert_allclose(a.numpy(), b, atol=1e-6)
    assert np.all(np.abs(cameras.get_world_scales().numpy() - 1.0).max(axis=1) > 0.5)  # the child follows


def test_indexed_and_masked_reads(scene: dict, device: str) -> None:
    """Indexed and masked reads give the full read's rows; masked-out rows are left untouched."""
    view = view_of(scene)
    full = view.get_world_poses()[0].numpy().copy()
    np.testing.assert_array_equal(view.get_world_poses([3, 0, 3])[0].numpy(), full[[3, 0, 3]])
    idx = wp.array([1, 2], dtype=wp.int32, device=device)
    np.testing.assert_array_equal(view.get_world_poses(idx)[0].numpy(), full[[1, 2]])
    mask = np.array([True, False, False, True])
    out = view.get_world_poses(mask=mask)[0].numpy()
    np.testing.assert_array_equal(out[mask], full[mask])



def test_local_reads_of_every_row_and_of_rows_agree_with_usd(newton, device: str) -> None:
    """Local poses of mounts (right below their bodies: the cached offsets) and cameras (below a mount: their local
    matrices) in one view, under scaled and mirrored mounts: the full read (its own launch), indexed and masked reads
    all match pxr's local matrices decomposed in float64, before and after a local write of random poses."""
    stage = falling_stage(N)
    for i, scale in enumerate(MOUNT_SCALES):
        UsdGeom.Xformable(stage.GetPrimAtPath(f"/World/envs/env_{i}/Body/Mount")).AddScaleOp().Set(Gf.Vec3f(*scale))
    model = falling_model(stage, device)
    sim = {"state": model.state()}
    view = fv.NewtonFrameView([MOUNTS, CAMERAS], stage=stage, model=model, state=lambda: sim["state"])
    p, q, _s = decompose_all(xform_cache_local(stage, view.prim_paths))
    rng = np.random.default_rng(3)
    sim["state"].body_q.assign(  # local reads never depend on the bodies
        np.concatenate([rng.uniform(-3, 3, (N, 3)), random_quats(rng, N)], axis=1).astype(np.float32)
    )

    def check(p: np.ndarray, q: np.ndarray) -> None:
        pos, quat = view.get_local_poses()
        np.testing.assert_allclose(pos.numpy(), p, atol=POS_ATOL)
        assert_quats_close(quat.numpy(), q, atol=QUAT_ATOL)
        rows = [5, 0, 7, 2]
        pos, quat = view.get_local_poses(wp.array(rows, dtype=wp.int32, device=device))
        np.testing.assert_allclose(pos.numpy(), p[rows], atol=POS_ATOL)
        assert_quats_close(quat.numpy(), q[rows], atol=QUAT_ATOL)
        mask = np.arange(view.count) % 3 != 1
        pos, quat = view.get_local_poses(mask=mask)
        np.testing.assert_allclose(pos.numpy()[mask], p[mask], atol=POS_ATOL)
        assert_quats_close(quat.numpy()[mask], q[mask], atol=QUAT_ATOL)

    check(p, q)
    new_p = rng.uniform(-1, 1, (view.count, 3)).astype(np.float32)
    new_q = random_quats(rng, view.count).astype(np.float32)
    view.set_local_poses(new_p, new_q)
    check(new_p, new_q)
    view.close()


# ---------------------------------------------------------------- frames, bodies and errors


@pytest.mark.parametrize(
    ("setup", "path", "why"),
    [
        ("body", "/World/envs/env_1/Body", "rigid body"),
        ("collider", "/World/envs/env_1/Body/Collider", "collider"),
        ("joint", "/World/Joint", "joint"),
    ],
)
def test_physics_prims_are_rejected(scene: dict, device: str, setup: str, path: str, why: str) -> None:
    """Bodies, colliders and joints are not frames: ValueError naming the prim and why."""
    stage = scene["stage"]
    if setup == "collider":
        UsdPhysics.CollisionAPI.Apply(UsdGeom.Cube.Define(stage, path).GetPrim())
    elif setup == "joint":
        UsdPhysics.FixedJoint.Define(stage, path)
    with pytest.raises(ValueError, match=rf"prim '{path}' is a {why}.*never moves a body"):
        view_of(scene, path)


def test_a_rigid_body_missing_from_the_model_is_an_error(scene: dict, device: str) -> None:
    """A frame under a RigidBodyAPI prim that the model has no body for is rejected, naming both prims."""
    stage = scene["stage"]
    UsdPhysics.RigidBodyAPI.Apply(UsdGeom.Xform.Define(stage, "/World/Extra").GetPrim())
    UsdGeom.Camera.Define(stage, "/World/Extra/Camera")
    with pytest.raises(ValueError, match=r"'/World/Extra/Camera' sits on '/World/Extra'.*no body"):
        view_of(scene, "/World/Extra/Camera")


def test_frames_without_a_body_are_fixed_in_the_world(scene: dict, device: str) -> None:
    """A frame with no body above it reads its USD world pose whatever the bodies do, and binds to body -1."""
    stage = scene["stage"]
    UsdGeom.Xform.Define(stage, "/World/Sensor").AddTranslateOp().Set(Gf.Vec3d(1.0, 2.0, 3.0))
    view = view_of(scene, ["/World/Sensor", "/World/envs/env_0/Body/Mount"])
    np.testing.assert_array_equal(view.body_indices, [-1, 0])
    scene["sim"]["state"].body_q.assign(np.tile(np.float32([0, 0, 0, 0, 0, 0, 1]), (N, 1)))
    np.testing.assert_allclose(view.get_world_poses()[0].numpy()[0], [1.0, 2.0, 3.0], atol=1e-6)
    np.testing.assert_allclose(view.get_world_poses()[0].numpy()[1], [0.2, 0.0, 0.5], atol=1e-6)


def test_constructor_errors(scene: dict, device: str) -> None:
    """Wrong model, state, stage or device raise TypeError / ValueError saying what was expected."""
    stage, model = scene["stage"], scene["model"]
    with pytest.raises(TypeError, match=r"model: expected a newton\.Model"):
        fv.NewtonFrameView(CAMERAS, stage=stage, model=object(), state=model.state())
    with pytest.raises(TypeError, match=r"state: expected a newton\.State"):
        fv.NewtonFrameView(CAMERAS, stage=stage, model=model, state=42)
    with pytest.raises(TypeError, match="the callable returned a int"):
        fv.NewtonFrameView(CAMERAS, stage=stage, model=model, state=lambda: 42)
    with pytest.raises(TypeError, match=r"stage: expected a pxr Usd\.Stage"):
        fv.NewtonFrameView(CAMERAS, stage="stage.usda", model=model, state=model.state())
    other = "cuda:0" if device == "cpu" else "cpu"
    if other == "cpu" or HAS_CUDA:
        with pytest.raises(ValueError, match="device: the Newton model lives on"):
            fv.NewtonFrameView(CAMERAS, stage=stage, model=model, state=model.state(), device=other)


# ---------------------------------------------------------------- the rest of frameview on this backend


def test_make_frame_view_passes_backend_arguments(scene: dict, device: str) -> None:
    """make_frame_view(cfg, stage, model=, state=) builds the newton backend; the others reject those arguments,
    and newton without them says what it needs."""
    cfg = fv.FrameViewCfg(prim_path=CAMERAS, backend="newton", device=device)
    sim = scene["sim"]
    with fv.make_frame_view(cfg, scene["stage"], model=scene["model"], state=lambda: sim["state"]) as view:
        assert isinstance(view, fv.NewtonFrameView) and view.backend == "newton" and view.count == N
    with pytest.raises(TypeError, match=r"backend 'newton' needs model and state"):
        fv.make_frame_view(cfg, scene["stage"])
    for backend in ("usd", "fabric"):
        other = fv.FrameViewCfg(prim_path=CAMERAS, backend=backend)
        with pytest.raises(TypeError, match=rf"backend '{backend}' takes no argument\(s\) \['model', 'state'\]"):
            fv.make_frame_view(other, scene["stage"], model=scene["model"], state=sim["state"])
    assert "newton" in fv.available_backends()


def test_camera_poses_in_ros_convention(scene: dict, device: str) -> None:
    """CameraPoses reads newton cameras (one launch, rotated in the read) in ROS axes built by hand from USD axes; a
    masked read fills the masked envs' rows with the same poses and leaves the others."""
    view = view_of(scene)
    cams = fv.CameraPoses(view)
    pos, quat = cams.read([2, 0], convention="ros")
    wpos, wquat = (a.numpy().copy() for a in view.get_world_poses([2, 0]))
    np.testing.assert_allclose(pos.numpy(), wpos, atol=1e-6)
    for k in range(2):
        right, up, back = quat_to_rotation(wquat[k])  # rows: the USD (opengl) camera's axes in the world
        ros = np.stack([right, -up, -back])  # x right, y down, z forward
        assert_quats_close(quat.numpy()[k : k + 1], rotation_to_quat(ros)[None], atol=1e-5)
    ref_pos, ref_quat = pos.numpy().copy(), quat.numpy().copy()  # the next reads reuse the buffers
    mask = np.zeros(view.count, dtype=bool)
    mask[[2, 0]] = True
    cams.read(convention="ros")[0].fill_(wp.vec3f(9.0, 9.0, 9.0))
    mpos, mquat = (a.numpy() for a in cams.read(mask=wp.array(mask, dtype=wp.bool, device=device), convention="ros"))
    np.testing.assert_allclose(mpos[[2, 0]], ref_pos, atol=1e-6)  # the masked read: the same rows, in place
    assert_quats_close(mquat[[2, 0]], ref_quat, atol=1e-6)
    np.testing.assert_array_equal(mpos[~mask], 9.0)


def test_scene_data_provider_over_a_newton_view(scene: dict, device: str) -> None:
    """A SceneDataProvider fed by a newton view gathers the frames' simulated poses into a consumer's order."""
    view = view_of(scene)
    provider = fv.SceneDataProvider(view.prim_paths, view.get_world_poses, device=view.device)
    order = [view.prim_paths[3], view.prim_paths[1]]
    mapping = provider.create_mapping(order)
    pos, quat = wp.zeros(2, dtype=wp.vec3f, device=device), wp.zeros(2, dtype=wp.quatf, device=device)
    moved = scene["sim"]["state"].body_q.numpy()
    moved[:, 2] += 7.0
    scene["sim"]["state"].body_q.assign(moved)
    assert provider.get_transforms(pos, quat, mapping)
    full = view.get_world_poses()[0].numpy()
    np.testing.assert_allclose(pos.numpy(), full[[3, 1]], atol=1e-6)


def test_mirror_to_fabric(scene: dict, device: str) -> None:
    """mirror_to writes the simulated camera poses into a Fabric view over the same prims (any order)."""
    view = view_of(scene)
    moved = scene["sim"]["state"].body_q.numpy()
    moved[:, :3] += [1.0, 2.0, -3.0]
    scene["sim"]["state"].body_q.assign(moved)
    reordered = list(reversed(view.prim_paths))
    with fv.FabricFrameView(reordered, stage=scene["stage"], device=device) as fabric:
        view.mirror_to(fabric)
        want_p, want_q = (a.numpy()[::-1] for a in view.get_world_poses())
        got_p, got_q = fabric.get_world_poses()
        np.testing.assert_allclose(got_p.numpy(), want_p, atol=1e-5)
        assert_quats_close(got_q.numpy(), want_q, atol=1e-5)
    with pytest.raises(ValueError, match="not in this view"):
        view.mirror_to(fv.UsdFrameView("/World/envs/env_0/Body", stage=scene["stage"]))


@pytest.mark.skipif(not HAS_CUDA, reason="CUDA graph capture needs a CUDA device")
def test_reads_and_writes_are_graph_capturable(newton) -> None:
    """Captured once, an indexed read replays with the body_q contents of each replay; a captured device-index
    write commits each replay; no host sync inside (the capture would fail)."""
    device = "cuda:0"
    stage = falling_stage(N)
    model = falling_model(stage, device)
    state = model.state()
    view = fv.NewtonFrameView(CAMERAS, stage=stage, model=model, state=state)
    offset = offsets(stage, view)
    idx = wp.array([3, 1], dtype=wp.int32, device=device)
    view.get_world_poses(idx)  # allocate the output buffers outside the capture
    with wp.ScopedCapture(device=device) as capture:
        pos, _quat = view.get_world_poses(idx)
    moved = state.body_q.numpy()
    moved[:, 2] -= 1.5
    state.body_q.assign(moved)
    wp.capture_launch(capture.graph)
    expected = (offset @ body_matrices(moved))[[3, 1]]
    np.testing.assert_allclose(pos.numpy(), expected[:, 3, :3], atol=POS_ATOL)
    target = wp.array(np.array([[0.0, 0.0, 9.0], [1.0, 1.0, 9.0]], dtype=np.float32), dtype=wp.vec3f, device=device)
    view.set_world_poses(target, indices=idx)
    with wp.ScopedCapture(device=device) as write:
        view.set_world_poses(target, indices=idx)
    moved[:, 2] += 4.0
    state.body_q.assign(moved)
    wp.capture_launch(write.graph)
    view.check()
    np.testing.assert_allclose(view.get_world_poses(idx)[0].numpy(), target.numpy(), atol=POS_ATOL)


def test_device_errors_are_reported(scene: dict, device: str) -> None:
    """Device indices out of range and non-finite device data raise (on the CPU at once, on CUDA by check())."""
    view = view_of(scene)
    bad = wp.array([0, N], dtype=wp.int32, device=device)
    with pytest.raises(IndexError, match=f"index {N}"):
        view.get_world_poses(bad)
        view.check()
    nan = wp.array(np.full((N, 3), np.nan, dtype=np.float32), dtype=wp.vec3f, device=device)
    before = view.get_world_poses()[0].numpy().copy()
    with pytest.raises(ValueError, match="positions: row 0"):
        view.set_world_poses(nan)
        view.check()
    np.testing.assert_array_equal(view.get_world_poses()[0].numpy(), before)


def test_visibility_is_read_from_the_stage(scene: dict, device: str) -> None:
    """get_visibility reads the stage's computed visibility; set_visibility says where to write it instead."""
    UsdGeom.Imageable(scene["stage"].GetPrimAtPath("/World/envs/env_2/Body")).MakeInvisible()
    view = view_of(scene)
    np.testing.assert_array_equal(view.get_visibility().numpy(), [True, True, False, True])
    with pytest.raises(NotImplementedError, match="UsdFrameView or FabricFrameView"):
        view.set_visibility(False)


def test_import_frameview_does_not_import_newton() -> None:
    """`import frameview` and the config API leave newton unimported; without newton the view names the extra."""
    code = "import sys, frameview as fv; fv.FrameViewCfg; fv.available_backends(); print('newton' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    code = (
        "import sys; sys.modules['newton'] = None\n"
        "import frameview as fv\n"
        "try:\n    fv.NewtonFrameView\nexcept ImportError as exc:\n    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "install frameview[newton]" in out.stdout

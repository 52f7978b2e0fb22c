# SPDX-License-Identifier: Apache-2.0
"""CameraPoses and convert_camera_orientations, checked against hand-built float64 rotation matrices.

The truth never uses frameview's offsets: a camera's axes are read from its world rotation (pxr ``Gf``), the axes of
the target convention are written down by hand from the definition of each convention, and the result's rotation
must have exactly those axes.

- opengl (USD camera): +X right, +Y up, looks down -Z;
- ros (optical frame):  +X right, +Y down, looks down +Z;
- world (body frame):   +X forward, +Y left, +Z up.
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
    decompose_all,
    env_paths,
    quat_to_rotation,
    random_quats,
    rotation_to_quat,
    xform_cache_world,
)
from pxr import Gf, Usd, UsdGeom

import frameview as fv

wp.config.quiet = True

CAMERAS = "/World/envs/env_.*/Robot/Camera"
ROBOTS = "/World/envs/env_.*/Robot"
CONVENTIONS = ("opengl", "ros", "world")
BACKENDS = ("usd", "fabric")


# ---------------------------------------------------------------- truth


def axes_in(convention: str, q_opengl: np.ndarray) -> np.ndarray:
    """(3, 3) float64: rows are the world directions of +X, +Y, +Z of ``convention`` for an opengl orientation."""
    rows = quat_to_rotation(q_opengl)  # rows: the camera's opengl +X, +Y, +Z in world (Gf, row-vector)
    right, up, back = rows[0], rows[1], rows[2]
    forward, down, left = -back, -up, -right
    if convention == "opengl":
        return np.stack([right, up, back])
    if convention == "ros":
        return np.stack([right, down, forward])
    if convention == "world":
        return np.stack([forward, left, up])
    raise AssertionError(convention)


def expected_quats(q_opengl: np.ndarray, convention: str) -> np.ndarray:
    """(N, 4) float64 xyzw whose rotation has the hand-built axes of ``convention``."""
    return np.array([rotation_to_quat(axes_in(convention, q)) for q in np.asarray(q_opengl, dtype=np.float64)])


def assert_axes(quats: np.ndarray, q_opengl: np.ndarray, convention: str, atol: float) -> None:
    """Each result rotation's rows equal the hand-built axes (compared as matrices, so the sign of q is irrelevant)."""
    for k, (q, q_gl) in enumerate(zip(np.asarray(quats, dtype=np.float64), q_opengl, strict=True)):
        np.testing.assert_allclose(quat_to_rotation(q), axes_in(convention, q_gl), atol=atol, err_msg=f"row {k}")


# ---------------------------------------------------------------- stages and views


def make_views(stage: Usd.Stage, backend: str, device: str, cameras: str | list[str] = CAMERAS):
    cfg = fv.FrameViewCfg(prim_path=cameras, backend=backend, device=device, fabric_provider="memory")
    cam = fv.make_frame_view(cfg, stage)
    robot = fv.make_frame_view(fv.FrameViewCfg(**{**cfg.to_dict(), "prim_path": ROBOTS}), stage)
    return cam, robot


@pytest.fixture
def env_stage() -> Usd.Stage:
    """Eight envs; robots non-uniformly scaled, cameras at right angles with a scale (no shear anywhere)."""
    return build_env_stage(8, seed=3)


# ---------------------------------------------------------------- the convention definitions themselves


def test_hand_built_axes_are_right_handed():
    """The hand-built axes of every convention form a proper rotation (guards the truth itself)."""
    for q in random_quats(np.random.default_rng(0), 5):
        for convention in CONVENTIONS:
            axes = axes_in(convention, q)
            np.testing.assert_allclose(axes @ axes.T, np.eye(3), atol=1e-12)
            assert np.linalg.det(axes) == pytest.approx(1.0)


def test_known_camera_looking_along_world_x():
    """A USD camera looking along world +X with +Z up reads as identity in 'world' and as a known rotation in 'ros'."""
    stage = Usd.Stage.CreateInMemory()
    cam = UsdGeom.Camera.Define(stage, "/Cam")
    # opengl axes in world: +X right = -Y_w, +Y up = +Z_w, +Z back = -X_w
    q_gl = rotation_to_quat(np.array([[0.0, -1.0, 0.0], [0.0, 0.0, 1.0], [-1.0, 0.0, 0.0]]))
    cam.AddTranslateOp().Set(Gf.Vec3d(1.0, 2.0, 3.0))
    cam.AddOrientOp(UsdGeom.XformOp.PrecisionDouble).Set(Gf.Quatd(q_gl[3], Gf.Vec3d(*q_gl[:3])))
    with fv.UsdFrameView("/Cam", stage=stage) as view:
        cams = fv.CameraPoses(view)
        pos, quat = cams.read(convention="world")
        np.testing.assert_allclose(pos.numpy(), [[1.0, 2.0, 3.0]], atol=1e-6)
        assert_quats_close(quat.numpy(), np.array([[0.0, 0.0, 0.0, 1.0]]), atol=1e-6)
        _, quat = cams.read(convention="ros")
        # ros: +X right = -Y_w, +Y down = -Z_w, +Z forward = +X_w
        ros = rotation_to_quat(np.array([[0.0, -1.0, 0.0], [0.0, 0.0, -1.0], [1.0, 0.0, 0.0]]))
        assert_quats_close(quat.numpy(), ros[None], atol=1e-6)


# ---------------------------------------------------------------- convert_camera_orientations


@pytest.mark.parametrize("origin", CONVENTIONS)
@pytest.mark.parametrize("target", CONVENTIONS)
def test_convert_numpy_float64_matches_hand_built_axes(origin: str, target: str):
    """Every origin -> target conversion of random float64 quaternions has the target's hand-built axes."""
    q_gl = random_quats(np.random.default_rng(1), 64)
    q_origin = expected_quats(q_gl, origin)
    out = fv.convert_camera_orientations(q_origin, origin=origin, target=target)
    assert isinstance(out, np.ndarray) and out.dtype == np.float64 and out.shape == (64, 4)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-12)
    assert_axes(out, q_gl, target, atol=1e-12)


def test_convert_numpy_keeps_dtype_shape_and_sign():
    """float32 stays float32, a batch shape (..., 4) is kept, and the map is linear (-q -> -result)."""
    q = random_quats(np.random.default_rng(2), 12).reshape(3, 4, 4).astype(np.float32)
    out = fv.convert_camera_orientations(q, "opengl", "world")
    assert out.dtype == np.float32 and out.shape == (3, 4, 4)
    np.testing.assert_allclose(fv.convert_camera_orientations(-q, "opengl", "world"), -out, atol=1e-7)
    single = fv.convert_camera_orientations(np.array([0.0, 0.0, 0.0, 1.0]), "opengl", "ros")
    assert single.shape == (4,)
    assert_axes(single[None], np.array([[0.0, 0.0, 0.0, 1.0]]), "ros", atol=1e-12)


@pytest.mark.parametrize("kind", ["quatf", "quatd", "float32_2d", "float64_2d"])
def test_convert_warp_arrays(kind: str, device: str):
    """Warp quatf/quatd (N,) and float (N, 4) arrays convert on their device and come back as the same kind."""
    q_gl = random_quats(np.random.default_rng(4), 33)
    q_ros = expected_quats(q_gl, "ros")
    dtype = {"quatf": wp.quatf, "quatd": wp.quatd, "float32_2d": wp.float32, "float64_2d": wp.float64}[kind]
    host = q_ros.astype(np.float64 if kind in ("quatd", "float64_2d") else np.float32)
    arr = wp.array(host, dtype=dtype, device=device)
    out = fv.convert_camera_orientations(arr, origin="ros", target="world")
    assert isinstance(out, wp.array) and out.dtype == dtype and out.shape == arr.shape
    assert str(out.device) == str(wp.get_device(device))
    atol = 1e-12 if dtype in (wp.quatd, wp.float64) else 2e-6
    assert_axes(out.numpy().reshape(-1, 4), q_gl, "world", atol=atol)


def test_convert_warp_into_preallocated_and_in_place(device: str):
    """``out=`` writes into the given array; passing the input itself converts in place."""
    q_gl = random_quats(np.random.default_rng(5), 16).astype(np.float32)
    arr = wp.array(q_gl, dtype=wp.quatf, device=device)
    out = wp.empty_like(arr)
    assert fv.convert_camera_orientations(arr, "opengl", "ros", out=out) is out
    assert_axes(out.numpy(), q_gl.astype(np.float64), "ros", atol=2e-6)
    fv.convert_camera_orientations(arr, "opengl", "ros", out=arr)
    np.testing.assert_array_equal(arr.numpy(), out.numpy())
    with pytest.raises(ValueError, match="out: expected"):
        fv.convert_camera_orientations(arr, out=wp.empty(3, dtype=wp.quatf, device=device))


def test_convert_round_trip_is_identity():
    """origin -> target -> origin returns the input for every pair."""
    q = random_quats(np.random.default_rng(6), 20)
    for origin in CONVENTIONS:
        for target in CONVENTIONS:
            back = fv.convert_camera_orientations(fv.convert_camera_orientations(q, origin, target), target, origin)
            np.testing.assert_allclose(back, q, atol=1e-12)


def test_convert_torch_keeps_dtype_device_and_grad():
    """torch tensors come back as tensors of the same dtype and device, and gradients flow through."""
    torch = pytest.importorskip("torch")
    q_gl = random_quats(np.random.default_rng(7), 10)
    t = torch.tensor(q_gl, dtype=torch.float64, requires_grad=True)
    out = fv.convert_camera_orientations(t, "opengl", "world")
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float64 and out.device == t.device
    assert_axes(out.detach().numpy(), q_gl, "world", atol=1e-12)
    out.sum().backward()
    assert t.grad is not None
    out32 = fv.convert_camera_orientations(t.detach().float(), "opengl", "ros")
    assert out32.dtype == torch.float32


def test_convert_rejects_bad_input():
    """Unknown conventions, bad shapes and dtypes raise with the expected values in the message."""
    q = np.array([[0.0, 0.0, 0.0, 1.0]])
    with pytest.raises(ValueError, match=r"target: expected one of \['opengl', 'ros', 'world'\], got 'cv'"):
        fv.convert_camera_orientations(q, "opengl", "cv")
    with pytest.raises(ValueError, match=r"origin: expected one of"):
        fv.convert_camera_orientations(q, "OpenGL", "ros")
    with pytest.raises(ValueError, match=r"expected shape \(\.\.\., 4\), got \(1, 3\)"):
        fv.convert_camera_orientations(np.zeros((1, 3)))
    with pytest.raises(TypeError, match="floating-point"):
        fv.convert_camera_orientations(np.zeros((1, 4), dtype=np.int32))
    with pytest.raises(TypeError, match="expected a Warp array, a NumPy array or a torch tensor"):
        fv.convert_camera_orientations([[0.0, 0.0, 0.0, 1.0]])
    with pytest.raises(TypeError, match="quatf/quatd"):
        fv.convert_camera_orientations(wp.zeros(2, dtype=wp.vec3f))
    with pytest.raises(TypeError, match="only supported for Warp arrays"):
        fv.convert_camera_orientations(q, out=wp.zeros(1, dtype=wp.quatf))


# ---------------------------------------------------------------- CameraPoses over the backends


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("convention", CONVENTIONS)
def test_read_all_matches_xform_cache(env_stage: Usd.Stage, backend: str, convention: str, device: str):
    """read() of all envs gives the XformCache positions and the hand-built axes of the convention."""
    cam_view, robot_view = make_views(env_stage, backend, device)
    with cam_view, robot_view:
        truth_t, truth_q, _ = decompose_all(xform_cache_world(env_stage, env_paths(8, "/Robot/Camera")))
        pos, quat = fv.CameraPoses(cam_view).read(convention=convention)
        assert pos.dtype == wp.vec3f and quat.dtype == wp.quatf and pos.shape == quat.shape == (8,)
        assert str(pos.device) == str(wp.get_device(device))
        np.testing.assert_allclose(pos.numpy(), truth_t, atol=1e-5)
        assert_w_nonnegative(quat.numpy())
        assert_axes(quat.numpy(), truth_q, convention, atol=2e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_reset_subset_reads_exactly_those_envs(env_stage: Usd.Stage, backend: str, device: str):
    """After moving the robots of a subset, read(env_ids) returns those envs' cameras, row k = env_ids[k]."""
    rng = np.random.default_rng(8)
    cam_view, robot_view = make_views(env_stage, backend, device)
    robots, cameras = env_paths(8, "/Robot"), env_paths(8, "/Robot/Camera")
    model = PoseModel(env_stage, robots + cameras)
    with cam_view, robot_view:
        cams = fv.CameraPoses(cam_view)
        for _ in range(3):
            env_ids = rng.choice(8, size=3, replace=False)  # unsorted
            p, q = rng.uniform(-3.0, 3.0, size=(3, 3)), random_quats(rng, 3)
            robot_view.set_world_poses(p, q, indices=env_ids)
            model.set_world([robots[i] for i in env_ids], p, q)
            pos, quat = cams.read(env_ids, convention="ros")
            assert pos.shape == (3,) and quat.shape == (3,)
            truth_t, truth_q, _ = decompose_all(model.worlds([cameras[i] for i in env_ids]))
            np.testing.assert_allclose(pos.numpy(), truth_t, atol=1e-4)
            assert_axes(quat.numpy(), truth_q, "ros", atol=1e-4)
        # the envs never reset keep the stage's initial camera poses
        all_pos, _ = cams.read(convention="opengl")
        np.testing.assert_allclose(all_pos.numpy(), decompose_all(model.worlds(cameras))[0], atol=1e-4)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("convention", CONVENTIONS)
def test_masked_read_writes_exactly_the_masked_envs(env_stage: Usd.Stage, backend: str, convention: str, device: str):
    """read(mask=...) after a masked robot write: one row per env, the masked rows are those envs' cameras (positions
    and hand-built axes against the pose model), the other rows keep what the buffers held."""
    rng = np.random.default_rng(9)
    cam_view, robot_view = make_views(env_stage, backend, device)
    robots, cameras = env_paths(8, "/Robot"), env_paths(8, "/Robot/Camera")
    model = PoseModel(env_stage, robots + cameras)
    with cam_view, robot_view:
        cams = fv.CameraPoses(cam_view)
        for _ in range(2):
            mask = rng.random(8) < 0.5
            p, q = rng.uniform(-3.0, 3.0, size=(8, 3)), random_quats(rng, 8)
            robot_view.set_world_poses(p, q, mask=wp.array(mask, dtype=wp.bool, device=device))
            model.set_world([robots[i] for i in np.flatnonzero(mask)], p[mask], q[mask])
            cams.read(convention=convention)[0].fill_(wp.vec3f(99.0, 99.0, 99.0))  # poison the result buffers
            got = cams.read(mask=wp.array(mask, dtype=wp.bool, device=device), convention=convention)
            assert got[0].shape == got[1].shape == (8,)
            pos, quat = (a.numpy() for a in got)
            truth_t, truth_q, _ = decompose_all(model.worlds(cameras))
            np.testing.assert_allclose(pos[mask], truth_t[mask], atol=1e-4)
            assert_w_nonnegative(quat[mask])
            assert_axes(quat[mask], truth_q[mask], convention, atol=1e-4)
            np.testing.assert_array_equal(pos[~mask], 99.0)


def test_masked_read_through_env_rows(env_stage: Usd.Stage, device: str):
    """With env_rows (view prims in reverse env order, part of the view), a mask selects envs, not view rows."""
    cameras = env_paths(8, "/Robot/Camera")
    truth_t, truth_q, _ = decompose_all(xform_cache_world(env_stage, cameras))
    with fv.FabricFrameView(cameras[::-1], stage=env_stage, device=device, fabric_provider="memory") as view:
        cams = fv.CameraPoses(view, env_rows=[7, 6, 5, 4, 3])  # envs 0..4 only
        mask = np.array([True, False, False, True, True])
        cams.read(convention="ros")[0].fill_(wp.vec3f(5.0, 5.0, 5.0))
        got = cams.read(mask=wp.array(mask, dtype=wp.bool, device=device))
        assert got[0].shape == got[1].shape == (5,)
        pos, quat = (a.numpy() for a in got)
        np.testing.assert_allclose(pos[mask], truth_t[:5][mask], atol=1e-5)
        assert_axes(quat[mask], truth_q[:5][mask], "ros", atol=2e-5)
        np.testing.assert_array_equal(pos[~mask], 5.0)
        with pytest.raises(ValueError, match=r"mask: expected shape \(5,\)"):
            cams.read(mask=np.ones(8, dtype=bool))
        with pytest.raises(TypeError, match="env_ids and mask"):
            cams.read([0], mask=mask)
        with pytest.raises(TypeError, match="mask: expected booleans"):
            cams.read(mask=np.ones(5, dtype=np.int32))


def test_env_rows_maps_env_ids_to_view_rows(env_stage: Usd.Stage, device: str):
    """With the view's prims in reverse env order, env_rows makes read(env_ids) still return env order."""
    cameras = env_paths(8, "/Robot/Camera")
    with fv.FabricFrameView(cameras[::-1], stage=env_stage, device=device, fabric_provider="memory") as view:
        cams = fv.CameraPoses(view, env_rows=np.arange(8)[::-1])
        assert cams.num_envs == 8
        truth_t = decompose_all(xform_cache_world(env_stage, cameras))[0]
        pos, _ = cams.read([6, 0, 3])
        np.testing.assert_allclose(pos.numpy(), truth_t[[6, 0, 3]], atol=1e-5)
        pos, _ = cams.read()
        np.testing.assert_allclose(pos.numpy(), truth_t, atol=1e-5)


def test_env_rows_may_cover_part_of_the_view(env_stage: Usd.Stage):
    """env_rows shorter than the view sets num_envs; its env ids index env_rows, not the view."""
    cameras = env_paths(8, "/Robot/Camera")
    with fv.UsdFrameView(cameras, stage=env_stage) as view:
        cams = fv.CameraPoses(view, env_rows=[7, 2])
        assert cams.num_envs == 2
        pos, _ = cams.read()
        np.testing.assert_allclose(pos.numpy(), decompose_all(xform_cache_world(env_stage, cameras))[0][[7, 2]], 1e-5)
        with pytest.raises(IndexError, match=r"env id 2 is out of range; expected 0 <= env id < num_envs=2"):
            cams.read([2])


def test_read_accepts_index_kinds(env_stage: Usd.Stage):
    """env_ids as list, range, numpy int32/int64, Warp int32 and torch int64 read the same rows."""
    with fv.UsdFrameView(CAMERAS, stage=env_stage) as view:
        cams = fv.CameraPoses(view)
        want = cams.read([1, 5])[0].numpy().copy()
        kinds = [range(1, 6, 4), np.array([1, 5], dtype=np.int32), np.array([1, 5]), wp.array([1, 5], dtype=wp.int32)]
        torch = pytest.importorskip("torch")
        kinds.append(torch.tensor([1, 5]))
        for ids in kinds:
            np.testing.assert_array_equal(cams.read(ids)[0].numpy(), want)
        assert cams.read([])[0].shape == (0,)


def test_buffers_are_owned_and_reused(env_stage: Usd.Stage):
    """Reads return slices of the same CameraPoses buffers, distinct from the view's own output buffers."""
    with fv.UsdFrameView(CAMERAS, stage=env_stage) as view:
        cams = fv.CameraPoses(view)
        pos_a, quat_a = cams.read(convention="ros")
        pos_b, quat_b = cams.read([3, 4], convention="world")
        assert pos_a.ptr == pos_b.ptr and quat_a.ptr == quat_b.ptr
        view_pos, view_quat = view.get_world_poses()
        assert view_pos.ptr != pos_a.ptr and view_quat.ptr != quat_a.ptr


def test_bad_arguments(env_stage: Usd.Stage):
    """Bad view, convention, env_ids and env_rows raise the documented errors with a useful message."""
    with fv.UsdFrameView(CAMERAS, stage=env_stage) as view:
        with pytest.raises(TypeError, match="view: expected a FrameView"):
            fv.CameraPoses(env_stage)
        cams = fv.CameraPoses(view)
        with pytest.raises(ValueError, match=r"convention: expected one of \['opengl', 'ros', 'world'\], got 'cv'"):
            cams.read(convention="cv")
        with pytest.raises(IndexError, match="env id 8 is out of range"):
            cams.read([0, 8])
        with pytest.raises(IndexError, match="env id -1 is out of range"):
            cams.read([-1])
        with pytest.raises(TypeError, match=r"for a mask pass mask="):
            cams.read(np.ones(8, dtype=bool))
        with pytest.raises(TypeError, match="integer env ids"):
            cams.read([0.5])
        with pytest.raises(ValueError, match="1-D"):
            cams.read(np.zeros((2, 2), dtype=np.int64))
        with pytest.raises(IndexError, match=r"env_rows: expected rows in \[0, 8\)"):
            fv.CameraPoses(view, env_rows=[0, 8])
        with pytest.raises(TypeError, match="env_rows: expected integer"):
            fv.CameraPoses(view, env_rows=[0.0])
    with pytest.raises(RuntimeError, match="closed"):
        cams.read()

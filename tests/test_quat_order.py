# SPDX-License-Identifier: Apache-2.0
"""``quat_order="wxyz"``: every frame backend (usd, fabric, newton) and device takes and returns (w, x, y, z).

Truth: pxr ``UsdGeom.XformCache`` (float64) for the initial poses, :class:`helpers.PoseModel` (float64 NumPy) after
writes, and Newton's own ``body_q`` for the physics views. A wxyz view is compared with that truth and with an xyzw
view of the same prims; inputs are NumPy, lists, torch tensors and Warp arrays.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import warp as wp
from helpers import (
    PoseModel,
    assert_quats_close,
    build_env_stage,
    decompose_all,
    env_paths,
    random_quats,
    xform_cache_local,
    xform_cache_world,
)
from pxr import Usd

import frameview as fv

N = 6
ROBOTS = "/World/envs/env_.*/Robot"
CAMERAS = "/World/envs/env_.*/Robot/Camera"
ROBOT_PATHS = env_paths(N, "/Robot")
CAMERA_PATHS = env_paths(N, "/Robot/Camera")
ATOL = 2e-5
FRAME_BACKENDS = ("usd", "fabric", "newton")
TO_XYZW = [1, 2, 3, 0]
TO_WXYZ = [3, 0, 1, 2]


@pytest.fixture(params=FRAME_BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """A frame backend."""
    return request.param


@pytest.fixture
def stage() -> Usd.Stage:
    """N envs of rotated, scaled robots with cameras (tests/helpers.py)."""
    return build_env_stage(N, seed=11, robot_scale="uniform")


@pytest.fixture
def views(backend: str, device: str):
    """``make(prim_path, stage, quat_order)``: a view of the backend under test, built from a FrameViewCfg (the
    config path); closed at teardown."""
    made: list = []

    def make(prim_path: str, stage: Usd.Stage, quat_order: str = "xyzw"):
        extra = {}
        if backend == "newton":
            from newton_helpers import contract_model

            model, state = contract_model(stage, device)
            extra = {"model": model, "state": state}
        cfg = fv.FrameViewCfg(prim_path=prim_path, backend=backend, device=device, quat_order=quat_order)
        view = fv.make_frame_view(cfg, stage, **extra)
        made.append(view)
        return view

    yield make
    for view in made:
        view.close()


def wxyz(q: np.ndarray) -> np.ndarray:
    """xyzw rows -> wxyz rows."""
    return np.asarray(q)[:, TO_WXYZ]


def xyzw(q: np.ndarray) -> np.ndarray:
    """wxyz rows -> xyzw rows."""
    return np.asarray(q)[:, TO_XYZW]


def assert_wxyz_output(quat: wp.array, expected_xyzw: np.ndarray, rows: np.ndarray | None = None) -> None:
    """``quat`` is a wp.vec4f array holding (w, x, y, z) of the expected rotations, with w >= 0."""
    assert quat.dtype == wp.vec4f, f"expected a wp.vec4f array of w, x, y, z, got {quat.dtype}"
    got = quat.numpy()
    if rows is not None:
        got = got[rows]
    assert np.all(got[:, 0] >= 0.0), "w < 0"
    assert_quats_close(xyzw(got), expected_xyzw, atol=ATOL)


def as_input(kind: str, values: np.ndarray, device: str):
    """``values`` (M, 4) float as the input kind under test."""
    if kind == "numpy":
        return values.astype(np.float32)
    if kind == "list":
        return values.tolist()
    if kind == "warp":
        return wp.array(values.astype(np.float32), dtype=wp.float32, device=device)
    if kind == "warp_vec4f":
        return wp.array(values.astype(np.float32), dtype=wp.vec4f, device=device)
    if kind == "torch":
        torch = pytest.importorskip("torch")
        return torch.tensor(values, dtype=torch.float64, device=device.replace("cuda:0", "cuda"))
    if kind == "torch_slice":  # a column slice of a wider root state: read in place
        torch = pytest.importorskip("torch")
        root = torch.zeros((values.shape[0], 13), dtype=torch.float32, device=device.replace("cuda:0", "cuda"))
        root[:, 3:7] = torch.tensor(values, dtype=torch.float32)
        return root[:, 3:7]
    raise AssertionError(kind)


# ---------------------------------------------------------------- reads


def test_reads_are_wxyz(views, stage: Usd.Stage) -> None:
    """World and local orientations of a wxyz view are XformCache's rotations as (w, x, y, z) vec4f, all rows,
    indexed and masked; the xyzw view of the same prims still returns xyzw quatf; positions are the same."""
    for pattern, paths in ((ROBOTS, ROBOT_PATHS), (CAMERAS, CAMERA_PATHS)):
        plain, ordered = views(pattern, stage), views(pattern, stage, "wxyz")
        assert (plain.quat_order, ordered.quat_order) == ("xyzw", "wxyz")
        for space, mats in (("world", xform_cache_world(stage, paths)), ("local", xform_cache_local(stage, paths))):
            pos_true, quat_true, _ = decompose_all(mats)
            pos, quat = getattr(ordered, f"get_{space}_poses")()
            np.testing.assert_allclose(pos.numpy(), pos_true, atol=ATOL)
            assert_wxyz_output(quat, quat_true)
            pos, quat = getattr(plain, f"get_{space}_poses")()
            assert quat.dtype == wp.quatf
            assert_quats_close(quat.numpy(), quat_true, atol=ATOL)
            _, quat = getattr(ordered, f"get_{space}_poses")(indices=[4, 1])
            assert_wxyz_output(quat, quat_true[[4, 1]])
            mask = np.zeros(N, dtype=bool)
            mask[[0, 3, 5]] = True
            _, quat = getattr(ordered, f"get_{space}_poses")(mask=wp.array(mask, dtype=wp.bool, device=ordered.device))
            assert_wxyz_output(quat, quat_true[mask], rows=np.flatnonzero(mask))


def test_a_masked_read_reorders_only_its_rows(views, stage: Usd.Stage) -> None:
    """A masked read of a wxyz view leaves the other rows of its output as the previous read left them."""
    ordered = views(CAMERAS, stage, "wxyz")
    _, quat = ordered.get_world_poses()
    before = quat.numpy().copy()
    mask = np.zeros(N, dtype=bool)
    mask[2] = True
    _, quat = ordered.get_world_poses(mask=mask)
    np.testing.assert_array_equal(quat.numpy()[~mask], before[~mask])
    np.testing.assert_allclose(quat.numpy()[mask], before[mask], atol=ATOL)


# ---------------------------------------------------------------- writes


@pytest.mark.parametrize("kind", ["numpy", "list", "warp", "warp_vec4f", "torch", "torch_slice"])
def test_world_writes_take_wxyz(views, stage: Usd.Stage, device: str, kind: str) -> None:
    """A wxyz world write of robots 1 and 4 (every input kind) puts them where the float64 model says, read back by
    an xyzw view; their cameras follow; the caller's data is left as it was."""
    if kind.startswith("torch") and device != "cpu":
        torch = pytest.importorskip("torch")
        if not torch.cuda.is_available():
            pytest.skip("torch has no CUDA here")
    model = PoseModel(stage, ROBOT_PATHS + CAMERA_PATHS)
    robots, robots_xyzw = views(ROBOTS, stage, "wxyz"), views(ROBOTS, stage)
    cameras = views(CAMERAS, stage)
    rng = np.random.default_rng(3)
    q = random_quats(rng, 2)  # xyzw truth
    p = rng.uniform(-2.0, 2.0, size=(2, 3))
    data = as_input(kind, wxyz(q), device)
    robots.set_world_poses(positions=p.astype(np.float32), orientations=data, indices=[1, 4])
    model.set_world([ROBOT_PATHS[1], ROBOT_PATHS[4]], p=p, q=q)
    robots.check()
    pos, quat = robots_xyzw.get_world_poses()
    expected_pos, expected_quat, _ = decompose_all(model.worlds(ROBOT_PATHS))
    np.testing.assert_allclose(pos.numpy(), expected_pos, atol=ATOL)
    assert_quats_close(quat.numpy(), expected_quat, atol=ATOL)
    pos, quat = cameras.get_world_poses()
    cam_pos, cam_quat, _ = decompose_all(model.worlds(CAMERA_PATHS))
    np.testing.assert_allclose(pos.numpy(), cam_pos, atol=ATOL)
    assert_quats_close(quat.numpy(), cam_quat, atol=ATOL)
    given = data if isinstance(data, list) else (data.numpy() if isinstance(data, wp.array) else None)
    if given is None:
        given = data.cpu().numpy() if hasattr(data, "cpu") else data
    np.testing.assert_allclose(np.asarray(given, dtype=np.float64).reshape(-1, 4), wxyz(q), atol=1e-6)


@pytest.mark.parametrize("kind", ["warp", "warp_vec4f", "torch_slice"])
def test_world_writes_from_buffers_refilled_in_place(views, stage: Usd.Stage, device: str, kind: str) -> None:
    """A reset loop's wxyz buffers, the same objects refilled before each write (their layout known to the view
    after the first): every write reorders what they hold at that call, robots and cameras where the float64 model
    puts them."""
    if kind == "torch_slice" and device != "cpu":
        torch = pytest.importorskip("torch")
        if not torch.cuda.is_available():
            pytest.skip("torch has no CUDA here")
    model = PoseModel(stage, ROBOT_PATHS + CAMERA_PATHS)
    robots, cameras = views(ROBOTS, stage, "wxyz"), views(CAMERAS, stage)
    rows = [1, 4, 2]
    ids = wp.array(rows, dtype=wp.int32, device=device)
    pos = wp.zeros(len(rows), dtype=wp.vec3f, device=device)
    quats = as_input(kind, np.zeros((len(rows), 4)), device)
    rng = np.random.default_rng(13)
    for step in range(3):
        q, p = random_quats(rng, len(rows)), rng.uniform(-2.0, 2.0, size=(len(rows), 3))
        pos.assign(p.astype(np.float32))
        if isinstance(quats, wp.array):
            wp.copy(quats, as_input(kind, wxyz(q), device))
        else:
            quats.copy_(as_input(kind, wxyz(q), device))
        robots.set_world_poses(pos, quats, ids)
        model.set_world([ROBOT_PATHS[i] for i in rows], p=p, q=q)
        robots.check()
        for view, paths in ((robots, ROBOT_PATHS), (cameras, CAMERA_PATHS)):
            got_pos, got_quat = view.get_world_poses()
            expected_pos, expected_quat, _ = decompose_all(model.worlds(paths))
            np.testing.assert_allclose(got_pos.numpy(), expected_pos, atol=ATOL, err_msg=f"step {step}")
            if view is robots:
                assert_wxyz_output(got_quat, expected_quat)
            else:
                assert_quats_close(got_quat.numpy(), expected_quat, atol=ATOL)


def test_local_masked_writes_and_round_trip(views, stage: Usd.Stage, device: str) -> None:
    """A masked wxyz local write (N-row device data) matches the model; a wxyz view's own output written back
    (vec4f) changes nothing."""
    model = PoseModel(stage, ROBOT_PATHS + CAMERA_PATHS)
    robots = views(ROBOTS, stage, "wxyz")
    rng = np.random.default_rng(5)
    q = random_quats(rng, N)
    t = rng.uniform(-1.0, 1.0, size=(N, 3))
    mask = np.zeros(N, dtype=bool)
    mask[[0, 2, 5]] = True
    robots.set_local_poses(
        translations=wp.array(t.astype(np.float32), dtype=wp.vec3f, device=device),
        orientations=wp.array(wxyz(q).astype(np.float32), dtype=wp.float32, device=device),
        mask=wp.array(mask, dtype=wp.bool, device=device),
    )
    written = [p for p, m in zip(ROBOT_PATHS, mask, strict=True) if m]
    model.set_local(written, t=t[mask], q=q[mask])
    robots.check()
    _, quat = robots.get_local_poses()
    _, expected, _ = decompose_all(model.locals(ROBOT_PATHS))
    assert_wxyz_output(quat, expected)
    pos, quat = robots.get_world_poses()
    robots.set_world_poses(wp.clone(pos), wp.clone(quat))  # a vec4f wxyz array is accepted as it is
    robots.check()
    _, quat = robots.get_world_poses()
    assert_wxyz_output(quat, decompose_all(model.worlds(ROBOT_PATHS))[1])


def test_writer_scope_takes_and_returns_wxyz(views, stage: Usd.Stage) -> None:
    """``xform_world_space_writer().set_poses`` reads wxyz and its ``get_poses`` returns wxyz."""
    model = PoseModel(stage, ROBOT_PATHS + CAMERA_PATHS)
    robots = views(ROBOTS, stage, "wxyz")
    q = random_quats(np.random.default_rng(8), 2)
    with robots.xform_world_space_writer() as w:
        w.set_poses(orientations=wxyz(q).astype(np.float32), indices=[0, 3])
        _, quat = w.get_poses(indices=[0, 3])
        assert_wxyz_output(quat, q)
    model.set_world([ROBOT_PATHS[0], ROBOT_PATHS[3]], q=q)
    _, quat = views(ROBOTS, stage).get_world_poses()
    assert_quats_close(quat.numpy(), decompose_all(model.worlds(ROBOT_PATHS))[1], atol=ATOL)


def test_zero_quaternion_is_refused_in_both_orders(views, stage: Usd.Stage) -> None:
    """A zero quaternion is a ValueError naming orientations whatever the order (nothing written)."""
    robots = views(ROBOTS, stage, "wxyz")
    with pytest.raises(ValueError, match="orientations: row 1 holds a zero-norm quaternion"):
        robots.set_world_poses(orientations=[[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]], indices=[0, 1])


# ---------------------------------------------------------------- CameraPoses


@pytest.mark.parametrize("how", ["env_ids", "mask", "env_rows", "env_rows_mask"])
def test_camera_poses_follow_the_view_order(views, stage: Usd.Stage, device: str, how: str) -> None:
    """CameraPoses over a wxyz view returns the xyzw view's result reordered, in every convention and read path."""
    plain = fv.CameraPoses(views(CAMERAS, stage), env_rows=list(range(N)) if how.startswith("env_rows") else None)
    ordered = fv.CameraPoses(views(CAMERAS, stage, "wxyz"), env_rows=list(range(N)) if how.startswith("env_rows")
                             else None)  # fmt: skip
    mask = np.zeros(N, dtype=bool)
    mask[[1, 4]] = True
    for convention in fv.camera.CAMERA_CONVENTIONS:
        if how.endswith("mask"):
            m = wp.array(mask, dtype=wp.bool, device=device)
            _, expected = plain.read(convention=convention, mask=m)
            expected = expected.numpy()[mask].copy()
            _, got = ordered.read(convention=convention, mask=m)
            assert_wxyz_output(got, expected, rows=np.flatnonzero(mask))
        else:
            _, expected = plain.read([5, 0, 2], convention=convention)
            expected = expected.numpy().copy()
            _, got = ordered.read([5, 0, 2], convention=convention)
            assert_wxyz_output(got, expected)


def test_newton_mirror_between_orders(stage: Usd.Stage, device: str) -> None:
    """NewtonFrameView.mirror_to writes the same rotations into Fabric views of either order, from a view of either
    order."""
    from newton_helpers import contract_model

    model, state = contract_model(stage, device)
    truth = decompose_all(xform_cache_world(stage, CAMERA_PATHS))[1]
    for source_order in ("xyzw", "wxyz"):
        source = fv.NewtonFrameView(CAMERAS, stage=stage, model=model, state=state, quat_order=source_order)
        for target_order in ("xyzw", "wxyz"):
            with fv.FabricFrameView(CAMERAS, stage=stage, device=device, quat_order=target_order) as target:
                target.set_world_poses(orientations=np.tile([0.0, 0.0, 0.0, 1.0], (N, 1)))  # a unit quaternion
                source.mirror_to(target)
                _, quat = target.get_world_poses()
                got = quat.numpy() if target_order == "xyzw" else xyzw(quat.numpy())
                assert_quats_close(got, truth, atol=ATOL)
        source.close()


# ---------------------------------------------------------------- config


def test_quat_order_is_validated() -> None:
    """An unknown quat_order is a ValueError naming the field and both orders; a non-string a TypeError."""
    with pytest.raises(ValueError, match=r"FrameViewCfg.quat_order: expected 'xyzw' .* or 'wxyz'.*'WXYZ' \(lower"):
        fv.FrameViewCfg.from_dict({"prim_path": "/World", "quat_order": "WXYZ"})
    with pytest.raises(TypeError, match=r"PhysicsViewCfg\.quat_order: expected 'xyzw' or 'wxyz', got int"):
        fv.PhysicsViewCfg(prim_path="/World", quat_order=0).validate()  # type: ignore[arg-type]
    stage = build_env_stage(1, seed=0)
    with pytest.raises(ValueError, match="quat_order: expected 'xyzw'"):
        fv.UsdFrameView(ROBOTS, stage=stage, quat_order="zyxw")
    with pytest.raises(ValueError, match="quat_order: expected 'xyzw'"):
        fv.FabricFrameView(ROBOTS, stage=stage, quat_order="zyxw")
    assert "quat_order='wxyz'" in repr(fv.UsdFrameView(ROBOTS, stage=stage, quat_order="wxyz"))


def test_the_default_order_adds_nothing(views, stage: Usd.Stage) -> None:
    """A view with the default order holds no reordering part: its calls take no extra launch or buffer."""
    plain = views(ROBOTS, stage)
    assert plain.quat_order == "xyzw"
    assert plain._quat_order_part is None and plain._args.quat_order is None
    cfg = dataclasses.replace(fv.FrameViewCfg(prim_path=ROBOTS), quat_order="wxyz")
    assert cfg.to_dict()["quat_order"] == "wxyz"


# ---------------------------------------------------------------- physics views


def newton_scene(device: str):
    """Two one-link robots on free joints and a free ball, each at a random orientation; returns (model, state)."""
    newton = pytest.importorskip("newton")
    builder = newton.ModelBuilder()
    rng = np.random.default_rng(2)
    for env, q in enumerate(random_quats(rng, 2)):
        root = f"/World/envs/env_{env}/Robot"
        base = builder.add_link(xform=wp.transform((float(env), 0.0, 1.0), wp.quat(*q)), mass=1.0,
                                label=f"{root}/base")  # fmt: skip
        builder.add_shape_box(base, hx=0.1, hy=0.1, hz=0.1)
        arm = builder.add_link(mass=0.5, label=f"{root}/arm")
        builder.add_shape_capsule(arm, radius=0.04, half_height=0.08)
        free = builder.add_joint_free(base, label=f"{root}/root_joint")
        hinge = builder.add_joint_revolute(base, arm, parent_xform=wp.transform((0.0, 0.0, 0.2), wp.quat(*q)),
                                           axis=(0.0, 1.0, 0.0), label=f"{root}/joint")  # fmt: skip
        joints = [free, hinge]
        builder.add_articulation(joints, label=root)
    q = random_quats(rng, 1)[0]
    ball = builder.add_body(xform=wp.transform((0.0, 5.0, 3.0), wp.quat(*q)), mass=2.0, label="/World/Ball")
    builder.add_shape_sphere(ball, radius=0.1)
    model = builder.finalize(device=device)
    state = model.state()
    newton.eval_fk(model, state.joint_q, state.joint_qd, state)
    return model, state


def test_physics_views_return_wxyz(device: str) -> None:
    """Newton rigid-body and articulation views made with quat_order='wxyz' (constructor and PhysicsViewCfg) return
    Newton's body_q rotations as (w, x, y, z), root and links, all rows and masked."""
    model, state = newton_scene(device)
    body_q = state.body_q.numpy().astype(np.float64)
    label = {name: i for i, name in enumerate(model.body_label)}
    bodies = fv.NewtonRigidBodyView("/World/Ball", model=model, state=state, quat_order="wxyz")
    assert bodies.quat_order == "wxyz"
    pos, quat = bodies.get_world_poses()
    np.testing.assert_allclose(pos.numpy(), body_q[[label["/World/Ball"]], :3], atol=ATOL)
    assert_wxyz_output(quat, body_q[[label["/World/Ball"]], 3:])
    cfg = fv.PhysicsViewCfg(prim_path="/World/envs/env_.*/Robot", quat_order="wxyz")
    robots = fv.make_articulation_view(cfg, model=model, state=state)
    links = [[label[f"/World/envs/env_{e}/Robot/{n}"] for n in robots.link_names] for e in range(2)]
    _, quat = robots.get_root_poses()
    assert_wxyz_output(quat, body_q[[row[0] for row in links], 3:])
    _, quat = robots.get_link_poses()
    assert quat.dtype == wp.vec4f and quat.shape == (2, len(robots.link_names))
    assert_wxyz_output(quat.reshape((-1,)), body_q[np.ravel(links), 3:])
    _, quat = robots.get_root_poses(mask=np.array([False, True]))
    assert_wxyz_output(quat, body_q[[links[1][0]], 3:], rows=np.array([1]))
    plain = fv.NewtonArticulationView("/World/envs/env_.*/Robot", model=model, state=state)
    _, quat = plain.get_root_poses()
    assert quat.dtype == wp.quatf
    assert_quats_close(quat.numpy(), body_q[[row[0] for row in links], 3:], atol=ATOL)


@pytest.mark.parametrize("kind", ["numpy", "warp", "torch"])
def test_physics_reset_writes_take_wxyz(device: str, kind: str) -> None:
    """A wxyz articulation view's set_root_poses reads (w, x, y, z): the roots land at the rotations Newton's body_q
    then holds (xyzw), as an xyzw view writing the same rotations puts them."""
    if kind == "torch" and device != "cpu":
        torch = pytest.importorskip("torch")
        if not torch.cuda.is_available():
            pytest.skip("torch has no CUDA here")
    newton = pytest.importorskip("newton")
    model, state = newton_scene(device)
    label = {name: i for i, name in enumerate(model.body_label)}
    roots = [label[f"/World/envs/env_{e}/Robot/base"] for e in range(2)]
    robots = fv.NewtonArticulationView("/World/envs/env_.*/Robot", model=model, state=state, quat_order="wxyz")
    q = random_quats(np.random.default_rng(9), 2)
    data = as_input(kind, wxyz(q), device)
    robots.set_root_poses(np.array([[0.0, 0.0, 2.0], [1.0, 0.0, 2.0]], np.float32), data)
    robots.check()
    newton.eval_fk(model, state.joint_q, state.joint_qd, state)
    assert_quats_close(state.body_q.numpy()[roots, 3:].astype(np.float64), q, atol=ATOL)
    _, quat = robots.get_root_poses()
    assert_wxyz_output(quat, q)

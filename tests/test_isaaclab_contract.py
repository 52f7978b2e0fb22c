# SPDX-License-Identifier: Apache-2.0
"""Isaac Lab 3's FrameView contract, run against every frameview backend (usd, fabric:memory, fabric:ovstage, the
usdrt stand-in) and device.

Written from Isaac Lab 3's public API and documented behaviour (``isaaclab.sim.views``: ``BaseFrameView`` and the
writer scopes of ``xform_space_writer.py``), not from its code: Isaac Lab's scene (parents ``/World/Parent_i`` at
(0, 0, 1), a child at (0.1, 0, 0.05) under each, the view ``/World/Parent_[^/]*/Child``), its inputs (``wp.vec3f``
positions, ``wp.vec4f`` xyzw quaternions, ``wp.int32`` / ``wp.uint32`` indices on the device) and its API
(``xform_world_space_writer`` / ``xform_local_space_writer`` with ``set_poses`` / ``set_scales`` / ``get_poses`` /
``get_scales``, ``set_world_scales``, ``get_scales`` / ``set_scales``).

Truth: pxr ``UsdGeom.XformCache`` for the initial state and float64 NumPy / Gf (tests/helpers.py) for what writes
must give; parents are read raw (XformCache for USD, Fabric's own storage for the Fabric providers), never through
frameview.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import warp as wp
from backends import BACKENDS
from helpers import assert_quats_close, assert_w_nonnegative, compose, decompose_all
from pxr import Gf, Usd, UsdGeom

import frameview as fv

PARENT_POS = (0.0, 0.0, 1.0)
CHILD_OFFSET = (0.1, 0.0, 0.05)
PATTERN = "/World/Parent_[^/]*/Child"
ATOL = 1e-5
IDENTITY_Q = (0.0, 0.0, 0.0, 1.0)
YAW_90 = (0.0, 0.0, float(np.sqrt(0.5)), float(np.sqrt(0.5)))
ROLL_90 = (float(np.sqrt(0.5)), 0.0, 0.0, float(np.sqrt(0.5)))
WORLD_MATRIX = "omni:fabric:worldMatrix"


# ---------------------------------------------------------------- the scene and the backends


def isaaclab_stage(num_envs: int, parent_scale: tuple[float, float, float] | None = None) -> Usd.Stage:
    """Isaac Lab's contract scene: ``/World/Parent_i`` at PARENT_POS (optionally scaled), ``Child`` at CHILD_OFFSET."""
    stage = Usd.Stage.CreateInMemory()
    UsdGeom.Xform.Define(stage, "/World")
    for i in range(num_envs):
        parent = UsdGeom.Xform.Define(stage, f"/World/Parent_{i}")
        parent.AddTranslateOp().Set(Gf.Vec3d(*PARENT_POS))
        if parent_scale is not None:
            parent.AddScaleOp().Set(Gf.Vec3d(*parent_scale))
        UsdGeom.Xform.Define(stage, f"/World/Parent_{i}/Child").AddTranslateOp().Set(Gf.Vec3d(*CHILD_OFFSET))
    return stage


def xform_world(stage: Usd.Stage, paths: list[str]) -> np.ndarray:
    """(N, 4, 4) float64 world matrices from pxr (independent of frameview)."""
    cache = UsdGeom.XformCache(Usd.TimeCode.Default())
    return np.array([np.array(cache.GetLocalToWorldTransform(stage.GetPrimAtPath(p))) for p in paths])


@dataclass
class Scene:
    """A view over Isaac Lab's scene on one backend, and a raw read of the parents' world matrices."""

    stage: Usd.Stage
    view: fv.BaseFrameView
    parent_paths: list[str]
    parent_world: Callable[[], np.ndarray]
    """(N, 4, 4) float64 world matrices of the parents as the backend stores them, read without frameview."""
    parent_view: Callable[[], fv.BaseFrameView]
    """A second view of the same backend over the parents (closed at teardown)."""

    @property
    def parent_truth(self) -> np.ndarray:
        """The parents' initial world matrices (pxr XformCache): writes to the children never change them."""
        return xform_world(self.stage, self.parent_paths)


@pytest.fixture(params=[pytest.param(name, id=name) for name in ("usd", "fabric", "ovstage", "usdrt", "newton")])
def backend(request: pytest.FixtureRequest) -> str:
    """The backend under test (a key of tests/backends.py's BACKENDS)."""
    return request.param


@pytest.fixture
def standin(backend: str, device: str) -> Iterator[Any]:
    """For the usdrt backend: the CI stand-in for Kit's usdrt installed for the test (yields its runtime)."""
    if backend != "usdrt":
        yield None
        return
    from fakes.usdrt_standin import installed

    with installed(device, shuffle_seed=0) as runtime:
        yield runtime


@pytest.fixture
def make_scene(backend: str, device: str, standin: Any) -> Iterator[Callable[..., Scene]]:
    """``make_scene(num_envs, parent_scale=None, pattern=PATTERN)``: Isaac Lab's scene viewed by the backend under
    test on the device under test; views are closed at teardown."""
    views: list[fv.BaseFrameView] = []
    stages: list[Usd.Stage] = []

    def factory(num_envs: int, parent_scale: tuple[float, float, float] | None = None, pattern: Any = PATTERN) -> Scene:
        stage = isaaclab_stage(num_envs, parent_scale)
        stages.append(stage)  # the Fabric models live as long as their pxr stage: keep it for the test
        make = _newton_view if backend == "newton" else BACKENDS[backend]
        view = make(pattern, stage, device)
        views.append(view)
        parents = [f"/World/Parent_{i}" for i in range(num_envs)]

        def parent_view() -> fv.BaseFrameView:
            views.append(make(parents, stage, device))
            return views[-1]

        return Scene(stage, view, parents, _raw_parent_reader(backend, stage, view, parents, standin), parent_view)

    yield factory
    for view in views:
        view.close()


def _newton_view(prim_path: Any, stage: Usd.Stage, device: str) -> fv.BaseFrameView:
    """A NewtonFrameView of Isaac Lab's scene: ``/World`` is a Newton body at the identity (Isaac Lab's envs ride on
    bodies), so parents and children are frames on it and a write through the parents' view carries the children."""
    newton = pytest.importorskip("newton", reason="the newton extra is not installed")
    from pxr import UsdPhysics

    key = (id(stage), device)
    if key not in _NEWTON_MODELS:
        UsdPhysics.RigidBodyAPI.Apply(stage.GetPrimAtPath("/World"))
        builder = newton.ModelBuilder()
        builder.add_body(xform=wp.transform_identity(), label="/World")
        model = builder.finalize(device=device)
        _NEWTON_MODELS.clear()  # one scene at a time; the stage is kept alive beside its model
        _NEWTON_MODELS[key] = (stage, model, model.state())
    _stage, model, state = _NEWTON_MODELS[key]
    return fv.NewtonFrameView(prim_path, stage=stage, model=model, state=state)


_NEWTON_MODELS: dict[tuple[int, str], tuple[Usd.Stage, Any, Any]] = {}


def _raw_parent_reader(
    backend: str, stage: Usd.Stage, view: fv.BaseFrameView, parents: list[str], standin: Any
) -> Callable[[], np.ndarray]:
    if backend == "newton":  # the body stays at the identity: a parent's world matrix is its frame's, as a view of
        # the parents reads it (a fresh view each time: nothing cached by the view under test)

        def read_frames() -> np.ndarray:
            with _newton_view(parents, stage, view.device) as frames:
                pos, quat = (a.numpy() for a in frames.get_world_poses())
                scale = frames.get_world_scales().numpy()
            return np.array([compose(p, q, s) for p, q, s in zip(pos, quat, scale, strict=True)])

        return read_frames
    if backend == "usd":
        return lambda: xform_world(stage, parents)
    if backend == "ovstage":
        from ovstage_helpers import ovstage_for, read_matrices

        return lambda: read_matrices(ovstage_for(stage), parents, WORLD_MATRIX)
    if backend == "usdrt":

        def read_standin() -> np.ndarray:
            (store,) = standin.stores.values()
            return np.array([np.array(store.get(p, WORLD_MATRIX)) for p in parents], dtype=np.float64)

        return read_standin
    model = view.fabric_stage  # the embedded Fabric model: its own float64 storage

    def read_memory() -> np.ndarray:
        pids = np.array([model._pid_of[p] for p in parents])
        return np.asarray(model._read_matrices(pids, WORLD_MATRIX), dtype=np.float64).reshape(-1, 4, 4)

    return read_memory


# ---------------------------------------------------------------- inputs as Isaac Lab passes them


def vec3f(rows: Any, device: str) -> wp.array:
    return wp.array(
        [wp.vec3f(*map(float, r)) for r in np.asarray(rows, dtype=np.float64)], dtype=wp.vec3f, device=device
    )


def vec4f(rows: Any, device: str) -> wp.array:
    return wp.array(
        [wp.vec4f(*map(float, r)) for r in np.asarray(rows, dtype=np.float64)], dtype=wp.vec4f, device=device
    )


def idx(values: list[int], device: str, dtype: Any = wp.int32) -> wp.array:
    return wp.array(values, dtype=dtype, device=device)


def f32(values: Any) -> np.ndarray:
    """Round to float32 and back: exactly what the view stores of a written value."""
    return np.asarray(values, dtype=np.float32).astype(np.float64)


def world_poses(view: fv.BaseFrameView) -> tuple[np.ndarray, np.ndarray]:
    pos, quat = view.get_world_poses()
    return pos.numpy().astype(np.float64), quat.numpy().astype(np.float64)


def local_poses(view: fv.BaseFrameView) -> tuple[np.ndarray, np.ndarray]:
    pos, quat = view.get_local_poses()
    return pos.numpy().astype(np.float64), quat.numpy().astype(np.float64)


def local_from_world(world: np.ndarray, parent_world: np.ndarray) -> np.ndarray:
    """Local matrices (float64): ``world @ inverse(parent_world)`` (row-vector)."""
    return np.array([w @ np.linalg.inv(p) for w, p in zip(world, parent_world, strict=True)])


def assert_parents_untouched(scene: Scene) -> None:
    """The parents' stored world matrices still equal their initial XformCache truth, bit for bit (up to the
    float64 storage of the provider)."""
    if isinstance(scene.view, fv.NewtonFrameView):  # float32 offsets on a float32 body pose
        np.testing.assert_allclose(scene.parent_world(), scene.parent_truth, atol=ATOL)
        return
    np.testing.assert_array_equal(scene.parent_world(), scene.parent_truth)


# ---------------------------------------------------------------- getters


def test_world_pose_is_parent_plus_offset(make_scene: Callable[..., Scene]) -> None:
    """World poses equal the parent's world position plus the child's offset, orientation identity (XformCache)."""
    scene = make_scene(4)
    truth = xform_world(scene.stage, list(scene.view.prim_paths))
    pos, quat, _scale = decompose_all(truth)
    np.testing.assert_allclose(pos, np.tile(np.add(PARENT_POS, CHILD_OFFSET), (4, 1)), atol=1e-12)
    got_pos, got_quat = world_poses(scene.view)
    np.testing.assert_allclose(got_pos, pos, atol=ATOL)
    assert_quats_close(got_quat, quat, atol=ATOL)


def test_local_pose_is_the_offset(make_scene: Callable[..., Scene]) -> None:
    """Local poses equal the authored offset and differ from the world ones by the parent's position."""
    scene = make_scene(4)
    pos, quat = local_poses(scene.view)
    np.testing.assert_allclose(pos, np.tile(CHILD_OFFSET, (4, 1)), atol=ATOL)
    np.testing.assert_allclose(quat, np.tile(IDENTITY_Q, (4, 1)), atol=ATOL)
    world_pos, _ = world_poses(scene.view)
    assert np.abs(world_pos - pos).max() > 0.5


@pytest.mark.parametrize("index_dtype", [wp.int32, wp.uint32], ids=["int32", "uint32"])
def test_indexed_reads_are_exact_copies(make_scene: Callable[..., Scene], device: str, index_dtype: Any) -> None:
    """Out-of-order wp.int32 / wp.uint32 indices on the view's device read exactly the rows of a full read."""
    scene = make_scene(5)
    view = scene.view
    with view.xform_local_space_writer() as w:  # distinct rows, so that a wrong row shows
        w.set_poses(vec3f(np.arange(15).reshape(5, 3) * 0.1, device))
    order = [4, 1, 3]
    for getter in (view.get_world_poses, view.get_local_poses):
        full = [a.numpy().copy() for a in getter()]
        sub = [a.numpy() for a in getter(idx(order, device, index_dtype))]
        for a, b in zip(full, sub, strict=True):
            np.testing.assert_array_equal(b, a[order])
    for getter in (view.get_world_scales, view.get_local_scales, view.get_scales):
        np.testing.assert_array_equal(getter(idx(order, device, index_dtype)).numpy(), getter().numpy()[order])


def test_default_scales_are_one(make_scene: Callable[..., Scene]) -> None:
    """Prims without a scale op read (1, 1, 1) as local, world and get_scales scales."""
    view = make_scene(3).view
    for scales in (view.get_local_scales(), view.get_world_scales(), view.get_scales()):
        np.testing.assert_allclose(scales.numpy(), np.ones((3, 3)), atol=ATOL)
    with view.xform_world_space_writer() as w:
        np.testing.assert_allclose(w.get_scales().numpy(), np.ones((3, 3)), atol=ATOL)


# ---------------------------------------------------------------- writer round trips


def test_world_writer_round_trip(make_scene: Callable[..., Scene], device: str) -> None:
    """World writes (wp.vec3f, wp.vec4f) read back in the scope and after it; local = world under the parent; the
    parents do not move."""
    scene = make_scene(2)
    view = scene.view
    pos = [[10.0, 20.0, 30.0], [40.0, 50.0, 60.0]]
    quat = [YAW_90, IDENTITY_Q]
    with view.xform_world_space_writer() as w:
        w.set_poses(vec3f(pos, device), vec4f(quat, device))
        in_pos, in_quat = (a.numpy() for a in w.get_poses())
        np.testing.assert_allclose(in_pos, pos, atol=ATOL)
        assert_quats_close(in_quat, np.array(quat), atol=ATOL)
    got_pos, got_quat = world_poses(view)
    np.testing.assert_allclose(got_pos, pos, atol=ATOL)
    assert_quats_close(got_quat, np.array(quat), atol=ATOL)
    assert_w_nonnegative(got_quat)
    expected = local_from_world(
        np.array([compose(p, q, (1, 1, 1)) for p, q in zip(f32(pos), f32(quat), strict=True)]), scene.parent_truth
    )
    lpos, lquat, _ = decompose_all(expected)
    got_lpos, got_lquat = local_poses(view)
    np.testing.assert_allclose(got_lpos, lpos, atol=ATOL)
    assert_quats_close(got_lquat, lquat, atol=ATOL)
    assert_parents_untouched(scene)


def test_local_writer_round_trip(make_scene: Callable[..., Scene], device: str) -> None:
    """Local writes read back in the scope and after it; world = local under the parent; the parents do not move."""
    scene = make_scene(2)
    view = scene.view
    pos = [[0.4, 0.9, 0.15], [0.6, 0.2, 0.85]]
    quat = [IDENTITY_Q, ROLL_90]
    with view.xform_local_space_writer() as w:
        w.set_poses(vec3f(pos, device), vec4f(quat, device))
        np.testing.assert_allclose(w.get_poses()[0].numpy(), pos, atol=ATOL)
    got_lpos, got_lquat = local_poses(view)
    np.testing.assert_allclose(got_lpos, pos, atol=ATOL)
    assert_quats_close(got_lquat, np.array(quat), atol=ATOL)
    world = np.array([compose(p, q, (1, 1, 1)) for p, q in zip(f32(pos), f32(quat), strict=True)])
    world = np.array([m @ p for m, p in zip(world, scene.parent_truth, strict=True)])
    wpos, wquat, _ = decompose_all(world)
    got_wpos, got_wquat = world_poses(view)
    np.testing.assert_allclose(got_wpos, wpos, atol=ATOL)
    assert_quats_close(got_wquat, wquat, atol=ATOL)
    assert_parents_untouched(scene)


@pytest.mark.parametrize("space", ["world", "local"])
def test_positions_only_keeps_orientations(make_scene: Callable[..., Scene], device: str, space: str) -> None:
    """set_poses(positions=...) writes positions and keeps the orientations of that space."""
    view = make_scene(2).view
    with getattr(view, f"xform_{space}_space_writer")() as w:
        w.set_poses(orientations=vec4f([YAW_90, ROLL_90], device))
    _, before = (a.numpy().copy() for a in getattr(view, f"get_{space}_poses")())
    pos = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    with getattr(view, f"xform_{space}_space_writer")() as w:
        w.set_poses(positions=vec3f(pos, device))
    got_pos, got_quat = (a.numpy() for a in getattr(view, f"get_{space}_poses")())
    np.testing.assert_allclose(got_pos, pos, atol=ATOL)
    assert_quats_close(got_quat, before, atol=ATOL)


@pytest.mark.parametrize("space", ["world", "local"])
def test_orientations_only_keeps_positions(make_scene: Callable[..., Scene], device: str, space: str) -> None:
    """set_poses(orientations=...) writes orientations and keeps the positions of that space."""
    view = make_scene(2).view
    before, _ = (a.numpy().copy() for a in getattr(view, f"get_{space}_poses")())
    quat = [YAW_90, ROLL_90]
    with getattr(view, f"xform_{space}_space_writer")() as w:
        w.set_poses(orientations=vec4f(quat, device))
    got_pos, got_quat = (a.numpy() for a in getattr(view, f"get_{space}_poses")())
    np.testing.assert_allclose(got_pos, before, atol=ATOL)
    assert_quats_close(got_quat, np.array(quat), atol=ATOL)


@pytest.mark.parametrize("index_dtype", [wp.int32, wp.uint32], ids=["int32", "uint32"])
@pytest.mark.parametrize("space", ["world", "local"])
def test_indexed_writes_leave_other_rows_untouched(
    make_scene: Callable[..., Scene], device: str, space: str, index_dtype: Any
) -> None:
    """A write with device indices [3, 1] writes those rows and leaves the others bit-identical in both spaces."""
    scene = make_scene(4)
    view = scene.view
    before = [a.numpy().copy() for a in (*view.get_world_poses(), *view.get_local_poses())]
    pos = [[10.0, 20.0, 30.0], [40.0, 50.0, 60.0]]
    with getattr(view, f"xform_{space}_space_writer")() as w:
        w.set_poses(vec3f(pos, device), vec4f([YAW_90, ROLL_90], device), indices=idx([3, 1], device, index_dtype))
    after = [a.numpy() for a in (*view.get_world_poses(), *view.get_local_poses())]
    for b, a in zip(before, after, strict=True):
        np.testing.assert_array_equal(a[[0, 2]], b[[0, 2]])
    got_pos = getattr(view, f"get_{space}_poses")()[0].numpy()
    np.testing.assert_allclose(got_pos[[3, 1]], pos, atol=ATOL)
    assert_parents_untouched(scene)


@pytest.mark.parametrize("quat_form", ["vec4f", "float_array", "torch"])
def test_quaternion_inputs_as_isaaclab_passes_them(
    make_scene: Callable[..., Scene], device: str, quat_form: str
) -> None:
    """xyzw quaternions as wp.vec4f arrays, (M, 4) float arrays or torch tensors all write the same rotation."""
    view = make_scene(2).view
    quat = np.array([YAW_90, ROLL_90], dtype=np.float32)
    if quat_form == "vec4f":
        value: Any = vec4f(quat, device)
    elif quat_form == "float_array":
        value = wp.array(quat, dtype=wp.float32, device=device)
    else:
        torch = pytest.importorskip("torch")
        value = torch.tensor(quat, device="cuda" if device.startswith("cuda") else "cpu")
    with view.xform_world_space_writer() as w:
        w.set_poses(orientations=value)
    assert_quats_close(view.get_world_poses()[1].numpy(), quat.astype(np.float64), atol=ATOL)


# ---------------------------------------------------------------- scales


@pytest.mark.parametrize("space", ["world", "local"])
def test_scale_round_trip(make_scene: Callable[..., Scene], device: str, space: str) -> None:
    """set_scales in either space reads back in that space; poses are kept; the parents do not move."""
    scene = make_scene(2)
    view = scene.view
    before = [a.numpy().copy() for a in (*view.get_world_poses(), *view.get_local_poses())]
    scales = [[2.0, 3.0, 4.0], [0.5, 1.5, 2.5]]
    with getattr(view, f"xform_{space}_space_writer")() as w:
        w.set_scales(vec3f(scales, device))
        np.testing.assert_allclose(w.get_scales().numpy(), scales, atol=ATOL)
    np.testing.assert_allclose(getattr(view, f"get_{space}_scales")().numpy(), scales, atol=ATOL)
    np.testing.assert_allclose(view.get_world_scales().numpy(), scales, atol=ATOL)  # unit parents: world = local
    after = [a.numpy() for a in (*view.get_world_poses(), *view.get_local_poses())]
    for b, a in zip(before, after, strict=True):
        np.testing.assert_allclose(a, b, atol=ATOL)
    assert_parents_untouched(scene)


def test_set_world_scales_and_aliases(make_scene: Callable[..., Scene], device: str) -> None:
    """view.set_world_scales reads back as world scales; get_scales / set_scales are the local ones."""
    view = make_scene(2).view
    view.set_world_scales(vec3f([[2.0, 3.0, 4.0], [0.5, 1.5, 2.5]], device))
    np.testing.assert_allclose(view.get_world_scales().numpy(), [[2.0, 3.0, 4.0], [0.5, 1.5, 2.5]], atol=ATOL)
    view.set_scales(np.array([[1.0, 2.0, 3.0]], dtype=np.float32), indices=idx([1], device))
    np.testing.assert_allclose(view.get_scales().numpy(), [[2.0, 3.0, 4.0], [1.0, 2.0, 3.0]], atol=ATOL)
    np.testing.assert_array_equal(view.get_scales().numpy(), view.get_local_scales().numpy())


@pytest.mark.parametrize(
    "parent_scale", [(2.0, 1.0, 1.0), (2.0, 2.0, 2.0), (-2.0, 2.0, 2.0)], ids=["nonuniform", "uniform", "mirror"]
)
def test_world_scales_under_scaled_parents(make_scene: Callable[..., Scene], device: str, parent_scale: Any) -> None:
    """Under a scaled parent, a world scale gives local = world / parent per axis (Isaac Lab's rule; exact for these
    parents: similarity, or non-uniform with an unrotated child), the world scale reads back, the local scale composes
    to the world one (truth: float64 matrices)."""
    scene = make_scene(1, parent_scale=parent_scale)
    view = scene.view
    world_scale = np.array([[6.0, 1.0, 1.0]])
    with view.xform_world_space_writer() as w:
        w.set_scales(vec3f(world_scale, device))
    parent = scene.parent_truth
    _, _, ps = decompose_all(parent)  # the mirror on x
    np.testing.assert_allclose(view.get_local_scales().numpy(), world_scale / ps, atol=ATOL)
    np.testing.assert_allclose(view.get_world_scales().numpy(), world_scale, atol=ATOL)
    lpos, lquat = local_poses(view)
    world = compose(lpos[0], lquat[0], view.get_local_scales().numpy()[0].astype(np.float64)) @ parent[0]
    np.testing.assert_allclose(decompose_all(world[None])[2], world_scale, atol=ATOL)
    with view.xform_local_space_writer() as w:  # and the other way: a local scale composes with the parent's
        w.set_scales(vec3f([[3.0, 1.0, 1.0]], device))
    np.testing.assert_allclose(view.get_world_scales().numpy(), decompose_all(compose(
        CHILD_OFFSET, IDENTITY_Q, (3.0, 1.0, 1.0))[None] @ parent)[2], atol=ATOL)  # fmt: skip
    assert_parents_untouched(scene)


def test_poses_and_scales_together(make_scene: Callable[..., Scene], device: str, backend: str) -> None:
    """Poses and scales written in one world scope give the world matrix compose(pos, quat, scale): in one write,
    or in two where the writes are kept apart (:func:`_writes_apart`)."""
    scene = make_scene(3)
    view = scene.view
    calls = _count_backend_writes(view)
    pos, quat, scale = [[1.0, 2.0, 3.0]] * 3, [YAW_90] * 3, [[2.0, 2.0, 2.0], [1.0, 3.0, 1.0], [0.5, 0.5, 4.0]]
    with view.xform_world_space_writer() as w:
        w.set_poses(vec3f(pos, device), vec4f(quat, device))
        w.set_scales(vec3f(scale, device))
    assert calls == [2 if _writes_apart(device, backend) else 1]
    world = np.array([compose(p, q, s) for p, q, s in zip(f32(pos), f32(quat), f32(scale), strict=True)])
    wpos, wquat, wscale = decompose_all(world)
    got_pos, got_quat = world_poses(view)
    np.testing.assert_allclose(got_pos, wpos, atol=ATOL)
    assert_quats_close(got_quat, wquat, atol=ATOL)
    np.testing.assert_allclose(view.get_world_scales().numpy(), wscale, atol=ATOL)
    lpos, _, lscale = decompose_all(local_from_world(world, scene.parent_truth))
    np.testing.assert_allclose(local_poses(view)[0], lpos, atol=ATOL)
    np.testing.assert_allclose(view.get_local_scales().numpy(), lscale, atol=ATOL)
    assert_parents_untouched(scene)


FABRIC_BACKENDS = ("fabric", "ovstage", "usdrt")


def _writes_apart(device: str, backend: str) -> bool:
    """Whether a scope's writes to the same rows are backend writes of their own: on Fabric views (no view prim
    below another: each write is made at its call), and for CUDA device data on device-row backends (only the
    kernels can check it: a rejected write must not take the other down)."""
    return backend in FABRIC_BACKENDS or (device.startswith("cuda") and backend != "usd")


def _count_backend_writes(view: fv.BaseFrameView) -> list[int]:
    """Wrap the backend's combined write (both built-in backends have one) and count its calls in ``calls[0]``."""
    calls = [0]
    inner = view._write  # type: ignore[attr-defined]

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return inner(*args, **kwargs)

    view._write = counted  # type: ignore[attr-defined]
    return calls


def test_writes_to_other_rows_flush_in_order(make_scene: Callable[..., Scene], device: str) -> None:
    """Writes to different rows in one scope all land, the later winning where they overlap."""
    view = make_scene(4).view
    with view.xform_local_space_writer() as w:
        w.set_poses(vec3f([[1.0, 0.0, 0.0]] * 4, device))
        w.set_poses(vec3f([[2.0, 0.0, 0.0], [3.0, 0.0, 0.0]], device), indices=[2, 0])
        w.set_scales(vec3f([[5.0, 5.0, 5.0]], device), indices=idx([3], device))
    np.testing.assert_allclose(local_poses(view)[0][:, 0], [3.0, 1.0, 2.0, 1.0], atol=ATOL)
    np.testing.assert_allclose(view.get_local_scales().numpy()[:, 0], [1.0, 1.0, 1.0, 5.0], atol=ATOL)


def test_writer_copies_the_callers_buffers(make_scene: Callable[..., Scene], device: str) -> None:
    """A buffer reused after a write inside the scope does not change what was written (the writer copies it)."""
    view = make_scene(2).view
    buf = vec3f([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], device)
    host = np.array([0, 1], dtype=np.int64)
    with view.xform_world_space_writer() as w:
        w.set_poses(positions=buf, indices=host)
        buf.fill_(0.0)
        host[:] = [1, 0]
        w.set_poses(orientations=vec4f([YAW_90, YAW_90], device), indices=[0, 1])
    np.testing.assert_allclose(world_poses(view)[0], [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], atol=ATOL)


@pytest.mark.parametrize("space", ["world", "local"])
@pytest.mark.parametrize("rows", ["all", "list", "device", "int64", "mask"])
@pytest.mark.parametrize("moved_by", ["view", "usd", "nothing"])
def test_prims_stay_where_the_scope_put_them_when_the_stage_changes_inside_it(
    make_scene: Callable[..., Scene], device: str, backend: str, space: str, rows: str, moved_by: str
) -> None:
    """Inside a scope, after its write, the caller refills its buffers, then the parents move (through another view
    of the backend, or by a USD edit that the backend follows, which also edits the written prims' own
    translations). On exit each written prim holds the value written in the scope's space, solved against the
    parents as they are then; the others keep their local pose and follow their parent. (Fabric views write at the
    call and, when the stage changed since, write their copy again at exit: two backend writes, one otherwise.)
    Truth: float64 math from the values written and the parents' stored world matrices."""
    if moved_by == "usd" and backend not in ("usd", "fabric"):
        pytest.skip("ovstage, usdrt and newton views do not follow USD edits made after the view was built")
    n = 4
    scene = make_scene(n)
    view = scene.view
    parents = scene.parent_view() if moved_by == "view" else None
    rng = np.random.default_rng(11)
    chosen = {"all": list(range(n)), "list": [3, 1], "device": [2, 0, 3], "int64": [1, 2], "mask": [0, 2, 3]}[rows]
    m = n if rows in ("all", "mask") else len(chosen)
    pos = rng.uniform(-2.0, 2.0, (m, 3))
    quat = rng.normal(size=(m, 4))
    quat /= np.linalg.norm(quat, axis=1, keepdims=True)
    select: dict[str, Any] = {
        "all": {}, "list": {"indices": chosen}, "device": {"indices": idx(chosen, device)},
        "int64": {"indices": idx(chosen, device, wp.int64)},
        "mask": {"mask": wp.array([k in chosen for k in range(n)], dtype=wp.bool, device=device)},
    }[rows]  # fmt: skip
    data_rows = chosen if rows in ("list", "device", "int64") else list(range(n))
    local_before = local_poses(view)
    pos_buf, quat_buf = vec3f(pos, device), vec4f(quat, device)
    calls = _count_backend_writes(view)
    writer = view.xform_world_space_writer() if space == "world" else view.xform_local_space_writer()
    with writer as w:
        w.set_poses(pos_buf, quat_buf, **select)
        pos_buf.fill_(wp.vec3f(9.0, 9.0, 9.0))  # the caller's buffers reused: the scope wrote (and keeps) a copy
        quat_buf.zero_()
        if moved_by == "view":
            assert parents is not None
            moved = rng.uniform(-3.0, 3.0, (n, 3))
            parents.set_world_poses(vec3f(moved, device), vec4f(np.tile(YAW_90, (n, 1)), device))
        elif moved_by == "usd":
            for k in range(n):
                ops = UsdGeom.Xformable(scene.stage.GetPrimAtPath(scene.parent_paths[k])).GetOrderedXformOps()
                ops[0].Set(Gf.Vec3d(1.0 + k, -2.0, 0.5))
                child = UsdGeom.Xformable(scene.stage.GetPrimAtPath(scene.parent_paths[k] + "/Child"))
                child.GetOrderedXformOps()[0].Set(Gf.Vec3d(0.0, 0.0, 7.0))
    if backend in FABRIC_BACKENDS:
        assert calls == [1 if moved_by == "nothing" else 2]
    parent_now = scene.parent_world()
    if moved_by == "nothing":
        np.testing.assert_array_equal(parent_now, scene.parent_truth)
    wpos, wquat = world_poses(view)
    lpos, lquat = local_poses(view)
    got_pos, got_quat = (wpos, wquat) if space == "world" else (lpos, lquat)
    for k in range(n):
        if k in chosen:
            r = data_rows.index(k)
            np.testing.assert_allclose(got_pos[k], f32(pos[r]), atol=ATOL)
            assert_quats_close(got_quat[k][None], f32(quat[r])[None], atol=ATOL)
            continue
        # not written: the local pose kept (the USD edit of the children's translation reaches them), world follows
        expect_local = (0.0, 0.0, 7.0) if moved_by == "usd" else local_before[0][k]
        np.testing.assert_allclose(lpos[k], expect_local, atol=ATOL)
        assert_quats_close(lquat[k][None], local_before[1][k][None], atol=ATOL)
    world = np.array([compose(p, q, (1.0, 1.0, 1.0)) for p, q in zip(lpos, lquat, strict=True)]) @ parent_now
    np.testing.assert_allclose(wpos, world[:, 3, :3], atol=ATOL)


def test_split_world_writes_stand_when_parents_move_between_and_after_them(
    make_scene: Callable[..., Scene], device: str, backend: str
) -> None:
    """A world scope writes positions to rows 0 and 2, the parents move (another view), it writes orientations to
    rows 2 and 3 and a world scale to row 0, the parents move again. On exit: row 0 at the position and world scale
    written (its local rotation kept), row 2 at the position and orientation written, row 3 at the orientation
    written (its local translation kept), row 1 untouched (local kept); all against the parents' final matrices, in
    float64 from the values written."""
    n = 4
    scene = make_scene(n)
    view, parents = scene.view, scene.parent_view()
    lpos0, lquat0 = local_poses(view)
    lscale0 = view.get_local_scales().numpy().astype(np.float64)
    p_rows, q_rows = [[0.5, -1.0, 2.0], [1.5, 0.25, -0.5]], [ROLL_90, YAW_90]
    scale0 = [2.0, 2.0, 2.0]
    with view.xform_world_space_writer() as w:
        w.set_poses(positions=vec3f(p_rows, device), indices=[0, 2])
        parents.set_world_poses(vec3f([[1.0, 2.0, 3.0]] * n, device), vec4f([YAW_90] * n, device))
        w.set_poses(orientations=vec4f(q_rows, device), indices=idx([2, 3], device))
        w.set_scales(vec3f([scale0], device), indices=[0])
        parents.set_world_poses(vec3f([[-2.0, 0.5, 1.0]] * n, device), vec4f([ROLL_90] * n, device))
    parent_now = scene.parent_world()
    wpos, wquat = world_poses(view)
    lpos, lquat = local_poses(view)
    # written components, against truth from the values written
    np.testing.assert_allclose(wpos[[0, 2]], f32(p_rows), atol=ATOL)
    assert_quats_close(wquat[[2, 3]], f32(q_rows), atol=ATOL)
    np.testing.assert_allclose(view.get_world_scales().numpy()[0], scale0, atol=ATOL)
    # components never written keep their local values
    assert_quats_close(lquat[[0, 1]], lquat0[[0, 1]], atol=ATOL)
    np.testing.assert_allclose(lpos[[1, 3]], lpos0[[1, 3]], atol=ATOL)
    np.testing.assert_allclose(view.get_local_scales().numpy()[1:], lscale0[1:], atol=ATOL)
    # and every world matrix is its local one under the parent as it is now
    lscale = view.get_local_scales().numpy().astype(np.float64)
    world = np.array([compose(p, q, sc) for p, q, sc in zip(lpos, lquat, lscale, strict=True)]) @ parent_now
    np.testing.assert_allclose(wpos, world[:, 3, :3], atol=ATOL)


def test_nested_world_writes_hold_every_value_written(device: str, backend: str, standin: Any) -> None:
    """With a parent and its child in one view, a world position write then a world orientation write leave both
    at the positions and orientations written (as Isaac Lab's world writer, which writes world matrices and derives
    the local ones on exit): the parent's rotation, written after the child's position, does not carry the child
    away."""
    stage = isaaclab_stage(1)
    view = BACKENDS[backend](["/World/Parent_0", "/World/Parent_0/Child"], stage, device)
    try:
        p = np.array([[1.0, 0.0, 0.0], [1.0, 2.0, 0.0]])
        with view.xform_world_space_writer() as w:
            w.set_poses(positions=vec3f(p, device))
            w.set_poses(orientations=vec4f([YAW_90, IDENTITY_Q], device))
        got_pos, got_quat = world_poses(view)
        np.testing.assert_allclose(got_pos, p, atol=ATOL)
        assert_quats_close(got_quat, np.array([YAW_90, IDENTITY_Q]), atol=ATOL)
        # the child's local pose is solved against the rotated parent: translation conj(yaw)(p1 - p0)
        parent = compose(p[0], YAW_90, (1, 1, 1))
        child_local = compose(p[1], IDENTITY_Q, (1, 1, 1)) @ np.linalg.inv(parent)
        lpos, lquat, _ = decompose_all(child_local[None])
        got_lpos, got_lquat = (a.numpy() for a in view.get_local_poses([1]))
        np.testing.assert_allclose(got_lpos, lpos, atol=ATOL)
        assert_quats_close(got_lquat, lquat, atol=ATOL)
    finally:
        view.close()


# ---------------------------------------------------------------- the one-writer rule and the getter lock


def test_one_writer_per_view(make_scene: Callable[..., Scene]) -> None:
    """Opening a second writer on a view raises RuntimeError; once the first exits, a new one opens."""
    view = make_scene(2).view
    with view.xform_world_space_writer():
        for second in (view.xform_world_space_writer(), view.xform_local_space_writer()):
            with pytest.raises(RuntimeError, match="one writer per view"), second:
                pass
    with view.xform_local_space_writer() as w:
        assert w.space == "local"


def test_view_getters_and_setters_are_locked_in_a_scope(make_scene: Callable[..., Scene]) -> None:
    """While a writer is open, the view's own pose/scale getters and setters raise RuntimeError pointing at the
    writer's getters; after it exits they work again."""
    view = make_scene(2).view
    ones = np.ones((2, 3), dtype=np.float32)
    calls = [
        view.get_world_poses, view.get_local_poses, view.get_world_scales, view.get_local_scales, view.get_scales,
        lambda: view.set_world_poses(ones), lambda: view.set_local_poses(ones), lambda: view.set_local_scales(ones),
        lambda: view.set_world_scales(ones), lambda: view.set_scales(ones),
    ]  # fmt: skip
    with view.xform_world_space_writer() as w:
        for call in calls:
            with pytest.raises(RuntimeError, match="get_poses / get_scales"):
                call()
        w.get_poses()
    for call in calls:
        call()


def test_writer_outside_its_scope_raises(make_scene: Callable[..., Scene]) -> None:
    """A writer not entered, or already exited, raises RuntimeError; a writer is entered once."""
    view = make_scene(1).view
    w = view.xform_world_space_writer()
    with pytest.raises(RuntimeError, match="not entered"):
        w.set_poses(positions=np.zeros((1, 3), dtype=np.float32))
    with w:
        pass
    with pytest.raises(RuntimeError, match="exited"):
        w.get_poses()
    with pytest.raises(RuntimeError, match="entered once"), w:
        pass


def test_bad_arguments_raise_at_the_call(make_scene: Callable[..., Scene], device: str) -> None:
    """A writer validates each write when it is made, with the view setters' errors; nothing is written."""
    view = make_scene(2).view
    before = world_poses(view)[0]
    with view.xform_world_space_writer() as w:
        with pytest.raises(ValueError, match="positions"):
            w.set_poses(positions=np.zeros((3, 3), dtype=np.float32))
        with pytest.raises(IndexError):
            w.set_poses(positions=np.zeros((1, 3), dtype=np.float32), indices=[2])
        with pytest.raises(ValueError, match="orientations"):
            w.set_poses(orientations=np.zeros((2, 4), dtype=np.float32))
        with pytest.raises(ValueError, match="scales"):
            w.set_scales(None)
    np.testing.assert_array_equal(world_poses(view)[0], before)


# ---------------------------------------------------------------- exceptions inside a scope


def test_exception_in_scope_keeps_the_view_consistent(make_scene: Callable[..., Scene], device: str) -> None:
    """An exception in the body propagates; the writes made before it are applied (both spaces derived), the view
    is unlocked and a new writer opens."""
    scene = make_scene(2)
    view = scene.view
    pos = [[5.0, 0.0, 0.0], [0.0, 5.0, 0.0]]
    with pytest.raises(KeyError, match="boom"), view.xform_world_space_writer() as w:
        w.set_poses(positions=vec3f(pos, device))
        w.set_scales(vec3f([[2.0, 2.0, 2.0]] * 2, device))
        raise KeyError("boom")
    np.testing.assert_allclose(world_poses(view)[0], pos, atol=ATOL)
    np.testing.assert_allclose(local_poses(view)[0], np.array(pos) - np.array(PARENT_POS), atol=ATOL)
    np.testing.assert_allclose(view.get_local_scales().numpy(), 2.0, atol=ATOL)
    with view.xform_local_space_writer() as w:
        w.set_poses(positions=vec3f(pos, device))
    np.testing.assert_allclose(local_poses(view)[0], pos, atol=ATOL)
    assert_parents_untouched(scene)


def test_rejected_flush_unlocks_the_view(make_scene: Callable[..., Scene], device: str, backend: str) -> None:
    """A write the backend rejects (a singular parent) raises (host data: on exit, or at the call on Fabric views,
    which write at each call; device data on CUDA: at the view's next call or check(), as the view's setters),
    writes nothing and leaves the view unlocked; with an exception already in flight at exit, that exception
    propagates instead."""
    scene = make_scene(1, parent_scale=(0.0, 1.0, 1.0))
    view = scene.view
    before = local_poses(view)[0]
    host = np.array([[1.0, 2.0, 3.0]], dtype=np.float32)
    with pytest.raises(ValueError, match="singular"), view.xform_world_space_writer() as w:
        w.set_poses(positions=host)
    np.testing.assert_array_equal(local_poses(view)[0], before)
    with pytest.raises(ValueError, match="singular"):
        with view.xform_world_space_writer() as w:
            w.set_poses(positions=vec3f(host, device))
        view.check()
    np.testing.assert_array_equal(local_poses(view)[0], before)
    at_call = backend in FABRIC_BACKENDS
    expected = pytest.raises(ValueError, match="singular") if at_call else pytest.raises(KeyError, match="boom")
    with expected, view.xform_world_space_writer() as w:
        w.set_poses(positions=host)
        raise KeyError("boom")
    np.testing.assert_array_equal(local_poses(view)[0], before)
    view.check()  # nothing left behind on the device
    with view.xform_local_space_writer() as w:
        w.set_poses(positions=vec3f(host, device))
    np.testing.assert_allclose(local_poses(view)[0], host, atol=ATOL)


# ---------------------------------------------------------------- the view's one-write setters


def test_view_setters_still_write(make_scene: Callable[..., Scene], device: str) -> None:
    """set_world_poses / set_local_poses / set_local_scales keep working outside scopes (Isaac Lab's shims)."""
    scene = make_scene(2)
    view = scene.view
    view.set_world_poses(vec3f([[99.0, 99.0, 99.0], [88.0, 88.0, 88.0]], device), vec4f([IDENTITY_Q] * 2, device))
    np.testing.assert_allclose(world_poses(view)[0], [[99.0, 99.0, 99.0], [88.0, 88.0, 88.0]], atol=ATOL)
    view.set_local_poses(vec3f([[0.5, 0.5, 0.5], [1.0, 1.0, 1.0]], device))
    np.testing.assert_allclose(world_poses(view)[0], np.array([[0.5, 0.5, 1.5], [1.0, 1.0, 2.0]]), atol=ATOL)
    view.set_local_scales(vec3f([[3.0, 3.0, 3.0]] * 2, device))
    np.testing.assert_allclose(view.get_world_scales().numpy(), 3.0, atol=ATOL)
    assert_parents_untouched(scene)


def test_moving_the_parent_moves_world_not_local(make_scene: Callable[..., Scene], device: str) -> None:
    """A parent moved through its own view carries the child's world pose; the child's local pose is unchanged."""
    scene = make_scene(2)
    view = scene.view
    local_before = local_poses(view)[0]
    parents = scene.parent_view()
    new_parent = np.array([[5.0, 0.0, 0.0], [0.0, 5.0, 0.0]])
    with parents.xform_world_space_writer() as w:
        w.set_poses(positions=vec3f(new_parent, device))
    np.testing.assert_allclose(local_poses(view)[0], local_before, atol=ATOL)
    np.testing.assert_allclose(world_poses(view)[0], new_parent + np.array(CHILD_OFFSET), atol=ATOL)
    np.testing.assert_allclose(scene.parent_world()[:, 3, :3], new_parent, atol=ATOL)


@pytest.mark.parametrize("rows", ["all", "list", "numpy", "device"])
def test_same_rows_combine_into_one_write(
    make_scene: Callable[..., Scene], device: str, backend: str, rows: str
) -> None:
    """Poses then scales to the same rows are one backend write when the scope checked both at the call (host
    inputs; every input on the CPU), except where the writes are kept apart (:func:`_writes_apart`: on Fabric views
    each is made at its call; on CUDA, Newton views hold device data apart and apply it in order at exit, so that a
    rejected write takes no other down with it). The result is the same."""
    scene = make_scene(3)
    view = scene.view
    order = [2, 0]
    indices: Any = {"all": None, "list": order, "numpy": np.array(order), "device": idx(order, device)}[rows]
    m = 3 if indices is None else 2
    calls = _count_backend_writes(view)
    with view.xform_local_space_writer() as w:
        w.set_poses(vec3f([[1.0, 2.0, 3.0]] * m, device), indices=indices)
        w.set_scales(vec3f([[2.0, 2.0, 2.0]] * m, device), indices=indices)
    assert calls == [2 if _writes_apart(device, backend) else 1]
    written = list(range(3)) if indices is None else order
    np.testing.assert_allclose(local_poses(view)[0][written], [[1.0, 2.0, 3.0]] * m, atol=ATOL)
    np.testing.assert_allclose(view.get_local_scales().numpy()[written], 2.0, atol=ATOL)

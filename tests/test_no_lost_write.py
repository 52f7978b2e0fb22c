# SPDX-License-Identifier: Apache-2.0
"""No lost write, no wrong keyword: writer-scope sequences, inputs of every accepted kind reused across calls and
keywords, on the usd, fabric and newton backends, against float64 truth.

Truth: the stage's initial state from pxr ``UsdGeom.XformCache`` and every write modelled in float64 NumPy
(:class:`helpers.PoseModel`); never frameview against itself. A view's rows are compared with the modelled world
matrices of its prims after each call.
"""

from __future__ import annotations

import contextlib
import inspect
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import warp as wp
from backends import BACKENDS
from conftest import HAS_CUDA
from helpers import PoseModel, assert_quats_close, build_env_stage, decompose_all, env_paths, random_quats
from pxr import Usd

import frameview as fv

NUM_ENVS = 8
ROBOTS = "/World/envs/env_.*/Robot"
CAMERAS = "/World/envs/env_.*/Robot/Camera"
ATOL = 2e-4  # float32 poses on a stage whose envs lie up to ~10 m away
ROWS = [5, 1, 6]
MASK = np.array([i in ROWS for i in range(NUM_ENVS)])


@pytest.fixture(params=[pytest.param(name, id=name) for name in ("usd", "fabric", "newton")])
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@dataclass
class Scene:
    stage: Usd.Stage
    robots: fv.BaseFrameView
    cameras: fv.BaseFrameView
    model: PoseModel
    device: str

    def check(self, view: fv.BaseFrameView, rows: Any = None) -> None:
        """``view``'s world poses (all rows, or ``rows``) equal the modelled float64 truth."""
        view.check()
        paths = list(view.prim_paths) if rows is None else [view.prim_paths[i] for i in rows]
        pos, quat = (a.numpy().copy() for a in view.get_world_poses(None if rows is None else list(rows)))
        t, q, _ = decompose_all(self.model.worlds(paths))
        np.testing.assert_allclose(pos, t, atol=ATOL)
        assert_quats_close(quat, q, atol=1e-4)

    def check_all(self) -> None:
        self.check(self.robots)
        self.check(self.cameras)


@pytest.fixture
def scene(backend: str, device: str) -> Iterator[Scene]:
    # uniform robot scales: a camera's world rotation is then exactly what a world write asks for (no shear)
    stage = build_env_stage(NUM_ENVS, seed=11, robot_scale="uniform", camera_rotation="random")
    robots = BACKENDS[backend](ROBOTS, stage, device)
    cameras = BACKENDS[backend](CAMERAS, stage, device)
    model = PoseModel(stage, env_paths(NUM_ENVS, "/Robot") + env_paths(NUM_ENVS, "/Robot/Camera"))
    yield Scene(stage, robots, cameras, model, device)
    cameras.close()
    robots.close()


def _paths(view: fv.BaseFrameView, rows: Any) -> list[str]:
    return [view.prim_paths[i] for i in rows]


# ---------------------------------------------------------------- writer scopes: every sequence of two writes


def _bad_positions(device: str, n: int) -> wp.array:
    """Device data (a Warp array on the view's device) holding a NaN: only the kernels (or, in a CPU scope, the
    call's host check) can see it."""
    host = np.ones((n, 3), np.float32)
    host[n - 1, 1] = np.nan
    return wp.array(host, dtype=wp.vec3f, device=device)


@pytest.mark.parametrize("sequence", ["same_rows", "other_rows", "second_rejected", "parent_moved"])
@pytest.mark.parametrize("space", ["world", "local"])
def test_two_writes_in_a_scope(scene: Scene, sequence: str, space: str) -> None:
    """Two writes in one scope keep each valid write, whatever the second one is; a parent moved by another view
    between them carries no world value away (every value is solved at exit); truth is float64 NumPy."""
    rng = np.random.default_rng(3)
    cams, model, device = scene.cameras, scene.model, scene.device
    first_rows, second_rows = [1, 3], ([1, 3] if sequence == "same_rows" else [4, 6])
    p1, q1 = rng.uniform(-2, 2, (2, 3)).astype(np.float32), random_quats(rng, 2).astype(np.float32)
    p2 = rng.uniform(-2, 2, (2, 3)).astype(np.float32)
    robot_pos = rng.uniform(-3, 3, (NUM_ENVS, 3)).astype(np.float32)
    writer = cams.xform_world_space_writer if space == "world" else cams.xform_local_space_writer
    set_model = model.set_world if space == "world" else model.set_local
    with writer() as w:
        w.set_poses(wp.array(p1, dtype=wp.vec3f, device=device), q1, indices=first_rows)
        if sequence == "second_rejected":
            bad = _bad_positions(device, 2)
            if device == "cpu" or scene.robots.backend == "usd":  # checked at the call: it raises there
                with pytest.raises(ValueError, match="non-finite"):
                    w.set_poses(bad, indices=second_rows)
            else:  # CUDA device data: the kernels reject it at exit; the first write is applied before it
                w.set_poses(bad, indices=second_rows)
        else:
            w.set_poses(p2, indices=second_rows)
        if sequence == "parent_moved":
            scene.robots.set_world_poses(robot_pos)
    if sequence == "second_rejected" and device != "cpu" and scene.robots.backend != "usd":
        with pytest.raises(ValueError, match="non-finite"):
            scene.cameras.check()
    if sequence == "parent_moved":
        model.set_world(_paths(scene.robots, range(NUM_ENVS)), robot_pos)
    set_model(_paths(cams, first_rows), p1, q1)
    if sequence != "second_rejected":
        set_model(_paths(cams, second_rows), p2)
    scene.check_all()


@pytest.mark.parametrize("data", ["warp", "torch"])
def test_scope_writes_the_values_of_its_call_from_reused_buffers(scene: Scene, data: str) -> None:
    """A reset loop's scopes over the same buffers (device ids and data, refilled before each scope, overwritten again
    right after ``set_poses`` inside the scope): every scope writes the values its call was given, never the ones
    written to the buffers later (the scope copies them at the call; on CUDA its copy becomes a graph replayed from
    the third scope on, which reads the buffers anew); truth is float64 NumPy."""
    rng = np.random.default_rng(17)
    cams, device = scene.cameras, scene.device
    ids = wp.array(np.array(ROWS, dtype=np.int32), dtype=wp.int32, device=device)
    pos = wp.zeros(len(ROWS), dtype=wp.vec3f, device=device)
    quat = wp.zeros(len(ROWS), dtype=wp.quatf, device=device)
    args: tuple = (pos, quat, ids)
    if data == "torch":
        torch = pytest.importorskip("torch")
        if device != "cpu" and not torch.cuda.is_available():
            pytest.skip("torch without CUDA")
        args = (wp.to_torch(pos), wp.to_torch(quat), wp.to_torch(ids).long())
    for _ in range(4):
        p = rng.uniform(-2, 2, (len(ROWS), 3)).astype(np.float32)
        q = random_quats(rng, len(ROWS)).astype(np.float32)
        pos.assign(p)
        quat.assign(q)
        with cams.xform_world_space_writer() as w:
            w.set_poses(*args)
            pos.assign(rng.uniform(-2, 2, (len(ROWS), 3)).astype(np.float32))  # the caller reuses its buffers
            quat.assign(random_quats(rng, len(ROWS)).astype(np.float32))
        scene.model.set_world(_paths(cams, ROWS), p, q)
        scene.check_all()


def test_rejected_write_keeps_the_earlier_one_cpu(backend: str) -> None:
    """The issue's data loss: a valid write then a NaN write (a CPU Warp array) to the same rows: the NaN write
    raises at the call, the valid one is applied at exit. Out-of-range, negative and repeated Warp index arrays
    raise at the call too."""
    stage = build_env_stage(NUM_ENVS, seed=2, robot_scale="uniform")
    with BACKENDS[backend](CAMERAS, stage, "cpu") as cams:
        model = PoseModel(stage, env_paths(NUM_ENVS, "/Robot/Camera"))
        good = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], np.float32)
        with cams.xform_world_space_writer() as w:
            w.set_poses(good, indices=[1, 3])
            with pytest.raises(ValueError, match="positions: row 1 holds a non-finite value"):
                w.set_poses(_bad_positions("cpu", 2), indices=[1, 3])
            zero_q = wp.array(np.zeros((2, 4), np.float32), dtype=wp.quatf, device="cpu")
            with pytest.raises(ValueError, match="zero-norm quaternion"):
                w.set_poses(orientations=zero_q, indices=[1, 3])
            for bad, error in (([9], IndexError), ([-1], IndexError), ([2, 2], ValueError)):
                with pytest.raises(error, match="indices: index"):
                    w.set_poses(np.ones((len(bad), 3), np.float32), indices=wp.array(bad, dtype=wp.int32))
        model.set_world(_paths(cams, [1, 3]), good)
        pos, _ = cams.get_world_poses()
        np.testing.assert_allclose(pos.numpy(), model.worlds(list(cams.prim_paths))[:, 3, :3], atol=ATOL)


def test_writer_scopes_on_every_backend_write_both_spaces(scene: Scene) -> None:
    """Scopes exist on every backend (Newton's crashed) and write poses and scales in both spaces."""
    cams, model = scene.cameras, scene.model
    t = np.array([[0.1, 0.2, 0.3]] * 2, np.float32)
    s = np.array([[1.5, 1.5, 1.5]] * 2, np.float32)
    with cams.xform_local_space_writer() as w:
        w.set_poses(t, indices=[0, 2])
        w.set_scales(s, indices=[0, 2])
    model.set_local(_paths(cams, [0, 2]), t)
    model.set_local_scales(_paths(cams, [0, 2]), s)
    with cams.xform_world_space_writer() as w:
        w.set_poses(t[:1] + 1.0, indices=[5])
        np.testing.assert_allclose(w.get_poses([5])[0].numpy(), t[:1] + 1.0, atol=ATOL)
    model.set_world(_paths(cams, [5]), t[:1] + 1.0)
    scene.check_all()
    np.testing.assert_allclose(cams.get_local_scales([0, 2]).numpy(), s, atol=1e-5)


# ---------------------------------------------------------------- inputs of every kind, reused across calls


def _torch() -> Any:
    return pytest.importorskip("torch", reason="torch is not installed")


def _torch_device(device: str) -> str:
    return "cpu" if device == "cpu" else "cuda:0"


def index_kinds(device: str) -> dict[str, Callable[[list[int]], Any]]:
    """Every accepted kind of index array, built from a list (strided kinds pick every other element of a longer
    array)."""

    def strided_warp(dtype: Any) -> Callable[[list[int]], Any]:
        def make(rows: list[int]) -> wp.array:
            wide = np.zeros(2 * len(rows), dtype=np.int64)
            wide[::2] = rows
            return wp.array(wide, dtype=dtype, device=device)[::2]

        return make

    kinds: dict[str, Callable[[list[int]], Any]] = {
        "list": list,
        "tuple": tuple,
        "numpy_int32": lambda r: np.array(r, np.int32),
        "numpy_int64": lambda r: np.array(r, np.int64),
        "numpy_uint8": lambda r: np.array(r, np.uint8),
        "numpy_strided": lambda r: np.repeat(np.array(r, np.int64), 2)[::2],
    }
    for dtype in (wp.int8, wp.uint8, wp.int16, wp.uint16, wp.int32, wp.uint32, wp.int64, wp.uint64):
        kinds[f"warp_{dtype.__name__}"] = lambda r, dtype=dtype: wp.array(r, dtype=dtype, device=device)
        kinds[f"warp_{dtype.__name__}_strided"] = strided_warp(dtype)
    kinds["warp_int32_host"] = lambda r: wp.array(r, dtype=wp.int32, device="cpu")
    try:
        import torch
    except ImportError:
        return kinds
    tdev = _torch_device(device)
    for dtype in (torch.int32, torch.int64, torch.int16, torch.uint8):
        name = str(dtype).removeprefix("torch.")
        kinds[f"torch_{name}"] = lambda r, dtype=dtype: torch.tensor(r, dtype=dtype, device=tdev)
        kinds[f"torch_{name}_strided"] = lambda r, dtype=dtype: torch.tensor(
            r, dtype=dtype, device=tdev
        ).repeat_interleave(2)[::2]
    kinds["torch_int64_host"] = lambda r: torch.tensor(r, dtype=torch.int64)
    return kinds


def mask_kinds(device: str) -> dict[str, Callable[[np.ndarray], Any]]:
    kinds: dict[str, Callable[[np.ndarray], Any]] = {
        "numpy": lambda m: m.copy(),
        "warp": lambda m: wp.array(m, dtype=wp.bool, device=device),
        "warp_host": lambda m: wp.array(m, dtype=wp.bool, device="cpu"),
    }
    try:
        import torch
    except ImportError:
        return kinds
    tdev = _torch_device(device)
    kinds["torch"] = lambda m: torch.tensor(m, device=tdev)
    kinds["torch_strided"] = lambda m: torch.tensor(np.repeat(m, 2), device=tdev)[::2]
    return kinds


def data_kinds(device: str) -> dict[str, Callable[[np.ndarray], Any]]:
    """Every accepted kind of (M, 3) / (M, 4) float data, built from a float64 NumPy array."""

    def warp_vec(a: np.ndarray) -> wp.array:
        return wp.array(a.astype(np.float32), dtype=wp.vec3f if a.shape[1] == 3 else wp.quatf, device=device)

    kinds: dict[str, Callable[[np.ndarray], Any]] = {
        "numpy_float32": lambda a: a.astype(np.float32),
        "numpy_float64": lambda a: a.copy(),
        "list": lambda a: a.tolist(),
        "warp_vec": warp_vec,
        "warp_float32_2d": lambda a: wp.array(a.astype(np.float32), dtype=wp.float32, device=device),
        "warp_float64_2d": lambda a: wp.array(a, dtype=wp.float64, device=device),
    }
    try:
        import torch
    except ImportError:
        return kinds
    tdev = _torch_device(device)
    kinds["torch_float32"] = lambda a: torch.tensor(a, dtype=torch.float32, device=tdev)
    kinds["torch_float64"] = lambda a: torch.tensor(a, dtype=torch.float64, device=tdev)

    def column_slice(a: np.ndarray) -> Any:  # root_state[:, 3:3+w] of an (M, 13) tensor: not contiguous
        state = torch.zeros((a.shape[0], 13), dtype=torch.float32, device=tdev)
        state[:, 3 : 3 + a.shape[1]] = torch.tensor(a, dtype=torch.float32, device=tdev)
        return state[:, 3 : 3 + a.shape[1]]

    kinds["torch_column_slice"] = column_slice
    return kinds


def test_every_index_kind_reused_across_calls_and_keywords(scene: Scene) -> None:
    """Each index kind selects the same rows in every public call that takes ``indices=`` (getters, setters,
    visibility, CameraPoses.read, scopes), the same object reused; reused as ``mask=`` it is rejected, and a mask
    reused as ``indices=`` is rejected (a cache keyed on identity alone took one for the other)."""
    rng = np.random.default_rng(5)
    robots, cams = scene.robots, scene.cameras
    cameras = fv.CameraPoses(cams)
    for name, make in index_kinds(scene.device).items():
        ids = make(ROWS)
        scene.check(cams, ROWS)
        for _ in range(2):  # the same object again: any cache must give the same rows
            pos, _ = cams.get_world_poses(indices=ids)
            t, _, _ = decompose_all(scene.model.worlds(_paths(cams, ROWS)))
            np.testing.assert_allclose(pos.numpy(), t, atol=ATOL, err_msg=name)
        np.testing.assert_allclose(cams.get_world_scales(indices=ids).numpy(), cams.get_world_scales(ROWS).numpy())
        np.testing.assert_allclose(cams.get_local_scales(indices=ids).numpy(), cams.get_local_scales(ROWS).numpy())
        pos, _ = cameras.read(ids, convention="opengl")
        np.testing.assert_allclose(pos.numpy(), t, atol=ATOL, err_msg=name)
        _, lq = cams.get_local_poses(indices=ids)
        _, q_local, _ = decompose_all(scene.model.locals(_paths(cams, ROWS)))
        assert_quats_close(lq.numpy(), q_local, atol=1e-4)
        for visible in (False, True) if cams.backend != "newton" else ():  # Newton reads visibility only
            cams.set_visibility(visible, indices=ids)
            assert cams.get_visibility(indices=ids).numpy().tolist() == [visible] * len(ROWS), name
            assert int(cams.get_visibility().numpy().sum()) == NUM_ENVS - (0 if visible else len(ROWS)), name
        scales = rng.uniform(0.5, 2.0, (len(ROWS), 1)).repeat(3, axis=1)  # uniform: the cameras stay shear-free
        cams.set_local_scales(scales, indices=ids)
        scene.model.set_local_scales(_paths(cams, ROWS), scales)
        np.testing.assert_allclose(cams.get_local_scales(indices=ids).numpy(), scales, rtol=1e-5, err_msg=name)
        new = rng.uniform(-2, 2, (len(ROWS), 3))
        robots.set_world_poses(new, indices=ids)
        scene.model.set_world(_paths(robots, ROWS), new)
        with cams.xform_local_space_writer() as w:
            w.set_poses(new * 0.1, indices=ids)
        scene.model.set_local(_paths(cams, ROWS), new * 0.1)
        cams.set_local_poses(new * 0.2, indices=ids)
        scene.model.set_local(_paths(cams, ROWS), new * 0.2)
        scene.check_all()
        if name.startswith(("list", "tuple")) or (name.startswith("numpy") and "uint8" in name):
            continue
        with pytest.raises(TypeError, match="mask"):  # the same object, now as a mask: never taken as indices
            cams.get_world_poses(mask=ids)
        with pytest.raises(TypeError, match="mask"):
            robots.set_world_poses(new, mask=ids)
    for make in mask_kinds(scene.device).values():
        mask = make(MASK)
        cams.get_world_poses(mask=mask)
        for call in (
            lambda m=mask: cams.get_world_poses(indices=m),
            lambda m=mask: robots.set_world_poses(np.zeros((len(ROWS), 3)), indices=m),
            lambda m=mask: cams.get_visibility(indices=m),
            lambda m=mask: cameras.read(env_ids=m),
        ):
            with pytest.raises(TypeError, match="mask"):
                call()
        scene.check_all()  # nothing was written by the rejected calls


def test_every_mask_kind_reused(scene: Scene) -> None:
    """Each mask kind reads and writes exactly its rows, reused across calls (reads, writes, CameraPoses.read)."""
    rng = np.random.default_rng(6)
    robots, cams = scene.robots, scene.cameras
    cameras = fv.CameraPoses(cams)
    for name, make in mask_kinds(scene.device).items():
        mask = make(MASK)
        for _ in range(2):
            pos, _ = cams.get_world_poses(mask=mask)
            t, _, _ = decompose_all(scene.model.worlds(_paths(cams, ROWS)))
            np.testing.assert_allclose(pos.numpy()[ROWS], t, atol=ATOL, err_msg=name)
        pos, _ = cameras.read(mask=mask, convention="opengl")
        np.testing.assert_allclose(pos.numpy()[ROWS], t, atol=ATOL, err_msg=name)
        new = rng.uniform(-2, 2, (NUM_ENVS, 3))
        new[~MASK] = np.nan  # unmasked rows are never read
        robots.set_world_poses(new, mask=mask)
        scene.model.set_world(_paths(robots, ROWS), new[ROWS])
        scene.check_all()


def test_every_data_kind_writes_the_same_pose(scene: Scene) -> None:
    """Each data kind (NumPy, lists, Warp vec / 2-D float32 / float64, torch float32 / float64 / column slices)
    writes the same poses as float64 truth, with int64 ids and a bool mask."""
    rng = np.random.default_rng(8)
    robots = scene.robots
    kinds = index_kinds(scene.device)
    ids = kinds.get("torch_int64", kinds["warp_int64"])(ROWS)
    masks = mask_kinds(scene.device)
    mask = masks.get("torch", masks["warp"])(MASK)
    for make in data_kinds(scene.device).values():
        p, q = rng.uniform(-2, 2, (len(ROWS), 3)), random_quats(rng, len(ROWS))
        robots.set_world_poses(make(p), make(q), indices=ids)
        scene.model.set_world(_paths(robots, ROWS), p, q)
        scene.check_all()
        p_all, q_all = rng.uniform(-2, 2, (NUM_ENVS, 3)), random_quats(rng, NUM_ENVS)
        robots.set_world_poses(make(p_all), make(q_all), mask=mask)
        scene.model.set_world(_paths(robots, ROWS), p_all[ROWS], q_all[ROWS])
        scene.check_all()


# ---------------------------------------------------------------- smaller items


def test_huge_host_quaternion_is_accepted_without_warnings(scene: Scene) -> None:
    """Host quaternions of norm up to 1e30 are valid (normalised); the norm check must not overflow float32 (under
    ``-W error`` a RuntimeWarning fails the write)."""
    q = np.array([[0.0, 0.0, 1e30, 1e30]], np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scene.cameras.set_world_poses(orientations=q, indices=[2])
    scene.model.set_world(_paths(scene.cameras, [2]), None, np.array([[0.0, 0.0, np.sqrt(0.5), np.sqrt(0.5)]]))
    scene.check_all()


@pytest.mark.parametrize("keyword", ["mask", "indices", "device_indices", "device_orientations"])
def test_host_data_with_a_nan_raises_at_the_call(scene: Scene, keyword: str) -> None:
    """NumPy data holding a NaN in a written row raises at the call, naming the row, on every backend and device
    (CUDA included: the call waits for the write kernels' verdict on host data, also beside device indices or
    device orientations, whose own errors may be raised later), and nothing is written."""
    data = np.ones((NUM_ENVS, 3), np.float32)
    data[ROWS[1]] = np.nan
    kwargs: dict[str, Any] = {"mask": MASK} if keyword == "mask" else {"indices": list(range(NUM_ENVS))}
    if keyword == "device_indices":
        kwargs["indices"] = wp.array(np.arange(NUM_ENVS, dtype=np.int32), dtype=wp.int32, device=scene.device)
    if keyword == "device_orientations":
        unit = np.tile(np.array([0.0, 0.0, 0.0, 1.0], np.float32), (NUM_ENVS, 1))
        kwargs["orientations"] = wp.array(unit, dtype=wp.quatf, device=scene.device)
    with pytest.raises(ValueError, match=f"positions: row {ROWS[1]} holds a non-finite value"):
        scene.robots.set_world_poses(data, **kwargs)
    scene.check_all()


def test_no_method_replaces_a_base_method_with_another_signature() -> None:
    """A view class's method with the name of a base-class method takes the same parameters (a Newton method that
    silently replaced the writer scopes' ``_rows_key`` crashed every scope on Newton)."""
    classes = [fv.UsdFrameView, fv.FabricFrameView]
    with contextlib.suppress(ImportError):  # newton is an extra
        classes.append(fv.NewtonFrameView)
    found = []
    for cls in classes:
        for name, member in vars(cls).items():
            if not inspect.isfunction(member) or name.startswith("__"):
                continue
            for base in cls.__mro__[1:]:
                inherited = vars(base).get(name)
                if inspect.isfunction(inherited):
                    mine, theirs = inspect.signature(member), inspect.signature(inherited)
                    if list(mine.parameters) != list(theirs.parameters):
                        found.append(f"{cls.__name__}.{name}{mine} vs {base.__name__}.{name}{theirs}")
                    break
    assert not found, found


@pytest.mark.cuda
@pytest.mark.skipif(not HAS_CUDA, reason="needs CUDA")
def test_cuda_scope_device_data_rejected_keeps_the_earlier_write(backend: str) -> None:
    """CUDA, device data checked by the kernels: a rejected write in a scope is reported at check(), and the valid
    write made before it (other rows) is applied."""
    stage = build_env_stage(NUM_ENVS, seed=4, robot_scale="uniform")
    with BACKENDS[backend](CAMERAS, stage, "cuda:0") as cams:
        model = PoseModel(stage, env_paths(NUM_ENVS, "/Robot/Camera"))
        good = wp.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=wp.vec3f, device="cuda:0")
        ids = wp.array([1, 3], dtype=wp.int32, device="cuda:0")
        with cams.xform_world_space_writer() as w:
            w.set_poses(good, indices=ids)
            if backend == "usd":
                with pytest.raises(ValueError, match="non-finite"):
                    w.set_poses(_bad_positions("cuda:0", 2), indices=wp.array([0, 3], dtype=wp.int32, device="cuda:0"))
            else:
                w.set_poses(_bad_positions("cuda:0", 2), indices=wp.array([0, 3], dtype=wp.int32, device="cuda:0"))
        if backend != "usd":
            with pytest.raises(ValueError, match="non-finite"):
                cams.check()
        model.set_world(_paths(cams, [1, 3]), good.numpy())
        pos, _ = cams.get_world_poses()
        np.testing.assert_allclose(pos.numpy(), model.worlds(list(cams.prim_paths))[:, 3, :3], atol=ATOL)

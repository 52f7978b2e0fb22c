# SPDX-License-Identifier: Apache-2.0
"""Masks, device indices and device-side checks (the reset path), on both backends, against pxr truth.

A masked getter fills the masked rows of an N-row output; a masked setter writes the masked rows of N-row data.
Device inputs are checked by the kernels: on the CPU (and for host inputs) the faulty call raises; on CUDA the
error surfaces at the view's next call or at ``view.check()``, and a rejected write leaves Fabric untouched.
"""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp
from helpers import (
    assert_quats_close,
    build_env_stage,
    compose,
    decompose_all,
    env_paths,
    random_quats,
    set_trs,
    xform_cache_local,
    xform_cache_world,
)
from pxr import Usd, UsdGeom

import frameview as fv
from frameview.fabric.stage import WORLD_MATRIX

N = 6
ROBOTS = "/World/envs/env_.*/Robot"
CAMERAS = "/World/envs/env_.*/Robot/Camera"
MASK = np.array([True, False, True, True, False, False])


def _view(backend: str, path: str, stage: Usd.Stage, device: str) -> fv.BaseFrameView:
    cls = fv.UsdFrameView if backend == "usd" else fv.FabricFrameView
    return cls(path, stage=stage, device=device)


@pytest.fixture(params=["usd", "fabric"])
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def stage() -> Usd.Stage:
    return build_env_stage(N, seed=4, robot_scale="uniform", camera_rotation="random")


@pytest.fixture(params=["compact", "mask"])
def mask_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Fabric views on the CPU compact a masked write's rows before launching; ``"mask"`` turns that off, so the
    kernels' MASK path (the one CUDA takes) runs on the CPU too."""
    if request.param == "mask":
        from frameview._core.rows import MaskCompaction

        monkeypatch.setattr(MaskCompaction, "enabled", False)
    return request.param


def _world_truth(stage: Usd.Stage, leaf: str) -> tuple[np.ndarray, np.ndarray]:
    t, q, _s = decompose_all(xform_cache_world(stage, env_paths(N, leaf)))
    return t, q


def test_masked_read_fills_only_masked_rows(backend: str, stage: Usd.Stage, device: str, mask_path: str) -> None:
    """Only the masked rows are written; the same mask array with new contents selects the new rows (the CPU keeps a
    host view of a mask it compacts)."""
    truth_pos, truth_quat = _world_truth(stage, "/Robot/Camera")
    with _view(backend, CAMERAS, stage, device) as view:
        pos, quat = view.get_world_poses()  # fill the buffers with the truth, then poison them
        pos.fill_(wp.vec3f(7.0, 7.0, 7.0))
        mask = wp.array(MASK, dtype=wp.bool, device=device)
        pos, quat = view.get_world_poses(mask=mask)
        got = pos.numpy()
        np.testing.assert_allclose(got[MASK], truth_pos[MASK], atol=1e-5)
        np.testing.assert_array_equal(got[~MASK], 7.0)
        assert_quats_close(quat.numpy()[MASK], truth_quat[MASK], atol=1e-5)
        pos.fill_(wp.vec3f(7.0, 7.0, 7.0))
        mask.assign(~MASK)
        got = view.get_world_poses(mask=mask)[0].numpy()
        np.testing.assert_allclose(got[~MASK], truth_pos[~MASK], atol=1e-5)
        np.testing.assert_array_equal(got[MASK], 7.0)
        pos.fill_(wp.vec3f(7.0, 7.0, 7.0))
        mask.zero_()
        np.testing.assert_array_equal(view.get_world_poses(mask=mask)[0].numpy(), 7.0)  # nothing masked: untouched
    with _view(backend, CAMERAS, stage, device) as view:  # a view's first masked read masks nothing
        first = view.get_world_poses(mask=wp.zeros(N, dtype=wp.bool, device=device))[0]
        view.check()
        np.testing.assert_allclose(view.get_world_poses(mask=MASK)[0].numpy()[MASK], truth_pos[MASK], atol=1e-5)
        assert first.shape == (N,)
        _t, _q, truth_scale = decompose_all(xform_cache_world(stage, env_paths(N, "/Robot/Camera")))
        np.testing.assert_allclose(view.get_world_scales(mask=MASK).numpy()[MASK], truth_scale[MASK], atol=1e-4)


def test_masked_write_writes_only_masked_rows(backend: str, stage: Usd.Stage, device: str, mask_path: str) -> None:
    rng = np.random.default_rng(2)
    new_pos, new_quat = rng.uniform(-2, 2, (N, 3)), random_quats(rng, N)
    before_pos, before_quat = _world_truth(stage, "/Robot")
    with _view(backend, ROBOTS, stage, device) as view, _view(backend, CAMERAS, stage, device) as cams:
        cam_local = cams.get_local_poses()[0].numpy().copy()
        view.set_world_poses(
            wp.array(new_pos, dtype=wp.vec3f, device=device),
            wp.array(new_quat, dtype=wp.quatf, device=device),
            mask=wp.array(MASK, dtype=wp.bool, device=device),
        )
        view.check()
        pos, quat = (a.numpy() for a in view.get_world_poses())
        np.testing.assert_allclose(pos[MASK], new_pos[MASK], atol=1e-5)
        np.testing.assert_allclose(pos[~MASK], before_pos[~MASK], atol=1e-5)
        assert_quats_close(quat[MASK], new_quat[MASK], atol=1e-5)
        assert_quats_close(quat[~MASK], before_quat[~MASK], atol=1e-5)
        np.testing.assert_allclose(cams.get_local_poses()[0].numpy(), cam_local, atol=1e-5)
        # the cameras followed: camera world = camera local @ robot world (float64 truth from the robots' reads)
        scale = view.get_world_scales().numpy()
        for i in np.flatnonzero(MASK):
            truth = np.append(cam_local[i], 1.0) @ compose(pos[i], quat[i], scale[i])
            np.testing.assert_allclose(cams.get_world_poses([i])[0].numpy()[0], truth[:3], atol=1e-4)


@pytest.mark.parametrize("data", ["device", "numpy"])
def test_masked_write_checks_the_masked_rows_only(
    backend: str, stage: Usd.Stage, device: str, data: str, mask_path: str
) -> None:
    """A masked write reads only the masked rows of its data (on the view's device or NumPy): a NaN in a row left out
    is ignored, a NaN in a masked row rejects the call naming that row (the data's row, the prim's view index) and
    writes nothing; an all-False mask writes nothing. (On the CPU the Fabric backend compacts the mask before its
    launches.)"""
    rng = np.random.default_rng(14)

    def rows(values: np.ndarray):
        return wp.array(values, dtype=wp.vec3f, device=device) if data == "device" else values

    with _view(backend, ROBOTS, stage, device) as view, _view(backend, CAMERAS, stage, device) as cams:
        mask = wp.array(MASK, dtype=wp.bool, device=device)
        new_pos = rng.uniform(-2, 2, (N, 3))
        new_pos[1] = np.nan  # row 1 is left out by MASK
        view.set_world_poses(rows(new_pos), mask=mask)
        view.check()
        before_pos, before_quat = (a.numpy().copy() for a in view.get_world_poses())
        before_cams = cams.get_world_poses()[0].numpy().copy()
        np.testing.assert_allclose(before_pos[MASK], new_pos[MASK], atol=1e-5)
        bad = rng.uniform(-2, 2, (N, 3))
        bad[3] = np.inf  # row 3 is masked in
        with pytest.raises(ValueError, match=r"positions: row 3 holds a non-finite value.*nothing was written"):
            view.set_world_poses(rows(bad), mask=mask)
            view.check()
        nothing = wp.zeros(N, dtype=wp.bool, device=device)  # every row left out: NaN everywhere is never read
        view.set_world_poses(rows(np.full((N, 3), np.nan)), mask=nothing)
        view.check()
        pos, quat = (a.numpy() for a in view.get_world_poses())
        np.testing.assert_array_equal(pos, before_pos)
        np.testing.assert_array_equal(quat, before_quat)
        np.testing.assert_array_equal(cams.get_world_poses()[0].numpy(), before_cams)


def test_device_indices_of_every_dtype_write_the_same(backend: str, stage: Usd.Stage, device: str) -> None:
    rows = [4, 0, 2]
    target = np.arange(9, dtype=np.float32).reshape(3, 3)
    spaced = np.array([4, 9, 0, 9, 2, 9])  # every other one: strided indices
    for dtype in (wp.int32, wp.uint32, wp.int64, "strided int32", "strided int64"):
        if isinstance(dtype, str):
            indices = wp.array(spaced, dtype=wp.int64 if "64" in dtype else wp.int32, device=device)[::2]
        else:
            indices = wp.array(rows, dtype=dtype, device=device)
        with _view(backend, ROBOTS, stage, device) as view, _view(backend, CAMERAS, stage, device) as cams:
            cam_offsets = _local_truth(cams)
            view.set_world_poses(positions=target, indices=indices)
            view.check()
            np.testing.assert_allclose(view.get_world_poses(rows)[0].numpy(), target, atol=1e-5)
            np.testing.assert_allclose(_local_truth(cams), cam_offsets, atol=1e-5)  # the cameras followed


def _local_truth(cams: fv.BaseFrameView) -> np.ndarray:
    return cams.get_local_poses()[0].numpy().copy()


@pytest.mark.parametrize("bad", [[0, 2**32 + 1], [-(2**32) + 2, 3], [2**63 - 1, 0], [5, -(2**63)]])
def test_int64_device_indices_beyond_32_bits_raise_and_write_nothing(
    backend: str, stage: Usd.Stage, device: str, bad: list[int]
) -> None:
    """An int64 index that wraps into range when cut to 32 bits (2**32 + 1 -> 1) is out of range: no row written."""
    before = xform_cache_world(stage, env_paths(N, "/Robot"))
    with _view(backend, ROBOTS, stage, device) as view, _view(backend, CAMERAS, stage, device) as cams:
        cams_before = cams.get_world_poses()[0].numpy().copy()
        robots_before = view.get_world_poses()[0].numpy().copy()
        with pytest.raises(IndexError, match=r"out of range|negative"):
            view.set_world_poses(positions=np.ones((2, 3)), indices=wp.array(bad, dtype=wp.int64, device=device))
            view.check()
        np.testing.assert_array_equal(view.get_world_poses()[0].numpy(), robots_before)
        np.testing.assert_array_equal(cams.get_world_poses()[0].numpy(), cams_before)
        view.set_world_poses(positions=np.ones((1, 3)), indices=wp.array([3], dtype=wp.int64, device=device))
        view.check()  # the view writes again after the rejected call
        np.testing.assert_allclose(view.get_world_poses([3])[0].numpy(), np.ones((1, 3)), atol=1e-5)
    world = xform_cache_world(stage, env_paths(N, "/Robot"))
    if backend == "usd":  # the USD view writes the stage: row 3 moved, nothing else
        np.testing.assert_array_equal(np.delete(world, 3, axis=0), np.delete(before, 3, axis=0))
    else:
        np.testing.assert_array_equal(world, before)


@pytest.mark.parametrize(
    ("bad", "error", "match"),
    [
        ([0, N], IndexError, "out of range"),
        ([1, 1], ValueError, "more than once|appears"),
        ([-1, 0], IndexError, "out of range|negative"),
    ],
)
def test_bad_device_indices_raise_and_write_nothing(
    backend: str, stage: Usd.Stage, device: str, bad: list[int], error: type, match: str
) -> None:
    before = xform_cache_world(stage, env_paths(N, "/Robot"))
    with _view(backend, ROBOTS, stage, device) as view, _view(backend, CAMERAS, stage, device) as cams:
        cams_before = cams.get_world_poses()[0].numpy().copy()
        robots_before = view.get_world_poses()[0].numpy().copy()
        with pytest.raises(error, match=match):
            view.set_world_poses(positions=np.zeros((2, 3)), indices=wp.array(bad, dtype=wp.int32, device=device))
            view.check()
        np.testing.assert_array_equal(view.get_world_poses()[0].numpy(), robots_before)
        np.testing.assert_array_equal(cams.get_world_poses()[0].numpy(), cams_before)
    np.testing.assert_array_equal(xform_cache_world(stage, env_paths(N, "/Robot")), before)


def test_non_finite_device_data_raises_and_writes_nothing(backend: str, stage: Usd.Stage, device: str) -> None:
    with _view(backend, ROBOTS, stage, device) as view:
        before = view.get_world_poses()[0].numpy().copy()
        data = np.zeros((N, 3), dtype=np.float32)
        data[3, 1] = np.nan
        with pytest.raises(ValueError, match=r"row 3.*non-finite.*nothing was written"):
            view.set_world_poses(positions=wp.array(data, dtype=wp.vec3f, device=device))
            view.check()
        quats = np.tile(np.array([0, 0, 0, 1], dtype=np.float32), (N, 1))
        quats[2] = 0.0
        with pytest.raises(ValueError, match=r"row 2.*zero-norm.*nothing was written"):
            view.set_world_poses(orientations=wp.array(quats, dtype=wp.quatf, device=device))
            view.check()
        np.testing.assert_array_equal(view.get_world_poses()[0].numpy(), before)


def test_bad_device_read_index_raises(backend: str, stage: Usd.Stage, device: str) -> None:
    with _view(backend, CAMERAS, stage, device) as view:
        with pytest.raises(IndexError, match="out of range"):
            view.get_world_poses(wp.array([0, N + 3], dtype=wp.int32, device=device))
            view.check()
        view.get_world_poses([0, 1])  # the view keeps working


def test_bad_masks_raise(backend: str, stage: Usd.Stage, device: str) -> None:
    with _view(backend, CAMERAS, stage, device) as view:
        with pytest.raises(ValueError, match=r"mask: expected shape \(6,\)"):
            view.get_world_poses(mask=np.ones(N + 1, dtype=bool))
        with pytest.raises(TypeError, match="mask: expected"):
            view.get_world_poses(mask=np.ones(N, dtype=np.int32))
        with pytest.raises(TypeError, match="not both"):
            view.get_world_poses([0], mask=np.ones(N, dtype=bool))
        with pytest.raises(ValueError, match=r"expected shape \(6, 3\)"):
            view.set_world_poses(np.zeros((3, 3)), mask=np.ones(N, dtype=bool))


def test_camera_read_matches_the_two_step_conversion(backend: str, stage: Usd.Stage, device: str) -> None:
    """The fused read (gather + convention in one launch) equals read-then-convert."""
    ids = [5, 1, 3]
    with _view(backend, CAMERAS, stage, device) as view:
        cams = fv.CameraPoses(view)
        for convention in ("ros", "opengl", "world"):
            pos, quat = (a.numpy().copy() for a in cams.read(wp.array(ids, dtype=wp.int32, device=device), convention))
            ref_pos, ref_quat = view.get_world_poses(ids)
            expected = fv.convert_camera_orientations(ref_quat.numpy(), "opengl", convention)
            np.testing.assert_allclose(pos, ref_pos.numpy(), atol=1e-6)
            assert_quats_close(quat, expected, atol=1e-5)
            assert np.all(quat[:, 3] >= 0)


@pytest.mark.cuda
def test_captured_reset_replays_fresh_data(stage: Usd.Stage) -> None:
    """A reset (masked robot write + masked camera read) captured once in a CUDA graph: every replay writes the
    current contents of the input arrays and reads the cameras that followed them."""
    if wp.get_cuda_device_count() == 0:
        pytest.skip("no CUDA device")
    device = "cuda:0"
    robots = fv.FabricFrameView(ROBOTS, stage=stage, device=device)
    cams = fv.FabricFrameView(CAMERAS, stage=stage, device=device)
    try:
        rng = np.random.default_rng(9)
        pos = wp.array(rng.uniform(-1, 1, (N, 3)), dtype=wp.vec3f, device=device)
        quat = wp.array(random_quats(rng, N), dtype=wp.quatf, device=device)
        mask = wp.array(MASK, dtype=wp.bool, device=device)
        cam_local = cams.get_local_poses()[0].numpy().copy()
        robots.set_world_poses(pos, quat, mask=mask)
        cams.get_world_poses(mask=mask)
        with wp.ScopedCapture(device=device, force_module_load=False) as capture:
            robots.set_world_poses(pos, quat, mask=mask)
            out_pos, _out_quat = cams.get_world_poses(mask=mask)
        for _ in range(3):
            new_pos, new_quat = rng.uniform(-1, 1, (N, 3)), random_quats(rng, N)
            pos.assign(new_pos.astype(np.float32))
            quat.assign(new_quat.astype(np.float32))
            wp.capture_launch(capture.graph)
            wp.synchronize_device(device)
            scale = robots.get_world_scales().numpy()
            for i in np.flatnonzero(MASK):
                truth = np.append(cam_local[i], 1.0) @ compose(new_pos[i], new_quat[i], scale[i])
                np.testing.assert_allclose(out_pos.numpy()[i], truth[:3], atol=1e-4)
        robots.check()
        cams.check()
    finally:
        cams.close()
        robots.close()


@pytest.mark.cuda
def test_first_call_inside_a_capture_raises_and_a_later_capture_works(stage: Usd.Stage) -> None:
    """A view's first call allocates (outputs, Fabric arrays, the descendant plan): inside a capture that memory would
    belong to the graph, unusable before a replay, so the call raises, naming what to do. The process survives: the
    same reset, called once outside, then captured, replays with the truth of the stage."""
    if wp.get_cuda_device_count() == 0:
        pytest.skip("no CUDA device")
    device = "cuda:0"
    robots = fv.FabricFrameView(ROBOTS, stage=stage, device=device)
    cams = fv.FabricFrameView(CAMERAS, stage=stage, device=device)
    try:
        rng = np.random.default_rng(12)
        new_pos, new_quat = rng.uniform(-1, 1, (N, 3)), random_quats(rng, N)
        pos = wp.array(new_pos, dtype=wp.vec3f, device=device)
        quat = wp.array(new_quat, dtype=wp.quatf, device=device)
        ids = wp.array([0, 2, 5], dtype=wp.int32, device=device)
        with pytest.raises(RuntimeError, match="inside a CUDA graph capture"):  # noqa: SIM117 - raise inside capture
            with wp.ScopedCapture(device=device, force_module_load=False):
                cams.get_world_poses(ids)
        with pytest.raises(RuntimeError, match="inside a CUDA graph capture"):  # noqa: SIM117
            with wp.ScopedCapture(device=device, force_module_load=False):
                robots.set_world_poses(pos, quat)
        robots.set_world_poses(pos, quat)
        cams.get_world_poses(ids)
        with wp.ScopedCapture(device=device, force_module_load=False) as capture:
            robots.set_world_poses(pos, quat)
            out_pos, out_quat = cams.get_world_poses(ids)
        stage_pos, stage_quat = rng.uniform(-1, 1, (N, 3)), random_quats(rng, N)
        pos.assign(stage_pos.astype(np.float32))
        quat.assign(stage_quat.astype(np.float32))
        wp.capture_launch(capture.graph)
        wp.synchronize_device(device)
        robots.check()
        cams.check()
        written_pos, written_quat = (a.astype(np.float32).astype(np.float64) for a in (stage_pos, stage_quat))
        truth_pos, truth_quat = (a[[0, 2, 5]] for a in _cameras_after_write(stage, written_pos, written_quat))
        np.testing.assert_allclose(out_pos.numpy(), truth_pos, atol=1e-4)
        assert_quats_close(out_quat.numpy(), truth_quat, atol=1e-4)
    finally:
        cams.close()
        robots.close()


def _cameras_after_write(stage: Usd.Stage, pos: np.ndarray, quat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Camera world poses (float64) once the robots' world poses are ``pos`` / ``quat`` (their USD world scale kept):
    the cameras' USD locals on the composed robot matrices."""
    robot_world = xform_cache_world(stage, env_paths(N, "/Robot"))
    cam_local = xform_cache_world(stage, env_paths(N, "/Robot/Camera")) @ np.linalg.inv(robot_world)
    _t, _q, scale = decompose_all(robot_world)
    t, q, _s = decompose_all(np.stack([cam_local[i] @ compose(pos[i], quat[i], scale[i]) for i in range(N)]))
    return t, q


def _robot_locals_after_write(stage: Usd.Stage, pos: np.ndarray, quat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Robot local poses (float64) once their world poses are ``pos`` / ``quat`` (world scale kept): relative to
    their env prims' USD world matrices, which no write moves. A write against the wrong parent still reads back the
    right world pose (its world matrix is the one asked for); its local pose is what shows the parent it used."""
    robot_world = xform_cache_world(stage, env_paths(N, "/Robot"))
    parent_world = xform_cache_world(stage, env_paths(N, ""))
    _t, _q, scale = decompose_all(robot_world)
    t, q, _s = decompose_all(np.stack([compose(pos[i], quat[i], scale[i]) @ np.linalg.inv(parent_world[i])
                                       for i in range(N)]))  # fmt: skip
    return t, q


@pytest.mark.parametrize("rows_kind", ["indices", "mask", "all"])
@pytest.mark.parametrize("garbage", ["permuted", "out_of_range"])
def test_a_stale_slot_table_costs_time_never_a_wrong_row(
    stage: Usd.Stage, device: str, rows_kind: str, garbage: str, mask_path: str
) -> None:
    """A view without nesting inverts its slot tables only when its Fabric arrays are rebuilt and verifies every
    slot against the tag column: with its three tables scrambled (view slots, parent slots, each row's parent slot),
    a write still lands on the right prims (and their cameras follow), and the tables it used are repaired."""
    rng = np.random.default_rng(11)
    first_pos, first_quat = rng.uniform(-2, 2, (N, 3)), random_quats(rng, N)
    new_pos, new_quat = rng.uniform(-2, 2, (N, 3)), random_quats(rng, N)
    written = {"indices": np.array([4, 0, 2]), "mask": np.flatnonzero(MASK), "all": np.arange(N)}[rows_kind]
    want_pos, want_quat = first_pos.copy(), first_quat.copy()
    want_pos[written], want_quat[written] = new_pos[written], new_quat[written]
    cam_pos, cam_quat = _cameras_after_write(stage, want_pos, want_quat)
    robots = fv.FabricFrameView(ROBOTS, stage=stage, device=device)
    cams = fv.FabricFrameView(CAMERAS, stage=stage, device=device)
    with robots, cams:
        robots.set_world_poses(first_pos, first_quat)  # inverts the tables (fresh view)
        robots.check()
        true_slots, true_parents = robots._data.slots.numpy().copy(), robots._data.parent_slots.numpy().copy()
        true_row_parents = robots._data.row_parent_slots.numpy().copy()  # per view index: its parent's slot
        assert np.array_equal(true_row_parents, true_parents[robots._writer.node_parent.numpy()[:N] - N])
        tables = (
            (robots._data.slots, N),
            (robots._data.parent_slots, true_parents.shape[0]),
            (robots._data.row_parent_slots, N),
        )
        for table, size in tables:
            bad = rng.permutation(size) if garbage == "permuted" else np.full(size, 10**6 if size % 2 else -5)
            table.assign(bad.astype(np.int32))
        rows = {"indices": {"indices": wp.array(written.astype(np.int32), dtype=wp.int32, device=device)},
                "mask": {"mask": wp.array(MASK, dtype=wp.bool, device=device)}, "all": {}}[rows_kind]  # fmt: skip
        data = (new_pos, new_quat) if rows_kind != "indices" else (new_pos[written], new_quat[written])
        pos_in = wp.array(data[0], dtype=wp.vec3f, device=device)
        robots.set_world_poses(pos_in, wp.array(data[1], dtype=wp.quatf, device=device), **rows)
        robots.check()
        pos, quat = (a.numpy() for a in robots.get_world_poses())
        np.testing.assert_allclose(pos, want_pos, atol=1e-5)
        assert_quats_close(quat, want_quat, atol=1e-5)
        got_pos, got_quat = (a.numpy() for a in cams.get_world_poses())
        np.testing.assert_allclose(got_pos, cam_pos, atol=1e-4)
        assert_quats_close(got_quat, cam_quat, atol=1e-4)
        local_pos, local_quat = _robot_locals_after_write(stage, want_pos, want_quat)
        got_pos, got_quat = (a.numpy() for a in robots.get_local_poses())
        np.testing.assert_allclose(got_pos, local_pos, atol=1e-4)
        assert_quats_close(got_quat, local_quat, atol=1e-4)
        np.testing.assert_array_equal(robots._data.slots.numpy()[written], true_slots[written])
        np.testing.assert_array_equal(robots._data.row_parent_slots.numpy()[written], true_row_parents[written])
        assert np.all(robots._data.req_row.numpy() == -1)  # every claim released


@pytest.mark.parametrize("garbage", ["permuted", "out_of_range"])
def test_a_stale_slot_table_never_gives_a_masked_read_a_wrong_row(stage: Usd.Stage, device: str, garbage: str) -> None:
    """A masked read takes each row's slot from the view's table, inverted once per Fabric-array rebuild, and
    verifies it against the tag column: with the table scrambled it still reads the right prims (float64 truth)
    and repairs the entries it used."""
    truth_pos, truth_quat = _world_truth(stage, "/Robot/Camera")
    mask = wp.array(MASK, dtype=wp.bool, device=device)
    with fv.FabricFrameView(CAMERAS, stage=stage, device=device) as cams:
        cams.get_world_poses(mask=mask)  # inverts the table (fresh view)
        true_slots = cams._data.slots.numpy().copy()
        bad = np.random.default_rng(3).permutation(N) if garbage == "permuted" else np.full(N, 10**6)
        cams._data.slots.assign(bad.astype(np.int32))
        pos, quat = (a.numpy() for a in cams.get_world_poses(mask=mask))
        np.testing.assert_allclose(pos[MASK], truth_pos[MASK], atol=1e-5)
        assert_quats_close(quat[MASK], truth_quat[MASK], atol=1e-5)
        np.testing.assert_array_equal(cams._data.slots.numpy()[MASK], true_slots[MASK])


def test_claims_are_released_after_a_rejected_indexed_write(stage: Usd.Stage, device: str) -> None:
    """A flat view's indexed write claims each prim for the call and releases it whatever happened: after a write
    rejected for a duplicate or an out-of-range index, the same prims can be written again."""
    rng = np.random.default_rng(12)
    with fv.FabricFrameView(ROBOTS, stage=stage, device=device) as robots:
        for bad in ([1, 3, 1], [2, N + 4, 5]):
            with pytest.raises((ValueError, IndexError)):
                robots.set_world_poses(np.zeros((3, 3)), indices=wp.array(bad, dtype=wp.int32, device=device))
                robots.check()
            assert np.all(robots._data.req_row.numpy() == -1)
        pos = rng.uniform(-2, 2, (3, 3))
        robots.set_world_poses(pos, indices=wp.array([1, 3, 5], dtype=wp.int32, device=device))
        robots.check()
        np.testing.assert_allclose(robots.get_world_poses([1, 3, 5])[0].numpy(), pos, atol=1e-5)


def test_launch_trace_records_launches_that_redo_the_call(stage: Usd.Stage, device: str, mask_path: str) -> None:
    """``FabricFrameView.launch_trace`` (the seam perf/bench_kernels.py times launches with) records a masked write's
    two launches; launched again after another write, they put the traced poses back (cameras following, against
    float64 truth) without touching the view's error reporting. Nothing is recorded outside the block."""
    rng = np.random.default_rng(13)
    first_pos, first_quat = rng.uniform(-2, 2, (N, 3)), random_quats(rng, N)
    other_pos, other_quat = rng.uniform(-2, 2, (N, 3)), random_quats(rng, N)
    want_pos, want_quat = other_pos.copy(), other_quat.copy()
    want_pos[MASK], want_quat[MASK] = first_pos[MASK], first_quat[MASK]
    cam_pos, cam_quat = _cameras_after_write(stage, want_pos, want_quat)
    robots = fv.FabricFrameView(ROBOTS, stage=stage, device=device)
    cams = fv.FabricFrameView(CAMERAS, stage=stage, device=device)
    with robots, cams:
        pos_in = wp.array(first_pos, dtype=wp.vec3f, device=device)
        quat_in = wp.array(first_quat, dtype=wp.quatf, device=device)
        mask = wp.array(MASK, dtype=wp.bool, device=device)
        robots.set_world_poses(pos_in, quat_in, mask=mask)
        robots.check()
        with robots.launch_trace() as launches:
            robots.set_world_poses(pos_in, quat_in, mask=mask)
        robots.check()
        assert [kernel.key for kernel, _dim, _params in launches] == ["_solve_flat", "_commit_flat"]
        robots.set_world_poses(other_pos, other_quat)
        robots.check()
        for kernel, dim, params in launches:
            wp.launch(kernel, dim=dim, inputs=params, device=device)
        robots.check()
        pos, quat = (a.numpy() for a in robots.get_world_poses())
        np.testing.assert_allclose(pos, want_pos, atol=1e-5)
        assert_quats_close(quat, want_quat, atol=1e-5)
        got_pos, got_quat = (a.numpy() for a in cams.get_world_poses())
        np.testing.assert_allclose(got_pos, cam_pos, atol=1e-4)
        assert_quats_close(got_quat, cam_quat, atol=1e-4)
        with cams.launch_trace() as reads:
            cams.get_world_poses()
        robots.get_world_poses()
        assert len(reads) == 1 and reads[0][0].key == "_scatter_poses"
        assert robots._launches.trace is None and cams._launches.trace is None


LINKS = ("/Robot/Link", "/Robot/Link/Tip")


def _stage_with_links() -> Usd.Stage:
    """The env stage with ``Robot/Link/Tip`` beside each camera: descendants two deep (each translated, rotated and
    uniformly scaled), so a robot's write moves a chain below it."""
    stage = build_env_stage(N, seed=4, robot_scale="uniform", camera_rotation="random")
    rng = np.random.default_rng(22)
    for path in env_paths(N, "/Robot"):
        for leaf in LINKS:
            xf = UsdGeom.Xform.Define(stage, path + leaf.removeprefix("/Robot"))
            set_trs(xf, rng.uniform(-1.0, 1.0, 3), random_quats(rng, 1)[0], (rng.uniform(0.5, 2.0),) * 3)
    return stage


def _snapshot(view: fv.BaseFrameView) -> list[np.ndarray]:
    """Every pose and scale a view reads, world and local (copies)."""
    return [a.numpy().copy() for a in (*view.get_world_poses(), *view.get_local_poses(), view.get_world_scales(),
                                      view.get_local_scales())]  # fmt: skip


@pytest.mark.parametrize("fault", ["nan_last_masked", "zero_quat_last", "index_range_last", "duplicate_last"])
def test_a_write_rejected_at_its_last_row_leaves_every_matrix_as_it_was(
    device: str, mask_path: str, fault: str
) -> None:
    """A flat view's write rejected at its last row (the rows before it solved, with descendants two deep: a camera,
    and a link with a tip below it) leaves every matrix of every prim exactly as it was, Fabric's values (which a
    first write made differ from USD's), and the claims free. The next write holds the float64 truth down the
    chain."""
    stage = _stage_with_links()
    rng = np.random.default_rng(23)
    everything = [p for leaf in ("", "/Robot", "/Robot/Camera", *LINKS) for p in env_paths(N, leaf)]
    with (
        fv.FabricFrameView(ROBOTS, stage=stage, device=device) as robots,
        fv.FabricFrameView(everything, stage=stage, device=device) as observer,
    ):
        first = wp.array(rng.uniform(-2, 2, (N, 3)), dtype=wp.vec3f, device=device)
        robots.set_world_poses(first, wp.array(random_quats(rng, N), dtype=wp.quatf, device=device))
        robots.check()  # Fabric now differs from USD
        before = _snapshot(observer)
        pos, quat = rng.uniform(-2, 2, (N, 3)), random_quats(rng, N)
        kwargs: dict = {}
        if fault == "nan_last_masked":
            pos[np.flatnonzero(MASK)[-1], 2] = np.nan
            kwargs["mask"] = wp.array(MASK, dtype=wp.bool, device=device)
            error, match = ValueError, "non-finite"
        elif fault == "zero_quat_last":
            quat[N - 1] = 0.0
            error, match = ValueError, "zero-norm"
        else:
            last = N if fault == "index_range_last" else 2
            kwargs["indices"] = wp.array([0, 2, 4, last], dtype=wp.int32, device=device)
            pos, quat = pos[:4], quat[:4]
            error, match = (IndexError, "out of range") if last == N else (ValueError, "more than once|appears")
        with pytest.raises(error, match=match):
            robots.set_world_poses(
                wp.array(pos, dtype=wp.vec3f, device=device), wp.array(quat, dtype=wp.quatf, device=device), **kwargs
            )
            robots.check()
        after = _snapshot(observer)
        for got, want in zip(after, before, strict=True):
            np.testing.assert_array_equal(got, want)
        assert np.all(robots._data.req_row.numpy() == -1)
        # the next write holds: tip world = tip local @ link local @ the robot's new world (float64, USD locals)
        pos, quat = rng.uniform(-2, 2, (N, 3)), random_quats(rng, N)
        robots.set_world_poses(wp.array(pos, dtype=wp.vec3f, device=device),
                               wp.array(quat, dtype=wp.quatf, device=device))  # fmt: skip
        robots.check()
        _t, _q, scale = decompose_all(xform_cache_world(stage, env_paths(N, "/Robot")))
        link, tip = (xform_cache_local(stage, env_paths(N, leaf)) for leaf in LINKS)
        truth = np.stack([tip[i] @ link[i] @ compose(pos[i], quat[i], scale[i]) for i in range(N)])
        t, q, _s = decompose_all(truth)
        with fv.FabricFrameView(env_paths(N, LINKS[1]), stage=stage, device=device) as tips:
            got_pos, got_quat = (a.numpy() for a in tips.get_world_poses())
        np.testing.assert_allclose(got_pos, t, atol=1e-4)
        assert_quats_close(got_quat, q, atol=1e-4)


# ---------------------------------------------------------------- captured launches replayed after a layout change

CHANGES = ["new_view", "closed_view", "usd_children"]
"""Layout changes after a capture: a view created over the captured prims (their tags move them to new buckets), a
view over them closed (back again), or a child Xform added under every robot in USD (applied at the stage's next
access; a replayed robot write would leave the new children where they were)."""


def _change_layout(change: str, stage: Usd.Stage, doomed: fv.FabricFrameView, device: str) -> list:
    """Make the layout change ``change``; returns what must stay open until the end of the test."""
    if change == "new_view":
        paths = [*env_paths(N, "/Robot"), *env_paths(N, "/Robot/Camera")]
        return [fv.FabricFrameView(paths, stage=stage, device=device)]
    if change == "closed_view":
        doomed.close()
        return []
    for path in env_paths(N, "/Robot"):
        set_trs(UsdGeom.Xform.Define(stage, path + "/Extra"), (0.1, 0.2, 0.3), (0.0, 0.0, 0.0, 1.0), (1.0,) * 3)
    return []


def _reset_calls(robots, cams, nested, device: str, rng: np.random.Generator) -> dict:
    """Each captured call of the test below: ``name -> (view, call, reads)``, ``reads`` the rows a read fills (None
    for a write). Inputs are device arrays made once (a capture keeps their addresses)."""
    pos = wp.array(rng.uniform(-1, 1, (N, 3)), dtype=wp.vec3f, device=device)
    quat = wp.array(random_quats(rng, N), dtype=wp.quatf, device=device)
    pos2 = wp.array(rng.uniform(-1, 1, (2 * N, 3)), dtype=wp.vec3f, device=device)
    quat2 = wp.array(random_quats(rng, 2 * N), dtype=wp.quatf, device=device)
    mask = wp.array(MASK, dtype=wp.bool, device=device)
    mask2 = wp.array(np.concatenate([MASK, ~MASK]), dtype=wp.bool, device=device)
    ids = [0, 2, 5]
    idx, idx3 = wp.array(ids, dtype=wp.int32, device=device), wp.array(ids, dtype=wp.int32, device=device)
    masked, every = np.flatnonzero(MASK), np.arange(N)
    return {
        "write_mask": (robots, lambda: robots.set_world_poses(pos, quat, mask=mask), None),
        "write_indices": (robots, lambda: robots.set_world_poses(pos[:3], quat[:3], indices=idx), None),
        "write_all": (robots, lambda: robots.set_local_poses(pos, quat), None),
        "write_nested": (nested, lambda: nested.set_world_poses(pos2, quat2, mask=mask2), None),
        "read_all": (cams, lambda: cams.get_world_poses(), every),
        "read_mask": (cams, lambda: cams.get_world_poses(mask=mask), masked),
        "read_indices": (cams, lambda: cams.get_world_poses(idx3), np.arange(3)),
        "scales_all": (cams, lambda: (cams.get_world_scales(),), every),
        "scales_mask": (cams, lambda: (cams.get_world_scales(mask=mask),), masked),
        "scales_indices": (cams, lambda: (cams.get_world_scales(idx3),), np.arange(3)),
    }


def _traced_in_capture(view: fv.FabricFrameView, call, monkeypatch: pytest.MonkeyPatch) -> tuple[list, object]:
    """The launches ``call`` makes as if inside the caller's CUDA graph capture (the view is told its stream
    captures; the launches run at once and are traced, so that launching them again replays the capture on any
    device), and what the call returned."""
    with monkeypatch.context() as m:
        m.setattr(view._errors, "is_capturing", lambda: True)
        with view.launch_trace() as launches:
            out = call()
    return launches, out


CAPTURED_CALLS = ["write_mask", "write_indices", "write_all", "write_nested", "read_all", "read_mask", "read_indices",
                  "scales_all", "scales_mask", "scales_indices"]  # fmt: skip


@pytest.mark.parametrize("change", CHANGES)
@pytest.mark.parametrize("name", CAPTURED_CALLS)
def test_a_captured_call_replayed_after_a_layout_change_reads_nan_and_writes_nothing(
    device: str, name: str, change: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call's launches as captured in the caller's graph, replayed after the stage's layout changed, touch no Fabric
    memory: every matrix of every prim stays as it was, the rows a read fills are NaN, and ``check()`` raises naming
    the layout change. Replayed before the change they redo the call (a write puts its data back, a read gives the
    float64 truth); after the error, the same call works again."""
    stage = build_env_stage(N, seed=4, robot_scale="uniform", camera_rotation="random")
    rng = np.random.default_rng(31)
    everything = [p for leaf in ("", "/Robot", "/Robot/Camera") for p in env_paths(N, leaf)]
    robots = fv.FabricFrameView(ROBOTS, stage=stage, device=device)
    cams = fv.FabricFrameView(CAMERAS, stage=stage, device=device)
    nested = fv.FabricFrameView([*env_paths(N, "/Robot"), *env_paths(N, "/Robot/Camera")], stage=stage, device=device)
    observer = fv.FabricFrameView(everything, stage=stage, device=device)
    doomed = fv.FabricFrameView(CAMERAS, stage=stage, device=device)
    keep: list = []
    try:
        view, call, reads = _reset_calls(robots, cams, nested, device, rng)[name]
        call()  # a view's first call allocates: outside the capture
        view.check()
        initial = _snapshot(observer)
        launches, out = _traced_in_capture(view, call, monkeypatch)
        view.check()
        captured = _snapshot(observer)
        # before the change: a replay redoes the call, after Fabric moved on
        other_pos, other_quat = rng.uniform(-1, 1, (N, 3)), random_quats(rng, N)
        if reads is None:
            observer.set_world_poses(initial[0], initial[1])  # every prim back to its pose before the capture
        else:
            robots.set_world_poses(other_pos, other_quat)
        for kernel, dim, params in launches:
            wp.launch(kernel, dim=dim, inputs=params, device=device)
        view.check()
        if reads is None:
            for got, want in zip(_snapshot(observer), captured, strict=True):
                np.testing.assert_allclose(got, want, atol=1e-5)
        else:
            truth = _cameras_after_write(stage, other_pos, other_quat)
            if name.startswith("scales"):
                truth = (decompose_all(xform_cache_world(stage, env_paths(N, "/Robot/Camera")))[2],)
            rows = np.flatnonzero(MASK) if "mask" in name else ([0, 2, 5] if "indices" in name else np.arange(N))
            for got, want in zip(out, truth, strict=True):
                got = got.numpy()[reads]
                if want.shape[1] == 4:
                    assert_quats_close(got, want[rows], atol=1e-4)
                else:
                    np.testing.assert_allclose(got, want[rows], atol=1e-4)
        keep = _change_layout(change, stage, doomed, device)
        before = _snapshot(observer)  # the observer's call applies the USD edits
        for kernel, dim, params in launches:
            wp.launch(kernel, dim=dim, inputs=params, device=device)
        with pytest.raises(RuntimeError, match="layout changed after"):
            view.check()
        for got, want in zip(_snapshot(observer), before, strict=True):
            np.testing.assert_array_equal(got, want)
        if reads is not None:
            for got in out:
                assert np.all(np.isnan(got.numpy()[reads])), f"{name}: a stale replay read rows that are not NaN"
        call()  # the view works on outside a capture
        view.check()
    finally:
        for v in (*keep, doomed, observer, nested, cams, robots):
            v.close()


def _captured(device: str, calls) -> tuple:
    """``calls()`` captured in a CUDA graph (the caller's own capture); returns the graph and what it returned."""
    with wp.ScopedCapture(device=device, force_module_load=False) as capture:
        out = calls()
    return capture.graph, out


def _replay(graph, device: str, pos: wp.array, quat: wp.array, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """New robot poses into the captured inputs, one replay; returns them (float64 of the float32 written)."""
    new_pos, new_quat = rng.uniform(-1, 1, (N, 3)), random_quats(rng, N)
    pos.assign(new_pos.astype(np.float32))
    quat.assign(new_quat.astype(np.float32))
    wp.capture_launch(graph)
    wp.synchronize_device(device)
    return new_pos.astype(np.float32).astype(np.float64), new_quat.astype(np.float32).astype(np.float64)


def _masked_camera_truth(stage: Usd.Stage, pos: np.ndarray, quat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """World poses (float64) of the cameras of the masked envs once their robots' world poses are ``pos`` /
    ``quat`` (world scale kept): the cameras' USD locals on the composed robot matrices; NaN in the other rows."""
    t, q = _cameras_after_write(stage, pos, quat)
    t[~MASK], q[~MASK] = np.nan, np.nan
    return t, q


@pytest.mark.cuda
@pytest.mark.parametrize("change", CHANGES)
def test_a_captured_reset_replayed_after_a_layout_change_raises_and_writes_nothing(change: str) -> None:
    """A reset captured in a CUDA graph (masked robot write, masked camera read; an indexed and a full camera read in
    graphs of their own: a getter's next call reuses its output buffer), replayed after the stage's layout changed: no
    matrix of any prim changes, every row read is NaN, and ``check()`` raises on both views, naming the change.
    Replays before the change hold the float64 truth; captured again after the error, the reset replays the truth."""
    if wp.get_cuda_device_count() == 0:
        pytest.skip("no CUDA device")
    device = "cuda:0"
    stage = build_env_stage(N, seed=4, robot_scale="uniform", camera_rotation="random")
    everything = [p for leaf in ("", "/Robot", "/Robot/Camera") for p in env_paths(N, leaf)]
    robots = fv.FabricFrameView(ROBOTS, stage=stage, device=device)
    cams = fv.FabricFrameView(CAMERAS, stage=stage, device=device)
    observer = fv.FabricFrameView(everything, stage=stage, device=device)
    doomed = fv.FabricFrameView(CAMERAS, stage=stage, device=device)
    keep: list = []
    try:
        rng = np.random.default_rng(41)
        pos = wp.array(rng.uniform(-1, 1, (N, 3)), dtype=wp.vec3f, device=device)
        quat = wp.array(random_quats(rng, N), dtype=wp.quatf, device=device)
        mask = wp.array(MASK, dtype=wp.bool, device=device)
        ids = [3, 0, 2]  # masked envs: their cameras' truth is known after a replay
        index = wp.array(ids, dtype=wp.int32, device=device)

        def reset() -> tuple:
            robots.set_world_poses(pos, quat, mask=mask)
            return cams.get_world_poses(mask=mask)

        reset()
        cams.get_world_poses(index)
        cams.get_world_poses()
        graph, masked = _captured(device, reset)
        index_graph, indexed = _captured(device, lambda: cams.get_world_poses(index))
        full_graph, full = _captured(device, cams.get_world_poses)
        for _ in range(2):
            new_pos, new_quat = _replay(graph, device, pos, quat, rng)
            truth_pos, truth_quat = _masked_camera_truth(stage, new_pos, new_quat)
            np.testing.assert_allclose(masked[0].numpy()[MASK], truth_pos[MASK], atol=1e-4)
            assert_quats_close(masked[1].numpy()[MASK], truth_quat[MASK], atol=1e-4)
            wp.capture_launch(index_graph)
            wp.synchronize_device(device)
            np.testing.assert_allclose(indexed[0].numpy(), truth_pos[ids], atol=1e-4)
            assert_quats_close(indexed[1].numpy(), truth_quat[ids], atol=1e-4)
        robots.check()
        cams.check()
        keep = _change_layout(change, stage, doomed, device)
        before = _snapshot(observer)
        _replay(graph, device, pos, quat, rng)
        for view in (robots, cams):
            with pytest.raises(RuntimeError, match="layout changed after"):
                view.check()
        for got, want in zip(_snapshot(observer), before, strict=True):
            np.testing.assert_array_equal(got, want)
        assert np.all(np.isnan(masked[0].numpy()[MASK])) and np.all(np.isnan(masked[1].numpy()[MASK]))
        for read_graph, out in ((index_graph, indexed), (full_graph, full)):
            wp.capture_launch(read_graph)
            wp.synchronize_device(device)
            with pytest.raises(RuntimeError, match="layout changed after"):
                cams.check()
            assert all(np.all(np.isnan(a.numpy())) for a in out), "a stale replay read rows that are not NaN"
        reset()  # outside a capture: the views catch up with the new layout
        graph, masked = _captured(device, reset)
        new_pos, new_quat = _replay(graph, device, pos, quat, rng)
        robots.check()
        cams.check()
        truth_pos, truth_quat = _masked_camera_truth(stage, new_pos, new_quat)
        np.testing.assert_allclose(masked[0].numpy()[MASK], truth_pos[MASK], atol=1e-4)
        assert_quats_close(masked[1].numpy()[MASK], truth_quat[MASK], atol=1e-4)
    finally:
        for v in (*keep, doomed, observer, cams, robots):
            v.close()


@pytest.mark.cuda
def test_captured_reads_replay_the_poses_physics_wrote() -> None:
    """Camera reads (masked, indexed) captured once in a CUDA graph: each replay reads the poses written in Fabric
    since (here by a robot write outside the graph, as physics would), against float64 truth."""
    if wp.get_cuda_device_count() == 0:
        pytest.skip("no CUDA device")
    device = "cuda:0"
    stage = build_env_stage(N, seed=4, robot_scale="uniform", camera_rotation="random")
    with (
        fv.FabricFrameView(ROBOTS, stage=stage, device=device) as physics,
        fv.FabricFrameView(CAMERAS, stage=stage, device=device) as cams,
    ):
        rng = np.random.default_rng(43)
        mask = wp.array(MASK, dtype=wp.bool, device=device)
        ids = wp.array([5, 0, 3], dtype=wp.int32, device=device)
        cams.get_world_poses(mask=mask)
        cams.get_world_poses(ids)
        graph, masked = _captured(device, lambda: cams.get_world_poses(mask=mask))
        index_graph, indexed = _captured(device, lambda: cams.get_world_poses(ids))  # a getter reuses its buffer
        for _ in range(3):
            new_pos, new_quat = rng.uniform(-1, 1, (N, 3)), random_quats(rng, N)
            physics.set_world_poses(new_pos, new_quat)
            wp.capture_launch(graph)
            wp.synchronize_device(device)
            truth_pos, truth_quat = _cameras_after_write(stage, new_pos, new_quat)
            np.testing.assert_allclose(masked[0].numpy()[MASK], truth_pos[MASK], atol=1e-4)
            assert_quats_close(masked[1].numpy()[MASK], truth_quat[MASK], atol=1e-4)
            wp.capture_launch(index_graph)
            wp.synchronize_device(device)
            np.testing.assert_allclose(indexed[0].numpy(), truth_pos[[5, 0, 3]], atol=1e-4)
            assert_quats_close(indexed[1].numpy(), truth_quat[[5, 0, 3]], atol=1e-4)
        cams.check()


@pytest.mark.parametrize("links", [False, True])
def test_flat_writes_and_reads_hold_the_truth_over_one_bucket_and_over_several(
    device: str, links: bool, mask_path: str
) -> None:
    """The reset path indexes a selection of one bucket as a plain array over it, and a selection of several through
    the fabric array: robots whose descendants are cameras only (one bucket) or cameras and links (two), read through
    a view of cameras (one bucket) or of cameras and links (two). A masked robot write and masked and full reads of
    the leaves hold the float64 truth either way."""
    stage = _stage_with_links() if links else build_env_stage(N, 4, robot_scale="uniform", camera_rotation="random")
    leaf_paths = [*env_paths(N, "/Robot/Camera"), *(env_paths(N, "/Robot/Link") if links else [])]
    robot_world = xform_cache_world(stage, env_paths(N, "/Robot"))
    leaf_world = xform_cache_world(stage, leaf_paths)
    leaf_local = np.stack([leaf_world[k] @ np.linalg.inv(robot_world[k % N]) for k in range(len(leaf_paths))])
    _t, _q, scale = decompose_all(robot_world)
    rng = np.random.default_rng(51)
    pos, quat = rng.uniform(-2, 2, (N, 3)), random_quats(rng, N)
    with (
        fv.FabricFrameView(ROBOTS, stage=stage, device=device) as robots,
        fv.FabricFrameView(leaf_paths, stage=stage, device=device) as leaves,
    ):
        mask = wp.array(MASK, dtype=wp.bool, device=device)
        robots.set_world_poses(wp.array(pos, dtype=wp.vec3f, device=device),
                               wp.array(quat, dtype=wp.quatf, device=device), mask=mask)  # fmt: skip
        robots.check()
        new_world = robot_world.copy()
        new_world[MASK] = np.stack([compose(pos[i], quat[i], scale[i]) for i in np.flatnonzero(MASK)])
        t, q, _s = decompose_all(np.stack([leaf_local[k] @ new_world[k % N] for k in range(len(leaf_paths))]))
        leaf_mask = np.tile(MASK, len(leaf_paths) // N)
        got_pos, got_quat = (a.numpy() for a in leaves.get_world_poses(mask=leaf_mask))
        np.testing.assert_allclose(got_pos[leaf_mask], t[leaf_mask], atol=1e-4)
        assert_quats_close(got_quat[leaf_mask], q[leaf_mask], atol=1e-4)
        got_pos, got_quat = (a.numpy() for a in leaves.get_world_poses())
        np.testing.assert_allclose(got_pos, t, atol=1e-4)
        assert_quats_close(got_quat, q, atol=1e-4)
        plain = (not isinstance(robots._writer.follow.flat_columns()[0], wp.fabricarray),
                 not isinstance(leaves._data.columns[WORLD_MATRIX], wp.fabricarray))  # fmt: skip
        assert plain == (not links, not links), "the test no longer reaches the kind of column it names"

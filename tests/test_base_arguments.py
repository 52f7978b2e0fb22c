# SPDX-License-Identifier: Apache-2.0
"""BaseFrameView argument handling (indices, setter inputs, lifecycle), exercised through UsdFrameView."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import warp as wp
from helpers import (
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

torch = pytest.importorskip("torch")

N = 8
ROBOTS = "/World/envs/env_.*/Robot"


@pytest.fixture
def stage() -> Usd.Stage:
    """A fresh 8-env stage."""
    return build_env_stage(N, seed=11)


@pytest.fixture
def view(stage: Usd.Stage) -> fv.UsdFrameView:
    """A CPU view over the 8 robots."""
    with fv.UsdFrameView(ROBOTS, stage=stage, device="cpu") as v:
        yield v


def _local_snapshot(stage: Usd.Stage) -> np.ndarray:
    return xform_cache_local(stage, env_paths(N, "/Robot"))


# ---------------------------------------------------------------- indices

_ORDER = [5, 0, 3]
INDEX_KINDS: dict[str, Callable[[list[int], str], Any]] = {
    "wp_int32": lambda v, d: wp.array(v, dtype=wp.int32, device=d),
    "wp_uint32": lambda v, d: wp.array(v, dtype=wp.uint32, device=d),
    "wp_int64": lambda v, d: wp.array(v, dtype=wp.int64, device=d),
    "wp_int32_host": lambda v, d: wp.array(v, dtype=wp.int32, device="cpu"),
    "np_int32": lambda v, d: np.array(v, dtype=np.int32),
    "np_int64": lambda v, d: np.array(v, dtype=np.int64),
    "np_uint32": lambda v, d: np.array(v, dtype=np.uint32),
    "torch_int64": lambda v, d: torch.tensor(v, dtype=torch.int64),
    "torch_int32": lambda v, d: torch.tensor(v, dtype=torch.int32),
    "list": lambda v, d: list(v),
    "tuple": lambda v, d: tuple(v),
}


@pytest.mark.parametrize("kind", list(INDEX_KINDS))
def test_every_index_kind_reads_the_same_rows(stage: Usd.Stage, device: str, kind: str) -> None:
    """Indices as Warp (int32/uint32/int64), NumPy, torch, list or tuple select the same rows, in the given order."""
    with fv.UsdFrameView(ROBOTS, stage=stage, device=device) as view:
        pos_all, quat_all = (a.numpy().copy() for a in view.get_world_poses())
        scale_all = view.get_local_scales().numpy().copy()
        pos, quat = view.get_world_poses(INDEX_KINDS[kind](_ORDER, device))
        assert pos.device == wp.get_device(device) and pos.shape == (3,)
        np.testing.assert_array_equal(pos.numpy(), pos_all[_ORDER])
        np.testing.assert_array_equal(quat.numpy(), quat_all[_ORDER])
        np.testing.assert_array_equal(
            view.get_local_scales(INDEX_KINDS[kind](_ORDER, device)).numpy(), scale_all[_ORDER]
        )


def test_range_indices(view: fv.UsdFrameView) -> None:
    """A range selects the same rows as the equivalent list."""
    expected = view.get_local_poses([1, 3, 5])[0].numpy().copy()
    np.testing.assert_array_equal(view.get_local_poses(range(1, 6, 2))[0].numpy(), expected)


@pytest.mark.parametrize("kind", list(INDEX_KINDS))
def test_every_index_kind_writes_the_same_rows(stage: Usd.Stage, kind: str) -> None:
    """A write through any index kind changes exactly the named rows, with row k of the input going to index k."""
    values = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]])
    with fv.UsdFrameView(ROBOTS, stage=stage, device="cpu") as view:
        before = _local_snapshot(stage)
        view.set_local_poses(translations=values, indices=INDEX_KINDS[kind](_ORDER, "cpu"))
        after = _local_snapshot(stage)
    np.testing.assert_allclose(after[_ORDER, 3, :3], values, atol=1e-6)
    untouched = [i for i in range(N) if i not in _ORDER]
    np.testing.assert_array_equal(after[untouched], before[untouched])
    np.testing.assert_allclose(after[_ORDER, :3, :3], before[_ORDER, :3, :3], atol=1e-12)


@pytest.mark.parametrize("bad", [N, 100, [0, N]], ids=["count", "large", "list"])
def test_out_of_range_index_raises(view: fv.UsdFrameView, bad: Any) -> None:
    """An index >= count raises IndexError naming the index and the count."""
    indices = bad if isinstance(bad, list) else [bad]
    worst = max(indices)
    with pytest.raises(IndexError, match=rf"index {worst}\b.*count={N}"):
        view.get_world_poses(indices)
    with pytest.raises(IndexError, match=rf"index {worst}\b"):
        view.set_local_poses(translations=np.zeros((len(indices), 3)), indices=indices)


def test_negative_index_raises(view: fv.UsdFrameView) -> None:
    """A negative index raises IndexError naming it (no Python-style wrap-around)."""
    with pytest.raises(IndexError, match=r"index -1 is negative.*count=8"):
        view.get_world_poses([0, -1])
    with pytest.raises(IndexError, match=r"-2"):
        view.get_local_scales(torch.tensor([-2]))


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        ([0.0, 1.0], TypeError),
        (np.array([0.5]), TypeError),
        (torch.tensor([1.0]), TypeError),
        (wp.array([1.0], dtype=wp.float32, device="cpu"), TypeError),
        ([True, False], TypeError),
        (np.array([True, False] * 4), TypeError),
        (np.zeros((2, 2), dtype=np.int32), ValueError),
        ("0", TypeError),
        (3, TypeError),
    ],
    ids=["float_list", "np_float", "torch_float", "wp_float", "bool_list", "np_mask", "2d", "str", "int"],
)
def test_bad_index_types_raise(view: fv.UsdFrameView, bad: Any, error: type[Exception]) -> None:
    """Float, boolean, string or scalar indices raise TypeError; 2-D indices raise ValueError."""
    with pytest.raises(error, match="indices"):
        view.get_world_poses(bad)


@pytest.mark.parametrize(
    "empty",
    [[], (), range(0), np.empty(0, dtype=np.int64), torch.empty(0, dtype=torch.int32)],
    ids=["list", "tuple", "range", "numpy", "torch"],
)
def test_empty_indices_are_a_no_op(stage: Usd.Stage, device: str, empty: Any) -> None:
    """Empty indices: getters return empty arrays on the device, setters change nothing."""
    with fv.UsdFrameView(ROBOTS, stage=stage, device=device) as view:
        pos, quat = view.get_world_poses(empty)
        assert pos.shape == (0,) and quat.shape == (0,) and pos.device == wp.get_device(device)
        assert view.get_local_poses(empty)[0].shape == (0,)
        assert view.get_world_scales(empty).shape == (0,)
        assert view.get_local_scales(empty).shape == (0,)
        before = _local_snapshot(stage)
        view.set_world_poses(np.zeros((0, 3)), np.zeros((0, 4)), indices=empty)
        view.set_local_poses(np.zeros((0, 3)), None, indices=empty)
        view.set_local_scales(np.zeros((0, 3)), indices=empty)
        np.testing.assert_array_equal(_local_snapshot(stage), before)


# ---------------------------------------------------------------- setter inputs


@pytest.mark.parametrize(
    ("method", "kwargs", "match"),
    [
        ("set_world_poses", {"positions": np.zeros((N, 4))}, r"positions: expected shape \(M, 3\)"),
        ("set_world_poses", {"orientations": np.zeros((N, 3))}, r"orientations: expected shape \(M, 4\)"),
        ("set_local_poses", {"translations": np.zeros((N - 1, 3))}, rf"translations: expected shape \({N}, 3\)"),
        ("set_local_poses", {"translations": np.zeros(3)}, r"translations: expected shape \(M, 3\)"),
        ("set_local_scales", {"scales": np.ones((2, 3)), "indices": [1]}, r"scales: expected shape \(1, 3\)"),
        ("set_local_scales", {"scales": None}, r"scales: expected an \(M, 3\) array"),
        ("set_local_poses", {"translations": torch.zeros(N, 2)}, r"translations: expected shape \(M, 3\)"),
    ],
    ids=["pos_width", "quat_width", "rows", "1d", "rows_indexed", "scales_none", "torch_width"],
)
def test_wrong_shape_raises_value_error(view: fv.UsdFrameView, method: str, kwargs: dict, match: str) -> None:
    """A setter input of the wrong shape raises ValueError naming the argument and the expected shape."""
    with pytest.raises(ValueError, match=match):
        getattr(view, method)(**kwargs)


@pytest.mark.parametrize(
    "bad",
    [np.zeros((N, 3), dtype=np.int64), torch.zeros((N, 3), dtype=torch.int32), wp.zeros((N, 3), dtype=wp.int32)],
    ids=["numpy", "torch", "warp"],
)
def test_integer_inputs_raise_type_error(view: fv.UsdFrameView, bad: Any) -> None:
    """Integer setter data raises TypeError naming the argument."""
    with pytest.raises(TypeError, match="positions"):
        view.set_world_poses(positions=bad)


@pytest.mark.parametrize("bad_value", [np.nan, np.inf, -np.inf], ids=["nan", "inf", "-inf"])
def test_non_finite_inputs_raise_and_write_nothing(stage: Usd.Stage, view: fv.UsdFrameView, bad_value: float) -> None:
    """NaN/inf in any row raises ValueError naming the argument and row, and nothing is written."""
    before = _local_snapshot(stage)
    pos = np.ones((N, 3))
    pos[3, 1] = bad_value
    with pytest.raises(ValueError, match=r"positions: row 3 holds a non-finite value.*nothing was written"):
        view.set_world_poses(positions=pos, orientations=random_quats(np.random.default_rng(0), N))
    quat = random_quats(np.random.default_rng(1), N)
    quat[6, 0] = bad_value
    with pytest.raises(ValueError, match=r"orientations: row 6"):
        view.set_local_poses(translations=np.ones((N, 3)), orientations=quat)
    with pytest.raises(ValueError, match=r"scales: row 3"):
        view.set_local_scales(pos)
    np.testing.assert_array_equal(_local_snapshot(stage), before)


def test_zero_quaternion_rejected(stage: Usd.Stage, view: fv.UsdFrameView) -> None:
    """A zero quaternion raises ValueError naming the row; nothing is written."""
    before = _local_snapshot(stage)
    quat = random_quats(np.random.default_rng(2), N)
    quat[2] = 0.0
    with pytest.raises(ValueError, match=r"orientations: row 2 holds a zero-norm quaternion"):
        view.set_world_poses(orientations=quat)
    np.testing.assert_array_equal(_local_snapshot(stage), before)


def test_non_unit_quaternion_is_normalised(stage: Usd.Stage, view: fv.UsdFrameView) -> None:
    """A quaternion of any norm > 0 (and either sign) is normalised: reads return the unit quaternion, w >= 0."""
    quat = random_quats(np.random.default_rng(3), N)
    view.set_local_poses(orientations=-3.5 * quat)
    assert_quats_close(view.get_local_poses()[1].numpy(), quat, atol=1e-6)
    _, truth, _ = decompose_all(_local_snapshot(stage))
    assert_quats_close(truth, quat, atol=1e-6)
    view.set_world_poses(orientations=0.25 * quat)
    assert_quats_close(view.get_world_poses()[1].numpy(), quat, atol=1e-5)


@pytest.mark.parametrize(
    "make",
    [
        lambda a: a,
        lambda a: a.astype(np.float32),
        lambda a: torch.from_numpy(a),
        lambda a: torch.from_numpy(a).float(),
        lambda a: wp.array(a.astype(np.float32), dtype=wp.vec3f, device="cpu"),
        lambda a: wp.array(a, dtype=wp.float64, device="cpu"),
        lambda a: a.tolist(),
        lambda a: np.asfortranarray(a),
    ],
    ids=["np64", "np32", "torch64", "torch32", "wp_vec3f", "wp_f64_2d", "nested_list", "fortran"],
)
def test_accepted_input_types_write_the_same(stage: Usd.Stage, view: fv.UsdFrameView, make: Callable) -> None:
    """float32/float64 NumPy, torch, Warp and nested lists are all accepted and write the same values."""
    values = np.arange(N * 3, dtype=np.float64).reshape(N, 3) / 7.0
    view.set_local_poses(translations=make(values))
    np.testing.assert_allclose(_local_snapshot(stage)[:, 3, :3], values.astype(np.float32), atol=1e-6)


# ---------------------------------------------------------------- zero-copy and buffers


def test_torch_inputs_reach_the_backend_without_a_copy(view: fv.UsdFrameView, monkeypatch: pytest.MonkeyPatch) -> None:
    """A contiguous float32 CPU torch tensor reaches the backend hook as a Warp array over the same memory."""
    seen = {}
    original = view._write_local_poses

    def spy(indices: Any, pos: wp.array, quat: wp.array) -> None:
        seen["pos"], seen["quat"] = pos.ptr, quat.ptr
        original(indices, pos, quat)

    monkeypatch.setattr(view, "_write_local_poses", spy)
    pos = torch.zeros((N, 3), dtype=torch.float32)
    quat = torch.tensor(random_quats(np.random.default_rng(4), N), dtype=torch.float32)
    view.set_local_poses(pos, quat)
    assert seen == {"pos": pos.data_ptr(), "quat": quat.data_ptr()}


def test_outputs_convert_to_torch_without_a_copy(view: fv.UsdFrameView) -> None:
    """wp.to_torch on a returned array shares its memory and has shape (M, 3) / (M, 4)."""
    pos, quat = view.get_world_poses()
    tpos, tquat = wp.to_torch(pos), wp.to_torch(quat)
    assert tpos.data_ptr() == pos.ptr and tquat.data_ptr() == quat.ptr
    assert tuple(tpos.shape) == (N, 3) and tuple(tquat.shape) == (N, 4)
    np.testing.assert_array_equal(tpos.numpy(), pos.numpy())


def test_output_buffers_are_reused(view: fv.UsdFrameView) -> None:
    """The view owns its output buffers: the next call of the same getter overwrites them (documented aliasing)."""
    first = view.get_world_poses()[0]
    second = view.get_world_poses([2])[0]
    assert second.ptr == first.ptr
    assert view.get_local_poses()[0].ptr != first.ptr


def test_reads_of_many_row_counts_stay_correct(view: fv.UsdFrameView, stage: Usd.Stage) -> None:
    """Indexed reads of more row counts than the view remembers output pairs for (and longer than the view, which
    grows its buffers): every read is right against pxr's XformCache, the full read after them too."""
    truth_p, truth_q, _s = decompose_all(xform_cache_world(stage, view.prim_paths))
    rng = np.random.default_rng(9)
    for size in [*range(1, 3 * N + 1), *rng.integers(1, 3 * N + 1, 30).tolist()] * 2:  # repeated indices too
        idx = rng.integers(0, N, size)
        pos, quat = view.get_world_poses(idx)
        np.testing.assert_allclose(pos.numpy(), truth_p[idx], atol=1e-5)
        assert_quats_close(quat.numpy(), truth_q[idx])
    pos, quat = view.get_world_poses()
    np.testing.assert_allclose(pos.numpy(), truth_p, atol=1e-5)
    assert_quats_close(quat.numpy(), truth_q)
    assert view.get_world_poses()[0].ptr == pos.ptr


# ---------------------------------------------------------------- lifecycle

_CALLS: dict[str, Callable[[fv.UsdFrameView], Any]] = {
    "get_world_poses": lambda v: v.get_world_poses(),
    "get_local_poses": lambda v: v.get_local_poses([0]),
    "get_world_scales": lambda v: v.get_world_scales(),
    "get_local_scales": lambda v: v.get_local_scales(),
    "set_world_poses": lambda v: v.set_world_poses(np.zeros((N, 3))),
    "set_local_poses": lambda v: v.set_local_poses(None, None),
    "set_local_scales": lambda v: v.set_local_scales(np.ones((N, 3))),
    "enter": lambda v: v.__enter__(),
}


@pytest.mark.parametrize("call", list(_CALLS))
def test_closed_view_raises(stage: Usd.Stage, call: str) -> None:
    """After close(), every method raises RuntimeError saying to create a new view."""
    view = fv.UsdFrameView(ROBOTS, stage=stage)
    view.close()
    assert view.is_closed
    with pytest.raises(RuntimeError, match=r"closed.*create a new view"):
        _CALLS[call](view)


def test_close_is_idempotent_and_context_manager_closes(stage: Usd.Stage) -> None:
    """close() twice is fine; leaving a ``with`` block closes the view; properties stay readable."""
    with fv.UsdFrameView(ROBOTS, stage=stage) as view:
        assert not view.is_closed and len(view) == N
    assert view.is_closed
    view.close()
    view.close()
    assert view.count == N and view.prim_paths == tuple(env_paths(N, "/Robot")) and "closed" in repr(view)


def test_with_block_closes_on_error(stage: Usd.Stage) -> None:
    """An exception inside ``with`` still closes the view."""
    with pytest.raises(KeyError), fv.UsdFrameView(ROBOTS, stage=stage) as view:
        raise KeyError("boom")
    assert view.is_closed

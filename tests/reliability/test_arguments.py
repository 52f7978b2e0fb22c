# SPDX-License-Identifier: Apache-2.0
"""Hostile arguments, property-based (hypothesis), against both backends: indices of every kind and value, setter
inputs of every container, dtype, shape and value. Each rejected call must write nothing (bit-identical reads)."""

from __future__ import annotations

from typing import Any

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
import warp as wp
from helpers import assert_quats_close
from hypothesis import event, given
from hypothesis import strategies as st

import frameview as fv

from ._support import PROPERTY, PROPERTY_FEW, ROBOTS, N, assert_unchanged, snapshot

torch = pytest.importorskip("torch")

HAS_CUDA = wp.get_cuda_device_count() > 0

# ---------------------------------------------------------------- index containers

SIGNED = {
    "list": lambda v, d: [int(i) for i in v],
    "tuple": lambda v, d: tuple(int(i) for i in v),
    "np_int8": lambda v, d: np.array(v, dtype=np.int8),
    "np_int16": lambda v, d: np.array(v, dtype=np.int16),
    "np_int32": lambda v, d: np.array(v, dtype=np.int32),
    "np_int64": lambda v, d: np.array(v, dtype=np.int64),
    "np_int64_strided": lambda v, d: np.repeat(np.array(v, dtype=np.int64), 2)[::2],
    "torch_int32": lambda v, d: torch.tensor(list(v), dtype=torch.int32),
    "torch_int64": lambda v, d: torch.tensor(list(v), dtype=torch.int64),
    "wp_int32": lambda v, d: wp.array(np.array(v, dtype=np.int32), dtype=wp.int32, device=d),
    "wp_int64": lambda v, d: wp.array(np.array(v, dtype=np.int64), dtype=wp.int64, device=d),
    "wp_int32_host": lambda v, d: wp.array(np.array(v, dtype=np.int32), dtype=wp.int32, device="cpu"),
}
UNSIGNED = {
    "np_uint8": lambda v, d: np.array(v, dtype=np.uint8),
    "np_uint32": lambda v, d: np.array(v, dtype=np.uint32),
    "np_uint64": lambda v, d: np.array(v, dtype=np.uint64),
    "torch_uint8": lambda v, d: torch.tensor(list(v), dtype=torch.uint8),
    "wp_uint32": lambda v, d: wp.array(np.array(v, dtype=np.uint32), dtype=wp.uint32, device=d),
}
INDEX_KINDS = {**SIGNED, **UNSIGNED}
WIDE = ["list", "tuple", "np_int64", "np_uint64", "torch_int64", "wp_int64", "np_int32", "wp_int32"]

GETTERS = ["get_world_poses", "get_local_poses", "get_world_scales", "get_local_scales"]
ROW = r"( \(row \d+\))?"
"""Indices on the view's device (a Warp array on the CPU for a CPU view) are checked by the kernels, whose message
also names the row."""


def _read(view: fv.BaseFrameView, getter: str, indices: Any = None) -> list[np.ndarray]:
    out = getattr(view, getter)(indices)
    return [a.numpy().copy() for a in (out if isinstance(out, tuple) else (out,))]


@pytest.fixture
def robots(make_view, stage) -> fv.BaseFrameView:
    """The 8 robots, through the backend and device under test."""
    return make_view(ROBOTS, stage)


# ---------------------------------------------------------------- valid indices


@PROPERTY
@given(
    rows=st.lists(st.integers(0, N - 1), max_size=2 * N),
    kind=st.sampled_from(list(INDEX_KINDS)),
    getter=st.sampled_from(GETTERS),
)
def test_any_index_container_selects_the_same_rows(
    robots: fv.BaseFrameView, device: str, rows: list[int], kind: str, getter: str
) -> None:
    """Every accepted index container (any integer dtype, any device, repeats, empty) reads rows[k] into row k."""
    full = _read(robots, getter)
    part = _read(robots, getter, INDEX_KINDS[kind](rows, device))
    for got, want in zip(part, full, strict=True):
        assert got.shape[0] == len(rows)
        np.testing.assert_array_equal(got, want[rows])


# ---------------------------------------------------------------- invalid indices


@st.composite
def bad_indices(draw: st.DrawFn) -> tuple[Any, type[Exception], str]:
    """An invalid ``indices`` argument, the error it must raise and a regex of the message."""
    case = draw(
        st.sampled_from(["too_large", "negative", "float", "mask", "two_d", "scalar", "zero_d", "junk", "huge"])
    )
    good = draw(st.lists(st.integers(0, N - 1), max_size=4))
    if case == "too_large":
        bad = draw(st.integers(N, 2**31 - 1))
        kind = draw(st.sampled_from(WIDE))
        return INDEX_KINDS[kind]([*good, bad], "cpu"), IndexError, rf"index {bad}{ROW} is out of range.*count={N}"
    if case == "negative":
        bad = draw(st.integers(-(2**31), -1))
        kind = draw(st.sampled_from(["list", "np_int32", "np_int64", "torch_int64", "wp_int32_host"]))
        return INDEX_KINDS[kind]([*good, bad], "cpu"), IndexError, rf"index {bad}{ROW} is negative"
    if case == "float":
        values = [float(i) for i in good] + [draw(st.floats(0, N - 1))]
        make = draw(
            st.sampled_from(
                [
                    list,
                    lambda v: np.array(v, dtype=np.float32),
                    lambda v: np.array(v, dtype=np.float64),
                    lambda v: torch.tensor(v),
                    lambda v: wp.array(np.array(v, dtype=np.float32), dtype=wp.float32, device="cpu"),
                ]
            )
        )
        return make(values), TypeError, "indices"
    if case == "mask":
        mask = draw(st.lists(st.booleans(), min_size=N, max_size=N))
        make = draw(st.sampled_from([list, np.array, lambda v: torch.tensor(v)]))
        return make(mask), TypeError, "indices.*(boolean|flatnonzero)"
    if case == "two_d":
        shape = draw(st.sampled_from([(1, 1), (2, 3), (N, 1)]))
        return np.zeros(shape, dtype=np.int64), ValueError, r"indices: expected a 1-D array"
    if case == "scalar":
        return draw(st.sampled_from([0, np.int64(1), 2.0])), TypeError, "indices"
    if case == "zero_d":
        return np.array(1), ValueError, "indices: expected a 1-D array"
    if case == "huge":
        return [2**70], TypeError, "indices"  # a Python int NumPy cannot hold: object dtype
    junk = draw(st.sampled_from(["0", b"01", [None], ["1"], {1, 2}, {"a": 1}, object(), [[0, 1], [2]]]))
    return junk, (TypeError, ValueError), "indices"


@PROPERTY
@given(bad=bad_indices(), call=st.sampled_from([*GETTERS, "set_world_poses", "set_local_poses", "set_local_scales"]))
def test_invalid_indices_raise_and_write_nothing(robots: fv.BaseFrameView, bad: tuple, call: str) -> None:
    """Out-of-range, negative, float, boolean, 2-D, scalar and junk indices raise IndexError/TypeError/ValueError
    naming ``indices`` from every getter and setter, and nothing is written."""
    indices, error, match = bad
    # data for every row: indices on the view's device are checked by the kernels, after the data's shape
    rows = indices.shape[0] if isinstance(indices, wp.array) and indices.ndim == 1 else 1
    before = snapshot(robots)
    with pytest.raises(error, match=match):
        if call.startswith("get"):
            getattr(robots, call)(indices)
        elif call == "set_local_scales":
            robots.set_local_scales(np.ones((rows, 3)), indices=indices)
        else:
            getattr(robots, call)(np.ones((rows, 3)), None, indices)
    assert_unchanged(before, snapshot(robots))


@PROPERTY
@given(rows=st.lists(st.integers(0, N - 1), min_size=2, max_size=2 * N).filter(lambda r: len(set(r)) < len(r)))
def test_duplicate_indices_in_a_write_raise(robots: fv.BaseFrameView, rows: list[int]) -> None:
    """A write that names an index twice raises ValueError naming it (which row would win is undefined on a GPU);
    nothing is written."""
    before = snapshot(robots)
    with pytest.raises(ValueError, match=r"indices: index \d+ appears \d+ times.*nothing was written"):
        robots.set_local_poses(np.ones((len(rows), 3)), None, rows)
    assert_unchanged(before, snapshot(robots))


@PROPERTY
@given(rows=st.lists(st.integers(-2, N + 1), min_size=1, max_size=2 * N), order=st.sampled_from(["as drawn", "sorted"]))
def test_host_index_checks_agree_with_a_reference(robots: fv.BaseFrameView, rows: list[int], order: str) -> None:
    """NumPy int64 indices of a write (sorted, as a reset passes them, or not): rejected exactly when a reference
    says so (a negative index, one past the view, one named twice), naming the offender; nothing written then."""
    if order == "sorted":
        rows = sorted(rows)
    indices = np.array(rows, dtype=np.int64)
    if min(rows) < 0:
        error, match = IndexError, rf"indices: index {min(rows)} is negative"
    elif max(rows) >= N:
        error, match = IndexError, rf"indices: index {max(rows)} is out of range"
    elif len(set(rows)) < len(rows):
        twice = "|".join(str(r) for r in set(rows) if rows.count(r) > 1)
        error, match = ValueError, rf"indices: index ({twice}) appears \d+ times.*nothing was written"
    else:
        error = None
    before = snapshot(robots)
    values = np.arange(3 * len(rows), dtype=np.float64).reshape(-1, 3)
    if error is None:
        robots.set_local_poses(values, None, indices)
        np.testing.assert_allclose(robots.get_local_poses(rows)[0].numpy(), values, atol=1e-5)
        return
    with pytest.raises(error, match=match):
        robots.set_local_poses(values, None, indices)
    assert_unchanged(before, snapshot(robots))


SIZES = [0.0, 1e-30, 1e-7, 5e-7, 7.0710677e-07, 1e-6, 1.5e-6, 1e-3, 1.0, 1e18, 1e30]
"""Quaternion scales: zero, below, at and above the zero-norm threshold (squared norm 1e-12), and past float32's
square."""
SPOILERS = [float("nan"), float("inf"), float("-inf"), 3.0e38, -3.0e38]
"""Values put into single cells: non-finite ones, and finite ones whose square or sum overflows float32."""


@PROPERTY
@given(
    quats=hnp.arrays(np.float32, (6, 4), elements=st.floats(-1.0, 1.0, width=32)),
    scales=hnp.arrays(np.float64, (6,), elements=st.sampled_from(SIZES)),
    spoiled=st.lists(st.tuples(st.integers(0, 5), st.integers(0, 3), st.sampled_from(SPOILERS)), max_size=3),
    width=st.sampled_from([3, 4]),
)
def test_host_rows_checks_agree_with_float64(
    quats: np.ndarray, scales: np.ndarray, spoiled: list[tuple[int, int, float]], width: int
) -> None:
    """Host rows of every size (tiny, near the zero-norm threshold, huge enough that a float32 square or sum
    overflows) with NaNs and infinities here and there: a write's quaternions (width 4) are rejected exactly when a
    row holds a non-finite value or its float64 squared norm is below 1e-12, positions (width 3) exactly when a row
    holds a non-finite value, naming the first such row and what is wrong with it."""
    from frameview._core.values import check_host_rows

    host = (quats * scales[:, None]).astype(np.float32)[:, :width].copy()
    for row, col, value in spoiled:
        host[row, col % width] = value
    wide = host.astype(np.float64)
    finite = np.isfinite(wide).all(axis=1)
    bad = ~finite
    if width == 4:
        bad |= finite & ((np.where(finite[:, None], wide, 0.0) ** 2).sum(axis=1) < 1.0e-12)
    name = "orientations" if width == 4 else "positions"
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        what = "a non-finite value" if not finite[row] else "a zero-norm quaternion"
        with pytest.raises(ValueError, match=rf"{name}: row {row} holds {what}"):
            check_host_rows(host, None, name, width == 4)
    else:
        check_host_rows(host, None, name, width == 4)


# ---------------------------------------------------------------- setter inputs

# (method, keyword, width): every setter input
TARGETS = [
    ("set_world_poses", "positions", 3),
    ("set_world_poses", "orientations", 4),
    ("set_local_poses", "translations", 3),
    ("set_local_poses", "orientations", 4),
    ("set_local_scales", "scales", 3),
]


def _container(kind: str, values: np.ndarray, device: str) -> Any:
    """``values`` (M, width) float64 in one of the accepted containers."""
    width = values.shape[1]
    if kind == "np64":
        return values
    if kind == "np32":
        return values.astype(np.float32)
    if kind == "np16":
        return values.astype(np.float16)
    if kind == "np_fortran":
        return np.asfortranarray(values)
    if kind == "list":
        return values.tolist()
    if kind == "torch32":
        return torch.tensor(values, dtype=torch.float32)
    if kind == "torch64_noncontig":
        return torch.tensor(np.repeat(values, 2, axis=0))[::2]
    if kind == "wp_f32_2d":
        return wp.array(values.astype(np.float32), dtype=wp.float32, device=device)
    if kind == "wp_f64_2d":
        return wp.array(values, dtype=wp.float64, device=device)
    if kind == "wp_vec":
        return wp.array(values.astype(np.float32), dtype=wp.vec3f if width == 3 else wp.quatf, device=device)
    raise AssertionError(kind)


CONTAINERS = ["np64", "np32", "np16", "np_fortran", "list", "torch32", "torch64_noncontig", "wp_f32_2d", "wp_f64_2d",
              "wp_vec"]  # fmt: skip


DEFECTS = ["none", "nan", "inf", "-inf", "overflow", "zero_quat", "width", "rows", "int"]


@st.composite
def setter_calls(draw: st.DrawFn, defect: str) -> dict[str, Any]:
    """A setter call with ``defect``: target, rows written (unique, or None for all), values and container."""
    method, keyword, width = draw(st.sampled_from([t for t in TARGETS if defect != "zero_quat" or t[2] == 4]))
    least = 0 if defect == "none" else 1  # a defect needs a row to sit in
    rows = draw(st.one_of(st.none(), st.lists(st.integers(0, N - 1), unique=True, min_size=least, max_size=N)))
    m = N if rows is None else len(rows)
    elements = st.floats(0.0625, 16.0, width=32) if keyword == "scales" else st.floats(-100.0, 100.0, width=32)
    values = draw(hnp.arrays(np.float64, (m, width), elements=elements))
    if width == 4:  # keep quaternions well away from the zero-norm threshold unless the defect asks for one
        values[np.linalg.norm(values, axis=1) < 1e-3] = [0.0, 0.0, 0.0, 1.0]
    bad_row = draw(st.integers(0, max(m - 1, 0)))
    return {"method": method, "keyword": keyword, "width": width, "rows": rows, "values": values,
            "container": draw(st.sampled_from(CONTAINERS)), "defect": defect,
            "bad_row": bad_row, "bad_col": draw(st.integers(0, width - 1))}  # fmt: skip


def _apply_defect(call: dict[str, Any]) -> tuple[np.ndarray, type[Exception] | None, str]:
    """The values to pass, and the error (and message regex) the defect must raise."""
    values, r, c, key = call["values"].copy(), call["bad_row"], call["bad_col"], call["keyword"]
    defect = call["defect"]
    if defect in ("nan", "inf", "-inf", "overflow"):
        values[r, c] = {"nan": np.nan, "inf": np.inf, "-inf": -np.inf, "overflow": 1e39}[defect]
        return values, ValueError, rf"{key}: row {r} holds a non-finite value.*nothing was written"
    if defect == "zero_quat":
        values[r] = 0.0
        return values, ValueError, rf"{key}: row {r} holds a zero-norm quaternion.*nothing was written"
    if defect == "width":
        return values[:, :-1], ValueError, rf"{key}: expected shape"
    if defect == "rows":
        return np.concatenate([values, values[:1]]), ValueError, rf"{key}: expected shape"
    if defect == "int":
        return values.astype(np.int64), TypeError, rf"{key}: expected"
    return values, None, ""


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")  # the 1e39 case, on purpose
@pytest.mark.parametrize("defect", DEFECTS)
@PROPERTY_FEW
@given(data=st.data())
def test_setter_inputs_are_written_exactly_or_rejected_whole(
    robots: fv.BaseFrameView, device: str, defect: str, data: st.DataObject
) -> None:
    """Any accepted container writes its rows (orientations normalised); NaN/inf (also float32 overflow), zero
    quaternions, wrong widths, wrong row counts and integer data raise before anything is written."""
    call = data.draw(setter_calls(defect))
    event(f"{call['method']}:{call['keyword']}:{call['container']}")
    values, error, match = _apply_defect(call)
    rows, key = call["rows"], call["keyword"]
    if error is TypeError or call["defect"] == "width":
        arg: Any = values  # NumPy carries the defect whatever container was drawn
    else:
        kind = call["container"]
        if (kind == "wp_vec" and call["defect"] == "rows") or (kind == "list" and values.shape[0] == 0):
            kind = "np64"  # a vector array cannot hold M+1 rows of a wrong width; [] has no width
        arg = _container(kind, values, device)
    before = snapshot(robots)
    method = getattr(robots, call["method"])
    if error is not None:
        with pytest.raises(error, match=match):
            method(**{key: arg, "indices": rows})
            robots.check()  # device data on CUDA: the kernels found it, the error surfaces here (docs/reliability.md)
        assert_unchanged(before, snapshot(robots))
        return
    method(**{key: arg, "indices": rows})
    after = snapshot(robots)
    sel = list(range(N)) if rows is None else rows
    others = [i for i in range(N) if i not in sel]
    precision = np.float16 if call["container"] == "np16" else np.float32
    expected = values.astype(precision).astype(np.float64)
    if key == "translations":
        np.testing.assert_allclose(after["local_pos"][sel], expected, atol=1e-4)
    elif key == "positions":
        np.testing.assert_allclose(after["world_pos"][sel], expected, atol=2e-4)
    elif key == "scales":
        np.testing.assert_allclose(after["local_scale"][sel], expected, rtol=1e-5)
    else:
        space = "world" if call["method"] == "set_world_poses" else "local"
        assert_quats_close(after[f"{space}_quat"][sel], expected, atol=5e-5)
    for name in ("local_pos", "local_quat", "local_scale"):  # rows not named keep their local transform exactly
        np.testing.assert_array_equal(after[name][others], before[name][others], err_msg=name)


@PROPERTY
@given(
    factor=st.floats(1e-5, 1e5).flatmap(lambda f: st.sampled_from([f, -f])),
    row=st.integers(0, N - 1),
    space=st.sampled_from(["world", "local"]),
)
def test_non_unit_quaternions_are_normalised(robots: fv.BaseFrameView, factor: float, row: int, space: str) -> None:
    """A quaternion of any norm from 1e-5 to 1e5 (either sign) writes the unit rotation; reads are unit, w >= 0."""
    q = np.array([[0.1, -0.7, 0.2, 0.6]])
    q /= np.linalg.norm(q)
    getattr(robots, f"set_{space}_poses")(None, q * factor, [row])
    got = getattr(robots, f"get_{space}_poses")([row])[1].numpy()
    assert_quats_close(got, q, atol=5e-5)
    assert got[0, 3] >= 0.0


# ---------------------------------------------------------------- documented examples


@pytest.mark.parametrize(
    ("scales", "expected"),
    [([0.0, 0.0, 0.0], [0.0, 0.0, 0.0]), ([-1.0, -1.0, -1.0], [-1.0, 1.0, 1.0]), ([-2.0, 1.0, 1.0], [-2.0, 1.0, 1.0])],
    ids=["zero", "negative", "mirror_x"],
)
def test_zero_and_negative_scales_are_accepted(robots: fv.BaseFrameView, scales: list, expected: list) -> None:
    """Zero and negative scales are valid USD: they are written; a mirror reads back on the x scale (no shear)."""
    robots.set_local_scales(np.array([scales]), indices=[3])
    np.testing.assert_allclose(robots.get_local_scales([3]).numpy()[0], expected, atol=1e-6)


def test_inputs_are_not_modified(robots: fv.BaseFrameView) -> None:
    """Setters never write into the caller's arrays (non-unit quaternions are normalised on a copy)."""
    q = np.tile([0.0, 0.0, 2.0, 2.0], (N, 1)).astype(np.float32)
    tq = torch.tensor(q)
    wq = wp.array(q, dtype=wp.quatf, device="cpu")
    for value in (q, tq, wq):
        robots.set_local_poses(None, value)
    np.testing.assert_array_equal(q, np.tile([0.0, 0.0, 2.0, 2.0], (N, 1)))
    np.testing.assert_array_equal(tq.numpy(), q)
    np.testing.assert_array_equal(wq.numpy(), q)


@pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device (wp.get_cuda_device_count() == 0)")
@pytest.mark.cuda
def test_inputs_on_another_device_are_copied(backend: str, stage) -> None:
    """Host inputs to a cuda:0 view and cuda:0 inputs to a CPU view are copied to the view's device and written."""
    from ._support import BACKENDS

    values = np.arange(3 * N, dtype=np.float32).reshape(N, 3) / 10.0
    for view_device, inputs in (
        ("cuda:0", [values, torch.tensor(values), wp.array(values, dtype=wp.vec3f, device="cpu")]),
        ("cpu", [wp.array(values, dtype=wp.vec3f, device="cuda:0")]
         + ([torch.tensor(values, device="cuda")] if torch.cuda.is_available() else [])),  # a CPU torch build: skip
    ):  # fmt: skip
        view = BACKENDS[backend](ROBOTS, stage, view_device)
        try:
            for value in inputs:
                view.set_local_poses(value, None)
                np.testing.assert_allclose(view.get_local_poses()[0].numpy(), values, atol=1e-6)
                view.set_local_poses(np.zeros((N, 3)), None)
        finally:
            view.close()

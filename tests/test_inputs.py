# SPDX-License-Identifier: Apache-2.0
"""The inputs users pass take the Warp-native path and give bit-identical poses.

Each test writes (or reads) once with the Warp-native inputs (``wp.vec3f`` / ``wp.quatf`` data, int32 Warp
indices, a ``wp.bool`` mask) on one stage and once with another input kind on an identical stage, and compares
every pose of both stages bit for bit; the Warp-native result itself is checked against float64 truth by
tests/test_no_lost_write.py. Backends: usd, fabric, newton; devices: CPU (CI) and CUDA.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
import warp as wp
from backends import BACKENDS
from conftest import HAS_CUDA
from helpers import build_env_stage, random_quats

import frameview as fv

NUM_ENVS = 8
ROBOTS = "/World/envs/env_.*/Robot"
CAMERAS = "/World/envs/env_.*/Robot/Camera"
ROWS = [6, 0, 3]
MASK = np.array([i in ROWS for i in range(NUM_ENVS)])

torch = pytest.importorskip("torch", reason="torch is not installed")


@pytest.fixture(params=[pytest.param(name, id=name) for name in ("usd", "fabric", "newton")])
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


class ProxyArrayLike:
    """What Isaac Lab 3's ``ProxyArray`` offers the views: the same memory as ``.warp`` and ``.torch``."""

    def __init__(self, array: wp.array) -> None:
        self.warp = array
        self.torch = wp.to_torch(array)


@pytest.fixture
def pair(backend: str, device: str) -> Iterator[Callable[[], tuple[fv.BaseFrameView, fv.BaseFrameView]]]:
    """``pair()``: (robots, cameras) views over a fresh copy of the same stage; closed at teardown."""
    views: list[fv.BaseFrameView] = []
    stages: list[Any] = []  # the embedded Fabric model lives as long as its pxr stage

    def make() -> tuple[fv.BaseFrameView, fv.BaseFrameView]:
        stage = build_env_stage(NUM_ENVS, seed=21, robot_scale="uniform", camera_rotation="random")
        stages.append(stage)
        views.extend([BACKENDS[backend](ROBOTS, stage, device), BACKENDS[backend](CAMERAS, stage, device)])
        return views[-2], views[-1]

    yield make
    for view in views:
        view.close()


def _snapshot(robots: fv.BaseFrameView, cams: fv.BaseFrameView) -> list[np.ndarray]:
    robots.check()
    out = []
    for view in (robots, cams):
        for arrays in (view.get_world_poses(), view.get_local_poses()):
            out.extend(a.numpy().copy() for a in arrays)
    return out


def _assert_identical(results: list[list[np.ndarray]], kind: str) -> None:
    """The arrays of the Warp-native run and of the ``kind`` run are equal bit for bit."""
    for a, b in zip(*results, strict=True):
        np.testing.assert_array_equal(a, b, err_msg=kind)


def _tdev(device: str) -> str:
    return "cpu" if device == "cpu" else "cuda:0"


def data_kinds(device: str) -> dict[str, Callable[[np.ndarray], Any]]:
    tdev = _tdev(device)

    def column_slice(a: np.ndarray) -> Any:
        state = torch.zeros((a.shape[0], 13), dtype=torch.float32, device=tdev)
        state[:, 3 : 3 + a.shape[1]] = torch.tensor(a, device=tdev)
        return state[:, 3 : 3 + a.shape[1]]

    def warp_strided(a: np.ndarray) -> wp.array:  # every other row of a (2M, w) float32 array
        wide = np.zeros((2 * a.shape[0], a.shape[1]), np.float32)
        wide[::2] = a
        return wp.array(wide, dtype=wp.float32, device=device)[::2]

    return {
        "warp_f32_2d": lambda a: wp.array(a, dtype=wp.float32, device=device),
        "warp_f32_2d_strided": warp_strided,
        "numpy": lambda a: a.copy(),
        "torch": lambda a: torch.tensor(a, device=tdev),
        "torch_float64": lambda a: torch.tensor(a, dtype=torch.float64, device=tdev),
        "torch_column_slice": column_slice,
        "torch_host": lambda a: torch.tensor(a),
        "proxy": lambda a: ProxyArrayLike(wp.array(a, dtype=wp.vec3f if a.shape[1] == 3 else wp.quatf, device=device)),
    }


def index_kinds(device: str) -> dict[str, Callable[[list[int]], Any]]:
    tdev = _tdev(device)
    return {
        "torch_int64": lambda r: torch.tensor(r, device=tdev),
        "torch_int32": lambda r: torch.tensor(r, dtype=torch.int32, device=tdev),
        "torch_int64_strided": lambda r: torch.tensor(r, device=tdev).repeat_interleave(2)[::2],
        "numpy_int64": lambda r: np.array(r),
        "proxy": lambda r: ProxyArrayLike(wp.array(r, dtype=wp.int32, device=device)),
    }


def mask_kinds(device: str) -> dict[str, Callable[[np.ndarray], Any]]:
    tdev = _tdev(device)
    return {
        "torch": lambda m: torch.tensor(m, device=tdev),
        "torch_strided": lambda m: torch.tensor(np.repeat(m, 2), device=tdev)[::2],
        "numpy": lambda m: m.copy(),
        "proxy": lambda m: ProxyArrayLike(wp.array(m, dtype=wp.bool, device=device)),
    }


def _native(device: str, p: np.ndarray, q: np.ndarray) -> tuple[wp.array, wp.array]:
    return wp.array(p, dtype=wp.vec3f, device=device), wp.array(q, dtype=wp.quatf, device=device)


@pytest.mark.parametrize("kind", list(data_kinds("cpu")))
def test_data_kinds_write_what_warp_writes(pair: Callable, device: str, kind: str) -> None:
    """Indexed, masked and scope writes with each data kind leave both stages bit-identical to the Warp-native
    writes, twice in a row (the same objects again)."""
    rng = np.random.default_rng(2)
    p, q = rng.uniform(-2, 2, (len(ROWS), 3)).astype(np.float32), random_quats(rng, len(ROWS)).astype(np.float32)
    pm, qm = rng.uniform(-2, 2, (NUM_ENVS, 3)).astype(np.float32), random_quats(rng, NUM_ENVS).astype(np.float32)
    make = data_kinds(device)[kind]
    ids = wp.array(ROWS, dtype=wp.int32, device=device)
    mask = wp.array(MASK, dtype=wp.bool, device=device)
    results = []
    for native in (True, False):
        robots, cams = pair()
        data = _native(device, p, q) if native else (make(p), make(q))
        full = _native(device, pm, qm) if native else (make(pm), make(qm))
        for _ in range(2):
            robots.set_world_poses(*data, indices=ids)
            robots.set_world_poses(*full, mask=mask)
            with cams.xform_local_space_writer() as w:
                w.set_poses(*data, indices=ids)
        results.append(_snapshot(robots, cams))
    _assert_identical(results, kind)


@pytest.mark.parametrize("kind", list(index_kinds("cpu")))
def test_index_kinds_read_and_write_what_warp_does(pair: Callable, device: str, kind: str) -> None:
    """Reads (poses, scales, CameraPoses) and writes with each index kind equal the Warp-native ones bit for bit."""
    rng = np.random.default_rng(3)
    p, q = _native(device, rng.uniform(-2, 2, (len(ROWS), 3)), random_quats(rng, len(ROWS)))
    native_ids = wp.array(ROWS, dtype=wp.int32, device=device)
    ids = index_kinds(device)[kind](ROWS)
    results = []
    for rows in (native_ids, ids):
        robots, cams = pair()
        robots.set_world_poses(p, q, indices=rows)
        reads = [a.numpy().copy() for a in cams.get_world_poses(rows)]
        reads.append(cams.get_world_scales(rows).numpy().copy())
        reads.extend(a.numpy().copy() for a in fv.CameraPoses(cams).read(rows, "ros"))
        results.append(reads + _snapshot(robots, cams))
    _assert_identical(results, kind)


@pytest.mark.parametrize("kind", list(mask_kinds("cpu")))
def test_mask_kinds_read_and_write_what_warp_does(pair: Callable, device: str, kind: str) -> None:
    rng = np.random.default_rng(4)
    p, q = _native(device, rng.uniform(-2, 2, (NUM_ENVS, 3)), random_quats(rng, NUM_ENVS))
    native_mask = wp.array(MASK, dtype=wp.bool, device=device)
    mask = mask_kinds(device)[kind](MASK)
    results = []
    for m in (native_mask, mask):
        robots, cams = pair()
        robots.set_world_poses(p, q, mask=m)
        reads = [a.numpy()[ROWS].copy() for a in cams.get_world_poses(mask=m)]
        reads.extend(a.numpy()[ROWS].copy() for a in fv.CameraPoses(cams).read(mask=m, convention="ros"))
        results.append(reads + _snapshot(robots, cams))
    _assert_identical(results, kind)


@pytest.mark.parametrize("dtype", ["int64", "int32_strided"])
def test_torch_ids_of_one_layout_refilled_between_calls(pair: Callable, device: str, dtype: str) -> None:
    """A torch index tensor refilled in place, and new tensor objects over the same memory (what a loop that
    rebuilds its ids gets back from torch's allocator), select the rows they hold now, across calls that narrow the
    ids in their own launches (getters, setters) and calls that do not (visibility, writer scopes), with host
    indices read in between."""
    tdev = _tdev(device)
    store = torch.zeros(2 * len(ROWS), dtype=torch.int64 if dtype == "int64" else torch.int32, device=tdev)
    ids = store if dtype == "int64" else store[::2]
    robots, cams = pair()
    native_robots, native_cams = pair()
    rng = np.random.default_rng(6)
    for step, rows in enumerate(([6, 0, 3], [1, 2, 7], [5, 4, 0])):
        ids[: len(ROWS)].copy_(torch.tensor(rows, dtype=store.dtype))
        passed = ids[: len(ROWS)] if step % 2 else ids[: len(ROWS)].view(-1)  # a new object each call
        native = wp.array(rows, dtype=wp.int32, device=device)
        p, q = _native(device, rng.uniform(-2, 2, (len(ROWS), 3)), random_quats(rng, len(ROWS)))
        results = []
        for view_pair, chosen in (((native_robots, native_cams), native), ((robots, cams), passed)):
            r, c = view_pair
            reads = [a.numpy().copy() for a in c.get_world_poses(chosen)]
            r.set_world_poses(p, q, indices=chosen)
            reads.append(c.get_world_scales([len(ROWS) - step]).numpy().copy())  # other rows through the buffers
            if c.backend != "newton":  # Newton reads visibility only
                c.set_visibility(step % 2 == 0, indices=chosen)
                reads.append(c.get_visibility().numpy().copy())
            with c.xform_local_space_writer() as w:
                w.set_poses(p.numpy() * 0.5, indices=chosen)
            reads.extend(a.numpy().copy() for a in c.get_local_poses(chosen))
            results.append(reads + _snapshot(r, c))
        _assert_identical(results, f"{dtype} step {step}")


def test_numpy_data_refilled_between_calls(pair: Callable, device: str) -> None:
    """One float32 NumPy buffer refilled in place for every write, and a new array over the same memory each other
    call (the CPU views read such data in place, remembered by its address): each write writes what the buffer holds
    at that call, as Warp arrays of those values do."""
    robots, cams = pair()
    native_robots, native_cams = pair()
    rng = np.random.default_rng(9)
    pos_buf = np.zeros((len(ROWS), 3), np.float32)
    quat_buf = np.zeros((len(ROWS), 4), np.float32)
    for step in range(4):
        pos_buf[:] = rng.uniform(-2, 2, (len(ROWS), 3))
        quat_buf[:] = random_quats(rng, len(ROWS))
        p, q = (pos_buf, quat_buf) if step % 2 else (pos_buf[:], quat_buf.reshape(len(ROWS), 4))
        native = _native(device, pos_buf.astype(np.float64), quat_buf.astype(np.float64))
        results = []
        for (r, c), data in (((native_robots, native_cams), native), ((robots, cams), (p, q))):
            r.set_world_poses(*data, indices=ROWS)
            results.append(_snapshot(r, c))
        _assert_identical(results, f"step {step}")


def test_the_same_data_objects_changed_between_calls(pair: Callable, device: str) -> None:
    """A reset loop passing the same tensor and Warp objects every call (the views remember zero-copy arrays by
    the tensors' layout): each write writes what the objects hold at that call, also after a tensor was pointed at
    other memory (``.data =``, its old memory kept alive with other values), given another dtype, or cut to fewer
    rows with ids to match; Warp data refilled in place; bit-identical to Warp arrays made anew each call."""
    tdev = _tdev(device)
    robots, cams = pair()
    native_robots, native_cams = pair()
    rng = np.random.default_rng(12)
    t_pos = torch.zeros((len(ROWS), 3), device=tdev)
    t_quat = torch.zeros((len(ROWS), 4), device=tdev)
    w_pos = wp.zeros(len(ROWS), dtype=wp.vec3f, device=device)
    t_ids = torch.tensor(ROWS, device=tdev)
    kept = []  # the memory a tensor pointed at before: alive, holding the values of the step before
    for step in range(5):
        rows = ROWS if step < 4 else ROWS[:2]
        p = rng.uniform(-2, 2, (len(rows), 3)).astype(np.float32)
        q = random_quats(rng, len(rows)).astype(np.float32)
        if step in (0, 1):  # refilled in place
            t_pos.copy_(torch.tensor(p, device=tdev))
            t_quat.copy_(torch.tensor(q, device=tdev))
        elif step == 2:  # pointed at other memory of the same layout
            kept.append(t_pos.detach())
            t_pos.data = torch.tensor(p, device=tdev)
            t_quat.copy_(torch.tensor(q, device=tdev))
        elif step == 3:  # another dtype, the same shape
            kept.append(t_quat.detach())
            t_pos.copy_(torch.tensor(p, device=tdev))
            t_quat.data = torch.tensor(q, dtype=torch.float64, device=tdev)
        else:  # fewer rows: the same objects, resized, and ids to match
            t_pos.data = torch.tensor(p, device=tdev)
            t_quat.data = torch.tensor(q, device=tdev)
            t_ids.data = torch.tensor(rows, device=tdev)
        w_pos.assign(p) if step < 4 else None
        results = []
        for (r, c), data in (((native_robots, native_cams), (*_native(device, p, q), rows)),
                             ((robots, cams), (t_pos, t_quat, t_ids))):  # fmt: skip
            r.set_world_poses(*data)
            if step < 4:
                c.set_world_poses(w_pos if c is cams else data[0], indices=[1, 2, 5])
            results.append(_snapshot(r, c))
        _assert_identical(results, f"step {step}")


def _refill(buffer: Any, values: np.ndarray) -> None:
    """Write ``values`` into a data, index or mask object of any kind in place (its memory and layout kept)."""
    if isinstance(buffer, ProxyArrayLike):
        buffer = buffer.warp
    if isinstance(buffer, np.ndarray):
        buffer[:] = values
    elif isinstance(buffer, wp.array):
        wp.copy(buffer, wp.array(values, dtype=buffer.dtype, device=buffer.device))
    else:
        buffer.copy_(torch.tensor(values, dtype=buffer.dtype, device=buffer.device))


REFILLED_ROWS = ([6, 0, 3], [1, 2, 7], [5, 4, 0], [7, 3, 2])


@pytest.mark.parametrize("ids_kind", ["torch_int64", "torch_int32", "warp_int32", "warp_int64"])
@pytest.mark.parametrize("kind", list(data_kinds("cpu")))
def test_buffers_refilled_in_place_write_their_values_each_call(
    pair: Callable, device: str, kind: str, ids_kind: str
) -> None:
    """A reset loop's buffers (data of each kind, ids, a mask), the same objects refilled in place before every
    call: indexed, masked, all-row and writer-scope writes write what the buffers hold at that call (a view reads
    device buffers of a layout it has seen without going through its argument handling again; float64 tensors,
    host data and strided Warp data are converted anew), bit-identical to Warp arrays made anew each call."""
    tdev = _tdev(device)
    make = data_kinds(device)[kind]
    rng = np.random.default_rng(14)
    first = REFILLED_ROWS[0]
    ids = {
        "torch_int64": lambda: torch.tensor(first, device=tdev),
        "torch_int32": lambda: torch.tensor(first, dtype=torch.int32, device=tdev),
        "warp_int32": lambda: wp.array(first, dtype=wp.int32, device=device),
        "warp_int64": lambda: wp.array(first, dtype=wp.int64, device=device),
    }[ids_kind]()
    mask = torch.tensor(MASK, device=tdev) if ids_kind.startswith("torch") else wp.array(MASK, device=device)
    n = len(first)
    p, q, pm, qm = make(np.zeros((n, 3))), make(np.zeros((n, 4))), make(np.zeros((NUM_ENVS, 3))), make(
        np.zeros((NUM_ENVS, 4)))  # fmt: skip
    robots, cams = pair()
    native_robots, native_cams = pair()
    for step, rows in enumerate(REFILLED_ROWS):
        values = [rng.uniform(-2, 2, (n, 3)), random_quats(rng, n), rng.uniform(-2, 2, (NUM_ENVS, 3)),
                  random_quats(rng, NUM_ENVS)]  # fmt: skip
        selected = np.isin(np.arange(NUM_ENVS), rows[::-1][:2])
        for buffer, value in zip((p, q, pm, qm, ids, mask), (*values, np.array(rows), selected), strict=True):
            _refill(buffer, value)
        native = [_native(device, values[0], values[1]), _native(device, values[2], values[3])]
        native_rows = wp.array(rows, dtype=wp.int32, device=device), wp.array(selected, device=device)
        results = []
        for (r, c), (data, full), (idx, m) in (
            ((native_robots, native_cams), native, native_rows),
            ((robots, cams), ((p, q), (pm, qm)), (ids, mask)),
        ):
            for _ in range(2):  # the second call finds the first's layout
                r.set_world_poses(*data, indices=idx)
                r.set_world_poses(*full, mask=m)
                c.set_local_poses(*full)
                with c.xform_world_space_writer() as w:
                    w.set_poses(*data, indices=idx)
            results.append(_snapshot(r, c))
        _assert_identical(results, f"{kind} step {step}")


def test_views_of_one_storage_in_turn_write_their_own_rows(pair: Callable, device: str) -> None:
    """Tensor views that share their first address (``buf[:3]``, ``buf[:2]``, ``buf[::2]``) taken in turns for
    data and ids: each write writes the rows and values of the view passed (a view's layout, not its address
    alone, decides how it is read), bit-identical to Warp arrays made anew each call."""
    tdev = _tdev(device)
    pos_buf, quat_buf = torch.zeros((6, 3), device=tdev), torch.zeros((6, 4), device=tdev)
    ids_buf = torch.zeros(6, dtype=torch.int64, device=tdev)
    robots, cams = pair()
    native_robots, native_cams = pair()
    rng = np.random.default_rng(16)
    for step, cut in enumerate([slice(0, 3), slice(0, 2), slice(0, 6, 2), slice(0, 3), slice(0, 6, 2)]):
        ids_buf.copy_(torch.tensor(rng.permutation(NUM_ENVS)[:6], device=tdev))
        pos_buf.copy_(torch.tensor(rng.uniform(-2, 2, (6, 3)), device=tdev))
        quat_buf.copy_(torch.tensor(random_quats(rng, 6), device=tdev))
        p, q, ids = pos_buf[cut], quat_buf[cut], ids_buf[cut]
        native = (*_native(device, p.cpu().numpy(), q.cpu().numpy()), ids.cpu().numpy().tolist())
        results = []
        for (r, c), data in (((native_robots, native_cams), native), ((robots, cams), (p, q, ids))):
            for _ in range(2):
                r.set_world_poses(*data)
            results.append(_snapshot(r, c))
        _assert_identical(results, f"step {step}")


@pytest.mark.parametrize("fault", ["non_finite", "zero_quaternion", "out_of_range", "negative", "duplicate"])
def test_numpy_writes_with_a_bad_value_raise_at_the_call_and_write_nothing(pair: Callable, device: str,
                                                                           fault: str) -> None:  # fmt: skip
    """NumPy ids and float32 data (the host kinds a CUDA view stages without converting them) with one bad value or
    index: the call itself raises, names the argument, and writes nothing; the next good write writes."""
    robots, cams = pair()
    rng = np.random.default_rng(17)
    ids = np.array(ROWS, dtype=np.int64)
    pos = rng.uniform(-2, 2, (len(ROWS), 3)).astype(np.float32)
    quat = random_quats(rng, len(ROWS)).astype(np.float32)
    robots.set_world_poses(pos, quat, ids)
    before = _snapshot(robots, cams)
    bad_pos, bad_quat, bad_ids = pos.copy(), quat.copy(), ids.copy()
    error, match = {
        "non_finite": (ValueError, r"positions: row 1 .*non-finite"),
        "zero_quaternion": (ValueError, r"orientations: row 2 .*zero-norm"),
        "out_of_range": (IndexError, rf"index {NUM_ENVS} .*out of range"),
        "negative": (IndexError, r"index -1 .*(negative|out of range)"),
        "duplicate": (ValueError, rf"index {ROWS[0]} .*(more than|appears 2)"),
    }[fault]
    if fault == "non_finite":
        bad_pos[1, 2] = np.inf
    elif fault == "zero_quaternion":
        bad_quat[2] = 0.0
    else:
        bad_ids[2 if fault == "duplicate" else 0] = {"out_of_range": NUM_ENVS, "negative": -1}.get(fault, ROWS[0])
    with pytest.raises(error, match=match):
        robots.set_world_poses(bad_pos, bad_quat, bad_ids)
    _assert_identical([before, _snapshot(robots, cams)], fault)
    robots.set_world_poses(pos[::-1].copy(), quat, ids)
    native_robots, native_cams = pair()
    native_robots.set_world_poses(*_native(device, pos, quat), ROWS)
    native_robots.set_world_poses(*_native(device, pos[::-1], quat), ROWS)
    _assert_identical([_snapshot(native_robots, native_cams), _snapshot(robots, cams)], f"{fault}, then a good write")


@pytest.mark.parametrize("fault", ["non_finite", "zero_quaternion", "out_of_range", "duplicate"])
def test_bad_values_refilled_into_known_buffers_raise_and_write_nothing(pair: Callable, device: str,
                                                                        fault: str) -> None:  # fmt: skip
    """Buffers a view has written from before, refilled in place with a bad value or index: the write raises (at
    the call, or on CUDA at ``check()``), names the argument, and writes nothing."""
    tdev = _tdev(device)
    robots, cams = pair()
    rng = np.random.default_rng(15)
    t_pos = torch.tensor(rng.uniform(-2, 2, (len(ROWS), 3)), dtype=torch.float32, device=tdev)
    t_quat = torch.tensor(random_quats(rng, len(ROWS)), dtype=torch.float32, device=tdev)
    t_ids = torch.tensor(ROWS, device=tdev)
    for _ in range(3):
        robots.set_world_poses(t_pos, t_quat, t_ids)
    before = _snapshot(robots, cams)
    bad, error, match = {
        "non_finite": (lambda: t_pos[1].fill_(float("nan")), ValueError, r"positions: row 1 .*non-finite"),
        "zero_quaternion": (lambda: t_quat[2].zero_(), ValueError, r"orientations: row 2 .*zero-norm"),
        "out_of_range": (lambda: t_ids[0].fill_(NUM_ENVS), IndexError, rf"index {NUM_ENVS} .*out of range"),
        "duplicate": (lambda: t_ids[2].fill_(ROWS[0]), ValueError, rf"index {ROWS[0]} .*(more than|appears 2)"),
    }[fault]
    bad()
    with pytest.raises(error, match=match):
        robots.set_world_poses(t_pos, t_quat, t_ids)
        robots.check()
    _assert_identical([before, _snapshot(robots, cams)], fault)


def test_as_torch_is_a_remembered_zero_copy_view(pair: Callable, device: str) -> None:
    """``fv.as_torch`` of a getter's output shares its memory, is the same tensor on the next call, and shows the
    next call's values (outputs are reused buffers)."""
    robots, cams = pair()
    pos, quat = cams.get_world_poses()
    pos_t, quat_t = fv.as_torch(pos), fv.as_torch(quat)
    assert tuple(pos_t.shape) == (NUM_ENVS, 3) and tuple(quat_t.shape) == (NUM_ENVS, 4)
    np.testing.assert_array_equal(pos_t.cpu().numpy(), pos.numpy())
    np.testing.assert_array_equal(quat_t.cpu().numpy(), quat.numpy())
    robots.set_world_poses(np.zeros((NUM_ENVS, 3), np.float32))
    pos2, _ = cams.get_world_poses()
    assert fv.as_torch(pos2) is pos_t
    np.testing.assert_array_equal(pos_t.cpu().numpy(), pos2.numpy())


@pytest.mark.cuda
@pytest.mark.skipif(not HAS_CUDA, reason="needs CUDA")
def test_reset_with_torch_tensors_captured_in_a_torch_graph(backend: str) -> None:
    """A reset written with torch tensors (data, int64 ids) and read, captured with ``torch.cuda.graph`` on torch's
    stream, replayed with fresh tensor contents: the same poses as the same calls made directly."""
    if backend == "usd":
        pytest.skip("the usd backend works on the host: nothing to capture")
    stage_graph = build_env_stage(NUM_ENVS, seed=5, robot_scale="uniform")
    stage_direct = build_env_stage(NUM_ENVS, seed=5, robot_scale="uniform")
    rng = np.random.default_rng(6)
    views = [BACKENDS[backend](path, stage, "cuda:0") for stage in (stage_graph, stage_direct)
             for path in (ROBOTS, CAMERAS)]  # fmt: skip
    robots_g, cams_g, robots_d, cams_d = views
    try:
        ids = torch.tensor(ROWS, device="cuda:0")
        pos = torch.zeros((len(ROWS), 3), device="cuda:0")
        quat = torch.zeros((len(ROWS), 4), device="cuda:0")
        quat[:, 3] = 1.0
        out = torch.zeros((len(ROWS), 3), device="cuda:0")

        def reset(robots: fv.BaseFrameView, cams: fv.BaseFrameView) -> None:
            robots.set_world_poses(pos, quat, indices=ids)
            out.copy_(fv.as_torch(cams.get_world_poses(ids)[0]))

        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream), wp.ScopedStream(wp.stream_from_torch(stream)):
            reset(robots_g, cams_g)  # warm-up outside the capture: buffers, recorded launches
            stream.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, stream=stream):
                reset(robots_g, cams_g)
        for _ in range(3):
            pos.copy_(torch.tensor(rng.uniform(-2, 2, (len(ROWS), 3)), device="cuda:0"))
            quat.copy_(torch.tensor(random_quats(rng, len(ROWS)), device="cuda:0"))
            graph.replay()
            torch.cuda.synchronize()
            robots_g.check()
            replayed = out.cpu().numpy().copy()
            reset(robots_d, cams_d)
            torch.cuda.synchronize()
            np.testing.assert_array_equal(replayed, out.cpu().numpy())
            np.testing.assert_array_equal(_snapshot(robots_g, cams_g)[0], _snapshot(robots_d, cams_d)[0])
    finally:
        for view in views:
            view.close()


@pytest.mark.cuda
@pytest.mark.skipif(not HAS_CUDA, reason="needs CUDA")
def test_numpy_writes_back_to_back_each_write_their_values(backend: str) -> None:
    """Host data and host indices for a CUDA view go through pinned staging buffers: many writes, each of other
    rows and values (int32 and int64 ids, float32 and float64 data), leave the stage as the last write of each row
    put it (float64 truth of the positions written: a robot has no parent offset on this stage)."""
    stage = build_env_stage(NUM_ENVS, seed=8, robot_scale="uniform")
    robots = BACKENDS[backend](ROBOTS, stage, "cuda:0")
    try:
        rng = np.random.default_rng(12)
        expected = robots.get_world_poses()[0].numpy().astype(np.float64)
        for step in range(40):
            rows = rng.choice(NUM_ENVS, 3, replace=False).astype(np.int64 if step % 2 else np.int32)
            pos = rng.uniform(-4, 4, (3, 3)).astype(np.float32 if step % 4 < 2 else np.float64)
            robots.set_world_poses(pos, random_quats(rng, 3).astype(pos.dtype), indices=rows)
            expected[rows] = pos
        np.testing.assert_allclose(robots.get_world_poses()[0].numpy(), expected, atol=1e-5)
        robots.check()
    finally:
        robots.close()


@pytest.mark.cuda
@pytest.mark.skipif(not HAS_CUDA, reason="needs CUDA")
def test_host_data_inside_a_capture_is_refused(backend: str) -> None:
    """Inside a CUDA graph capture, host indices or data are refused with a message naming the argument (a replay
    would copy the staging buffer's contents at that time, not the values passed); device inputs are captured."""
    if backend == "usd":
        pytest.skip("the usd backend works on the host: nothing to capture")
    stage = build_env_stage(NUM_ENVS, seed=9, robot_scale="uniform")
    robots = BACKENDS[backend](ROBOTS, stage, "cuda:0")
    try:
        pos = np.zeros((len(ROWS), 3), np.float32)
        ids = wp.array(ROWS, dtype=wp.int32, device="cuda:0")
        robots.set_world_poses(pos, indices=ROWS)  # warm: buffers made outside the capture
        robots.get_world_poses(ROWS)
        for call, match in ((lambda: robots.get_world_poses(ROWS), "indices"),
                            (lambda: robots.set_world_poses(pos, indices=ids), "positions")):  # fmt: skip
            with (pytest.raises(RuntimeError, match=f"{match}: host data"),
                  wp.ScopedCapture(device="cuda:0", force_module_load=False)):  # fmt: skip
                call()
        robots.get_world_poses(ids)  # the view still works
        robots.check()
    finally:
        robots.close()

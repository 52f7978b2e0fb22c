# SPDX-License-Identifier: Apache-2.0
"""Every integer index kind x every value class x every getter of every view kind: a right row or an IndexError.

Index kinds: each Warp integer dtype (plain, and a strided column of a 2-D array for the 32- and 64-bit ones),
torch's integer dtypes (plain and a column slice), NumPy's integer dtypes, and a list. Value classes: in range,
negative, ``2**31``, ``2**32``, ``2**32 + 3`` (the low 32 bits are a valid row), ``-2**32`` (likewise) and
``2**64 - 1``, each where the dtype holds it. Each call reads rows ``[1, v]``: in range, row ``k`` must equal row
``indices[k]`` of a full read (the full reads are checked against float64 truth and the engines' own arrays by the
backend suites); out of range, the call (on CUDA the view's ``check()``) raises ``IndexError`` naming the index. Before
the fix, 64-bit values beyond int32 read another env's row in every physics view getter.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
import warp as wp
from helpers import build_env_stage

import frameview as fv

ENVS = 12
_WARP = (wp.int8, wp.uint8, wp.int16, wp.uint16, wp.int32, wp.uint32, wp.int64, wp.uint64)
_NUMPY = (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64)
_VALUES = (3, -1, 2**31, 2**32, 2**32 + 3, -(2**32), 2**64 - 1)


def _fits(dtype: Any, v: int) -> bool:
    info = np.iinfo(dtype)
    return info.min <= v <= info.max


def index_kinds(device: str) -> Iterator[tuple[str, Callable[[list[int]], Any] | None, Any]]:
    """(name, make(values) -> indices, numpy dtype that must hold the values)."""
    for wdt, ndt in zip(_WARP, _NUMPY, strict=True):
        def plain(v: list[int], w: Any = wdt, n: Any = ndt) -> wp.array:
            return wp.array(np.array(v, dtype=n), dtype=w, device=device)

        yield f"wp.{wdt.__name__}", plain, ndt
        if wdt in (wp.int32, wp.int64, wp.uint64):
            def column(v: list[int], w: Any = wdt, n: Any = ndt) -> wp.array:
                a = np.zeros((len(v), 2), dtype=n)
                a[:, 1] = v
                return wp.array(a, dtype=w, device=device)[:, 1]

            yield f"wp.{wdt.__name__} column", column, ndt
        yield f"np.{ndt.__name__}", (lambda v, n=ndt: np.array(v, dtype=n)), ndt
    yield "list", (lambda v: list(v)), np.int64
    try:
        import torch
    except ImportError:
        return
    tdev = "cpu" if device == "cpu" else "cuda:0"
    for tdt, ndt in ((torch.int8, np.int8), (torch.uint8, np.uint8), (torch.int16, np.int16),
                     (torch.int32, np.int32), (torch.int64, np.int64)):  # fmt: skip
        yield f"{tdt}", (lambda v, t=tdt: torch.tensor(v, dtype=t, device=tdev)), ndt

        def tcolumn(v: list[int], t: Any = tdt) -> Any:
            full = torch.zeros((len(v), 3), dtype=t, device=tdev)
            full[:, 2] = torch.tensor(v, dtype=t, device=tdev)
            return full[:, 2]

        yield f"{tdt} column", tcolumn, ndt


def _host(out: Any) -> list[np.ndarray]:
    outs = out if isinstance(out, tuple) else (out,)
    return [np.asarray(o.numpy()).copy() for o in outs]


def sweep(getters: dict[str, Callable[..., Any]], check: Callable[[], None], device: str, count: int) -> None:
    """Run every getter with every index kind and value class; collect every wrong result."""
    problems: list[str] = []
    full = {name: _host(get(None)) for name, get in getters.items()}
    for kind, make, ndt in index_kinds(device):
        for v in _VALUES:
            if not _fits(ndt, v) or not _fits(ndt, 1):
                continue
            indices = make([1, v])
            for name, get in getters.items():
                what = f"{name}(indices={kind} [1, {v}])"
                if 0 <= v < count:
                    got = _host(get(indices))
                    for g, f in zip(got, full[name], strict=True):
                        if not np.array_equal(g, f[[1, v]]):
                            problems.append(f"{what}: wrong rows")
                    continue
                try:
                    get(indices)
                    check()
                except IndexError as exc:
                    if str(v) not in str(exc):
                        problems.append(f"{what}: IndexError without the index: {exc}")
                    continue
                except Exception as exc:
                    problems.append(f"{what}: {type(exc).__name__} instead of IndexError: {exc}")
                    continue
                problems.append(f"{what}: no error")
    assert not problems, f"{len(problems)} wrong results, first ones:\n  " + "\n  ".join(problems[:12])


# ---------------------------------------------------------------- frame views


def _frame_views(device: str) -> Iterator[tuple[str, fv.BaseFrameView]]:
    from backends import BACKENDS

    stage = build_env_stage(ENVS, seed=5)
    for name in ("usd", "fabric", "newton", "ovstage"):
        try:
            view = BACKENDS[name]("/World/envs/env_.*/Robot/Camera", stage, device)
        except pytest.skip.Exception:
            continue
        yield name, view


def test_frame_view_getters(device: str) -> None:
    """Frame views (usd, fabric, newton and ovstage where installed): every getter, every index kind and value."""
    for name, view in _frame_views(device):
        try:
            getters = {f"{name}.{g}": getattr(view, g) for g in
                       ("get_world_poses", "get_local_poses", "get_world_scales", "get_local_scales")}  # fmt: skip
            sweep(getters, view.check, device, view.count)
        finally:
            view.close()


def test_frame_view_setter_rejects_64_bit_indices(device: str) -> None:
    """A world write with 64-bit indices beyond int32 raises naming the index and writes nothing."""
    for name, view in _frame_views(device):
        try:
            before = [a.numpy().copy() for a in view.get_world_poses()]
            for v in (2**32, 2**32 + 3, -(2**32)):
                host = np.array([1, v], dtype=np.int64)
                for indices in (host, wp.array(host, dtype=wp.int64, device=device)):
                    with pytest.raises(IndexError, match=str(v)):
                        view.set_world_poses(np.ones((2, 3), np.float32), None, indices=indices)
                        view.check()
            for b, a in zip(before, view.get_world_poses(), strict=True):
                np.testing.assert_array_equal(a.numpy(), b, err_msg=f"{name}: a rejected write changed a pose")
        finally:
            view.close()


# ---------------------------------------------------------------- physics views (Newton)


@pytest.fixture
def newton_sim(device: str) -> Any:
    pytest.importorskip("newton")
    from test_physics_newton import Sim

    sim = Sim(device, envs=ENVS)
    sim.step(3)
    qdd = np.random.default_rng(0).normal(size=(sim.model.body_count, 6)).astype(np.float32)
    sim.state.body_qdd = wp.array(qdd, dtype=wp.spatial_vectorf, device=device)
    return sim


def test_rigid_body_view_getters(device: str, newton_sim: Any) -> None:
    """NewtonRigidBodyView: every getter."""
    view = fv.NewtonRigidBodyView("/World/envs/env_.*/Robot/link1", **newton_sim.engine())
    getters = {f"bodies.{g}": getattr(view, g) for g in (
        "get_world_poses", "get_velocities", "get_accelerations", "get_masses", "get_inv_masses", "get_inertias",
        "get_coms")}  # fmt: skip
    sweep(getters, view.check, device, view.count)


def test_articulation_view_and_reader_getters(device: str, newton_sim: Any) -> None:
    """NewtonArticulationView: every getter; its JointStateReader."""
    view = fv.NewtonArticulationView("/World/envs/env_.*/Robot", **newton_sim.engine())
    getters: dict[str, Callable[..., Any]] = {f"articulations.{g}": getattr(view, g) for g in (
        "get_root_poses", "get_root_velocities", "get_link_poses", "get_link_velocities", "get_dof_positions",
        "get_dof_velocities", "get_dof_efforts")}  # fmt: skip
    reader = view.joint_state_reader()
    getters["reader.read"] = lambda idx: tuple(reader.read(idx)[1:])
    sweep(getters, view.check, device, view.count)

# SPDX-License-Identifier: Apache-2.0
"""Threads, on both backends: calls from several threads are serialised (a lock per stage / process), each thread
gets its own output buffers, and every returned array holds one consistent state; nothing crashes."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import numpy as np
import pytest
from helpers import build_env_stage

import frameview as fv
from frameview.fabric.providers.memory import attach

from ._support import BACKENDS, ROBOTS

M = 16
SECONDS = 1.0  # per stress test and backend; iteration counts are bounded too


def _run_threads(targets: list[Callable[[], None]]) -> list[BaseException]:
    """Run ``targets`` in threads, join them, return the exceptions they raised."""
    errors: list[BaseException] = []

    def wrap(fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                fn()
            except BaseException as exc:
                errors.append(exc)

        return run

    threads = [threading.Thread(target=wrap(t)) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
        assert not t.is_alive(), "a thread hung"
    return errors


def test_readers_and_a_writer_on_one_view_see_whole_states(backend: str, device: str) -> None:
    """One thread writes whole states k (all rows, in one call, in varying row orders) while three threads read full
    and indexed world poses: every returned array is one state (all rows from the same k, each row its own prim),
    and each thread keeps its own output buffers."""
    stage = build_env_stage(M, seed=41, robot_scale="uniform")
    view = BACKENDS[backend](ROBOTS, stage, device)
    base = np.stack([np.arange(M), -2.0 * np.arange(M), np.zeros(M)], axis=1)
    view.set_world_poses(base, None)
    deadline = time.perf_counter() + SECONDS
    written: set[int] = {0}
    reads = [0, 0, 0]
    buffers: dict[int, set[int]] = {}

    def writer() -> None:
        rng = np.random.default_rng(0)
        for k in range(1, 100_000):
            if time.perf_counter() > deadline:
                return
            written.add(k)
            order = rng.permutation(M) if k % 2 else None
            rows = base if order is None else base[order]
            view.set_world_poses(rows + np.array([0.0, 0.0, float(k)]), None, order)

    def reader(j: int) -> Callable[[], None]:
        def run() -> None:
            rng = np.random.default_rng(j + 1)
            while time.perf_counter() < deadline and reads[j] < 100_000:
                rows = None if j == 0 else rng.permutation(M)[: int(rng.integers(1, M + 1))]
                pos = view.get_world_poses(rows)[0]
                buffers.setdefault(j, set()).add(pos.ptr)
                got = fv.to_numpy(pos)
                want = base if rows is None else base[rows]
                np.testing.assert_allclose(got[:, :2], want[:, :2], atol=1e-3, err_msg=f"reader {j}: wrong prims")
                z = got[:, 2]
                assert np.ptp(z) < 1e-3, f"reader {j}: rows from different writes {np.unique(np.round(z))}"
                assert round(float(z[0])) in written, f"reader {j}: a state never written ({z[0]})"
                reads[j] += 1

        return run

    try:
        errors = _run_threads([writer, reader(0), reader(1), reader(2)])
        assert not errors, errors[0]
        assert min(reads) > 0 and len(written) > 1
        owners = [b for b in buffers.values()]
        assert all(not (a & b) for i, a in enumerate(owners) for b in owners[i + 1 :]), "threads shared a buffer"
        assert len(buffers[0]) == 1, "a thread's full reads always return the same buffer"
    finally:
        view.close()


def test_close_from_another_thread_while_others_read(backend: str, device: str) -> None:
    """Closing a view while other threads read it makes their next call raise RuntimeError('closed'); nothing else
    fails and the Fabric tags are gone afterwards."""
    stage = build_env_stage(M, seed=42)
    view = BACKENDS[backend](ROBOTS, stage, device)
    tag = view.tag_names[0] if backend == "fabric" else None
    started = threading.Barrier(4)
    outcomes: list[str] = []

    def reader() -> None:
        started.wait()
        for _ in range(1_000_000):
            try:
                view.get_world_poses([0, 3, 5])
                view.get_local_scales()
            except RuntimeError as exc:
                assert "closed" in str(exc), exc
                outcomes.append("closed")
                return

    def closer() -> None:
        started.wait()
        time.sleep(0.1)
        view.close()

    errors = _run_threads([reader, reader, reader, closer])
    assert not errors, errors[0]
    assert outcomes == ["closed"] * 3
    if tag is not None:
        assert tag not in attach(stage).attribute_names("/World/envs/env_0/Robot")


def test_view_built_on_one_thread_used_from_another(backend: str, device: str) -> None:
    """A view created on the main thread reads and writes correctly from a worker thread (no owner-thread check)."""
    stage = build_env_stage(4, seed=43, robot_scale="uniform")
    with BACKENDS[backend](ROBOTS, stage, device) as view:
        target = np.arange(12, dtype=np.float64).reshape(4, 3)
        seen: dict[str, np.ndarray] = {}

        def work() -> None:
            view.set_world_poses(target, None)
            seen["pos"] = fv.to_numpy(view.get_world_poses()[0]).copy()

        assert not _run_threads([work])
        np.testing.assert_allclose(seen["pos"], target, atol=1e-4)
        np.testing.assert_allclose(view.get_world_poses()[0].numpy(), target, atol=1e-4)


def test_two_fabric_views_of_one_stage_on_two_threads(device: str) -> None:
    """Two Fabric views over overlapping prims, each driven by its own thread (writes and reads), serialise on the
    stage's lock: each thread always reads back exactly what it last wrote to its own rows."""
    stage = build_env_stage(M, seed=44, robot_scale="uniform")
    evens = [f"/World/envs/env_{i}/Robot" for i in range(0, M, 2)]
    odds = [f"/World/envs/env_{i}/Robot" for i in range(1, M, 2)]
    deadline = time.perf_counter() + SECONDS / 2

    def drive(paths: list[str], seed: int) -> Callable[[], None]:
        def run() -> None:
            rng = np.random.default_rng(seed)
            with fv.FabricFrameView(paths, stage=stage, device=device) as view, fv.FabricFrameView(
                ROBOTS, stage=stage, device=device
            ) as churn:  # fmt: skip
                while time.perf_counter() < deadline:
                    values = rng.uniform(-5.0, 5.0, size=(len(paths), 3))
                    view.set_world_poses(values, None)
                    np.testing.assert_allclose(fv.to_numpy(view.get_world_poses()[0]), values, atol=1e-4)
                    churn.get_world_poses([0])

        return run

    errors = _run_threads([drive(evens, 1), drive(odds, 2)])
    assert not errors, errors[0]


@pytest.mark.cuda
def test_waits_on_other_threads_take_turns_with_a_views_own_capture(monkeypatch: pytest.MonkeyPatch) -> None:
    """Warp refuses to synchronise a device while any Warp capture is active on it, from any thread. A view captures
    its own graphs (its second identical call): a host copy (``fv.to_numpy``) or a host-input write on another thread
    meanwhile must wait for the capture to end, not raise."""
    import warp as wp

    import frameview.fabric.launches as launching

    if wp.get_cuda_device_count() == 0:
        pytest.skip("no CUDA device")
    device = "cuda:0"
    stage = build_env_stage(M, seed=45, robot_scale="uniform")
    capturing, tried = threading.Event(), threading.Event()
    real = wp.ScopedCapture

    class SlowCapture(real):  # the capture stays open until the other thread has started its wait
        def __enter__(self):
            out = super().__enter__()
            capturing.set()
            tried.wait(5.0)
            time.sleep(0.05)
            return out

    monkeypatch.setattr(launching.wp, "ScopedCapture", SlowCapture)
    with fv.FabricFrameView(ROBOTS, stage=stage, device=device) as view, fv.FabricFrameView(
        ROBOTS, stage=stage, device=device
    ) as other:  # fmt: skip
        ids = wp.array(np.arange(0, M, 2, dtype=np.int32), dtype=wp.int32, device=device)
        values = np.random.default_rng(3).uniform(-1, 1, (M, 3))
        view.get_world_poses(ids)  # first sighting: plain launches; the second call captures
        errors: list[BaseException] = []

        def other_thread() -> None:
            try:
                capturing.wait(5.0)
                tried.set()
                fv.to_numpy(other.get_world_poses()[0])
                other.set_world_poses(values, None)  # host inputs: the error check waits on the host
            except BaseException as exc:
                errors.append(exc)

        thread = threading.Thread(target=other_thread)
        thread.start()
        view.get_world_poses(ids)  # captures (slowly) on this thread
        thread.join(10.0)
        assert capturing.is_set() and not errors, errors
        np.testing.assert_allclose(fv.to_numpy(view.get_world_poses()[0]), values, atol=1e-5)

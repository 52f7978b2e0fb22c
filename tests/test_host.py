# SPDX-License-Identifier: Apache-2.0
"""``fv.to_numpy``: the same contents as ``array.numpy()``, and (CUDA) copies from many threads at once leave the
device's current stream alone (Warp's ``array.numpy()`` swaps it, which threads can leave set to the legacy stream,
after which every ``wp.ScopedCapture`` fails with "unknown stream")."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import warp as wp
from helpers import build_env_stage

import frameview as fv

HAS_CUDA = wp.get_cuda_device_count() > 0


def test_to_numpy_matches_the_data(device: str) -> None:
    rng = np.random.default_rng(3)
    data = rng.normal(size=(37, 3)).astype(np.float32)
    arr = wp.array(data, dtype=wp.vec3f, device=device)
    np.testing.assert_array_equal(fv.to_numpy(arr), data)
    np.testing.assert_array_equal(fv.to_numpy(arr[5:30]), data[5:30])
    strided = wp.array(rng.normal(size=(10, 6)).astype(np.float32), dtype=wp.float32, device=device)[:, ::2]
    np.testing.assert_array_equal(fv.to_numpy(strided), strided.numpy())
    assert fv.to_numpy(wp.empty(0, dtype=wp.vec3f, device=device)).shape == (0, 3)


@pytest.mark.cuda
@pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device")
def test_threads_copying_and_writing_leave_the_current_stream_alone() -> None:
    """Eight threads copy device arrays to the host while four write through the USD backend (whose solve copies to
    the host): afterwards the device's current stream is the one it was, and a graph capture on it works."""
    device = wp.get_device("cuda:0")
    before = device.stream
    arrays = [wp.array(np.full((64, 3), k, np.float32), dtype=wp.vec3f, device=device) for k in range(8)]
    stage = build_env_stage(8, seed=2)
    views = [fv.UsdFrameView("/World/envs/env_.*/Robot", stage=stage, device="cuda:0") for _ in range(2)]
    errors: list[BaseException] = []

    def copy(k: int) -> None:
        try:
            for _ in range(200):
                assert float(fv.to_numpy(arrays[k])[0, 0]) == k
        except BaseException as exc:
            errors.append(exc)

    def write(view: fv.UsdFrameView) -> None:
        try:
            for _ in range(20):
                view.set_world_poses(np.zeros((8, 3), np.float32), None)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=copy, args=(k,)) for k in range(8)]
    threads += [threading.Thread(target=write, args=(v,)) for v in views for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    for view in views:
        view.close()
    assert not errors, errors
    assert device.stream is before
    out = wp.zeros(4, dtype=wp.float32, device=device)
    with wp.ScopedCapture(device=device, force_module_load=False) as capture:
        out.fill_(2.0)
    wp.capture_launch(capture.graph)
    np.testing.assert_array_equal(fv.to_numpy(out), 2.0)


def test_borrowed_host_views_read_the_array_passed() -> None:
    """``borrow_host`` (the writer scopes' CPU checks read device arrays in place through it): the contents of
    ``array.numpy()`` for every dtype and layout the checks see (vectors, quaternions, scalars, strided columns,
    empty), the current contents on a later call, and no reference that keeps the array alive."""
    import gc
    import weakref

    from frameview._core.interop import borrow_host

    rng = np.random.default_rng(5)
    base = wp.array(rng.normal(size=(9, 6)).astype(np.float32), dtype=wp.float32, device="cpu")
    arrays = [
        wp.array(rng.normal(size=(17, 3)).astype(np.float32), dtype=wp.vec3f, device="cpu"),
        wp.array(rng.normal(size=(17, 4)).astype(np.float32), dtype=wp.quatf, device="cpu"),
        wp.array(rng.integers(-5, 5, 11).astype(np.int32), dtype=wp.int32, device="cpu"),
        wp.array(rng.integers(0, 2, 11).astype(bool), dtype=wp.bool, device="cpu"),
        base[:, ::2],
        base[2:7],
        wp.empty(0, dtype=wp.quatf, device="cpu"),
    ]
    for arr in arrays:
        np.testing.assert_array_equal(borrow_host(arr), arr.numpy())
        assert borrow_host(arr).shape == arr.numpy().shape
    ints = arrays[2]
    ints.fill_(7)  # the same array, new contents: the remembered view reads them
    np.testing.assert_array_equal(borrow_host(ints), np.full(11, 7, np.int32))
    temporary = wp.array(np.ones((5, 3), np.float32), dtype=wp.vec3f, device="cpu")
    np.testing.assert_array_equal(borrow_host(temporary), np.ones((5, 3), np.float32))
    alive = weakref.ref(temporary)
    del temporary
    gc.collect()
    assert alive() is None

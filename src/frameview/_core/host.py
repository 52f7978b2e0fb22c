# SPDX-License-Identifier: Apache-2.0
"""Host copies of Warp arrays that are safe to make from several threads.

``wp.array.numpy()`` of a CUDA array (Warp 1.19) switches the device's *current stream*, which is process-wide, to
the CUDA default stream for the copy and switches it back afterwards. Two threads doing that at once can leave the
device's current stream set to the default (legacy) stream for good: every later Warp launch then runs there, and
``wp.ScopedCapture`` fails with "Warp error: unknown stream". :func:`to_numpy` makes the same synchronous copy on the
default stream without touching the current stream. frameview uses it for every device-to-host copy; use it too
when threads other than the simulation's read the arrays a view returns: it also waits for the views' own graph
captures to end, which a plain ``wp.synchronize*`` on another thread does not (Warp raises instead).
"""

from __future__ import annotations

import threading

import numpy as np
import warp as wp

__all__ = ["to_numpy"]

CAPTURE_LOCK = threading.RLock()
"""Held while a view captures its own CUDA graph, and by frameview's host waits. Warp refuses to synchronise a
device while a Warp capture is active on it, from any thread (``device.is_capturing`` counts every capture Warp
started there): a view capturing on one thread would make another thread's :func:`to_numpy` raise. Captures are a
few launches long, so a wait takes its turn instead."""


def to_numpy(array: wp.array) -> np.ndarray:
    """A NumPy copy of ``array`` (a view of its memory for CPU arrays, like ``array.numpy()``).

    For CUDA arrays the copy runs on the device's default stream (so it waits for the work of every blocking stream,
    as ``array.numpy()`` does) and returns once it is complete; the device's current stream is left alone, so calls
    from several threads are safe.

    Args:
        array: A Warp array on any device.

    Returns:
        The array's contents; vector and matrix dtypes get trailing dimensions, as with ``array.numpy()``.
    """
    device = array.device
    if not device.is_cuda or not array.ptr:
        return array.numpy()
    stream = device.null_stream
    if not array.is_contiguous:
        src = wp.empty(array.shape, dtype=array.dtype, device=device)
        wp.copy(src, array, stream=stream)
        array = src
    host = wp.empty(array.shape, dtype=array.dtype, device="cpu")
    with CAPTURE_LOCK:  # no view of this process is capturing while the copy is waited for
        wp.copy(host, array, stream=stream)
        wp.synchronize_stream(stream)
    return host.numpy()

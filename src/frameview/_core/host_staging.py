# SPDX-License-Identifier: Apache-2.0
"""Host inputs of a CUDA view (NumPy, lists) on their way to the device: one pinned buffer, one copy per call.

A reset written from NumPy passes three host arrays (indices, positions, orientations). Each ``wp.copy`` costs
~9 us of host time on an H200 host, and copies out of pageable memory wait for the stream; here every host input of
a call is written, one after the other, into one pinned buffer and copied to the device in **one** asynchronous copy
when the call's arguments are ready (:meth:`HostStaging.batch`), before its launches in stream order. The device
views handed out read the copied bytes; the next call writes the pinned buffer only after that copy ran (one event).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import warp as wp

try:  # Warp's runtime: the staging copy through its native entry point (wp.copy's checks cost ~10 us per call)
    import warp._src.context as _warp_context
except ImportError:  # a Warp of another layout: wp.copy
    _warp_context = None  # type: ignore[assignment]

__all__ = ["HostStaging", "call_bytes"]

_ALIGN = 16
"""Byte alignment of each staged array (Warp's vector and quaternion loads)."""


class HostStaging:
    """Pinned host memory and device memory of one size, filled from the front by each call.

    The buffers hold everything one call can stage (:func:`call_bytes`): views handed out during a call stay valid
    until its launches ran, so a call never wraps around or grows them. They are allocated by the first :meth:`put`
    (a view that only ever gets device inputs never allocates them).

    Args:
        device: The view's CUDA device.
        capturing: Whether the device's current stream is capturing a graph (the view's ``DeviceErrors``).
        nbytes: Capacity in bytes.
    """

    def __init__(self, device: wp.context.Device, capturing: Any, nbytes: int) -> None:
        self._device = device
        self._capturing = capturing
        self._nbytes = nbytes
        self._host: wp.array | None = None
        self._host_bytes = np.empty(0, dtype=np.uint8)
        self._dev: wp.array | None = None
        self._event: wp.Event | None = None
        self._cursor = 0
        self._depth = 0
        self._views: dict[tuple, wp.array] = {}

    def put(self, name: str, host: np.ndarray, dtype: Any) -> wp.array:
        """``host`` ((M, width) float32 or (M,) int32, shape-checked by the caller) on the device as an (M,) ``dtype``
        array: copied at once, or with the rest of the call's inputs when inside :meth:`batch`.

        Raises:
            RuntimeError: The device is capturing a graph (a replay would copy the buffer's contents at that time,
                not the values passed); the message names ``name``.
        """
        if self._capturing():
            raise RuntimeError(
                f"{name}: host data (NumPy arrays, lists, CPU tensors) cannot be captured in a CUDA graph: the graph "
                "would replay the copy of a staging buffer, not the values passed; inside a capture pass arrays on "
                f"the view's device ({self._device})"
            )
        flat = np.ascontiguousarray(host).reshape(-1).view(np.uint8)
        start = self._cursor
        end = start + flat.size
        if start == 0 and self._event is not None:  # the copy of an earlier call has read the buffer
            wp.synchronize_event(self._event)
        if self._dev is None:  # first use, outside any capture (refused above)
            self._host = wp.empty(self._nbytes, dtype=wp.uint8, device="cpu", pinned=True)
            self._host_bytes = self._host.numpy()
            self._dev = wp.empty(self._nbytes, dtype=wp.uint8, device=self._device)
        if end > self._host_bytes.size:  # call_bytes() bounds a call: this is a bug, not bad input
            raise RuntimeError(f"{name}: {end} bytes staged in one call, over the {self._host_bytes.size} reserved")
        self._host_bytes[start:end] = flat
        self._cursor = -(-end // _ALIGN) * _ALIGN
        rows = host.shape[0]
        key = (start, rows, dtype)
        view = self._views.get(key)
        if view is None:
            if len(self._views) >= 64:
                self._views.clear()
            view = self._views[key] = wp.array(ptr=self._dev.ptr + start, dtype=dtype, shape=(rows,),
                                               device=self._device, copy=False)  # fmt: skip
        if not self._depth:
            self.flush()
        return view

    def batch(self) -> HostStaging:
        """A context in which :meth:`put` only writes host memory; leaving it copies everything in one copy."""
        return self

    def __enter__(self) -> HostStaging:
        self._depth += 1
        return self

    def __exit__(self, *exc: object) -> None:
        self._depth -= 1
        if not self._depth:
            self.flush()

    def flush(self) -> None:
        """Copy what the call staged to the device (asynchronous), and record when that copy has run."""
        if not self._cursor or self._dev is None or self._host is None:
            return
        _copy_to_device(self._dev, self._host, self._cursor, self._device)
        if self._event is None:
            self._event = wp.Event(self._device)
        wp.record_event(self._event)
        self._cursor = 0


def _copy_to_device(dev: wp.array, host: wp.array, nbytes: int, device: wp.context.Device) -> None:
    """Copy the first ``nbytes`` of pinned ``host`` to ``dev`` (uint8 arrays of one size, contiguous) on the
    device's current stream, asynchronously: Warp's native host-to-device copy, called directly (what ``wp.copy``
    calls after checks that these buffers pass by construction), or ``wp.copy`` on a Warp without it."""
    runtime = getattr(_warp_context, "runtime", None)
    native = getattr(getattr(runtime, "core", None), "wp_memcpy_h2d", None)
    if native is None:
        wp.copy(dev, host, count=nbytes)
        return
    if not native(device.context, dev.ptr, host.ptr, nbytes, device.stream.cuda_stream):
        raise RuntimeError(f"host inputs: the copy of {nbytes} bytes to {device} failed: {runtime.get_error_string()}")


def call_bytes(count: int) -> int:
    """The most one call of a view of ``count`` prims stages: its indices (int32) and positions, orientations and
    scales (float32 rows of 3, 4, 3) of at most ``count`` rows each (a write names each prim once), aligned."""
    return count * (4 + 12 + 16 + 12) + 4 * _ALIGN

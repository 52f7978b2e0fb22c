# SPDX-License-Identifier: Apache-2.0
"""Host inputs of a CUDA view (NumPy, lists) on their way to the device: one pinned buffer per view.

A reset written from NumPy passes three host arrays (indices, positions, orientations). Each ``wp.copy`` costs
~9 us of host time on an H200 host, and copies out of pageable memory wait for the stream; here every host input of
a call is written, one after the other, into one pinned buffer. Two ways on from there:

- **copied** (reads, writer scopes): the buffer goes to the device in **one** asynchronous copy when the call's
  arguments are ready (:meth:`HostStaging.batch`), before its launches in stream order; the device views handed out
  read the copied bytes;
- **read in place** (the setters, ``batch(in_place=True)``): the device views handed out are the pinned memory
  itself (unified addressing), which the call's kernels read over the bus: no copy, no event, when the call waits
  for its kernels' verdict anyway (host inputs raise at the call); otherwise an event after its launches.

Either way the next call writes the pinned buffer only after the work that reads it ran (one event), or without a
wait when the call that staged it waited for its own kernels.
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
        self._in_use = False  # device work queued before ``_event`` may still read the pinned buffer
        self._in_place = False  # this call's device views are the pinned memory (read over the bus)
        self._waited = False  # this call waited for its launches: its staged bytes are read already
        self._cursor = 0
        self._depth = 0
        self._views: dict[tuple, wp.array] = {}
        self._targets: dict[tuple, np.ndarray] = {}

    def put(self, name: str, host: np.ndarray, dtype: Any) -> wp.array:
        """``host`` ((M, width) or (M,) numbers, shape-checked by the caller; bounds-checked when they are indices) on
        the device as an (M,) ``dtype`` array (``wp.int32`` or a float32 vector type), converted while it is written
        into the pinned buffer: copied at once, or with the rest of the call's inputs when inside :meth:`batch`.

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
        start = self._cursor
        if start == 0 and self._in_use:  # the work of an earlier call that reads the buffer has run
            wp.synchronize_event(self._event)
            self._in_use = False
        if self._dev is None:  # first use, outside any capture (refused above)
            self._host = wp.empty(self._nbytes, dtype=wp.uint8, device="cpu", pinned=True)
            self._host_bytes = self._host.numpy()
            self._dev = wp.empty(self._nbytes, dtype=wp.uint8, device=self._device)
        shape, scalar = host.shape, (np.int32 if dtype is wp.int32 else np.float32)
        target = self._targets.get((start, shape, scalar))
        if target is None:  # a typed NumPy view of the pinned bytes at ``start``
            end = start + host.size * 4
            if end > self._host_bytes.size:  # call_bytes() bounds a call: this is a bug, not bad input
                raise RuntimeError(f"{name}: {end} bytes staged in one call, over the {self._host_bytes.size} reserved")
            if len(self._targets) >= 64:
                self._targets.clear()
            target = self._targets[(start, shape, scalar)] = self._host_bytes[start:end].view(scalar).reshape(shape)
        np.copyto(target, host, casting="unsafe")  # int64 indices (checked in range) and float64 data narrowed here
        self._cursor = -(-(start + target.nbytes) // _ALIGN) * _ALIGN
        rows = shape[0]
        in_place = self._in_place
        key = (start, rows, dtype, in_place)
        view = self._views.get(key)
        if view is None:
            if len(self._views) >= 64:
                self._views.clear()
            base = self._host.ptr if in_place else self._dev.ptr  # pinned memory: the device's address is the host's
            view = self._views[key] = wp.array(ptr=base + start, dtype=dtype, shape=(rows,), device=self._device,
                                               copy=False)  # fmt: skip
        if not self._depth:
            self.flush()
        return view

    def batch(self, in_place: bool = False) -> HostStaging:
        """A context in which :meth:`put` only writes host memory; leaving it copies everything in one copy. With
        ``in_place`` the context spans the call's launches too: the views :meth:`put` hands out are the pinned
        memory, and leaving the context records an event after the launches unless :meth:`waited` was called."""
        if not self._depth:  # pinned memory is device-addressable under unified addressing (every 64-bit CUDA host)
            self._in_place, self._waited = in_place and self._device.is_uva, False
        return self

    def __enter__(self) -> HostStaging:
        self._depth += 1
        return self

    def __exit__(self, *exc: object) -> None:
        self._depth -= 1
        if self._depth:
            return
        if not self._in_place:
            self.flush()
            return
        self._in_place = False
        if self._cursor and not self._waited:  # kernels queued by the call may still read the buffer
            self._guard()
        self._cursor = 0

    def waited(self) -> None:
        """The call (``batch(in_place=True)``) waited for its launches to finish: the buffer is free again."""
        self._waited = True

    def flush(self) -> None:
        """Copy what the call staged to the device (asynchronous), and record when that copy has run."""
        if not self._cursor or self._dev is None or self._host is None:
            return
        _copy_to_device(self._dev, self._host, self._cursor, self._device)
        self._guard()
        self._cursor = 0

    def _guard(self) -> None:
        """Record when the device work queued so far (which reads the pinned buffer) has run."""
        if self._event is None:
            self._event = wp.Event(self._device)
        wp.record_event(self._event)
        self._in_use = True


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

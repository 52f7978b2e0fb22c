# SPDX-License-Identifier: Apache-2.0
"""Which rows a call reads or writes (all, indices, mask), and how errors found on the device reach the caller.

Internal to the views. A call's rows are one :class:`Rows`: ``ALL`` (every view prim, row ``i`` is prim ``i``),
``INDEXED`` (row ``k`` is prim ``indices[k]``, int32 on the view's device) or ``MASK`` (row ``i`` is prim ``i``,
written / read only where ``mask[i]``).

Errors that only the device can see (an index out of range or repeated in device indices, a non-finite value in a
device array, a singular parent, a sheared local matrix) are recorded by the kernels in a one-int status word:
``row * STATUS_CODES + code``, kept at its minimum, so the first failing row wins. :class:`DeviceErrors` turns it into
an exception: at once on the CPU (Warp's CPU launches are synchronous, reading costs nothing) and for host inputs;
for device inputs on CUDA at the view's next call once the GPU has finished (no host round trip on the hot path),
or at :meth:`frameview.BaseFrameView.check`. :func:`status_error` words it: the argument, row, index or prim.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import warp as wp

from ._launch import RecordedLaunch
from .host import to_numpy

ALL, INDEXED, MASK = 0, 1, 2

STATUS_OK = 2**31 - 1
"""The status word at rest (no error)."""

# error codes, lowest first for the same row
CODE_INDEX_RANGE = wp.constant(1)
CODE_INDEX_DUPLICATE = wp.constant(2)
CODE_VALUE_NOT_FINITE = wp.constant(3)  # the positions / translations / scales argument
CODE_QUAT_NOT_FINITE = wp.constant(4)  # the orientations argument
CODE_ZERO_QUATERNION = wp.constant(5)
CODE_SINGULAR_PARENT = wp.constant(6)
CODE_SHEAR = wp.constant(7)
CODE_RESULT_NOT_FINITE = wp.constant(8)
STATUS_CODES = wp.constant(16)


_STATUS_OK = wp.constant(STATUS_OK)


@wp.func
def report(status: wp.array(dtype=wp.int32), row: int, code: int):
    """Record error ``code`` at ``row`` (the smallest row, then code, wins)."""
    wp.atomic_min(status, 0, row * STATUS_CODES + code)


@wp.func
def failed(status: wp.array(dtype=wp.int32)):
    """True once an earlier call recorded an error that was not raised yet (the word is sticky)."""
    return status[0] != _STATUS_OK


@wp.kernel(enable_backward=False)
def _publish_status(status: wp.array(dtype=wp.int32), mirror: wp.array(dtype=wp.int32)):
    """``mirror[0] = status[0]``: one thread stores the word into pinned host memory (a device alias of it)."""
    mirror[0] = status[0]


@dataclass(frozen=True)
class Rows:
    """The rows of one call.

    Attributes:
        kind: ``ALL``, ``INDEXED`` or ``MASK``.
        count: Rows of the data and of the outputs (the view's count for ``ALL`` and ``MASK``).
        indices: int32 view indices on the view's device (``INDEXED``); possibly unchecked, see ``checked``.
        mask: bool (count,) on the view's device (``MASK``).
        checked: Bounds and duplicates were checked on the host (host inputs); else the kernels check them.
        source: What the caller passed (error messages read it on the error path only).
    """

    kind: int
    count: int
    indices: wp.array | None = None
    mask: wp.array | None = None
    checked: bool = True
    source: Any = None

    def host_indices(self) -> np.ndarray | None:
        """The view indices as NumPy (``None`` for ``ALL``). Copies device data: host-bound backends only."""
        if self.kind == ALL:
            return None
        if self.kind == MASK:
            return np.flatnonzero(to_numpy(self.mask))
        return to_numpy(self.indices).astype(np.int64)


class DeviceErrors:
    """The status word of one view, and the errors it reports.

    The word is sticky: once a call recorded an error, the kernels of later calls neither write (a write's commit
    checks the word) nor record another error, until the error is raised. On CUDA each call that can fail ends with a
    copy of the word into pinned host memory (part of the call's CUDA graph where it has one) and an event; the
    next call of the view looks at the copy once that event has completed, without waiting for it.

    The copy is a one-thread kernel that stores the word through the device address of the pinned memory (unified
    addressing): in a CUDA graph a device-to-host memcpy node after a kernel cost ~9 us of GPU time on an H200, the
    kernel ~1 us (``perf/RESULTS.md``). Devices without unified addressing fall back to the memcpy.

    Args:
        device: The view's Warp device.
    """

    _MAX_PENDING = 64

    def __init__(self, device: wp.context.Device) -> None:
        self._device = device
        self._capturing: bool | None = None
        self.status = wp.full(1, STATUS_OK, dtype=wp.int32, device=device)
        self._pending: list[Callable[[int], Exception]] = []  # error factories of the calls not yet known clean
        if device.is_cuda:
            self.published = wp.full(1, STATUS_OK, dtype=wp.int32, device="cpu", pinned=True)
            self._host = to_numpy(self.published)
            self._event = wp.Event(device)
            self._publish_cmd: RecordedLaunch | None = None
            if device.is_uva:  # the pinned word seen from the device: its host address is valid there
                mirror = wp.array(ptr=self.published.ptr, dtype=wp.int32, shape=(1,), device=device)
                self._publish_params = [self.status, mirror]
                self._publish_cmd = RecordedLaunch(_publish_status, 1, self._publish_params, device)

    def is_capturing(self) -> bool:
        """Whether the device is capturing a graph, asked once per public call (the view's lock wrapper calls
        :meth:`forget_capturing` on entry and exit): Warp asks the driver each time."""
        if self._capturing is None:
            self._capturing = self._device.is_capturing
        return self._capturing

    def forget_capturing(self) -> None:
        """Ask the device again at the next :meth:`is_capturing`."""
        self._capturing = None

    def publish(self, stream: wp.Stream | None = None) -> None:
        """Copy the word to pinned host memory on ``stream`` (default: the device's current stream)."""
        if self._publish_cmd is not None:
            self._publish_cmd.launch(1, self._publish_params, stream)
        else:
            wp.copy(self.published, self.status, stream=stream)

    def settle(self, make_error: Callable[[int], Exception], *, now: bool, published: bool = False) -> None:
        """After a call's launches: raise its error now (CPU, host inputs, or ``now``), or queue the check.

        Args:
            make_error: Builds the exception from the status word (called on the error path only).
            now: Report before returning even on CUDA (a host sync; used when the inputs came from the host).
            published: The call's launches already copied the word to :attr:`published` (its graph did).
        """
        if self._device.is_cpu or now:
            if self._pending:  # an earlier call's error is reported as that call's, not this one's
                self.poll(wait=True)
            value = int(to_numpy(self.status)[0])
            if value != STATUS_OK:
                self._reset()
                raise make_error(value)
            return
        if self.is_capturing():
            return  # inside the caller's graph capture: check() reports (the status word is part of the graph)
        if len(self._pending) >= self._MAX_PENDING:
            self.poll(wait=True)
        if not published:
            self.publish()
        wp.get_stream(self._device).record_event(self._event)
        self._pending.append(make_error)

    def poll(self, *, wait: bool = False) -> None:
        """Raise the error of the queued calls if the GPU has finished them (wait for it when ``wait``)."""
        if not self._pending or self.is_capturing():  # events cannot be queried while capturing
            return
        if wait:
            wp.synchronize_event(self._event)
        elif not self._event.is_complete:
            return
        value = int(self._host[0])
        first = self._pending[0]
        self._pending.clear()
        if value != STATUS_OK:
            self._reset()
            raise first(value)

    def check(self, make_error: Callable[[int], Exception]) -> None:
        """Synchronise and raise any error recorded so far (queued calls first, then the status word itself)."""
        if self._device.is_cuda:
            self.poll(wait=True)
        value = int(to_numpy(self.status)[0])
        if value != STATUS_OK:
            self._reset()
            raise make_error(value)

    def _reset(self) -> None:
        self._pending.clear()
        self.status.fill_(STATUS_OK)
        if self._device.is_cuda:
            self._host[0] = STATUS_OK


def split_status(value: int) -> tuple[int, int]:
    """Status word -> (row, code)."""
    return value // int(STATUS_CODES), value % int(STATUS_CODES)


_FIRST_ARGUMENT = {
    "set_world": "positions",
    "set_local": "translations",
    "set_local_scales": "scales",
    "set_world_scales": "scales",
}
"""The non-orientation argument of each setter, named in device-side value errors."""


def is_torch_tensor(value: Any) -> bool:
    """Whether ``value`` is a torch tensor (without importing torch)."""
    torch = sys.modules.get("torch")  # never import torch ourselves
    return torch is not None and isinstance(value, torch.Tensor)


def status_error(call: str, rows: Rows | None, prim_paths: tuple[str, ...]) -> Callable[[int], Exception]:
    """A factory: status word -> the exception naming the argument, row, index or prim (``prim_paths``: the view's)."""
    count = len(prim_paths)

    def make(value: int) -> Exception:
        row, code = split_status(value)
        index = row
        if rows is not None and rows.kind == INDEXED:
            index = source_index(rows, row)
        written = "nothing was written" if call.startswith("set") else "the rows read are not valid"
        if code == int(CODE_INDEX_RANGE):
            where = "is negative" if index < 0 else "is out of range"
            return IndexError(
                f"indices: index {index} (row {row}) {where} for a view of count={count} ({call}); {written}"
            )
        if code == int(CODE_INDEX_DUPLICATE):
            return ValueError(
                f"indices: index {index} appears more than once in a write ({call}); expected each index at most "
                f"once (drop the duplicates and their rows); {written}"
            )
        if code == int(CODE_VALUE_NOT_FINITE):
            name = _FIRST_ARGUMENT.get(call, "values")
            return ValueError(f"{name}: row {row} holds a non-finite value ({call}); {written}")
        if code == int(CODE_QUAT_NOT_FINITE):
            return ValueError(f"orientations: row {row} holds a non-finite value ({call}); {written}")
        if code == int(CODE_ZERO_QUATERNION):
            return ValueError(f"orientations: row {row} holds a zero-norm quaternion ({call}); {written}")
        prim = prim_paths[index] if 0 <= index < count else f"<row {row}>"
        if code == int(CODE_SINGULAR_PARENT):
            return ValueError(
                f"prim {prim!r}: its parent's world matrix is singular (e.g. a zero scale), so no world pose can "
                f"be written under it; write its local pose instead; {written}"
            )
        if code == int(CODE_SHEAR):
            return ValueError(
                f"prim {prim!r}: its local transform has shear, which a rotation or scale write would drop; write "
                f"its translation only, or remove the shear from its xformOps; {written}"
            )
        if code == int(CODE_RESULT_NOT_FINITE):
            return ValueError(
                f"prim {prim!r}: the new local transform is not finite (a degenerate parent or local matrix); {written}"
            )
        return RuntimeError(f"{call}: device error code {code} at row {row}")

    return make


def source_index(rows: Rows, row: int) -> int:
    """The view index the caller passed at ``row`` (error path: may copy from the device)."""
    source = rows.source if rows.source is not None else rows.indices
    try:
        if is_torch_tensor(source):
            return int(source[row].item())
        host = to_numpy(source) if isinstance(source, wp.array) else np.asarray(source)
        return int(host[row])
    except Exception:  # the caller changed or freed it: report the row
        return row

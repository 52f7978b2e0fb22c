# SPDX-License-Identifier: Apache-2.0
"""How errors that only the device can see reach the caller: the status word of a view and its protocol.

Internal to the views. Errors that only the device can see (an index out of range or repeated in device indices, a
non-finite value in a device array, a singular parent, a sheared local matrix) are recorded by the kernels in a
one-int status word: ``row * STATUS_CODES + code``, kept at its minimum, so the first failing row wins.
:class:`DeviceErrors` turns it into an exception: at once on the CPU (Warp's CPU launches are synchronous, reading
costs nothing) and for host inputs; for device inputs on CUDA at the view's next call once the GPU has finished (no
host round trip on the hot path), or at :meth:`frameview.BaseFrameView.check`. :func:`status_error` words it: the
argument, row, index or prim.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Union

import numpy as np
import warp as wp

from .host import CAPTURE_LOCK, to_numpy
from .launch import RecordedLaunch
from .rows import INDEXED, Rows, source_index

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
CODE_STALE_LAYOUT = wp.constant(9)  # a launch captured in the caller's graph, replayed after a layout change
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


_UNCOUNTED = wp.constant(0x7FFFFFFF)
"""The call number of a failure published by a call captured in the caller's own graph (the host never counted)."""


@wp.func
def publish_word(
    status: wp.array(dtype=wp.int32),
    counted: int,
    state: wp.array(dtype=wp.int32),
    mirror: wp.array(dtype=wp.uint64),
):
    """Run by one thread once a call's status word is final: count the call (``state[0]``, unless ``counted`` is 0)
    and store ``(calls << 32) | status`` into pinned host memory through its device address, in one 8-byte store.
    Once a failure was published (``state[1]``) nothing changes until the host resets: the word keeps the failing
    call's number, and later calls (which the sticky status turned into no-ops) are not counted.

    The last kernel of a call runs it from one thread when no thread of that kernel reports (:meth:`DeviceErrors.
    publish_args`), saving the call a launch; else :func:`_publish_status` runs it after the call's kernels."""
    if state[1] != 0:
        return
    n = state[0] + counted
    state[0] = n
    word = status[0]
    if word != _STATUS_OK:
        state[1] = 1
        if counted == 0:
            n = _UNCOUNTED
    mirror[0] = (wp.uint64(n) << wp.uint64(32)) | wp.uint64(word)


@wp.kernel(enable_backward=False)
def _publish_status(
    status: wp.array(dtype=wp.int32),
    counted: int,
    state: wp.array(dtype=wp.int32),
    mirror: wp.array(dtype=wp.uint64),
):
    """One thread, at the end of a call that can fail: :func:`publish_word`."""
    publish_word(status, counted, state, mirror)


class DeviceErrors:
    """The status word of one view, and the errors it reports.

    The word is sticky: once a call recorded an error, the kernels of later calls neither write (a write's commit
    checks the word) nor record another error, until the error is raised. On CUDA each call that can fail ends with
    :meth:`publish`: a one-thread kernel (part of the call's CUDA graph where it has one) counts the call on the
    device and stores ``(calls, word)`` in one 8-byte store into pinned host memory, through its device address
    (unified addressing). The host counts the same calls (:meth:`executed`) and keeps each call's error factory under
    its number, so the view's next call reads the pinned word (no driver call, no event): the calls it counts are
    done and clean, or the word names the failing call and its row and code. Calls captured in the caller's own graph
    publish uncounted; their failure is reported by :meth:`check` (or the next call) without a call to name.

    Why a kernel and no event: on an H200 a device-to-host memcpy node after a kernel cost ~9 us of GPU time per call,
    the kernel ~1 us, and recording plus querying an event ~3 us of host time per call (``perf/RESULTS.md``).
    A device without unified addressing (none that Warp runs on 64-bit hosts) reports every error at once, like the
    CPU.

    Args:
        device: The view's Warp device.
        deferred: Report device errors at a later call through the published word; default: on CUDA devices with
            unified addressing. (Tests run the protocol on the CPU, where launches are synchronous.)
    """

    _MAX_PENDING = 64

    def __init__(self, device: wp.context.Device, deferred: bool | None = None) -> None:
        self._device = device
        self._capturing: bool | None = None
        self.status = wp.full(1, STATUS_OK, dtype=wp.int32, device=device)
        # CPU: the word is host memory, read in place (no array wrapper built per call)
        self._status_host = self.status.numpy() if device.is_cpu else None
        self._pending: dict[int, Callable[[int], Exception]] = {}  # call number -> error factory, not yet known clean
        self._calls = 0  # publishing calls executed (counted), as the device counts them
        self.deferred = (device.is_cuda and device.is_uva) if deferred is None else deferred
        if self.deferred:
            pinned = device.is_cuda
            self.published = wp.full(1, STATUS_OK, dtype=wp.uint64, device="cpu", pinned=pinned)
            self._host = to_numpy(self.published)
            self._state = wp.zeros(2, dtype=wp.int32, device=device)  # calls counted, a failure published
            mirror = wp.array(ptr=self.published.ptr, dtype=wp.uint64, shape=(1,), device=device)
            self._params = [self.status, 1, self._state, mirror]
            self._uncounted = [self.status, 0, self._state, mirror]
            self._publish_cmd = RecordedLaunch(_publish_status, 1, self._params, device)
            self._fused = [1, *self._params[1:]]
            self._fused_uncounted = [1, *self._uncounted[1:]]
        # the publish arguments of a kernel that takes them (publish_args) in a launch that must not publish
        none = (wp.empty(0, dtype=wp.int32, device=device), wp.empty(0, dtype=wp.uint64, device=device))
        self.no_publish = [0, 0, *none]

    def is_capturing(self) -> bool:
        """Whether the device's current stream (where the call launches) is capturing a graph, asked once per public
        call (the view's lock wrapper calls :meth:`forget_capturing` on entry and exit): Warp asks the driver each
        time. Not ``device.is_capturing``, which is also true while a view on another thread captures its own graph
        on its own stream."""
        if self._capturing is None:
            self._capturing = self._device.is_cuda and self._device.stream.is_capturing
        return self._capturing

    def forget_capturing(self) -> None:
        """Ask the device again at the next :meth:`is_capturing`."""
        self._capturing = None

    def publish(self, stream: wp.Stream | None = None, *, in_graph: bool = False) -> None:
        """End a call that can fail (CUDA): launch the publish kernel on ``stream`` (default: the device's current
        stream), and count the call unless it runs later: ``in_graph`` (the view's own graph, whose every replay
        calls :meth:`executed`) or inside the caller's capture (published uncounted)."""
        if not self.deferred:
            return
        if self.is_capturing():
            self._publish_cmd.launch(1, self._uncounted, stream)
            return
        self._publish_cmd.launch(1, self._params, stream)
        if not in_graph:
            self._calls += 1

    def publish_args(self, *, in_graph: bool = False) -> list:
        """Instead of :meth:`publish`, for a call's last kernel that publishes from one thread (its status word is
        final when it starts: none of its threads reports): that kernel's ``publish, counted, state, mirror``
        arguments, ``publish`` 0 where nothing is deferred. Counts the call as :meth:`publish` does."""
        if not self.deferred:
            return self.no_publish
        if self.is_capturing():
            return self._fused_uncounted
        if not in_graph:
            self._calls += 1
        return self._fused

    def executed(self) -> None:
        """One more publishing call ran: a replay of the view's own graph that ends with :meth:`publish`."""
        self._calls += 1

    def settle(self, make_error: Callable[[int], Exception], *, now: bool, published: bool = False) -> bool:
        """After a call's launches: raise its error now (CPU, host inputs, or ``now``), or queue the check.

        Args:
            make_error: Builds the exception from the status word (called on the error path only).
            now: Report before returning even on CUDA (a host sync; used when the inputs came from the host).
            published: The call's launches ended with :meth:`publish` (counted there or by :meth:`executed`).

        Returns:
            Whether it waited for the stream: the call's device work has finished.
        """
        if now and self.deferred and published and not self.is_capturing():
            # the call's launches published its word into pinned memory: wait for the stream, then read it (an
            # earlier call's error is reported as that call's, not this one's)
            self._pending[self._calls] = make_error
            self.poll(wait=True)
            return True
        if not self.deferred or now:
            if self._pending:  # an earlier call's error is reported as that call's, not this one's
                self.poll(wait=True)
            host = self._status_host
            value = int(host[0]) if host is not None else int(to_numpy(self.status)[0])
            if value != STATUS_OK:
                self._reset()
                raise make_error(value)
            return False
        if self.is_capturing():
            return False  # inside the caller's graph capture: check() reports (the status word is part of the graph)
        if not published:
            self.publish()
        self._pending[self._calls] = make_error
        if len(self._pending) >= self._MAX_PENDING:
            self.poll()
            if len(self._pending) >= self._MAX_PENDING:
                self.poll(wait=True)
        return False

    def poll(self, *, wait: bool = False) -> None:
        """Raise the error of a queued call the GPU finished (with ``wait``, of every queued call); forget the queued
        calls it finished clean."""
        if not self._pending or self.is_capturing():  # no stream wait while capturing
            return
        if wait:
            self._drain()
        word = int(self._host[0])
        value, done = word & 0xFFFFFFFF, word >> 32
        if value == STATUS_OK:
            if wait or done >= self._calls:
                self._pending.clear()
            else:
                for call in [call for call in self._pending if call <= done]:
                    del self._pending[call]
            return
        if not wait:
            self._drain()  # the calls queued after the failing one finish (as no-ops) before the word is reset
        make_error = self._pending.get(done)
        self._reset()
        raise (make_error or _uncounted_error)(value)

    def check(self, make_error: Callable[[int], Exception]) -> None:
        """Synchronise and raise any error recorded so far (queued calls first, then the status word itself)."""
        if self.deferred:
            self.poll(wait=True)
        value = int(to_numpy(self.status)[0])
        if value != STATUS_OK:
            self._reset()
            raise make_error(value)

    def _drain(self) -> None:
        """Wait for the work queued on the device's current stream (error paths and :meth:`check` only)."""
        if self._device.is_cuda:
            with CAPTURE_LOCK:
                wp.synchronize_stream(wp.get_stream(self._device))

    def _reset(self) -> None:
        self._pending.clear()
        self.status.fill_(STATUS_OK)
        if self.deferred:
            self._drain()
            self._calls = int(to_numpy(self._state)[0])  # the device stopped counting at the failing call
            self._state.assign(np.array([self._calls, 0], dtype=np.int32))
            self._host[0] = (self._calls << 32) | STATUS_OK


_STALE_LAYOUT = (
    "the stage's Fabric layout changed after this view's calls were captured in a CUDA graph (prims added, removed "
    "or moved between buckets, e.g. by creating or closing a view, or by USD edits): a replay of that graph read "
    "NaN and wrote nothing; call the view once outside a capture, then capture the graph again"
)


def _uncounted_error(value: int) -> Exception:
    """The error of a call that no factory names: one captured in the caller's own CUDA graph."""
    row, code = split_status(value)
    if code == int(CODE_STALE_LAYOUT):
        return RuntimeError(_STALE_LAYOUT)
    return RuntimeError(
        f"a call of this view captured in a CUDA graph failed (row {row}, error code {code}); nothing was written by "
        "it or by the calls after it until this error; call view.check() after replaying a graph to find out sooner"
    )


def split_status(value: int) -> tuple[int, int]:
    """Status word -> (row, code)."""
    return value // int(STATUS_CODES), value % int(STATUS_CODES)


_FIRST_ARGUMENT = {
    "set_world": "positions",
    "set_local": "translations",
    "set_local_scales": "scales",
    "set_world_scales": "scales",
    "set_dof_state": "positions or velocities",
    "set_root_poses": "positions or orientations",
    "set_root_velocities": "linear or angular",
}
"""The non-orientation argument of each setter, named in device-side value errors."""


CallData = Union[Mapping[str, Any], tuple[Sequence[tuple[Any, str, Any]], Sequence[Any]], None]
"""A call's data arrays by argument name (``None``: not known), or a setter's ``(values, arrays)``: its
``(value, name, dtype)`` arguments and their coerced arrays, paired on the error path only."""


def _by_name(data: CallData) -> Mapping[str, Any]:
    if data is None:
        return {}
    if isinstance(data, tuple):
        values, arrays = data
        return {value[1]: array for value, array in zip(values, arrays, strict=False) if array is not None}
    return data


def _bad_values(data: Mapping[str, Any], names: tuple[str, ...], row: int) -> tuple[str, str] | None:
    """The first of ``names`` whose array in ``data`` has row ``row``, and that row's values (``" [x, y, z]"``), when
    the call's data is known (the error is raised by the call itself); ``None`` otherwise."""
    for name in names:
        array = data.get(name)
        if array is None or not 0 <= row < array.shape[0]:
            continue
        values = np.asarray(to_numpy(array)[row], dtype=np.float64).reshape(-1)
        if name != "orientations" and len(names) > 1 and np.isfinite(values).all():
            continue  # not the argument holding the non-finite value
        return name, f" {values.tolist()}"
    return None


def status_error(
    call: str, rows: Rows | None, prim_paths: tuple[str, ...], data: CallData = None
) -> Callable[[int], Exception]:
    """A factory: status word -> the exception naming the argument, row, index or prim (``prim_paths``: the view's).

    ``data``: the call's data arrays (:data:`CallData`), when the error is raised by the call itself (they still hold
    its values): a bad value's message then shows them, as the host checks' messages do.
    """
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
        if code in (int(CODE_VALUE_NOT_FINITE), int(CODE_QUAT_NOT_FINITE), int(CODE_ZERO_QUATERNION)):
            name = "orientations" if code != int(CODE_VALUE_NOT_FINITE) else _FIRST_ARGUMENT.get(call, "values")
            what = "a zero-norm quaternion" if code == int(CODE_ZERO_QUATERNION) else "a non-finite value"
            by_name = _by_name(data)
            known = _bad_values(by_name, (name,) if name != "values" else tuple(by_name), row)
            if known is not None:  # as the host checks say it
                return ValueError(f"{known[0]}: row {row} holds {what}{known[1]}; {written}")
            return ValueError(f"{name}: row {row} holds {what} ({call}); {written}")
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
        if code == int(CODE_STALE_LAYOUT):
            return RuntimeError(_STALE_LAYOUT)
        return RuntimeError(f"{call}: device error code {code} at row {row}")

    return make


def outside_capture(label: str, device: Any, errors: DeviceErrors, what: str) -> None:
    """Raise if ``device`` is capturing a CUDA graph (as ``errors`` sees the caller's stream): ``what`` of the view
    ``label`` is about to be allocated, and memory allocated in a capture belongs to the graph (invalid until it is
    replayed, freed with it)."""
    if device.is_cuda and errors.is_capturing():
        raise RuntimeError(
            f"{label}: {what} are made on first use (and again after the stage's layout changed), which cannot "
            "happen inside a CUDA graph capture; call the view once outside the capture (the same call, e.g. "
            "get_world_poses(indices)), then capture"
        )

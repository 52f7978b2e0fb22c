# SPDX-License-Identifier: Apache-2.0
"""How the views launch their kernels: recorded launches that re-pack only what changed, and the one capture stream
per CUDA device.

:class:`RecordedLaunch` is the host side of a small launch at the GPU floor. :func:`capture_stream` is the one
non-blocking stream per CUDA device on which the views capture their own graphs. A call's graph is replayed only for
the key it was captured with: the key holds the :func:`address` of each array the caller passes. The views' caches of
recorded launches and call graphs are :mod:`.launch_caches` (Newton) and :mod:`frameview.fabric.launches`.
"""

from __future__ import annotations

import ctypes
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

import warp as wp

try:  # Warp's runtime, for _CpuEntry's capture check
    import warp._src.context as _warp_context
except ImportError:  # a Warp of another layout: CPU launches go through Launch.launch
    _warp_context = None  # type: ignore[assignment]

from .host import CAPTURE_LOCK

__all__ = [
    "SMALL_BLOCK",
    "UNSEEN",
    "CallGraphs",
    "OffsetKeys",
    "RecordedLaunch",
    "address",
    "block_dim_for",
    "capture_stream",
    "captured",
    "narrow_key",
    "replay",
]


def captured(device: Any, stream: wp.Stream, launch: Callable[[], None]) -> Any:
    """The CUDA graph of ``launch()``, whose every operation names ``stream`` (the views' capture stream of
    ``device``, :func:`capture_stream`): the device's current stream is not touched, and work other threads put on
    the device meanwhile is neither captured nor disturbed."""
    with CAPTURE_LOCK, wp.ScopedCapture(device=device, stream=stream, force_module_load=False) as capture:
        launch()
    return capture.graph


UNSEEN = object()
"""What :meth:`CallGraphs.lookup` returns for a key it had not kept."""


class CallGraphs:
    """The CUDA graphs of a view's calls: per call name, the last ``per_name`` keys seen (least recently used
    dropped), each with its graph once captured. A key is captured on its second sighting, so a call made once with
    new arrays costs no capture, and a loop that alternates calls of one name (two reset patterns, a write through
    a writer scope beside the setter's) replays a graph for each instead of launching every call anew.

    Args:
        per_name: Keys kept per call name.
    """

    __slots__ = ("_by_name", "_per_name")

    def __init__(self, per_name: int = 4) -> None:
        self._per_name = per_name
        self._by_name: dict[Hashable, OrderedDict[Hashable, Any]] = {}

    def lookup(self, name: Hashable, key: Hashable) -> Any:
        """The graph kept for ``key`` under ``name``: :data:`UNSEEN` on its first sighting (the key is kept from
        now on), ``None`` when seen before and not captured yet (capture it and :meth:`store` it)."""
        graphs = self._by_name.get(name)
        if graphs is None:
            graphs = self._by_name[name] = OrderedDict()
        graph = graphs.get(key, UNSEEN)
        if graph is UNSEEN:
            graphs[key] = None
            if len(graphs) > self._per_name:
                graphs.popitem(last=False)
        elif len(graphs) > 1:
            graphs.move_to_end(key)
        return graph

    def store(self, name: Hashable, key: Hashable, graph: Any) -> None:
        """Keep ``graph`` for ``key``, seen before under ``name``."""
        self._by_name[name][key] = graph

    @property
    def count(self) -> int:
        """Graphs held now."""
        return sum(g is not None for graphs in self._by_name.values() for g in graphs.values())

    def clear(self) -> None:
        """Drop every key and graph."""
        self._by_name.clear()


def replay(graph: Any) -> None:
    """``wp.capture_launch(graph)`` on the device's current stream: once the graph was launched (its executable
    made), through Warp's native entry point, without ``capture_launch``'s dispatch (a graph captured by Warp on
    CUDA; ~0.4 us of host time less per replay on an H200 host)."""
    exe = graph.graph_exec
    core = getattr(getattr(_warp_context, "runtime", None), "core", None)
    if exe is None or getattr(graph, "_native_graph", None) is not None or core is None:
        wp.capture_launch(graph)
        return
    if not core.wp_cuda_graph_launch(exe, graph.device.stream.cuda_stream):
        raise RuntimeError(f"graph launch on {graph.device} failed: {_warp_context.runtime.get_error_string()}")


class RecordedLaunch:
    """``kernel(*params)`` recorded once, then launched with only the changed parameters re-packed.

    ``wp.launch`` looks the kernel up and packs every argument on every call, most of a small launch's host time; a
    recorded command keeps the packed arguments, and :meth:`launch` updates those whose object changed (arrays by
    identity, scalars by value) and the dimension. An argument of another kind than the one recorded (a plain array
    where a fabric array was: another overload of a generic kernel) records the launch again. The command holds raw
    pointers: this object keeps every array it was given alive, so no address can be reused while it is recorded.
    On the CPU the kernel's entry point is called with an argument block kept between launches (:class:`_CpuEntry`).

    Args:
        kernel: The Warp kernel.
        dim: Launch dimension.
        params: Every argument, inputs then outputs, in the kernel's order.
        device: The device to launch on.
        block_dim: Threads per block on CUDA (None: Warp's default, 256); see :func:`block_dim_for`.
    """

    __slots__ = ("_block_dim", "_cmd", "_cpu", "_device", "_dim", "_kernel", "_params")

    def __init__(self, kernel: Any, dim: Any, params: list, device: Any, block_dim: int | None = None) -> None:
        self._kernel, self._device, self._block_dim = kernel, device, block_dim
        self._record(dim, params)

    def _record(self, dim: Any, params: list) -> None:
        self._cmd = wp.launch(self._kernel, dim=dim, inputs=params, device=self._device, record_cmd=True,
                              block_dim=self._block_dim)  # fmt: skip
        self._params = list(params)
        self._dim = dim
        self._cpu = _CpuEntry.of(self._cmd)

    def launch(self, dim: Any, params: list, stream: wp.Stream | None = None) -> None:
        """Launch with ``params`` (same length and kinds as recorded) over ``dim``, on ``stream`` (default: the
        device's current stream)."""
        cmd, last, cpu = self._cmd, self._params, self._cpu
        if dim == self._dim and params == last:  # the usual call: compared in C, identity first
            if cpu is not None:
                cpu.call(cmd)
            else:
                cmd.launch(stream=stream)
            return
        for j, value in enumerate(params):
            old = last[j]
            if value is not old and (isinstance(value, (wp.array, wp.fabricarray)) or value != old):
                if type(value) is not type(old):  # another overload of a generic kernel
                    self._record(dim, params)
                    self._cmd.launch(stream=stream)
                    return
                cmd.set_param_at_index(j, value)
                last[j] = value
                if cpu is not None:
                    cpu.update(cmd, j)
        if dim != self._dim:
            cmd.set_dim(dim)
            self._dim = dim
        if cpu is not None:
            cpu.call(cmd)
        else:
            cmd.launch(stream=stream)


class _CpuEntry:
    """The argument block of a recorded CPU launch, kept between launches: Warp's ``Launch.launch`` builds a new
    ``ctypes`` block and copies every packed argument into it at each launch (about 0.3 us per argument), where this
    copies only the arguments that changed (:meth:`update`) and calls the kernel's entry point as Warp does.

    Made only for the Warp launch layout it was written against (a CPU forward launch of one thread per item: the
    packed arguments after the launch bounds, one per kernel argument, and the entry point in ``hooks.forward``);
    otherwise :meth:`of` returns None and the launch goes through ``Launch.launch``. While Warp records a CPU capture
    (Warp >= 1.17's APIC), launches go through ``Launch.launch`` as well, which records them.
    """

    __slots__ = ("_args", "_entry", "_names")

    def __init__(self, cmd: Any) -> None:
        names = [arg.label for arg in cmd.kernel.adj.args]
        fields = [(name, type(cmd.params[1 + j])) for j, name in enumerate(names)]
        self._args = type("ArgsStruct", (ctypes.Structure,), {"_fields_": fields})()
        for j, name in enumerate(names):
            setattr(self._args, name, cmd.params[1 + j])
        self._names = names
        self._entry = cmd.hooks.forward

    @classmethod
    def of(cls, cmd: Any) -> _CpuEntry | None:
        """The entry of ``cmd`` when it is a CPU launch of the layout above, else None."""
        if _warp_context is None:
            return None
        try:
            if (not cmd.device.is_cpu or cmd.adjoint or getattr(cmd, "block_dim", 1) > 1 or cmd.hooks.forward is None
                    or len(cmd.params) != len(cmd.kernel.adj.args) + 1):  # fmt: skip
                return None
            return cls(cmd)
        except (AttributeError, TypeError):
            return None

    def update(self, cmd: Any, j: int) -> None:
        """Copy argument ``j``, just re-packed by ``cmd.set_param_at_index``, into the block."""
        setattr(self._args, self._names[j], cmd.params[1 + j])

    def call(self, cmd: Any) -> None:
        """Run the kernel over ``cmd``'s current bounds (``Launch.launch`` while Warp records a CPU capture)."""
        if _cpu_capture_active(cmd.device):
            cmd.launch()
            return
        self._entry(ctypes.byref(cmd.params[0]), ctypes.byref(self._args))


def _cpu_capture_active(device: Any) -> bool:
    """Whether Warp records a capture on ``device`` now (its APIC capture; never on a Warp without one)."""
    runtime = _warp_context.runtime
    capture = getattr(runtime, "_apic_capture", None) if runtime is not None else None
    return capture is not None and capture.device == device


class OffsetKeys:
    """Hashable keys of the rotation offsets reads take (camera conventions), for launch and graph caches: ``None``
    for ``identity`` (no offset), else the offset's components, read once per offset object.

    Args:
        identity: The object callers pass for "no offset".
    """

    __slots__ = ("_identity", "_keys")

    def __init__(self, identity: Any) -> None:
        self._identity = identity
        self._keys: dict[int, tuple[Any, tuple[float, ...]]] = {}

    def __call__(self, offset: Any) -> tuple[float, ...] | None:
        if offset is self._identity:
            return None
        cached = self._keys.get(id(offset))
        if cached is None or cached[0] is not offset:
            cached = self._keys[id(offset)] = (offset, tuple(offset))  # holds offset: its id stays its own
        return cached[1]

    def clear(self) -> None:
        """Forget every offset (and release the objects held)."""
        self._keys.clear()


SMALL_BLOCK = 32
"""Threads per block of the views' launches on CUDA. Their rows are few (a reset's 256) and fat (a thread moves and
multiplies float64 4x4 matrices, 128 bytes each, so a warp's loads touch 32 cache lines): with Warp's 256 a reset's
rows share one SM's load/store units; with 32 they spread over eight (H200: a write's commit 26 -> 12 us at 64)."""


def block_dim_for(device: Any) -> int | None:
    """The block size of the views' launches on ``device`` (None on the CPU: Warp's default, no extra module)."""
    return SMALL_BLOCK if device.is_cuda else None


def _new_capture_stream(device: Any) -> wp.Stream | None:
    """A new non-blocking CUDA stream on ``device`` for the views' own graph captures, or None where none can be made.

    Warp's streams are blocking: while one captures, an operation that another thread puts on the legacy default
    stream would have to wait for it, and CUDA fails that operation. A non-blocking stream has no such implicit
    dependency, so capturing on it never disturbs other threads. It is created through the CUDA driver, in the
    device's context, and handed to Warp as an external stream, kept for the process (:func:`capture_stream`).
    """
    try:
        import ctypes

        lib = ctypes.CDLL("libcuda.so.1")
        handle, previous = ctypes.c_void_p(), ctypes.c_void_p()
        if lib.cuCtxPushCurrent_v2(ctypes.c_void_p(device.context)) != 0:
            return None
        try:
            failed = lib.cuStreamCreate(ctypes.byref(handle), ctypes.c_uint(1))  # CU_STREAM_NON_BLOCKING
        finally:
            lib.cuCtxPopCurrent_v2(ctypes.byref(previous))
        if failed or not handle.value:
            return None
        return wp.Stream(device, cuda_stream=handle.value)
    except (OSError, AttributeError):  # no CUDA driver library by that name (e.g. not Linux): no own captures
        return None


_CAPTURE_STREAMS: dict[str, wp.Stream | None] = {}
"""One non-blocking capture stream per CUDA device, shared by the views (made on first use, kept)."""


def capture_stream(device: Any) -> wp.Stream | None:
    """The device's shared non-blocking stream for the views' own captures (None where none can be made). Every
    capture on it runs under :data:`~frameview._core.host.CAPTURE_LOCK`, so the views of all threads can share it."""
    name = str(device)
    with CAPTURE_LOCK:
        if name not in _CAPTURE_STREAMS:
            _CAPTURE_STREAMS[name] = _new_capture_stream(device)
        return _CAPTURE_STREAMS[name]


def address(array: wp.array | None) -> tuple | None:
    """What a captured launch depends on in an array it was given: its address, shape and strides."""
    return None if array is None else (array.ptr, array.shape, array.strides)


def narrow_key(rows: Any) -> tuple | None:
    """What a call's graph depends on in indices its first launch narrows (:attr:`Rows.narrow`): their address,
    shape, strides and dtype."""
    return None if rows.narrow is None else (address(rows.narrow[1]), rows.narrow[1].dtype)

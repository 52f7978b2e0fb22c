# SPDX-License-Identifier: Apache-2.0
"""The views' launch caches: the recorded launches of a view's calls and, on CUDA, each call captured once into a
graph replayed from then on, on the device's capture stream (:func:`~.launch.capture_stream`).

A Fabric view launches through :class:`FabricLaunches` (everything else its launches read belongs to the view, kept
in its cache and dropped with the fabric arrays on a bucket change), a Newton view through :class:`LaunchCache`
(whose keys also name the simulation state's ``body_q``, a different array from one step to the next).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any

import warp as wp

from ..fabric.epoch import UNGUARDED
from .host import CAPTURE_LOCK
from .launch import RecordedLaunch, block_dim_for, capture_stream

if TYPE_CHECKING:
    from ..fabric.epoch import LayoutEpoch
    from .device_errors import DeviceErrors

__all__ = ["PUBLISHES", "FabricLaunches", "LaunchCache", "Step", "narrow_steps"]


PUBLISHES = "publishes"
"""The fifth element of a step whose kernel can publish the call's status word (``FabricLaunches._launch_steps``)."""


class FabricLaunches:
    """The launches of a :class:`~frameview.fabric.view.FabricFrameView`: recorded launches, CUDA graphs of its calls.

    One cache holds the recorded launches (:meth:`recorded`, :meth:`command`) and the call graphs (:meth:`run`); the
    view's Fabric data (:class:`~frameview.fabric.data.FabricData`) drops it with the fabric arrays on a bucket
    change, the only time what the launches read of the view changes.

    Args:
        device: The view's Warp device.
        errors: The view's status word (its publish copy ends the calls that can fail, in their graphs).
        epoch: The stage's layout epoch (:mod:`frameview.fabric.epoch`): a guarded launch captured in the caller's
            graph takes its word and value.

    Attributes:
        trace: The list the launches are recorded into while ``FabricFrameView.launch_trace`` is open, None when
            not tracing (tests read it: the seam of the trace).
    """

    __slots__ = ("_cache", "_capture_stream", "_device", "_epoch", "_errors", "_no_capture_stream", "trace")

    def __init__(self, device: Any, errors: DeviceErrors, epoch: LayoutEpoch) -> None:
        self._device = device
        self._errors = errors
        self._epoch = epoch
        self._cache: dict[Any, Any] = {}
        self._capture_stream: wp.Stream | None = None
        self._no_capture_stream = False
        self.trace: list | None = None

    def clear(self) -> None:
        """Drop every recorded launch and graph (the fabric arrays they hold were replaced, or the view closed)."""
        self._cache.clear()

    def close(self) -> None:
        """Drop everything (the view is closed); the device's capture stream is shared (:func:`capture_stream`)."""
        self._cache.clear()
        self._capture_stream = None

    def _guard(self) -> list:
        """The ``layout, expected`` arguments of a guarded launch (``FabricData.guard`` without ``every_launch``)."""
        epoch = self._epoch
        return [epoch.word, epoch.value if self._errors.is_capturing() else UNGUARDED]

    def recorded(self, key: Any, kernel: Any, dim: int, inputs: list, outputs: list, guarded: bool = True) -> None:
        """Full-view launches are recorded once per fabric-array rebuild and replayed (cheaper than ``wp.launch``).
        A ``guarded`` kernel takes the layout guard after ``inputs``, appended here: -1 in the recorded launch,
        compared in a launch captured in the caller's graph.

        On CUDA, once the same recorded launch has been replayed with unchanged buckets, it is captured into a CUDA
        graph and the graph is replayed from then on (the cheapest launch Warp offers); a bucket change drops both.
        Outputs are per thread, so the key includes their addresses, and the entry holds the output arrays: a recorded
        launch keeps raw pointers, which must not outlive (or be reused by) another allocation.
        """
        capturing = self._errors.is_capturing()
        trace = self.trace
        if capturing or trace is not None:
            params = [*inputs, *self._guard()] if guarded else inputs
            if trace is not None:
                trace.append((kernel, dim, [*params, *outputs]))
            if capturing:  # inside the caller's graph capture: this launch, its guard set, is captured there
                wp.launch(kernel, dim=dim, inputs=params, outputs=outputs, device=self._device,
                          block_dim=block_dim_for(self._device))  # fmt: skip
                return
        key = (key, *[out.ptr for out in outputs])
        entry = self._cache.get(key)
        if entry is None:
            params = [*inputs, *self._guard()] if guarded else inputs
            cmd = wp.launch(kernel, dim=dim, inputs=params, outputs=outputs, device=self._device, record_cmd=True,
                            block_dim=block_dim_for(self._device))  # fmt: skip
            self._cache[key] = entry = [cmd, 0, None, outputs]
        cmd, replays, graph, _ = entry
        if graph is not None:
            wp.capture_launch(graph)
            return
        if self._device.is_cuda and replays >= 1 and self._own_capture_stream() is not None:
            # capture on the device's capture stream (non-blocking): work other threads put on the device meanwhile is
            # neither captured nor disturbed; the graph is replayed on the caller's current stream
            with CAPTURE_LOCK, wp.ScopedCapture(device=self._device, stream=self._capture_stream,
                                                force_module_load=False) as capture:  # fmt: skip
                cmd.launch(stream=self._capture_stream)
            entry[2] = capture.graph
            wp.capture_launch(capture.graph)
            return
        entry[1] = replays + 1
        cmd.launch()

    def command(
        self, key: Any, kernel: Any, dim: Any, params: list, stream: wp.Stream | None = None, traced: list | None = None
    ) -> None:
        """Launch ``kernel(*params)`` through a :class:`RecordedLaunch` kept under ``key`` (dropped with the fabric
        arrays on a bucket change). A launch trace (:attr:`trace`) records ``traced`` (default ``params``)."""
        if self.trace is not None:
            self.trace.append((kernel, dim, list(params if traced is None else traced)))
        recorded = self._cache.get(key)
        if recorded is None:
            recorded = self._cache[key] = RecordedLaunch(kernel, dim, params, self._device,
                                                         block_dim_for(self._device))  # fmt: skip
        recorded.launch(dim, params, stream)

    def run(self, name: Any, key: tuple, build: Callable[[], list[tuple]]) -> None:
        """Run a call's launches (``build()`` makes them), then (CUDA) publish the status word for the next call to
        look at (:meth:`DeviceErrors.publish`).

        On CUDA, a call whose ``key`` (what the caller passes: row kind and count, argument addresses, flags) repeats
        the previous call's is captured once into a CUDA graph, then replayed as one launch without building its
        launches again: the reset loop passes the same buffers every time, only their contents change. Everything
        else a launch reads belongs to the view and is replaced only on a bucket change, which drops the graphs with
        the recorded launches.
        """
        if not self._device.is_cuda:
            self._launch_steps(build())
            return
        if self._errors.is_capturing() or self._own_capture_stream() is None or self.trace is not None:
            self._launch_steps([*build(), ("publish",)])
            return
        cached = self._cache.get(("graph", name))
        if cached is None or cached[0] != key:
            self._cache[("graph", name)] = [key, None]
            self._launch_steps([*build(), ("publish",)])
            return
        if cached[1] is None:  # every operation names the capture stream: the device's current stream is not touched
            stream = self._capture_stream
            steps = [*build(), ("publish",)]
            with CAPTURE_LOCK, wp.ScopedCapture(device=self._device, stream=stream, force_module_load=False) as capture:
                self._launch_steps(steps, stream, in_graph=True)
            cached[1] = capture.graph
        wp.capture_launch(cached[1])
        self._errors.executed()

    def _own_capture_stream(self) -> wp.Stream | None:
        """The device's non-blocking capture stream (:func:`capture_stream`, looked up on first use), or None where
        none can be made."""
        if self._capture_stream is None and not self._no_capture_stream:
            self._capture_stream = capture_stream(self._device)
            self._no_capture_stream = self._capture_stream is None
        return self._capture_stream

    def _launch_steps(self, steps: list[tuple], stream: wp.Stream | None = None, in_graph: bool = False) -> None:
        """Launch ``steps``: ``(key, kernel, dim, params)``, ``("publish",)``, or ``(key, kernel, dim, params,
        PUBLISHES)`` for a kernel that takes :meth:`DeviceErrors.publish_args` (after ``params``) and publishes from
        one thread: followed by ``("publish",)``, it publishes instead of that step's extra launch."""
        published = False
        for n, step in enumerate(steps):
            if step[0] == "publish":
                if not published:
                    self._errors.publish(stream, in_graph=in_graph)
                continue
            key, kernel, dim, params, *publishes = step
            traced = None
            if publishes:
                rows = dim if isinstance(dim, int) else math.prod(dim)  # no thread: nothing publishes
                published = rows > 0 and n + 1 < len(steps) and steps[n + 1][0] == "publish"
                extra = self._errors.publish_args(in_graph=in_graph) if published else self._errors.no_publish
                if self.trace is not None:  # a trace's launches leave the status word alone
                    traced = [*params, *self._errors.no_publish]
                params = [*params, *extra]
            self.command(key, kernel, dim, params, stream=stream, traced=traced)


def narrow_steps(rows: Any, count: int) -> list[tuple]:
    """The step (for :meth:`FabricLaunches.run`) that narrows the caller's indices into ``rows.indices``
    (:attr:`Rows.narrow`), first in the call's steps (and in its graph), or none."""
    if rows.narrow is None:
        return []
    kernel, source = rows.narrow
    return [(("narrow", source.dtype), kernel, rows.count, [source, count, rows.indices])]


Step = tuple[Any, Any, list]
"""``(kernel, dim, params)``: one launch of a call, every argument (inputs then outputs) in the kernel's order."""

_UNSET = object()


class LaunchCache:
    """The launches of one view.

    Every launch goes through a :class:`~frameview._core.launch.RecordedLaunch` kept per call name and step (only the
    arguments that changed since the name's previous call are re-packed), so calls of different shapes (all rows,
    indices, a mask; plain or camera reads) never re-pack each other's arguments.

    On CUDA, a call whose ``key`` was seen before under the same name is captured once into a CUDA graph (on a
    non-blocking stream of its own, so that work other threads put on the device is neither captured nor
    disturbed), and from then on replayed on the caller's current stream as one launch, without building its
    arguments. The key must name every address and scalar of the call's launches that can change between calls
    (see :func:`address`); what it leaves out must stay fixed for the view's life. The last ``per_name`` keys of
    each name are kept (least recently used dropped): a loop swapping two states replays one graph per state.
    Inside the caller's own capture (``errors.is_capturing()``) the launches are made as they are, captured there.
    On CUDA every launch runs with the views' small blocks (:func:`~frameview._core.launch.block_dim_for`).

    Args:
        device: The view's Warp device.
        errors: The view's status word (its publish copy ends the calls that can fail, in their graphs).
        per_name: Keys (graphs) kept per call name.
    """

    def __init__(self, device: Any, errors: DeviceErrors, per_name: int = 4) -> None:
        self._device = device
        self._errors = errors
        self._per_name = per_name
        self._recorded: dict[tuple[Hashable, int], RecordedLaunch] = {}
        self._graphs: dict[Hashable, OrderedDict[Hashable, Any]] = {}
        self._stream: Any = _UNSET  # the device's capture stream, looked up on the first CUDA call

    def run(self, name: Hashable, key: Hashable, build: Callable[[], list[Step]], publish: bool = False) -> None:
        """Run the call ``name`` (``build()`` makes its launches), then (CUDA, ``publish``) copy the status word to
        pinned memory; on CUDA replay the graph captured for ``key`` when there is one (see the class docstring)."""
        if not self._graphs_enabled():  # CPU, inside the caller's capture, or no stream of our own: plain launches
            self._launch(name, build(), None)
            self._publish(publish, None)
            return
        graphs = self._graphs.get(name)
        if graphs is None:
            graphs = self._graphs[name] = OrderedDict()
        if key not in graphs:  # first sighting: launch, remember the key
            graphs[key] = None
            if len(graphs) > self._per_name:
                graphs.popitem(last=False)
            self._launch(name, build(), None)
            self._publish(publish, None)
            return
        graphs.move_to_end(key)
        entry = graphs[key]
        if entry is None:  # seen again: capture once
            entry = graphs[key] = (self._capture(name, build(), publish), publish)
        self._replay(entry[0])
        if entry[1] and self._device.is_cuda:
            self._errors.executed()  # the replayed graph ends with the publish kernel

    def _graphs_enabled(self) -> bool:
        """Whether calls are captured and replayed: CUDA, outside the caller's own capture, with a capture stream."""
        device = self._device
        if not device.is_cuda or self._errors.is_capturing():  # asked once per public call
            return False
        if self._stream is _UNSET:
            self._stream = capture_stream(device)
        return self._stream is not None

    def _capture(self, name: Hashable, steps: list[Step], publish: bool) -> Any:
        """A CUDA graph of ``steps`` (and the publish copy), captured on the device's capture stream: every operation
        names that stream, so the device's current stream is not touched."""
        stream = self._stream
        with CAPTURE_LOCK, wp.ScopedCapture(device=self._device, stream=stream, force_module_load=False) as capture:
            self._launch(name, steps, stream)
            self._publish(publish, stream, in_graph=True)
        return capture.graph

    def _replay(self, graph: Any) -> None:
        """Launch a captured graph on the device's current stream."""
        wp.capture_launch(graph)

    def _publish(self, publish: bool, stream: wp.Stream | None, in_graph: bool = False) -> None:
        """CUDA: publish the status word to pinned memory, for the view's check (nothing to do on the CPU)."""
        if publish and self._device.is_cuda:
            self._errors.publish(stream, in_graph=in_graph)

    def _launch(self, name: Hashable, steps: list[Step], stream: wp.Stream | None) -> None:
        for j, (kernel, dim, params) in enumerate(steps):
            recorded = self._recorded.get((name, j))
            if recorded is None:
                recorded = self._recorded[(name, j)] = RecordedLaunch(
                    kernel, dim, params, self._device, block_dim_for(self._device)
                )
            recorded.launch(dim, params, stream)

    @property
    def graph_count(self) -> int:
        """CUDA graphs held now (0 on the CPU)."""
        return sum(g is not None for graphs in self._graphs.values() for g in graphs.values())

    def clear(self) -> None:
        """Drop every recorded launch and graph (the view is closed)."""
        self._recorded.clear()
        self._graphs.clear()

# SPDX-License-Identifier: Apache-2.0
"""A Fabric view's launches (:class:`FabricLaunches`, the view's ``_launches``): the recorded launches of its calls
and, on CUDA, each call captured once into a graph replayed from then on, on the device's capture stream
(:func:`~frameview._core.launch.capture_stream`). Everything else its launches read belongs to the view, kept in its
cache and dropped with the fabric arrays on a bucket change; a launch captured in the caller's own graph takes the
stage's layout guard (:mod:`.epoch`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import warp as wp

from .._core.launch import UNSEEN, CallGraphs, RecordedLaunch, block_dim_for, capture_stream, captured, replay
from .epoch import UNGUARDED

if TYPE_CHECKING:
    from .._core.device_errors import DeviceErrors
    from .epoch import LayoutEpoch

__all__ = ["PUBLISHES", "FabricLaunches", "narrow_steps"]


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

    __slots__ = ("_cache", "_capture_stream", "_device", "_epoch", "_errors", "_graphs", "_no_capture_stream", "trace")

    def __init__(self, device: Any, errors: DeviceErrors, epoch: LayoutEpoch) -> None:
        self._device = device
        self._errors = errors
        self._epoch = epoch
        self._cache: dict[Any, Any] = {}
        self._graphs = CallGraphs()
        self._capture_stream: wp.Stream | None = None
        self._no_capture_stream = False
        self.trace: list | None = None

    def clear(self) -> None:
        """Drop every recorded launch and graph (the fabric arrays they hold were replaced, or the view closed)."""
        self._cache.clear()
        self._graphs.clear()

    def close(self) -> None:
        """Drop everything (the view is closed); the device's capture stream is shared (:func:`capture_stream`)."""
        self.clear()
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
            replay(graph)
            return
        if self._device.is_cuda and replays >= 1 and self._own_capture_stream() is not None:
            # captured on the device's capture stream, replayed on the caller's current stream
            stream = self._capture_stream
            entry[2] = captured(self._device, stream, lambda: cmd.launch(stream=stream))
            replay(entry[2])
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

    def run(self, name: Any, key: tuple | None, build: Callable[[], list[tuple]]) -> None:
        """Run a call's launches (``build()`` makes them), then (CUDA) publish the status word for the next call to
        look at (:meth:`DeviceErrors.publish`). On the CPU ``key`` is not looked at (``None`` will do).

        On CUDA, a call whose ``key`` (what the caller passes: row kind and count, argument addresses, flags) was
        seen before under ``name`` is captured once into a CUDA graph, then replayed as one launch without building
        its launches again: the reset loop passes the same buffers every time, only their contents change. The last
        few keys of each name keep their graphs (:class:`~frameview._core.launch.CallGraphs`). Everything
        else a launch reads belongs to the view and is replaced only on a bucket change, which drops the graphs with
        the recorded launches.
        """
        if not self._device.is_cuda:
            self._launch_steps(build())
            return
        if self._errors.is_capturing() or self._own_capture_stream() is None or self.trace is not None:
            self._launch_steps([*build(), ("publish",)])
            return
        graph = self._graphs.lookup(name, key)
        if graph is UNSEEN:
            self._launch_steps([*build(), ("publish",)])
            return
        if graph is None:  # every operation names the capture stream: the device's current stream is not touched
            stream = self._capture_stream
            steps = [*build(), ("publish",)]
            graph = captured(self._device, stream, lambda: self._launch_steps(steps, stream, in_graph=True))
            self._graphs.store(name, key, graph)
        replay(graph)
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

# SPDX-License-Identifier: Apache-2.0
"""How a :class:`~frameview.fabric.view.FabricFrameView` launches its kernels: recorded launches replayed, and on
CUDA captured once into graphs replayed from then on, on the view's own capture stream.

Everything a recorded launch or a graph reads belongs to the view (kept in ``_launches``, dropped with the fabric
arrays on a bucket change), except what the caller passes: a call's key holds the :func:`address` of each of those.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import warp as wp

from .._device_errors import DeviceErrors
from .._launch import RecordedLaunch, block_dim_for, capture_stream
from ..host import CAPTURE_LOCK

__all__ = ["PUBLISHES", "LaunchingMixin", "address"]

PUBLISHES = "publishes"
"""The fifth element of a step whose kernel can publish the call's status word (``LaunchingMixin._launch_steps``)."""


def address(array: wp.array | None) -> tuple | None:
    """What a captured launch depends on in a caller's array: its address, shape and strides."""
    return None if array is None else (array.ptr, array.shape, array.strides)


def narrow_key(rows: Any) -> tuple | None:
    """What a call's graph depends on in indices its first launch narrows (:attr:`Rows.narrow`): their address,
    shape, strides and dtype."""
    return None if rows.narrow is None else (address(rows.narrow[1]), rows.narrow[1].dtype)


class LaunchingMixin:
    """The launch plumbing of :class:`~frameview.fabric.view.FabricFrameView`: recorded launches, CUDA graphs."""

    _device: wp.context.Device
    _errors: DeviceErrors
    _launches: dict[Any, Any]
    _capture_stream: wp.Stream | None
    _no_capture_stream: bool
    _trace: list | None = None  # FabricFrameView.launch_trace: the launches recorded, None when not tracing

    if TYPE_CHECKING:

        def _guard(self, every_launch: bool = False) -> list: ...

    def _launch_recorded(
        self, key: Any, kernel: Any, dim: int, inputs: list, outputs: list, guarded: bool = True
    ) -> None:
        """Full-view launches are recorded once per fabric-array rebuild and replayed (cheaper than ``wp.launch``).
        A ``guarded`` kernel takes the layout guard after ``inputs`` (:meth:`_guard`), appended here: -1 in the
        recorded launch, compared in a launch captured in the caller's graph.

        On CUDA, once the same recorded launch has been replayed with unchanged buckets, it is captured into a CUDA
        graph and the graph is replayed from then on (the cheapest launch Warp offers); a bucket change drops both.
        Outputs are per thread, so the key includes their addresses, and the entry holds the output arrays: a recorded
        launch keeps raw pointers, which must not outlive (or be reused by) another allocation.
        """
        capturing = self._errors.is_capturing()
        if capturing or self._trace is not None:
            params = [*inputs, *self._guard()] if guarded else inputs
            if self._trace is not None:
                self._trace.append((kernel, dim, [*params, *outputs]))
            if capturing:  # inside the caller's graph capture: this launch, its guard set, is captured there
                wp.launch(kernel, dim=dim, inputs=params, outputs=outputs, device=self._device,
                          block_dim=block_dim_for(self._device))  # fmt: skip
                return
        key = (key, *[out.ptr for out in outputs])
        entry = self._launches.get(key)
        if entry is None:
            params = [*inputs, *self._guard()] if guarded else inputs
            cmd = wp.launch(kernel, dim=dim, inputs=params, outputs=outputs, device=self._device, record_cmd=True,
                            block_dim=block_dim_for(self._device))  # fmt: skip
            self._launches[key] = entry = [cmd, 0, None, outputs]
        cmd, replays, graph, _ = entry
        if graph is not None:
            wp.capture_launch(graph)
            return
        if self._device.is_cuda and replays >= 1 and self._own_capture_stream() is not None:
            # capture on the view's own (non-blocking) stream: work other threads put on the device meanwhile is
            # neither captured nor disturbed; the graph is replayed on the caller's current stream
            with CAPTURE_LOCK, wp.ScopedCapture(device=self._device, stream=self._capture_stream,
                                                force_module_load=False) as capture:  # fmt: skip
                cmd.launch(stream=self._capture_stream)
            entry[2] = capture.graph
            wp.capture_launch(capture.graph)
            return
        entry[1] = replays + 1
        cmd.launch()

    def _launch_cmd(
        self, key: Any, kernel: Any, dim: Any, params: list, stream: wp.Stream | None = None, traced: list | None = None
    ) -> None:
        """Launch ``kernel(*params)`` through a :class:`RecordedLaunch` kept under ``key`` (dropped with the fabric
        arrays on a bucket change). A launch trace (``launch_trace``) records ``traced`` (default ``params``)."""
        if self._trace is not None:
            self._trace.append((kernel, dim, list(params if traced is None else traced)))
        recorded = self._launches.get(key)
        if recorded is None:
            recorded = self._launches[key] = RecordedLaunch(kernel, dim, params, self._device,
                                                            block_dim_for(self._device))  # fmt: skip
        recorded.launch(dim, params, stream)

    def _run_steps(self, name: Any, key: tuple, build: Callable[[], list[tuple]]) -> None:
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
        if self._errors.is_capturing() or self._own_capture_stream() is None or self._trace is not None:
            self._launch_steps([*build(), ("publish",)])
            return
        cached = self._launches.get(("graph", name))
        if cached is None or cached[0] != key:
            self._launches[("graph", name)] = [key, None]
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
        """The view's non-blocking capture stream (made on first use), or None where none can be made."""
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
                if self._trace is not None:  # a trace's launches leave the status word alone
                    traced = [*params, *self._errors.no_publish]
                params = [*params, *extra]
            self._launch_cmd(key, kernel, dim, params, stream=stream, traced=traced)

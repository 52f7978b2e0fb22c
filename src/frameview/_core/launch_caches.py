# SPDX-License-Identifier: Apache-2.0
"""The Newton view's launch cache (:class:`LaunchCache`): a recorded launch per call name and step and, on CUDA, each
call captured once into a graph replayed from then on, on the device's capture stream
(:func:`~.launch.capture_stream`); its keys also name the simulation state's ``body_q``, a different array from one
step to the next. A Fabric view launches through :class:`~frameview.fabric.launches.FabricLaunches`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any

import warp as wp

from .launch import UNSEEN, CallGraphs, RecordedLaunch, block_dim_for, capture_stream, captured, replay

if TYPE_CHECKING:
    from .device_errors import DeviceErrors

__all__ = ["LaunchCache", "Step"]


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
    each name are kept (:class:`~frameview._core.launch.CallGraphs`): a loop swapping two states replays one graph
    per state.
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
        self._recorded: dict[tuple[Hashable, int], RecordedLaunch] = {}
        self._graphs = CallGraphs(per_name)
        self._stream: Any = _UNSET  # the device's capture stream, looked up on the first CUDA call

    @property
    def keyed(self) -> bool:
        """Whether :meth:`run` looks at its ``key`` (CUDA): on the CPU a caller may pass ``None`` and skip making
        it."""
        return self._device.is_cuda

    def run(self, name: Hashable, key: Hashable, build: Callable[[], list[Step]], publish: bool = False) -> None:
        """Run the call ``name`` (``build()`` makes its launches), then (CUDA, ``publish``) copy the status word to
        pinned memory; on CUDA replay the graph captured for ``key`` when there is one (see the class docstring)."""
        if not self._graphs_enabled():  # CPU, inside the caller's capture, or no stream of our own: plain launches
            self._launch(name, build(), None)
            self._publish(publish, None)
            return
        entry = self._graphs.lookup(name, key)
        if entry is UNSEEN:  # first sighting: launch
            self._launch(name, build(), None)
            self._publish(publish, None)
            return
        if entry is None:  # seen again: capture once
            entry = (self._capture(name, build(), publish), publish)
            self._graphs.store(name, key, entry)
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

        def launch() -> None:
            self._launch(name, steps, stream)
            self._publish(publish, stream, in_graph=True)

        return captured(self._device, stream, launch)

    def _replay(self, graph: Any) -> None:
        """Launch a captured graph on the device's current stream."""
        replay(graph)

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
        return self._graphs.count

    def clear(self) -> None:
        """Drop every recorded launch and graph (the view is closed)."""
        self._recorded.clear()
        self._graphs.clear()

# SPDX-License-Identifier: Apache-2.0
"""FabricFrameView: poses read and written in Fabric, through selections scoped to the view by a private tag.

Every managed prim carries ``frameview:<uid>:index`` (its view index) and every unique parent
``frameview:<uid>:parentIndex``; selections require the tag, so their size is the view's, not the stage's. On each
access the view->slot table is rebuilt from live Fabric data by inverting the tag column in one Warp launch: there
is no cache to invalidate, and a count mismatch raises instead of reading another prim.

Its rooms: :mod:`.lifecycle` (its state, deferred tag removals), :mod:`.nodes` (the prims a write reads),
:mod:`.selections` (each access's selections and fabric arrays), :mod:`frameview._launch` (recorded launches, CUDA
graphs), :mod:`.writes` (the write path), :mod:`.read_kernels` and :mod:`.write_kernels` (its kernels).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import warp as wp

from .._launch import PUBLISHES, LaunchingMixin, OffsetKeys, address, narrow_key
from .._rows import ALL, MASK, Rows
from ..base import BaseFrameView
from ..kernels.requests import WriteRequests
from ..kernels.slots import invert_tag_column
from .epoch import UNGUARDED, layout_changed, layout_epoch
from .lifecycle import DEFERRED_TAGS as _DEFERRED_TAGS
from .lifecycle import Lifecycle as _Lifecycle
from .nodes import node_graph as _node_graph
from .providers import _is_pxr_stage, open_fabric_stage
from .read_kernels import (
    _NO_OFFSET,
    _gather_poses,
    _gather_scales,
    _invert_check,
    _mask_poses,
    _scatter_poses,
    _scatter_scales,
)
from .selections import SelectionsMixin
from .stage import LOCAL_MATRIX, WORLD_MATRIX
from .write_kernels import STAGE_ALL, _stage_write
from .writes import WritesMixin

__all__ = ["FabricFrameView"]

logger = logging.getLogger(__name__)

_UIDS = itertools.count()
"""Process-wide, monotonic: a dead view's tag name can never satisfy a live view's selection."""


class FabricFrameView(SelectionsMixin, WritesMixin, LaunchingMixin, BaseFrameView):
    """A FrameView over Fabric: O(view) reads and writes, whatever the size of the stage.

    Writes change Fabric only, never USD; the other space (local or world) and the descendants' world matrices are
    brought up to date. Output buffers are owned by the view and overwritten by the same thread's next call of the
    same getter. A view is meant for one thread (the one that steps the simulation); calls from other threads are
    serialised on the stage's lock and get their own output buffers (see :class:`BaseFrameView`).

    Call :meth:`close` (or use ``with``) when done: it removes the view's tags from the stage. A view dropped without
    ``close()`` removes them when garbage-collected (when collected during another access to its stage, at that
    stage's next access) and logs a warning naming it.

    Example:
        >>> import frameview as fv  # doctest: +SKIP
        >>> with fv.FabricFrameView("/World/envs/env_.*/Camera", stage=stage, device="cuda:0") as view:
        ...     pos, quat = view.get_world_poses()  # (N,) vec3f, (N,) quatf xyzw, world frame
        ...     torch_pos = wp.to_torch(pos)  # zero-copy (N, 3)

    Args:
        prim_path: A path, a path with a regular expression per component (``/World/envs/env_.*/Camera``), or a
            list of paths.
        stage: A pxr ``Usd.Stage``, an ``ovstage.Stage``, a usdrt stage, or a ``FabricStage``.
        device: Warp device of the returned arrays and of the Fabric columns.
        fabric_provider: ``"auto"`` (chosen by the stage's type, logged), ``"memory"``, ``"ovstage"`` or ``"usdrt"``.
    """

    _device_rows = True
    _folds_narrow = True

    _state = _Lifecycle.BUILDING
    """The class default: a view whose construction failed before it tagged its prims has nothing to clean up."""

    @property
    def _closed(self) -> bool:
        """BaseFrameView's flag, derived from :attr:`_state`: only an ``OPEN`` view can be used (or closed)."""
        return self._state is not _Lifecycle.OPEN

    @_closed.setter
    def _closed(self, closed: bool) -> None:
        # BaseFrameView sets False in its __init__, before the prims are tagged (the view stays BUILDING until
        # FabricFrameView.__init__ opens it), and True in close()
        if closed:
            self._state = _Lifecycle.CLOSED

    def __init__(
        self,
        prim_path: str | Sequence[str],
        *,
        stage: Any,
        device: str = "cpu",
        fabric_provider: str = "auto",
    ) -> None:
        from ..paths import resolve_prim_paths

        fabric = open_fabric_stage(stage, device, fabric_provider)
        self._lock = fabric.lock  # BaseFrameView runs every public call under it: one lock per stage, no ordering
        with fabric.lock:
            _DEFERRED_TAGS.flush(fabric)
            paths = resolve_prim_paths(prim_path, stage if _is_pxr_stage(stage) else fabric)
            super().__init__(prim_path, paths, device=device)  # the view stays BUILDING
            if str(wp.get_device(fabric.device)) != self.device:
                raise ValueError(f"device: the Fabric stage lives on {fabric.device!r}, the view asks for {device!r}")
            missing = fabric.missing_prims(self.prim_paths)
            if missing:
                raise ValueError(
                    f"prim_path {prim_path!r}: {len(missing)} prim(s) carry no Fabric world/local matrices "
                    f"(not xformable, inactive or not in Fabric), e.g. {missing[:3]}"
                )
            node_parent, extras = _node_graph(fabric, self.prim_paths)
            self._fabric = fabric
            self._uid = next(_UIDS)
            self._tag = f"frameview:{self._uid}:index"
            self._parent_tag = f"frameview:{self._uid}:parentIndex"
            self._parent_paths = extras
            self._epoch = layout_epoch(fabric)
            fabric.set_uint_attribute(self.prim_paths, self._tag, np.arange(self.count, dtype=np.uint32))
            self._state = _Lifecycle.OPEN  # tags are on the stage from here: close() must remove them
            if self._parent_paths:
                fabric.set_uint_attribute(
                    self._parent_paths, self._parent_tag, np.arange(len(self._parent_paths), dtype=np.uint32)
                )
            layout_changed(fabric)  # the tags moved prims between buckets
            self._sel = fabric.select([self._tag, WORLD_MATRIX, LOCAL_MATRIX], write=True)
            self._parent_sel = fabric.select([self._parent_tag, WORLD_MATRIX, LOCAL_MATRIX], write=False)
            follow_plan = getattr(fabric, "follow_plan", None)
            self._follow = follow_plan(self.prim_paths) if follow_plan is not None else None
        dev, n = self._device, max(self.count, 1)
        self._node_parent = wp.array(node_parent, dtype=wp.int32, device=dev)
        # a view prim below another view prim: a write's solve reads other rows' requests (staged in a launch first)
        self._nested = bool(np.any((node_parent >= 0) & (node_parent < self.count)))
        self._slots = wp.empty(n, dtype=wp.int32, device=dev)
        self._parent_slots = wp.empty(max(len(self._parent_paths), 1), dtype=wp.int32, device=dev)
        # view index -> its parent's slot (a write of a view without nesting verifies each entry, repairs stale ones)
        self._row_parent_slots = wp.full(n, -1, dtype=wp.int32, device=dev)
        # view index -> request row, -1: not written (a view without nesting keeps it -1 between calls: its claims)
        self._req_row = wp.full(n, -1, dtype=wp.int32, device=dev)
        self._slots_fresh = False  # whether the slot tables were inverted since the Fabric arrays were last rebuilt
        self._view_slots_fresh = False  # the same for the view's own table (masked reads need only that one)
        self._req_all = wp.array(np.arange(n, dtype=np.int32), dtype=wp.int32, device=dev)
        self._new_local = wp.empty(n, dtype=wp.mat44d, device=dev)
        self._new_world = wp.empty(n, dtype=wp.mat44d, device=dev)
        self._written = wp.empty(n, dtype=wp.int32, device=dev)
        self._requests = WriteRequests(dev)
        self._no_index = wp.empty(0, dtype=wp.int32, device=dev)
        self._no_mask = wp.empty(0, dtype=wp.bool, device=dev)
        self._no_table = wp.empty((0, 0), dtype=wp.int32, device=dev)
        self._arrays: dict[str, Any] = {}
        self._columns: dict[str, Any] = {}  # the same columns as the reset path's kernels index them (plain_column)
        self._mask_views: dict[int, tuple[wp.array, np.ndarray]] = {}  # CPU masks' NumPy views (_mask_rows)
        self._launches: dict[Any, Any] = {}
        self._offset_key = OffsetKeys(_NO_OFFSET)
        self._capture_stream: wp.Stream | None = None
        self._no_capture_stream = False

    # ---------------------------------------------------------------- properties

    @property
    def backend(self) -> str:
        return f"fabric:{self._fabric.provider}" if hasattr(self, "_fabric") else "fabric"

    @property
    def tag_names(self) -> tuple[str, str]:
        """The private attributes this view authors: ``(index tag, parent index tag)``."""
        return self._tag, self._parent_tag

    @property
    def parent_paths(self) -> tuple[str, ...]:
        """The other Fabric prims a write reads: the nearest ancestors carrying Fabric matrices that lie outside the
        view, and the prims between nested view prims."""
        return self._parent_paths

    @property
    def fabric_stage(self) -> Any:
        """The provider object (a FabricStage) this view reads and writes."""
        return self._fabric

    # ---------------------------------------------------------------- seams for benchmarks and diagnostics

    def rebuild_slot_table(self, parents: bool = False) -> tuple[wp.array, Any]:
        """Rebuild the slot table of the view's prims (or of its :attr:`parent_paths`) exactly as every access does:
        bring the selection up to date, check its count (``RuntimeError`` naming lost prims), rebuild the fabric
        arrays only if the buckets changed, and launch the one tag-column inversion (recorded; a CUDA graph once the
        buckets are stable).

        For benchmarks and diagnostics (``perf/scaling.py`` times this call); reads and writes do it themselves.

        Returns:
            The slot table (``wp.array`` int32, ``table[i]`` is the Fabric slot of row ``i``) and the world-matrix
            fabric array it indexes. Both belong to the view and stay valid until the stage's buckets change.
        """
        self._check_open()
        with self._fabric.lock:
            sel, count, what, prefix, tag, slots, key = (
                (self._parent_sel, len(self._parent_paths), "parents", "parent:", self._parent_tag, self._parent_slots,
                 "invert_parents")
                if parents
                else (self._sel, self.count, "prims", "", self._tag, self._slots, "invert")
            )  # fmt: skip
            try:
                self._refresh_one(sel, count, what, (tag, WORLD_MATRIX, LOCAL_MATRIX))
                self._launch_recorded(key, invert_tag_column, count, [self._arrays[prefix + tag]], [slots],
                                      guarded=False)  # fmt: skip
                return slots, self._arrays[prefix + WORLD_MATRIX]
            finally:
                sel.release()

    @contextlib.contextmanager
    def launch_trace(self) -> Iterator[list[tuple[Any, Any, list]]]:
        """Record the kernel launches the view makes inside the ``with`` block (benchmarks and diagnostics:
        ``perf/bench_kernels.py`` times each launch of the reset path on its own).

        Inside the block every read and write launches its kernels one by one (no graph of the view's own), and each
        launch is recorded as ``(kernel, dim, params)``, ``params`` as the kernel takes them with the status-word
        publishing switched off, so that launching them again does not touch the view's error reporting. They hold
        the view's buffers and Fabric arrays: valid until the stage's buckets change or the view closes. Not for use
        while another thread calls the view.

        Yields:
            The list the launches are appended to.
        """
        self._check_open()
        trace: list[tuple[Any, Any, list]] = []
        self._trace = trace
        try:
            yield trace
        finally:
            self._trace = None

    def selection_size(self, parents: bool = False) -> int:
        """Prims in the view's (or its parents') scoped selection as Fabric sees it now: the view's count when all
        is well, whatever the size of the stage (benchmarks and diagnostics)."""
        self._check_open()
        with self._fabric.lock:
            sel = self._parent_sel if parents else self._sel
            try:
                sel.prepare_for_reuse()
                return int(sel.count)
            finally:
                sel.release()

    # ---------------------------------------------------------------- reads

    def _read_poses(
        self, attr: str, rows: Rows, pos_out: wp.array, quat_out: wp.array, offset: wp.quatf = _NO_OFFSET
    ) -> None:
        with self._fabric.lock:
            try:
                self._refresh(parents=False)
                mats, tags = self._arrays[attr], self._arrays[self._tag]
                columns = self._columns[attr], self._columns[self._tag]  # plain arrays where one bucket
                key = (attr, self._offset_key(offset))
                status = self._errors.status
                if rows.kind == ALL:
                    self._launch_recorded(("poses", key), _scatter_poses, self.count, [columns[1], columns[0],
                                          offset], [pos_out, quat_out, status])  # fmt: skip
                elif rows.kind == MASK:
                    self._invert_view_table(tags)
                    compact = self._compact_masks and self._device.is_cpu
                    picked = self._mask_rows(rows) if compact else rows
                    if picked.count == 0:  # nothing masked (CPU): nothing to launch
                        return
                    self._launch_cmd(("masked", key), _mask_poses, picked.count, [
                        columns[1], columns[0], self._slots, self.count, rows.mask, int(compact),
                        picked.indices if compact else self._no_index, offset, *self._guard(every_launch=True),
                        pos_out, quat_out, status])  # fmt: skip
                else:
                    where = (rows.count, address(rows.indices), address(pos_out), address(quat_out), narrow_key(rows))
                    self._run_steps(("gather", key), where, lambda: [
                        *self._narrow_steps(rows),
                        self._invert_check(tags, rows),
                        (("gather", key), _gather_poses, rows.count, [mats, self._slots, self.count, offset,
                         rows.indices, *self._guard(), pos_out, quat_out, status], PUBLISHES),
                    ])  # fmt: skip
            finally:
                self._release_selections()

    def _narrow_steps(self, rows: Rows) -> list[tuple]:
        """The launch that narrows the caller's indices into ``rows.indices`` (:attr:`Rows.narrow`), first in the
        call's steps (and in its graph), or none."""
        if rows.narrow is None:
            return []
        kernel, source = rows.narrow
        return [(("narrow", source.dtype), kernel, rows.count, [source, self.count, rows.indices])]

    def _invert_view_table(self, tags: Any) -> None:
        """Before a masked read: invert the tag column into the view's slot table once after the Fabric arrays were
        rebuilt (the masked read verifies each slot it uses, so a table that went stale costs time, never a row)."""
        if not self._view_slots_fresh:
            self._launch_cmd("invert_view", _stage_write, self.count, [
                tags, tags, self.count, 0, int(STAGE_ALL), self._no_mask, *self._guard(every_launch=True),
                self._slots, self._parent_slots, self._req_row, self._errors.status])  # fmt: skip
            self._view_slots_fresh = True

    def _invert_check(self, tags: Any, rows: Rows) -> tuple:
        """The first step of an indexed read: the slot table, and the indices out of range reported."""
        params = [tags, self.count, rows.indices, rows.count, *self._guard(), self._slots, self._errors.status]
        return ("invert_check", _invert_check, max(self.count, rows.count), params)

    def _guard(self, every_launch: bool = False) -> list:
        """The ``layout, expected`` arguments of a launch (:mod:`frameview.fabric.epoch`): the stage's epoch word, and
        its value for a launch captured in the caller's graph, which compares them first at every replay; -1 for a
        launch inside a view call (the call brought the view's Fabric arrays up to date, and the epoch's word).

        ``every_launch``: on CUDA, the value in every launch, captured or not, without asking whether the stream
        captures (a driver call, ~1 us of host time): for launches that are never part of the view's own graphs and
        whose kernel loads the word beside the mask (no GPU time; on the CPU, where nothing is captured, a load per
        row)."""
        epoch = self._epoch
        if (every_launch and self._device.is_cuda) or self._errors.is_capturing():
            return [epoch.word, epoch.value]
        return [epoch.word, UNGUARDED]

    def _read_scales(self, attr: str, rows: Rows, scale_out: wp.array) -> None:
        with self._fabric.lock:
            try:
                self._refresh(parents=False)
                mats, tags = self._arrays[attr], self._arrays[self._tag]
                status = self._errors.status
                if rows.kind == ALL:
                    self._launch_recorded(f"scales:{attr}", _scatter_scales, self.count,
                                          [tags, mats, self._no_mask, 0], [scale_out, status])  # fmt: skip
                elif rows.kind == MASK:
                    self._launch_cmd(("scales_masked", attr), _scatter_scales, self.count,
                                     [tags, mats, rows.mask, 1, *self._guard(every_launch=True), scale_out,
                                      status])  # fmt: skip
                else:
                    where = (rows.count, address(rows.indices), address(scale_out), narrow_key(rows))
                    self._run_steps(("gather_scales", attr), where, lambda: [
                        *self._narrow_steps(rows),
                        self._invert_check(tags, rows),
                        (("gather_scales", attr), _gather_scales, rows.count, [mats, self._slots, self.count,
                         rows.indices, *self._guard(), scale_out, status], PUBLISHES),
                    ])  # fmt: skip
            finally:
                self._release_selections()

    def _read_world_poses(self, rows: Rows, pos_out: wp.array, quat_out: wp.array) -> None:
        self._read_poses(WORLD_MATRIX, rows, pos_out, quat_out)

    def _read_local_poses(self, rows: Rows, pos_out: wp.array, quat_out: wp.array) -> None:
        self._read_poses(LOCAL_MATRIX, rows, pos_out, quat_out)

    def _read_world_scales(self, rows: Rows, scale_out: wp.array) -> None:
        self._read_scales(WORLD_MATRIX, rows, scale_out)

    def _read_local_scales(self, rows: Rows, scale_out: wp.array) -> None:
        self._read_scales(LOCAL_MATRIX, rows, scale_out)

    def _read_world_poses_rotated(self, rows: Rows, pos_out: wp.array, quat_out: wp.array, offset: wp.quatf) -> None:
        """World poses with each orientation right-multiplied by ``offset`` in the same launch (camera frames)."""
        self._read_poses(WORLD_MATRIX, rows, pos_out, quat_out, offset)

    # ---------------------------------------------------------------- writes

    def _write_world_poses(self, rows: Rows, pos: wp.array | None, quat: wp.array | None) -> None:
        self._write(rows, in_world=True, pos=pos, quat=quat)

    def _write_local_poses(self, rows: Rows, pos: wp.array | None, quat: wp.array | None) -> None:
        self._write(rows, in_world=False, pos=pos, quat=quat)

    def _write_local_scales(self, rows: Rows, scales: wp.array) -> None:
        self._write(rows, in_world=False, scale=scales)

    # ---------------------------------------------------------------- visibility (host path, see frameview.visibility)

    def _read_visibility(self, rows: np.ndarray | None) -> np.ndarray:
        with self._fabric.lock:
            paths = self._live_visibility_paths(rows)
            return np.asarray(self._fabric.visibility(paths), dtype=bool)

    def _write_visibility(self, rows: np.ndarray | None, visible: np.ndarray) -> None:
        with self._fabric.lock:
            self._fabric.set_visibility(self._live_visibility_paths(rows), visible)

    def _live_visibility_paths(self, rows: np.ndarray | None) -> list[str]:
        """The paths of view prims ``rows``; ``RuntimeError`` (recreate the view) when the stage or a prim is gone."""
        if not self._fabric.is_alive():
            raise RuntimeError(f"{self!r}: its stage was released; create the view again on a live stage")
        paths = self._visibility_paths(rows)
        missing = self._fabric.missing_prims(paths)
        if missing:
            reason = getattr(self._fabric, "lost_reason", lambda _path: None)
            named = ", ".join(f"{p!r} ({reason(p) or 'no longer in Fabric'})" for p in missing[:3])
            raise RuntimeError(f"{self!r}: {len(missing)} of its prims left Fabric since it was created: {named}; "
                               "recreate the view")  # fmt: skip
        return paths

    # ---------------------------------------------------------------- lifecycle

    def _release(self) -> None:
        """Remove both tags from every tagged prim, in one batch each."""
        self._launches.clear()
        self._requests.clear()
        self._arrays.clear()
        self._columns.clear()
        self._capture_stream = None  # the device's, shared (frameview._launch.capture_stream): kept
        fabric = self._fabric
        if not fabric.is_alive():
            return
        with fabric.lock:
            _DEFERRED_TAGS.flush(fabric)
            fabric.remove_attribute(self.prim_paths, self._tag)
            if self._parent_paths:
                fabric.remove_attribute(self._parent_paths, self._parent_tag)
            layout_changed(fabric)

    def __del__(self, _sys: Any = sys) -> None:
        # Shutdown-safe: nothing runs during interpreter finalisation (Fabric dies with the process anyway).
        if _sys.is_finalizing() or self._state is not _Lifecycle.OPEN:
            return
        try:
            lock = self._fabric.lock
            is_owned = getattr(lock, "_is_owned", None)
            if (is_owned is not None and is_owned()) or not lock.acquire(blocking=False):
                # Collected in the middle of an access (GC runs wherever an allocation triggers it): removing tags
                # now would move bucket columns under that access. The stage's next access removes them.
                logger.warning(
                    "%r was garbage-collected without close() during another access to its stage: its Fabric tags "
                    "go at the stage's next access; call close() or use 'with' to release them deterministically",
                    self,
                )
                self._state = _Lifecycle.CLOSED
                _DEFERRED_TAGS.defer(self._fabric, self.prim_paths, self._tag, self._parent_paths, self._parent_tag)
                return
            lock.release()
            logger.warning(
                "%r was garbage-collected without close(): removing its Fabric tags now; call close() or use "
                "'with' to release them deterministically",
                self,
            )
            self.close()
        except Exception:
            logger.debug("cleanup of a dropped FabricFrameView failed", exc_info=True)

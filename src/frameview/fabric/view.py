# SPDX-License-Identifier: Apache-2.0
"""FabricFrameView: poses read and written in Fabric, through selections scoped to the view by a private tag.

Every managed prim carries ``frameview:<uid>:index`` (its view index) and every unique parent
``frameview:<uid>:parentIndex``; selections require the tag, so their size is the view's, not the stage's. On each
access the view->slot table is rebuilt from live Fabric data by inverting the tag column in one Warp launch: there
is no cache to invalidate, and a count mismatch raises instead of reading another prim.

The view is one class that owns its parts, each built from explicit inputs: :class:`~.data.FabricData` (the
selections, fabric arrays and slot tables, ``_data``), :class:`~frameview.fabric.launches.FabricLaunches` (recorded
launches, CUDA graphs, ``_launches``), :class:`~.write_path.FabricWriter` (the write path, ``_writer``) and
:class:`~frameview._core.rows.MaskCompaction` (CPU masks, ``_compact``); the reads are its own. Elsewhere:
:mod:`.lifecycle` (its state, deferred tag removals), :mod:`.nodes` (the prims a write reads), :mod:`.read_kernels` and
:mod:`.write_kernels` (its kernels).
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

from .._core.launch import OffsetKeys, address, narrow_key
from .._core.rows import ALL, MASK, MaskCompaction, Rows
from ..base import BaseFrameView
from ..kernels.slots import invert_tag_column
from ..visibility import visibility_paths
from .data import FabricData
from .epoch import layout_changed, layout_epoch
from .launches import PUBLISHES, FabricLaunches, narrow_steps
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
from .stage import LOCAL_MATRIX, WORLD_MATRIX
from .write_kernels import STAGE_ALL, _stage_write
from .write_path import FabricWriter

__all__ = ["FabricFrameView"]

logger = logging.getLogger(__name__)

_UIDS = itertools.count()
"""Process-wide, monotonic: a dead view's tag name can never satisfy a live view's selection."""


class FabricFrameView(BaseFrameView):
    """A FrameView over Fabric: O(view) reads and writes, whatever the size of the stage.

    Writes change Fabric only, never USD; the other space (local or world) and the descendants' world matrices are
    brought up to date. Output buffers are owned by the view and overwritten by the same thread's next call of the
    same getter. A view is meant for one thread (the one that steps the simulation); calls from other threads are
    serialised on the stage's lock and get their own output buffers (see :class:`BaseFrameView`).

    Call :meth:`~frameview.BaseFrameView.close` (or use ``with``) when done: it removes the view's tags from the
    stage. A view dropped without ``close()`` removes them when garbage-collected (when collected during another
    access to its stage, at that stage's next access) and logs a warning naming it.

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
        quat_order: ``"xyzw"`` (the default) or ``"wxyz"``: the order of every orientation the view takes and returns
            (see :class:`~frameview.BaseFrameView`).
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
        quat_order: str = "xyzw",
    ) -> None:
        from ..paths import resolve_prim_paths

        fabric = open_fabric_stage(stage, device, fabric_provider)
        self._lock = fabric.lock  # BaseFrameView runs every public call under it: one lock per stage, no ordering
        with fabric.lock:
            _DEFERRED_TAGS.flush(fabric)
            paths = resolve_prim_paths(prim_path, stage if _is_pxr_stage(stage) else fabric)
            super().__init__(prim_path, paths, device=device, quat_order=quat_order)  # the view stays BUILDING
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
            sel = fabric.select([self._tag, WORLD_MATRIX, LOCAL_MATRIX], write=True)
            parent_sel = fabric.select([self._parent_tag, WORLD_MATRIX, LOCAL_MATRIX], write=False)
            follow_plan = getattr(fabric, "follow_plan", None)
            follow = follow_plan(self.prim_paths) if follow_plan is not None else None
        dev, errors = self._device, self._errors
        self._launches = FabricLaunches(dev, errors, self._epoch)
        self._data = FabricData(fabric, repr(self), self.prim_paths, self._tag, self._parent_paths, self._parent_tag,
                                sel, parent_sel, self._epoch, errors, dev, self._launches)  # fmt: skip
        self._compact = MaskCompaction(self._args.index_buffer, self._args.index_host, self._args.heads)
        self._writer = FabricWriter(self._data, self._launches, self._compact, errors, dev, follow, node_parent)
        self._offset_key = OffsetKeys(_NO_OFFSET)

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
        data = self._data
        with self._fabric.lock:
            sel, count, what, prefix, tag, slots, key = (
                (data.parent_sel, len(self._parent_paths), "parents", "parent:", self._parent_tag, data.parent_slots,
                 "invert_parents")
                if parents
                else (data.sel, self.count, "prims", "", self._tag, data.slots, "invert")
            )  # fmt: skip
            try:
                data.refresh_one(sel, count, what, (tag, WORLD_MATRIX, LOCAL_MATRIX))
                self._launches.recorded(key, invert_tag_column, count, [data.arrays[prefix + tag]], [slots],
                                        guarded=False)  # fmt: skip
                return slots, data.arrays[prefix + WORLD_MATRIX]
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
        self._launches.trace = trace
        try:
            yield trace
        finally:
            self._launches.trace = None

    def selection_size(self, parents: bool = False) -> int:
        """Prims in the view's (or its parents') scoped selection as Fabric sees it now: the view's count when all
        is well, whatever the size of the stage (benchmarks and diagnostics)."""
        self._check_open()
        with self._fabric.lock:
            sel = self._data.parent_sel if parents else self._data.sel
            try:
                sel.prepare_for_reuse()
                return int(sel.count)
            finally:
                sel.release()

    # ---------------------------------------------------------------- reads

    def _read_poses(
        self, attr: str, rows: Rows, pos_out: wp.array, quat_out: wp.array, offset: wp.quatf = _NO_OFFSET
    ) -> None:
        data, launches = self._data, self._launches
        with data.fabric.lock:
            try:
                data.refresh(parents=False, read=(data.tag, attr))  # the launches below read these two columns
                arrays, count = data.arrays, data.count
                mats, tags = arrays[attr], arrays[data.tag]
                columns = data.columns[attr], data.columns[data.tag]  # plain arrays where one bucket
                key = (attr, self._offset_key(offset))
                status = self._errors.status
                if rows.kind == ALL:
                    launches.recorded(("poses", key), _scatter_poses, count, [columns[1], columns[0], offset],
                                      [pos_out, quat_out, status])  # fmt: skip
                elif rows.kind == MASK:
                    self._invert_view_table(tags)
                    compact = self._compact.enabled and self._device.is_cpu
                    picked = self._compact(rows) if compact else rows
                    if picked.count == 0:  # nothing masked (CPU): nothing to launch
                        return
                    launches.command(("masked", key), _mask_poses, picked.count, [
                        columns[1], columns[0], data.slots, count, rows.mask, int(compact),
                        picked.indices if compact else data.no_index, offset, *data.guard(every_launch=True),
                        pos_out, quat_out, status])  # fmt: skip
                else:
                    where = (rows.count, address(rows.indices), address(pos_out), address(quat_out), narrow_key(rows))
                    launches.run(("gather", key), where, lambda: [
                        *narrow_steps(rows, count),
                        self._invert_check(tags, rows),
                        (("gather", key), _gather_poses, rows.count, [mats, data.slots, count, offset,
                         rows.indices, *data.guard(), pos_out, quat_out, status], PUBLISHES),
                    ])  # fmt: skip
            finally:
                data.release()

    def _invert_view_table(self, tags: Any) -> None:
        """Before a masked read: invert the tag column into the view's slot table once after the Fabric arrays were
        rebuilt (the masked read verifies each slot it uses, so a table that went stale costs time, never a row)."""
        data = self._data
        if not data.view_slots_fresh:
            self._launches.command("invert_view", _stage_write, data.count, [
                tags, tags, data.count, 0, int(STAGE_ALL), data.no_mask, *data.guard(every_launch=True),
                data.slots, data.parent_slots, data.req_row, self._errors.status])  # fmt: skip
            data.view_slots_fresh = True

    def _invert_check(self, tags: Any, rows: Rows) -> tuple:
        """The first step of an indexed read: the slot table, and the indices out of range reported."""
        data = self._data
        params = [tags, data.count, rows.indices, rows.count, *data.guard(), data.slots, self._errors.status]
        return ("invert_check", _invert_check, max(data.count, rows.count), params)

    def _read_scales(self, attr: str, rows: Rows, scale_out: wp.array) -> None:
        data, launches = self._data, self._launches
        with data.fabric.lock:
            try:
                data.refresh(parents=False, read=(data.tag, attr))  # the launches below read these two columns
                count = data.count
                mats, tags = data.arrays[attr], data.arrays[data.tag]
                status = self._errors.status
                if rows.kind == ALL:
                    launches.recorded(f"scales:{attr}", _scatter_scales, count, [tags, mats, data.no_mask, 0],
                                      [scale_out, status])  # fmt: skip
                elif rows.kind == MASK:
                    launches.command(("scales_masked", attr), _scatter_scales, count,
                                     [tags, mats, rows.mask, 1, *data.guard(every_launch=True), scale_out,
                                      status])  # fmt: skip
                else:
                    where = (rows.count, address(rows.indices), address(scale_out), narrow_key(rows))
                    launches.run(("gather_scales", attr), where, lambda: [
                        *narrow_steps(rows, count),
                        self._invert_check(tags, rows),
                        (("gather_scales", attr), _gather_scales, rows.count, [mats, data.slots, count,
                         rows.indices, *data.guard(), scale_out, status], PUBLISHES),
                    ])  # fmt: skip
            finally:
                data.release()

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

    # ---------------------------------------------------------------- writes (the writer: frameview.fabric.write_path)

    def _write_world_poses(self, rows: Rows, pos: wp.array | None, quat: wp.array | None) -> None:
        self._writer.write(rows, True, pos, quat, None)

    def _write_local_poses(self, rows: Rows, pos: wp.array | None, quat: wp.array | None) -> None:
        self._writer.write(rows, False, pos, quat, None)

    def _write_local_scales(self, rows: Rows, scales: wp.array) -> None:
        self._writer.write(rows, False, None, None, scales)

    def _write(
        self,
        rows: Rows,
        *,
        in_world: bool,
        pos: wp.array | None = None,
        quat: wp.array | None = None,
        scale: wp.array | None = None,
        keep: tuple[tuple, list] | None = None,
    ) -> None:
        """The combined write writer scopes use (:mod:`frameview.writers`): every component in one solve; ``keep``:
        the buffers of the scope's copy of the write, which the solve fills (:meth:`FabricWriter.write`)."""
        self._writer.write(rows, in_world, pos, quat, scale, keep)

    def _scope_writes_at_call(self) -> bool:
        """A writer scope writes at each call (no view prim lies below another: the writes of one scope cannot
        carry each other away), keeping a copy to write again at exit if the stage changed meanwhile."""
        return not self._writer.nested

    def _stage_marks(self) -> tuple[int, int]:
        """What a writer scope compares at exit: the stage's pose writes by frameview's views, and the USD edits
        the provider noticed (the embedded model follows them; other providers: 0)."""
        return self._epoch.writes, getattr(self._fabric, "usd_edits", 0)

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
        paths = visibility_paths(self.prim_paths, rows)
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
        self._launches.close()
        self._writer.close()
        self._data.clear()
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

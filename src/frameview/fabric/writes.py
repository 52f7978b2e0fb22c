# SPDX-License-Identifier: Apache-2.0
"""The write path of a :class:`~frameview.fabric.view.FabricFrameView`: one call's launches (kernels in
:mod:`frameview.fabric.write_kernels` and :mod:`frameview.fabric.nested_write_kernels`), run through the view's launch
plumbing, then the descendants' update."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import warp as wp

from .._device_errors import DeviceErrors
from .._launch import PUBLISHES, address, narrow_key
from .._rows import ALL, INDEXED, MASK, MASK_ROWS, Rows
from ..host import to_numpy
from ..kernels.requests import WriteRequests
from .nested_write_kernels import _commit_follow, _solve_writes, _stage_indices
from .stage import LOCAL_MATRIX, WORLD_MATRIX
from .write_kernels import STAGE_ALL, STAGE_INDICES, STAGE_MASK, _commit_flat, _solve_flat, _stage_write

__all__ = ["WritesMixin"]


class WritesMixin:
    """The write path of :class:`~frameview.fabric.view.FabricFrameView`: ``_write`` and the launches it runs."""

    _device: wp.context.Device
    _errors: DeviceErrors
    _fabric: Any
    _follow: Any
    _sel: Any
    _arrays: dict[str, Any]
    _columns: dict[str, Any]
    _tag: str
    _parent_tag: str
    _parent_paths: tuple[str, ...]
    _node_parent: wp.array
    _nested: bool
    _slots_fresh: bool
    _view_slots_fresh: bool
    _slots: wp.array
    _parent_slots: wp.array
    _row_parent_slots: wp.array
    _req_row: wp.array
    _req_all: wp.array
    _new_local: wp.array
    _new_world: wp.array
    _written: wp.array
    _requests: WriteRequests
    _no_index: wp.array
    _no_mask: wp.array
    _no_table: wp.array
    _index_buffer: wp.array
    _index_host: np.ndarray
    _mask_views: dict[int, tuple[wp.array, np.ndarray]]
    _compact_masks = True
    """CPU: compact a masked write's (and pose read's) rows before its launches (:meth:`_mask_rows`); the tests also
    run the kernels' MASK path on the CPU with it off (the path CUDA takes)."""

    if TYPE_CHECKING:

        @property
        def count(self) -> int: ...

        def _head(self, buf: wp.array, rows: int) -> wp.array: ...

        def _status_error(self, call: str, rows: Rows | None) -> Callable[[int], Exception]: ...

        def _refresh(self, parents: bool, write: bool = False) -> None: ...

        def _release_selections(self) -> None: ...

        def _outside_capture(self, what: str) -> None: ...

        def _run_steps(self, name: str, key: tuple, build: Callable[[], list[tuple]]) -> None: ...

        def _guard(self) -> list: ...

        def _narrow_steps(self, rows: Rows) -> list[tuple]: ...

    def _write(
        self,
        rows: Rows,
        *,
        in_world: bool,
        pos: wp.array | None = None,
        quat: wp.array | None = None,
        scale: wp.array | None = None,
    ) -> None:
        """Solve every written prim against its parent's world matrix after the write (nested prims included), then
        commit all rows or none and bring the descendants' world matrices up to date. Device work only, except for
        providers without a device hierarchy update (ovstage, usdrt)."""
        with self._fabric.lock:
            try:
                self._refresh(parents=True, write=True)
                plan = self._follow
                if plan is not None:
                    if getattr(plan, "stale", False):
                        self._outside_capture("its descendant plan's arrays")
                    plan.refresh()  # host work only when the model's prims or buckets changed
                if rows.kind == MASK and self._compact_masks and self._device.is_cpu and not self._nested:
                    rows = self._mask_rows(rows)
                    if rows.count == 0:
                        return
                key = (rows.kind, rows.count, in_world, address(rows.indices), address(rows.mask), address(pos),
                       address(quat), address(scale), plan.stamp if plan is not None else None,
                       narrow_key(rows))  # fmt: skip
                written = self._head(self._written, rows.count)
                self._run_steps(
                    "write",
                    key,
                    lambda: [*self._narrow_steps(rows), *self._write_steps(rows, in_world, pos, quat, scale, written)],
                )
                if plan is None:  # providers that update the hierarchy on the host: settle, then hand the slots over
                    call = "set_local_scales" if scale is not None else ("set_world" if in_world else "set_local")
                    self._errors.settle(self._status_error(call, rows), now=True)
                    slots = to_numpy(written)
                    slots = slots[slots >= 0]
                    if slots.size:
                        self._fabric.propagate_world(self._sel, wp.array(slots, dtype=wp.int32, device=self._device))
            finally:
                self._release_selections()

    def _mask_rows(self, rows: Rows) -> Rows:
        """CPU: a mask's rows compacted into the view's index buffer (``MASK_ROWS``), so that a call's launches
        loop over the rows written (or read) instead of every row of the mask (Warp's CPU launches run one thread after
        another: a reset's 256 of 8192 rows otherwise pay ~5 ns per row left out in each launch). The CPU's arrays are
        host memory: NumPy reads the mask in place."""
        views = self._mask_views
        view = views.get(id(rows.mask))
        if view is None or view[0] is not rows.mask:  # a reset loop passes the same mask: its view is kept
            if len(views) >= 8:
                views.clear()
            view = views[id(rows.mask)] = (rows.mask, to_numpy(rows.mask))  # holds the mask: its id stays its own
        host = view[1].nonzero()[0]
        n = host.size
        self._index_host[:n] = host
        return Rows(MASK_ROWS, n, indices=self._head(self._index_buffer, n))

    def _write_steps(
        self,
        rows: Rows,
        in_world: bool,
        pos: wp.array | None,
        quat: wp.array | None,
        scale: wp.array | None,
        written: wp.array,
    ) -> list[tuple]:
        """The launches of a write. A view without nested prims: [invert the slot tables, only after the Fabric
        arrays were rebuilt,] solve, commit + follow. A view with nested prims: stage (slot tables, request rows),
        [stage indices,] solve, commit + follow."""
        status, count, n_parents = self._errors.status, self.count, len(self._parent_paths)
        indexed = rows.kind == INDEXED
        indices = rows.indices if indexed or rows.kind == MASK_ROWS else self._no_index
        tags = self._arrays[self._tag]
        parent = "parent:" if n_parents else ""
        parent_tags = self._arrays["parent:" + self._parent_tag] if n_parents else tags
        view_world, view_local = self._arrays[WORLD_MATRIX], self._arrays[LOCAL_MATRIX]
        columns = self._columns  # the flat path's kernels: plain arrays where a selection spans one bucket
        request = self._requests(in_world, pos, quat, scale)
        plan = self._follow
        if plan is not None and plan.width > 0:
            local_all, world_all = plan.columns()
            follow = [plan.start, plan.nodes, plan.node_slot, plan.node_parent, plan.node_top, 1, local_all]
            flat_local, flat_world, flat_slot = plan.flat_columns()
            follow_flat = [flat_slot, plan.follow_up, 1, flat_local]
            width = plan.width + 1  # thread (0, k) commits row k, thread (j + 1, k) its j-th descendant
        else:
            follow, world_all, width = [*(self._no_index,) * 5, 0, view_local], view_world, 1
            flat_world = columns[WORLD_MATRIX]
            follow_flat = [self._no_table, self._no_table, 0, columns[LOCAL_MATRIX]]
        outputs = [view_local, view_world, world_all, written]
        guard = self._guard()  # the first launch touching Fabric compares it; the others follow the status word
        steps: list[tuple] = []
        if not self._nested:
            mask = rows.mask if rows.kind == MASK else self._no_mask
            if not self._slots_fresh:  # the Fabric arrays were rebuilt: invert once, then verify per use
                steps.append(("invert_tables", _stage_write, max(count, n_parents, 1), [
                    tags, parent_tags, count, n_parents, int(STAGE_ALL), self._no_mask, *guard, self._slots,
                    self._parent_slots, self._req_row, status]))  # fmt: skip
                self._slots_fresh = self._view_slots_fresh = True
            steps.append(("solve_flat", _solve_flat, rows.count, [
                columns[self._tag], columns[LOCAL_MATRIX], self._slots,
                columns["parent:" + self._parent_tag] if n_parents else columns[self._tag],
                columns[parent + WORLD_MATRIX], self._parent_slots,
                n_parents, self._node_parent, count, int(rows.kind), indices, mask, request, *guard,
                self._row_parent_slots, self._req_row, self._new_local, self._new_world, status,
            ]))  # fmt: skip
            steps.append(("commit_flat", _commit_flat, (width, rows.count), [
                self._new_local, self._new_world, self._slots, count, int(rows.kind), indices, mask, self._req_row,
                status, *follow_flat, columns[LOCAL_MATRIX], columns[WORLD_MATRIX], flat_world, written,
            ], PUBLISHES))  # fmt: skip
            return steps
        mode = STAGE_INDICES if indexed else (STAGE_MASK if rows.kind == MASK else STAGE_ALL)
        req_row = self._req_all if rows.kind == ALL else self._req_row
        steps.append(("stage", _stage_write, max(count, n_parents), [
            tags, parent_tags, count, n_parents, int(mode), rows.mask if rows.kind == MASK else self._no_mask, *guard,
            self._slots, self._parent_slots, self._req_row, status,
        ]))  # fmt: skip
        if indexed:
            steps.append(("stage_indices", _stage_indices, rows.count, [indices, count, self._req_row, status]))
        steps.append(("solve", _solve_writes, rows.count, [
            view_local, self._slots, self._arrays[parent + WORLD_MATRIX], self._arrays[parent + LOCAL_MATRIX],
            self._parent_slots, self._node_parent, count, indices, int(indexed), req_row, request,
            self._new_local, self._new_world, status,
        ]))  # fmt: skip
        steps.append(("commit", _commit_follow, (width, rows.count), [
            self._new_local, self._new_world, self._slots, count, indices, int(indexed), req_row, status, *follow,
            *outputs,
        ], PUBLISHES))  # fmt: skip
        return steps

# SPDX-License-Identifier: Apache-2.0
"""The write path of a :class:`~frameview.fabric.view.FabricFrameView`: one call's launches (kernels in
:mod:`frameview.fabric.write_kernels` and :mod:`frameview.fabric.nested_write_kernels`), run through the view's launch
plumbing, then the descendants' update."""

from __future__ import annotations

from typing import Any

import numpy as np
import warp as wp

from .._core.device_errors import DeviceErrors, outside_capture, status_error
from .._core.host import to_numpy
from .._core.launch import address, narrow_key
from .._core.rows import ALL, INDEXED, MASK, MASK_ROWS, MaskCompaction, Rows, head_of
from ..kernels.requests import WriteRequests
from .data import FabricData
from .launches import PUBLISHES, FabricLaunches, narrow_steps
from .nested_write_kernels import _commit_follow, _solve_writes, _stage_indices
from .stage import LOCAL_MATRIX, WORLD_MATRIX
from .write_kernels import STAGE_ALL, STAGE_INDICES, STAGE_MASK, _commit_flat, _solve_flat, _stage_write

__all__ = ["FabricWriter"]


class FabricWriter:
    """The write path of :class:`~frameview.fabric.view.FabricFrameView`: :meth:`write` and the launches it runs
    (solve every written prim against its parent, then commit all rows or none and bring the descendants up to date).

    Args:
        data: The view's Fabric data (selections, fabric arrays, slot tables).
        launches: The view's launches.
        compact: The view's mask compaction (CPU).
        errors: The view's status word.
        device: The view's Warp device.
        follow: The provider's descendant plan of the view's prims (None: the provider updates the hierarchy on the
            host, ``fabric.propagate_world``).
        node_parent: int32 per view prim, its parent node (``< N``: a view prim; ``>= N``: parent ``k - N``).

    Attributes:
        follow: ``follow`` (the tests read its columns: which kind of column the commit indexes).
        node_parent: ``node_parent`` on the device.
        nested: Whether a view prim lies below another (a write's solve then reads other rows' requests, staged in a
            launch first).
        requests: The write requests' packing (:class:`~frameview.kernels.requests.WriteRequests`).
    """

    __slots__ = (
        "_compact",
        "_data",
        "_device",
        "_errors",
        "_heads",
        "_launches",
        "_no_keep",
        "_no_wide",
        "follow",
        "nested",
        "new_local",
        "new_world",
        "node_parent",
        "req_all",
        "requests",
        "written",
    )

    def __init__(
        self,
        data: FabricData,
        launches: FabricLaunches,
        compact: MaskCompaction,
        errors: DeviceErrors,
        device: Any,
        follow: Any,
        node_parent: np.ndarray,
    ) -> None:
        self._data, self._launches, self._compact = data, launches, compact
        self._errors, self._device, self.follow = errors, device, follow
        count = data.count
        n = max(count, 1)
        self.node_parent = wp.array(node_parent, dtype=wp.int32, device=device)
        self.nested = bool(np.any((node_parent >= 0) & (node_parent < count)))
        self.req_all = wp.array(np.arange(n, dtype=np.int32), dtype=wp.int32, device=device)
        self.new_local = wp.empty(n, dtype=wp.mat44d, device=device)
        self.new_world = wp.empty(n, dtype=wp.mat44d, device=device)
        self._no_wide = wp.empty(0, dtype=wp.int64, device=device)
        self._no_keep = [wp.empty(0, dtype=dtype, device=device)
                         for dtype in (wp.int32, wp.bool, wp.vec3f, wp.quatf, wp.vec3f)]  # fmt: skip
        self.written = wp.empty(n, dtype=wp.int32, device=device)
        self.requests = WriteRequests(device)
        self._heads: dict[tuple[int, int], wp.array] = {}

    def close(self) -> None:
        """Drop the packed requests (the view is closed)."""
        self.requests.clear()

    def write(
        self,
        rows: Rows,
        in_world: bool,
        pos: wp.array | None,
        quat: wp.array | None,
        scale: wp.array | None,
        keep: tuple[tuple, list] | None = None,
    ) -> None:
        """Solve every written prim against its parent's world matrix after the write (nested prims included), then
        commit all rows or none and bring the descendants' world matrices up to date. Device work only, except for
        providers without a device hierarchy update (ovstage, usdrt).

        ``keep`` (a writer scope's write at its call; a view without nested prims): ``(key, arrays)``, the scope's
        buffers that the solve copies the write's rows and data into (indices, mask, positions, orientations,
        scales: :func:`~frameview._core.argument_kernels.copy_write_row`); ``key`` names them (on CUDA the
        write's graph is kept apart from the setters'). A masked write then skips the CPU's mask compaction (the copy
        is made even when no row is selected)."""
        data = self._data
        with data.fabric.lock:
            data.epoch.writes += 1
            try:
                # the flat path's kernels read the parents' tag and world columns only
                parent_read = None if self.nested else (data.parent_tag, WORLD_MATRIX)
                data.refresh(parents=True, write=True, parent_read=parent_read)
                plan = self.follow
                if plan is not None:
                    if getattr(plan, "stale", False):
                        outside_capture(data.label, self._device, self._errors, "its descendant plan's arrays")
                    plan.refresh()  # host work only when the model's prims or buckets changed
                compact = self._compact.enabled and self._device.is_cpu and not self.nested and keep is None
                if rows.kind == MASK and compact:
                    rows = self._compact(rows)
                    if rows.count == 0:
                        return
                key = (rows.kind, rows.count, in_world, address(rows.indices), address(rows.mask), address(pos),
                       address(quat), address(scale), plan.stamp if plan is not None else None, narrow_key(rows),
                       None if keep is None else keep[0]) if self._device.is_cuda else None  # fmt: skip
                written = head_of(self._heads, self.written, rows.count)
                self._launches.run(
                    "write" if keep is None else "scope_write",
                    key,
                    lambda: [*([] if self._reads_wide(rows) else narrow_steps(rows, data.count)),
                             *self._steps(rows, in_world, pos, quat, scale, written, keep)],
                )  # fmt: skip
                if plan is None:  # providers that update the hierarchy on the host: settle, then hand the slots over
                    call = "set_local_scales" if scale is not None else ("set_world" if in_world else "set_local")
                    first = "positions" if in_world else ("scales" if scale is not None else "translations")
                    values = {first: pos, "orientations": quat} if scale is None else {"scales": scale}
                    self._errors.settle(status_error(call, rows, data.prim_paths, values), now=True)
                    slots = to_numpy(written)
                    slots = slots[slots >= 0]
                    if slots.size:
                        data.fabric.propagate_world(data.sel, wp.array(slots, dtype=wp.int32, device="cpu"))
            finally:
                data.release()

    def _reads_wide(self, rows: Rows) -> bool:
        """Whether the write's first launch reads the caller's indices itself (int64, the flat path: torch ids), with
        no narrowing launch before it."""
        return rows.narrow is not None and not self.nested and rows.narrow[1].dtype == wp.int64

    def _steps(
        self,
        rows: Rows,
        in_world: bool,
        pos: wp.array | None,
        quat: wp.array | None,
        scale: wp.array | None,
        written: wp.array,
        keep: tuple[tuple, list] | None,
    ) -> list[tuple]:
        """The launches of a write. A view without nested prims: [invert the slot tables, only after the Fabric
        arrays were rebuilt,] solve, commit + follow. A view with nested prims: stage (slot tables, request rows),
        [stage indices,] solve, commit + follow."""
        data = self._data
        status, count, n_parents = self._errors.status, data.count, len(data.parent_paths)
        indexed = rows.kind == INDEXED
        indices = rows.indices if indexed or rows.kind == MASK_ROWS else data.no_index
        tags = data.arrays[data.tag]
        parent = "parent:" if n_parents else ""
        parent_tags = data.arrays["parent:" + data.parent_tag] if n_parents else tags
        view_world, view_local = data.arrays[WORLD_MATRIX], data.arrays[LOCAL_MATRIX]
        columns = data.columns  # the flat path's kernels: plain arrays where a selection spans one bucket
        request = self.requests(in_world, pos, quat, scale)
        plan = self.follow
        if plan is not None and plan.width > 0:
            local_all, world_all = plan.columns()
            follow = [plan.start, plan.nodes, plan.node_slot, plan.node_parent, plan.node_top, 1, local_all]
            flat_local, flat_world, flat_slot = plan.flat_columns()
            follow_flat = [flat_slot, plan.follow_up, 1, flat_local]
            width = plan.width + 1  # thread (0, k) commits row k, thread (j + 1, k) its j-th descendant
        else:
            follow, world_all, width = [*(data.no_index,) * 5, 0, view_local], view_world, 1
            flat_world = columns[WORLD_MATRIX]
            follow_flat = [data.no_table, data.no_table, 0, columns[LOCAL_MATRIX]]
        outputs = [view_local, view_world, world_all, written]
        guard = data.guard()  # the first launch touching Fabric compares it; the others follow the status word
        steps: list[tuple] = []
        if not self.nested:
            mask = rows.mask if rows.kind == MASK else data.no_mask
            if not data.slots_fresh:  # the Fabric arrays were rebuilt: invert once, then verify per use
                steps.append(("invert_tables", _stage_write, max(count, n_parents, 1), [
                    tags, parent_tags, count, n_parents, int(STAGE_ALL), data.no_mask, *guard, data.slots,
                    data.parent_slots, data.req_row, status]))  # fmt: skip
                data.slots_fresh = data.view_slots_fresh = True
            steps.append(("solve_flat", _solve_flat, rows.count, [
                columns[data.tag], columns[LOCAL_MATRIX], data.slots,
                columns["parent:" + data.parent_tag] if n_parents else columns[data.tag],
                columns[parent + WORLD_MATRIX], data.parent_slots,
                n_parents, self.node_parent, count, int(rows.kind), indices,
                rows.narrow[1] if self._reads_wide(rows) else self._no_wide, mask, request, *guard,
                int(keep is not None), data.row_parent_slots, data.req_row, self.new_local, self.new_world, status,
                *(self._no_keep if keep is None else keep[1]),
            ]))  # fmt: skip
            steps.append(("commit_flat", _commit_flat, (width, rows.count), [
                self.new_local, self.new_world, data.slots, count, int(rows.kind), indices, mask, data.req_row,
                status, *follow_flat, columns[LOCAL_MATRIX], columns[WORLD_MATRIX], flat_world, written,
            ], PUBLISHES))  # fmt: skip
            return steps
        if keep is not None:
            raise RuntimeError(f"{data.label}: a view with nested prims holds its writer scopes' writes until exit")
        mode = STAGE_INDICES if indexed else (STAGE_MASK if rows.kind == MASK else STAGE_ALL)
        req_row = self.req_all if rows.kind == ALL else data.req_row
        steps.append(("stage", _stage_write, max(count, n_parents), [
            tags, parent_tags, count, n_parents, int(mode), rows.mask if rows.kind == MASK else data.no_mask, *guard,
            data.slots, data.parent_slots, data.req_row, status,
        ]))  # fmt: skip
        if indexed:
            steps.append(("stage_indices", _stage_indices, rows.count, [indices, count, data.req_row, status]))
        steps.append(("solve", _solve_writes, rows.count, [
            view_local, data.slots, data.arrays[parent + WORLD_MATRIX], data.arrays[parent + LOCAL_MATRIX],
            data.parent_slots, self.node_parent, count, indices, int(indexed), req_row, request,
            self.new_local, self.new_world, status,
        ]))  # fmt: skip
        steps.append(("commit", _commit_follow, (width, rows.count), [
            self.new_local, self.new_world, data.slots, count, indices, int(indexed), req_row, status, *follow,
            *outputs,
        ], PUBLISHES))  # fmt: skip
        return steps

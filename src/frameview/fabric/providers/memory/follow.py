# SPDX-License-Identifier: Apache-2.0
"""Descendants follow a write, on the device: the embedded model's hierarchy update for one view.

A :class:`FollowPlan` is built once per view (and again only when prims are added or removed): the strict
descendants of each view prim, as a CSR list per view index, and for every node (view prims and their descendants)
its parent node, or, at the top of the view's subtrees, the slot of the parent whose world matrix the write cannot
move. The view's commit launch, ``(widest subtree, rows)`` threads, commits each written prim and recomputes its
descendants: a thread walks from its node up to that top composing local matrices (``world = local @ ... @
parent_world``, the written prims' new locals read from the solve's scratch), so no thread waits for another and
nothing is read that the launch writes. Work is O(written prims + their descendants); the launch shape depends only
on the call's row count (a mask covers the whole view), so it can be captured in a CUDA graph.

A view without nested prims also gets the same descendants as two dense ``(view prims, widest subtree)`` tables,
the launch's own shape: the Fabric slot of each descendant and the column of its parent in the same row (-1: the
view prim itself). Its commit thread ``(j + 1, k)`` loads its descendant's slot directly, beside the mask, instead
of through ``start``, ``nodes`` and ``node_slot`` one after the other (H200: 4.8 -> 4.5 us per commit launch,
perf/RESULTS.md).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import warp as wp

from ...stage import LOCAL_MATRIX, WORLD_MATRIX

__all__ = ["FollowPlan"]

_ARRAYS = ("start", "nodes", "node_parent", "follow_up", "node_slot", "node_top", "follow_slot", "flat_slot")
"""The plan's device arrays."""


class FollowPlan:
    """The descendants of one view's prims in an embedded model, laid out for the view's commit launch
    (``fabric/write_kernels._commit_follow``).

    Args:
        model: The :class:`~frameview.fabric.providers.memory.MemoryFabricStage`.
        paths: The view's prim paths (view order).
    """

    def __init__(self, model: Any, paths: tuple[str, ...]) -> None:
        self._model = model
        self._paths = paths
        self._structure = -1
        self._layout = -1
        self.width = 0
        self.stamp: tuple[int, int] = (-1, -1)
        """Changes whenever the plan's arrays are replaced (a captured launch that read them is stale)."""
        self._retired: list[wp.array] = []
        """Arrays replaced by :meth:`refresh`, kept for the plan's life: a commit captured in the caller's graph
        loads its tables beside the mask, before the status word stops a stale replay (:mod:`..epoch`), so their
        addresses must stay readable."""

    def columns(self) -> tuple[wp.fabricarray, wp.fabricarray]:
        """The model's local and world matrix columns, which ``node_slot`` and ``node_top`` index."""
        local, world, _offsets = self._model.xform_columns()
        return local, world

    @property
    def stale(self) -> bool:
        """Whether :meth:`refresh` has host work to do (allocations: not inside a CUDA graph capture)."""
        model = self._model
        return self._structure != model.structure_version or self._layout != model.layout_version

    def refresh(self) -> None:
        """Rebuild after prims were added or removed; re-slot after the buckets changed (host work, O(plan))."""
        if not self.stale:
            return
        model = self._model
        self._retired += [a for a in (getattr(self, n, None) for n in _ARRAYS) if a is not None]
        if self._structure != model.structure_version:
            self._build()
            self._structure = model.structure_version
            self._layout = -1
        if self._layout != model.layout_version:
            _local, _world, offsets = model.xform_columns()
            pids = self._pids
            slots = offsets[model.bucket_of(pids)] + model.row_of(pids)
            top = np.where(self._top_pid >= 0, 0, -1)
            has_top = self._top_pid >= 0
            top[has_top] = offsets[model.bucket_of(self._top_pid[has_top])] + model.row_of(self._top_pid[has_top])
            dev = model.device
            self.node_slot = wp.array(slots.astype(np.int32), dtype=wp.int32, device=dev)
            self.node_top = wp.array(top.astype(np.int32), dtype=wp.int32, device=dev)
            table = np.full(self._table_shape, -1, dtype=np.int32)
            table[self._entry_row, self._entry_col] = slots[self._entry_node]
            self.follow_slot = wp.array(table, dtype=wp.int32, device=dev)
            self._flat_columns(model, table)
            self._layout = model.layout_version
            self.stamp = (self._structure, self._layout)

    def flat_columns(self) -> tuple[Any, Any, wp.array]:
        """What ``_commit_flat`` indexes: the local and world columns and the ``follow_slot`` table into them. Plain
        arrays over one bucket when every descendant lies in that bucket (no bucket lookup per access, as
        :func:`frameview.fabric.data.plain_column`), else :meth:`columns` and :attr:`follow_slot`."""
        return self._flat

    def _flat_columns(self, model: Any, table: np.ndarray) -> None:
        entries = self._pids[self._entry_node]
        buckets = np.unique(model.bucket_of(entries))
        if buckets.size != 1:
            local, world = self.columns()
            self.flat_slot = self.follow_slot
            self._flat = (local, world, self.follow_slot)
            return
        bucket = model.buckets[int(buckets[0])]
        flat = np.full(self._table_shape, -1, dtype=np.int32)
        flat[self._entry_row, self._entry_col] = model.row_of(entries)
        self.flat_slot = wp.array(flat, dtype=wp.int32, device=model.device)
        local, world = (wp.array(ptr=bucket.columns[name].ptr, shape=(bucket.size,), dtype=wp.mat44d,
                                 device=model.device) for name in (LOCAL_MATRIX, WORLD_MATRIX))  # fmt: skip
        self._flat = (local, world, self.flat_slot)

    def _build(self) -> None:
        model = self._model
        view_pids = model.prim_ids(self._paths)
        n = view_pids.size
        origin, below = model.descendant_pairs(view_pids)  # (view index, descendant pid) pairs
        # nodes: the view prims (node i = view index i), then every other descendant once
        extra = np.setdiff1d(np.unique(below), view_pids)
        pids = np.concatenate([view_pids, extra])
        node_of = dict(zip(pids.tolist(), range(pids.size), strict=True))
        parents = model.parent_of(pids)
        node_parent = np.array([node_of.get(int(p), -1) for p in parents], dtype=np.int32)
        self._top_pid = np.where(node_parent < 0, parents, -1)
        order = np.argsort(origin, kind="stable")
        nodes = np.array([node_of[int(p)] for p in below[order]], dtype=np.int32)
        counts = np.bincount(origin, minlength=n) if origin.size else np.zeros(n, dtype=np.int64)
        start = np.zeros(n + 1, dtype=np.int32)
        np.cumsum(counts, out=start[1:])
        dev = model.device
        self._pids = pids
        self.start = wp.array(start, dtype=wp.int32, device=dev)
        self.nodes = wp.array(nodes if nodes.size else np.zeros(1, np.int32), dtype=wp.int32, device=dev)
        self.node_parent = wp.array(node_parent, dtype=wp.int32, device=dev)
        self.width = int(counts.max()) if counts.size else 0
        # the dense tables (views without nesting): entry e of the CSR list is row origin, column e - start[row]
        rows = np.repeat(np.arange(n, dtype=np.int64), counts)
        cols = np.arange(nodes.size, dtype=np.int64) - start[rows]
        up_node = node_parent[nodes]
        width = max(self.width, 1)
        # the column of each entry's parent in its row: look (row, parent node) up among the (row, node) keys
        keys = rows * pids.size + nodes
        order_keys = np.argsort(keys, kind="stable")
        wanted = rows * pids.size + np.maximum(up_node, 0)
        found = np.searchsorted(keys[order_keys], wanted)
        found = np.minimum(found, max(keys.size - 1, 0))
        below = up_node != rows
        if keys.size and not np.array_equal(keys[order_keys][found][below], wanted[below]):
            raise RuntimeError("FollowPlan: a descendant's parent is missing from its view prim's list")
        up_col = np.where(below, cols[order_keys][found] if keys.size else -1, -1)
        up = np.full((max(n, 1), width), -1, dtype=np.int32)
        up[rows, cols] = up_col
        self._table_shape = up.shape
        self._entry_row, self._entry_col, self._entry_node = rows, cols, nodes
        self.follow_up = wp.array(up, dtype=wp.int32, device=dev)

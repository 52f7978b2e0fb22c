# SPDX-License-Identifier: Apache-2.0
"""The embedded Fabric model: Fabric's bucketed storage in Warp arrays, on the CPU or a CUDA device.

It keeps the semantics of Fabric that the views depend on, so that their Fabric code runs for real without Kit:

- prims live in buckets keyed by (prim type, attribute set); each bucket holds one column per attribute;
- adding or removing an attribute moves the prim to another bucket, and fills the hole it leaves with the
  bucket's last prim (swap-remove), which changes that other prim's slot;
- a selection requires a set of attributes and spans every bucket that carries them; ``prepare_for_reuse()``
  reports whether any of its buckets changed; columns are exposed through ``__fabric_arrays_interface__``;
- attributes are created, set and removed for many prims in one batched call;
- world matrices are computed from local matrices in Warp, level by level of the hierarchy.

A model is populated from a pxr ``Usd.Stage`` (:func:`attach`, one model per (stage, device)) and follows the
stage's structural and xformOp edits through USD change notices, applied lazily on the next access. It can also
be built directly from arrays (:meth:`MemoryFabricStage.from_arrays`) for benchmarks at millions of prims.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import warp as wp

from ..visibility import NO_OPINION, VISIBLE, PxrVisibilityTree, compute_visibility, plan_visibility
from .follow import FollowPlan
from .stage import LOCAL_MATRIX, WORLD_MATRIX

__all__ = ["MemoryFabricStage", "MemorySelection", "attach"]

logger = logging.getLogger(__name__)

# name -> (warp dtype, Fabric type tuple for the array interface, 32-bit words per element)
_TYPES: dict[str, tuple[Any, tuple, int]] = {
    "matrix4d": (wp.mat44d, (True, "f8", 16, 0, "matrix"), 32),
    "uint": (wp.uint32, (True, "u4", 1, 0, ""), 1),
}
_MATRIX_ATTRS = (LOCAL_MATRIX, WORLD_MATRIX)
_MIN_CAPACITY = 16


@wp.kernel
def _copy_rows(
    # inputs
    src: wp.array2d(dtype=wp.uint32),
    src_rows: wp.array(dtype=wp.int32),
    dst_rows: wp.array(dtype=wp.int32),
    # outputs
    dst_out: wp.array2d(dtype=wp.uint32),
):
    """Copy whole rows of a raw column: ``dst_out[dst_rows[i]] = src[src_rows[i]]``."""
    i, w = wp.tid()
    dst_out[dst_rows[i], w] = src[src_rows[i], w]


@wp.kernel
def _scatter_rows(
    # inputs
    values: wp.array2d(dtype=wp.uint32),
    rows: wp.array(dtype=wp.int32),
    # outputs
    dst_out: wp.array2d(dtype=wp.uint32),
):
    """``dst_out[rows[i]] = values[i]`` on raw columns."""
    i, w = wp.tid()
    dst_out[rows[i], w] = values[i, w]


@wp.kernel
def _gather_rows(
    # inputs
    src: wp.array2d(dtype=wp.uint32),
    rows: wp.array(dtype=wp.int32),
    # outputs
    values_out: wp.array2d(dtype=wp.uint32),
):
    """``values_out[i] = src[rows[i]]`` on raw columns."""
    i, w = wp.tid()
    values_out[i, w] = src[rows[i], w]


@wp.kernel
def _update_world_matrices(
    # inputs
    local: wp.fabricarray(dtype=wp.mat44d),
    slots: wp.array(dtype=wp.int32),
    parent_slots: wp.array(dtype=wp.int32),
    # outputs
    world_out: wp.fabricarray(dtype=wp.mat44d),
):
    """``world = local @ parent_world`` for one level of the hierarchy (identity parent where the slot is -1)."""
    i = wp.tid()
    s = slots[i]
    p = parent_slots[i]
    if p < 0:
        world_out[s] = local[s]
    else:
        world_out[s] = local[s] @ world_out[p]


@wp.kernel
def _compose_level(
    # inputs
    local: wp.array(dtype=wp.mat44d),
    parents: wp.array(dtype=wp.int64),
    rows: wp.array(dtype=wp.int64),
    # outputs
    world_out: wp.array(dtype=wp.mat44d),
):
    """Flat-array variant used while populating: ``world[r] = local[r] @ world[parents[r]]``."""
    i = wp.tid()
    r = rows[i]
    p = parents[r]
    if p < wp.int64(0):
        world_out[r] = local[r]
    else:
        world_out[r] = local[r] @ world_out[p]


@dataclass(eq=False)
class _Bucket:
    """Prims sharing one (type, attribute set); one raw column of 32-bit words per attribute."""

    index: int
    type_name: str
    attrs: dict[str, str]  # attribute name -> type name in _TYPES
    device: Any
    size: int = 0
    version: int = 0
    pids: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    columns: dict[str, wp.array] = field(default_factory=dict)

    @property
    def capacity(self) -> int:
        return self.pids.shape[0]

    def reserve(self, rows: int) -> None:
        """Grow every column to hold ``rows`` prims: at least double (amortised appends), exactly ``rows`` for a bulk
        insert beyond that (no power-of-two slack); moves the storage (bumps ``version``)."""
        if rows <= self.capacity:
            return
        cap = max(_MIN_CAPACITY, rows, 2 * self.capacity)
        pids = np.full(cap, -1, dtype=np.int64)
        pids[: self.size] = self.pids[: self.size]
        self.pids = pids
        for name, type_name in self.attrs.items():
            words = _TYPES[type_name][2]
            col = wp.zeros((cap, words), dtype=wp.uint32, device=self.device)
            old = self.columns.get(name)
            if old is not None and self.size:
                wp.copy(col, old, count=self.size * words)
            self.columns[name] = col
        self.version += 1


class MemorySelection:
    """A selection of the embedded model: every bucket whose attributes include ``require``.

    Implements :class:`frameview.fabric.stage.FabricSelection`.
    """

    def __init__(self, model: MemoryFabricStage, require: Sequence[str], write: bool) -> None:
        self._model = model
        self.require = tuple(require)
        self._access = 2 if write else 1
        self._signature: tuple | None = None
        self._layout = -1
        self._count = 0
        self._buckets: list[_Bucket] = []
        self._iface: dict[str, Any] = {}

    @property
    def count(self) -> int:
        return self._count

    def prepare_for_reuse(self) -> bool:
        model = self._model
        model.sync()
        if self._layout == model.layout_version:
            return False
        self._layout = model.layout_version
        buckets = [b for b in model.buckets if b.size and all(a in b.attrs for a in self.require)]
        signature = tuple((b.index, b.version, b.size) for b in buckets)
        if signature == self._signature:
            return False
        self._signature = signature
        self._buckets = buckets
        self._count = sum(b.size for b in buckets)
        attribs = {}
        for name in self.require:
            type_info = _TYPES[buckets[0].attrs[name] if buckets else _attr_type(name)][1]
            attribs[name] = {
                "type": type_info,
                "access": self._access,
                "pointers": [b.columns[name].ptr for b in buckets],
                "counts": [b.size for b in buckets],
            }
        self._iface = {"version": 1, "device": str(model.device), "attribs": attribs}
        return True

    @property
    def __fabric_arrays_interface__(self) -> dict[str, Any]:
        return self._iface

    def release(self) -> None:
        """Nothing is pinned in the embedded model."""

    # -- model-internal helpers

    def pids(self) -> np.ndarray:
        """Prim ids in slot order (as of the last ``prepare_for_reuse``)."""
        if not self._buckets:
            return np.empty(0, dtype=np.int64)
        return np.concatenate([b.pids[: b.size] for b in self._buckets])

    def bucket_offsets(self) -> np.ndarray:
        """First slot of each model bucket in this selection, -1 for buckets it does not span."""
        offsets = np.full(len(self._model.buckets), -1, dtype=np.int64)
        start = 0
        for b in self._buckets:
            offsets[b.index] = start
            start += b.size
        return offsets


def _attr_type(name: str) -> str:
    return "matrix4d" if name in _MATRIX_ATTRS else "uint"


class MemoryFabricStage:
    """The embedded Fabric model. Implements :class:`frameview.fabric.stage.FabricStage`.

    Build it with :func:`attach` (from a pxr stage) or :meth:`from_arrays`. Not thread-safe by itself: callers hold
    :attr:`lock` around every call (FabricFrameView does).
    """

    provider = "memory"

    def __init__(self, device: str = "cpu") -> None:
        self.device = str(wp.get_device(device))
        self._device = wp.get_device(device)
        self.lock = threading.RLock()
        self.buckets: list[_Bucket] = []
        self._bucket_by_key: dict[tuple[str, frozenset[str]], _Bucket] = {}
        self._free_buckets: list[int] = []
        self.layout_version = 0
        self._paths: list[str] = []
        self._pid_of: dict[str, int] = {}
        self._parent = np.empty(0, dtype=np.int64)
        self._depth = np.empty(0, dtype=np.int64)
        self._bucket_of = np.empty(0, dtype=np.int64)
        self._row_of = np.empty(0, dtype=np.int64)
        self._alive = np.empty(0, dtype=bool)
        self._children: tuple[np.ndarray, np.ndarray] | None = None
        self._structure_version = 0  # bumped when prims are added or removed (prim ids change meaning)
        self._pid_cache: dict[int, tuple[Sequence[str], int, np.ndarray]] = {}
        self._xforms: MemorySelection | None = None
        self._xform_arrays: tuple[wp.fabricarray, wp.fabricarray, np.ndarray] | None = None
        self._stage_ref: Any = None
        self._listener: Any = None
        self._pending_resync: set[str] = set()
        self._pending_info: set[str] = set()
        self._lost: dict[str, str] = {}  # path -> why it left the model (error messages only)
        self._vis_written: dict[str, int] = {}  # visibility opinions written in Fabric (path -> VISIBLE/INVISIBLE)
        self._vis_listener: Any = None  # follows USD visibility edits once Fabric holds its own opinions
        self._vis_stale: set[str] = set()  # prims whose USD visibility changed since the last visibility call
        self._vis_stale_trees: set[str] = set()  # roots of structural USD changes since then

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_arrays(
        cls,
        paths: Sequence[str],
        parents: np.ndarray,
        local_matrices: np.ndarray,
        *,
        type_names: Sequence[str] | str = "Xform",
        device: str = "cpu",
    ) -> MemoryFabricStage:
        """Build a model directly, without USD (benchmarks at millions of prims).

        Args:
            paths: Prim paths; a prim's parent must come before it.
            parents: (N,) int, index of each prim's parent in ``paths`` (its path parent), -1 for none.
            local_matrices: (N, 4, 4) float64 row-vector local matrices.
            type_names: One prim type for all, or one per prim.
            device: Warp device of the columns.
        """
        model = cls(device)
        model._add_prims(list(paths), np.asarray(parents, dtype=np.int64), np.asarray(local_matrices), type_names)
        return model

    def _add_prims(
        self,
        paths: list[str],
        parents: np.ndarray,
        local: np.ndarray,
        type_names: Sequence[str] | str,
        external_parents: np.ndarray | None = None,
    ) -> np.ndarray:
        """Add prims (parents first). ``parents`` index into ``paths``; ``external_parents`` give existing model
        pids for prims whose parent is already in the model (-1 otherwise). Returns the new pids."""
        n = len(paths)
        if n == 0:
            return np.empty(0, dtype=np.int64)
        if local.shape != (n, 4, 4):
            raise ValueError(f"local_matrices: expected shape ({n}, 4, 4), got {local.shape}")
        if parents.shape != (n,):
            raise ValueError(f"parents: expected shape ({n},), got {parents.shape}")
        if np.any(parents >= np.arange(n)):
            bad = int(np.flatnonzero(parents >= np.arange(n))[0])
            raise ValueError(f"parents: prim {paths[bad]!r} names a parent that does not come before it")
        base = len(self._paths)
        pids = np.arange(base, base + n, dtype=np.int64)
        ext = np.full(n, -1, dtype=np.int64) if external_parents is None else external_parents
        model_parent = np.where(parents >= 0, parents + base, ext)
        offsets = np.zeros(n, dtype=np.int64)
        has_ext = (parents < 0) & (ext >= 0)
        offsets[has_ext] = self._depth[ext[has_ext]] + 1
        depth = _depths(parents, offsets)
        for path in paths:
            if path in self._pid_of and self._alive[self._pid_of[path]]:
                raise ValueError(f"prim {path!r} is already in the Fabric model")
        self._paths.extend(paths)
        self._pid_of.update(zip(paths, range(base, base + n), strict=True))
        self._parent = np.concatenate([self._parent, model_parent])
        self._depth = np.concatenate([self._depth, depth])
        self._bucket_of = np.concatenate([self._bucket_of, np.full(n, -1, dtype=np.int64)])
        self._row_of = np.concatenate([self._row_of, np.full(n, -1, dtype=np.int64)])
        self._alive = np.concatenate([self._alive, np.ones(n, dtype=bool)])
        self._children = None
        self._structure_version += 1

        world = self._compose_world(local, parents, ext)
        local_words = np.ascontiguousarray(local, dtype=np.float64).reshape(n, 16).view(np.uint32)
        world_words = world.reshape(n, 16).view(np.uint32)
        types = [type_names] * n if isinstance(type_names, str) else list(type_names)
        by_type: dict[str, list[int]] = {}
        for i, t in enumerate(types):
            by_type.setdefault(t, []).append(i)
        for t, members in by_type.items():
            rows = np.asarray(members, dtype=np.int64)
            bucket = self._bucket((t, frozenset(_MATRIX_ATTRS)))
            start = self._append(bucket, pids[rows])
            dst = wp.array(np.arange(start, start + rows.size, dtype=np.int32), device=self.device)
            self._scatter(bucket, LOCAL_MATRIX, dst, local_words[rows])
            self._scatter(bucket, WORLD_MATRIX, dst, world_words[rows])
        self._bump()
        return pids

    def _compose_world(self, local: np.ndarray, parents: np.ndarray, ext: np.ndarray) -> np.ndarray:
        """World matrices of new prims, level by level in Warp; parents inside the batch or in the model."""
        n = local.shape[0]
        ext_world = np.tile(np.eye(4), (n, 1, 1))
        has_ext = ext >= 0
        if np.any(has_ext):
            ext_world[has_ext] = self._read_matrices(ext[has_ext], WORLD_MATRIX)
        # a prim with an external parent composes with that parent's world: fold it into its "local"
        seed = np.array(local, dtype=np.float64, copy=True)
        seed[has_ext] = np.einsum("nij,njk->nik", seed[has_ext], ext_world[has_ext])
        local_wp = wp.array(seed, dtype=wp.mat44d, device=self.device)
        world_wp = wp.zeros(n, dtype=wp.mat44d, device=self.device)
        parents_wp = wp.array(parents, dtype=wp.int64, device=self.device)
        depth = _depths(parents)
        order = np.argsort(depth, kind="stable")
        bounds = np.searchsorted(depth[order], np.arange(depth.max() + 2))
        for level in range(depth.max() + 1):
            rows = order[bounds[level] : bounds[level + 1]]
            if rows.size:
                wp.launch(
                    _compose_level,
                    dim=rows.size,
                    inputs=[local_wp, parents_wp, wp.array(rows, dtype=wp.int64, device=self.device)],
                    outputs=[world_wp],
                    device=self.device,
                )
        return world_wp.numpy()

    # ------------------------------------------------------------------ buckets

    def _bucket(self, key: tuple[str, frozenset[str]]) -> _Bucket:
        bucket = self._bucket_by_key.get(key)
        if bucket is None:
            attrs = {name: _attr_type(name) for name in sorted(key[1])}
            if self._free_buckets:  # reuse a retired index; a higher version keeps selection signatures unique
                index = self._free_buckets.pop()
                bucket = _Bucket(index, key[0], attrs, self._device, version=self.buckets[index].version + 1)
                self.buckets[index] = bucket
            else:
                bucket = _Bucket(len(self.buckets), key[0], attrs, self._device)
                self.buckets.append(bucket)
            self._bucket_by_key[key] = bucket
        return bucket

    def _retire(self, bucket: _Bucket) -> None:
        """Free an empty bucket's storage and index: every view's uid tag makes new buckets, which must not pile up."""
        del self._bucket_by_key[(bucket.type_name, frozenset(bucket.attrs))]
        bucket.columns = {}
        bucket.pids = np.empty(0, dtype=np.int64)
        bucket.version += 1
        self._free_buckets.append(bucket.index)

    def _append(self, bucket: _Bucket, pids: np.ndarray) -> int:
        """Reserve rows at the end of ``bucket`` for ``pids``; returns the first new row."""
        start = bucket.size
        bucket.reserve(start + pids.size)
        bucket.pids[start : start + pids.size] = pids
        bucket.size += pids.size
        bucket.version += 1
        self._bucket_of[pids] = bucket.index
        self._row_of[pids] = np.arange(start, start + pids.size)
        return start

    def _remove_rows(self, bucket: _Bucket, rows: np.ndarray) -> None:
        """Swap-remove ``rows``: the bucket's last prims fill the holes, changing their slots (as Fabric does)."""
        if rows.size == 0:
            return
        n = bucket.size
        m = n - rows.size
        tail_taken = np.zeros(rows.size, dtype=bool)
        tail_taken[rows[rows >= m] - m] = True
        fillers = m + np.flatnonzero(~tail_taken)
        holes = np.sort(rows[rows < m])
        if holes.size:
            src = wp.array(fillers.astype(np.int32), device=self.device)
            dst = wp.array(holes.astype(np.int32), device=self.device)
            for col in bucket.columns.values():
                wp.launch(_copy_rows, dim=(holes.size, col.shape[1]), inputs=[col, src, dst], outputs=[col],
                          device=self.device)  # fmt: skip
            moved = bucket.pids[fillers]
            bucket.pids[holes] = moved
            self._row_of[moved] = holes
        bucket.pids[m:n] = -1
        bucket.size = m
        bucket.version += 1
        if m == 0:
            self._retire(bucket)

    def _move(self, pids: np.ndarray, key_of: Any) -> None:
        """Move prims to the buckets ``key_of(bucket) -> key``, carrying the columns both buckets share."""
        src_buckets = self._bucket_of[pids]
        for b in np.unique(src_buckets):
            src = self.buckets[b]
            group = pids[src_buckets == b]
            dst = self._bucket(key_of(src))
            if dst is src:
                continue
            rows = self._row_of[group].copy()
            start = self._append(dst, group)
            src_rows = wp.array(rows.astype(np.int32), device=self.device)
            dst_rows = wp.array(np.arange(start, start + group.size, dtype=np.int32), device=self.device)
            for name, col in dst.columns.items():
                if name in src.columns:
                    wp.launch(_copy_rows, dim=(group.size, col.shape[1]), inputs=[src.columns[name], src_rows,
                              dst_rows], outputs=[col], device=self.device)  # fmt: skip
            self._remove_rows(src, rows)
        self._bump()

    def _scatter(self, bucket: _Bucket, name: str, rows: wp.array, words: np.ndarray) -> None:
        values = wp.array(np.ascontiguousarray(words), dtype=wp.uint32, device=self.device)
        col = bucket.columns[name]
        wp.launch(_scatter_rows, dim=(rows.shape[0], col.shape[1]), inputs=[values, rows], outputs=[col],
                  device=self.device)  # fmt: skip

    def _read_matrices(self, pids: np.ndarray, name: str) -> np.ndarray:
        """(n, 4, 4) float64 of attribute ``name`` for model prims (host copy; slow path for sync and tests)."""
        out = np.empty((pids.size, 16), dtype=np.float64)
        buckets = self._bucket_of[pids]
        for b in np.unique(buckets):
            sel = np.flatnonzero(buckets == b)
            col = self.buckets[b].columns[name]
            rows = wp.array(self._row_of[pids[sel]].astype(np.int32), device=self.device)
            vals = wp.empty((sel.size, col.shape[1]), dtype=wp.uint32, device=self.device)
            wp.launch(_gather_rows, dim=vals.shape, inputs=[col, rows], outputs=[vals], device=self.device)
            out[sel] = vals.numpy().view(np.float64)
        return out.reshape(-1, 4, 4)

    def _write_matrices(self, pids: np.ndarray, name: str, mats: np.ndarray) -> None:
        words = np.ascontiguousarray(mats, dtype=np.float64).reshape(-1, 16).view(np.uint32)
        buckets = self._bucket_of[pids]
        for b in np.unique(buckets):
            sel = np.flatnonzero(buckets == b)
            rows = wp.array(self._row_of[pids[sel]].astype(np.int32), device=self.device)
            self._scatter(self.buckets[b], name, rows, words[sel])

    def _bump(self) -> None:
        self.layout_version += 1

    # ------------------------------------------------------------------ hierarchy

    def _child_table(self) -> tuple[np.ndarray, np.ndarray]:
        """CSR children of every pid (alive or not), in pid (authoring) order."""
        if self._children is None:
            parent = np.where(self._alive, self._parent, -1)
            order = np.argsort(parent, kind="stable")
            counts = np.bincount(parent[parent >= 0], minlength=len(self._paths))
            ptr = np.zeros(len(self._paths) + 1, dtype=np.int64)
            np.cumsum(counts, out=ptr[1:])
            first = np.searchsorted(parent[order], 0)
            self._children = (ptr, order[first:])
        return self._children

    def _descendants(self, pids: np.ndarray, *, include_self: bool) -> np.ndarray:
        ptr, kids = self._child_table()
        found = [pids] if include_self else []
        frontier = pids
        while frontier.size:
            starts, ends = ptr[frontier], ptr[frontier + 1]
            lengths = ends - starts
            if not lengths.sum():
                break
            idx = np.repeat(starts - np.cumsum(lengths) + lengths, lengths) + np.arange(lengths.sum())
            frontier = kids[idx]
            found.append(frontier)
        if not found:
            return np.empty(0, dtype=np.int64)
        return np.unique(np.concatenate(found))

    def _update_world(self, pids: np.ndarray) -> None:
        """Recompute world matrices of ``pids`` (any set, closed under descendants) from their locals, by depth.

        Costs O(pids): only their slots and their parents' are computed."""
        pids = pids[self._alive[pids]]
        if pids.size == 0:
            return
        local, world, offsets = self.xform_columns()
        depth = self._depth[pids]
        order = np.argsort(depth, kind="stable")
        pids, depth = pids[order], depth[order]
        for d in np.unique(depth):
            level = pids[depth == d]
            parents = self._parent[level]
            safe = np.maximum(parents, 0)
            slots = offsets[self._bucket_of[level]] + self._row_of[level]
            parent_slots = np.where(parents >= 0, offsets[self._bucket_of[safe]] + self._row_of[safe], -1)
            wp.launch(
                _update_world_matrices,
                dim=level.size,
                inputs=[
                    local,
                    wp.array(slots.astype(np.int32), device=self.device),
                    wp.array(parent_slots.astype(np.int32), device=self.device),
                ],
                outputs=[world],
                device=self.device,
            )

    def xform_columns(self) -> tuple[wp.fabricarray, wp.fabricarray, np.ndarray]:
        """Local and world columns of every xformable, and each bucket's first slot; rebuilt when buckets change."""
        if self._xforms is None:
            self._xforms = MemorySelection(self, _MATRIX_ATTRS, write=True)
        if self._xforms.prepare_for_reuse() or self._xform_arrays is None:
            xf = self._xforms
            self._xform_arrays = (
                wp.fabricarray(xf, LOCAL_MATRIX),
                wp.fabricarray(xf, WORLD_MATRIX),
                xf.bucket_offsets(),
            )
        return self._xform_arrays

    # ------------------------------------------------------------------ FabricStage protocol

    def is_alive(self) -> bool:
        return self._stage_ref is None or self._stage_ref() is not None

    def _pids(self, paths: Sequence[str]) -> np.ndarray:
        """Prim ids of ``paths`` (-1 where unknown). A view passes the same tuple on every call (construction checks,
        tagging, close): its ids are remembered until prims are added or removed, so each path is looked up in the
        stage-sized dict once per view, not once per call."""
        key = id(paths)
        hit = self._pid_cache.get(key)
        if hit is not None and hit[0] is paths and hit[1] == self._structure_version:
            return hit[2]
        pid_of = self._pid_of
        pids = np.fromiter((pid_of.get(str(p), -1) for p in paths), dtype=np.int64, count=len(paths))
        if isinstance(paths, tuple):  # immutable: safe to remember (the entry keeps it alive, so its id stays unique)
            if len(self._pid_cache) >= 64:
                self._pid_cache.pop(next(iter(self._pid_cache)))
            self._pid_cache[key] = (paths, self._structure_version, pids)
        return pids

    def _lookup(self, paths: Sequence[str]) -> np.ndarray:
        pids = self._pids(paths)
        missing = (pids < 0) | ~self._alive[np.maximum(pids, 0)] if len(self._paths) else pids < 0
        if np.any(missing):
            bad = [str(paths[i]) for i in np.flatnonzero(missing)[:3]]
            raise KeyError(f"prims not in the Fabric model (removed, inactive or not xformable): {bad}")
        return pids

    def lost_reason(self, path: str) -> str | None:
        """Why a prim that was in the model left it (``"was removed from the stage"``, ``"became an instance proxy
        ..."``), or None when the model does not know. Used in error messages."""
        return self._lost.get(str(path))

    def _remember_lost(self, path: str, reason: str) -> None:
        if len(self._lost) >= 4096:
            self._lost.pop(next(iter(self._lost)))
        self._lost[path] = reason

    def missing_prims(self, paths: Sequence[str]) -> list[str]:
        self.sync()
        pids = self._pids(paths)
        missing = (pids < 0) | ~self._alive[np.maximum(pids, 0)] if len(self._paths) else pids < 0
        return [str(paths[i]) for i in np.flatnonzero(missing)]

    def xform_parents(self, paths: Sequence[str]) -> list[str | None]:
        self.sync()
        parents = self._parent[self._lookup(paths)]
        return [self._paths[p] if p >= 0 else None for p in parents]

    def set_uint_attribute(self, paths: Sequence[str], name: str, values: np.ndarray) -> None:
        self.sync()
        pids = self._lookup(paths)
        values = np.ascontiguousarray(values, dtype=np.uint32)
        if values.shape != (pids.size,):
            raise ValueError(f"values: expected shape ({pids.size},), got {values.shape}")
        self._move(pids, lambda b: (b.type_name, frozenset((*b.attrs, name))))
        buckets = self._bucket_of[pids]
        for b in np.unique(buckets):
            sel = np.flatnonzero(buckets == b)
            rows = wp.array(self._row_of[pids[sel]].astype(np.int32), device=self.device)
            self._scatter(self.buckets[b], name, rows, values[sel].reshape(-1, 1))

    def remove_attribute(self, paths: Sequence[str], name: str) -> None:
        self.sync()
        pids = self._pids(paths)
        pids = pids[pids >= 0]
        pids = pids[self._alive[pids]]
        bucket_has = np.array([name in b.attrs for b in self.buckets], dtype=bool)
        has = bucket_has[self._bucket_of[pids]]
        if np.any(has):
            self._move(pids[has], lambda b: (b.type_name, frozenset(a for a in b.attrs if a != name)))

    def attribute_names(self, path: str) -> list[str]:
        self.sync()
        pid = self._lookup([path])[0]
        return sorted(self.buckets[self._bucket_of[pid]].attrs)

    def select(self, require: Sequence[str], *, write: bool = False) -> MemorySelection:
        return MemorySelection(self, require, write)

    def propagate_world(self, selection: Any, slots: wp.array) -> None:
        if not isinstance(selection, MemorySelection):
            raise TypeError(f"selection: expected a MemorySelection, got {type(selection).__name__}")
        written = selection.pids()[slots.numpy()]
        below = self._descendants(written, include_self=False)
        if below.size:
            self._update_world(np.setdiff1d(below, written, assume_unique=False))

    # -- visibility (host path, see frameview.visibility)

    def visibility(self, paths: Sequence[str]) -> np.ndarray:
        """Computed visibility from the Fabric ``visibility`` opinions of the prims and their ancestors.

        The model holds the opinions written through it; every other prim's opinion is the USD stage's, read when
        asked (so the model needs no copy of every prim's opinion, and USD edits show at once)."""
        self._sync_visibility()
        return compute_visibility(self._visibility_tree(), [str(p) for p in paths])

    def set_visibility(self, paths: Sequence[str], visible: np.ndarray) -> None:
        """Write ``visibility`` opinions in the model (never USD). A later USD edit of a prim's ``visibility`` (or a
        structural change at or above it) replaces what the model wrote for that prim, as an xformOp edit replaces
        a Fabric pose write."""
        self._sync_visibility()
        changes = plan_visibility(self._visibility_tree(), [str(p) for p in paths], np.asarray(visible, dtype=bool))
        self._vis_written.update(changes)
        stage = self._stage_ref() if self._stage_ref is not None else None
        if changes and self._vis_listener is None and stage is not None:
            from pxr import Tf, Usd

            self._vis_listener = Tf.Notice.Register(Usd.Notice.ObjectsChanged, self._on_visibility_edits, stage)

    def _visibility_tree(self) -> Any:
        stage = self._stage_ref() if self._stage_ref is not None else None
        if stage is not None:
            return PxrVisibilityTree(stage, self._vis_written)
        return _ModelVisibilityTree(self)

    def _on_visibility_edits(self, notice: Any, sender: Any) -> None:
        """Queue the USD edits that replace opinions the model wrote: ``visibility`` authored on a prim, and
        structural changes (prims removed or re-created). Poses are not touched (``_on_objects_changed`` owns them)."""
        for p in notice.GetResyncedPaths():
            if p.IsPropertyPath():
                if p.name == "visibility":
                    self._vis_stale.add(str(p.GetPrimPath()))
            else:
                fields = set(notice.GetChangedFields(p))
                if not fields or not fields <= _NON_STRUCTURAL_FIELDS:
                    self._vis_stale_trees.add(str(p))
        for p in notice.GetChangedInfoOnlyPaths():
            if p.IsPropertyPath() and p.name == "visibility":
                self._vis_stale.add(str(p.GetPrimPath()))

    def _sync_visibility(self) -> None:
        """Drop the written opinions that USD edits replaced since the last visibility call."""
        written = self._vis_written
        stale, trees = self._vis_stale, self._vis_stale_trees  # swap first: notices may arrive meanwhile
        self._vis_stale, self._vis_stale_trees = set(), set()
        for path in stale:
            written.pop(path, None)
        if trees:
            roots = _outermost(trees)
            prefixes = tuple(r.rstrip("/") + "/" for r in roots)
            for path in [p for p in written if p in roots or p.startswith(prefixes)]:
                del written[path]

    # -- device hierarchy update for views (see frameview.fabric.follow)

    def follow_plan(self, paths: tuple[str, ...]) -> FollowPlan:
        """A plan that makes the descendants of ``paths`` follow their writes on the device."""
        return FollowPlan(self, tuple(paths))

    def follow_step(
        self,
        plan: FollowPlan,
        indices: wp.array,
        use_indices: int,
        req_row: wp.array,
        rows: int,
        status: wp.array,
    ) -> tuple[Any, tuple[int, int], list] | None:
        """The launch ``(kernel, dim, params)`` that, after a view committed its written prims (``req_row[i] >= 0``),
        recomputes their descendants' world matrices; it does nothing when ``status`` holds an error (the write was
        rejected). None when the view's prims have no descendants."""
        plan.refresh()
        if plan.width == 0 or rows == 0:
            return None
        local, world, _offsets = self.xform_columns()
        return plan.step(local, world, indices, use_indices, req_row, rows, status)

    @property
    def structure_version(self) -> int:
        """Bumped whenever prims are added or removed (prim ids change meaning)."""
        return self._structure_version

    def prim_ids(self, paths: Sequence[str]) -> np.ndarray:
        """Model prim ids of ``paths`` (``KeyError`` naming the missing ones)."""
        self.sync()
        return self._lookup(paths)

    def bucket_of(self, pids: np.ndarray) -> np.ndarray:
        return self._bucket_of[pids]

    def row_of(self, pids: np.ndarray) -> np.ndarray:
        return self._row_of[pids]

    def parent_of(self, pids: np.ndarray) -> np.ndarray:
        """Each prim's parent prim id in the transform hierarchy (-1: none, or ``resetXformStack``)."""
        return self._parent[pids]

    def descendant_pairs(self, roots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(origin, pid)`` for every strict descendant ``pid`` of ``roots[origin]`` (a prim below two roots appears
        twice), breadth first, vectorised one level per pass."""
        ptr, kids = self._child_table()
        origin = np.arange(roots.size, dtype=np.int64)
        frontier = np.asarray(roots, dtype=np.int64)
        origins: list[np.ndarray] = []
        found: list[np.ndarray] = []
        while frontier.size:
            starts, lengths = ptr[frontier], ptr[frontier + 1] - ptr[frontier]
            total = int(lengths.sum())
            if not total:
                break
            idx = np.repeat(starts - np.cumsum(lengths) + lengths, lengths) + np.arange(total)
            frontier, origin = kids[idx], np.repeat(origin, lengths)
            origins.append(origin)
            found.append(frontier)
        if not found:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
        return np.concatenate(origins), np.concatenate(found)

    # -- PrimTree (path-pattern resolution without USD)

    def has_prim(self, path: str) -> bool:
        pid = self._pid_of.get(str(path))
        return pid is not None and bool(self._alive[pid])

    def child_names(self, path: str) -> list[str]:
        pid = self._pid_of.get(str(path))
        if path == "/":
            kids = np.flatnonzero((self._parent < 0) & self._alive)
        elif pid is None or not self._alive[pid]:
            return []
        else:
            ptr, table = self._child_table()
            kids = table[ptr[pid] : ptr[pid + 1]]
        return [self._paths[k].rsplit("/", 1)[1] for k in kids]

    @property
    def prim_count(self) -> int:
        """Prims currently in the model."""
        return int(self._alive.sum())

    def nbytes(self) -> int:
        """Bytes held by the columns (capacity included)."""
        return sum(col.capacity for b in self.buckets for col in b.columns.values())

    # ------------------------------------------------------------------ USD population and change tracking

    def _populate(self, stage: Any) -> None:
        from pxr import Tf, Usd

        self._stage_ref = weakref.ref(stage)
        added = self._add_new_prims(stage.GetPseudoRoot())
        self._listener = Tf.Notice.Register(Usd.Notice.ObjectsChanged, self._on_objects_changed, stage)
        logger.debug("embedded Fabric model: %d prims from %s on %s", added, stage, self.device)

    def _on_objects_changed(self, notice: Any, sender: Any) -> None:
        """Queue the edits that change what Fabric holds: xformOp / xformOpOrder properties, and prim-level changes
        that are structural. Everything else (other attributes created, set or removed, kind, applied API schemas,
        documentation...) leaves Fabric as written, as Kit's Fabric does."""
        for p in notice.GetResyncedPaths():
            if p.IsPropertyPath():
                if _is_xform_property(p.name):
                    self._pending_info.add(str(p.GetPrimPath()))
            else:
                fields = set(notice.GetChangedFields(p))
                if not fields or not fields <= _NON_STRUCTURAL_FIELDS:
                    self._pending_resync.add(str(p))
            # a prim resync whose changed fields are all non-structural (kind, apiSchemas...) is ignored
        for p in notice.GetChangedInfoOnlyPaths():
            if p.IsPropertyPath() and _is_xform_property(p.name):
                self._pending_info.add(str(p.GetPrimPath()))

    def sync(self) -> None:
        """Apply USD edits noticed since the last access (structure first, then xformOp values)."""
        if not (self._pending_resync or self._pending_info):
            return
        stage = self._stage_ref() if self._stage_ref is not None else None
        resync, info = self._pending_resync, self._pending_info
        self._pending_resync, self._pending_info = set(), set()
        if stage is None:
            return
        from pxr import UsdGeom

        dirty: list[int] = []
        for root in _outermost(resync):
            dirty.extend(self._resync(stage, root))
        for path in info - resync:
            pid = self._pid_of.get(path)
            if pid is None or not self._alive[pid]:
                continue
            prim = stage.GetPrimAtPath(path)
            if _lost_reason(prim) is None:
                mat = np.array(UsdGeom.Xformable(prim).GetLocalTransformation(), dtype=np.float64)
                self._write_matrices(np.array([pid]), LOCAL_MATRIX, mat[None])
                dirty.append(pid)
        if dirty:
            self._readd_reparented(stage, dirty)
            self._update_world(self._descendants(np.unique(np.asarray(dirty, dtype=np.int64)), include_self=True))

    def _readd_reparented(self, stage: Any, pids: list[int]) -> None:
        """Re-add the prims whose composition parent changed (``resetXformStack`` toggled, an ancestor became
        xformable): they get new prim ids, so their tags go with the old ones and views over them raise instead of
        composing with the old parent."""
        from pxr import UsdGeom

        moved: list[int] = []
        for pid in np.unique(np.asarray(pids, dtype=np.int64)):
            if not self._alive[pid]:
                continue
            path = self._paths[pid]
            parent = -1
            if not UsdGeom.Xformable(stage.GetPrimAtPath(path)).GetResetXformStack():
                ancestor = path.rsplit("/", 1)[0]
                while ancestor:
                    known = self._pid_of.get(ancestor)
                    if known is not None and self._alive[known]:
                        parent = known
                        break
                    ancestor = ancestor.rsplit("/", 1)[0]
            if parent != self._parent[pid]:
                moved.append(int(pid))
        if moved:
            for pid in moved:
                self._remember_lost(self._paths[pid], "was re-parented (xformable ancestor or resetXformStack changed)")
            self._kill(np.asarray(moved, dtype=np.int64))
            for pid in moved:
                self._add_new_prims(stage.GetPrimAtPath(self._paths[pid]))

    def _resync(self, stage: Any, root: str) -> list[int]:
        """Reconcile the subtree at ``root`` with USD; returns pids whose local changed (for the world update)."""
        from pxr import UsdGeom

        # model prims at or under root
        anchor = root
        while anchor and (anchor not in self._pid_of or not self._alive[self._pid_of[anchor]]):
            anchor = anchor.rsplit("/", 1)[0]
        existing: np.ndarray = np.empty(0, dtype=np.int64)
        if anchor:
            sub = self._descendants(np.array([self._pid_of[anchor]]), include_self=True)
            prefix = root + "/"
            existing = np.array([p for p in sub if self._paths[p] == root or self._paths[p].startswith(prefix)],
                                dtype=np.int64)  # fmt: skip
        elif root == "/":
            existing = np.flatnonzero(self._alive)
        dirty: list[int] = []
        gone: list[int] = []
        for pid in existing:
            prim = stage.GetPrimAtPath(self._paths[pid])
            reason = _lost_reason(prim)
            if reason is not None:
                gone.append(int(pid))
                self._remember_lost(self._paths[pid], reason)
            else:
                mat = np.array(UsdGeom.Xformable(prim).GetLocalTransformation(), dtype=np.float64)
                self._write_matrices(np.array([pid]), LOCAL_MATRIX, mat[None])
                dirty.append(int(pid))
        if gone:
            self._kill(np.asarray(gone, dtype=np.int64))
        # prims new under root (or root itself)
        prim = stage.GetPrimAtPath(root)
        if prim.IsValid() and prim.IsActive():
            self._add_new_prims(prim)
        return dirty

    def _add_new_prims(self, prim: Any) -> int:
        """Add the xformables at or under ``prim`` that the model does not hold, in traversal order.

        A path that held a removed prim gets a new prim id: the old prim's attributes (tags) went with it.
        """
        from pxr import Usd, UsdGeom

        paths: list[str] = []
        parents: list[int] = []
        locals_: list[Any] = []
        types: list[str] = []
        batch: dict[str, int] = {}
        for p in Usd.PrimRange(prim):
            if not p.IsA(UsdGeom.Xformable):
                continue
            path = str(p.GetPath())
            pid = self._pid_of.get(path)
            if pid is not None and self._alive[pid]:
                continue
            xf = UsdGeom.Xformable(p)
            parent = -1
            if not xf.GetResetXformStack():
                ancestor = path.rsplit("/", 1)[0]
                while ancestor:
                    if ancestor in batch:
                        parent = batch[ancestor]
                        break
                    known = self._pid_of.get(ancestor)
                    if known is not None and self._alive[known]:
                        parent = -2 - known
                        break
                    ancestor = ancestor.rsplit("/", 1)[0]
            batch[path] = len(paths)
            paths.append(path)
            parents.append(parent)
            locals_.append(xf.GetLocalTransformation())
            types.append(str(p.GetTypeName()))
        if not paths:
            return 0
        for path in paths:
            self._pid_of.pop(path, None)  # a dead pid at this path
        encoded = np.asarray(parents, dtype=np.int64)
        ext = np.where(encoded <= -2, -2 - encoded, -1)
        self._add_prims(paths, np.maximum(encoded, -1), _stack(locals_), types, ext)
        return len(paths)

    def _kill(self, pids: np.ndarray) -> None:
        """Remove prims (and their descendants) from their buckets."""
        pids = self._descendants(pids, include_self=True)
        pids = pids[self._alive[pids]]
        buckets = self._bucket_of[pids]
        for b in np.unique(buckets):
            group = pids[buckets == b]
            self._remove_rows(self.buckets[b], self._row_of[group])
        self._alive[pids] = False
        self._bucket_of[pids] = -1
        self._row_of[pids] = -1
        self._children = None
        self._structure_version += 1
        self._bump()

    def detach(self) -> None:
        """Stop following USD notices."""
        if self._listener is not None:
            self._listener.Revoke()
            self._listener = None
        if self._vis_listener is not None:
            self._vis_listener.Revoke()
            self._vis_listener = None


class _ModelVisibilityTree:
    """Visibility over a model built without USD (:meth:`MemoryFabricStage.from_arrays`): its prims and its own
    opinions (no opinion: visible)."""

    def __init__(self, model: MemoryFabricStage) -> None:
        self._model = model

    def opinions(self, paths: Sequence[str]) -> np.ndarray:
        written = self._model._vis_written
        out = np.full(len(paths), NO_OPINION, dtype=np.int8)
        for i, path in enumerate(paths):
            own = written.get(path)
            out[i] = own if own is not None else VISIBLE if self._model.has_prim(path) else NO_OPINION
        return out

    def children(self, paths: Sequence[str]) -> list[list[str]]:
        return [[f"{path}/{name}" for name in self._model.child_names(path)] for path in paths]


_NON_STRUCTURAL_FIELDS = frozenset(
    {"kind", "apiSchemas", "documentation", "comment", "customData", "assetInfo", "hidden", "displayName",
     "displayGroup", "propertyOrder", "primOrder", "clipSets", "clips"}
)  # fmt: skip
"""Prim metadata whose change neither moves a prim nor changes its transform: a resync made only of these is not
structural (an empty field list — a prim added, removed or re-created — is)."""


def _lost_reason(prim: Any) -> str | None:
    """Why a pxr prim has no place in Fabric, or None when it has one."""
    from pxr import UsdGeom

    if not prim.IsValid():
        return "was removed from the stage"
    if prim.IsInstanceProxy():
        return "became an instance proxy (an ancestor was made instanceable): instance proxies are not in Fabric"
    if not prim.IsActive():
        return "was deactivated"
    if not prim.IsA(UsdGeom.Xformable):
        return f"became a {prim.GetTypeName() or 'typeless'} prim (not Xformable)"
    return None


def _is_xform_property(name: str) -> bool:
    return name.startswith("xformOp:") or name == "xformOpOrder"


def _depths(parents: np.ndarray, offsets: np.ndarray | None = None) -> np.ndarray:
    """Depth of each prim of a batch (``parents`` index into the batch, -1 for a batch root), vectorised one level
    per pass; ``offsets`` adds each batch root's own depth."""
    steps = np.zeros(parents.shape[0], dtype=np.int64)
    root = np.arange(parents.shape[0])
    cur = parents.copy()
    while True:
        live = np.flatnonzero(cur >= 0)
        if not live.size:
            break
        steps[live] += 1
        root[live] = cur[live]
        cur[live] = parents[cur[live]]
    return steps if offsets is None else steps + offsets[root]


def _stack(mats: list[Any]) -> np.ndarray:
    if not mats:
        return np.empty((0, 4, 4), dtype=np.float64)
    return np.array([np.array(m, dtype=np.float64) for m in mats], dtype=np.float64).reshape(-1, 4, 4)


def _outermost(paths: set[str]) -> list[str]:
    """Drop paths that lie under another path of the set."""
    out: list[str] = []
    for p in sorted(paths):
        if not any(p == q or p.startswith(q.rstrip("/") + "/") for q in out):
            out.append(p)
    return out


_MODELS: dict[tuple[int, str], MemoryFabricStage] = {}
_MODELS_LOCK = threading.RLock()
"""Re-entrant: building a model allocates, a garbage collection can then finalise another stage on this very
thread, and its ``_forget`` takes this lock again (a plain Lock deadlocked there)."""


def attach(stage: Any, device: str = "cpu") -> MemoryFabricStage:
    """The embedded Fabric model of a pxr stage on ``device``, built on first use (like usdrt's ``Stage.Attach``).

    One model per (stage, device); it lives as long as the stage and follows its edits.
    """
    device = str(wp.get_device(device))
    key = (id(stage), device)
    with _MODELS_LOCK:
        model = _MODELS.get(key)
        if model is not None and model.is_alive():
            return model
        model = MemoryFabricStage(device)
        model._populate(stage)
        _MODELS[key] = model
        weakref.finalize(stage, _forget, key, model)
        return model


def _forget(key: tuple[int, str], model: MemoryFabricStage) -> None:
    with _MODELS_LOCK:
        if _MODELS.get(key) is model:
            del _MODELS[key]
    model.detach()

# SPDX-License-Identifier: Apache-2.0
"""Storage of the embedded Fabric model: buckets of raw 32-bit columns, swap-remove, row copies, selections.

Prims live in buckets keyed by (prim type, attribute set); each bucket holds one column per attribute. Adding or
removing an attribute moves a prim to another bucket and fills the hole it leaves with the bucket's last prim
(swap-remove), which changes that other prim's slot. A selection spans every bucket that carries its attributes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import warp as wp

from ...._core.host import to_numpy
from ...epoch import LayoutEpoch
from ...stage import LOCAL_MATRIX, WORLD_MATRIX

__all__ = ["MemorySelection"]

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


class SelectionSource(Protocol):
    """What a selection reads of the model that makes it (a
    :class:`~frameview.fabric.providers.memory.MemoryFabricStage`): this storage layer's buckets, device and layout
    version, the USD sync of each access, and the prims' paths."""

    device: str
    buckets: list[_Bucket]
    layout_version: int

    def sync(self) -> None: ...

    def paths_of(self, pids: np.ndarray) -> list[str]: ...


class MemorySelection:
    """A selection of the embedded model: every bucket whose attributes include ``require``.

    Implements :class:`frameview.fabric.stage.FabricSelection`.
    """

    def __init__(self, model: SelectionSource, require: Sequence[str], write: bool) -> None:
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

    def paths(self) -> list[str]:
        """Prim paths in slot order, as of the last ``prepare_for_reuse`` (diagnostics and baselines: one string per
        prim, slow; like ``OvstageSelection.paths`` and usdrt's ``GetPaths``)."""
        return self._model.paths_of(self.pids())

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


class _Storage:
    """Buckets, the pid -> (bucket, row) tables and the layout version: the storage layer of the model."""

    def __init__(self, device: str) -> None:
        self.device = str(wp.get_device(device))
        self._device = wp.get_device(device)
        self.buckets: list[_Bucket] = []
        self._bucket_by_key: dict[tuple[str, frozenset[str]], _Bucket] = {}
        self._free_buckets: list[int] = []
        self.layout_version = 0
        self.layout_epoch = LayoutEpoch(self._device, exact=True)
        """Advanced with :attr:`layout_version`: captured launches compare its device word (:mod:`..epoch`)."""
        self._bucket_of = np.empty(0, dtype=np.int64)
        self._row_of = np.empty(0, dtype=np.int64)

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
            out[sel] = to_numpy(vals).view(np.float64)
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
        self.layout_epoch.advance()

    def bucket_of(self, pids: np.ndarray) -> np.ndarray:
        return self._bucket_of[pids]

    def row_of(self, pids: np.ndarray) -> np.ndarray:
        return self._row_of[pids]

    def nbytes(self) -> int:
        """Bytes held by the columns (capacity included)."""
        return sum(col.capacity for b in self.buckets for col in b.columns.values())

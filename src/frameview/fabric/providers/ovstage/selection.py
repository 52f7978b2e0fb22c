# SPDX-License-Identifier: Apache-2.0
"""The ovstage provider's selections: a ``HAS`` query kept across accesses, its read groups exposed as Warp's Fabric
array interface (zero-copy on the CPU) or gathered into staging columns (writes, CUDA devices).

ovstage returns one read group per (attribute, bucket); the groups of one bucket are row-aligned (row ``i`` is the
same prim in the tag, world and local groups), so slot ``k`` is the ``k``-th row when the buckets are concatenated in
read order. See :mod:`frameview.fabric.providers.ovstage` for how writes reach Fabric.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import warp as wp
from ovstage import Filter, FilterOp, Predicate

from ...._core.host import CAPTURE_LOCK, to_numpy
from ...stage import COLUMN_TYPES, WORLD_MATRIX, column_type
from .core import LATEST, StageCore, group_array, group_values, index_map

__all__ = ["OvstageSelection"]

_DL_CUDA = 2  # DLPack's kDLCUDA


# (DLPack type code, bits, trailing shape with the lanes last) of a read group -> Fabric type name (a key of
# COLUMN_TYPES); ovstage 0.3 reports a matrix as (4, 4) float64, ovstage 0.2 as one element of 16 float64 lanes
_KIND_TYPES: dict[tuple[int, int, tuple[int, ...]], str] = {
    (2, 64, (4, 4)): "matrix4d",
    (2, 64, (16,)): "matrix4d",
    (1, 32, ()): "uint",
    (0, 32, ()): "int",
    (2, 64, ()): "double",
    (2, 32, ()): "float",
}
_TYPE_KINDS: dict[str, tuple[int, int, tuple[int, ...]]] = {}
for _kind_key, _name in _KIND_TYPES.items():
    _TYPE_KINDS.setdefault(_name, _kind_key)  # a type's first kind: ovstage 0.3's


class SelectionSource(Protocol):
    """What a selection reads of the provider that makes it (an
    :class:`~frameview.fabric.providers.ovstage.OvstageFabricStage`): the stage's shared core, the device, and
    whether CPU reads are zero-copy now."""

    @property
    def core(self) -> StageCore: ...

    @property
    def device(self) -> str: ...

    @property
    def zero_copy(self) -> bool: ...

    def read_placement_on_device(self) -> Any:
        """The ``ovstage.Placement`` of reads placed on this provider's GPU, or ``None`` (reads on the host)."""


class OvstageSelection:
    """The prims of an ovstage stage that carry every attribute of ``require``, in Fabric slot order.

    Implements :class:`frameview.fabric.stage.FabricSelection`. Every :meth:`prepare_for_reuse`,
    :meth:`prepare_for_read` or :meth:`prepare_for_write` reads the columns through this selection's ``HAS`` query;
    :meth:`release` ends the access. The interface is valid between the two.

    The query is kept across accesses: ovstage resolves its membership against the stage's current state at every
    read (buckets that moved, prims deleted), and issuing it costs as much as the read itself. A query kept across
    a change of the stage's storage stays right but reads slower (measured on ovstage 0.3: 3x for a query issued
    before the stage's first matrix write), so it is issued again after the stage's first write through frameview,
    when frameview tagged or untagged prims on the stage (:attr:`StageCore.generation`), at the access after the
    buckets changed, and before a count that differs from the previous access is reported; :meth:`close` releases
    it.
    """

    def __init__(self, provider: SelectionSource, require: Sequence[str], write: bool) -> None:
        if not require:
            raise ValueError("require: expected at least one attribute name, got an empty sequence")
        self._provider = provider
        self._core: StageCore = provider.core
        self.require = tuple(str(r) for r in require)
        self._tokens = [self._core.token(r) for r in self.require]
        self._filter = Filter([Predicate(tok, FilterOp.HAS) for tok in self._tokens])
        self._access = 2 if write else 1
        self._count = 0
        self._iface: dict[str, Any] = {"version": 1, "device": provider.device, "attribs": {}}
        self._signature: tuple | None = None
        self._query: Any = None
        self._generation = -1  # StageCore.generation when the query was issued
        self._fresh = False  # whether the current access issued the query
        self._buckets: tuple | None = None  # (rows, index map?) of each bucket read by the last access
        self._requery = False  # the buckets changed: issue the query again at the next access
        self._read: Any = None
        self._groups: list[Any] = []
        self._staged = False
        self._staging: dict[str, wp.array] = {}
        self._host: dict[str, wp.array] = {}
        self._copied: Any = None  # CUDA event after the last upload from the pinned host buffers

    # ---------------------------------------------------------------- FabricSelection

    @property
    def count(self) -> int:
        return self._count

    @property
    def staged(self) -> bool:
        """True when the interface points at provider-owned staging columns (writable), not at Fabric storage."""
        return self._staged

    @property
    def query(self) -> Any:
        """The ovstage query of the current access (``None`` outside one); writes of staged columns go through it."""
        return self._query

    def prepare_for_reuse(self) -> bool:
        """Start a read access: query, read and expose the columns (zero-copy on the CPU, unless the provider's
        :attr:`~frameview.fabric.providers.ovstage.OvstageFabricStage.zero_copy` is off; zero-copy on the GPU when
        its ``read_placement`` is ``"device"`` and ovstage hands back compact device columns).

        Returns:
            True when the exposed pointers or counts differ from the previous access.
        """
        return self._prepare(stage_columns=not self._provider.zero_copy, placed=True)

    def prepare_for_read(self, names: Sequence[str]) -> bool:
        """Start a read access that reads only the columns ``names`` (a subset of :attr:`require`).

        Zero-copy accesses expose every column as :meth:`prepare_for_reuse` does. Gathered accesses (CUDA devices)
        read and upload only ``names``: the other staging columns keep the values of an earlier access, so the
        caller must not read them before its next access.

        Returns:
            True when the exposed pointers or counts differ from the previous access.
        """
        if self._provider.zero_copy:
            return self._prepare(stage_columns=False)
        unknown = [n for n in names if n not in self.require]
        if unknown:
            raise ValueError(f"names: expected columns of this selection {self.require}, got {unknown}")
        return self._prepare(stage_columns=True, names=tuple(names), placed=True)

    def prepare_for_write(self) -> bool:
        """Start a write access: gather the columns into writable staging buffers.

        Write world and local matrices through the interface, then call
        :meth:`OvstageFabricStage.propagate_world` to hand them to Fabric.

        Returns:
            True when the exposed pointers or counts differ from the previous access.
        """
        return self._prepare(stage_columns=True)

    @property
    def __fabric_arrays_interface__(self) -> dict[str, Any]:
        return self._iface

    def release(self) -> None:
        """End the access: release the read groups and the read (the query is kept). Idempotent."""
        self.release_groups()

    def close(self) -> None:
        """Release the kept query too (the view is closed). Idempotent; a later access issues a new one."""
        self.release_groups()
        query, self._query = self._query, None
        if query is not None and self._core.alive():
            query.release().wait()

    def release_groups(self) -> None:
        """Unpin the read groups (Fabric storage); the query stays, for a staged write-back. Idempotent."""
        groups, self._groups = self._groups, []
        read, self._read = self._read, None
        self._core.pinned.discard(self)
        if not self._core.alive():
            return
        for g in groups:
            if not g.released:
                g.release()
        if read is not None:
            read.release().wait()

    def paths(self) -> list[str]:
        """Prim paths in slot order, during an access (diagnostics and baselines: one string per prim, slow)."""
        if not self._groups:
            if self._count:
                raise RuntimeError("paths(): call prepare_for_reuse() or prepare_for_write() first")
            return []
        pd = self._core.pd
        out: list[str] = []
        for g in self._groups:
            if g.attribute != self._tokens[0]:
                continue
            listed = pd.get_path_strings(g.prim_list)
            out.extend(listed[g.prim_index(i)] for i in range(g.prim_count))
        return out

    # ---------------------------------------------------------------- staged writes

    def staged_column(self, name: str) -> wp.array:
        """The staging column of ``name``, ``count`` rows (on the provider's device)."""
        return self._staging[name][: self._count]

    def staged_matrices(self, name: str) -> np.ndarray:
        """(count, 4, 4) float64 host copy (or view, on the CPU) of a staged matrix column."""
        col = self._staging[name]
        if col.device.is_cuda:
            return to_numpy(col[: self._count]).reshape(self._count, 4, 4)
        return to_numpy(col)[: self._count].reshape(self._count, 4, 4)

    def worlds_match(self, written: np.ndarray) -> bool:
        """Whether Fabric's world matrices of the ``written`` slots equal the ones the writer staged (same query)."""
        expected = self.staged_matrices(WORLD_MATRIX)[written]
        core = self._core
        wm = core.token(WORLD_MATRIX)
        chunks = []
        with core.stage.read_attributes(self._query, [wm], LATEST) as read:
            read.wait()
            for g in read.groups():
                with g:
                    if g.attribute == wm and g.prim_count:
                        chunks.append(group_values(g))
        if not chunks:
            return False
        actual = np.concatenate(chunks).reshape(-1, 4, 4)
        if actual.shape[0] != self._count:
            return False
        scale = max(1.0, float(np.abs(expected).max()))
        return bool(np.abs(actual[written] - expected).max() <= 1e-6 * scale)

    # ---------------------------------------------------------------- internals

    def _prepare(self, stage_columns: bool, names: tuple[str, ...] | None = None, placed: bool = False) -> bool:
        """One access: read ``names`` (every required column when ``None``) and expose them, in place where the read
        groups allow it, else gathered into the staging columns (``stage_columns``: always gathered). ``placed``:
        the read may be placed on the provider's GPU (when it asks for device reads)."""
        self._core.check_alive()
        self.release()
        names = names or self.require
        tokens = [self._core.token(n) for n in names]
        placement = self._provider.read_placement_on_device() if placed else None
        self._read_groups(tokens, placement)
        try:
            by_attr = self._split_groups(names, tokens)
            count = int(sum(g.prim_count for g in by_attr[0]))
            if count != self._count and self._generation >= 0 and not self._fresh:
                self.close()  # a count that differs: confirm it with a new query before anyone reports it
                return self._prepare(stage_columns, names, placed)
            self._count = count
            buckets = tuple((g.prim_count, g.has_data_index_map) for g in by_attr[0])
            self._requery = self._buckets is not None and buckets != self._buckets and not self._fresh
            self._buckets = buckets
            if placement is not None:
                ordinal = wp.get_device(self._provider.device).ordinal
                if not all(_compact(g, _DL_CUDA, ordinal) for gs in by_attr for g in gs):
                    self.release()  # not usable in place on the GPU: read on the host and gather
                    return self._prepare(stage_columns, names, placed=False)
                self._staged = False
            else:
                self._staged = stage_columns or not all(_compact(g) for gs in by_attr for g in gs)
            counts = [g.prim_count for g in by_attr[0]]
            read = dict(zip(names, by_attr, strict=True))
            if self._staged:
                types = [self._gather(name, read[name]) if name in read else self._kept_type(name)
                         for name in self.require]  # fmt: skip
                pointers = [[self._staging[name].ptr] if self._count else [] for name in self.require]
                counts = [self._count] if self._count else []
                all_counts = [counts] * len(self.require)
            else:  # in place; columns this access did not read point at their (unread) staging columns
                types = [_type_of(n, read[n]) if n in read else self._kept_type(n) for n in self.require]
                pointers = [[_data_ptr(g) for g in read[n]] if n in read else self._kept_pointer(n)
                            for n in self.require]  # fmt: skip
                all_counts = [counts if n in read else ([self._count] if self._count else []) for n in self.require]
        except BaseException:
            self.release()
            raise
        return self._expose(types, pointers, all_counts)

    def _read_groups(self, tokens: list[int], placement: Any = None) -> None:
        """Read ``tokens`` at the latest ordinal through the kept query (issued first if needed); pins the groups.
        ``placement``: an ``ovstage.Placement`` on the provider's GPU (no availability event: ovstage drains any
        transfer before it hands a group over), or ``None`` for the host."""
        core = self._core
        self._fresh = self._query is None or self._generation != core.generation or self._requery
        if self._fresh:
            self.close()
            self._query = core.stage.query(self._filter)
            self._generation = core.generation
            self._query.wait()
        if placement is None:
            self._read = core.stage.read_attributes(self._query, tokens, LATEST)
        else:
            self._read = core.stage.read_attributes(self._query, tokens, LATEST, placement=placement)
        self._read.wait()
        core.pinned.add(self)
        try:
            self._groups = list(self._read.groups())
        except BaseException:
            self.release()
            raise

    def _expose(self, types: list[str], pointers: list[list[int]], counts: list[list[int]]) -> bool:
        """Rebuild the interface if the pointers, counts or types changed; returns whether they did."""
        signature = (self._staged, tuple(tuple(p) for p in pointers), tuple(tuple(c) for c in counts), tuple(types))
        if signature == self._signature:
            return False
        self._signature = signature
        attribs = {
            name: {"type": COLUMN_TYPES[t][1], "access": self._access, "pointers": ptrs, "counts": cs}
            for name, t, ptrs, cs in zip(self.require, types, pointers, counts, strict=True)
        }
        self._iface = {"version": 1, "device": self._provider.device, "attribs": attribs}
        return True

    def _split_groups(self, names: Sequence[str], tokens: list[int]) -> list[list[Any]]:
        """Groups per read attribute, in read order; checks that the buckets line up across attributes."""
        by_tok: dict[int, list[Any]] = {tok: [] for tok in tokens}
        for g in self._groups:
            if g.attribute in by_tok:
                by_tok[g.attribute].append(g)
        by_attr = [by_tok[tok] for tok in tokens]
        first = [g.prim_count for g in by_attr[0]]
        for name, gs in zip(names[1:], by_attr[1:], strict=True):
            if [g.prim_count for g in gs] != first:
                raise RuntimeError(
                    f"ovstage returned read groups that do not line up across attributes: {names[0]!r} has "
                    f"bucket sizes {first}, {name!r} has {[g.prim_count for g in gs]}; expected one aligned group "
                    f"per bucket"
                )
        return by_attr

    def _staging_column(self, name: str, dtype: Any) -> wp.array:
        """This selection's staging column for ``name`` on the provider's device, grown to the count if needed."""
        n = self._count
        col = self._staging.get(name)
        if col is None or col.shape[0] < max(n, 1) or col.dtype != dtype:
            col = self._staging[name] = wp.empty(max(n, 1), dtype=dtype, device=self._provider.device)
        return col

    def _kept_type(self, name: str) -> str:
        """The Fabric type of a staging column this access did not gather (it keeps its earlier values)."""
        col = self._staging_column(name, COLUMN_TYPES[column_type(name)][0])
        return next(t for t, (dtype, _) in COLUMN_TYPES.items() if dtype == col.dtype)

    def _kept_pointer(self, name: str) -> list[int]:
        """The pointer list of a staging column this access did not gather."""
        return [self._staging[name].ptr] if self._count else []

    def _host_column(self, name: str, col: wp.array) -> wp.array:
        """Where rows are gathered on the host: ``col`` itself on the CPU, a pinned buffer for a CUDA column."""
        if not col.device.is_cuda:
            return col
        n = self._count
        staging = self._host.get(name)
        if staging is None or staging.shape[0] < n or staging.dtype != col.dtype:
            staging = self._host[name] = wp.empty(n, dtype=col.dtype, device="cpu", pinned=True)
        elif self._copied is not None:
            with CAPTURE_LOCK:  # the previous upload may still read the pinned buffer
                wp.synchronize_event(self._copied)
        return staging

    def _gather(self, name: str, groups: list[Any]) -> str:
        """Copy the rows of ``groups`` into this selection's staging column for ``name``; returns its Fabric type."""
        type_name = _type_of(name, groups)
        col = self._staging_column(name, COLUMN_TYPES[type_name][0])
        n = self._count
        if n == 0:
            return type_name
        if col.device.is_cuda and all(_compact(g) for g in groups):
            start = 0  # each bucket copied from Fabric's host storage straight into the device column (buckets with
            # a data index map go through pinned memory below)
            for g in groups:
                rows = g.prim_count
                if rows:
                    src = wp.array(ptr=_data_ptr(g), dtype=col.dtype, shape=(rows,), device="cpu")
                    wp.copy(col, src, dest_offset=start, count=rows)
                start += rows
            return type_name
        staging = self._host_column(name, col)
        host = to_numpy(staging)
        start = 0
        for g in groups:
            rows = g.prim_count
            src = group_array(g)
            dst = host[start : start + rows]
            dst = dst.reshape(rows, *src.shape[1:]) if src.ndim > 1 else dst.reshape(rows)
            if g.has_data_index_map:
                np.take(src, index_map(g), axis=0, out=dst)  # no temporary
            else:
                np.copyto(dst, src[:rows])
            start += rows
        if staging is not col:
            wp.copy(col, staging, count=n)
            self._copied = wp.get_stream(col.device).record_event()
        return type_name


def _type_of(name: str, groups: list[Any]) -> str:
    """The Fabric type of a column from its first read group (its default type when the selection is empty)."""
    if not groups:
        return column_type(name)
    kind = _kind(groups[0])
    type_name = _KIND_TYPES.get(kind)
    if type_name is None:
        raise TypeError(f"attribute {name!r}: unsupported Fabric column type {kind} (expected matrix4d or uint)")
    return type_name


def _compact(g: Any, device_type: int = 1, device_id: int | None = None) -> bool:
    """A group whose rows are its tensor's leading rows, densely packed on the host (``device_type`` 1) or on CUDA
    device ``device_id`` (``device_type`` 2): usable in place."""
    t = g.tensor(0)
    if g.has_data_index_map or int(t.device.device_type.value) != device_type:
        return False
    if device_id is not None and int(t.device.device_id) != device_id:
        return False
    if not t.strides:
        return True
    shape = t.shape_tuple
    expected, step = [], 1
    for dim in reversed(shape):
        expected.append(step)
        step *= dim
    return tuple(t.strides[i] for i in range(t.ndim)) == tuple(reversed(expected))


def _data_ptr(g: Any) -> int:
    t = g.tensor(0)
    return int(t.data or 0) + int(t.byte_offset)


def _kind(g: Any) -> tuple[int, int, tuple[int, ...]]:
    """A read group's (DLPack type code, bits, trailing shape), the element's lanes (when more than one) last."""
    t = g.tensor(0)
    lanes = int(t.dtype.lanes)
    return (int(t.dtype.code), int(t.dtype.bits), tuple(t.shape_tuple[1:]) + ((lanes,) if lanes > 1 else ()))

# SPDX-License-Identifier: Apache-2.0
"""Real Fabric without Kit: a :class:`~frameview.fabric.stage.FabricStage` over an ``ovstage.Stage``.

How the protocol maps onto ovstage 0.3:

- **Tags** are one batched ``write_attribute`` of a ``uint32`` column over a path-list query, sealed at once.
  Paths are validated first (``get_hierarchy`` status): ovstage's default ``UPSERT`` would create a ghost prim at
  an unknown path. Removal is one ``delete_attributes`` over a path-list query, sealed.
- **Selections** issue a ``HAS`` query over every required attribute on each access and read the columns at the
  latest ordinal. ovstage returns one read group per (attribute, bucket); the groups of one bucket are row-aligned
  (row ``i`` is the same prim in the tag, world and local groups), so slot ``k`` is the ``k``-th row when the
  buckets are concatenated in read order -- exactly Warp's Fabric array interface, one pointer per bucket.
- **Reads are zero-copy** on the CPU: the interface points into Fabric storage and the groups stay pinned until
  :meth:`OvstageSelection.release`. Pointers are re-read on every access and never cached across accesses.
- **Writes go through staging columns.** Writing into read pointers sticks but is not change-tracked, so
  ``compute_hierarchy`` would ignore it. A selection prepared for writing
  (:meth:`OvstageSelection.prepare_for_write`) gathers its columns into provider-owned buffers; the view writes world
  and local matrices there; :meth:`OvstageFabricStage.propagate_world` releases every pinned read group (a write
  fails while a read overlaps it), hands the written local matrices to ovstage
  (``write_attribute(..., semantic=MATRIX)`` with a row mask) and seals; ovstage's automatic hierarchy update then
  re-derives the world matrices of the written prims and their descendants (``compute_hierarchy`` is O(stage): it
  runs only on stages configured without automatic updates, detected on the first write).
- **Ordinals**: the provider owns a monotonic counter per stage; each write uses one ordinal above the write floors
  of the attributes it touches, and seals them at that ordinal (``Scope.INCLUDE``) so reads never see an unsealed
  change.
- **Threads**: one ``threading.RLock`` per ``ovstage.Stage`` serialises every read -> release and
  write -> compute -> seal sequence (ovstage's calls are thread-safe, the sequences are not).
- **CUDA devices**: columns are read on the host and copied into staging buffers on the device; write-backs copy
  the staged local matrices back to the host. (ovstage's device placement is experimental; it is not used.)
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np
import ovstage
import warp as wp
from ovstage import (
    AttributeSemantic,
    Filter,
    FilterOp,
    HierarchyRelation,
    OrdinalRange,
    PathDictionary,
    Predicate,
    Scope,
)

from ..visibility import INVISIBLE, NO_OPINION, TOKENS, VISIBILITY_ATTR, VISIBLE, compute_visibility
from .stage import LOCAL_MATRIX, WORLD_MATRIX

__all__ = ["OvstageFabricStage", "OvstageSelection", "attach"]

logger = logging.getLogger(__name__)

RESET_XFORM_STACK = "omni:fabric:resetXformStack"
"""Bool attribute: the prim ignores its ancestors' transforms (world == local)."""

USD_PATH = "usd-path"
"""Derived attribute every prim carries (its path id): a row means the prim exists."""

_PATH_LISTS = 8
_EXISTS_TTL_S = 1.0

_LATEST = OrdinalRange.latest((1 << 64) - 1)
_STATUS_OK = 0

# (DLPack type code, bits, trailing shape) -> (warp dtype, Fabric type tuple for the array interface)
_KINDS: dict[tuple[int, int, tuple[int, ...]], tuple[Any, tuple]] = {
    (2, 64, (4, 4)): (wp.mat44d, (True, "f8", 16, 0, "matrix")),
    (1, 32, ()): (wp.uint32, (True, "u4", 1, 0, "")),
    (0, 32, ()): (wp.int32, (True, "i4", 1, 0, "")),
    (2, 64, ()): (wp.float64, (True, "f8", 1, 0, "")),
    (2, 32, ()): (wp.float32, (True, "f4", 1, 0, "")),
}
_MATRIX_KIND = (2, 64, (4, 4))
_UINT_KIND = (1, 32, ())


def _default_kind(name: str) -> tuple[int, int, tuple[int, ...]]:
    return _MATRIX_KIND if name in (WORLD_MATRIX, LOCAL_MATRIX) else _UINT_KIND


class _StageCore:
    """What every provider of one ``ovstage.Stage`` shares: the lock, the ordinal counter, the pinned selections."""

    def __init__(self, stage: ovstage.Stage) -> None:
        self.stage = stage
        self.pd = PathDictionary(stage)
        self.lock = threading.RLock()
        self.ordinal = 0
        self.pinned: set[OvstageSelection] = set()
        self._tokens: dict[str, int] = {}
        self.explicit_hierarchy = False  # True: compute_hierarchy after each write (no automatic world updates)
        self.auto_update_checked = False
        self._lists: OrderedDict[tuple[str, ...], Any] = OrderedDict()
        self.listing: tuple[str, frozenset[str]] | None = None
        self.exists: dict[str, bool] = {}
        self._exists_since = 0.0

    def path_list(self, paths: tuple[str, ...]) -> Any:
        """A cached interned path list (least recently used of ``_PATH_LISTS`` kept)."""
        plist = self._lists.get(paths)
        if plist is not None:
            self._lists.move_to_end(paths)
            return plist
        plist = self._lists[paths] = self.pd.create_path_list_from_strings(list(paths))
        while len(self._lists) > _PATH_LISTS:
            _, old = self._lists.popitem(last=False)
            if self.alive():
                old.release()
        return plist

    def remember_listing(self, prefix: str, names: list[str]) -> None:
        self.listing = (prefix, frozenset(names))
        self.exists = {}
        self._exists_since = time.monotonic()

    def exists_valid(self) -> bool:
        return time.monotonic() - self._exists_since < _EXISTS_TTL_S

    def forget_listing(self) -> None:
        self.listing = None
        self.exists = {}

    def token(self, name: str) -> int:
        tok = self._tokens.get(name)
        if tok is None:
            tok = self._tokens[name] = self.pd.intern_token(name)
        return tok

    def alive(self) -> bool:
        return bool(getattr(self.stage, "_inst", None))

    def release_pinned(self) -> None:
        """Release every read group still pinned on this stage (writes fail while a read overlaps them)."""
        for sel in list(self.pinned):
            sel.release_groups()

    def next_ordinal(self, tokens: Sequence[int]) -> int:
        """A fresh ordinal above this provider's last one and above the write floors of ``tokens``."""
        self.forget_listing()  # a write may create or remove prims: drop the has_prim batch
        floor = self.ordinal
        for tok in tokens:
            query = self.stage.get_attribute_write_floor(tok)
            try:
                floor = max(floor, query.fetch())
            finally:
                query.release().wait()
        self.ordinal = floor + 1
        return self.ordinal

    def seal(self, ordinal: int, tokens: Sequence[int]) -> None:
        self.stage.advance_write_floor(ordinal, Scope.INCLUDE, list(tokens)).wait()


class OvstageSelection:
    """The prims of an ovstage stage that carry every attribute of ``require``, in Fabric slot order.

    Implements :class:`frameview.fabric.stage.FabricSelection`. Every :meth:`prepare_for_reuse` or
    :meth:`prepare_for_write` issues a ``HAS`` query and reads the columns; :meth:`release` ends the access. The
    interface is valid between the two.
    """

    def __init__(self, provider: OvstageFabricStage, require: Sequence[str], write: bool) -> None:
        if not require:
            raise ValueError("require: expected at least one attribute name, got an empty sequence")
        self._provider = provider
        self._core = provider._core
        self.require = tuple(str(r) for r in require)
        self._tokens = [self._core.token(r) for r in self.require]
        self._filter = Filter([Predicate(tok, FilterOp.HAS) for tok in self._tokens])
        self._access = 2 if write else 1
        self._count = 0
        self._iface: dict[str, Any] = {"version": 1, "device": provider.device, "attribs": {}}
        self._signature: tuple | None = None
        self._query: Any = None
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

    def prepare_for_reuse(self) -> bool:
        """Start a read access: query, read and expose the columns (zero-copy on the CPU).

        Returns:
            True when the exposed pointers or counts differ from the previous access.
        """
        return self._prepare(stage_columns=not self._provider._zero_copy)

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
        """End the access: release the read groups, the read and the query. Idempotent."""
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

    # ---------------------------------------------------------------- internals

    def _prepare(self, stage_columns: bool) -> bool:
        core = self._core
        self._provider._check_alive()
        self.release()
        stage = core.stage
        self._query = stage.query(self._filter)
        self._query.wait()
        self._read = stage.read_attributes(self._query, self._tokens, _LATEST)
        self._read.wait()
        core.pinned.add(self)
        try:
            self._groups = list(self._read.groups())
            by_attr = self._split_groups()
            counts = [g.prim_count for g in by_attr[0]]
            self._count = int(sum(counts))
            if not stage_columns and all(_compact(g) for gs in by_attr for g in gs):
                pointers = [[_data_ptr(g) for g in gs] for gs in by_attr]
                kinds = [
                    _kind(gs[0]) if gs else _default_kind(name) for name, gs in zip(self.require, by_attr, strict=True)
                ]
                self._staged = False
            else:
                kinds = [self._gather(name, gs) for name, gs in zip(self.require, by_attr, strict=True)]
                pointers = [[self._staging[name].ptr] if self._count else [] for name in self.require]
                counts = [self._count] if self._count else []
                self._staged = True
        except BaseException:
            self.release()
            raise
        attribs = {}
        for name, kind, ptrs in zip(self.require, kinds, pointers, strict=True):
            attribs[name] = {"type": _KINDS[kind][1], "access": self._access, "pointers": ptrs, "counts": counts}
        signature = (self._staged, tuple(tuple(p) for p in pointers), tuple(counts), tuple(kinds))
        changed = signature != self._signature
        if changed:
            self._signature = signature
            self._iface = {"version": 1, "device": self._provider.device, "attribs": attribs}
        return changed

    def _split_groups(self) -> list[list[Any]]:
        """Groups per required attribute, in read order; checks that the buckets line up across attributes."""
        by_tok: dict[int, list[Any]] = {tok: [] for tok in self._tokens}
        for g in self._groups:
            if g.attribute in by_tok:
                by_tok[g.attribute].append(g)
        by_attr = [by_tok[tok] for tok in self._tokens]
        first = [g.prim_count for g in by_attr[0]]
        for name, gs in zip(self.require[1:], by_attr[1:], strict=True):
            if [g.prim_count for g in gs] != first:
                raise RuntimeError(
                    f"ovstage returned read groups that do not line up across attributes: {self.require[0]!r} has "
                    f"bucket sizes {first}, {name!r} has {[g.prim_count for g in gs]}; expected one aligned group "
                    f"per bucket"
                )
        return by_attr

    def _gather(self, name: str, groups: list[Any]) -> tuple[int, int, tuple[int, ...]]:
        """Copy the rows of ``groups`` into this selection's staging column for ``name``; returns the column kind."""
        kind = _kind(groups[0]) if groups else _default_kind(name)
        if kind not in _KINDS:
            raise TypeError(f"attribute {name!r}: unsupported Fabric column type {kind} (expected matrix4d or uint)")
        dtype = _KINDS[kind][0]
        n = self._count
        col = self._staging.get(name)
        if col is None or col.shape[0] < max(n, 1) or col.dtype != dtype:
            col = wp.empty(max(n, 1), dtype=dtype, device=self._provider.device)
            self._staging[name] = col
        if n == 0:
            return kind
        device_col = col.device.is_cuda
        staging = col
        if device_col:
            staging = self._host.get(name)
            if staging is None or staging.shape[0] < n or staging.dtype != dtype:
                staging = self._host[name] = wp.empty(n, dtype=dtype, device="cpu", pinned=True)
            elif self._copied is not None:
                wp.synchronize_event(self._copied)  # the previous upload may still read the pinned buffer
        host = staging.numpy()
        start = 0
        for g in groups:
            rows = g.prim_count
            src = g.array(0)
            src = src[_index_map(g)] if g.has_data_index_map else src[:rows]
            host[start : start + rows] = src.reshape(host[start : start + rows].shape)
            start += rows
        if device_col:
            wp.copy(col, staging, count=n)
            self._copied = wp.get_stream(col.device).record_event()
        return kind

    def _staged_matrices(self, name: str) -> np.ndarray:
        """(count, 4, 4) float64 host copy (or view, on the CPU) of a staged matrix column."""
        col = self._staging[name]
        if col.device.is_cuda:
            return col[: self._count].numpy().reshape(self._count, 4, 4)
        return col.numpy()[: self._count].reshape(self._count, 4, 4)


def _compact(g: Any) -> bool:
    """A group whose rows are its tensor's leading rows, densely packed on the host: usable in place."""
    t = g.tensor(0)
    if g.has_data_index_map or int(t.device.device_type.value) != 1:
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
    t = g.tensor(0)
    return (int(t.dtype.code), int(t.dtype.bits), tuple(t.shape_tuple[1:]))


def _prim_indices(g: Any) -> np.ndarray:
    """Positions in ``g.prim_list`` of a group's prims (through its prim index map, if any)."""
    count = g.prim_count
    if not g.has_prim_index_map:
        return np.arange(g.prim_offset, g.prim_offset + count, dtype=np.int64)
    try:
        return np.ctypeslib.as_array(g.raw.prims.index_map, shape=(count,)).astype(np.int64)
    except (TypeError, ValueError, AttributeError):
        return np.fromiter((g.prim_index(i) for i in range(count)), dtype=np.int64, count=count)


def _index_map(g: Any) -> np.ndarray:
    """The data index map of a group as an int64 array (data row of each of its prims)."""
    count = g.prim_count
    ptr = g.raw.data.index_map
    try:
        return np.ctypeslib.as_array(ptr, shape=(count,)).astype(np.int64)
    except (TypeError, ValueError, AttributeError):
        return np.fromiter((g.data_row_index(i) for i in range(count)), dtype=np.int64, count=count)


class OvstageFabricStage:
    """Fabric through ovstage, for FabricFrameView. Implements :class:`frameview.fabric.stage.FabricStage`.

    Get it with :func:`attach` (one per (stage, device); the lock is shared by every device of one stage).
    Callers hold :attr:`lock` around every access; the methods take it too, so direct calls are safe.

    Example:
        >>> import ovstage  # doctest: +SKIP
        >>> stage = ovstage.Stage("scene")
        >>> ovstage.population.open_usd(stage, "/abs/path/scene.usda", ordinal=1)
        >>> view = fv.FabricFrameView("/World/envs/env_.*/Camera", stage=stage, device="cpu")
        >>> view.backend
        'fabric:ovstage'
    """

    provider = "ovstage"

    def __init__(self, core: _StageCore, device: str) -> None:
        self._core = core
        self.device = str(wp.get_device(device))
        self._zero_copy = wp.get_device(device).is_cpu
        self.lock = core.lock

    @property
    def ovstage_stage(self) -> ovstage.Stage:
        """The ``ovstage.Stage`` this provider serves."""
        return self._core.stage

    @property
    def ordinal(self) -> int:
        """The last ordinal this provider wrote and sealed on the stage."""
        return self._core.ordinal

    # ---------------------------------------------------------------- helpers

    def _check_alive(self) -> None:
        if not self._core.alive():
            raise RuntimeError("the ovstage.Stage was destroyed; create the view again on a live stage")

    def _path_list(self, paths: Sequence[str]) -> Any:
        """An interned path list for ``paths``, shared with recent calls on the same paths (a view builds, tags and
        untags the same list several times; interning strings is the expensive part)."""
        return self._core.path_list(tuple(str(p) for p in paths))

    def _statuses(self, plist: Any) -> np.ndarray:
        """Per-path ``get_hierarchy`` status (0: the prim exists)."""
        res = self._core.stage.get_hierarchy(plist, 0, HierarchyRelation.PARENT)
        return np.fromiter((item.status for item in res.items), dtype=np.int64, count=len(res.items))

    def _rows(self, plist: Any, names: Sequence[str], *, values: bool = False) -> dict[str, tuple[np.ndarray, Any]]:
        """Which prims of a path list carry each attribute: ``{name: (positions in the list, values or None)}``.

        Reads through a path-list query (O(len(list)), not O(stage)); a prim that is missing or lacks the
        attribute simply has no row. Vectorised: no per-prim Python work, no path strings.
        """
        core = self._core
        ids = np.asarray(core.pd.get_paths(plist), dtype=np.uint64)
        order = np.argsort(ids, kind="stable")
        toks = [core.token(n) for n in names]
        names_of = dict(zip(toks, names, strict=True))
        parts: dict[str, list[tuple[np.ndarray, Any]]] = {n: [] for n in names}
        with core.stage.query_from_path_list(plist) as query:
            query.wait()
            with core.stage.read_attributes(query, toks, _LATEST) as read:
                read.wait()
                for g in read.groups():
                    with g:
                        if not g.prim_count:
                            continue
                        listed = np.asarray(core.pd.get_paths(g.prim_list), dtype=np.uint64)
                        gid = listed[_prim_indices(g)]
                        pos = order[np.searchsorted(ids, gid, sorter=order)]
                        data = None
                        if values:
                            rows = _index_map(g) if g.has_data_index_map else np.arange(g.prim_count)
                            data = np.array(g.array(0)[rows])
                        parts[names_of[g.attribute]].append((pos, data))
        out: dict[str, tuple[np.ndarray, Any]] = {}
        for name, chunks in parts.items():
            pos = np.concatenate([c[0] for c in chunks]) if chunks else np.empty(0, np.int64)
            data = np.concatenate([c[1] for c in chunks]) if values and chunks else None
            out[name] = (pos, data)
        return out

    def _missing_mask(self, plist: Any, n: int, names: Sequence[str]) -> np.ndarray:
        """(n,) bool: True where the prim of the list lacks one of ``names`` (or does not exist)."""
        missing = np.zeros(n, dtype=bool)
        for pos, _ in self._rows(plist, names).values():
            carried = np.zeros(n, dtype=bool)
            carried[pos] = True
            missing |= ~carried
        return missing

    # ---------------------------------------------------------------- FabricStage protocol

    def is_alive(self) -> bool:
        return self._core.alive()

    def missing_prims(self, paths: Sequence[str]) -> list[str]:
        with self.lock:
            self._check_alive()
            paths = [str(p) for p in paths]
            if not paths:
                return []
            missing = self._missing_mask(self._path_list(paths), len(paths), [WORLD_MATRIX, LOCAL_MATRIX])
            return [paths[i] for i in np.flatnonzero(missing)]

    def xform_parents(self, paths: Sequence[str]) -> list[str | None]:
        with self.lock:
            self._check_alive()
            paths = [str(p) for p in paths]
            if not paths:
                return []
            pos, flags = self._rows(self._path_list(paths), [RESET_XFORM_STACK], values=True)[RESET_XFORM_STACK]
            reset = np.zeros(len(paths), dtype=bool)
            if pos.size:
                reset[pos] = np.asarray(flags, dtype=bool).reshape(pos.size)
            result: list[str | None] = [None] * len(paths)
            pending = {i: _parent_path(p) for i, p in enumerate(paths) if not reset[i]}
            carries: dict[str, bool] = {}
            while pending:
                unknown = sorted({c for c in pending.values() if c is not None and c not in carries})
                if unknown:
                    missing = set(self.missing_prims(unknown))
                    carries.update((c, c not in missing) for c in unknown)
                nxt: dict[int, str | None] = {}
                for i, cand in pending.items():
                    if cand is None:
                        continue
                    if carries[cand]:
                        result[i] = cand
                    else:
                        nxt[i] = _parent_path(cand)
                pending = nxt
            return result

    def set_uint_attribute(self, paths: Sequence[str], name: str, values: np.ndarray) -> None:
        with self.lock:
            self._check_alive()
            core = self._core
            paths = [str(p) for p in paths]
            values = np.ascontiguousarray(values, dtype=np.uint32)
            if values.shape != (len(paths),):
                raise ValueError(f"values: expected shape ({len(paths)},), got {values.shape}")
            if not paths:
                return
            core.release_pinned()
            tok = core.token(name)
            plist = self._path_list(paths)
            absent = self._missing_mask(plist, len(paths), [USD_PATH])
            if np.any(absent):
                bad = [paths[i] for i in np.flatnonzero(absent)[:3]]
                raise KeyError(
                    f"prims not on the ovstage stage: {bad} ({int(np.count_nonzero(absent))} of {len(paths)}); "
                    f"nothing was written (ovstage would create them)"
                )
            ordinal = core.next_ordinal([tok])
            with core.stage.query_from_path_list(plist) as query:
                core.stage.write_attribute(query, tok, ordinal, values, is_array=False).wait()
            core.seal(ordinal, [tok])

    def remove_attribute(self, paths: Sequence[str], name: str) -> None:
        with self.lock:
            if not self._core.alive():
                return
            core = self._core
            paths = [str(p) for p in paths]
            if not paths:
                return
            core.release_pinned()
            tok = core.token(name)
            ordinal = core.next_ordinal([tok])
            with core.stage.query_from_path_list(self._path_list(paths)) as query:
                core.stage.delete_attributes(query, [tok], ordinal).wait()
            core.seal(ordinal, [tok])

    def attribute_names(self, path: str) -> list[str]:
        with self.lock:
            self._check_alive()
            core = self._core
            with core.pd.create_path_list_from_strings([str(path)]) as plist:
                if self._statuses(plist)[0] != _STATUS_OK:
                    raise KeyError(f"prim {path!r} is not on the ovstage stage")
                with core.stage.query_from_path_list(plist) as query:
                    tokens = query.result().attributes
            return sorted(core.pd.token_to_string(t) for t in tokens)

    def select(self, require: Sequence[str], *, write: bool = False) -> OvstageSelection:
        return OvstageSelection(self, require, write)

    def propagate_world(self, selection: Any, slots: wp.array) -> None:
        """Hand the local matrices staged at ``slots`` to Fabric and seal them; world matrices follow.

        A ``localMatrix`` write (``semantic=MATRIX``) makes ovstage update the world matrices of the written prims
        and of all their descendants by itself (its automatic, incremental hierarchy update), so neither the staged
        world matrices nor a stage-wide ``compute_hierarchy`` are needed: the cost is O(written prims + their
        descendants). The first write on a stage checks that the world matrices did follow; on a stage configured
        without automatic updates it switches to ``compute_hierarchy`` after every write (logged once).
        Every read group pinned on the stage is released first (a write fails while a read overlaps it).
        """
        if not isinstance(selection, OvstageSelection):
            raise TypeError(f"selection: expected an OvstageSelection, got {type(selection).__name__}")
        if LOCAL_MATRIX not in selection.require:
            raise ValueError(f"selection: expected a selection requiring {LOCAL_MATRIX!r}, got {selection.require}")
        with self.lock:
            self._check_alive()
            if not selection.staged or selection._query is None:
                raise RuntimeError(
                    "propagate_world: the selection was not prepared for writing; call selection.prepare_for_write() "
                    "before writing through its columns (ovstage read pointers are read-only)"
                )
            n = selection.count
            written = np.unique(slots.numpy().astype(np.int64)) if slots.shape[0] else np.empty(0, np.int64)
            if n == 0 or written.size == 0:
                return
            if written[0] < 0 or written[-1] >= n:
                raise IndexError(f"slots: expected values in [0, {n}), got [{written[0]}, {written[-1]}]")
            core = self._core
            local = selection._staged_matrices(LOCAL_MATRIX)
            core.release_pinned()
            kwargs: dict[str, Any] = {}
            if written.size != n:
                words = np.zeros((n + 63) // 64, dtype=np.uint64)
                np.bitwise_or.at(words, written >> 6, np.left_shift(np.uint64(1), (written & 63).astype(np.uint64)))
                kwargs = {"mask": words.tolist(), "count": n}
            lm, wm = core.token(LOCAL_MATRIX), core.token(WORLD_MATRIX)
            ordinal = core.next_ordinal([lm, wm])
            core.stage.write_attribute(
                selection._query, lm, ordinal, local, is_array=False, semantic=AttributeSemantic.MATRIX, **kwargs
            ).wait()
            if core.explicit_hierarchy:
                core.stage.compute_hierarchy(ordinal, ordinal)
            core.seal(ordinal, [lm, wm])
            if core.auto_update_checked or WORLD_MATRIX not in selection.require:
                return
            core.auto_update_checked = True
            if not _worlds_match(core, selection, written):
                core.explicit_hierarchy = True
                logger.info(
                    "ovstage stage %r does not update world matrices after local writes: frameview runs "
                    "compute_hierarchy after each write on it",
                    core.stage,
                )
                core.stage.compute_hierarchy(ordinal, ordinal)
                core.seal(ordinal, [lm, wm])

    # ---------------------------------------------------------------- visibility (host path)

    def visibility(self, paths: Sequence[str]) -> np.ndarray:
        """Computed visibility from the ``visibility`` tokens of the prims and their ancestors (one batched read)."""
        with self.lock:
            self._check_alive()
            return compute_visibility(_OvstageVisibilityTree(self), [str(p) for p in paths])

    def set_visibility(self, paths: Sequence[str], visible: np.ndarray) -> None:
        """Not available on ovstage 0.3: raises ``NotImplementedError`` (reads work, see :meth:`visibility`).

        A visibility write must list prims' children: to hide the other children of an invisible ancestor it makes
        visible, and to bring ``_worldVisibility`` up to date under every prim whose opinion changed (ovstage does
        not derive it from the tokens). ovstage 0.3's ``get_hierarchy(CHILDREN / SIBLINGS)`` forgets the children
        of a prim once an attribute was written to it after population (frameview's own tags are such writes), so
        those lists would be silently incomplete; a stage-wide listing instead would make every write O(stage).
        """
        raise NotImplementedError(
            "set_visibility: the ovstage provider cannot write visibility (ovstage 0.3's hierarchy queries lose the "
            "children of prims written after population, and a write must list them); author visibility in USD "
            "before ovstage.population opens the stage, or use fabric_provider='memory' on the pxr stage (or the "
            "usd backend) to change visibility at run time"
        )

    # ---------------------------------------------------------------- PrimTree (pattern resolution)

    def has_prim(self, path: str) -> bool:
        """Whether a prim exists at ``path`` (O(1) in the stage size).

        Pattern resolution asks this for ``<child>/<rest>`` of every child that :meth:`child_names` just listed
        (``env_.*`` then ``Robot/Camera``): the first such question checks all the listed siblings' ``<rest>`` in
        one batched ``get_hierarchy`` call and answers the others from that batch, once each. The batch is dropped
        on the next listing, on any write through this stage's providers, and after a second; callers re-validate
        what they use (FabricFrameView calls :meth:`missing_prims`).
        """
        path = str(path)
        with self.lock:
            self._check_alive()
            core = self._core
            known = core.exists.pop(path, None)  # each batched answer is used once
            if known is not None and core.exists_valid():
                return known
            listing = core.listing if core.exists_valid() else None
            if listing is not None and path.startswith(listing[0]):
                head, sep, rest = path[len(listing[0]) :].partition("/")
                if sep and head in listing[1]:
                    batch = [f"{listing[0]}{name}/{rest}" for name in listing[1]]
                    with core.pd.create_path_list_from_strings(batch) as plist:
                        status = self._statuses(plist)
                    core.exists.update(zip(batch, (status == _STATUS_OK).tolist(), strict=True))
                    return core.exists.pop(path)
            with core.pd.create_path_list_from_strings([path]) as plist:
                return bool(self._statuses(plist)[0] == _STATUS_OK)

    def child_names(self, path: str) -> list[str]:
        """Names of the children of ``path`` (``"/"`` for the root), in authoring order."""
        with self.lock:
            self._check_alive()
            core = self._core
            with core.pd.create_path_list_from_strings([str(path)]) as plist:
                item = core.stage.get_hierarchy(plist, 0, HierarchyRelation.CHILDREN).items[0]
            if item.status != _STATUS_OK:
                return []
            names = [child.rsplit("/", 1)[1] for child in item.paths]
            core.remember_listing("/" if path == "/" else f"{path}/", names)
            return names

    def release_all(self) -> None:
        """Release every read group still pinned on the stage (recovery after an interrupted access)."""
        with self.lock:
            if self._core.alive():
                self._core.release_pinned()


def _worlds_match(core: _StageCore, selection: OvstageSelection, written: np.ndarray) -> bool:
    """Whether Fabric's world matrices of the written rows equal the ones the writer staged (same query order)."""
    expected = selection._staged_matrices(WORLD_MATRIX)[written]
    wm = core.token(WORLD_MATRIX)
    chunks = []
    with core.stage.read_attributes(selection._query, [wm], _LATEST) as read:
        read.wait()
        for g in read.groups():
            with g:
                if g.attribute == wm and g.prim_count:
                    rows = _index_map(g) if g.has_data_index_map else np.arange(g.prim_count)
                    chunks.append(np.array(g.array(0)[rows]))
    if not chunks:
        return False
    actual = np.concatenate(chunks).reshape(-1, 4, 4)
    if actual.shape[0] != selection.count:
        return False
    scale = max(1.0, float(np.abs(expected).max()))
    return bool(np.abs(actual[written] - expected).max() <= 1e-6 * scale)


class _OvstageVisibilityTree:
    """The reading half of :class:`frameview.visibility.VisibilityTree` over ovstage: the ``visibility`` tokens, read
    in one batch (ovstage's population gives the token to every Imageable prim, and to typeless prims)."""

    def __init__(self, provider: OvstageFabricStage) -> None:
        self._provider = provider

    def opinions(self, paths: Sequence[str]) -> np.ndarray:
        out = np.full(len(paths), NO_OPINION, dtype=np.int8)
        if paths:
            provider = self._provider
            core = provider._core
            with core.pd.create_path_list_from_strings(list(paths)) as plist:
                pos, data = provider._rows(plist, [VISIBILITY_ATTR], values=True)[VISIBILITY_ATTR]
            if pos.size:
                invisible = np.uint64(core.token(TOKENS[INVISIBLE]))
                out[pos] = np.where(np.asarray(data).reshape(pos.size) == invisible, INVISIBLE, VISIBLE)
        return out

    def children(self, paths: Sequence[str]) -> list[list[str]]:
        raise NotImplementedError("ovstage 0.3's hierarchy queries cannot list children reliably after writes")


def _parent_path(path: str) -> str | None:
    parent = path.rsplit("/", 1)[0]
    return parent or None


_CORES: weakref.WeakValueDictionary[int, _StageCore] = weakref.WeakValueDictionary()
_PROVIDERS: weakref.WeakValueDictionary[tuple[int, str], OvstageFabricStage] = weakref.WeakValueDictionary()
_REGISTRY_LOCK = threading.Lock()


def attach(stage: ovstage.Stage, device: str = "cpu") -> OvstageFabricStage:
    """The ovstage provider of ``stage`` on ``device``: the same object for the same (stage, device).

    Every provider of one stage shares one lock and one ordinal counter. The registry holds providers weakly: a
    provider lives as long as a view (or the caller) holds it, and holds its stage.

    Raises:
        TypeError: ``stage`` is not an ``ovstage.Stage``.
        RuntimeError: The stage was destroyed.
    """
    if not isinstance(stage, ovstage.Stage):
        raise TypeError(f"stage: expected an ovstage.Stage, got {type(stage).__name__}")
    if not getattr(stage, "_inst", None):
        raise RuntimeError("stage: the ovstage.Stage was destroyed; open the scene on a live stage")
    device = str(wp.get_device(device))
    with _REGISTRY_LOCK:
        key = (id(stage), device)
        provider = _PROVIDERS.get(key)
        if provider is not None and provider._core.stage is stage:
            return provider
        core = _CORES.get(id(stage))
        if core is None or core.stage is not stage:
            core = _StageCore(stage)
            _CORES[id(stage)] = core
        provider = OvstageFabricStage(core, device)
        _PROVIDERS[key] = provider
        logger.debug("ovstage provider attached to %r on %s", stage, device)
        return provider

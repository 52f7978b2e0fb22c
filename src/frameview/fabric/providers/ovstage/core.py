# SPDX-License-Identifier: Apache-2.0
"""What every ovstage provider of one ``ovstage.Stage`` shares, and the batched queries it runs on that stage.

:class:`StageCore` owns the per-stage lock, the ordinal counter (write floors and seals), the interned path lists,
the ``has_prim`` listing batch and the read groups pinned by selections; its query methods read attributes of a
path list in one call (O(list), never O(stage)). The helpers below turn ovstage read groups into NumPy index arrays.
Used by :mod:`.fabric_stage` (the provider facade) and :mod:`.selection`.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import ovstage
from ovstage import HierarchyRelation, OrdinalRange, PathDictionary, Scope

from ....visibility import INVISIBLE, NO_OPINION, TOKENS, VISIBILITY_ATTR, VISIBLE

__all__ = ["LATEST", "STATUS_OK", "USD_PATH", "StageCore", "index_map"]

USD_PATH = "usd-path"
"""Derived attribute every prim carries (its path id): a row means the prim exists."""

LATEST = OrdinalRange.latest((1 << 64) - 1)
"""Read at the latest sealed ordinal."""

STATUS_OK = 0
"""``get_hierarchy`` status of a path that is a prim."""

_PATH_LISTS = 8
_EXISTS_TTL_S = 1.0


class PinnedReads(Protocol):
    """A holder of read groups pinned on the stage (an :class:`~.selection.OvstageSelection`): the core unpins them
    before a write."""

    def release_groups(self) -> None: ...


class StageCore:
    """What every provider of one ``ovstage.Stage`` shares: the lock, the ordinal counter, the pinned selections.

    Internal to the ovstage provider; callers hold :attr:`lock` around every sequence of calls.
    """

    def __init__(self, stage: ovstage.Stage) -> None:
        self.stage = stage
        self.pd = PathDictionary(stage)
        self.lock = threading.RLock()
        self.ordinal = 0
        self.generation = 0  # bumped when frameview tags or untags prims: selections issue their queries again
        # whether frameview wrote matrices on the stage since it last tagged or untagged prims there: the first such
        # write bumps the generation (measured on ovstage 0.3: a query issued before it reads 3x (CPU) to 25x (GPU
        # hierarchy model) slower after it, and stays so; queries issued after it stay fast through later writes)
        self.written = False
        self.pinned: set[PinnedReads] = set()
        self._tokens: dict[str, int] = {}
        self.explicit_hierarchy = False  # True: compute_hierarchy after each write (no automatic world updates)
        self.auto_update_checked = False
        self._lists: OrderedDict[tuple[str, ...], Any] = OrderedDict()
        self.listing: tuple[str, frozenset[str]] | None = None
        self.exists: dict[str, bool] = {}
        self._exists_since = 0.0

    # ---------------------------------------------------------------- lifetime, tokens, path lists

    def alive(self) -> bool:
        return bool(getattr(self.stage, "_inst", None))

    def check_alive(self) -> None:
        """Raise ``RuntimeError`` once the stage was destroyed."""
        if not self.alive():
            raise RuntimeError("the ovstage.Stage was destroyed; create the view again on a live stage")

    def token(self, name: str) -> int:
        tok = self._tokens.get(name)
        if tok is None:
            tok = self._tokens[name] = self.pd.intern_token(name)
        return tok

    def path_list(self, paths: Sequence[str]) -> Any:
        """An interned path list for ``paths``, shared with recent calls on the same paths (least recently used of
        ``_PATH_LISTS`` kept: a view builds, tags and untags the same list several times; interning strings is the
        expensive part)."""
        key = tuple(str(p) for p in paths)
        plist = self._lists.get(key)
        if plist is not None:
            self._lists.move_to_end(key)
            return plist
        plist = self._lists[key] = self.pd.create_path_list_from_strings(list(key))
        while len(self._lists) > _PATH_LISTS:
            _, old = self._lists.popitem(last=False)
            if self.alive():
                old.release()
        return plist

    # ---------------------------------------------------------------- the has_prim listing batch

    def remember_listing(self, prefix: str, names: list[str]) -> None:
        self.listing = (prefix, frozenset(names))
        self.exists = {}
        self._exists_since = time.monotonic()

    def exists_valid(self) -> bool:
        return time.monotonic() - self._exists_since < _EXISTS_TTL_S

    def forget_listing(self) -> None:
        self.listing = None
        self.exists = {}

    # ---------------------------------------------------------------- writes: pins, ordinals, seals

    def release_pinned(self) -> None:
        """Release every read group still pinned on this stage (writes fail while a read overlaps them)."""
        for sel in list(self.pinned):
            sel.release_groups()

    def next_ordinal(self, tokens: Sequence[int], ask: bool = True) -> int:
        """A fresh ordinal above this provider's last one and (``ask``) above the write floors of ``tokens``, as
        ovstage reports them. ``ask=False`` skips the floor queries: for a write that retries with ``ask=True`` when
        ovstage rejects its ordinal (someone else sealed a later one: :func:`floor_violation`)."""
        self.forget_listing()  # a write may create or remove prims: drop the has_prim batch
        if not ask:
            self.ordinal += 1
            return self.ordinal
        floor = self.ordinal
        for tok in tokens:
            query = self.stage.get_attribute_write_floor(tok)
            try:
                floor = max(floor, query.fetch())
            finally:
                query.release().wait()
        self.ordinal = floor + 1
        return self.ordinal

    def write(self, tokens: Sequence[int], submit: Any) -> int:
        """Run ``submit(ordinal)`` (one ovstage write, waited for) at the next ordinal of ``tokens`` without asking
        ovstage for their write floors; if ovstage rejects that ordinal as below a floor (a foreign writer sealed a
        later one), once more at an ordinal above the floors it reports. Returns the ordinal written."""
        ordinal = self.next_ordinal(tokens, ask=False)
        try:
            submit(ordinal)
        except ovstage.OvstageError as exc:
            if not floor_violation(exc):
                raise
            ordinal = self.next_ordinal(tokens)
            submit(ordinal)
        return ordinal

    def seal(self, ordinal: int, tokens: Sequence[int]) -> None:
        self.stage.advance_write_floor(ordinal, Scope.INCLUDE, list(tokens)).wait()

    # ---------------------------------------------------------------- batched queries over a path list

    def statuses(self, plist: Any) -> np.ndarray:
        """Per-path ``get_hierarchy`` status (:data:`STATUS_OK`: the prim exists)."""
        res = self.stage.get_hierarchy(plist, 0, HierarchyRelation.PARENT)
        return np.fromiter((item.status for item in res.items), dtype=np.int64, count=len(res.items))

    def rows(self, plist: Any, names: Sequence[str], *, values: bool = False) -> dict[str, tuple[np.ndarray, Any]]:
        """Which prims of a path list carry each attribute: ``{name: (positions in the list, values or None)}``.

        Reads through a path-list query (O(len(list)), not O(stage)); a prim that is missing or lacks the
        attribute simply has no row. Vectorised: no per-prim Python work, no path strings.
        """
        ids = np.asarray(self.pd.get_paths(plist), dtype=np.uint64)
        order = np.argsort(ids, kind="stable")
        toks = [self.token(n) for n in names]
        names_of = dict(zip(toks, names, strict=True))
        parts: dict[str, list[tuple[np.ndarray, Any]]] = {n: [] for n in names}
        with self.stage.query_from_path_list(plist) as query:
            query.wait()
            with self.stage.read_attributes(query, toks, LATEST) as read:
                read.wait()
                for g in read.groups():
                    with g:
                        if not g.prim_count:
                            continue
                        listed = np.asarray(self.pd.get_paths(g.prim_list), dtype=np.uint64)
                        gid = listed[_prim_indices(g)]
                        pos = order[np.searchsorted(ids, gid, sorter=order)]
                        parts[names_of[g.attribute]].append((pos, group_values(g) if values else None))
        out: dict[str, tuple[np.ndarray, Any]] = {}
        for name, chunks in parts.items():
            pos = np.concatenate([c[0] for c in chunks]) if chunks else np.empty(0, np.int64)
            data = np.concatenate([c[1] for c in chunks]) if values and chunks else None
            out[name] = (pos, data)
        return out

    def missing_mask(self, plist: Any, n: int, names: Sequence[str]) -> np.ndarray:
        """(n,) bool: True where the prim of the list lacks one of ``names`` (or does not exist)."""
        missing = np.zeros(n, dtype=bool)
        for pos, _ in self.rows(plist, names).values():
            carried = np.zeros(n, dtype=bool)
            carried[pos] = True
            missing |= ~carried
        return missing


def floor_violation(exc: Exception) -> bool:
    """Whether an ovstage error rejected a write's ordinal (at or below a write floor, or below retained history)."""
    codes = getattr(ovstage, "ErrorCode", None)  # ovstage 0.3; 0.2.1 names it in the message only
    if codes is not None and getattr(exc, "code", None) == int(codes.WRITE_FLOOR_VIOLATION):
        return True
    return "floor" in str(exc).lower()


class OvstageVisibilityTree:
    """The reading half of :class:`frameview.visibility.VisibilityTree` over ovstage: the ``visibility`` tokens, read
    in one batch (ovstage's population gives the token to every Imageable prim, and to typeless prims)."""

    def __init__(self, core: StageCore) -> None:
        self._core = core

    def opinions(self, paths: Sequence[str]) -> np.ndarray:
        out = np.full(len(paths), NO_OPINION, dtype=np.int8)
        if paths:
            core = self._core
            with core.pd.create_path_list_from_strings(list(paths)) as plist:
                pos, data = core.rows(plist, [VISIBILITY_ATTR], values=True)[VISIBILITY_ATTR]
            if pos.size:
                invisible = np.uint64(core.token(TOKENS[INVISIBLE]))
                out[pos] = np.where(np.asarray(data).reshape(pos.size) == invisible, INVISIBLE, VISIBLE)
        return out

    def children(self, paths: Sequence[str]) -> list[list[str]]:
        raise NotImplementedError("ovstage 0.3's hierarchy queries cannot list children reliably after writes")


# -------------------------------------------------------------------- read groups -> NumPy


def _prim_indices(g: Any) -> np.ndarray:
    """Positions in ``g.prim_list`` of a group's prims (through its prim index map, if any)."""
    count = g.prim_count
    if not g.has_prim_index_map:
        return np.arange(g.prim_offset, g.prim_offset + count, dtype=np.int64)
    try:
        return np.ctypeslib.as_array(g.raw.prims.index_map, shape=(count,)).astype(np.int64)
    except (TypeError, ValueError, AttributeError):
        return np.fromiter((g.prim_index(i) for i in range(count)), dtype=np.int64, count=count)


def index_map(g: Any) -> np.ndarray:
    """The data index map of a group as an int64 array (data row of each of its prims)."""
    count = g.prim_count
    ptr = g.raw.data.index_map
    try:
        return np.ctypeslib.as_array(ptr, shape=(count,)).astype(np.int64)
    except (TypeError, ValueError, AttributeError):
        return np.fromiter((g.data_row_index(i) for i in range(count)), dtype=np.int64, count=count)


def group_array(g: Any) -> np.ndarray:
    """A read group's column as NumPy, one leading row per data row (no copy).

    ovstage 0.3 reports a matrix as a ``(rows, 4, 4)`` float64 tensor; ovstage 0.2 as a ``(rows,)`` tensor of
    16-lane float64 elements, which ``g.array(0)`` flattens to ``(rows * 16,)``: the lanes are folded back into a
    trailing axis here, so both read as one row per prim.
    """
    a = g.array(0)
    lanes = int(g.tensor(0).dtype.lanes)
    return a.reshape(-1, lanes) if lanes > 1 else a


def group_values(g: Any) -> np.ndarray:
    """A copy of a read group's values, one per prim of the group (through its data index map, if any)."""
    rows = index_map(g) if g.has_data_index_map else np.arange(g.prim_count)
    return np.array(group_array(g)[rows])

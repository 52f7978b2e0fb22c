# SPDX-License-Identifier: Apache-2.0
"""The facade of the embedded Fabric model: :class:`MemoryFabricStage`, the :class:`~frameview.fabric.stage.FabricStage`
protocol over the storage, hierarchy, USD sync and visibility layers, plus the device hierarchy update for views."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import warp as wp

from ...._core.host import to_numpy
from .follow import FollowPlan
from .opinions import _VisibilityOpinions
from .storage import MemorySelection

__all__ = ["MemoryFabricStage"]


class MemoryFabricStage(_VisibilityOpinions):
    """The embedded Fabric model. Implements :class:`frameview.fabric.stage.FabricStage`.

    Build it with :func:`attach` (from a pxr stage) or :meth:`from_arrays`. Not thread-safe by itself: callers hold
    :attr:`lock` around every call (FabricFrameView does).
    """

    provider = "memory"

    def __init__(self, device: str = "cpu") -> None:
        super().__init__(device)
        self.lock = threading.RLock()
        self._pid_cache: dict[int, tuple[Sequence[str], int, np.ndarray]] = {}

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
        written = selection.pids()[to_numpy(slots)]
        below = self._descendants(written, include_self=False)
        if below.size:
            self._update_world(np.setdiff1d(below, written, assume_unique=False))

    # -- device hierarchy update for views (see frameview.fabric.providers.memory.follow)

    def follow_plan(self, paths: tuple[str, ...]) -> FollowPlan:
        """A plan that makes the descendants of ``paths`` follow their writes on the device."""
        return FollowPlan(self, tuple(paths))

    def prim_ids(self, paths: Sequence[str]) -> np.ndarray:
        """Model prim ids of ``paths`` (``KeyError`` naming the missing ones)."""
        self.sync()
        return self._lookup(paths)

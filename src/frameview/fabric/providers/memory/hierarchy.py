# SPDX-License-Identifier: Apache-2.0
"""Hierarchy of the embedded Fabric model: prims and their parents, CSR children, descendants, depths, and world
matrices computed from local matrices in Warp, level by level."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import numpy as np
import warp as wp

from ...._core.host import to_numpy
from ...stage import LOCAL_MATRIX, WORLD_MATRIX
from .storage import _MATRIX_ATTRS, MemorySelection, _Storage


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


class _Hierarchy(_Storage):
    """Prim ids, paths, parents, depths and liveness over the storage layer; adding and removing prims."""

    def __init__(self, device: str) -> None:
        super().__init__(device)
        self._paths: list[str] = []
        self._pid_of: dict[str, int] = {}
        self._parent = np.empty(0, dtype=np.int64)
        self._depth = np.empty(0, dtype=np.int64)
        self._alive = np.empty(0, dtype=bool)
        self._children: tuple[np.ndarray, np.ndarray] | None = None
        self._structure_version = 0  # bumped when prims are added or removed (prim ids change meaning)
        self._xforms: MemorySelection | None = None
        self._xform_arrays: tuple[wp.fabricarray, wp.fabricarray, np.ndarray] | None = None

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
        return to_numpy(world_wp)

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

    @property
    def structure_version(self) -> int:
        """Bumped whenever prims are added or removed (prim ids change meaning)."""
        return self._structure_version

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

    # -- diagnostics and the perf harness (documented seams: perf/ reads these, never the tables)

    def paths_of(self, pids: np.ndarray) -> list[str]:
        """The paths of prim ids, as Python strings (one object per prim: O(len(pids)), for baselines and errors)."""
        paths = self._paths
        return [paths[p] for p in np.asarray(pids, dtype=np.int64).tolist()]

    def host_nbytes(self) -> dict[str, int]:
        """Bytes the model holds on the host besides its columns (``perf/soak.py`` tracks them over a run).

        Returns:
            ``path_strings`` (the path ``str`` objects), ``path_list`` (the pid -> path list), ``path_dict`` (the
            path -> pid dict) and ``numpy_tables`` (parent, depth, bucket, row, alive, bucket pids, the child table).
        """
        tables = sum(a.nbytes for a in (self._parent, self._depth, self._bucket_of, self._row_of, self._alive))
        tables += sum(b.pids.nbytes for b in self.buckets)
        if self._children is not None:
            tables += sum(a.nbytes for a in self._children)
        return {
            "path_strings": sum(sys.getsizeof(p) for p in self._paths),
            "path_list": sys.getsizeof(self._paths),
            "path_dict": sys.getsizeof(self._pid_of),
            "numpy_tables": int(tables),
        }


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

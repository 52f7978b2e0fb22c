# SPDX-License-Identifier: Apache-2.0
"""FabricFrameView: poses read and written in Fabric, through selections scoped to the view by a private tag.

Every managed prim carries ``frameview:<uid>:index`` (its view index) and every unique parent
``frameview:<uid>:parentIndex``; selections require the tag, so their size is the view's, not the stage's. On each
access the view->slot table is rebuilt from live Fabric data by inverting the tag column in one Warp launch: there
is no cache to invalidate, and a count mismatch raises instead of reading another prim.
"""

from __future__ import annotations

import contextlib
import enum
import itertools
import logging
import sys
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import warp as wp

from .._launch import RecordedLaunch, block_dim_for, capture_stream, destroy_stream
from .._rows import (
    ALL,
    INDEXED,
    MASK,
    Rows,
)
from ..base import BaseFrameView
from ..host import to_numpy
from ..kernels.slots import invert_tag_column
from .providers import _is_pxr_stage, open_fabric_stage
from .stage import LOCAL_MATRIX, WORLD_MATRIX, FabricSelection
from .view_kernels import (
    _ANCHOR,
    _NO_OFFSET,
    STAGE_ALL,
    STAGE_INDICES,
    STAGE_MASK,
    _commit_follow,
    _gather_poses,
    _gather_scales,
    _scatter_poses,
    _scatter_scales,
    _solve_writes,
    _stage_indices,
    _stage_write,
)

__all__ = ["FabricFrameView"]

logger = logging.getLogger(__name__)

_UIDS = itertools.count()
"""Process-wide, monotonic: a dead view's tag name can never satisfy a live view's selection."""


class _Lifecycle(enum.Enum):
    """Where a :class:`FabricFrameView` stands: only an ``OPEN`` view has tags on the stage to remove."""

    BUILDING = "building"  # until the prims are tagged: nothing to clean up (close() and __del__ do nothing)
    OPEN = "open"  # tags on the stage: close() removes them, or __del__ does (or defers it) for a dropped view
    CLOSED = "closed"  # tags removed, or their removal handed to the DeferredTagRemoval


class DeferredTagRemoval:
    """The tag removals of views garbage-collected during another access to their stage.

    Removing a view's tags in the middle of an access would move bucket columns under that access, so ``__del__``
    calls :meth:`defer` instead; the stage's next access (a view's construction, refresh or release, holding the
    stage's lock and using no selection of it) calls :meth:`flush`. Entries hold the stage weakly: a stage that is
    gone takes its tags with it.
    """

    def __init__(self) -> None:
        self._pending: list[tuple[Callable[[], Any], tuple[str, ...], str, tuple[str, ...], str]] = []

    def defer(
        self, fabric: Any, paths: tuple[str, ...], tag: str, parent_paths: tuple[str, ...], parent_tag: str
    ) -> None:
        """Remove ``tag`` from ``paths`` and ``parent_tag`` from ``parent_paths`` at ``fabric``'s next access."""
        try:
            ref: Callable[[], Any] = weakref.ref(fabric)
        except TypeError:
            ref = (lambda f: lambda: f)(fabric)
        self._pending.append((ref, paths, tag, parent_paths, parent_tag))

    def flush(self, fabric: Any) -> None:
        """Do the removals deferred on ``fabric`` (and drop those of stages that are gone); the caller holds its lock
        and is not inside an access: no selection of this stage is in use."""
        if not self._pending:
            return
        for entry in list(self._pending):
            target = entry[0]()
            if target is not None and target is not fabric:
                continue
            with contextlib.suppress(ValueError):
                self._pending.remove(entry)
            if target is not None and fabric.is_alive():
                _ref, paths, tag, parent_paths, parent_tag = entry
                fabric.remove_attribute(paths, tag)
                if parent_paths:
                    fabric.remove_attribute(parent_paths, parent_tag)


_DEFERRED_TAGS = DeferredTagRemoval()
"""Process-wide: one list for every stage (a view collected during an access has no other place to leave it)."""


def _node_graph(fabric: Any, paths: tuple[str, ...]) -> tuple[np.ndarray, tuple[str, ...]]:
    """The nodes a write reads to place the view's prims: ``(node_parent, extra paths)``.

    Node ``i < N`` is view prim ``i``; node ``N + e`` is extra prim ``e``: the nearest Fabric ancestor of a view prim
    when it is outside the view (an *anchor*: no view prim lies above it, so a write cannot move it, and its world
    matrix is read as is), or a prim between nested view prims (its local matrix is composed). ``node_parent`` is the
    node of each node's Fabric parent, -1 for none (identity) and ``_ANCHOR`` for anchors.
    """
    n = len(paths)
    view_index = {p: i for i, p in enumerate(paths)}

    def under_view(path: str) -> bool:
        parent = path.rsplit("/", 1)[0]
        while parent:
            if parent in view_index:
                return True
            parent = parent.rsplit("/", 1)[0]
        return False

    extras: dict[str, int] = {}
    extra_parent: list[int] = []
    node_parent = np.full(n, -1, dtype=np.int64)

    def node_of(path: str | None, pending: list[str]) -> int:
        if path is None:
            return -1
        if path in view_index:
            return view_index[path]
        e = extras.get(path)
        if e is None:
            e = extras[path] = len(extra_parent)
            extra_parent.append(int(_ANCHOR))
            if under_view(path):  # between nested view prims: its own parent matters
                pending.append(path)
        return n + e

    pending: list[str] = []
    for i, parent in enumerate(fabric.xform_parents(paths)):
        node_parent[i] = node_of(parent, pending)
    while pending:
        batch, pending = tuple(pending), []
        for path, parent in zip(batch, fabric.xform_parents(batch), strict=True):
            extra_parent[extras[path]] = node_of(parent, pending)
    return np.concatenate([node_parent, np.asarray(extra_parent, dtype=np.int64)]), tuple(extras)


def _address(array: wp.array | None) -> tuple | None:
    """What a captured launch depends on in a caller's array: its address and shape."""
    return None if array is None else (array.ptr, array.shape)


class FabricFrameView(BaseFrameView):
    """A FrameView over Fabric: O(view) reads and writes, whatever the size of the stage.

    Writes change Fabric only, never USD; the other space (local or world) and the descendants' world matrices are
    brought up to date. Output buffers are owned by the view and overwritten by the same thread's next call of the
    same getter. A view is meant for one thread (the one that steps the simulation); calls from other threads are
    serialised on the stage's lock and get their own output buffers (see :class:`BaseFrameView`).

    Call :meth:`close` (or use ``with``) when done: it removes the view's tags from the stage. A view dropped without
    ``close()`` removes them when garbage-collected (when collected during another access to its stage, at that
    stage's next access) and logs a warning naming it.

    Example:
        >>> import frameview as fv  # doctest: +SKIP
        >>> with fv.FabricFrameView("/World/envs/env_.*/Camera", stage=stage, device="cuda:0") as view:
        ...     pos, quat = view.get_world_poses()  # (N,) vec3f, (N,) quatf xyzw, world frame
        ...     torch_pos = wp.to_torch(pos)  # zero-copy (N, 3)

    Args:
        prim_path: A path, a path with a regular expression per component (``/World/envs/env_.*/Camera``), or a
            list of paths.
        stage: A pxr ``Usd.Stage``, an ``ovstage.Stage``, a usdrt stage, or a ``FabricStage``.
        device: Warp device of the returned arrays and of the Fabric columns.
        fabric_provider: ``"auto"`` (chosen by the stage's type, logged), ``"memory"``, ``"ovstage"`` or ``"usdrt"``.
    """

    _device_rows = True

    _state = _Lifecycle.BUILDING
    """The class default: a view whose construction failed before it tagged its prims has nothing to clean up."""

    @property
    def _closed(self) -> bool:
        """BaseFrameView's flag, derived from :attr:`_state`: only an ``OPEN`` view can be used (or closed)."""
        return self._state is not _Lifecycle.OPEN

    @_closed.setter
    def _closed(self, closed: bool) -> None:
        # BaseFrameView sets False in its __init__, before the prims are tagged (the view stays BUILDING until
        # FabricFrameView.__init__ opens it), and True in close()
        if closed:
            self._state = _Lifecycle.CLOSED

    def __init__(
        self,
        prim_path: str | Sequence[str],
        *,
        stage: Any,
        device: str = "cpu",
        fabric_provider: str = "auto",
    ) -> None:
        from ..paths import resolve_prim_paths

        fabric = open_fabric_stage(stage, device, fabric_provider)
        self._lock = fabric.lock  # BaseFrameView runs every public call under it: one lock per stage, no ordering
        with fabric.lock:
            _DEFERRED_TAGS.flush(fabric)
            paths = resolve_prim_paths(prim_path, stage if _is_pxr_stage(stage) else fabric)
            super().__init__(prim_path, paths, device=device)  # the view stays BUILDING
            if str(wp.get_device(fabric.device)) != self.device:
                raise ValueError(f"device: the Fabric stage lives on {fabric.device!r}, the view asks for {device!r}")
            missing = fabric.missing_prims(self.prim_paths)
            if missing:
                raise ValueError(
                    f"prim_path {prim_path!r}: {len(missing)} prim(s) carry no Fabric world/local matrices "
                    f"(not xformable, inactive or not in Fabric), e.g. {missing[:3]}"
                )
            node_parent, extras = _node_graph(fabric, self.prim_paths)
            self._fabric = fabric
            self._uid = next(_UIDS)
            self._tag = f"frameview:{self._uid}:index"
            self._parent_tag = f"frameview:{self._uid}:parentIndex"
            self._parent_paths = extras
            fabric.set_uint_attribute(self.prim_paths, self._tag, np.arange(self.count, dtype=np.uint32))
            self._state = _Lifecycle.OPEN  # tags are on the stage from here: close() must remove them
            if self._parent_paths:
                fabric.set_uint_attribute(
                    self._parent_paths, self._parent_tag, np.arange(len(self._parent_paths), dtype=np.uint32)
                )
            self._sel = fabric.select([self._tag, WORLD_MATRIX, LOCAL_MATRIX], write=True)
            self._parent_sel = fabric.select([self._parent_tag, WORLD_MATRIX, LOCAL_MATRIX], write=False)
            follow_plan = getattr(fabric, "follow_plan", None)
            self._follow = follow_plan(self.prim_paths) if follow_plan is not None else None
        dev, n = self._device, max(self.count, 1)
        self._node_parent = wp.array(node_parent, dtype=wp.int32, device=dev)
        # a view prim below another view prim: a write's solve reads other rows' requests (staged in a launch first)
        self._nested = bool(np.any((node_parent >= 0) & (node_parent < self.count)))
        self._slots = wp.empty(n, dtype=wp.int32, device=dev)
        self._parent_slots = wp.empty(max(len(self._parent_paths), 1), dtype=wp.int32, device=dev)
        self._req_row = wp.full(n, -1, dtype=wp.int32, device=dev)  # view index -> request row, -1: not written
        self._req_all = wp.array(np.arange(n, dtype=np.int32), dtype=wp.int32, device=dev)
        self._new_local = wp.empty(n, dtype=wp.mat44d, device=dev)
        self._new_world = wp.empty(n, dtype=wp.mat44d, device=dev)
        self._written = wp.empty(n, dtype=wp.int32, device=dev)
        self._no_vec3 = wp.empty(0, dtype=wp.vec3f, device=dev)
        self._no_quat = wp.empty(0, dtype=wp.quatf, device=dev)
        self._no_index = wp.empty(0, dtype=wp.int32, device=dev)
        self._no_mask = wp.empty(0, dtype=wp.bool, device=dev)
        self._arrays: dict[str, Any] = {}
        self._launches: dict[Any, Any] = {}
        self._offset_keys: dict[int, tuple[wp.quatf, tuple[float, ...]]] = {}
        self._capture_stream: wp.Stream | None = None
        self._no_capture_stream = False

    # ---------------------------------------------------------------- properties

    @property
    def backend(self) -> str:
        return f"fabric:{self._fabric.provider}" if hasattr(self, "_fabric") else "fabric"

    @property
    def tag_names(self) -> tuple[str, str]:
        """The private attributes this view authors: ``(index tag, parent index tag)``."""
        return self._tag, self._parent_tag

    @property
    def parent_paths(self) -> tuple[str, ...]:
        """The other Fabric prims a write reads: the nearest ancestors carrying Fabric matrices that lie outside the
        view, and the prims between nested view prims."""
        return self._parent_paths

    @property
    def fabric_stage(self) -> Any:
        """The provider object (a FabricStage) this view reads and writes."""
        return self._fabric

    # ---------------------------------------------------------------- seams for benchmarks and diagnostics

    def rebuild_slot_table(self, parents: bool = False) -> tuple[wp.array, Any]:
        """Rebuild the slot table of the view's prims (or of its :attr:`parent_paths`) exactly as every access does:
        bring the selection up to date, check its count (``RuntimeError`` naming lost prims), rebuild the fabric
        arrays only if the buckets changed, and launch the one tag-column inversion (recorded; a CUDA graph once the
        buckets are stable).

        For benchmarks and diagnostics (``perf/scaling.py`` times this call); reads and writes do it themselves.

        Returns:
            The slot table (``wp.array`` int32, ``table[i]`` is the Fabric slot of row ``i``) and the world-matrix
            fabric array it indexes. Both belong to the view and stay valid until the stage's buckets change.
        """
        self._check_open()
        with self._fabric.lock:
            sel, count, what, prefix, tag, slots, key = (
                (self._parent_sel, len(self._parent_paths), "parents", "parent:", self._parent_tag, self._parent_slots,
                 "invert_parents")
                if parents
                else (self._sel, self.count, "prims", "", self._tag, self._slots, "invert")
            )  # fmt: skip
            try:
                self._refresh_one(sel, count, what, (tag, WORLD_MATRIX, LOCAL_MATRIX))
                self._launch_recorded(key, invert_tag_column, count, [self._arrays[prefix + tag]], [slots])
                return slots, self._arrays[prefix + WORLD_MATRIX]
            finally:
                sel.release()

    def selection_size(self, parents: bool = False) -> int:
        """Prims in the view's (or its parents') scoped selection as Fabric sees it now: the view's count when all
        is well, whatever the size of the stage (benchmarks and diagnostics)."""
        self._check_open()
        with self._fabric.lock:
            sel = self._parent_sel if parents else self._sel
            try:
                sel.prepare_for_reuse()
                return int(sel.count)
            finally:
                sel.release()

    # ---------------------------------------------------------------- access plumbing

    def _refresh(self, parents: bool, write: bool = False) -> None:
        """Bring the selections up to date, check their counts, rebuild fabric arrays only if buckets changed.

        ``write``: this access writes through the prims' columns (providers with read-only zero-copy columns then
        expose writable staging columns, see ``FabricSelection.prepare_for_write``).
        """
        fabric = self._fabric
        if not fabric.is_alive():
            raise RuntimeError(f"{self!r}: its stage was released; create the view again on a live stage")
        _DEFERRED_TAGS.flush(fabric)
        self._refresh_one(self._sel, self.count, "prims", (self._tag, WORLD_MATRIX, LOCAL_MATRIX), write)
        if parents and self._parent_paths:
            attrs = (self._parent_tag, WORLD_MATRIX, LOCAL_MATRIX)
            self._refresh_one(self._parent_sel, len(self._parent_paths), "parents", attrs)

    def _refresh_one(
        self, sel: FabricSelection, expected: int, what: str, attrs: tuple[str, ...], write: bool = False
    ) -> None:
        prepare_for_write = getattr(sel, "prepare_for_write", None) if write else None
        changed = prepare_for_write() if prepare_for_write is not None else sel.prepare_for_reuse()
        if sel.count != expected:
            sel.release()
            lost = self._untagged(self.prim_paths if what == "prims" else self._parent_paths, attrs[0])
            reason = getattr(self._fabric, "lost_reason", lambda _path: None)
            named = [f"{path!r} ({reason(path) or 'removed, deactivated, re-parented or no longer xformable'})"
                     for path in lost]  # fmt: skip
            raise RuntimeError(
                f"{self!r}: Fabric now holds {sel.count} of its {expected} tagged {what}; lost since the view was "
                f"created: {', '.join(named) or 'unknown prims'}; recreate the view"
            )
        prefix = "" if what == "prims" else "parent:"
        if changed or prefix + attrs[0] not in self._arrays:
            for name in attrs:
                self._arrays[prefix + name] = wp.fabricarray(sel, name)
            self._launches.clear()

    def _untagged(self, paths: Sequence[str], tag: str, limit: int = 3) -> list[str]:
        """Up to ``limit`` of ``paths`` that no longer carry ``tag`` (error path only: one lookup per prim)."""
        lost = []
        for path in paths:
            try:
                tagged = tag in self._fabric.attribute_names(path)
            except Exception:  # a prim gone from Fabric: any provider error means "not tagged"
                tagged = False
            if not tagged:
                lost.append(path)
                if len(lost) == limit:
                    break
        return lost

    def _release_selections(self) -> None:
        self._sel.release()
        self._parent_sel.release()

    def _launch_recorded(self, key: str, kernel: Any, dim: int, inputs: list, outputs: list) -> None:
        """Full-view launches are recorded once per fabric-array rebuild and replayed (cheaper than ``wp.launch``).

        On CUDA, once the same recorded launch has been replayed with unchanged buckets, it is captured into a CUDA
        graph and the graph is replayed from then on (the cheapest launch Warp offers); a bucket change drops both.
        Outputs are per thread, so the key includes their addresses, and the entry holds the output arrays: a recorded
        launch keeps raw pointers, which must not outlive (or be reused by) another allocation.
        """
        key = (key, *(out.ptr for out in outputs))
        entry = self._launches.get(key)
        if entry is None:
            cmd = wp.launch(kernel, dim=dim, inputs=inputs, outputs=outputs, device=self._device, record_cmd=True,
                            block_dim=block_dim_for(self._device))  # fmt: skip
            self._launches[key] = entry = [cmd, 0, None, outputs]
        cmd, replays, graph, _ = entry
        if self._errors.is_capturing():  # inside the caller's graph capture: the launch itself is captured
            cmd.launch()
            return
        if graph is not None:
            wp.capture_launch(graph)
            return
        if self._device.is_cuda and replays >= 1 and self._own_capture_stream() is not None:
            # capture on the view's own (non-blocking) stream: work other threads put on the device meanwhile is
            # neither captured nor disturbed; the graph is replayed on the caller's current stream
            with wp.ScopedCapture(device=self._device, stream=self._capture_stream, force_module_load=False) as capture:
                cmd.launch(stream=self._capture_stream)
            entry[2] = capture.graph
            wp.capture_launch(capture.graph)
            return
        entry[1] = replays + 1
        cmd.launch()

    def _launch_cmd(self, key: Any, kernel: Any, dim: Any, params: list, stream: wp.Stream | None = None) -> None:
        """Launch ``kernel(*params)`` through a :class:`RecordedLaunch` kept under ``key`` (dropped with the fabric
        arrays on a bucket change)."""
        recorded = self._launches.get(key)
        if recorded is None:
            recorded = self._launches[key] = RecordedLaunch(kernel, dim, params, self._device,
                                                            block_dim_for(self._device))  # fmt: skip
        recorded.launch(dim, params, stream)

    # ---------------------------------------------------------------- reads

    def _read_poses(
        self, attr: str, rows: Rows, pos_out: wp.array, quat_out: wp.array, offset: wp.quatf = _NO_OFFSET
    ) -> None:
        with self._fabric.lock:
            try:
                self._refresh(parents=False)
                mats, tags = self._arrays[attr], self._arrays[self._tag]
                key = (attr, self._offset_key(offset))
                if rows.kind == ALL:
                    self._launch_recorded(f"poses:{key}", _scatter_poses, self.count,
                                          [tags, mats, self._no_mask, 0, offset], [pos_out, quat_out])  # fmt: skip
                elif rows.kind == MASK:
                    self._launch_cmd(("masked", key), _scatter_poses, self.count,
                                     [tags, mats, rows.mask, 1, offset, pos_out, quat_out])  # fmt: skip
                else:
                    where = (rows.count, _address(rows.indices), _address(pos_out), _address(quat_out))
                    self._run_steps(f"gather:{key}", where, lambda: [
                        ("invert", invert_tag_column, self.count, [tags, self._slots]),
                        (("gather", key), _gather_poses, rows.count, [mats, self._slots, self.count, offset,
                         rows.indices, pos_out, quat_out, self._errors.status]),
                    ])  # fmt: skip
            finally:
                self._release_selections()

    def _offset_key(self, offset: wp.quatf) -> Any:
        """A hashable key of a read's rotation offset (None for none); read once per offset object."""
        if offset is _NO_OFFSET:
            return None
        cached = self._offset_keys.get(id(offset))
        if cached is None or cached[0] is not offset:
            cached = self._offset_keys[id(offset)] = (offset, tuple(offset))  # holds offset: its id stays its own
        return cached[1]

    def _read_scales(self, attr: str, rows: Rows, scale_out: wp.array) -> None:
        with self._fabric.lock:
            try:
                self._refresh(parents=False)
                mats, tags = self._arrays[attr], self._arrays[self._tag]
                if rows.kind == ALL:
                    self._launch_recorded(f"scales:{attr}", _scatter_scales, self.count,
                                          [tags, mats, self._no_mask, 0], [scale_out])  # fmt: skip
                elif rows.kind == MASK:
                    self._launch_cmd(("scales_masked", attr), _scatter_scales, self.count,
                                     [tags, mats, rows.mask, 1, scale_out])  # fmt: skip
                else:
                    where = (rows.count, _address(rows.indices), _address(scale_out))
                    self._run_steps(f"gather_scales:{attr}", where, lambda: [
                        ("invert", invert_tag_column, self.count, [tags, self._slots]),
                        (("gather_scales", attr), _gather_scales, rows.count, [mats, self._slots, self.count,
                         rows.indices, scale_out, self._errors.status]),
                    ])  # fmt: skip
            finally:
                self._release_selections()

    def _read_world_poses(self, rows: Rows, pos_out: wp.array, quat_out: wp.array) -> None:
        self._read_poses(WORLD_MATRIX, rows, pos_out, quat_out)

    def _read_local_poses(self, rows: Rows, pos_out: wp.array, quat_out: wp.array) -> None:
        self._read_poses(LOCAL_MATRIX, rows, pos_out, quat_out)

    def _read_world_scales(self, rows: Rows, scale_out: wp.array) -> None:
        self._read_scales(WORLD_MATRIX, rows, scale_out)

    def _read_local_scales(self, rows: Rows, scale_out: wp.array) -> None:
        self._read_scales(LOCAL_MATRIX, rows, scale_out)

    def _read_world_poses_rotated(self, rows: Rows, pos_out: wp.array, quat_out: wp.array, offset: wp.quatf) -> None:
        """World poses with each orientation right-multiplied by ``offset`` in the same launch (camera frames)."""
        self._read_poses(WORLD_MATRIX, rows, pos_out, quat_out, offset)

    # ---------------------------------------------------------------- writes

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
                    plan.refresh()  # host work only when the model's prims or buckets changed
                key = (rows.kind, rows.count, in_world, _address(rows.indices), _address(rows.mask), _address(pos),
                       _address(quat), _address(scale), plan.stamp if plan is not None else None)  # fmt: skip
                written = self._head(self._written, rows.count)
                self._run_steps("write", key, lambda: self._write_steps(rows, in_world, pos, quat, scale, written))
                if plan is None:  # providers that update the hierarchy on the host: settle, then hand the slots over
                    call = "set_local_scales" if scale is not None else ("set_world" if in_world else "set_local")
                    self._errors.settle(self._status_error(call, rows), now=True)
                    slots = to_numpy(written)
                    slots = slots[slots >= 0]
                    if slots.size:
                        self._fabric.propagate_world(self._sel, wp.array(slots, dtype=wp.int32, device=self._device))
            finally:
                self._release_selections()

    def _write_steps(
        self,
        rows: Rows,
        in_world: bool,
        pos: wp.array | None,
        quat: wp.array | None,
        scale: wp.array | None,
        written: wp.array,
    ) -> list[tuple]:
        """The launches of a write: stage (slot tables, request rows), [stage indices,] solve, commit + follow."""
        status, count, n_parents = self._errors.status, self.count, len(self._parent_paths)
        indexed = rows.kind == INDEXED
        indices = rows.indices if indexed else self._no_index
        mode = STAGE_INDICES if indexed else (STAGE_MASK if rows.kind == MASK else STAGE_ALL)
        req_row = self._req_all if rows.kind == ALL else self._req_row
        tags = self._arrays[self._tag]
        parent = "parent:" if n_parents else ""
        parent_tags = self._arrays["parent:" + self._parent_tag] if n_parents else tags
        view_world, view_local = self._arrays[WORLD_MATRIX], self._arrays[LOCAL_MATRIX]
        steps: list[tuple] = [("stage", _stage_write, max(count, n_parents), [
            tags, parent_tags, count, n_parents, int(mode), rows.mask if rows.kind == MASK else self._no_mask,
            self._slots, self._parent_slots, self._req_row,
        ])]  # fmt: skip
        stage_in_solve = indexed and not self._nested
        if indexed and not stage_in_solve:
            steps.append(("stage_indices", _stage_indices, rows.count, [indices, count, self._req_row, status]))
        steps.append(("solve", _solve_writes, rows.count, [
            view_local, self._slots, self._arrays[parent + WORLD_MATRIX], self._arrays[parent + LOCAL_MATRIX],
            self._parent_slots, self._node_parent, count, indices, int(indexed), int(stage_in_solve), req_row,
            int(in_world), int(pos is not None), self._no_vec3 if pos is None else pos,
            int(quat is not None), self._no_quat if quat is None else quat,
            int(scale is not None), self._no_vec3 if scale is None else scale,
            self._new_local, self._new_world, status,
        ]))  # fmt: skip
        plan = self._follow
        if plan is not None and plan.width > 0:
            local_all, world_all = plan.columns()
            follow = [plan.start, plan.nodes, plan.node_slot, plan.node_parent, plan.node_top, 1, local_all]
            width = plan.width
        else:
            follow, world_all, width = [*(self._no_index,) * 5, 0, view_local], view_world, 1
        steps.append(("commit", _commit_follow, (rows.count, width), [
            self._new_local, self._new_world, self._slots, count, indices, int(indexed), req_row, status, *follow,
            view_local, view_world, world_all, written,
        ]))  # fmt: skip
        return steps

    def _run_steps(self, name: str, key: tuple, build: Callable[[], list[tuple]]) -> None:
        """Run a call's launches (``build()`` makes them), then (CUDA) copy the status word to pinned memory for the
        next call to look at.

        On CUDA, a call whose ``key`` (what the caller passes: row kind and count, argument addresses, flags) repeats
        the previous call's is captured once into a CUDA graph, then replayed as one launch without building its
        launches again: the reset loop passes the same buffers every time, only their contents change. Everything
        else a launch reads belongs to the view and is replaced only on a bucket change, which drops the graphs with
        the recorded launches.
        """
        if not self._device.is_cuda:
            self._launch_steps(build())
            return
        if self._errors.is_capturing() or self._own_capture_stream() is None:
            self._launch_steps([*build(), ("publish",)])
            return
        cached = self._launches.get(("graph", name))
        if cached is None or cached[0] != key:
            self._launches[("graph", name)] = [key, None]
            self._launch_steps([*build(), ("publish",)])
            return
        if cached[1] is None:  # every operation names the capture stream: the device's current stream is not touched
            stream = self._capture_stream
            with wp.ScopedCapture(device=self._device, stream=stream, force_module_load=False) as capture:
                self._launch_steps([*build(), ("publish",)], stream)
            cached[1] = capture.graph
        wp.capture_launch(cached[1])

    def _own_capture_stream(self) -> wp.Stream | None:
        """The view's non-blocking capture stream (made on first use), or None where none can be made."""
        if self._capture_stream is None and not self._no_capture_stream:
            self._capture_stream = capture_stream(self._device)
            self._no_capture_stream = self._capture_stream is None
        return self._capture_stream

    def _launch_steps(self, steps: list[tuple], stream: wp.Stream | None = None) -> None:
        for step in steps:
            if step[0] == "publish":
                self._errors.publish(stream)
            else:
                self._launch_cmd(*step, stream=stream)

    def _write_world_poses(self, rows: Rows, pos: wp.array | None, quat: wp.array | None) -> None:
        self._write(rows, in_world=True, pos=pos, quat=quat)

    def _write_local_poses(self, rows: Rows, pos: wp.array | None, quat: wp.array | None) -> None:
        self._write(rows, in_world=False, pos=pos, quat=quat)

    def _write_local_scales(self, rows: Rows, scales: wp.array) -> None:
        self._write(rows, in_world=False, scale=scales)

    # ---------------------------------------------------------------- visibility (host path, see frameview.visibility)

    def _read_visibility(self, rows: np.ndarray | None) -> np.ndarray:
        with self._fabric.lock:
            paths = self._live_visibility_paths(rows)
            return np.asarray(self._fabric.visibility(paths), dtype=bool)

    def _write_visibility(self, rows: np.ndarray | None, visible: np.ndarray) -> None:
        with self._fabric.lock:
            self._fabric.set_visibility(self._live_visibility_paths(rows), visible)

    def _live_visibility_paths(self, rows: np.ndarray | None) -> list[str]:
        """The paths of view prims ``rows``; ``RuntimeError`` (recreate the view) when the stage or a prim is gone."""
        if not self._fabric.is_alive():
            raise RuntimeError(f"{self!r}: its stage was released; create the view again on a live stage")
        paths = self._visibility_paths(rows)
        missing = self._fabric.missing_prims(paths)
        if missing:
            reason = getattr(self._fabric, "lost_reason", lambda _path: None)
            named = ", ".join(f"{p!r} ({reason(p) or 'no longer in Fabric'})" for p in missing[:3])
            raise RuntimeError(f"{self!r}: {len(missing)} of its prims left Fabric since it was created: {named}; "
                               "recreate the view")  # fmt: skip
        return paths

    # ---------------------------------------------------------------- lifecycle

    def _release(self) -> None:
        """Remove both tags from every tagged prim, in one batch each."""
        self._launches.clear()
        self._arrays.clear()
        if self._capture_stream is not None:
            wp.synchronize_stream(self._capture_stream)
            destroy_stream(self._capture_stream)
            self._capture_stream = None
        fabric = self._fabric
        if not fabric.is_alive():
            return
        with fabric.lock:
            _DEFERRED_TAGS.flush(fabric)
            fabric.remove_attribute(self.prim_paths, self._tag)
            if self._parent_paths:
                fabric.remove_attribute(self._parent_paths, self._parent_tag)

    def __del__(self, _sys: Any = sys) -> None:
        # Shutdown-safe: nothing runs during interpreter finalisation (Fabric dies with the process anyway).
        if _sys.is_finalizing() or self._state is not _Lifecycle.OPEN:
            return
        try:
            lock = self._fabric.lock
            is_owned = getattr(lock, "_is_owned", None)
            if (is_owned is not None and is_owned()) or not lock.acquire(blocking=False):
                # Collected in the middle of an access (GC runs wherever an allocation triggers it): removing tags
                # now would move bucket columns under that access. The stage's next access removes them.
                logger.warning(
                    "%r was garbage-collected without close() during another access to its stage: its Fabric tags "
                    "go at the stage's next access; call close() or use 'with' to release them deterministically",
                    self,
                )
                self._state = _Lifecycle.CLOSED
                _DEFERRED_TAGS.defer(self._fabric, self.prim_paths, self._tag, self._parent_paths, self._parent_tag)
                return
            lock.release()
            logger.warning(
                "%r was garbage-collected without close(): removing its Fabric tags now; call close() or use "
                "'with' to release them deterministically",
                self,
            )
            self.close()
        except Exception:
            logger.debug("cleanup of a dropped FabricFrameView failed", exc_info=True)

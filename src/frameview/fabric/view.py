# SPDX-License-Identifier: Apache-2.0
"""FabricFrameView: poses read and written in Fabric, through selections scoped to the view by a private tag.

Every managed prim carries ``frameview:<uid>:index`` (its view index) and every unique parent
``frameview:<uid>:parentIndex``; selections require the tag, so their size is the view's, not the stage's. On each
access the view->slot table is rebuilt from live Fabric data by inverting the tag column in one Warp launch: there
is no cache to invalidate, and a count mismatch raises instead of reading another prim.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import sys
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np
import warp as wp

from ..base import BaseFrameView
from ..kernels.slots import invert_tag_column
from ..kernels.transforms import (
    decompose_matrix,
    is_singular,
    local_from_world_pose,
    local_to_world,
    replace_components,
)
from .providers import _is_pxr_stage, open_fabric_stage
from .stage import LOCAL_MATRIX, WORLD_MATRIX, FabricSelection

__all__ = ["FabricFrameView"]

logger = logging.getLogger(__name__)

_UIDS = itertools.count()
"""Process-wide, monotonic: a dead view's tag name can never satisfy a live view's selection."""

_DEFERRED: list[tuple[Any, tuple[str, ...], str, list[str], str]] = []
"""(stage ref, prim paths, tag, parent paths, parent tag) of views collected while their stage's lock was held."""


def _remove_deferred_tags(fabric: Any) -> None:
    """Remove the tags of views collected in the middle of an access to ``fabric`` (caller holds its lock, and is
    not inside an access: no selection of this stage is in use)."""
    for entry in list(_DEFERRED):
        target = entry[0]()
        if target is not None and target is not fabric:
            continue
        with contextlib.suppress(ValueError):
            _DEFERRED.remove(entry)
        if target is not None and fabric.is_alive():
            _ref, paths, tag, parent_paths, parent_tag = entry
            fabric.remove_attribute(paths, tag)
            if parent_paths:
                fabric.remove_attribute(parent_paths, parent_tag)


_IDENTITY = wp.constant(wp.mat44d(np.eye(4)))


@wp.func
def _parent_world(
    parent_world: wp.fabricarray(dtype=wp.mat44d),
    parent_slots: wp.array(dtype=wp.int32),
    parent_index: wp.array(dtype=wp.int32),
    i: int,
):
    p = parent_index[i]
    if p < 0:
        return _IDENTITY
    return parent_world[parent_slots[p]]


@wp.kernel
def _scatter_poses(
    # inputs
    tags: wp.fabricarray(dtype=wp.uint32),
    mats: wp.fabricarray(dtype=wp.mat44d),
    # outputs
    pos_out: wp.array(dtype=wp.vec3f),
    quat_out: wp.array(dtype=wp.quatf),
):
    """Full read, no slot table needed: ``pos_out[tag[slot]], quat_out[tag[slot]] = decompose(mats[slot])``."""
    slot = wp.tid()
    i = int(tags[slot])
    t, q, _s = decompose_matrix(mats[slot])
    pos_out[i] = wp.vec3f(t)
    quat_out[i] = wp.quatf(q)


@wp.kernel
def _scatter_scales(
    # inputs
    tags: wp.fabricarray(dtype=wp.uint32),
    mats: wp.fabricarray(dtype=wp.mat44d),
    # outputs
    scale_out: wp.array(dtype=wp.vec3f),
):
    """Full read of scales: ``scale_out[tag[slot]] = scale(mats[slot])``."""
    slot = wp.tid()
    _t, _q, s = decompose_matrix(mats[slot])
    scale_out[int(tags[slot])] = wp.vec3f(s)


@wp.kernel
def _gather_poses(
    # inputs
    mats: wp.fabricarray(dtype=wp.mat44d),
    slots: wp.array(dtype=wp.int32),
    indices: wp.array(dtype=wp.int32),
    # outputs
    pos_out: wp.array(dtype=wp.vec3f),
    quat_out: wp.array(dtype=wp.quatf),
):
    """Indexed read: row ``k`` is view prim ``indices[k]``."""
    k = wp.tid()
    t, q, _s = decompose_matrix(mats[slots[indices[k]]])
    pos_out[k] = wp.vec3f(t)
    quat_out[k] = wp.quatf(q)


@wp.kernel
def _gather_scales(
    # inputs
    mats: wp.fabricarray(dtype=wp.mat44d),
    slots: wp.array(dtype=wp.int32),
    indices: wp.array(dtype=wp.int32),
    # outputs
    scale_out: wp.array(dtype=wp.vec3f),
):
    """Indexed read of scales."""
    k = wp.tid()
    _t, _q, s = decompose_matrix(mats[slots[indices[k]]])
    scale_out[k] = wp.vec3f(s)


@wp.kernel
def _write_transforms(
    # inputs
    parent_world: wp.fabricarray(dtype=wp.mat44d),
    slots: wp.array(dtype=wp.int32),
    parent_slots: wp.array(dtype=wp.int32),
    parent_index: wp.array(dtype=wp.int32),
    indices: wp.array(dtype=wp.int32),
    use_indices: int,
    in_world: int,
    set_pos: int,
    pos: wp.array(dtype=wp.vec3f),
    set_quat: int,
    quat: wp.array(dtype=wp.quatf),
    set_scale: int,
    scale: wp.array(dtype=wp.vec3f),
    # outputs
    world_out: wp.fabricarray(dtype=wp.mat44d),
    local_out: wp.fabricarray(dtype=wp.mat44d),
    written_slots_out: wp.array(dtype=wp.int32),
):
    """Replace the given components in world (``in_world``) or local space; the local scale is kept, the local matrix
    is authoritative and the world matrix is derived from it."""
    k = wp.tid()
    i = k
    if use_indices != 0:
        i = indices[k]
    s = slots[i]
    pw = _parent_world(parent_world, parent_slots, parent_index, i)
    m = local_out[s]
    if in_world != 0:
        tw, qw, _sw = decompose_matrix(world_out[s])
        _tl, _ql, sl = decompose_matrix(m)
        if set_pos != 0:
            tw = wp.vec3d(pos[k])
        if set_quat != 0:
            qw = wp.quatd(quat[k])
        m = local_from_world_pose(tw, qw, sl, pw)
    else:
        t = wp.vec3f()
        q = wp.quatf()
        sc = wp.vec3f()
        if set_pos != 0:
            t = pos[k]
        if set_quat != 0:
            q = quat[k]
        if set_scale != 0:
            sc = scale[k]
        m = replace_components(m, set_pos, t, set_quat, q, set_scale, sc)
    local_out[s] = m
    world_out[s] = local_to_world(m, pw)
    written_slots_out[k] = s


@wp.kernel
def _find_singular_parents(
    # inputs
    parent_world: wp.fabricarray(dtype=wp.mat44d),
    parent_slots: wp.array(dtype=wp.int32),
    parent_index: wp.array(dtype=wp.int32),
    indices: wp.array(dtype=wp.int32),
    use_indices: int,
    # outputs
    first_bad_out: wp.array(dtype=wp.int32),
):
    """Record the smallest row whose parent world matrix cannot be inverted (a zero scale): no world pose is reachable
    under it (the same test as the USD backend)."""
    k = wp.tid()
    i = k
    if use_indices != 0:
        i = indices[k]
    if is_singular(_parent_world(parent_world, parent_slots, parent_index, i)):
        wp.atomic_min(first_bad_out, 0, k)


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

    def __init__(
        self,
        prim_path: str | Sequence[str],
        *,
        stage: Any,
        device: str = "cpu",
        fabric_provider: str = "auto",
    ) -> None:
        from ..paths import resolve_prim_paths

        self._closed = True  # until fully built: __del__ must not try to clean up
        fabric = open_fabric_stage(stage, device, fabric_provider)
        self._lock = fabric.lock  # BaseFrameView runs every public call under it: one lock per stage, no ordering
        with fabric.lock:
            _remove_deferred_tags(fabric)
            paths = resolve_prim_paths(prim_path, stage if _is_pxr_stage(stage) else fabric)
            super().__init__(prim_path, paths, device=device)
            self._closed = True
            if str(wp.get_device(fabric.device)) != self.device:
                raise ValueError(f"device: the Fabric stage lives on {fabric.device!r}, the view asks for {device!r}")
            missing = fabric.missing_prims(self.prim_paths)
            if missing:
                raise ValueError(
                    f"prim_path {prim_path!r}: {len(missing)} prim(s) carry no Fabric world/local matrices "
                    f"(not xformable, inactive or not in Fabric), e.g. {missing[:3]}"
                )
            parents = fabric.xform_parents(self.prim_paths)
            unique: dict[str, int] = {}
            parent_index = np.array(
                [-1 if p is None else unique.setdefault(p, len(unique)) for p in parents], dtype=np.int32
            )
            self._fabric = fabric
            self._uid = next(_UIDS)
            self._tag = f"frameview:{self._uid}:index"
            self._parent_tag = f"frameview:{self._uid}:parentIndex"
            self._parent_paths = tuple(unique)
            fabric.set_uint_attribute(self.prim_paths, self._tag, np.arange(self.count, dtype=np.uint32))
            self._closed = False  # tags are on the stage from here: close() must remove them
            if self._parent_paths:
                fabric.set_uint_attribute(
                    self._parent_paths, self._parent_tag, np.arange(len(self._parent_paths), dtype=np.uint32)
                )
            self._sel = fabric.select([self._tag, WORLD_MATRIX, LOCAL_MATRIX], write=True)
            self._parent_sel = fabric.select([self._parent_tag, WORLD_MATRIX], write=False)
        dev = self._device
        self._parent_index = wp.array(parent_index, dtype=wp.int32, device=dev)
        self._slots = wp.empty(max(self.count, 1), dtype=wp.int32, device=dev)
        self._parent_slots = wp.empty(max(len(self._parent_paths), 1), dtype=wp.int32, device=dev)
        self._written = wp.empty(max(self.count, 1), dtype=wp.int32, device=dev)
        self._no_vec3 = wp.empty(0, dtype=wp.vec3f, device=dev)
        self._no_quat = wp.empty(0, dtype=wp.quatf, device=dev)
        self._no_index = wp.empty(0, dtype=wp.int32, device=dev)
        self._arrays: dict[str, Any] = {}
        self._launches: dict[str, Any] = {}
        self._capture_stream: wp.Stream | None = None

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
        """Unique Fabric parents of the viewed prims (nearest ancestors carrying Fabric matrices)."""
        return self._parent_paths

    @property
    def fabric_stage(self) -> Any:
        """The provider object (a FabricStage) this view reads and writes."""
        return self._fabric

    # ---------------------------------------------------------------- access plumbing

    def _refresh(self, parents: bool, write: bool = False) -> None:
        """Bring the selections up to date, check their counts, rebuild fabric arrays only if buckets changed.

        ``write``: this access writes through the prims' columns (providers with read-only zero-copy columns then
        expose writable staging columns, see ``FabricSelection.prepare_for_write``).
        """
        fabric = self._fabric
        if not fabric.is_alive():
            raise RuntimeError(f"{self!r}: its stage was released; create the view again on a live stage")
        if _DEFERRED:
            _remove_deferred_tags(fabric)
        self._refresh_one(self._sel, self.count, "prims", (self._tag, WORLD_MATRIX, LOCAL_MATRIX), write)
        if parents and self._parent_paths:
            self._refresh_one(self._parent_sel, len(self._parent_paths), "parents", (self._parent_tag, WORLD_MATRIX))

    def _refresh_one(
        self, sel: FabricSelection, expected: int, what: str, attrs: tuple[str, ...], write: bool = False
    ) -> None:
        prepare_for_write = getattr(sel, "prepare_for_write", None) if write else None
        changed = prepare_for_write() if prepare_for_write is not None else sel.prepare_for_reuse()
        if sel.count != expected:
            sel.release()
            lost = self._untagged(self.prim_paths if what == "prims" else self._parent_paths, attrs[0])
            raise RuntimeError(
                f"{self!r}: Fabric now holds {sel.count} of its {expected} tagged {what}; lost: {lost} (removed, "
                f"deactivated, re-parented or no longer xformable since the view was created); recreate the view"
            )
        if changed or attrs[0] not in self._arrays:
            for name in attrs:
                key = name if name != WORLD_MATRIX or what == "prims" else "parent_world"
                self._arrays[key] = wp.fabricarray(sel, name)
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

    def _invert(self, parents: bool) -> None:
        """One (recorded) launch per selection: ``slots[tag[slot]] = slot``."""
        self._launch_recorded("invert", invert_tag_column, self.count, [self._arrays[self._tag]], [self._slots])
        if parents and self._parent_paths:
            self._launch_recorded(
                "invert_parents",
                invert_tag_column,
                len(self._parent_paths),
                [self._arrays[self._parent_tag]],
                [self._parent_slots],
            )

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
            cmd = wp.launch(kernel, dim=dim, inputs=inputs, outputs=outputs, device=self._device, record_cmd=True)
            self._launches[key] = entry = [cmd, 0, None, outputs]
        cmd, replays, graph, _ = entry
        if graph is not None:
            wp.capture_launch(graph)
            return
        if self._device.is_cuda and replays >= 1:
            # capture on the view's own stream: work other threads put on the device's stream meanwhile is neither
            # captured nor invalidates the capture; the graph is replayed on the caller's current stream
            if self._capture_stream is None:
                self._capture_stream = wp.Stream(self._device)
            with wp.ScopedCapture(device=self._device, stream=self._capture_stream, force_module_load=False) as capture:
                cmd.launch(stream=self._capture_stream)
            entry[2] = capture.graph
            wp.capture_launch(capture.graph)
            return
        entry[1] = replays + 1
        cmd.launch()

    def _launch_indexed(self, key: str, kernel: Any, fixed: list, indices: wp.array, outputs: list) -> None:
        """Launch an indexed kernel ``kernel(*fixed, indices, *outputs)`` with ``dim = len(indices)`` through a recorded
        command: only the indices, the outputs and the dimension are re-packed per call (``wp.launch`` looks the kernel
        up on every call, most of this path's host time). Dropped with the fabric arrays on a bucket change."""
        key = (key, *(out.ptr for out in outputs))
        entry = self._launches.get(key)
        if entry is None:
            cmd = wp.launch(kernel, dim=indices.shape[0], inputs=[*fixed, indices], outputs=outputs,
                            device=self._device, record_cmd=True)  # fmt: skip
            self._launches[key] = [cmd, 0, None, outputs]
        else:
            cmd = entry[0]
            first = len(fixed)
            cmd.set_param_at_index(first, indices)
            for k, out in enumerate(outputs):
                cmd.set_param_at_index(first + 1 + k, out)
            cmd.set_dim(indices.shape[0])
        cmd.launch()

    # ---------------------------------------------------------------- reads

    def _read_poses(self, attr: str, indices: wp.array | None, pos_out: wp.array, quat_out: wp.array) -> None:
        with self._fabric.lock:
            try:
                self._refresh(parents=False)
                mats = self._arrays[attr]
                if indices is None:
                    self._launch_recorded(
                        f"poses:{attr}",
                        _scatter_poses,
                        self.count,
                        [self._arrays[self._tag], mats],
                        [pos_out, quat_out],
                    )
                else:
                    self._invert(parents=False)
                    self._launch_indexed(
                        f"gather:{attr}", _gather_poses, [mats, self._slots], indices, [pos_out, quat_out]
                    )
            finally:
                self._release_selections()

    def _read_scales(self, attr: str, indices: wp.array | None, scale_out: wp.array) -> None:
        with self._fabric.lock:
            try:
                self._refresh(parents=False)
                mats = self._arrays[attr]
                if indices is None:
                    self._launch_recorded(
                        f"scales:{attr}",
                        _scatter_scales,
                        self.count,
                        [self._arrays[self._tag], mats],
                        [scale_out],
                    )
                else:
                    self._invert(parents=False)
                    self._launch_indexed(
                        f"gather_scales:{attr}", _gather_scales, [mats, self._slots], indices, [scale_out]
                    )
            finally:
                self._release_selections()

    def _read_world_poses(self, indices: wp.array | None, pos_out: wp.array, quat_out: wp.array) -> None:
        self._read_poses(WORLD_MATRIX, indices, pos_out, quat_out)

    def _read_local_poses(self, indices: wp.array | None, pos_out: wp.array, quat_out: wp.array) -> None:
        self._read_poses(LOCAL_MATRIX, indices, pos_out, quat_out)

    def _read_world_scales(self, indices: wp.array | None, scale_out: wp.array) -> None:
        self._read_scales(WORLD_MATRIX, indices, scale_out)

    def _read_local_scales(self, indices: wp.array | None, scale_out: wp.array) -> None:
        self._read_scales(LOCAL_MATRIX, indices, scale_out)

    # ---------------------------------------------------------------- writes

    def _write(
        self,
        indices: wp.array | None,
        *,
        in_world: bool,
        pos: wp.array | None = None,
        quat: wp.array | None = None,
        scale: wp.array | None = None,
    ) -> None:
        rows = self.count if indices is None else indices.shape[0]
        with self._fabric.lock:
            try:
                self._refresh(parents=True, write=True)
                self._invert(parents=True)
                parent_world = self._arrays.get("parent_world") if self._parent_paths else self._arrays[WORLD_MATRIX]
                if in_world:  # before any row is written: a singular parent rejects the whole write
                    idx, use = (self._no_index, 0) if indices is None else (indices, 1)
                    self._first_bad.fill_(rows)
                    inputs = [parent_world, self._parent_slots, self._parent_index, idx, use]
                    out = [self._first_bad]
                    wp.launch(_find_singular_parents, dim=rows, inputs=inputs, outputs=out, device=self._device)
                    bad = int(self._first_bad.numpy()[0])
                    if bad < rows:
                        prim = self.prim_paths[bad if indices is None else int(indices.numpy()[bad])]
                        raise ValueError(
                            f"prim {prim!r}: its parent's world matrix is singular (e.g. a zero scale), so no world "
                            "pose can be written under it; write its local pose instead; nothing was written"
                        )
                written = self._written[:rows]
                wp.launch(
                    _write_transforms,
                    dim=rows,
                    inputs=[
                        parent_world,
                        self._slots,
                        self._parent_slots,
                        self._parent_index,
                        self._no_index if indices is None else indices,
                        0 if indices is None else 1,
                        1 if in_world else 0,
                        0 if pos is None else 1,
                        self._no_vec3 if pos is None else pos,
                        0 if quat is None else 1,
                        self._no_quat if quat is None else quat,
                        0 if scale is None else 1,
                        self._no_vec3 if scale is None else scale,
                    ],
                    outputs=[self._arrays[WORLD_MATRIX], self._arrays[LOCAL_MATRIX], written],
                    device=self._device,
                )
                self._fabric.propagate_world(self._sel, written)
            finally:
                self._release_selections()

    def _write_world_poses(self, indices: wp.array | None, pos: wp.array | None, quat: wp.array | None) -> None:
        self._write(indices, in_world=True, pos=pos, quat=quat)

    def _write_local_poses(self, indices: wp.array | None, pos: wp.array | None, quat: wp.array | None) -> None:
        self._write(indices, in_world=False, pos=pos, quat=quat)

    def _write_local_scales(self, indices: wp.array | None, scales: wp.array) -> None:
        self._write(indices, in_world=False, scale=scales)

    # ---------------------------------------------------------------- lifecycle

    def _release(self) -> None:
        """Remove both tags from every tagged prim, in one batch each."""
        self._launches.clear()
        self._arrays.clear()
        fabric = self._fabric
        if not fabric.is_alive():
            return
        with fabric.lock:
            _remove_deferred_tags(fabric)
            fabric.remove_attribute(self.prim_paths, self._tag)
            if self._parent_paths:
                fabric.remove_attribute(self._parent_paths, self._parent_tag)

    def __del__(self, _sys: Any = sys) -> None:
        # Shutdown-safe: nothing runs during interpreter finalisation (Fabric dies with the process anyway).
        if _sys.is_finalizing() or getattr(self, "_closed", True):
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
                self._closed = True
                try:
                    ref = weakref.ref(self._fabric)
                except TypeError:
                    ref = (lambda f: lambda: f)(self._fabric)
                _DEFERRED.append((ref, self.prim_paths, self._tag, self._parent_paths, self._parent_tag))
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

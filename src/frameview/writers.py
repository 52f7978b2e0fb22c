# SPDX-License-Identifier: Apache-2.0
"""Writer scopes (Isaac Lab 3's ``xform_world_space_writer`` / ``xform_local_space_writer``), world scales and the
``get_scales`` / ``set_scales`` aliases, shared by every backend through :class:`WriterScopesMixin`.

A writer scope batches the writes of one space::

    with view.xform_world_space_writer() as w:
        w.set_poses(positions=p, orientations=q, indices=env_ids)
        w.set_scales(s, indices=env_ids)
    # one solve of both writes: local matrices, world matrices and descendants derived once

Each write is validated when it is made (shapes, dtypes, indices, non-finite values raise at once, as for the view's
setters) and its data copied, then held; writes to the same rows are combined into one backend write, which runs
when the scope flushes: on exit, before a writer getter, and before a write to other rows. See
:class:`XformSpaceWriter` for what is combined and what goes through at once.

This module holds :class:`WriterScopesMixin` (the view's side: opening scopes, staging and applying writes, world
scales, the aliases); the scope classes live in :mod:`frameview.writer_scopes` and are re-exported here.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import warp as wp

from ._rows import ALL, MASK, Rows
from .arguments import check_host_rows
from .host import to_numpy
from .writer_scopes import PendingWrite, XformLocalSpaceWriter, XformSpaceWriter, XformWorldSpaceWriter

if TYPE_CHECKING:
    from .base import BaseFrameView

__all__ = ["WriterScopesMixin", "XformLocalSpaceWriter", "XformSpaceWriter", "XformWorldSpaceWriter"]


def _host_copy(value: Any) -> np.ndarray | None:
    """``value`` (indices or a mask) as NumPy when it lives on the host, ``None`` for device arrays."""
    if isinstance(value, wp.array):
        return value.numpy().copy() if value.device.is_cpu else None
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return value.detach().numpy().copy() if str(value.device) == "cpu" else None
    if isinstance(value, (np.ndarray, list, tuple, range)):
        return np.array(value)
    return None


class WriterScopesMixin:
    """Writer scopes, world scales and the scale aliases of :class:`~frameview.BaseFrameView` (every backend).

    Backends whose ``_write(rows, *, in_world, pos, quat, scale)`` solves all components at once (both built-in
    backends) get combined writes and world scales; others get their ``_write_*`` hooks called one after another
    (and no world scales).
    """

    _active_writer: XformSpaceWriter | None = None
    """The open writer scope of this view, if any."""

    # ---------------------------------------------------------------- public API

    def xform_world_space_writer(self) -> XformWorldSpaceWriter:
        """A world-space writer scope (Isaac Lab 3's name): ``set_poses`` / ``set_scales`` take world values.

        Example:
            >>> with view.xform_world_space_writer() as w:  # doctest: +SKIP
            ...     w.set_poses(positions=p, orientations=q, indices=env_ids)
            ...     w.set_scales(s, indices=env_ids)

        Raises:
            RuntimeError: On entering, when the view already has an open writer or is closed.
        """
        return XformWorldSpaceWriter(cast("BaseFrameView", self))

    def xform_local_space_writer(self) -> XformLocalSpaceWriter:
        """A local-space writer scope: ``set_poses`` / ``set_scales`` take values relative to each prim's parent.

        Example:
            >>> with view.xform_local_space_writer() as w:  # doctest: +SKIP
            ...     w.set_poses(positions=t, orientations=q)
            ...     w.set_scales(s)

        Raises:
            RuntimeError: On entering, when the view already has an open writer or is closed.
        """
        return XformLocalSpaceWriter(cast("BaseFrameView", self))

    def set_world_scales(self, scales: Any, indices: Any = None, mask: Any = None) -> None:
        """Set world scales (the axis lengths of the world matrices); rotations and translations are kept (the local
        ones: the world rotation is kept too under a similarity parent), children follow.

        The local scale is ``scales / parent_scale`` per axis, ``parent_scale`` the parent's world scale as
        :meth:`get_world_scales` reports it (a mirrored parent's sign on x). Exact under a parent whose world matrix is
        a similarity (uniform scale, mirrors included), whatever the prim's rotation. Under a non-uniformly scaled
        parent it is exact when the prim's local rotation maps each parent axis onto itself (e.g. none: Isaac Lab's
        ``local = world / parent``); otherwise the prim's world matrix has shear and no local scale gives it exactly
        these axis lengths.

        Args:
            scales: (M, 3) world scales.
            indices: View indices to write (M of them, each at most once), ``None`` for all.
            mask: Boolean (N,) selection instead of ``indices``: the data has N rows, masked rows are written.

        Raises:
            ValueError: As :meth:`set_world_poses`, and for a singular parent (no world scale reaches the prim).
        """
        view = cast("BaseFrameView", self)
        if scales is None:
            raise ValueError("scales: expected an (M, 3) array, got None")
        with view._lock:
            view._check_no_writer()
            staged = view._stage_write(indices, mask, ((scales, "scales", wp.vec3f),), scale_only=True)
            if staged is not None:
                view._apply_write("world", staged)

    def get_scales(self, indices: Any = None, mask: Any = None) -> wp.array:
        """Alias of :meth:`get_local_scales`, on every backend (Isaac Lab 3's ``get_scales`` reads world scales on
        its Fabric backend and local ones on USD; here it has one meaning)."""
        return cast("BaseFrameView", self).get_local_scales(indices, mask)

    def set_scales(self, scales: Any, indices: Any = None, mask: Any = None) -> None:
        """Alias of :meth:`set_local_scales`, on every backend (one meaning, unlike Isaac Lab 3's ``set_scales``)."""
        cast("BaseFrameView", self).set_local_scales(scales, indices, mask)

    # ---------------------------------------------------------------- internals

    def _check_no_writer(self) -> None:
        """Raise while a writer scope is open, unless the call is the writer's own (BaseFrameView's getters and
        setters call this)."""
        writer = self._active_writer
        if writer is not None and not writer._calling:
            raise RuntimeError(
                f"{self!r} has an open {type(writer).__name__}: its own pose and scale getters and setters are "
                "locked until the scope exits; inside it use the writer's get_poses / get_scales / set_poses / "
                "set_scales"
            )

    def _stage_write(
        self,
        indices: Any,
        mask: Any,
        values: tuple[tuple[Any, str, type], ...],
        scale_only: bool = False,
        now: bool = False,
    ) -> PendingWrite | None:
        """Validate a write as the view's setters do; ``None`` when it writes nothing. ``values``: (positions,
        orientations[, scales]) or, with ``scale_only``, (scales,). ``now`` (writer scopes): on the CPU, also check
        device indices and data here, on the host (they are host memory there), so that the call raises and the
        write counts as checked."""
        view = cast("BaseFrameView", self)
        view._check_open()
        args = view._args
        with args.host_inputs():  # host inputs reach a CUDA device in one copy
            rows, pairs = args.write_values(args.prepare(indices, mask, write=True), values)
        arrays = [array for array, _host in pairs]
        if rows.count == 0 or all(a is None for a in arrays):
            return None
        if scale_only:
            arrays = [None, None, arrays[0]]
        arrays += [None] * (3 - len(arrays))
        # checked at the call: host inputs, and everything a host-bound backend takes (it checks device data at once)
        from_host = (rows.checked and all(host for _array, host in pairs)) or not view._device_rows
        if now and not from_host and view._device.is_cpu:
            rows = self._check_on_host(rows, arrays, [name for _value, name, _dtype in values], scale_only)
            from_host = True
        return PendingWrite(rows, arrays[0], arrays[1], arrays[2], from_host)

    def _check_on_host(self, rows: Rows, arrays: list, names: list[str], scale_only: bool) -> Rows:
        """CPU: check a write's device indices and data on the host (the checks the kernels would make, with the same
        messages as host inputs); return the rows marked checked."""
        view = cast("BaseFrameView", self)
        if not rows.checked:
            source = rows.source if rows.source is not None else rows.indices
            view._args.check_host_indices(view._args.indices_to_numpy(source).astype(np.int64), write=True)
            rows = dataclasses.replace(rows, checked=True)
        read = np.flatnonzero(to_numpy(rows.mask)) if rows.kind == MASK else None
        if scale_only:
            names = [names[0], names[0], names[0]]
        for array, name, quat in zip(arrays, names, (False, True, False), strict=False):
            if array is not None:
                check_host_rows(to_numpy(array).reshape(array.shape[0], -1), read, name, quat and not scale_only)
        return rows

    def _write_rows_key(self, rows: Rows, indices: Any, mask: Any) -> tuple | None:
        """The rows of a validated write as host data, or ``None`` when that would cost a host round trip."""
        view = cast("BaseFrameView", self)
        if rows.kind == ALL:
            return (ALL, None)
        if view._device.is_cpu or not view._device_rows:  # the rows are host data already (or were copied there)
            host = to_numpy(rows.mask) if rows.kind == MASK else to_numpy(rows.indices)
            return (rows.kind, host.copy())
        host = _host_copy(mask if mask is not None else indices)
        return None if host is None else (rows.kind, host)

    def _has_nested_prims(self) -> bool:
        """Whether a view prim is an ancestor of another one (computed once per view)."""
        nested = self.__dict__.get("_nested_prims")
        if nested is None:
            paths = set(cast("BaseFrameView", self).prim_paths)
            nested = False
            for path in paths:
                parent = path.rsplit("/", 1)[0]
                while parent and not nested:
                    nested = parent in paths
                    parent = parent.rsplit("/", 1)[0]
                if nested:
                    break
            self.__dict__["_nested_prims"] = nested
        return bool(nested)

    def _apply_write(self, space: str, write: PendingWrite) -> None:
        """Run one validated write through the backend and settle its errors."""
        view = cast("BaseFrameView", self)
        view._write_transform(write.rows, space == "world", write.pos, write.quat, write.scale)
        view._settle_rows(write.rows, write.call(space), now=write.from_host)

    def _write_transform(
        self, rows: Rows, in_world: bool, pos: wp.array | None, quat: wp.array | None, scale: wp.array | None
    ) -> None:
        """Write any of the three components in one space: the backend's combined ``_write`` when it has one."""
        view = cast("BaseFrameView", self)
        combined = getattr(view, "_write", None)
        if combined is not None:
            combined(rows, in_world=in_world, pos=pos, quat=quat, scale=scale)
            return
        if in_world and scale is not None:
            raise NotImplementedError(f"{type(view).__name__} cannot write world scales")
        if pos is not None or quat is not None:
            (view._write_world_poses if in_world else view._write_local_poses)(rows, pos, quat)
        if scale is not None:
            view._write_local_scales(rows, scale)

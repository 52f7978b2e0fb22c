# SPDX-License-Identifier: Apache-2.0
"""BaseFrameView: the contract every FrameView backend honours, and the parts every view owns: its row resolver
(:class:`~frameview._core.arguments.Arguments`, ``_args``) and the validation of held writes
(:class:`~frameview._core.write_stager.WriteStager`, ``_stager``)."""

from __future__ import annotations

import abc
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np
import warp as wp

from ._core.arguments import Arguments
from ._core.array_types import ArrayLike, BoolsLike, IndicesLike, MaskLike
from ._core.device_errors import DeviceErrors, status_error
from ._core.dispatch import POSE_BUFFERS, read_rows, synchronized, write_components
from ._core.quat_order import XYZW, check_quat_order, quat_order_part
from ._core.rows import Rows
from ._core.write_stager import PendingWrite, WriteStager
from .visibility import author_visibility, gather_visibility
from .writers import XformLocalSpaceWriter, XformSpaceWriter, XformWorldSpaceWriter, check_no_writer

_ViewT = TypeVar("_ViewT", bound="BaseFrameView")


class BaseFrameView(abc.ABC):
    """A fixed set of prims whose world and local poses are read and written in bulk.

    Every backend's view (:class:`~frameview.FabricFrameView`, :class:`~frameview.UsdFrameView`,
    :class:`~frameview.NewtonFrameView`) is one: every argument is validated once, at the boundary, here, so that every
    backend accepts and rejects exactly the same inputs.

    Arrays returned by getters are ``wp.array`` on :attr:`device`: positions and scales ``wp.vec3f`` of shape (M,),
    orientations ``wp.quatf`` of shape (M,), **xyzw** (with ``quat_order="wxyz"``: ``wp.vec4f`` holding w, x, y, z).
    ``.numpy()`` gives (M, 3) / (M, 4) and ``wp.to_torch`` a tensor of the same shape without a copy. The view owns
    these buffers and reuses them: the next call of the same getter from the same thread overwrites them (a
    ``wp.to_torch`` tensor of an output too), so clone what you keep.

    Rows: every getter and setter takes ``indices`` (M view indices; row ``k`` is prim ``indices[k]``) or ``mask``
    (a boolean (N,) array; data and outputs have N rows and only the masked rows are read or written), not both.
    Device inputs are checked on the device, without a host round trip; :meth:`check` says when their errors raise.

    Quaternion order: xyzw by default, for inputs and outputs. Code written for wxyz (Isaac Lab 2.x, pxr ``Gf``
    constructors) builds its views with ``quat_order="wxyz"`` (or ``FrameViewCfg.quat_order``): every orientation it
    passes (setters, writer scopes) is read as (w, x, y, z), and every orientation returned (getters, writer scopes,
    :class:`~frameview.CameraPoses`) is a ``wp.vec4f`` (M,) array holding (w, x, y, z). The reordering costs one small
    launch per call that carries orientations; the default order costs nothing.

    Threads: a view is meant to be used from one thread, the one that steps the simulation. Calls from other threads
    are safe, not parallel: every public method runs under the view's lock (the Fabric stage's lock for Fabric views,
    one process-wide lock for USD views), and each thread gets its own output buffers, so a returned array only
    ever changes on its own thread's next call and always holds one consistent state of the stage.

    Example:
        >>> with fv.UsdFrameView("/World/envs/env_.*/Camera", stage=stage) as view:  # doctest: +SKIP
        ...     pos, quat = view.get_world_poses()
    """

    _device_rows = False
    """Whether the backend takes device indices and masks as they are (kernels check them), or host indices."""
    _folds_narrow = False
    """Whether the backend's indexed launches narrow index arrays of other dtypes themselves (:attr:`Rows.narrow`)."""
    _active_writer: XformSpaceWriter | None = None
    """The open writer scope of this view, if any."""

    def __init__(
        self, prim_path: str | Sequence[str], prim_paths: Sequence[str], *, device: str, quat_order: str = XYZW
    ) -> None:
        """Keep the view's prims and build its parts (backends call this once they resolved their prims).

        Args:
            prim_path: What the caller asked for (kept for ``repr``).
            prim_paths: The prims of the view, in view order.
            device: Warp device of the returned arrays.
            quat_order: ``"xyzw"`` (the default) or ``"wxyz"``: the component order of every orientation the view
                takes and returns.

        Raises:
            ValueError: ``quat_order`` is neither ``"xyzw"`` nor ``"wxyz"``.
        """
        check_quat_order(quat_order)  # before anything is built
        self._pattern = prim_path if isinstance(prim_path, str) else list(prim_path)
        self._prim_paths = tuple(str(p) for p in prim_paths)
        self._device = wp.get_device(device)
        self._closed = False
        self._lock: Any = getattr(self, "_lock", None) or threading.RLock()  # a subclass may share a wider lock
        self._errors = DeviceErrors(self._device)
        self._args = Arguments(self.count, self._device, self._errors, device_rows=self._device_rows,
                               folds_narrow=self._folds_narrow, owner=weakref.ref(self))  # fmt: skip
        self._stager = WriteStager(self._args, self._device, self._device_rows, self._prim_paths)
        self._quat_order_part = quat_order_part(quat_order, self._device)
        self._args.quat_order = self._quat_order_part

    # ---------------------------------------------------------------- properties

    @property
    def count(self) -> int:
        """Number of prims in the view."""
        return len(self._prim_paths)

    @property
    def prim_paths(self) -> tuple[str, ...]:
        """Paths of the viewed prims, in view order."""
        return self._prim_paths

    @property
    def device(self) -> str:
        """Warp device of the returned arrays (``"cpu"`` or ``"cuda:N"``), fixed at construction."""
        return str(self._device)

    @property
    @abc.abstractmethod
    def backend(self) -> str:
        """Backend name, e.g. ``"usd"`` or ``"fabric:memory"``."""

    @property
    def quat_order(self) -> str:
        """The component order of the orientations the view takes and returns, ``"xyzw"`` (the default) or
        ``"wxyz"``, fixed at construction."""
        return XYZW if self._quat_order_part is None else self._quat_order_part.order

    @property
    def is_closed(self) -> bool:
        """True once :meth:`close` has been called."""
        return self._closed

    def __len__(self) -> int:
        return self.count

    def __repr__(self) -> str:
        state = ", closed" if self._closed else ""
        order = "" if getattr(self, "_quat_order_part", None) is None else f", quat_order={self.quat_order!r}"
        return f"{type(self).__name__}({self._pattern!r}, count={self.count}, backend={self.backend!r}{order}{state})"

    # ---------------------------------------------------------------- getters

    @synchronized
    def get_world_poses(self, indices: IndicesLike = None, mask: MaskLike = None) -> tuple[wp.array, wp.array]:
        """World poses of the prims.

        Args:
            indices: View indices to read, ``None`` for all.
            mask: Boolean (N,) selection instead of ``indices``: the outputs have N rows, only masked ones are filled.

        Returns:
            Positions, (M,) ``wp.vec3f``, world frame, stage units; orientations, (M,) ``wp.quatf``, **xyzw**, world
            frame (``quat_order="wxyz"``: (M,) ``wp.vec4f``, w, x, y, z). Buffers owned by the view, overwritten by the
            next call (clone what you keep).
        """
        return self._get_poses("world", indices, mask)

    @synchronized
    def get_local_poses(self, indices: IndicesLike = None, mask: MaskLike = None) -> tuple[wp.array, wp.array]:
        """Local poses (relative to the parent prim).

        Args:
            indices: View indices to read, ``None`` for all.
            mask: Boolean (N,) selection instead of ``indices`` (N-row outputs, masked rows filled).

        Returns:
            Translations, (M,) ``wp.vec3f``, parent frame; orientations, (M,) ``wp.quatf``, **xyzw**, parent frame
            (``quat_order="wxyz"``: (M,) ``wp.vec4f``, w, x, y, z). Buffers owned by the view, overwritten by the next
            call (clone what you keep).
        """
        return self._get_poses("local", indices, mask)

    @synchronized
    def get_world_scales(self, indices: IndicesLike = None, mask: MaskLike = None) -> wp.array:
        """World scales: the lengths of the world matrix axes (assumes no shear; a mirror shows on x).

        Args:
            indices: View indices to read, ``None`` for all.
            mask: Boolean (N,) selection instead of ``indices`` (N-row output, masked rows filled).

        Returns:
            (M,) ``wp.vec3f``. Buffer owned by the view, overwritten by the next call.
        """
        return self._get_scales("world", indices, mask)

    @synchronized
    def get_local_scales(self, indices: IndicesLike = None, mask: MaskLike = None) -> wp.array:
        """Local scales: the lengths of the local matrix axes (assumes no shear; a mirror shows on x).

        Args:
            indices: View indices to read, ``None`` for all.
            mask: Boolean (N,) selection instead of ``indices`` (N-row output, masked rows filled).

        Returns:
            (M,) ``wp.vec3f``. Buffer owned by the view, overwritten by the next call.
        """
        return self._get_scales("local", indices, mask)

    def _prepare_read(self, indices: IndicesLike, mask: MaskLike) -> Rows:
        """The rows of a pose or scale read, once the view is open and no writer scope holds it."""
        check_no_writer(self)
        self._check_open()
        return self._args.prepare(indices, mask, fold=True)

    def _get_poses(
        self, space: str, indices: IndicesLike, mask: MaskLike, xyzw: bool = False
    ) -> tuple[wp.array, wp.array]:
        """A pose read in the view's quaternion order (``xyzw``: in xyzw whatever the order, for internal callers)."""
        rows = self._prepare_read(indices, mask)
        pos_name, quat_name, stem = POSE_BUFFERS[space]
        pos, quat = self._args.pose_outputs(pos_name, quat_name, rows.count)
        read = self._read_world_poses if space == "world" else self._read_local_poses
        if rows.count:
            read_rows(self, read, rows, stem, (pos, quat))
        if self._quat_order_part is not None and not xyzw:
            return pos, self._quat_order_part.outputs(quat, rows.mask)
        return pos, quat

    @synchronized
    def _get_world_poses_xyzw(self, indices: IndicesLike = None, mask: MaskLike = None) -> tuple[wp.array, wp.array]:
        """:meth:`get_world_poses` in xyzw whatever :attr:`quat_order` (:class:`~frameview.CameraPoses` converts
        them, then orders its own outputs)."""
        return self._get_poses("world", indices, mask, xyzw=True)

    def _ordered(self, quat: wp.array, mask: wp.array | None = None) -> wp.array:
        """xyzw orientations (a buffer of the view or of a helper such as CameraPoses) in the view's order: as they
        are, or reordered in place to wxyz (``wp.vec4f``; only the rows of ``mask`` when given)."""
        return quat if self._quat_order_part is None else self._quat_order_part.outputs(quat, mask)

    @synchronized
    def _get_world_poses_rotated(
        self, indices: IndicesLike, offset: wp.quatf, mask: MaskLike = None
    ) -> tuple[wp.array, wp.array] | None:
        """World poses with each orientation right-multiplied by ``offset`` (``w >= 0``) in the read launch itself
        (:class:`~frameview.CameraPoses` conventions), or None when the backend has no such read."""
        rotated = getattr(self, "_read_world_poses_rotated", None)
        if rotated is None:
            return None
        rows = self._prepare_read(indices, mask)
        pos, quat = self._args.pose_outputs("rotated_pos", "rotated_quat", rows.count)
        if rows.count:
            rotated(rows, pos, quat, offset)
            if not rows.checked:
                self._settle_rows(rows, "read")
        quat_order = self._quat_order_part
        return pos, (quat if quat_order is None else quat_order.outputs(quat, rows.mask))

    def _get_scales(self, space: str, indices: IndicesLike, mask: MaskLike) -> wp.array:
        rows = self._prepare_read(indices, mask)
        out = self._args.outputs(f"{space}_scale", wp.vec3f, rows.count)
        read = self._read_world_scales if space == "world" else self._read_local_scales
        if rows.count:
            read_rows(self, read, rows, f"{space}_scale", (out,))
        return out

    # ---------------------------------------------------------------- setters

    @synchronized
    def set_world_poses(
        self,
        positions: ArrayLike | None = None,
        orientations: ArrayLike | None = None,
        indices: IndicesLike = None,
        mask: MaskLike = None,
    ) -> None:
        """Set world poses; children follow, the prims' local scales are kept.

        ``orientations=None`` keeps each prim's local rotation and scale and solves its local translation only;
        ``positions=None`` keeps its local translation. Exact under any parent whose world matrix is a similarity
        (uniform scale, mirrors included); see :doc:`reliability` for non-uniformly scaled parents.

        Args:
            positions: (M, 3) world positions, or ``None`` to keep them.
            orientations: (M, 4) **xyzw** world orientations (wxyz with ``quat_order="wxyz"``; normalised here; a zero
                quaternion is rejected), or ``None`` to keep them.
            indices: View indices to write (M of them, each at most once), ``None`` for all.
            mask: Boolean (N,) selection instead of ``indices``: the data has N rows, masked rows are written.

        Errors in device inputs on CUDA are found by the kernels: they are raised by the view's next call or by
        :meth:`check` (:doc:`reliability`); everything else is raised by the call itself.

        Raises:
            TypeError: Data of another type or dtype than :data:`~frameview.ArrayLike` (integers included), indices
                that are not integers, a mask that is not boolean, or both ``indices`` and ``mask``.
            ValueError: Data of the wrong shape, a non-finite value, a zero quaternion, an index given twice, or a
                prim whose parent's world matrix is singular or whose local matrix has shear (the message names
                the argument, row or prim); nothing is written.
            IndexError: An index out of range.
            RuntimeError: The view is closed, a viewed prim left the stage, or a writer scope of the view is open.
        """
        values = (positions, "positions", wp.vec3f), (orientations, "orientations", wp.quatf)
        self._set(self._write_world_poses, "set_world", indices, mask, *values)

    @synchronized
    def set_local_poses(
        self,
        translations: ArrayLike | None = None,
        orientations: ArrayLike | None = None,
        indices: IndicesLike = None,
        mask: MaskLike = None,
    ) -> None:
        """Set local poses (relative to the parent); children follow, the prims' scales are kept.

        Args:
            translations: (M, 3) translations in the parent frame, or ``None`` to keep them.
            orientations: (M, 4) **xyzw** orientations in the parent frame (wxyz with ``quat_order="wxyz"``;
                normalised here), or ``None``.
            indices: View indices to write (M of them, each at most once), ``None`` for all.
            mask: Boolean (N,) selection instead of ``indices``: the data has N rows, masked rows are written.

        Raises:
            TypeError, ValueError, IndexError, RuntimeError: As :meth:`set_world_poses` (a local write needs no
                parent inverse: a singular parent is no error here).
        """
        values = (translations, "translations", wp.vec3f), (orientations, "orientations", wp.quatf)
        self._set(self._write_local_poses, "set_local", indices, mask, *values)

    @synchronized
    def set_local_scales(self, scales: ArrayLike, indices: IndicesLike = None, mask: MaskLike = None) -> None:
        """Set local scales; the prims' local translation and rotation are kept, children follow.

        Args:
            scales: (M, 3) per-axis scales.
            indices: View indices to write (M of them, each at most once), ``None`` for all.
            mask: Boolean (N,) selection instead of ``indices``: the data has N rows, masked rows are written.

        Raises:
            TypeError, ValueError, IndexError, RuntimeError: As :meth:`set_world_poses`; ``scales=None`` is a
                ``ValueError``.
        """
        if scales is None:
            raise ValueError("scales: expected an (M, 3) array, got None")
        self._set(self._write_local_scales, "set_local_scales", indices, mask, (scales, "scales", wp.vec3f))

    def _set(
        self, write: Callable, call: str, indices: IndicesLike, mask: MaskLike, *values: tuple[Any, str, type]
    ) -> None:
        """One setter's write: its rows and data checked and coerced, then the backend hook ``write(rows, *data)``."""
        check_no_writer(self)
        self._check_open()
        self._write_now(write, call, indices, mask, values)

    def _write_now(
        self,
        write: Callable,
        call: str,
        indices: IndicesLike,
        mask: MaskLike,
        values: tuple[tuple[Any, str, type], ...],
    ) -> bool | None:
        """A write made at its call (a setter's, or a writer scope's on a backend that writes scopes at each call):
        rows and data checked and coerced, ``write(rows, *data)``, errors settled. Returns whether its errors were
        raised at the call (host inputs), ``None`` when it wrote nothing."""
        args = self._args
        key, recent = args.recent_write(call, indices, mask, values)
        if recent is not None:  # device memory of a recent write's layout: its rows and arrays again
            rows, coerced, now = recent
            write(rows, *coerced)
            self._settle_rows(rows, call, now=now, data=(values, coerced))
            return now
        # host inputs reach a CUDA device as pinned memory the kernels read in place (free again once they ran)
        with args.host_inputs(in_place=True) as staging:
            direct = args.host_write(indices, mask, values)  # NumPy indices and float32 rows on CUDA
            if direct is not None:
                rows, coerced = direct
                pairs = [(array, True) for array in coerced]
            else:
                rows = args.prepare(indices, mask, write=True, fold=True)
                rows, pairs = args.write_values(rows, values, kernels_check=True)
                coerced = [array for array, _host in pairs]
            if rows.count == 0 or all(c is None for c in coerced):
                return None
            write(rows, *coerced)
            # host inputs raise at the call: all of them checked on the host, or host data left to the kernels' checks
            now = (rows.checked and all(host for _array, host in pairs)) or (
                self._device_rows and any(host and array is not None for array, host in pairs)
            )
            # (values, coerced): the data by argument name, paired only on the error path
            if self._settle_rows(rows, call, now=now, data=(values, coerced)) and staging is not None:
                staging.waited()
            args.remember_write(call, key, rows, pairs, now)
            return now

    def _apply_write(self, space: str, write: PendingWrite) -> None:
        """Run one validated write through the backend and settle its errors."""
        write_components(self, write.rows, space == "world", write.pos, write.quat, write.scale)
        self._settle_rows(write.rows, write.call(space), now=write.from_host)

    def _scope_writes_at_call(self) -> bool:
        """Whether a writer scope writes at each call (through :meth:`_write_now` and the backend's combined
        ``_write(rows, *, in_world, pos, quat, scale, keep)``), keeping a copy that it writes again at exit when
        :meth:`_stage_marks` changed meanwhile, instead of holding the writes until exit. False here."""
        return False

    def _stage_marks(self) -> Any:
        """What changes when something may have moved the prims' parents (see :meth:`_scope_writes_at_call`)."""
        return None

    # ---------------------------------------------------------------- writer scopes, world scales, scale aliases

    def xform_world_space_writer(self) -> XformWorldSpaceWriter:
        """A world-space writer scope (Isaac Lab 3's name): ``set_poses`` / ``set_scales`` take world values.

        Example:
            >>> with view.xform_world_space_writer() as w:  # doctest: +SKIP
            ...     w.set_poses(positions=p, orientations=q, indices=env_ids)
            ...     w.set_scales(s, indices=env_ids)

        Raises:
            RuntimeError: On entering, when the view already has an open writer or is closed.
        """
        return XformWorldSpaceWriter(self)

    def xform_local_space_writer(self) -> XformLocalSpaceWriter:
        """Like :meth:`xform_world_space_writer`, but ``set_poses`` / ``set_scales`` take parent-relative values."""
        return XformLocalSpaceWriter(self)

    def set_world_scales(self, scales: ArrayLike, indices: IndicesLike = None, mask: MaskLike = None) -> None:
        """Set world scales (the world matrices' axis lengths); local rotations and translations kept, children follow.

        The local scale is ``scales / parent_scale`` per axis, ``parent_scale`` as :meth:`get_world_scales` reports
        the parent's. Exact under a similarity parent (uniform scale, mirrors included; the world rotation is kept
        too); under a non-uniformly scaled one only when the prim's local rotation maps each parent axis onto itself,
        else its world matrix has shear (:doc:`isaaclab`, "Scales in both spaces").

        Args:
            scales: (M, 3) world scales.
            indices: View indices to write (M of them, each at most once), ``None`` for all.
            mask: Boolean (N,) selection instead of ``indices``: the data has N rows, masked rows are written.

        Raises:
            ValueError: As :meth:`set_world_poses`, and for a singular parent (no world scale reaches the prim).
        """
        if scales is None:
            raise ValueError("scales: expected an (M, 3) array, got None")
        with self._lock:
            check_no_writer(self)
            self._check_open()
            staged = self._stager.stage(indices, mask, ((scales, "scales", wp.vec3f),), scale_only=True)
            if staged is not None:
                self._apply_write("world", staged)

    def get_scales(self, indices: IndicesLike = None, mask: MaskLike = None) -> wp.array:
        """Alias of :meth:`get_local_scales` everywhere (Isaac Lab 3's reads world scales on Fabric, local on USD)."""
        return self.get_local_scales(indices, mask)

    def set_scales(self, scales: ArrayLike, indices: IndicesLike = None, mask: MaskLike = None) -> None:
        """Alias of :meth:`set_local_scales`, on every backend (one meaning, unlike Isaac Lab 3's ``set_scales``)."""
        self.set_local_scales(scales, indices, mask)

    # ---------------------------------------------------------------- visibility (a host path: frameview.visibility)

    def get_visibility(self, indices: IndicesLike = None) -> wp.array:
        """Computed visibility of the prims: False when the prim or any ancestor is ``invisible`` (Fabric views read
        Fabric's ``visibility`` opinions, the USD view ``UsdGeomImageable.ComputeVisibility()``).

        Args:
            indices: View indices to read, ``None`` for all.

        Returns:
            (M,) ``wp.bool`` on :attr:`device`, a buffer owned by the view (overwritten by the next call).
        """
        with self._lock:
            self._check_open()
            return gather_visibility(self._args, indices, self._read_visibility)

    def set_visibility(self, visible: BoolsLike, indices: IndicesLike = None) -> None:
        """Make the prims visible or invisible (``MakeVisible`` / ``MakeInvisible`` semantics, on every backend).

        ``False`` authors ``invisible``: the prim and its subtree disappear. ``True`` authors ``inherited`` and, under
        an ``invisible`` ancestor, makes the ancestors between ``inherited`` and their other children ``invisible``;
        no other prim changes. A Fabric view writes Fabric only, never USD. :doc:`backends` ("Visibility") gives the
        one difference from pxr (a non-Imageable sibling's Imageable children stay hidden) and what each backend writes.

        Args:
            visible: (M,) booleans (Warp ``wp.bool`` array, NumPy, torch tensor or list), or one bool for every row.
            indices: View indices to write (M of them, each at most once), ``None`` for all.

        Raises:
            TypeError: ``visible`` is not boolean.
            ValueError: ``visible`` has the wrong shape, or asks a prim visible and one of its ancestors (in the same
                call) invisible.
        """
        with self._lock:
            self._check_open()
            author_visibility(self._args, indices, visible, self._write_visibility)

    # ---------------------------------------------------------------- errors found on the device, lifecycle

    @synchronized
    def check(self) -> None:
        """Wait for this view's queued device work and raise the first error it recorded.

        With device inputs on CUDA (Warp arrays, torch CUDA tensors), bad indices, non-finite values, zero
        quaternions, singular parents and sheared local matrices are found by the kernels, without a host round trip;
        a rejected write writes nothing. The error is raised by the view's first call after the GPU finished the
        faulty one, or by this method (call it e.g. once per training iteration, or after replaying a captured
        graph). On the CPU, and for host inputs (lists, NumPy), errors are raised by the faulty call itself.
        """
        self._check_open()
        self._errors.check(self._status_error("an earlier call", None))

    def _settle_rows(self, rows: Rows, call: str, now: bool = False, data: Any = None) -> bool:
        """Settle a call's errors (:meth:`DeviceErrors.settle`); whether it waited for the call's device work."""
        # device-row backends end each call that can fail with the status copy (in its graph where it has one); the
        # call's data names the bad values when the error is raised by the call itself
        data = data if now or not self._errors.deferred else None
        return self._errors.settle(status_error(call, rows, self._prim_paths, data), now=now,
                                   published=self._device_rows)  # fmt: skip

    def _status_error(self, call: str, rows: Rows | None) -> Callable[[int], Exception]:
        """A factory: status word -> the exception naming the argument, row, index or prim (:func:`status_error`)."""
        return status_error(call, rows, self._prim_paths)

    @synchronized
    def close(self) -> None:
        """Release what the view holds on the stage. Idempotent; any later use raises ``RuntimeError``."""
        if self._closed:
            return
        self._closed = True
        self._release()

    def __enter__(self: _ViewT) -> _ViewT:
        self._check_open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"{self!r} is closed: create a new view to keep reading or writing these prims")

    # ---------------------------------------------------------------- backend hooks

    @abc.abstractmethod
    def _read_world_poses(self, rows: Rows, pos_out: wp.array, quat_out: wp.array) -> None:
        """Fill ``pos_out``/``quat_out`` (vec3f/quatf, one per row) from world matrices."""

    @abc.abstractmethod
    def _read_local_poses(self, rows: Rows, pos_out: wp.array, quat_out: wp.array) -> None:
        """Fill ``pos_out``/``quat_out`` from local matrices."""

    @abc.abstractmethod
    def _read_world_scales(self, rows: Rows, scale_out: wp.array) -> None:
        """Fill ``scale_out`` from world matrices."""

    @abc.abstractmethod
    def _read_local_scales(self, rows: Rows, scale_out: wp.array) -> None:
        """Fill ``scale_out`` from local matrices."""

    @abc.abstractmethod
    def _write_world_poses(self, rows: Rows, pos: wp.array | None, quat: wp.array | None) -> None:
        """Write world poses (on the view's device); ``None`` keeps a component. Errors go to the status word."""

    @abc.abstractmethod
    def _write_local_poses(self, rows: Rows, pos: wp.array | None, quat: wp.array | None) -> None:
        """Write local poses (on the view's device); ``None`` keeps a component."""

    @abc.abstractmethod
    def _write_local_scales(self, rows: Rows, scales: wp.array) -> None:
        """Write local scales (on the view's device)."""

    def _read_visibility(self, rows: np.ndarray | None) -> np.ndarray:
        """Computed visibility (bool, one per row) of view prims ``rows`` (int64 view indices, None: all)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement get_visibility")

    def _write_visibility(self, rows: np.ndarray | None, visible: np.ndarray) -> None:
        """Make view prims ``rows`` (None: all) visible or invisible (bool, one per row)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement set_visibility")

    def _release(self) -> None:  # noqa: B027  (an optional hook: a backend without resources keeps it)
        """Release backend resources; called once by :meth:`close`."""

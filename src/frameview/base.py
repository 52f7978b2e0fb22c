# SPDX-License-Identifier: Apache-2.0
"""BaseFrameView: the contract every FrameView backend honours, and the argument handling they share."""

from __future__ import annotations

import abc
import functools
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

import numpy as np
import warp as wp

from ._rows import (
    ALL,
    CODE_INDEX_DUPLICATE,
    CODE_INDEX_RANGE,
    CODE_QUAT_NOT_FINITE,
    CODE_RESULT_NOT_FINITE,
    CODE_SHEAR,
    CODE_SINGULAR_PARENT,
    CODE_VALUE_NOT_FINITE,
    CODE_ZERO_QUATERNION,
    INDEXED,
    MASK,
    DeviceErrors,
    Rows,
    report,
    split_status,
)
from .host import to_numpy
from .visibility import VisibilityMixin
from .writers import WriterScopesMixin

__all__ = ["BaseFrameView"]

IndicesLike = Any
"""``None`` (all), or int32/uint32/int64 indices as a Warp array, NumPy array, torch tensor, list, tuple or range."""

MaskLike = Any
"""``None``, or a boolean (N,) Warp array, torch tensor or NumPy array selecting view prims (N = the view's count)."""

ArrayLike = Any
"""A Warp array, NumPy array or torch tensor of shape (M, 3) or (M, 4) (or a Warp vector array of shape (M,))."""

_INDEX_KINDS = ("i", "u")
_WARP_INDEX_DTYPES = (wp.int32, wp.uint32, wp.int64)


@wp.kernel(enable_backward=False)
def check_values(
    # inputs
    values: wp.array2d(dtype=wp.float32),
    check_norm: int,
    # outputs
    status_out: wp.array(dtype=wp.int32),
):
    """Record the first row holding a non-finite value (or a zero-norm row when ``check_norm``)."""
    i = wp.tid()
    norm = float(0.0)
    for j in range(values.shape[1]):
        v = values[i, j]
        if not wp.isfinite(v):
            report(status_out, i, CODE_VALUE_NOT_FINITE)
            return
        norm += v * v
    if check_norm != 0 and norm < 1.0e-12:
        report(status_out, i, CODE_ZERO_QUATERNION)


@wp.kernel(enable_backward=False)
def narrow_indices(
    # inputs
    indices: wp.array(dtype=wp.int64),
    count: int,
    # outputs
    out: wp.array(dtype=wp.int32),
):
    """int64 / uint32 view indices -> int32, out-of-range values -> -1 (the kernels reading them report it)."""
    k = wp.tid()
    v = indices[k]
    if v < wp.int64(0) or v >= wp.int64(count):
        out[k] = -1
    else:
        out[k] = wp.int32(v)


@wp.kernel(enable_backward=False)
def narrow_indices_u32(
    # inputs
    indices: wp.array(dtype=wp.uint32),
    count: int,
    # outputs
    out: wp.array(dtype=wp.int32),
):
    """uint32 view indices -> int32, out-of-range values -> -1."""
    k = wp.tid()
    v = indices[k]
    if v >= wp.uint32(count):
        out[k] = -1
    else:
        out[k] = wp.int32(v)


@wp.kernel(enable_backward=False)
def scatter_vec3(
    # inputs
    src: wp.array(dtype=wp.vec3f),
    indices: wp.array(dtype=wp.int32),
    # outputs
    dst_out: wp.array(dtype=wp.vec3f),
):
    """``dst_out[indices[k]] = src[k]`` (host-bound backends' masked reads)."""
    k = wp.tid()
    dst_out[indices[k]] = src[k]


@wp.kernel(enable_backward=False)
def scatter_quat(
    # inputs
    src: wp.array(dtype=wp.quatf),
    indices: wp.array(dtype=wp.int32),
    # outputs
    dst_out: wp.array(dtype=wp.quatf),
):
    """``dst_out[indices[k]] = src[k]``."""
    k = wp.tid()
    dst_out[indices[k]] = src[k]


_F = TypeVar("_F", bound=Callable[..., Any])
_ViewT = TypeVar("_ViewT", bound="BaseFrameView")


def _synchronized(method: _F) -> _F:
    """Run a public method under the view's lock: calls from several threads are serialised, never interleaved."""

    @functools.wraps(method)
    def locked(self: BaseFrameView, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            errors = getattr(self, "_errors", None)  # None while the view is being built
            if errors is None:
                return method(self, *args, **kwargs)
            errors.forget_capturing()  # asked once per call, fresh for every call
            try:
                return method(self, *args, **kwargs)
            finally:
                errors.forget_capturing()

    return cast(_F, locked)


def _is_torch_tensor(value: Any) -> bool:
    torch = sys.modules.get("torch")  # never import torch ourselves
    return torch is not None and isinstance(value, torch.Tensor)


class BaseFrameView(WriterScopesMixin, VisibilityMixin, abc.ABC):
    """A fixed set of prims whose world and local poses are read and written in bulk.

    Subclasses implement the ``_read_*`` / ``_write_*`` hooks; this class validates every argument once, at the
    boundary, so that every backend accepts and rejects exactly the same inputs.

    Arrays returned by getters are ``wp.array`` on :attr:`device`: positions and scales ``wp.vec3f`` of shape (M,),
    orientations ``wp.quatf`` of shape (M,), **xyzw**. ``.numpy()`` gives (M, 3) / (M, 4) and ``wp.to_torch`` a tensor
    of the same shape without a copy. The view owns these buffers and reuses them: the next call of the same getter
    from the same thread overwrites them (a ``wp.to_torch`` tensor of an output too), so clone what you keep.

    Rows: every getter and setter takes ``indices`` (M view indices; row ``k`` is prim ``indices[k]``) or ``mask``
    (a boolean (N,) array; data and outputs have N rows and only the masked rows are read or written), not both.
    Device inputs are checked on the device, without a host round trip; see :meth:`check` for when their errors
    are raised.

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

    def __init__(self, prim_path: str | Sequence[str], prim_paths: Sequence[str], *, device: str) -> None:
        self._pattern = prim_path if isinstance(prim_path, str) else list(prim_path)
        self._prim_paths = tuple(str(p) for p in prim_paths)
        self._device = wp.get_device(device)
        self._closed = False
        self._lock: Any = getattr(self, "_lock", None) or threading.RLock()  # a subclass may share a wider lock
        self._thread_buffers = threading.local()  # per-thread output buffers: {name: wp.array}
        self._index_buffer = wp.empty(max(self.count, 1), dtype=wp.int32, device=self._device)
        # indices are staged in host memory: the device buffer itself on the CPU, a host copy for CUDA
        self._index_stage = None if self._device.is_cpu else wp.empty_like(self._index_buffer, device="cpu")
        self._index_host = to_numpy(self._index_buffer if self._index_stage is None else self._index_stage)
        self._heads: dict[tuple[int, int], wp.array] = {}
        self._errors = DeviceErrors(self._device)
        self._all_rows = Rows(ALL, self.count)
        self._last_rows: tuple[Any, Rows] | None = None  # (the caller's device indices or mask, their Rows)

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
    def is_closed(self) -> bool:
        """True once :meth:`close` has been called."""
        return self._closed

    def __len__(self) -> int:
        return self.count

    def __repr__(self) -> str:
        state = ", closed" if self._closed else ""
        return f"{type(self).__name__}({self._pattern!r}, count={self.count}, backend={self.backend!r}{state})"

    # ---------------------------------------------------------------- getters

    @_synchronized
    def get_world_poses(self, indices: IndicesLike = None, mask: MaskLike = None) -> tuple[wp.array, wp.array]:
        """World poses of the prims.

        Args:
            indices: View indices to read, ``None`` for all.
            mask: Boolean (N,) selection instead of ``indices``: the outputs have N rows, only masked ones are filled.

        Returns:
            Positions, (M,) ``wp.vec3f``, world frame, stage units; orientations, (M,) ``wp.quatf``, **xyzw**, world
            frame. Buffers owned by the view, overwritten by the next call (clone what you keep).
        """
        return self._get_poses("world", indices, mask)

    @_synchronized
    def get_local_poses(self, indices: IndicesLike = None, mask: MaskLike = None) -> tuple[wp.array, wp.array]:
        """Local poses (relative to the parent prim).

        Args:
            indices: View indices to read, ``None`` for all.
            mask: Boolean (N,) selection instead of ``indices`` (N-row outputs, masked rows filled).

        Returns:
            Translations, (M,) ``wp.vec3f``, parent frame; orientations, (M,) ``wp.quatf``, **xyzw**, parent frame.
            Buffers owned by the view, overwritten by the next call (clone what you keep).
        """
        return self._get_poses("local", indices, mask)

    @_synchronized
    def get_world_scales(self, indices: IndicesLike = None, mask: MaskLike = None) -> wp.array:
        """World scales: the lengths of the world matrix axes (assumes no shear; a mirror shows on x).

        Args:
            indices: View indices to read, ``None`` for all.
            mask: Boolean (N,) selection instead of ``indices`` (N-row output, masked rows filled).

        Returns:
            (M,) ``wp.vec3f``. Buffer owned by the view, overwritten by the next call.
        """
        return self._get_scales("world", indices, mask)

    @_synchronized
    def get_local_scales(self, indices: IndicesLike = None, mask: MaskLike = None) -> wp.array:
        """Local scales: the lengths of the local matrix axes (assumes no shear; a mirror shows on x).

        Args:
            indices: View indices to read, ``None`` for all.
            mask: Boolean (N,) selection instead of ``indices`` (N-row output, masked rows filled).

        Returns:
            (M,) ``wp.vec3f``. Buffer owned by the view, overwritten by the next call.
        """
        return self._get_scales("local", indices, mask)

    def _get_poses(self, space: str, indices: IndicesLike, mask: MaskLike) -> tuple[wp.array, wp.array]:
        self._check_no_writer()
        rows = self._prepare(indices, mask)
        pos = self._outputs(f"{space}_pos", wp.vec3f, rows.count)
        quat = self._outputs(f"{space}_quat", wp.quatf, rows.count)
        if rows.count == 0:
            return pos, quat
        read = self._read_world_poses if space == "world" else self._read_local_poses
        self._read_rows(read, rows, f"{space}_pose", (pos, quat))
        return pos, quat

    @_synchronized
    def _get_world_poses_rotated(self, indices: IndicesLike, offset: wp.quatf) -> tuple[wp.array, wp.array] | None:
        """World poses with each orientation right-multiplied by ``offset`` (``w >= 0``) in the read launch itself
        (:class:`~frameview.CameraPoses` conventions), or None when the backend has no such read."""
        rotated = getattr(self, "_read_world_poses_rotated", None)
        if rotated is None:
            return None
        self._check_no_writer()
        rows = self._prepare(indices)
        pos = self._outputs("rotated_pos", wp.vec3f, rows.count)
        quat = self._outputs("rotated_quat", wp.quatf, rows.count)
        if rows.count:
            rotated(rows, pos, quat, offset)
            if not rows.checked:
                self._settle_rows(rows, "read")
        return pos, quat

    def _get_scales(self, space: str, indices: IndicesLike, mask: MaskLike) -> wp.array:
        self._check_no_writer()
        rows = self._prepare(indices, mask)
        out = self._outputs(f"{space}_scale", wp.vec3f, rows.count)
        if rows.count == 0:
            return out
        read = self._read_world_scales if space == "world" else self._read_local_scales
        self._read_rows(read, rows, f"{space}_scale", (out,))
        return out

    def _read_rows(self, read: Callable, rows: Rows, name: str, outputs: tuple[wp.array, ...]) -> None:
        """Run a backend read hook into ``outputs``. A host-bound backend reads a mask's rows by index into scratch
        buffers and scatters them into the masked rows; only unchecked device indices can fail a read."""
        if rows.kind == MASK and not self._device_rows:
            idx = self._host_mask_indices(rows)
            if idx.shape[0]:
                scratch = tuple(self._outputs(f"{name}_masked_{k}", out.dtype, idx.shape[0])
                                for k, out in enumerate(outputs))  # fmt: skip
                read(Rows(INDEXED, idx.shape[0], indices=idx), *scratch)
                for tmp, out in zip(scratch, outputs, strict=True):
                    kernel = scatter_quat if out.dtype == wp.quatf else scatter_vec3
                    wp.launch(kernel, idx.shape[0], inputs=[tmp, idx], outputs=[out], device=self._device)
            return
        read(rows, *outputs)
        if not rows.checked:
            self._settle_rows(rows, "read")

    # ---------------------------------------------------------------- setters

    @_synchronized
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
        (uniform scale, mirrors included); see docs/reliability.md for non-uniformly scaled parents.

        Args:
            positions: (M, 3) world positions, or ``None`` to keep them.
            orientations: (M, 4) **xyzw** world orientations (normalised here; a zero quaternion is rejected), or
                ``None`` to keep them.
            indices: View indices to write (M of them, each at most once), ``None`` for all.
            mask: Boolean (N,) selection instead of ``indices``: the data has N rows, masked rows are written.
        """
        self._set("world", indices, mask, (positions, "positions", wp.vec3f), (orientations, "orientations", wp.quatf))

    @_synchronized
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
            orientations: (M, 4) **xyzw** orientations in the parent frame (normalised here), or ``None``.
            indices: View indices to write (M of them, each at most once), ``None`` for all.
            mask: Boolean (N,) selection instead of ``indices``: the data has N rows, masked rows are written.
        """
        self._set(
            "local", indices, mask, (translations, "translations", wp.vec3f), (orientations, "orientations", wp.quatf)
        )

    @_synchronized
    def set_local_scales(self, scales: ArrayLike, indices: IndicesLike = None, mask: MaskLike = None) -> None:
        """Set local scales; the prims' local translation and rotation are kept, children follow.

        Args:
            scales: (M, 3) per-axis scales.
            indices: View indices to write (M of them, each at most once), ``None`` for all.
            mask: Boolean (N,) selection instead of ``indices``: the data has N rows, masked rows are written.
        """
        if scales is None:
            raise ValueError("scales: expected an (M, 3) array, got None")
        self._set("scale", indices, mask, (scales, "scales", wp.vec3f))

    def _set(self, what: str, indices: IndicesLike, mask: MaskLike, *values: tuple[Any, str, type]) -> None:
        self._check_no_writer()
        rows = self._prepare(indices, mask, write=True)
        select = None
        if rows.kind == MASK and not self._device_rows:
            select = self._host_mask_indices(rows)
        pairs = [self._coerce_rows(v, name, dtype, rows.count, select=select) for v, name, dtype in values]
        coerced = [array for array, _host in pairs]
        if select is not None:
            rows = Rows(INDEXED, select.shape[0], indices=select)
        if rows.count == 0 or all(c is None for c in coerced):
            return
        if what == "scale":
            self._write_local_scales(rows, coerced[0])
        elif what == "world":
            self._write_world_poses(rows, coerced[0], coerced[1])
        else:
            self._write_local_poses(rows, coerced[0], coerced[1])
        from_host = rows.checked and all(host for _array, host in pairs)
        self._settle_rows(rows, f"set_{what}" if what != "scale" else "set_local_scales", now=from_host)

    # ---------------------------------------------------------------- errors found on the device

    @_synchronized
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

    def _settle_rows(self, rows: Rows, call: str, now: bool = False) -> None:
        # device-row backends end each call that can fail with the status copy (in its graph where it has one)
        self._errors.settle(self._status_error(call, rows), now=now, published=self._device_rows)

    def _status_error(self, call: str, rows: Rows | None) -> Callable[[int], Exception]:
        """A factory: status word -> the exception naming the argument, row, index or prim."""

        def make(value: int) -> Exception:
            row, code = split_status(value)
            index = row
            if rows is not None and rows.kind == INDEXED:
                index = self._source_index(rows, row)
            written = "nothing was written" if call.startswith("set") else "the rows read are not valid"
            if code == int(CODE_INDEX_RANGE):
                where = "is negative" if index < 0 else "is out of range"
                return IndexError(
                    f"indices: index {index} (row {row}) {where} for a view of count={self.count} ({call}); {written}"
                )
            if code == int(CODE_INDEX_DUPLICATE):
                return ValueError(
                    f"indices: index {index} appears more than once in a write ({call}); expected each index at most "
                    f"once (drop the duplicates and their rows); {written}"
                )
            if code == int(CODE_VALUE_NOT_FINITE):
                name = _FIRST_ARGUMENT.get(call, "values")
                return ValueError(f"{name}: row {row} holds a non-finite value ({call}); {written}")
            if code == int(CODE_QUAT_NOT_FINITE):
                return ValueError(f"orientations: row {row} holds a non-finite value ({call}); {written}")
            if code == int(CODE_ZERO_QUATERNION):
                return ValueError(f"orientations: row {row} holds a zero-norm quaternion ({call}); {written}")
            prim = self._prim_paths[index] if 0 <= index < self.count else f"<row {row}>"
            if code == int(CODE_SINGULAR_PARENT):
                return ValueError(
                    f"prim {prim!r}: its parent's world matrix is singular (e.g. a zero scale), so no world pose can "
                    f"be written under it; write its local pose instead; {written}"
                )
            if code == int(CODE_SHEAR):
                return ValueError(
                    f"prim {prim!r}: its local transform has shear, which a rotation or scale write would drop; write "
                    f"its translation only, or remove the shear from its xformOps; {written}"
                )
            if code == int(CODE_RESULT_NOT_FINITE):
                return ValueError(
                    f"prim {prim!r}: the new local transform is not finite (a degenerate parent or local matrix); "
                    f"{written}"
                )
            return RuntimeError(f"{call}: device error code {code} at row {row}")

        return make

    @staticmethod
    def _source_index(rows: Rows, row: int) -> int:
        """The view index the caller passed at ``row`` (error path: may copy from the device)."""
        source = rows.source if rows.source is not None else rows.indices
        try:
            if _is_torch_tensor(source):
                return int(source[row].item())
            host = to_numpy(source) if isinstance(source, wp.array) else np.asarray(source)
            return int(host[row])
        except Exception:  # the caller changed or freed it: report the row
            return row

    # ---------------------------------------------------------------- lifecycle

    @_synchronized
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

    def _release(self) -> None:
        """Release backend resources; called once by :meth:`close`."""

    # ---------------------------------------------------------------- argument handling

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"{self!r} is closed: create a new view to keep reading or writing these prims")

    def _prepare(self, indices: IndicesLike, mask: MaskLike = None, write: bool = False) -> Rows:
        """Check the view is open, report errors of earlier device calls, and turn ``indices`` / ``mask`` into
        :class:`Rows`. Host indices are checked here (a write also needs each index once: two rows for one prim
        race on a GPU); device indices and masks are checked by the kernels, without a host round trip."""
        self._check_open()
        self._errors.poll()
        if indices is None and mask is None:
            return self._all_rows
        if indices is not None and mask is not None:
            raise TypeError("indices and mask: pass one of them, not both")
        last = self._last_rows  # the reset loop passes the same device array every time: reuse its Rows
        if last is not None and (last[0] is mask if indices is None else last[0] is indices):
            return last[1]
        if mask is not None:
            rows = Rows(MASK, self.count, mask=self._mask_to_device(mask))
            if isinstance(mask, wp.array) and rows.mask is mask:
                self._last_rows = (mask, rows)
            return rows
        if self._device_rows and self._device.is_cuda:  # on the CPU every array is host memory: check it here
            device_rows = self._device_indices(indices)
            if device_rows is not None:
                if device_rows.indices is indices:  # used as is (int32, contiguous, on the view's device)
                    self._last_rows = (indices, device_rows)
                return device_rows
        host = self._indices_to_numpy(indices)
        self._check_host_indices(host, write)
        return self._stage_host_indices(host)

    def _check_host_indices(self, host: np.ndarray, write: bool) -> None:
        """Bounds of host indices, and (a write) each index at most once."""
        if not host.size:
            return
        low, high = int(host.min()), int(host.max())
        if low < 0:
            raise IndexError(f"indices: index {low} is negative; expected 0 <= index < count={self.count}")
        if high >= self.count:
            raise IndexError(f"indices: index {high} is out of range for a view of count={self.count}")
        if write and host.size > 1:
            counts = np.bincount(host.astype(np.intp, copy=False))
            if counts.max() > 1:
                dup = int(np.argmax(counts))
                raise ValueError(
                    f"indices: index {dup} appears {int(counts[dup])} times in a write; expected each index at "
                    "most once (drop the duplicates and their rows); nothing was written"
                )

    def _stage_host_indices(self, host: np.ndarray) -> Rows:
        """Checked host indices as int32 :class:`Rows` on the device (through the view's index buffer)."""
        n = host.size
        if n > self._index_buffer.shape[0]:  # more indices than prims (repeated reads): a one-off array
            out = wp.array(np.ascontiguousarray(host, dtype=np.int32), dtype=wp.int32, device=self._device)
            return Rows(INDEXED, n, indices=out)
        self._index_host[:n] = host  # bounds checked above: the int32 cast is exact
        out = self._head(self._index_buffer, n)
        if n and self._index_stage is not None:  # pageable staging: the copy has consumed it when wp.copy returns
            wp.copy(out, self._index_stage, count=n)
        return Rows(INDEXED, n, indices=out)

    def _device_indices(self, indices: IndicesLike) -> Rows | None:
        """Indices already on the view's device, as int32 without a host round trip (None: take the host path)."""
        if _is_torch_tensor(indices):
            if str(indices.device) == "cpu" or indices.dtype not in _torch_index_dtypes():
                return None
            if wp.device_from_torch(indices.device) != self._device:
                return None
            source = indices
            indices = wp.from_torch(indices.contiguous())
        elif isinstance(indices, wp.array):
            source = indices
        else:
            return None
        if indices.device != self._device or indices.dtype not in _WARP_INDEX_DTYPES:
            return None
        if indices.ndim != 1:
            raise ValueError(f"indices: expected a 1-D array of indices, got shape {tuple(indices.shape)}")
        n = indices.shape[0]
        if indices.dtype == wp.int32 and indices.is_contiguous:
            return Rows(INDEXED, n, indices=indices, checked=False, source=source)
        if n <= self._index_buffer.shape[0]:
            out = self._head(self._index_buffer, n)
        else:
            out = wp.empty(n, dtype=wp.int32, device=self._device)
        if n:
            kernel = narrow_indices_u32 if indices.dtype == wp.uint32 else narrow_indices
            wp.launch(kernel, dim=n, inputs=[indices, self.count], outputs=[out], device=self._device)
        return Rows(INDEXED, n, indices=out, checked=False, source=source)

    def _mask_to_device(self, mask: MaskLike) -> wp.array:
        """A boolean (N,) mask as a ``wp.bool`` array on the view's device (zero-copy for device inputs)."""
        if _is_torch_tensor(mask):
            if mask.dtype != sys.modules["torch"].bool:
                raise TypeError(f"mask: expected a boolean tensor, got dtype {mask.dtype}")
            if tuple(mask.shape) != (self.count,):
                raise ValueError(f"mask: expected shape ({self.count},), got {tuple(mask.shape)}")
            if str(mask.device) != "cpu" and wp.device_from_torch(mask.device) == self._device:
                return wp.from_torch(mask.contiguous(), dtype=wp.bool)
            mask = mask.detach().cpu().numpy()
        if isinstance(mask, wp.array):
            if mask.dtype != wp.bool:
                raise TypeError(f"mask: expected a Warp array of dtype wp.bool, got {mask.dtype}")
            if mask.shape != (self.count,):
                raise ValueError(f"mask: expected shape ({self.count},), got {mask.shape}")
            if mask.device == self._device:
                return mask
            _wait_for_producer(mask)
            return wp.clone(mask, device=self._device)
        host = np.asarray(mask)
        if host.dtype != np.bool_:
            raise TypeError(f"mask: expected booleans, got dtype {host.dtype} (for view indices pass indices=...)")
        if host.shape != (self.count,):
            raise ValueError(f"mask: expected shape ({self.count},), got {host.shape}")
        return wp.array(host, dtype=wp.bool, device=self._device)

    def _host_mask_indices(self, rows: Rows) -> wp.array:
        """The masked view indices as int32 on the device (host-bound backends: one host round trip)."""
        idx = np.flatnonzero(to_numpy(rows.mask)).astype(np.int32)
        return wp.array(idx, dtype=wp.int32, device=self._device)

    def _indices_to_numpy(self, indices: IndicesLike) -> np.ndarray:
        if isinstance(indices, wp.array):
            if indices.dtype not in _WARP_INDEX_DTYPES:
                raise TypeError(f"indices: expected a Warp array of int32, uint32 or int64, got dtype {indices.dtype}")
            host = to_numpy(indices)
        elif isinstance(indices, np.ndarray):
            host = indices
        elif _is_torch_tensor(indices):
            host = indices.detach().cpu().numpy()
        elif isinstance(indices, (list, tuple, range)):
            if any(isinstance(i, (bool, np.bool_)) for i in indices):
                raise TypeError("indices: expected integers, got booleans (for a mask pass mask=...)")
            try:
                host = np.asarray(indices) if len(indices) else np.empty(0, dtype=np.int64)
            except ValueError as exc:  # ragged nested lists
                raise ValueError("indices: expected a flat sequence of integers, got a ragged nested one") from exc
        else:
            raise TypeError(
                f"indices: expected None, a list, or an integer Warp/NumPy/torch array, got {type(indices).__name__}"
            )
        if host.dtype == np.bool_:
            raise TypeError("indices: boolean masks are not indices; pass mask=... (or np.flatnonzero(mask))")
        if host.dtype.kind not in _INDEX_KINDS:
            raise TypeError(f"indices: expected integer indices (int32, uint32 or int64), got dtype {host.dtype}")
        if host.ndim != 1:
            raise ValueError(f"indices: expected a 1-D array of indices, got shape {tuple(host.shape)}")
        return host

    def _outputs(self, name: str, dtype: type, rows: int) -> wp.array:
        """The view-owned output buffer ``name``, cut to ``rows`` rows."""
        buffers = getattr(self._thread_buffers, "buffers", None)
        if buffers is None:
            buffers = self._thread_buffers.buffers = {}
        buf = buffers.get(name)
        if buf is None or buf.shape[0] < rows:
            buf = wp.empty(max(rows, self.count), dtype=dtype, device=self._device)
            buffers[name] = buf
        return self._head(buf, rows)

    def _head(self, buf: wp.array, rows: int) -> wp.array:
        """``buf[:rows]``, remembered: slicing a Warp array costs more host time than a small read's kernels."""
        if rows == buf.shape[0]:
            return buf
        key = (buf.ptr, rows)
        head = self._heads.get(key)
        if head is None:
            if len(self._heads) >= 256:
                self._heads.clear()
            head = self._heads[key] = buf[:rows]  # holds ``buf``: its address cannot be reused while cached
        return head

    def _coerce_rows(
        self, value: ArrayLike | None, name: str, dtype: type, rows: int, select: wp.array | None = None
    ) -> tuple[wp.array | None, bool]:
        """Check ``value`` is (rows, width) floating point; return it as ``dtype`` on the view's device, and whether
        it came from the host (``None`` counts as host data).

        Host data is checked for non-finite values (and zero quaternions) here, at once; device data by the
        backend's kernels (``_device_rows``) or by one check launch. ``select``: keep only these rows (host-bound
        backends' masked writes).
        """
        if value is None:
            return None, True
        if (  # fast path (the reset path): already the kernels' dtype, on the view's device, for a device backend
            self._device_rows
            and select is None
            and isinstance(value, wp.array)
            and value.dtype == dtype
            and value.ndim == 1
            and value.device == self._device
            and value.is_contiguous
        ):
            if value.shape[0] != rows:
                raise ValueError(f"{name}: expected {rows} rows, got {value.shape[0]}")
            return (value if rows else None), False
        width = _width(dtype)
        arr, from_host = self._to_float32_rows(value, name, width)
        if arr.shape[0] != rows:
            raise ValueError(f"{name}: expected shape ({rows}, {width}), got ({arr.shape[0]}, {width})")
        if rows == 0:
            return None, from_host
        check_norm = dtype is wp.quatf
        if from_host:
            host = to_numpy(arr)
            bad = ~np.isfinite(host).all(axis=1)
            if check_norm:
                bad |= (host * host).sum(axis=1) < 1.0e-12
            if bad.any():
                row = int(np.flatnonzero(bad)[0])
                values = host[row].tolist()
                what = "a zero-norm quaternion" if np.all(np.isfinite(values)) else "a non-finite value"
                raise ValueError(f"{name}: row {row} holds {what} {values}; nothing was written")
        if select is not None:
            host = to_numpy(arr)[to_numpy(select)]
            arr = wp.array(host, dtype=wp.float32, device=self._device)
        elif str(arr.device) != str(self._device):
            _wait_for_producer(arr)
            arr = wp.clone(arr, device=self._device)
        if not from_host and not self._device_rows:
            status = self._errors.status
            wp.launch(check_values, dim=arr.shape[0], inputs=[arr, int(check_norm)], outputs=[status],
                      device=self._device)  # fmt: skip
            self._errors.settle(self._value_error(name, arr), now=True)
        return arr.view(dtype), from_host

    def _value_error(self, name: str, arr: wp.array) -> Callable[[int], Exception]:
        def make(value: int) -> Exception:
            row, code = split_status(value)
            values = to_numpy(arr)[row].tolist()
            what = "a zero-norm quaternion" if code == int(CODE_ZERO_QUATERNION) else "a non-finite value"
            return ValueError(f"{name}: row {row} holds {what} {values}; nothing was written")

        return make

    def _to_float32_rows(self, value: ArrayLike, name: str, width: int) -> tuple[wp.array, bool]:
        """Any accepted array type -> (a float32 wp.array2d of shape (M, width), whether it came from the host).

        Zero-copy when possible."""
        expected = f"(M, {width}) float32/float64"
        if isinstance(value, wp.array):
            value, from_host = self._warp_float32_rows(value, name, width, expected)
        elif _is_torch_tensor(value):
            value, from_host = _torch_float32_rows(value, name, width, expected)
        else:
            value, from_host = _host_float32_rows(value, name, expected), True
        if isinstance(value, np.ndarray):
            if value.ndim != 2 or value.shape[1] != width:
                raise ValueError(f"{name}: expected shape (M, {width}), got {tuple(value.shape)}")
            device = self._device if self._device.is_cpu else "cpu"
            value = wp.array(value, dtype=wp.float32, device=device, copy=False)
        if value.ndim != 2 or value.shape[1] != width:
            raise ValueError(f"{name}: expected shape (M, {width}), got {tuple(value.shape)}")
        return value, from_host

    def _warp_float32_rows(self, value: wp.array, name: str, width: int, expected: str) -> tuple[Any, bool]:
        """A Warp array -> (float32 rows: a Warp view or a host copy, whether it came from the host)."""
        from_host = value.device.is_cpu and not (self._device.is_cpu and self._device_rows)
        if _width(value.dtype) == width and value.ndim == 1 and value.dtype in (wp.vec3f, wp.quatf, wp.vec4f):
            value = value.view(wp.float32).reshape((value.shape[0], width))
        elif value.dtype in (wp.vec3d, wp.quatd, wp.vec4d) and value.ndim == 1 and _width(value.dtype) == width:
            return to_numpy(value).astype(np.float32), True
        elif value.dtype in (wp.float32, wp.float64) and value.ndim == 2:
            if value.dtype == wp.float64 or not value.is_contiguous:
                return to_numpy(value).astype(np.float32), True
        else:
            raise TypeError(f"{name}: expected {expected} data, got a Warp array of dtype {value.dtype}")
        return value, from_host


_FIRST_ARGUMENT = {
    "set_world": "positions",
    "set_local": "translations",
    "set_local_scales": "scales",
    "set_world_scales": "scales",
}
"""The non-orientation argument of each setter, named in device-side value errors."""


def _wait_for_producer(array: wp.array) -> None:
    """Before copying an input that lives on another GPU: wait until that device finished producing it (whatever
    stream, Warp's or torch's, wrote it). A host wait, on the cross-device path only: pass inputs on the view's own
    device to keep the reset path free of host round trips."""
    if array.device.is_cuda:
        wp.synchronize_device(array.device)


def _torch_float32_rows(value: Any, name: str, width: int, expected: str) -> tuple[wp.array, bool]:
    """A torch tensor -> (a float32 wp.array2d over it, whether it came from the host)."""
    if not value.is_floating_point():
        raise TypeError(f"{name}: expected {expected} data, got a torch tensor of dtype {value.dtype}")
    from_host = str(value.device) == "cpu"
    value = value.detach()
    value = value.to(dtype=sys.modules["torch"].float32).contiguous()
    if value.ndim != 2 or value.shape[1] != width:
        raise ValueError(f"{name}: expected shape (M, {width}), got {tuple(value.shape)}")
    return wp.from_torch(value, dtype=wp.float32), from_host


def _host_float32_rows(value: Any, name: str, expected: str) -> np.ndarray:
    """NumPy data or nested sequences -> a contiguous float32 NumPy array."""
    try:
        host = np.asarray(value)
    except ValueError as exc:  # ragged nested lists
        raise ValueError(f"{name}: expected {expected} data, got a ragged {type(value).__name__}") from exc
    if host.dtype.kind != "f":
        raise TypeError(f"{name}: expected {expected} data, got dtype {host.dtype}")
    return np.ascontiguousarray(host, dtype=np.float32)


def _torch_index_dtypes() -> tuple:
    torch = sys.modules["torch"]
    return (torch.int32, torch.int64)


def _width(dtype: Any) -> int:
    """Number of scalars in one element of a Warp dtype (3 for vec3f, 4 for quatf, 1 for scalars)."""
    return int(getattr(dtype, "_length_", 1))

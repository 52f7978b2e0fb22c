# SPDX-License-Identifier: Apache-2.0
"""BaseFrameView: the contract every FrameView backend honours, and the argument handling they share."""

from __future__ import annotations

import abc
import functools
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import warp as wp

__all__ = ["BaseFrameView"]

IndicesLike = Any
"""``None`` (all), or int32/uint32/int64 indices as a Warp array, NumPy array, torch tensor, list, tuple or range."""

ArrayLike = Any
"""A Warp array, NumPy array or torch tensor of shape (M, 3) or (M, 4) (or a Warp vector array of shape (M,))."""

_INDEX_KINDS = ("i", "u")
_WARP_INDEX_DTYPES = (wp.int32, wp.uint32, wp.int64)


@wp.kernel
def _find_invalid_rows(
    # inputs
    values: wp.array2d(dtype=wp.float32),
    check_norm: int,
    # outputs
    first_bad_out: wp.array(dtype=wp.int32),
):
    """Record the smallest row index holding a non-finite value (or a zero-norm row when ``check_norm``)."""
    i = wp.tid()
    bad = int(0)
    norm = float(0.0)
    for j in range(values.shape[1]):
        v = values[i, j]
        if not wp.isfinite(v):
            bad = 1
        norm += v * v
    if check_norm != 0 and norm < 1.0e-12:
        bad = 1
    if bad != 0:
        wp.atomic_min(first_bad_out, 0, i)


def _synchronized(method: Callable) -> Callable:
    """Run a public method under the view's lock: calls from several threads are serialised, never interleaved."""

    @functools.wraps(method)
    def locked(self: BaseFrameView, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            return method(self, *args, **kwargs)

    return locked


def _is_torch_tensor(value: Any) -> bool:
    torch = sys.modules.get("torch")  # never import torch ourselves
    return torch is not None and isinstance(value, torch.Tensor)


class BaseFrameView(abc.ABC):
    """A fixed set of prims whose world and local poses are read and written in bulk.

    Subclasses implement the ``_read_*`` / ``_write_*`` hooks; this class validates every argument once, at the
    boundary, so that every backend accepts and rejects exactly the same inputs.

    Arrays returned by getters are ``wp.array`` on :attr:`device`: positions and scales ``wp.vec3f`` of shape (M,),
    orientations ``wp.quatf`` of shape (M,), **xyzw**. ``.numpy()`` gives (M, 3) / (M, 4) and ``wp.to_torch`` a tensor
    of the same shape without a copy. The view owns these buffers and reuses them: the next call of the same getter
    from the same thread overwrites them, so clone what you keep.

    Threads: a view is meant to be used from one thread, the one that steps the simulation. Calls from other threads
    are safe, not parallel: every public method runs under the view's lock (the Fabric stage's lock for Fabric views,
    one process-wide lock for USD views), and each thread gets its own output buffers, so a returned array only
    ever changes on its own thread's next call and always holds one consistent state of the stage.

    Example:
        >>> with fv.UsdFrameView("/World/envs/env_.*/Camera", stage=stage) as view:  # doctest: +SKIP
        ...     pos, quat = view.get_world_poses()
    """

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
        self._index_host = (self._index_buffer if self._index_stage is None else self._index_stage).numpy()
        self._heads: dict[tuple[int, int], wp.array] = {}
        self._first_bad = wp.empty(1, dtype=wp.int32, device=self._device)

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
    def get_world_poses(self, indices: IndicesLike = None) -> tuple[wp.array, wp.array]:
        """World poses of the prims.

        Args:
            indices: View indices to read, ``None`` for all.

        Returns:
            Positions, (M,) ``wp.vec3f``, world frame, stage units; orientations, (M,) ``wp.quatf``, **xyzw**, world
            frame. Buffers owned by the view, overwritten by the next call.
        """
        idx = self._prepare(indices)
        pos, quat = self._outputs("world_pos", wp.vec3f, idx), self._outputs("world_quat", wp.quatf, idx)
        if pos.shape[0] > 0:
            self._read_world_poses(idx, pos, quat)
        return pos, quat

    @_synchronized
    def get_local_poses(self, indices: IndicesLike = None) -> tuple[wp.array, wp.array]:
        """Local poses (relative to the parent prim).

        Args:
            indices: View indices to read, ``None`` for all.

        Returns:
            Translations, (M,) ``wp.vec3f``, parent frame; orientations, (M,) ``wp.quatf``, **xyzw**, parent frame.
            Buffers owned by the view, overwritten by the next call.
        """
        idx = self._prepare(indices)
        pos, quat = self._outputs("local_pos", wp.vec3f, idx), self._outputs("local_quat", wp.quatf, idx)
        if pos.shape[0] > 0:
            self._read_local_poses(idx, pos, quat)
        return pos, quat

    @_synchronized
    def get_world_scales(self, indices: IndicesLike = None) -> wp.array:
        """World scales: the lengths of the world matrix axes (assumes no shear).

        Args:
            indices: View indices to read, ``None`` for all.

        Returns:
            (M,) ``wp.vec3f``. Buffer owned by the view, overwritten by the next call.
        """
        idx = self._prepare(indices)
        out = self._outputs("world_scale", wp.vec3f, idx)
        if out.shape[0] > 0:
            self._read_world_scales(idx, out)
        return out

    @_synchronized
    def get_local_scales(self, indices: IndicesLike = None) -> wp.array:
        """Local scales: the lengths of the local matrix axes (assumes no shear).

        Args:
            indices: View indices to read, ``None`` for all.

        Returns:
            (M,) ``wp.vec3f``. Buffer owned by the view, overwritten by the next call.
        """
        idx = self._prepare(indices)
        out = self._outputs("local_scale", wp.vec3f, idx)
        if out.shape[0] > 0:
            self._read_local_scales(idx, out)
        return out

    # ---------------------------------------------------------------- setters

    @_synchronized
    def set_world_poses(
        self,
        positions: ArrayLike | None = None,
        orientations: ArrayLike | None = None,
        indices: IndicesLike = None,
    ) -> None:
        """Set world poses; children follow, the prims' scales are kept.

        Args:
            positions: (M, 3) world positions, or ``None`` to keep them.
            orientations: (M, 4) **xyzw** world orientations (normalised here; a zero quaternion is rejected), or
                ``None`` to keep them.
            indices: View indices to write (M of them, each at most once), ``None`` for all.
        """
        idx = self._prepare(indices, write=True)
        rows = self._rows(idx)
        pos = self._coerce_rows(positions, "positions", wp.vec3f, rows)
        quat = self._coerce_rows(orientations, "orientations", wp.quatf, rows)
        if rows > 0 and (pos is not None or quat is not None):
            self._write_world_poses(idx, pos, quat)

    @_synchronized
    def set_local_poses(
        self,
        translations: ArrayLike | None = None,
        orientations: ArrayLike | None = None,
        indices: IndicesLike = None,
    ) -> None:
        """Set local poses (relative to the parent); children follow, the prims' scales are kept.

        Args:
            translations: (M, 3) translations in the parent frame, or ``None`` to keep them.
            orientations: (M, 4) **xyzw** orientations in the parent frame (normalised here), or ``None``.
            indices: View indices to write (M of them, each at most once), ``None`` for all.
        """
        idx = self._prepare(indices, write=True)
        rows = self._rows(idx)
        pos = self._coerce_rows(translations, "translations", wp.vec3f, rows)
        quat = self._coerce_rows(orientations, "orientations", wp.quatf, rows)
        if rows > 0 and (pos is not None or quat is not None):
            self._write_local_poses(idx, pos, quat)

    @_synchronized
    def set_local_scales(self, scales: ArrayLike, indices: IndicesLike = None) -> None:
        """Set local scales; the prims' local translation and rotation are kept, children follow.

        Args:
            scales: (M, 3) per-axis scales.
            indices: View indices to write (M of them, each at most once), ``None`` for all.
        """
        idx = self._prepare(indices, write=True)
        rows = self._rows(idx)
        if scales is None:
            raise ValueError("scales: expected an (M, 3) array, got None")
        values = self._coerce_rows(scales, "scales", wp.vec3f, rows)
        if rows > 0:
            self._write_local_scales(idx, values)

    # ---------------------------------------------------------------- lifecycle

    @_synchronized
    def close(self) -> None:
        """Release what the view holds on the stage. Idempotent; any later use raises ``RuntimeError``."""
        if self._closed:
            return
        self._closed = True
        self._release()

    def __enter__(self) -> BaseFrameView:
        self._check_open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- backend hooks

    @abc.abstractmethod
    def _read_world_poses(self, indices: wp.array | None, pos_out: wp.array, quat_out: wp.array) -> None:
        """Fill ``pos_out``/``quat_out`` (vec3f/quatf, one row per index) from world matrices."""

    @abc.abstractmethod
    def _read_local_poses(self, indices: wp.array | None, pos_out: wp.array, quat_out: wp.array) -> None:
        """Fill ``pos_out``/``quat_out`` from local matrices."""

    @abc.abstractmethod
    def _read_world_scales(self, indices: wp.array | None, scale_out: wp.array) -> None:
        """Fill ``scale_out`` from world matrices."""

    @abc.abstractmethod
    def _read_local_scales(self, indices: wp.array | None, scale_out: wp.array) -> None:
        """Fill ``scale_out`` from local matrices."""

    @abc.abstractmethod
    def _write_world_poses(self, indices: wp.array | None, pos: wp.array | None, quat: wp.array | None) -> None:
        """Write world poses (validated, on the view's device); ``None`` keeps a component."""

    @abc.abstractmethod
    def _write_local_poses(self, indices: wp.array | None, pos: wp.array | None, quat: wp.array | None) -> None:
        """Write local poses (validated, on the view's device); ``None`` keeps a component."""

    @abc.abstractmethod
    def _write_local_scales(self, indices: wp.array | None, scales: wp.array) -> None:
        """Write local scales (validated, on the view's device)."""

    def _release(self) -> None:  # noqa: B027 - optional hook
        """Release backend resources; called once by :meth:`close`."""

    # ---------------------------------------------------------------- argument handling

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"{self!r} is closed: create a new view to keep reading or writing these prims")

    def _prepare(self, indices: IndicesLike, write: bool = False) -> wp.array | None:
        """Check the view is open and turn ``indices`` into a bounds-checked int32 array on the device; a ``write``
        also needs each index once (two rows for one prim race on a GPU: neither would reliably win)."""
        self._check_open()
        if indices is None:
            return None
        host = self._indices_to_numpy(indices)
        if host.size:
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
        n = host.size
        if n > self._index_buffer.shape[0]:  # more indices than prims (repeated reads): a one-off array
            return wp.array(np.ascontiguousarray(host, dtype=np.int32), dtype=wp.int32, device=self._device)
        self._index_host[:n] = host  # bounds checked above: the int32 cast is exact
        out = self._head(self._index_buffer, n)
        if n and self._index_stage is not None:  # pageable staging: the copy has consumed it when wp.copy returns
            wp.copy(out, self._index_stage, count=n)
        return out

    def _indices_to_numpy(self, indices: IndicesLike) -> np.ndarray:
        if isinstance(indices, wp.array):
            if indices.dtype not in _WARP_INDEX_DTYPES:
                raise TypeError(f"indices: expected a Warp array of int32, uint32 or int64, got dtype {indices.dtype}")
            host = indices.numpy()
        elif isinstance(indices, np.ndarray):
            host = indices
        elif _is_torch_tensor(indices):
            host = indices.detach().cpu().numpy()
        elif isinstance(indices, (list, tuple, range)):
            if any(isinstance(i, (bool, np.bool_)) for i in indices):
                raise TypeError("indices: expected integers, got booleans (for a mask use np.flatnonzero(mask))")
            try:
                host = np.asarray(indices) if len(indices) else np.empty(0, dtype=np.int64)
            except ValueError as exc:  # ragged nested lists
                raise ValueError("indices: expected a flat sequence of integers, got a ragged nested one") from exc
        else:
            raise TypeError(
                f"indices: expected None, a list, or an integer Warp/NumPy/torch array, got {type(indices).__name__}"
            )
        if host.dtype == np.bool_:
            raise TypeError("indices: boolean masks are not accepted; pass np.flatnonzero(mask) instead")
        if host.dtype.kind not in _INDEX_KINDS:
            raise TypeError(f"indices: expected integer indices (int32, uint32 or int64), got dtype {host.dtype}")
        if host.ndim != 1:
            raise ValueError(f"indices: expected a 1-D array of indices, got shape {tuple(host.shape)}")
        return host

    def _rows(self, indices: wp.array | None) -> int:
        return self.count if indices is None else indices.shape[0]

    def _outputs(self, name: str, dtype: type, indices: wp.array | None) -> wp.array:
        """The view-owned output buffer ``name``, cut to one row per requested index."""
        rows = self._rows(indices)
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

    def _coerce_rows(self, value: ArrayLike | None, name: str, dtype: type, rows: int) -> wp.array | None:
        """Check ``value`` is (rows, width) floating point and finite; return it as ``dtype`` on the view's device."""
        if value is None:
            return None
        width = _width(dtype)
        arr = self._to_float32_rows(value, name, width)
        if arr.shape[0] != rows:
            raise ValueError(f"{name}: expected shape ({rows}, {width}), got ({arr.shape[0]}, {width})")
        if rows == 0:
            return None
        if str(arr.device) != str(self._device):
            arr = wp.clone(arr, device=self._device)
        self._first_bad.fill_(rows)
        check_norm = 1 if dtype is wp.quatf else 0
        wp.launch(
            _find_invalid_rows, dim=rows, inputs=[arr, check_norm], outputs=[self._first_bad], device=self._device
        )
        first_bad = int(self._first_bad.numpy()[0])
        if first_bad < rows:
            row = arr.numpy()[first_bad].tolist()
            what = "a zero-norm quaternion" if check_norm and np.all(np.isfinite(row)) else "a non-finite value"
            raise ValueError(f"{name}: row {first_bad} holds {what} {row}; nothing was written")
        return arr.view(dtype)

    def _to_float32_rows(self, value: ArrayLike, name: str, width: int) -> wp.array:
        """Any accepted array type -> a contiguous float32 wp.array2d of shape (M, width) (zero-copy when possible)."""
        expected = f"(M, {width}) float32/float64"
        if isinstance(value, wp.array):
            if _width(value.dtype) == width and value.ndim == 1 and value.dtype in (wp.vec3f, wp.quatf):
                value = value.view(wp.float32).reshape((value.shape[0], width))
            elif value.dtype in (wp.vec3d, wp.quatd) and value.ndim == 1 and _width(value.dtype) == width:
                value = value.numpy().astype(np.float32)
            elif value.dtype in (wp.float32, wp.float64) and value.ndim == 2:
                if value.dtype == wp.float64 or not value.is_contiguous:
                    value = value.numpy().astype(np.float32)
            else:
                raise TypeError(f"{name}: expected {expected} data, got a Warp array of dtype {value.dtype}")
        elif _is_torch_tensor(value):
            if not value.is_floating_point():
                raise TypeError(f"{name}: expected {expected} data, got a torch tensor of dtype {value.dtype}")
            value = value.detach()
            value = value.to(dtype=sys.modules["torch"].float32).contiguous()
            if value.ndim != 2 or value.shape[1] != width:
                raise ValueError(f"{name}: expected shape (M, {width}), got {tuple(value.shape)}")
            value = wp.from_torch(value, dtype=wp.float32)
        else:
            try:
                host = np.asarray(value)
            except ValueError as exc:  # ragged nested lists
                raise ValueError(f"{name}: expected {expected} data, got a ragged {type(value).__name__}") from exc
            if host.dtype.kind != "f":
                raise TypeError(f"{name}: expected {expected} data, got dtype {host.dtype}")
            value = np.ascontiguousarray(host, dtype=np.float32)
        if isinstance(value, np.ndarray):
            if value.ndim != 2 or value.shape[1] != width:
                raise ValueError(f"{name}: expected shape (M, {width}), got {tuple(value.shape)}")
            device = self._device if self._device.is_cpu else "cpu"
            value = wp.array(value, dtype=wp.float32, device=device, copy=False)
        if value.ndim != 2 or value.shape[1] != width:
            raise ValueError(f"{name}: expected shape (M, {width}), got {tuple(value.shape)}")
        return value


def _width(dtype: Any) -> int:
    """Number of scalars in one element of a Warp dtype (3 for vec3f, 4 for quatf, 1 for scalars)."""
    return int(getattr(dtype, "_length_", 1))

# SPDX-License-Identifier: Apache-2.0
"""Zero-copy Warp arrays over torch tensors (and torch tensors over Warp arrays), remembered by layout.

``wp.from_torch`` builds a new Warp array (and looks up dtypes and devices) on every call: several microseconds of
host time per argument, most of a small reset's budget. A robot-learning loop passes tensors of the same layout every
step (often the same storage), so the arrays made here are kept under everything that gives them their meaning:
address, shape, strides, dtype and device. A kept array owns nothing (it never holds the tensor alive) and is used
only during the call that passed the tensor, when the tensor's memory is the caller's: if the address was freed and
reused by another tensor of the same layout, the array reads that tensor, which is the one passed.

Column slices of a wider tensor (``root_state[:, 3:7]``) need no copy: a row-strided 1-D ``wp.vec3f`` / ``wp.quatf``
array reads them in place. The same rule serves CPU views: NumPy rows as Warp arrays (:func:`borrow_host_rows`) and
CPU Warp arrays as NumPy (:func:`borrow_host`), each remembered by layout and owning nothing.
"""

from __future__ import annotations

import ctypes
import sys
from typing import Any

import numpy as np
import warp as wp

__all__ = [
    "as_torch",
    "borrow_host",
    "borrow_host_rows",
    "borrow_indices",
    "borrow_mask",
    "borrow_rows",
    "borrow_rows_on",
    "rows_view",
    "torch_on",
]

_MAX_KEPT = 256
_FLOAT32 = np.dtype(np.float32)
_ARRAYS: dict[tuple, wp.array] = {}
_BORROWED: dict[tuple, np.ndarray] = {}
_DEVICES: dict[Any, wp.context.Device] = {}
_TORCH: dict[tuple, Any] = {}


def _keep(cache: dict, key: tuple, value: Any) -> Any:
    if len(cache) >= _MAX_KEPT:
        cache.clear()
    cache[key] = value
    return value


def _device(torch_device: Any) -> wp.context.Device:
    device = _DEVICES.get(torch_device)
    if device is None:
        device = _DEVICES[torch_device] = wp.get_device(wp.device_from_torch(torch_device))
    return device


def _scalar_dtypes() -> dict[Any, tuple[Any, int]]:
    torch = sys.modules["torch"]
    return {
        torch.float32: (wp.float32, 4),
        torch.int32: (wp.int32, 4),
        torch.int64: (wp.int64, 8),
        torch.bool: (wp.bool, 1),
        torch.uint8: (wp.uint8, 1),
        torch.int16: (wp.int16, 2),
        torch.int8: (wp.int8, 1),
    }


_SCALARS: dict[Any, tuple[Any, int]] = {}


def _scalar(torch_dtype: Any) -> tuple[Any, int] | None:
    if not _SCALARS:
        _SCALARS.update(_scalar_dtypes())
    return _SCALARS.get(torch_dtype)


def borrow_rows(tensor: Any, dtype: Any, width: int) -> wp.array | None:
    """``tensor`` (M, ``width``) float32 with unit column stride, as an (M,) ``dtype`` (``wp.vec3f`` / ``wp.quatf``)
    Warp array over the same memory (its rows may be strided: column slices); ``None`` when it has another layout
    (the caller converts it)."""
    shape, stride, torch_dtype = tensor.shape, tensor.stride(), tensor.dtype
    key = (tensor.data_ptr(), shape, stride, torch_dtype, tensor.device, dtype)
    array = _ARRAYS.get(key)
    if array is not None:
        return array
    scalar = _scalar(torch_dtype)
    if scalar is None or scalar[0] is not wp.float32 or len(shape) != 2 or shape[1] != width:
        return None
    if shape[0] > 1 and stride[1] != 1 and width > 1:
        return None
    return _keep(_ARRAYS, key, _vector_rows(tensor.data_ptr(), shape[0], stride[0] * 4, dtype, _device(tensor.device)))


def borrow_rows_on(tensor: Any, dtype: Any, device: wp.context.Device) -> wp.array | None:
    """:func:`borrow_rows` for a view on ``device``: ``None`` also when the tensor lives elsewhere. One key per
    call (the reset path's cost per torch argument: building it and one dictionary lookup)."""
    array = _ARRAYS.get((tensor.data_ptr(), tensor.shape, tensor.stride(), tensor.dtype, tensor.device, dtype))
    if array is None:
        array = borrow_rows(tensor, dtype, int(getattr(dtype, "_length_", 1)))
        if array is None:
            return None
    return array if array.device is device else None


def _vector_rows(ptr: int, rows: int, row_bytes: int, dtype: Any, device: wp.context.Device) -> wp.array:
    """An (M,) ``dtype`` Warp array over float32 rows ``row_bytes`` apart at ``ptr`` (owns nothing)."""
    if rows <= 1:  # a single row's stride is arbitrary: any will do
        row_bytes = int(getattr(dtype, "_length_", 1)) * 4
    return wp.array(ptr=ptr, dtype=dtype, shape=(rows,), strides=(row_bytes,), device=device, copy=False)


def borrow_host(array: wp.array) -> np.ndarray:
    """A NumPy view of a CPU Warp array's memory, as ``array.numpy()`` shapes it, for use during the call that was
    passed ``array`` only: it owns nothing (it never keeps the array alive) and is remembered by address, shape,
    strides and dtype, since ``array.numpy()`` costs about 2 us of host time per call (a writer scope's checks on
    the CPU read four arrays per write). If the address was freed and reused by another array of the same layout,
    the view reads that array, which is the one passed. Copy what must outlive the call.

    Args:
        array: A Warp array on the CPU.
    """
    key = (array.ptr, array.shape, array.strides, array.dtype)
    view = _BORROWED.get(key)
    if view is None:
        shaped = array.numpy()  # the shape, strides and dtype of the view (it holds ``array``: not kept)
        if not array.ptr or not shaped.size:
            return shaped
        span = sum((n - 1) * abs(s) for n, s in zip(shaped.shape, shaped.strides, strict=True)) + shaped.itemsize
        memory = (ctypes.c_char * span).from_address(array.ptr)  # owns nothing
        view = np.ndarray(shaped.shape, dtype=shaped.dtype, buffer=memory, strides=shaped.strides)
        _keep(_BORROWED, key, view)
    return view


def borrow_host_rows(host: Any, dtype: Any) -> wp.array | None:
    """A C-contiguous (M, width) float32 NumPy array as an (M,) ``dtype`` (``wp.vec3f`` / ``wp.quatf``) CPU Warp
    array over the same memory, remembered by address and shape (``wp.array(host)`` and its ``view`` cost about
    10 us per argument of a CPU write); ``None`` for other layouts (the caller converts them). As with tensors, the
    array owns nothing and is used only during the call that passed ``host``."""
    width = int(getattr(dtype, "_length_", 1))
    if host.dtype != _FLOAT32 or host.ndim != 2 or host.shape[1] != width or not host.flags.c_contiguous:
        return None
    ptr = host.__array_interface__["data"][0]
    key = (ptr, host.shape, dtype, "numpy")
    array = _ARRAYS.get(key)
    if array is None:
        array = _keep(_ARRAYS, key, _vector_rows(ptr, host.shape[0], width * 4, dtype, wp.get_device("cpu")))
    return array


def torch_on(tensor: Any, device: wp.context.Device) -> bool:
    """Whether ``tensor`` lives on the Warp ``device``."""
    return _device(tensor.device) == device


def rows_view(array: wp.array, dtype: Any) -> wp.array | None:
    """A 2-D (M, width) float32 Warp array with unit column stride as an (M,) ``dtype`` array over the same memory
    (rows may be strided), remembered by layout; ``None`` for other layouts."""
    key = (array.ptr, array.shape, array.strides, array.device.alias, dtype)
    view = _ARRAYS.get(key)
    if view is not None:
        return view
    width = int(getattr(dtype, "_length_", 1))
    if array.shape[1] != width or (array.shape[0] > 1 and array.strides[1] != 4):
        return None
    return _keep(_ARRAYS, key, _vector_rows(array.ptr, array.shape[0], array.strides[0], dtype, array.device))


def borrow_indices(tensor: Any) -> wp.array | None:
    """A 1-D integer tensor as a Warp array over the same memory (strided or not), ``None`` for other dtypes."""
    return _borrow_1d(tensor, bool_ok=False)


def borrow_mask(tensor: Any) -> wp.array | None:
    """A 1-D bool tensor as a ``wp.bool`` Warp array over the same memory (strided or not)."""
    return _borrow_1d(tensor, bool_ok=True)


def _borrow_1d(tensor: Any, bool_ok: bool) -> wp.array | None:
    shape, stride, torch_dtype = tensor.shape, tensor.stride(), tensor.dtype
    key = (tensor.data_ptr(), shape, stride, torch_dtype, tensor.device)
    array = _ARRAYS.get(key)
    if array is not None:
        return array
    scalar = _scalar(torch_dtype)
    if scalar is None or len(shape) != 1 or (scalar[0] is wp.bool) != bool_ok or scalar[0] is wp.float32:
        return None
    dtype, size = scalar
    array = wp.array(ptr=tensor.data_ptr(), dtype=dtype, shape=(shape[0],), strides=(stride[0] * size,),
                     device=_device(tensor.device), copy=False)  # fmt: skip
    return _keep(_ARRAYS, key, array)


def as_torch(array: wp.array) -> Any:
    """A torch tensor over a Warp array's memory (zero-copy, as ``wp.to_torch``), remembered for the array's
    address, shape, strides, dtype and device.

    A view's getters return the same output buffers every call, so their tensors are made once: about a dictionary
    lookup per call instead of ``wp.to_torch``'s several microseconds. Vector dtypes get a trailing dimension
    (``wp.vec3f`` (M,) -> (M, 3); ``wp.quatf`` -> (M, 4), **xyzw**). The tensor shows whatever the buffer holds: the
    view's next call overwrites it, so clone what you keep. The last 256 tensors are remembered (each holds its
    array alive).

    Example:
        >>> pos, quat = view.get_world_poses(env_ids)  # doctest: +SKIP
        >>> pos_t, quat_t = fv.as_torch(pos), fv.as_torch(quat)  # (M, 3), (M, 4) xyzw, on view.device

    Args:
        array: A Warp array (a view's output buffer, or any other).

    Returns:
        The ``torch.Tensor`` over the same memory.
    """
    key = (array.ptr, array.shape, array.strides, array.dtype, array.device.alias)
    kept = _TORCH.get(key)
    if kept is None:
        kept = _keep(_TORCH, key, (array, wp.to_torch(array)))  # holds the array: its address stays its own
    return kept[1]

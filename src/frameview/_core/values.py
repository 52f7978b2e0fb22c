# SPDX-License-Identifier: Apache-2.0
"""Internal: a call's pose and scale data of every accepted kind (Warp arrays, NumPy, torch tensors, nested lists,
Isaac Lab ``ProxyArray``s) as float32 rows, and the host check of their values. :class:`~.arguments.Arguments`
coerces a write's data through these."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import warp as wp

from .host import CAPTURE_LOCK, to_numpy
from .interop import borrow_rows, borrow_rows_on, rows_view, torch_on
from .rows import is_torch_tensor

__all__ = [
    "NO_KEY",
    "check_host_rows",
    "device_data",
    "float32_rows",
    "layout_key",
    "unwrap",
    "wait_for_producer",
    "width_of",
]


_PLAIN = (wp.array, np.ndarray, list, tuple, range, type(None))
_PLAIN_TYPES: set[type] = set(_PLAIN)
"""The exact types :func:`unwrap` passes through at once (others take the ``isinstance`` checks)."""


_TORCH_TYPES: set[type] = set()
"""The torch tensor types seen (the reset path's type check per argument)."""


def unwrap(value: Any) -> Any:
    """The Warp array inside an Isaac Lab ``ProxyArray``-like object (one with a ``warp`` attribute holding a
    ``wp.array``), else ``value`` itself."""
    kind = type(value)
    if kind in _PLAIN_TYPES or isinstance(value, _PLAIN):
        return value
    if is_torch_tensor(value):
        _PLAIN_TYPES.add(kind)  # torch is not imported here: its tensor types are learnt as they come
        return value
    inner = getattr(value, "warp", None)
    return inner if isinstance(inner, wp.array) else value


NO_KEY = object()
""":func:`layout_key` of an argument that is not device memory (host data: copied or staged at each call)."""


def layout_key(value: Any) -> Any:
    """What decides how an argument in device memory is read in place, address first: a torch tensor's address,
    shape, strides, dtype and device; a Warp array's (inside an Isaac Lab ``ProxyArray`` too) address, shape,
    strides and dtype, and the array itself. ``None`` for ``None``, :data:`NO_KEY` for any other kind."""
    if value is None:
        return None
    kind = type(value)
    if kind is np.ndarray or kind is list:
        return NO_KEY
    if kind in _TORCH_TYPES:
        return (value.data_ptr(), value.shape, value.stride(), value.dtype, value.device)
    if kind is not wp.array:
        if is_torch_tensor(value):
            _TORCH_TYPES.add(kind)  # torch is not imported here: its tensor types are learnt as they come
            return layout_key(value)
        value = unwrap(value)
        if not isinstance(value, wp.array):
            return NO_KEY
    return (value.ptr, value.shape, value.strides, value.dtype, value)


def device_data(value: Any, dtype: Any, device: Any, casts: dict) -> wp.array | None:
    """``value`` as an (M,) ``dtype`` array the kernels read in place, when it lives on the view's ``device`` with
    unit column stride (rows may be strided: column slices of a wider tensor): Warp ``dtype`` arrays, Warp
    (M, width) float32 arrays and float32 torch tensors, zero-copy; other float torch tensors after one device
    cast (kept in ``casts`` under ``dtype``: the borrowed array owns nothing). ``None``: another kind, the general
    path converts it."""
    if isinstance(value, wp.array):
        if value.device is not device and value.device != device:
            return None
        if value.dtype == dtype and value.ndim == 1:
            return value
        if value.dtype == wp.float32 and value.ndim == 2:
            return rows_view(value, dtype)
        return None
    if type(value) not in _TORCH_TYPES:
        if not is_torch_tensor(value):
            return None
        _TORCH_TYPES.add(type(value))  # torch is not imported here: its tensor types are learnt as they come
    array = borrow_rows_on(value, dtype, device)
    if array is not None:
        return array
    if not torch_on(value, device):
        return None
    width = width_of(dtype)
    if value.is_floating_point() and value.dtype != sys.modules["torch"].float32:
        cast = value.detach().to(dtype=sys.modules["torch"].float32)  # one device cast
        array = borrow_rows(cast, dtype, width)
        casts[dtype] = cast  # keep the cast alive past the call's launches
    return array


def float32_rows(value: Any, name: str, width: int, device: Any, device_rows: bool) -> tuple[Any, bool]:
    """Any accepted array type -> (float32 rows of shape (M, width), whether it came from the host): a Warp array,
    zero-copy when possible, or, for a CUDA view (``device``), host data as NumPy (the caller stages it).
    ``device_rows``: the view's kernels check device data (a CPU Warp array then counts as device data)."""
    expected = f"(M, {width}) floating-point"
    if isinstance(value, wp.array):
        value, from_host = _warp_float32_rows(value, name, width, expected, device, device_rows)
    elif is_torch_tensor(value):
        value, from_host = _torch_float32_rows(value, name, width, expected)
    else:
        value, from_host = _host_float32_rows(value, name, expected), True
    if isinstance(value, np.ndarray):
        if value.ndim != 2 or value.shape[1] != width:
            raise ValueError(f"{name}: expected shape (M, {width}), got {tuple(value.shape)}")
        if device.is_cuda:  # the caller checks and stages it (_staged_rows)
            return value, from_host
        value = wp.array(value, dtype=wp.float32, device=device, copy=False)
    if value.ndim != 2 or value.shape[1] != width:
        raise ValueError(f"{name}: expected shape (M, {width}), got {tuple(value.shape)}")
    return value, from_host


def _warp_float32_rows(
    value: wp.array, name: str, width: int, expected: str, device: Any, device_rows: bool
) -> tuple[Any, bool]:
    """A Warp array -> (float32 rows: a Warp view or a host copy, whether it came from the host)."""
    from_host = value.device.is_cpu and not (device.is_cpu and device_rows)
    if width_of(value.dtype) == width and value.ndim == 1 and value.dtype in (wp.vec3f, wp.quatf, wp.vec4f):
        value = value.view(wp.float32).reshape((value.shape[0], width))
    elif value.dtype in (wp.vec3d, wp.quatd, wp.vec4d) and value.ndim == 1 and width_of(value.dtype) == width:
        return to_numpy(value).astype(np.float32), True
    elif value.dtype in (wp.float32, wp.float64) and value.ndim == 2:
        if value.dtype == wp.float64 or not value.is_contiguous:
            return to_numpy(value).astype(np.float32), True
    else:
        kinds = "vec3f/vec3d" if width == 3 else "quatf/quatd/vec4f/vec4d"
        numeric = wp.types.type_is_int(value.dtype) or value.dtype == wp.bool
        raise TypeError(
            f"{name}: expected {expected} data (a Warp array of float32/float64, or (M,) {kinds}), got a Warp array "
            f"of dtype {wp.types.type_repr(value.dtype)}{_integer_hint(numeric)}"
        )
    return value, from_host


def wait_for_producer(array: wp.array) -> None:
    """Before copying an input that lives on another GPU: wait until that device finished producing it (whatever
    stream, Warp's or torch's, wrote it). A host wait, on the cross-device path only: pass inputs on the view's own
    device to keep the reset path free of host round trips."""
    if array.device.is_cuda:
        with CAPTURE_LOCK:  # Warp refuses the wait while any view of the device captures
            wp.synchronize_device(array.device)


def _torch_float32_rows(value: Any, name: str, width: int, expected: str) -> tuple[wp.array, bool]:
    """A torch tensor -> (a float32 wp.array2d over it, whether it came from the host)."""
    if not value.is_floating_point():
        raise TypeError(
            f"{name}: expected {expected} data (float16, bfloat16, float32 or float64), got a torch tensor of dtype "
            f"{value.dtype}{_integer_hint(True)}"
        )
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
        raise TypeError(
            f"{name}: expected {expected} data (float16, float32 or float64), got dtype {host.dtype}"
            f"{_integer_hint(host.dtype.kind in 'iub')}"
        )
    return np.ascontiguousarray(host, dtype=np.float32)


def _integer_hint(numeric: bool) -> str:
    """What to do with integer or boolean data (refused rather than guessed at)."""
    if not numeric:
        return ""
    return "; integers and booleans are not converted: pass floats (np.asarray(x, np.float32), tensor.float())"


def width_of(dtype: Any) -> int:
    """Number of scalars in one element of a Warp dtype (3 for vec3f, 4 for quatf, 1 for scalars)."""
    return int(getattr(dtype, "_length_", 1))


def check_host_rows(host: np.ndarray, rows: np.ndarray | None, name: str, check_norm: bool) -> None:
    """Raise ``ValueError`` naming the first of ``rows`` (all when ``None``) of ``host`` (M, width) that holds a
    non-finite value (or, ``check_norm``, a zero-norm quaternion)."""
    part = host if rows is None else host[rows]
    if np.isfinite(part).all() and (not check_norm or not part.size or _least_square_norm(part) >= 2.0e-12):
        return  # the usual case, in a few array operations
    bad = ~np.isfinite(part).all(axis=1)
    if check_norm:  # in float64: a float32 square of a large (valid) component overflows
        wide = part.astype(np.float64)
        bad |= (wide * wide).sum(axis=1) < 1.0e-12
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        row = first if rows is None else int(rows[first])
        values = host[row].tolist()
        what = "a zero-norm quaternion" if np.all(np.isfinite(values)) else "a non-finite value"
        raise ValueError(f"{name}: row {row} holds {what} {values}; nothing was written")


def _least_square_norm(part: np.ndarray) -> float:
    """The smallest squared norm of the rows of ``part`` (M, width), finite, in its own precision: one product
    and one reduction (an axis-1 reduction of rows this short costs ten times as much). Within rounding of the
    float64 value, or ``inf`` where a large component's square overflows: only a value well above the zero-norm
    threshold lets a write skip the exact check."""
    with np.errstate(over="ignore"):  # an overflowing square is a large norm: inf passes, as it should
        return float(((part * part) @ np.ones(part.shape[1], dtype=part.dtype)).min())

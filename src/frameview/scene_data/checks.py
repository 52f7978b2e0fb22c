# SPDX-License-Identifier: Apache-2.0
"""Argument checks of :class:`~frameview.scene_data.SceneDataProvider`: transform sources, mappings, row counts and
output arrays, each validated once at the API boundary (dtype, shape, device) with an "expected X, got Y" error."""

from __future__ import annotations

import sys
from typing import Any, NamedTuple, Union

import numpy as np
import warp as wp

from .._core.interop import borrow_indices, borrow_rows
from .._core.rows import is_torch_tensor
from .._core.values import unwrap

__all__ = ["Source", "TransformSource", "check_mapping", "check_outputs", "resolve_source", "row_count"]


TransformSource = Union[wp.array, tuple[wp.array, wp.array]]
"""Matrices (N,) ``wp.mat44d`` / (N, 4, 4) float64, or (positions (N, 3) float32, orientations (N, 4) float32 xyzw)."""


class Source(NamedTuple):
    """A validated transform source: either ``matrices`` or ``positions`` + ``orientations`` is set."""

    count: int
    matrices: wp.array | None = None
    positions: wp.array | None = None
    orientations: wp.array | None = None


def _as_vector_array(value: Any, name: str, vec_type: type, scalar: type, width: int, device: wp.Device) -> wp.array:
    """Check that ``value`` is a Warp array of ``vec_type`` (N,) or ``scalar`` (N, width) on ``device``.

    Returns it as a (N,) array of ``vec_type`` (a zero-copy view for the scalar form).
    """
    expected = f"wp.{vec_type.__name__} (N,) or {scalar.__name__} (N, {width})"
    value = unwrap(value)
    if is_torch_tensor(value):  # zero-copy; rows may be strided (column slices of a wider tensor)
        borrowed = borrow_rows(value, vec_type, width)
        if borrowed is None:
            raise TypeError(
                f"{name}: expected a float32 (N, {width}) torch tensor with unit column stride, got dtype "
                f"{value.dtype}, shape {tuple(value.shape)}, strides {value.stride()}"
            )
        value = borrowed
    if not isinstance(value, wp.array):
        raise TypeError(
            f"{name}: expected a Warp array of {expected}, got {type(value).__name__}; "
            "wrap NumPy data with wp.array(..., device=...); torch tensors are taken as they are"
        )
    if value.dtype == vec_type:
        if value.ndim != 1:
            raise ValueError(f"{name}: expected shape (N,) for dtype wp.{vec_type.__name__}, got {value.shape}")
        result = value
    elif value.dtype == scalar:
        if value.ndim != 2 or value.shape[1] != width:
            raise ValueError(f"{name}: expected shape (N, {width}) for dtype {scalar.__name__}, got {value.shape}")
        if value.shape[0] > 0 and value.strides[1] != wp.types.type_size_in_bytes(scalar):
            raise ValueError(
                f"{name}: expected rows contiguous in their last dimension, got strides {value.strides}; "
                "pass a contiguous copy"
            )
        result = value.view(vec_type)
    else:
        raise TypeError(f"{name}: expected dtype {expected}, got {wp.types.type_repr(value.dtype)} {value.shape}")
    if value.device != device:
        raise ValueError(
            f"{name}: expected an array on {device} (the provider's device), got one on {value.device}; "
            f"move it with .to('{device}')"
        )
    return result


def _as_matrix_array(value: wp.array, name: str, device: wp.Device) -> wp.array:
    """Check that ``value`` is (N,) ``wp.mat44d`` or (N, 4, 4) float64 on ``device``; return it as (N,) mat44d."""
    if value.dtype == wp.mat44d and value.ndim == 1:
        result = value
    elif value.dtype == wp.float64 and value.ndim == 3 and value.shape[1:] == (4, 4):
        if value.shape[0] > 0 and value.strides[1:] != (32, 8):
            raise ValueError(
                f"{name}: expected each 4x4 matrix contiguous, got strides {value.strides}; pass a contiguous copy"
            )
        result = value.view(wp.mat44d)
    elif value.dtype in (wp.mat44d, wp.float64):
        raise ValueError(f"{name}: expected shape (N,) of wp.mat44d or (N, 4, 4) float64, got {value.shape}")
    else:
        raise TypeError(
            f"{name}: expected wp.mat44d (N,) or float64 (N, 4, 4) matrices, "
            f"got {wp.types.type_repr(value.dtype)} {value.shape}"
        )
    if value.device != device:
        raise ValueError(
            f"{name}: expected an array on {device} (the provider's device), got one on {value.device}; "
            "create the provider on the device of its data"
        )
    return result


def resolve_source(value: Any, count: int, device: wp.Device) -> Source:
    """Validate a transform source (see :data:`TransformSource`) against the provider's paths and device."""
    value = unwrap(value)
    if is_torch_tensor(value):  # (N, 4, 4) float64 matrices, zero-copy
        if value.dtype != sys.modules["torch"].float64 or tuple(value.shape[1:]) != (4, 4):
            raise TypeError(f"transforms: expected (N, 4, 4) float64 matrices, got a {value.dtype} tensor of shape "
                            f"{tuple(value.shape)}")  # fmt: skip
        value = wp.from_torch(value.detach(), dtype=wp.float64)
    if isinstance(value, wp.array):
        matrices = _as_matrix_array(value, "transforms", device)
        source = Source(count=matrices.shape[0], matrices=matrices)
    elif isinstance(value, (tuple, list)) and len(value) == 2:
        positions = _as_vector_array(value[0], "transforms positions", wp.vec3f, wp.float32, 3, device)
        orientations = _as_vector_array(value[1], "transforms orientations", wp.quatf, wp.float32, 4, device)
        if positions.shape[0] != orientations.shape[0]:
            raise ValueError(
                f"transforms: expected as many orientations as positions, got {positions.shape[0]} positions "
                f"and {orientations.shape[0]} orientations"
            )
        source = Source(count=positions.shape[0], positions=positions, orientations=orientations)
    else:
        raise TypeError(
            "transforms: expected a Warp array of matrices ((N,) wp.mat44d or (N, 4, 4) float64), a tuple "
            f"(positions, orientations), or a callable returning one of them, got {type(value).__name__}"
        )
    if source.count != count:
        raise ValueError(
            f"transforms: expected {count} rows (one per path), got {source.count}; the source and its paths "
            "must have the same length and order"
        )
    return source


def check_mapping(mapping: Any, device: wp.Device) -> wp.array:
    """Check that ``mapping`` is a (M,) int32 array on ``device`` (from ``create_mapping``): a Warp array, or a torch
    tensor or ``ProxyArray``-like (viewed as a Warp array without a copy); return the Warp array."""
    mapping = unwrap(mapping)
    if is_torch_tensor(mapping):
        if mapping.dtype != sys.modules["torch"].int32:
            raise TypeError(f"mapping: expected dtype int32, got a torch tensor of dtype {mapping.dtype}; build it "
                            "with create_mapping")  # fmt: skip
        mapping = borrow_indices(mapping)
    if not isinstance(mapping, wp.array):
        raise TypeError(
            f"mapping: expected a Warp int32 array (from create_mapping) or None, got {type(mapping).__name__}"
        )
    if mapping.dtype != wp.int32:
        raise TypeError(
            f"mapping: expected dtype int32, got {wp.types.type_repr(mapping.dtype)}; build it with "
            "create_mapping or wp.array(values, dtype=wp.int32)"
        )
    if mapping.ndim != 1:
        raise ValueError(f"mapping: expected shape (M,), got {mapping.shape}")
    if mapping.device != device:
        raise ValueError(f"mapping: expected an array on {device} (the provider's device), got one on {mapping.device}")
    return mapping


def row_count(count: Any, available: int, what: str) -> int:
    """The number of rows a gather writes: ``count``, checked against ``available`` (``what`` names it), or all."""
    if count is None:
        return available
    if isinstance(count, bool) or not isinstance(count, (int, np.integer)):
        raise TypeError(f"count: expected an int or None, got {type(count).__name__}")
    rows = int(count)
    if not 0 <= rows <= available:
        raise ValueError(f"count: expected 0 <= count <= {available} ({what}), got {rows}")
    return rows


def check_outputs(
    outputs: tuple[Any, Any, Any], rows: int, exact: bool, what: str, device: wp.Device
) -> tuple[wp.array | None, wp.array | None, wp.array | None]:
    """Check the (positions, orientations, scales) outputs of a gather; return them as vector arrays.

    Args:
        outputs: (M,) ``wp.vec3f`` / ``wp.quatf`` / ``wp.vec3f`` arrays or their (M, 3/4/3) float32 forms, or None.
        rows: The rows the gather writes.
        exact: True when the outputs must have exactly ``rows`` rows (no ``count`` given), else at least.
        what: What ``rows`` is, for the error message ("the mapping's length").
        device: The provider's device.
    """
    checked: list[wp.array | None] = []
    for value, (name, vec_type, width) in zip(outputs, _OUTPUTS, strict=True):
        if value is None:
            checked.append(None)
            continue
        array = _as_vector_array(value, name, vec_type, wp.float32, width, device)
        n = array.shape[0]
        if (exact and n != rows) or n < rows:
            expected = f"{rows} rows ({what})" if exact else f"at least count={rows} rows"
            raise ValueError(f"{name}: expected {expected}, got {n}")
        checked.append(array)
    return checked[0], checked[1], checked[2]


_OUTPUTS = (("positions", wp.vec3f, 3), ("orientations", wp.quatf, 4), ("scales", wp.vec3f, 3))

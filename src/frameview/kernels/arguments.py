# SPDX-License-Identifier: Apache-2.0
"""Kernels of the argument checks every view shares: device values checked for non-finite values and zero
quaternions, wider index dtypes narrowed to int32, and the scatter of host-bound backends' masked reads."""

from __future__ import annotations

import warp as wp

from .._rows import CODE_VALUE_NOT_FINITE, CODE_ZERO_QUATERNION, report

__all__ = ["check_values", "narrow_indices", "narrow_indices_u32", "scatter_quat", "scatter_vec3"]


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

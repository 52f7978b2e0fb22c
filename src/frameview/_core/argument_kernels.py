# SPDX-License-Identifier: Apache-2.0
"""Internal: the kernels of the argument checks every view shares (:mod:`.arguments`, :mod:`.dispatch`, the writer
scopes): device values checked for non-finite values and zero quaternions, wider index dtypes narrowed to int32, the
scatter of host-bound backends' masked reads, and a writer scope's stash of a held write."""

from __future__ import annotations

from typing import Any

import warp as wp

from .device_errors import CODE_VALUE_NOT_FINITE, CODE_ZERO_QUATERNION, report

__all__ = [
    "INDEX_DTYPES",
    "check_values",
    "copy_write_row",
    "narrow_indices",
    "narrow_kernel",
    "scatter_quat",
    "scatter_vec3",
    "stash_write",
]


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
    indices: wp.array(dtype=Any),
    count: int,
    # outputs
    out: wp.array(dtype=wp.int32),
):
    """Integer view indices of any Warp integer dtype (strided or not) -> contiguous int32; out-of-range values
    -> -1 (the kernels reading them report it)."""
    k = wp.tid()
    v = wp.int64(indices[k])
    if v < wp.int64(0) or v >= wp.int64(count):
        out[k] = -1
    else:
        out[k] = wp.int32(v)


@wp.kernel(enable_backward=False)
def narrow_indices_u64(
    # inputs
    indices: wp.array(dtype=wp.uint64),
    count: int,
    # outputs
    out: wp.array(dtype=wp.int32),
):
    """uint64 view indices -> int32, out-of-range values -> -1 (compared unsigned: no value wraps into range)."""
    k = wp.tid()
    v = indices[k]
    if v >= wp.uint64(count):
        out[k] = -1
    else:
        out[k] = wp.int32(v)


INDEX_DTYPES = (wp.int8, wp.uint8, wp.int16, wp.uint16, wp.int32, wp.uint32, wp.int64, wp.uint64)
"""The Warp dtypes accepted as view indices."""

for _dtype in INDEX_DTYPES[:-1]:  # one overload per dtype, compiled with the module (uint64: narrow_indices_u64)
    wp.overload(narrow_indices, {"indices": wp.array(dtype=_dtype)})


def narrow_kernel(dtype: type) -> wp.Kernel:
    """The narrowing kernel for view indices of Warp dtype ``dtype`` (one of :data:`INDEX_DTYPES`)."""
    return narrow_indices_u64 if dtype == wp.uint64 else narrow_indices


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


@wp.func
def copy_write_row(
    k: int,
    kind: int,
    index: int,
    mask: wp.array(dtype=wp.bool),
    has_pos: int,
    pos: wp.array(dtype=wp.vec3f),
    has_quat: int,
    quat: wp.array(dtype=wp.quatf),
    has_scale: int,
    scale: wp.array(dtype=wp.vec3f),
    indices_out: wp.array(dtype=wp.int32),
    mask_out: wp.array(dtype=wp.bool),
    pos_out: wp.array(dtype=wp.vec3f),
    quat_out: wp.array(dtype=wp.quatf),
    scale_out: wp.array(dtype=wp.vec3f),
):
    """Row ``k`` of a write into a writer scope's copy: ``index`` (``kind`` 1: the row's view index) or the mask bit
    (``kind`` 2), and each component present, as given (unnormalised)."""
    if kind == 1:
        indices_out[k] = index
    elif kind == 2:
        mask_out[k] = mask[k]
    if has_pos != 0:
        pos_out[k] = pos[k]
    if has_quat != 0:
        quat_out[k] = quat[k]
    if has_scale != 0:
        scale_out[k] = scale[k]


@wp.kernel(enable_backward=False)
def stash_write(
    # inputs
    kind: int,
    indices: wp.array(dtype=wp.int32),
    mask: wp.array(dtype=wp.bool),
    has_pos: int,
    pos: wp.array(dtype=wp.vec3f),
    has_quat: int,
    quat: wp.array(dtype=wp.quatf),
    has_scale: int,
    scale: wp.array(dtype=wp.vec3f),
    # outputs
    indices_out: wp.array(dtype=wp.int32),
    mask_out: wp.array(dtype=wp.bool),
    pos_out: wp.array(dtype=wp.vec3f),
    quat_out: wp.array(dtype=wp.quatf),
    scale_out: wp.array(dtype=wp.vec3f),
):
    """A writer scope's copy of one held write (its rows and data) into the scope's own buffers, in one launch
    (:func:`copy_write_row`; a write made at its call is copied by its own solve, with the same function)."""
    k = wp.tid()
    index = int(0)
    if kind == 1:
        index = indices[k]
    copy_write_row(k, kind, index, mask, has_pos, pos, has_quat, quat, has_scale, scale, indices_out, mask_out,
                   pos_out, quat_out, scale_out)  # fmt: skip

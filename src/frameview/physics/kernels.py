# SPDX-License-Identifier: Apache-2.0
"""The typed physics views' kernels: one gather launch per getter, from the engine's own arrays.

Every kernel runs over ``(call rows, columns)``: a column is a link of an articulation or one of its DOFs (one
column for a rigid body or an articulation root). ``table[view row, column]`` is the index of the element in the
engine's array, resolved once at construction. Rows are ``(kind, indices, mask, count)`` as for the frame views
(:mod:`frameview._core.rows`), with the caller's device indices as they are (any integer dtype, strided); an index
out of range is recorded in the view's status word (:mod:`frameview._core.device_errors`) and its row is left
untouched.
"""

from __future__ import annotations

from typing import Any

import warp as wp

from .._core.device_errors import CODE_INDEX_RANGE, report
from .._core.rows import INDEXED, MASK

__all__ = ["call_row", "gather_dof_values", "gather_joint_state", "gather_transforms", "gather_twists", "gather_values"]

_INDEXED = wp.constant(INDEXED)
_MASK = wp.constant(MASK)


@wp.func
def call_row(k: int, kind: int, indices: Any, mask: wp.array(dtype=wp.bool), count: int):
    """The view row of call row ``k``: -1 masked out, -2 an index out of range. ``indices`` are the caller's, of any
    integer dtype and strides (no narrowing launch); the range check runs in 64 bits, so that no 64-bit index
    (``2**32 + 3``, ``-2**32``, ``2**64 - 1``) wraps into range."""
    if kind == _INDEXED:
        v = wp.int64(indices[k])
        if v < wp.int64(0) or v >= wp.int64(count):
            return -2
        return int(v)
    if kind == _MASK:  # noqa: SIM102 - Warp does not short-circuit: mask is empty unless kind is MASK
        if not mask[k]:
            return -1
    return k


@wp.func
def _view_row(
    k: int,
    kind: int,
    indices: Any,
    mask: wp.array(dtype=wp.bool),
    count: int,
    status: wp.array(dtype=wp.int32),
    column: int,
):
    """:func:`call_row`, an index out of range recorded (once per row) and returned as -1."""
    row = call_row(k, kind, indices, mask, count)
    if row == -2:
        if column == 0:
            report(status, k, CODE_INDEX_RANGE)
        return -1
    return row


@wp.kernel(enable_backward=False)
def gather_transforms(
    kind: int,
    indices: wp.array(dtype=Any),
    mask: wp.array(dtype=wp.bool),
    count: int,
    table: wp.array2d(dtype=wp.int32),
    transforms: wp.array(dtype=wp.transformf),
    positive_w: int,
    status: wp.array(dtype=wp.int32),
    pos_out: wp.array2d(dtype=wp.vec3f),
    quat_out: wp.array2d(dtype=wp.quatf),
):
    """Poses from an engine's ``transformf`` array (Newton's ``body_q``); quaternions xyzw, returned with w >= 0
    (``positive_w``) or with the sign the engine holds."""
    k, c = wp.tid()
    row = _view_row(k, kind, indices, mask, count, status, c)
    if row < 0:
        return
    t = transforms[table[row, c]]
    q = wp.transform_get_rotation(t)
    if positive_w != 0 and q[3] < 0.0:
        q = -q
    pos_out[k, c] = wp.transform_get_translation(t)
    quat_out[k, c] = q


@wp.kernel(enable_backward=False)
def gather_twists(
    kind: int,
    indices: wp.array(dtype=Any),
    mask: wp.array(dtype=wp.bool),
    count: int,
    table: wp.array2d(dtype=wp.int32),
    twists: wp.array(dtype=wp.spatial_vectorf),
    status: wp.array(dtype=wp.int32),
    linear_out: wp.array2d(dtype=wp.vec3f),
    angular_out: wp.array2d(dtype=wp.vec3f),
):
    """Linear (first three) and angular (last three) parts of an engine's ``spatial_vectorf`` array."""
    k, c = wp.tid()
    row = _view_row(k, kind, indices, mask, count, status, c)
    if row < 0:
        return
    v = twists[table[row, c]]
    linear_out[k, c] = wp.spatial_top(v)
    angular_out[k, c] = wp.spatial_bottom(v)


@wp.kernel(enable_backward=False)
def gather_values(
    kind: int,
    indices: wp.array(dtype=Any),
    mask: wp.array(dtype=wp.bool),
    count: int,
    table: wp.array2d(dtype=wp.int32),
    values: wp.array(dtype=Any),
    status: wp.array(dtype=wp.int32),
    out: wp.array2d(dtype=Any),
):
    """One engine array, element by element (masses, inertias, centres of mass, DOF values)."""
    k, c = wp.tid()
    row = _view_row(k, kind, indices, mask, count, status, c)
    if row < 0:
        return
    out[k, c] = values[table[row, c]]


@wp.kernel(enable_backward=False)
def gather_dof_values(
    kind: int,
    indices: wp.array(dtype=Any),
    mask: wp.array(dtype=wp.bool),
    count: int,
    table: wp.array2d(dtype=wp.int32),
    values: wp.array(dtype=wp.float32),
    dof_sign: wp.array(dtype=wp.float32),
    status: wp.array(dtype=wp.int32),
    out: wp.array2d(dtype=wp.float32),
):
    """One DOF quantity, ``values[table[row, c]] * dof_sign[c]`` (see :func:`gather_joint_state`)."""
    k, c = wp.tid()
    row = _view_row(k, kind, indices, mask, count, status, c)
    if row < 0:
        return
    out[k, c] = values[table[row, c]] * dof_sign[c]


@wp.kernel(enable_backward=False)
def gather_joint_state(
    kind: int,
    indices: wp.array(dtype=Any),
    mask: wp.array(dtype=wp.bool),
    count: int,
    q_table: wp.array2d(dtype=wp.int32),
    qd_table: wp.array2d(dtype=wp.int32),
    joint_q: wp.array(dtype=wp.float32),
    joint_qd: wp.array(dtype=wp.float32),
    joint_f: wp.array(dtype=wp.float32),
    dof_sign: wp.array(dtype=wp.float32),
    has_effort: int,
    status: wp.array(dtype=wp.int32),
    pos_out: wp.array2d(dtype=wp.float32),
    vel_out: wp.array2d(dtype=wp.float32),
    effort_out: wp.array2d(dtype=wp.float32),
):
    """DOF positions, velocities and (``has_effort``) efforts of every articulation row in one launch, each times
    ``dof_sign[c]``: -1 where the engine reports DOF column ``c`` against the view's parent-to-child convention
    (ovphysx, a joint authored with ``body0`` the child; the effort conjugate to a negated coordinate is negated
    too), else 1."""
    k, c = wp.tid()
    row = _view_row(k, kind, indices, mask, count, status, c)
    if row < 0:
        return
    s = dof_sign[c]
    d = qd_table[row, c]
    pos_out[k, c] = joint_q[q_table[row, c]] * s
    vel_out[k, c] = joint_qd[d] * s
    if has_effort != 0:
        effort_out[k, c] = joint_f[d] * s

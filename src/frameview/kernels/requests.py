# SPDX-License-Identifier: Apache-2.0
"""A write's request rows, checked and solved on the device: shared by every backend's write kernels.

A write passes its components as arrays (``pos`` / ``quat`` / ``scale``, each with a ``set_*`` flag; unset ones may
be empty arrays). :func:`request_ok` reports a row holding a non-finite value or a zero quaternion into the view's
status word; :func:`solve_request` turns a row into the prim's new local matrix with :func:`solve_local`.
"""

from __future__ import annotations

import warp as wp

from .._rows import (
    CODE_QUAT_NOT_FINITE,
    CODE_RESULT_NOT_FINITE,
    CODE_SHEAR,
    CODE_SINGULAR_PARENT,
    CODE_VALUE_NOT_FINITE,
    CODE_ZERO_QUATERNION,
    report,
)
from .transforms import WRITE_NOT_FINITE, WRITE_SHEAR, WRITE_SINGULAR_PARENT, solve_local

__all__ = ["load_request", "report_solve", "request_ok", "solve_request", "solve_values", "values_ok"]


@wp.func
def load_request(
    r: int,
    set_pos: int,
    pos: wp.array(dtype=wp.vec3f),
    set_quat: int,
    quat: wp.array(dtype=wp.quatf),
    set_scale: int,
    scale: wp.array(dtype=wp.vec3f),
):
    """Request row ``r``'s components as given (float32); the unset ones zero, or the identity rotation."""
    t = wp.vec3f()
    q = wp.quatf(0.0, 0.0, 0.0, 1.0)
    s = wp.vec3f()
    if set_pos != 0:
        t = pos[r]
    if set_quat != 0:
        q = quat[r]
    if set_scale != 0:
        s = scale[r]
    return t, q, s


@wp.func
def values_ok(
    r: int,
    set_pos: int,
    t: wp.vec3f,
    set_quat: int,
    q: wp.quatf,
    set_scale: int,
    s: wp.vec3f,
    status_out: wp.array(dtype=wp.int32),
):
    """Check request row ``r``'s components (:func:`load_request`: non-finite values, zero quaternion); report and
    return False when bad."""
    ok = True
    if set_pos != 0:
        for a in range(3):
            if not wp.isfinite(t[a]):
                ok = False
    if set_scale != 0:
        for a in range(3):
            if not wp.isfinite(s[a]):
                ok = False
    if not ok:
        report(status_out, r, CODE_VALUE_NOT_FINITE)
    if set_quat != 0:
        finite = True
        for a in range(4):
            if not wp.isfinite(q[a]):
                finite = False
        if not finite:
            report(status_out, r, CODE_QUAT_NOT_FINITE)
            ok = False
        elif q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3] < 1.0e-12:
            report(status_out, r, CODE_ZERO_QUATERNION)
            ok = False
    return ok


@wp.func
def request_ok(
    r: int,
    set_pos: int,
    pos: wp.array(dtype=wp.vec3f),
    set_quat: int,
    quat: wp.array(dtype=wp.quatf),
    set_scale: int,
    scale: wp.array(dtype=wp.vec3f),
    status_out: wp.array(dtype=wp.int32),
):
    """Check the request row ``r`` (non-finite values, zero quaternion); report and return False when bad."""
    t, q, s = load_request(r, set_pos, pos, set_quat, quat, set_scale, scale)
    return values_ok(r, set_pos, t, set_quat, q, set_scale, s, status_out)


@wp.func
def solve_values(
    local: wp.mat44d,
    parent_world: wp.mat44d,
    in_world: int,
    set_pos: int,
    t: wp.vec3f,
    set_quat: int,
    q: wp.quatf,
    set_scale: int,
    s: wp.vec3f,
):
    """:func:`~frameview.kernels.transforms.solve_local` of a request's components (:func:`load_request`)."""
    return solve_local(local, parent_world, in_world, set_pos, wp.vec3d(t), set_quat, wp.quatd(q), set_scale,
                       wp.vec3d(s))  # fmt: skip


@wp.func
def solve_request(
    local: wp.mat44d,
    parent_world: wp.mat44d,
    r: int,
    in_world: int,
    set_pos: int,
    pos: wp.array(dtype=wp.vec3f),
    set_quat: int,
    quat: wp.array(dtype=wp.quatf),
    set_scale: int,
    scale: wp.array(dtype=wp.vec3f),
):
    """:func:`solve_values` of request row ``r``."""
    t, q, s = load_request(r, set_pos, pos, set_quat, quat, set_scale, scale)
    return solve_values(local, parent_world, in_world, set_pos, t, set_quat, q, set_scale, s)


@wp.func
def report_solve(status_out: wp.array(dtype=wp.int32), r: int, status: int):
    """Report the ``WRITE_*`` status of :func:`solve_local` for request row ``r`` (nothing for ``WRITE_OK``)."""
    if status == WRITE_SINGULAR_PARENT:
        report(status_out, r, CODE_SINGULAR_PARENT)
    elif status == WRITE_SHEAR:
        report(status_out, r, CODE_SHEAR)
    elif status == WRITE_NOT_FINITE:
        report(status_out, r, CODE_RESULT_NOT_FINITE)

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

__all__ = ["report_solve", "request_ok", "solve_request"]


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
    ok = True
    if set_pos != 0:
        for a in range(3):
            if not wp.isfinite(pos[r][a]):
                ok = False
    if set_scale != 0:
        for a in range(3):
            if not wp.isfinite(scale[r][a]):
                ok = False
    if not ok:
        report(status_out, r, CODE_VALUE_NOT_FINITE)
    if set_quat != 0:
        q = quat[r]
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
    t = wp.vec3d()
    q = wp.quatd(wp.float64(0.0), wp.float64(0.0), wp.float64(0.0), wp.float64(1.0))
    s = wp.vec3d()
    if set_pos != 0:
        t = wp.vec3d(pos[r])
    if set_quat != 0:
        q = wp.quatd(quat[r])
    if set_scale != 0:
        s = wp.vec3d(scale[r])
    return solve_local(local, parent_world, in_world, set_pos, t, set_quat, q, set_scale, s)


@wp.func
def report_solve(status_out: wp.array(dtype=wp.int32), r: int, status: int):
    """Report the ``WRITE_*`` status of :func:`solve_local` for request row ``r`` (nothing for ``WRITE_OK``)."""
    if status == WRITE_SINGULAR_PARENT:
        report(status_out, r, CODE_SINGULAR_PARENT)
    elif status == WRITE_SHEAR:
        report(status_out, r, CODE_SHEAR)
    elif status == WRITE_NOT_FINITE:
        report(status_out, r, CODE_RESULT_NOT_FINITE)

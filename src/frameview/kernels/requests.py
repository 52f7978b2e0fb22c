# SPDX-License-Identifier: Apache-2.0
"""A write's request rows, checked and solved on the device: shared by every backend's write kernels.

A write passes its components as arrays (``pos`` / ``quat`` / ``scale``, each with a ``set_*`` flag; unset ones may
be empty arrays). :func:`request_ok` reports a row holding a non-finite value or a zero quaternion into the view's
status word; :func:`solve_request` turns a row into the prim's new local matrix with :func:`solve_local`.
:func:`request_values` and :func:`values_ok` are the two halves of :func:`request_ok`, for kernels that load a row
before their first branch.
"""

from __future__ import annotations

import warp as wp

from .._device_errors import (
    CODE_QUAT_NOT_FINITE,
    CODE_RESULT_NOT_FINITE,
    CODE_SHEAR,
    CODE_SINGULAR_PARENT,
    CODE_VALUE_NOT_FINITE,
    CODE_ZERO_QUATERNION,
    report,
)
from .transforms import WRITE_NOT_FINITE, WRITE_SHEAR, WRITE_SINGULAR_PARENT, solve_local

__all__ = ["report_solve", "request_ok", "request_values", "solve_request", "values_ok"]


@wp.func
def request_values(
    r: int,
    set_pos: int,
    pos: wp.array(dtype=wp.vec3f),
    set_quat: int,
    quat: wp.array(dtype=wp.quatf),
    set_scale: int,
    scale: wp.array(dtype=wp.vec3f),
):
    """The request row ``r`` in float64: translation, xyzw quaternion and scale (zeros / the identity where unset).
    A kernel loads them before its first branch on a loaded value, so that their latency overlaps the others'."""
    t = wp.vec3d()
    q = wp.quatd(wp.float64(0.0), wp.float64(0.0), wp.float64(0.0), wp.float64(1.0))
    s = wp.vec3d()
    if set_pos != 0:
        t = wp.vec3d(pos[r])
    if set_quat != 0:
        q = wp.quatd(quat[r])
    if set_scale != 0:
        s = wp.vec3d(scale[r])
    return t, q, s


@wp.func
def values_ok(
    r: int,
    set_pos: int,
    t: wp.vec3d,
    set_quat: int,
    q: wp.quatd,
    set_scale: int,
    s: wp.vec3d,
    status_out: wp.array(dtype=wp.int32),
):
    """Check the values of request row ``r`` (:func:`request_values`: non-finite values, zero quaternion); report
    and return False when bad."""
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
        elif wp.dot(q, q) < wp.float64(1.0e-12):
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
    t, q, s = request_values(r, set_pos, pos, set_quat, quat, set_scale, scale)
    return values_ok(r, set_pos, t, set_quat, q, set_scale, s, status_out)


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
    """:func:`solve_local` of request row ``r``: the prim's new local matrix and a ``WRITE_*`` status."""
    t, q, s = request_values(r, set_pos, pos, set_quat, quat, set_scale, scale)
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

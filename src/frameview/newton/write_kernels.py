# SPDX-License-Identifier: Apache-2.0
"""The Newton backend's write kernels: stage the rows of a write, solve each written frame's new local matrix, commit
them all or none (:meth:`~frameview.newton.view.NewtonFrameView` launches them; the frame model is
:mod:`frameview.newton.kernels`). A module of their own: Warp hashes and loads a module whole at its first launch,
so a view that only reads never pays for these.
"""

from __future__ import annotations

import warp as wp

from .._core.device_errors import CODE_INDEX_DUPLICATE, CODE_INDEX_RANGE, STATUS_OK, failed, report
from ..kernels.requests import WriteRequest, report_solve, request_values, solve_request, solve_values, values_ok
from ..kernels.transforms import (
    WRITE_SHEAR,
    WRITE_SINGULAR_PARENT,
    finite_status,
    kept_scale,
    unit_quat,
    with_translation,
    with_upper,
)
from .kernels import DIRECT, IDENTITY, body_matrix, cache_offset, view_row

__all__ = ["commit_writes", "solve_writes", "stage_rows"]

_STATUS_OK = wp.constant(STATUS_OK)


@wp.func
def _solve_on_body(loc: wp.mat44d, x: wp.transformf, req: WriteRequest, t: wp.vec3d, q: wp.quatd):
    """:func:`solve_values` of a world position ``t`` and/or orientation ``q`` write of a frame whose USD
    parent is its body, posed at ``x``: the parent's world matrix is that rigid pose, so the local pose is
    ``inverse(x)`` times the request in quaternion form, with no parent matrix, volume or Gram-Schmidt (the same
    matrix up to float64 rounding). The local scale (a mirror on x) is kept; an orientation write needs a shear-free
    local matrix (``WRITE_SHEAR``); a body orientation of zero norm is ``WRITE_SINGULAR_PARENT``, as its matrix is."""
    bq = wp.quatd(wp.transform_get_rotation(x))
    if not (wp.dot(bq, bq) > wp.float64(0.0)):  # zero or not finite: no parent frame
        return loc, WRITE_SINGULAR_PARENT
    inv = wp.quat_inverse(unit_quat(bq))
    out = loc
    if req.set_quat != 0:
        scale, sheared = kept_scale(loc)
        if sheared:
            return loc, WRITE_SHEAR
        out = with_upper(loc, scale, wp.transpose(wp.quat_to_matrix(unit_quat(inv * unit_quat(q)))))
    if req.set_pos != 0:
        out = with_translation(out, wp.quat_rotate(inv, t - wp.vec3d(wp.transform_get_translation(x))))
    return out, finite_status(out)


# ---------------------------------------------------------------- kernels


@wp.kernel(enable_backward=False)
def stage_rows(
    # inputs
    view_node: wp.array(dtype=wp.int32),
    count: int,
    kind: int,
    indices: wp.array(dtype=wp.int32),
    mask: wp.array(dtype=wp.bool),
    # outputs
    req_row_out: wp.array(dtype=wp.int32),
    status_out: wp.array(dtype=wp.int32),
):
    """``req_row_out[node of row k] = k`` (all -1 at rest); an index out of range or given twice is reported."""
    k = wp.tid()
    if failed(status_out):
        return
    i = view_row(k, kind, indices, mask, count)
    if i == -2:
        report(status_out, k, CODE_INDEX_RANGE)
        return
    if i < 0:
        return
    if wp.atomic_exch(req_row_out, view_node[i], k) != -1:
        report(status_out, k, CODE_INDEX_DUPLICATE)


@wp.kernel(enable_backward=False)
def solve_writes(
    # inputs
    local: wp.array(dtype=wp.mat44d),
    chain: wp.array(dtype=wp.mat44d),
    anchor: wp.array(dtype=wp.int32),
    body: wp.array(dtype=wp.int32),
    flags: wp.array(dtype=wp.int32),
    body_q: wp.array(dtype=wp.transformf),
    view_node: wp.array(dtype=wp.int32),
    count: int,
    kind: int,
    indices: wp.array(dtype=wp.int32),
    mask: wp.array(dtype=wp.bool),
    req_row: wp.array(dtype=wp.int32),
    req: WriteRequest,
    stage: int,
    # outputs
    local_out: wp.array(dtype=wp.mat44d),
    status_out: wp.array(dtype=wp.int32),
):
    """New local matrix of each written frame (into row-indexed scratch); nothing is committed here.

    A world write needs the parent's world matrix as it will be after the write: the anchors above the frame are
    composed top-down from the body's pose, solving those written by this call on the way (O(depth^2), depth
    usually 0 or 1). ``stage``: no frame of the store is anchored on another (no row reads another's request), so
    this launch also does :func:`stage_rows`' work (request rows, indices out of range or repeated): one launch less.
    """
    k = wp.tid()
    if failed(status_out):
        return
    i = view_row(k, kind, indices, mask, count)
    if stage != 0:
        if i == -2:
            report(status_out, k, CODE_INDEX_RANGE)
            return
        if i >= 0 and wp.atomic_exch(req_row, view_node[i], k) != -1:
            report(status_out, k, CODE_INDEX_DUPLICATE)
            return
    if i < 0:
        return
    t, q, s = request_values(k, req)
    if not values_ok(k, req, t, q, s, status_out):
        return
    n = view_node[i]
    b = body[n]
    if req.in_world != 0 and req.set_scale == 0 and b >= 0 and (flags[n] & DIRECT) != 0:
        m_body, status_body = _solve_on_body(local[n], body_q[b], req, t, q)
        report_solve(status_out, k, status_body)
        local_out[k] = m_body
        return
    pw = IDENTITY
    if req.in_world != 0:
        depth = int(0)
        a = anchor[n]
        while a >= 0:
            depth += 1
            a = anchor[a]
        w = body_matrix(body_q, b)
        for step in range(depth):
            node = n
            for _up in range(depth - step):
                node = anchor[node]
            above = chain[node] @ w
            loc = local[node]
            rr = req_row[node]
            if rr >= 0:
                loc, _st = solve_request(loc, above, rr, req)
            w = loc @ above
        pw = w
        if (flags[n] & DIRECT) == 0:  # a frame right below its body has the identity chain: no product
            pw = chain[n] @ w
    m, status = solve_values(local[n], pw, req, t, q, s)
    report_solve(status_out, k, status)
    local_out[k] = m


@wp.kernel(enable_backward=False)
def commit_writes(
    # inputs
    new_local: wp.array(dtype=wp.mat44d),
    view_node: wp.array(dtype=wp.int32),
    count: int,
    kind: int,
    indices: wp.array(dtype=wp.int32),
    mask: wp.array(dtype=wp.bool),
    status: wp.array(dtype=wp.int32),
    refresh: int,
    chain: wp.array(dtype=wp.mat44d),
    body: wp.array(dtype=wp.int32),
    body_q: wp.array(dtype=wp.transformf),
    req: WriteRequest,
    # outputs
    local_out: wp.array(dtype=wp.mat44d),
    req_row_out: wp.array(dtype=wp.int32),
    offsets_out: wp.array(dtype=wp.transformf),
    sheared_out: wp.array(dtype=wp.int32),
    signs_out: wp.array(dtype=wp.float32),
):
    """Store the solved local matrices unless any row of the call failed (then nothing is written); reset the
    request table either way. With ``refresh`` (no frame of the store is anchored on another: a written frame's
    offset is its new local matrix times its chain, and no other frame's depends on it) also update the written
    frames' cached offsets, in place of a :func:`refresh_offsets` launch over every frame."""
    k = wp.tid()
    i = view_row(k, kind, indices, mask, count)
    if i < 0:
        return
    n = view_node[i]
    req_row_out[n] = -1
    if status[0] == _STATUS_OK:
        m = new_local[k]
        local_out[n] = m
        if refresh != 0:  # refreshed here only when no frame is anchored
            direct = int(0)
            offset_m = m
            if (sheared_out[n] & DIRECT) != 0:  # its identity chain, known since the node was added
                direct = 1
            else:
                offset_m = m @ chain[n]
            cache_offset(n, offset_m, direct, body, offsets_out, sheared_out)
            if signs_out.shape[0] > 0 and req.in_world != 0 and req.set_quat != 0:
                # reads signed per row (:func:`read_poses`' ``signs``): the orientation written reads back with
                # the sign written (as Isaac Lab's Newton view stores inv(body) * written)
                q = wp.transform_get_rotation(offsets_out[n])
                b = body[n]
                if b >= 0:
                    q = wp.transform_get_rotation(body_q[b]) * q
                sign = float(1.0)
                if wp.dot(q, req.quat[k]) < 0.0:
                    sign = -1.0
                signs_out[i] = sign

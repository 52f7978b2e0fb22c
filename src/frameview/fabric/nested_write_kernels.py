# SPDX-License-Identifier: Apache-2.0
"""Write kernels of a :class:`~frameview.fabric.view.FabricFrameView` with nested prims (a view prim below another):
the request rows of indices staged, the solve (each prim against its parent's world matrix after the write, the
written prims above it solved on the way) and the commit with the descendants' update. The staging launch before
them and the kernels of a view without nesting are in :mod:`frameview.fabric.write_kernels`.

They take fabric arrays, arrays and counts; they know nothing of stages or views.
"""

from __future__ import annotations

import numpy as np
import warp as wp

from .._core.device_errors import CODE_INDEX_DUPLICATE, CODE_INDEX_RANGE, STATUS_OK, failed, publish_word, report
from ..kernels.requests import WriteRequest, report_solve, request_ok, solve_request

_IDENTITY = wp.constant(wp.mat44d(np.eye(4)))
_STATUS_OK = wp.constant(STATUS_OK)
_ANCHOR = wp.constant(-2)
"""``node_parent`` of a node whose Fabric world matrix is read as is (the write cannot move it)."""


@wp.kernel(enable_backward=False)
def _stage_indices(
    # inputs
    indices: wp.array(dtype=wp.int32),
    count: int,
    # outputs
    req_row_out: wp.array(dtype=wp.int32),
    status_out: wp.array(dtype=wp.int32),
):
    """``req_row_out[indices[k]] = k`` (-1 before, :func:`_stage_write`); an index out of range or given twice is
    reported. Nested views only: the solve of a view without nesting claims its own rows."""
    k = wp.tid()
    if failed(status_out):
        return
    i = indices[k]
    if i < 0 or i >= count:
        report(status_out, k, CODE_INDEX_RANGE)
        return
    if wp.atomic_exch(req_row_out, i, k) != -1:
        report(status_out, k, CODE_INDEX_DUPLICATE)


@wp.kernel(enable_backward=False)
def _solve_writes(
    # inputs
    view_local: wp.fabricarray(dtype=wp.mat44d),
    slots: wp.array(dtype=wp.int32),
    extra_world: wp.fabricarray(dtype=wp.mat44d),
    extra_local: wp.fabricarray(dtype=wp.mat44d),
    extra_slots: wp.array(dtype=wp.int32),
    node_parent: wp.array(dtype=wp.int32),
    count: int,
    indices: wp.array(dtype=wp.int32),
    use_indices: int,
    req_row: wp.array(dtype=wp.int32),
    req: WriteRequest,
    # outputs
    local_out: wp.array(dtype=wp.mat44d),
    world_out: wp.array(dtype=wp.mat44d),
    status_out: wp.array(dtype=wp.int32),
):
    """New local and world matrix of each written prim of a view with nested prims (into view-indexed scratch),
    nothing written to Fabric; the request rows were staged by :func:`_stage_write` / :func:`_stage_indices`.

    A prim's parent world matrix is the one it will have after this write: the chain of nodes above it (view prims,
    the prims between nested view prims, then an anchor whose world this write cannot move) is composed top-down,
    solving the written view prims of the chain on the way. O(depth^2) per row in the nesting depth, usually 1.
    """
    k = wp.tid()
    if failed(status_out):
        return
    i = k
    if use_indices != 0:
        i = indices[k]
        if i < 0 or i >= count:
            return
    r = req_row[i]
    if r < 0:
        return
    if not request_ok(r, req, status_out):
        return
    pw = _IDENTITY
    chain = int(0)
    n = node_parent[i]
    while n >= 0:
        chain += 1
        n = node_parent[n]
    for step in range(chain):
        node = i
        for _up in range(chain - step):
            node = node_parent[node]
        if node >= count:
            e = extra_slots[node - count]
            if node_parent[node] == _ANCHOR:  # noqa: SIM108 - Warp kernels: plain branches
                pw = extra_world[e]
            else:
                pw = extra_local[e] @ pw
        else:
            loc = view_local[slots[node]]
            rr = req_row[node]
            if rr >= 0:
                loc, _st = solve_request(loc, pw, rr, req)
            pw = loc @ pw
    m, status = solve_request(view_local[slots[i]], pw, r, req)
    report_solve(status_out, r, status)
    local_out[i] = m
    world_out[i] = m @ pw


@wp.func
def _descendant_world(
    d: int,
    count: int,
    req_row: wp.array(dtype=wp.int32),
    world_new: wp.array(dtype=wp.mat44d),
    node_slot: wp.array(dtype=wp.int32),
    node_parent: wp.array(dtype=wp.int32),
    node_top: wp.array(dtype=wp.int32),
    local: wp.fabricarray(dtype=wp.mat44d),
    world: wp.fabricarray(dtype=wp.mat44d),
):
    """The new world matrix of follow-plan node ``d`` (:func:`_commit_follow`): its local matrix, composed up the plan
    until the walk meets a written view prim (``req_row`` >= 0), whose solved world matrix ``world_new`` ends it, or
    the top, whose Fabric world matrix the write cannot move."""
    m = local[node_slot[d]]
    n = d
    up = node_parent[d]
    above = wp.mat44d()  # the world matrix above the walk: a written view prim's solved one, or the top's
    found = bool(False)
    while up >= 0 and not found:  # no parent is loaded once the walk met a written prim
        n = up
        if n < count:  # noqa: SIM102 - Warp does not short-circuit: req_row has count entries
            if req_row[n] >= 0:
                above = world_new[n]
                found = True
        if not found:
            m = m @ local[node_slot[n]]
            up = node_parent[n]
    if not found:
        top = node_top[n]
        above = _IDENTITY
        if top >= 0:
            above = world[top]
    return m @ above


@wp.kernel(enable_backward=False)
def _commit_follow(
    # inputs
    local_new: wp.array(dtype=wp.mat44d),
    world_new: wp.array(dtype=wp.mat44d),
    slots: wp.array(dtype=wp.int32),
    count: int,
    indices: wp.array(dtype=wp.int32),
    use_indices: int,
    req_row: wp.array(dtype=wp.int32),
    status: wp.array(dtype=wp.int32),
    start: wp.array(dtype=wp.int32),
    nodes: wp.array(dtype=wp.int32),
    node_slot: wp.array(dtype=wp.int32),
    node_parent: wp.array(dtype=wp.int32),
    node_top: wp.array(dtype=wp.int32),
    follow: int,
    local: wp.fabricarray(dtype=wp.mat44d),
    # outputs
    view_local_out: wp.fabricarray(dtype=wp.mat44d),
    view_world_out: wp.fabricarray(dtype=wp.mat44d),
    world_out: wp.fabricarray(dtype=wp.mat44d),
    written_slots_out: wp.array(dtype=wp.int32),
    # publish (DeviceErrors.publish_args)
    publish: int,
    counted: int,
    state: wp.array(dtype=wp.int32),
    mirror: wp.array(dtype=wp.uint64),
):
    """Thread ``(0, k)`` copies row ``k``'s solved matrices into Fabric; with ``follow``, thread ``(j + 1, k)`` gives
    the ``j``-th descendant of that prim (a follow plan: ``start``/``nodes`` per view index, the nodes' slots, parents
    and top slots) ``local @ ... @ top world``, in parallel with the copy (the launch is ``(widest + 1, rows)``: the
    threads' chains of dependent loads, not their arithmetic, set its time). Nothing is written if any row of the
    call failed.

    A descendant's walk up the plan composes local matrices until it meets a written view prim, whose solved world
    matrix (the scratch, not Fabric) ends it, or the top, whose world matrix the write cannot move: no thread reads
    what another writes, and a prim below two written ones is computed alike by both rows. A written view prim below
    another is committed by its own row only.

    Thread ``(0, 0)`` publishes the call's status word (final: the solve reported) when ``publish`` is set. The
    descendant index is the launch's first dimension: a warp holds one ``j`` of 32 rows, so a row's copy and its
    descendants' updates run in different warps, side by side, instead of one after the other in one diverged warp.
    """
    j, k = wp.tid()
    if j == 0:
        written_slots_out[k] = -1
        if k == 0 and publish != 0:
            publish_word(status, counted, state, mirror)
    if status[0] != _STATUS_OK:
        return
    i = k
    if use_indices != 0:
        i = indices[k]
        if i < 0 or i >= count:
            return
    if req_row[i] < 0:
        return
    if j == 0:
        s = slots[i]
        view_local_out[s] = local_new[i]
        view_world_out[s] = world_new[i]
        written_slots_out[k] = s
        return
    if follow == 0:
        return
    first = start[i]
    if j > start[i + 1] - first:
        return
    d = nodes[first + j - 1]
    if d < count:  # noqa: SIM102 - Warp kernels: plain branches
        if req_row[d] >= 0:
            return
    world_out[node_slot[d]] = _descendant_world(d, count, req_row, world_new, node_slot, node_parent, node_top, local,
                                                world_out)  # fmt: skip

# SPDX-License-Identifier: Apache-2.0
"""Kernels of :class:`~frameview.fabric.view.FabricFrameView`: pose and scale reads over a selection (all rows, a
mask, or indices through the inverted tag column), request staging, and the write solve and commit.

They take fabric arrays, arrays and counts; they know nothing of stages or views.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import warp as wp

from .._device_errors import (
    CODE_INDEX_DUPLICATE,
    CODE_INDEX_RANGE,
    CODE_STALE_LAYOUT,
    STATUS_OK,
    failed,
    publish_word,
    report,
)
from .._rows import INDEXED, MASK, MASK_ROWS
from ..kernels.requests import report_solve, request_ok, request_values, solve_request, values_ok
from ..kernels.transforms import (
    decompose_matrix,
    pose_of,
    solve_local,
)

_IDENTITY = wp.constant(wp.mat44d(np.eye(4)))
_STATUS_OK = wp.constant(STATUS_OK)
_ANCHOR = wp.constant(-2)
"""``node_parent`` of a node whose Fabric world matrix is read as is (the write cannot move it)."""
_NAN = wp.constant(float("nan"))
_NO_OFFSET = wp.quatf(0.0, 0.0, 0.0, 1.0)
_KIND_INDEXED = wp.constant(INDEXED)
_KIND_MASK = wp.constant(MASK)
_KIND_MASK_ROWS = wp.constant(MASK_ROWS)
STAGE_ALL, STAGE_INDICES, STAGE_MASK = (wp.constant(k) for k in range(3))
"""Modes of :func:`_stage_write`: how a write's request rows are set."""


@wp.func
def _stale(layout: wp.array(dtype=wp.int32), expected: int):
    """Whether a launch captured in the caller's CUDA graph replays after the stage's layout changed: the epoch word
    ``layout[0]`` is no longer the ``expected`` value of the capture (:mod:`frameview.fabric.epoch`). A launch made
    inside a view call passes ``expected`` -1: never stale, nothing loaded. A stale launch must not touch Fabric."""
    stale = bool(False)
    if expected >= 0:
        stale = layout[0] != expected
    return stale


@wp.kernel(enable_backward=False)
def _scatter_poses(
    # inputs
    tags: Any,
    mats: Any,
    offset: wp.quatf,
    layout: wp.array(dtype=wp.int32),
    expected: int,
    # outputs
    pos_out: wp.array(dtype=wp.vec3f),
    quat_out: wp.array(dtype=wp.quatf),
    status_out: wp.array(dtype=wp.int32),
):
    """Full read, no slot table needed: row ``tag[slot]`` is ``decompose(mats[slot])`` (rotation times ``offset``).
    Replayed from the caller's graph after a layout change (:func:`_stale`): every row NaN, reported."""
    slot = wp.tid()
    if _stale(layout, expected):
        _stale_pose(slot, pos_out, quat_out, status_out)
        return
    i = int(tags[slot])
    p, q = pose_of(mats[slot], offset)
    pos_out[i] = p
    quat_out[i] = q


@wp.func
def _stale_pose(
    row: int, pos_out: wp.array(dtype=wp.vec3f), quat_out: wp.array(dtype=wp.quatf), status: wp.array(dtype=wp.int32)
):
    """Row ``row`` of a stale launch (:func:`_stale`): NaN, and the stale layout reported."""
    pos_out[row] = wp.vec3f(_NAN, _NAN, _NAN)
    quat_out[row] = wp.quatf(_NAN, _NAN, _NAN, _NAN)
    report(status, row, CODE_STALE_LAYOUT)


@wp.func
def _scan_slot(tags: Any, table: wp.array(dtype=wp.int32), i: int, count: int):
    """The Fabric slot whose tag is ``i``, found by scanning the tag column and written back to ``table``; -1 if no
    prim carries the tag. For a slot table entry that the tag column did not confirm (a stale table): slow, never
    wrong."""
    for t in range(count):
        if int(tags[t]) == i:
            table[i] = t
            return t
    return -1


@wp.kernel(enable_backward=False)
def _mask_poses(
    # inputs
    tags: Any,
    mats: Any,
    slots: wp.array(dtype=wp.int32),
    count: int,
    mask: wp.array(dtype=wp.bool),
    compact: int,
    mask_rows: wp.array(dtype=wp.int32),
    offset: wp.quatf,
    layout: wp.array(dtype=wp.int32),
    expected: int,
    # outputs
    pos_out: wp.array(dtype=wp.vec3f),
    quat_out: wp.array(dtype=wp.quatf),
    status_out: wp.array(dtype=wp.int32),
):
    """Masked read: row ``k`` (where ``mask[k]``) is ``decompose(mats[slots[k]])`` (rotation times ``offset``); NaN
    and reported when replayed stale (:func:`_stale`, its word loaded beside the mask). With ``compact`` (the CPU,
    whose launches loop over their threads) thread ``t`` reads row ``mask_rows[t]``, the mask's rows compacted on the
    host.

    The slot is loaded beside the mask and used when the tag column confirms it (the prim there carries tag ``k``),
    else found by :func:`_scan_slot` and written back: a stale table costs time, never a wrong row (a tag missing
    from its column, which the host's count check makes unreachable, gives NaN). Two dependent loads before the
    matrix instead of three (tag, then mask, then matrix)."""
    k = wp.tid()
    if compact != 0:
        k = mask_rows[k]
    s = slots[k]
    live = mask[k]
    stale = _stale(layout, expected)
    if not live:
        return
    if stale:
        _stale_pose(k, pos_out, quat_out, status_out)
        return
    sc = wp.clamp(s, 0, count - 1)
    m = mats[sc]
    tag = int(tags[sc])
    if tag != k or s != sc:
        s = _scan_slot(tags, slots, k, count)
        if s < 0:
            pos_out[k] = wp.vec3f(_NAN, _NAN, _NAN)
            quat_out[k] = wp.quatf(_NAN, _NAN, _NAN, _NAN)
            return
        m = mats[s]
    p, q = pose_of(m, offset)
    pos_out[k] = p
    quat_out[k] = q


@wp.kernel(enable_backward=False)
def _invert_check(
    # inputs
    tags: wp.fabricarray(dtype=wp.uint32),
    count: int,
    indices: wp.array(dtype=wp.int32),
    rows: int,
    layout: wp.array(dtype=wp.int32),
    expected: int,
    # outputs
    slots_out: wp.array(dtype=wp.int32),
    status_out: wp.array(dtype=wp.int32),
):
    """The first launch of an indexed read, over ``max(count, rows)``: invert the tag column into the slot table
    (:func:`~frameview.kernels.slots.invert_tag_column`) and report the indices out of range (or a stale replay,
    :func:`_stale`), so that the gather after it reports nothing and can publish the call's final status word."""
    t = wp.tid()
    if _stale(layout, expected):
        if t == 0:
            report(status_out, 0, CODE_STALE_LAYOUT)
        return
    if t < count:
        slots_out[int(tags[t])] = t
    if t < rows:
        i = indices[t]
        if i < 0 or i >= count:  # noqa: SIM102 - Warp kernels: plain branches
            if not failed(status_out):
                report(status_out, t, CODE_INDEX_RANGE)


@wp.kernel(enable_backward=False)
def _gather_poses(
    # inputs
    mats: wp.fabricarray(dtype=wp.mat44d),
    slots: wp.array(dtype=wp.int32),
    count: int,
    offset: wp.quatf,
    indices: wp.array(dtype=wp.int32),
    layout: wp.array(dtype=wp.int32),
    expected: int,
    # outputs
    pos_out: wp.array(dtype=wp.vec3f),
    quat_out: wp.array(dtype=wp.quatf),
    # publish (DeviceErrors.publish_args)
    status: wp.array(dtype=wp.int32),
    publish: int,
    counted: int,
    state: wp.array(dtype=wp.int32),
    mirror: wp.array(dtype=wp.uint64),
):
    """Indexed read: row ``k`` is view prim ``indices[k]``; an index out of range or a stale replay (reported by
    :func:`_invert_check`) gives NaN. Thread 0 publishes the call's status word when ``publish`` is set."""
    k = wp.tid()
    if k == 0 and publish != 0:
        publish_word(status, counted, state, mirror)
    i = indices[k]
    if _stale(layout, expected):
        i = -1
    if i < 0 or i >= count:
        pos_out[k] = wp.vec3f(_NAN, _NAN, _NAN)
        quat_out[k] = wp.quatf(_NAN, _NAN, _NAN, _NAN)
        return
    p, q = pose_of(mats[slots[i]], offset)
    pos_out[k] = p
    quat_out[k] = q


@wp.kernel(enable_backward=False)
def _scatter_scales(
    # inputs
    tags: wp.fabricarray(dtype=wp.uint32),
    mats: wp.fabricarray(dtype=wp.mat44d),
    mask: wp.array(dtype=wp.bool),
    use_mask: int,
    layout: wp.array(dtype=wp.int32),
    expected: int,
    # outputs
    scale_out: wp.array(dtype=wp.vec3f),
    status_out: wp.array(dtype=wp.int32),
):
    """Full (or masked) read of scales: ``scale_out[tag[slot]] = scale(mats[slot])``; replayed stale
    (:func:`_stale`): row ``slot`` (where masked) NaN, reported."""
    slot = wp.tid()
    if _stale(layout, expected):
        if use_mask != 0:  # noqa: SIM102 - Warp does not short-circuit
            if not mask[slot]:
                return
        scale_out[slot] = wp.vec3f(_NAN, _NAN, _NAN)
        report(status_out, slot, CODE_STALE_LAYOUT)
        return
    i = int(tags[slot])
    if use_mask != 0:  # noqa: SIM102 - Warp does not short-circuit: mask is empty when use_mask == 0
        if not mask[i]:
            return
    _t, _q, s = decompose_matrix(mats[slot])
    scale_out[i] = wp.vec3f(s)


@wp.kernel(enable_backward=False)
def _gather_scales(
    # inputs
    mats: wp.fabricarray(dtype=wp.mat44d),
    slots: wp.array(dtype=wp.int32),
    count: int,
    indices: wp.array(dtype=wp.int32),
    layout: wp.array(dtype=wp.int32),
    expected: int,
    # outputs
    scale_out: wp.array(dtype=wp.vec3f),
    # publish (DeviceErrors.publish_args)
    status: wp.array(dtype=wp.int32),
    publish: int,
    counted: int,
    state: wp.array(dtype=wp.int32),
    mirror: wp.array(dtype=wp.uint64),
):
    """Indexed read of scales (NaN for an index out of range or a stale replay, reported by :func:`_invert_check`);
    thread 0 publishes the call's status word when ``publish`` is set."""
    k = wp.tid()
    if k == 0 and publish != 0:
        publish_word(status, counted, state, mirror)
    i = indices[k]
    if _stale(layout, expected):
        i = -1
    if i < 0 or i >= count:
        scale_out[k] = wp.vec3f(_NAN, _NAN, _NAN)
        return
    _t, _q, s = decompose_matrix(mats[slots[i]])
    scale_out[k] = wp.vec3f(s)


@wp.kernel(enable_backward=False)
def _stage_write(
    # inputs
    tags: wp.fabricarray(dtype=wp.uint32),
    parent_tags: wp.fabricarray(dtype=wp.uint32),
    count: int,
    parent_count: int,
    mode: int,
    mask: wp.array(dtype=wp.bool),
    layout: wp.array(dtype=wp.int32),
    expected: int,
    # outputs
    slots_out: wp.array(dtype=wp.int32),
    parent_slots_out: wp.array(dtype=wp.int32),
    req_row_out: wp.array(dtype=wp.int32),
    status_out: wp.array(dtype=wp.int32),
):
    """The first launch of a write of a view with nested prims, over ``max(count, parent_count)``: invert the view's
    and its parents' tag columns into their slot tables, and set the request rows of ``mode`` (``STAGE_ALL``:
    untouched, the caller passes ``0..N-1``; ``STAGE_INDICES``: -1, :func:`_stage_indices` stages them; ``STAGE_MASK``:
    ``i`` where ``mask[i]``, else -1). A view without nesting runs it with ``STAGE_ALL`` only when its Fabric arrays
    were rebuilt (its kernels verify every slot they use, :func:`_solve_flat`). Replayed stale (:func:`_stale`): the
    stale layout reported (the launches after it see the failed status word), nothing else."""
    t = wp.tid()
    if _stale(layout, expected):
        if t == 0:
            report(status_out, 0, CODE_STALE_LAYOUT)
        return
    if t < count:
        slots_out[int(tags[t])] = t
        if mode == STAGE_INDICES:
            req_row_out[t] = -1
        elif mode == STAGE_MASK:
            if mask[t]:
                req_row_out[t] = t
            else:
                req_row_out[t] = -1
    if t < parent_count:
        parent_slots_out[int(parent_tags[t])] = t


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
def _solve_flat(
    # inputs
    tags: Any,
    view_local: Any,
    slots: wp.array(dtype=wp.int32),
    parent_tags: Any,
    parent_world: Any,
    parent_slots: wp.array(dtype=wp.int32),
    parent_count: int,
    node_parent: wp.array(dtype=wp.int32),
    count: int,
    kind: int,
    indices: wp.array(dtype=wp.int32),
    mask: wp.array(dtype=wp.bool),
    in_world: int,
    set_pos: int,
    pos: wp.array(dtype=wp.vec3f),
    set_quat: int,
    quat: wp.array(dtype=wp.quatf),
    set_scale: int,
    scale: wp.array(dtype=wp.vec3f),
    layout: wp.array(dtype=wp.int32),
    expected: int,
    # outputs
    row_parent_slots: wp.array(dtype=wp.int32),
    claims: wp.array(dtype=wp.int32),
    local_out: wp.array(dtype=wp.mat44d),
    world_out: wp.array(dtype=wp.mat44d),
    status_out: wp.array(dtype=wp.int32),
):
    """The first launch of a write of a view without nested prims (no view prim lies above another, so each prim's
    parent is an anchor that this write cannot move, or none): new local and world matrix of each written prim into
    view-indexed scratch, nothing written to Fabric.

    Rows: ``kind`` ALL (row ``k`` is prim ``k``), MASK (prim ``k`` if ``mask[k]``), INDEXED (prim ``indices[k]``,
    reported when out of range; each prim is claimed in ``claims``, -1 between calls, so an index given twice is
    reported; :func:`_commit_flat` releases the claims) or MASK_ROWS (prim ``indices[k]``, a mask compacted on the
    host, whose data and reports use the prim's row). A prim's slot comes from ``slots``, its parent's from
    ``row_parent_slots`` (per view index), each used only when the tag column confirms it (the prim there carries the
    expected tag), else found through ``parent_slots`` or by :func:`_scan_slot` and written back: no launch inverts the
    tables while the Fabric arrays stay the same, and a stale table costs time, never a wrong row.

    The slot tables are loaded beside the mask (small loads: one latency fewer on a masked row's path), the
    matrices and values past it, every load before the first branch on a loaded value (an index is clamped into
    range for that; the checks come after), and the parent's slot is one load (perf/RESULTS.md, "The reset path").
    """
    k = wp.tid()
    i = k
    r = k  # the request row: its data, and the row errors name
    if kind == _KIND_INDEXED:
        i = indices[k]
    if kind == _KIND_MASK_ROWS:  # a mask compacted on the host (CPU): in range, each prim once
        i = indices[k]
        r = i
    dead = failed(status_out)
    ic = wp.clamp(i, 0, count - 1)
    s = slots[ic]  # the tables' 4-byte loads share the mask's latency (a mask's row is the prim: no index to wait
    up = node_parent[ic]  # for); the matrices and the values wait for the mask, which leaves most rows out
    ps = row_parent_slots[ic]
    live = True
    if kind == _KIND_MASK:
        live = mask[k]
    stale = _stale(layout, expected)  # its word loaded beside the mask: nothing past here touches a stale Fabric
    if not live:
        return
    if stale:
        if not dead:
            report(status_out, r, CODE_STALE_LAYOUT)
        return
    t, q, sc = request_values(r, set_pos, pos, set_quat, quat, set_scale, scale)
    local = view_local[wp.clamp(s, 0, count - 1)]
    tag = int(tags[wp.clamp(s, 0, count - 1)])
    pc = wp.clamp(ps, 0, wp.max(parent_count, 1) - 1)
    pw = parent_world[pc]
    parent_tag = int(parent_tags[pc])
    if i != ic:
        if not dead:
            report(status_out, r, CODE_INDEX_RANGE)
        return
    claimed = int(-1)
    if kind == _KIND_INDEXED:
        claimed = wp.atomic_exch(claims, i, k)
    if dead:
        return
    if claimed != -1:
        report(status_out, r, CODE_INDEX_DUPLICATE)
        return
    if not values_ok(r, set_pos, t, set_quat, q, set_scale, sc, status_out):
        return
    if tag != i or s < 0 or s >= count:  # a stale slot table: scan the column (and repair the table)
        s = _scan_slot(tags, slots, i, count)
        if s < 0:  # a tag missing from its column: the host's count check makes this unreachable
            report(status_out, r, CODE_INDEX_RANGE)
            return
        local = view_local[s]
    if up < 0:
        pw = _IDENTITY
    else:
        p = up - count
        if parent_tag != p or ps < 0 or ps >= parent_count:  # stale: the inverted table, else a scan
            ps = parent_slots[p]
            if ps < 0 or ps >= parent_count or int(parent_tags[wp.clamp(ps, 0, parent_count - 1)]) != p:
                ps = _scan_slot(parent_tags, parent_slots, p, parent_count)
            if ps < 0:
                report(status_out, r, CODE_INDEX_RANGE)
                return
            row_parent_slots[i] = ps
            pw = parent_world[ps]
    m, status = solve_local(local, pw, in_world, set_pos, t, set_quat, q, set_scale, sc)
    report_solve(status_out, r, status)
    local_out[i] = m
    world_out[i] = m @ pw


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
    in_world: int,
    set_pos: int,
    pos: wp.array(dtype=wp.vec3f),
    set_quat: int,
    quat: wp.array(dtype=wp.quatf),
    set_scale: int,
    scale: wp.array(dtype=wp.vec3f),
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
    if not request_ok(r, set_pos, pos, set_quat, quat, set_scale, scale, status_out):
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
                loc, _st = solve_request(loc, pw, rr, in_world, set_pos, pos, set_quat, quat, set_scale, scale)
            pw = loc @ pw
    m, status = solve_request(view_local[slots[i]], pw, r, in_world, set_pos, pos, set_quat, quat, set_scale, scale)
    report_solve(status_out, r, status)
    local_out[i] = m
    world_out[i] = m @ pw


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
            above = world_out[top]
    world_out[node_slot[d]] = m @ above


@wp.kernel(enable_backward=False)
def _commit_flat(
    # inputs
    local_new: wp.array(dtype=wp.mat44d),
    world_new: wp.array(dtype=wp.mat44d),
    slots: wp.array(dtype=wp.int32),
    count: int,
    kind: int,
    indices: wp.array(dtype=wp.int32),
    mask: wp.array(dtype=wp.bool),
    claims: wp.array(dtype=wp.int32),
    status: wp.array(dtype=wp.int32),
    follow_slot: wp.array2d(dtype=wp.int32),
    follow_up: wp.array2d(dtype=wp.int32),
    follow: int,
    local: Any,
    # outputs
    view_local_out: Any,
    view_world_out: Any,
    world_out: Any,
    written_slots_out: wp.array(dtype=wp.int32),
    # publish (DeviceErrors.publish_args)
    publish: int,
    counted: int,
    state: wp.array(dtype=wp.int32),
    mirror: wp.array(dtype=wp.uint64),
):
    """The second launch of a write of a view without nested prims (after :func:`_solve_flat`), over ``(widest + 1,
    rows)``: thread ``(0, k)`` releases row ``k``'s claim (whatever the call's status: ``claims`` is -1 between
    calls) and copies the row's solved matrices into Fabric (the slot :func:`_solve_flat` verified); with
    ``follow``, thread ``(j + 1, k)`` gives the ``j``-th descendant of that prim ``local @ ... @`` the prim's solved
    world matrix: its slot is ``follow_slot[i, j]`` (-1: none), its parent's column ``follow_up[i, j]`` (-1: the prim
    itself; the dense tables of :class:`~frameview.fabric.memory.follow.FollowPlan`, loaded beside the mask). No
    descendant of a prim lies below another view prim (the view has no nesting), so no thread reads what another
    writes. Nothing is written if any row of the call failed. Thread ``(0, 0)`` publishes the call's status word
    (final: the solve reported) when ``publish`` is set."""
    j, k = wp.tid()  # j first: see _commit_follow
    ok = status[0] == _STATUS_OK  # loaded first: the status word is final when this launch starts
    if j == 0 and k == 0 and publish != 0:
        publish_word(status, counted, state, mirror)
    i = k
    if kind == _KIND_INDEXED or kind == _KIND_MASK_ROWS:  # noqa: SIM109 - Warp kernels: no tuple membership
        i = indices[k]
    ic = wp.clamp(i, 0, count - 1)
    live = i == ic  # an index out of range (reported by the solve) commits nothing
    s = int(-1)
    d = int(-1)
    up = int(-1)
    if j == 0:  # the tables' loads share the mask's latency (a mask's row is the prim: no index to wait for)
        s = slots[ic]
    elif follow != 0:
        d = follow_slot[ic, j - 1]
        up = follow_up[ic, j - 1]
    if kind == _KIND_MASK:  # noqa: SIM102 - Warp does not short-circuit: mask is empty unless kind is MASK
        if not mask[k]:
            live = False
    if j == 0:
        written = int(-1)
        if live:
            if kind == _KIND_INDEXED:  # noqa: SIM102 - Warp kernels: plain branches
                if claims[i] == k:
                    claims[i] = -1
            if ok:
                view_local_out[s] = local_new[i]
                view_world_out[s] = world_new[i]
                written = s
        written_slots_out[k] = written
        return
    if not live or not ok or d < 0:  # d < 0: no follow, or row i has fewer descendants than the widest
        return
    m = local[d]
    while up >= 0:
        m = m @ local[follow_slot[i, up]]
        up = follow_up[i, up]
    world_out[d] = m @ world_new[i]


# Fabric columns reach the reset path's kernels as fabric arrays or, for a selection of one bucket, as plain arrays
# over that bucket (frameview.fabric.columns): the same code, one overload per kind, all compiled with the module.
_COLUMN_KINDS = (
    (wp.fabricarray(dtype=wp.uint32), wp.fabricarray(dtype=wp.mat44d)),
    (wp.array(dtype=wp.uint32), wp.array(dtype=wp.mat44d)),
)
for _tags_t, _mats_t in _COLUMN_KINDS:
    wp.overload(_scatter_poses, {"tags": _tags_t, "mats": _mats_t})
    wp.overload(_mask_poses, {"tags": _tags_t, "mats": _mats_t})
    for _parent_tags_t, _parent_mats_t in _COLUMN_KINDS:
        wp.overload(_solve_flat, {"tags": _tags_t, "view_local": _mats_t, "parent_tags": _parent_tags_t,
                                  "parent_world": _parent_mats_t})  # fmt: skip
        wp.overload(_commit_flat, {"local": _parent_mats_t, "view_local_out": _mats_t, "view_world_out": _mats_t,
                                   "world_out": _parent_mats_t})  # fmt: skip

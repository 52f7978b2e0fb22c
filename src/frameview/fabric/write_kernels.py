# SPDX-License-Identifier: Apache-2.0
"""Write kernels of :class:`~frameview.fabric.view.FabricFrameView`: the slot tables and request rows staged, and a
write of a view without nested prims (the reset path): its solve, then its commit (the descendants' update included).
A view with nested prims writes through :mod:`frameview.fabric.nested_write_kernels`; the read kernels are in
:mod:`frameview.fabric.read_kernels`.

They take fabric arrays, arrays and counts; they know nothing of stages or views.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import warp as wp

from .._core.argument_kernels import copy_write_row
from .._core.device_errors import (
    CODE_INDEX_DUPLICATE,
    CODE_INDEX_RANGE,
    CODE_STALE_LAYOUT,
    STATUS_OK,
    failed,
    publish_word,
    report,
)
from .._core.rows import INDEXED, MASK, MASK_ROWS
from ..kernels.requests import WriteRequest, report_solve, request_values, solve_values, values_ok
from ..kernels.slots import COLUMN_KINDS, scan_slot
from .epoch import is_stale

_IDENTITY = wp.constant(wp.mat44d(np.eye(4)))
_STATUS_OK = wp.constant(STATUS_OK)
_KIND_INDEXED = wp.constant(INDEXED)
_KIND_MASK = wp.constant(MASK)
_KIND_MASK_ROWS = wp.constant(MASK_ROWS)
STAGE_ALL, STAGE_INDICES, STAGE_MASK = (wp.constant(k) for k in range(3))
"""Modes of :func:`_stage_write`: how a write's request rows are set."""


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
    were rebuilt (its kernels verify every slot they use, :func:`_solve_flat`). Replayed stale (:func:`is_stale`): the
    stale layout reported (the launches after it see the failed status word), nothing else."""
    t = wp.tid()
    if is_stale(layout, expected):
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


@wp.func
def _write_row(k: int, kind: int, indices: wp.array(dtype=wp.int32), wide: wp.array(dtype=wp.int64), count: int):
    """Thread ``k`` of :func:`_solve_flat`: the view prim it writes and its request row (its data, and the row errors
    name): ``k`` and ``k`` for ALL and MASK, ``indices[k]`` and ``k`` for INDEXED, ``indices[k]`` twice for MASK_ROWS
    (a mask compacted on the host, CPU: in range, each prim once). INDEXED with ``wide`` (the caller's int64
    indices, read in place): ``wide[k]``, range-checked in 64 bits (-1 when out of range, which is reported), also
    written to ``indices[k]`` for the write's later launch."""
    i = k
    r = k
    if kind == _KIND_INDEXED:
        if wide.shape[0] > 0:
            v = wide[k]
            i = -1
            if v >= wp.int64(0) and v < wp.int64(count):
                i = int(v)
            indices[k] = i
        else:
            i = indices[k]
    if kind == _KIND_MASK_ROWS:
        i = indices[k]
        r = i
    return i, r


@wp.func
def _report_first(status_out: wp.array(dtype=wp.int32), r: int, code: int, dead: bool):
    """Report ``code`` at row ``r`` unless the call failed before this launch (``dead``: the sticky status word)."""
    if not dead:
        report(status_out, r, code)


@wp.func
def _confirmed_local(
    tags: Any, view_local: Any, slots: wp.array(dtype=wp.int32), count: int, i: int, s: int, tag: int, local: wp.mat44d
):
    """View prim ``i``'s local matrix ``local``, loaded at its slot ``s`` from the slot table, if the tag column
    confirms that slot (``tag``, loaded there, is ``i``); else the one at the slot :func:`scan_slot` finds (and writes
    back into ``slots``: a stale table). False where no prim carries the tag."""
    out = local
    found = True
    if tag != i or s < 0 or s >= count:
        slot = scan_slot(tags, slots, i, count)
        if slot < 0:
            found = False
        else:
            out = view_local[slot]
    return out, found


@wp.func
def _confirmed_parent_world(
    parent_tags: Any,
    parent_world: Any,
    parent_slots: wp.array(dtype=wp.int32),
    parent_count: int,
    row_parent_slots: wp.array(dtype=wp.int32),
    i: int,
    p: int,
    ps: int,
    parent_tag: int,
    pw: wp.mat44d,
):
    """The world matrix of parent ``p`` of view prim ``i``: ``pw``, loaded at its slot ``ps`` from
    ``row_parent_slots``, if the parent tag column confirms that slot (``parent_tag``, loaded there, is ``p``); else
    the one at the slot the inverted table ``parent_slots`` gives (confirmed the same way) or :func:`scan_slot` finds,
    written back into ``row_parent_slots``. False where no parent carries the tag."""
    out = pw
    found = True
    if parent_tag != p or ps < 0 or ps >= parent_count:  # stale: the inverted table, else a scan
        slot = parent_slots[p]
        if slot < 0 or slot >= parent_count or int(parent_tags[wp.clamp(slot, 0, parent_count - 1)]) != p:
            slot = scan_slot(parent_tags, parent_slots, p, parent_count)
        if slot < 0:
            found = False
        else:
            row_parent_slots[i] = slot
            out = parent_world[slot]
    return out, found


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
    wide: wp.array(dtype=wp.int64),
    mask: wp.array(dtype=wp.bool),
    req: WriteRequest,
    layout: wp.array(dtype=wp.int32),
    expected: int,
    keep: int,
    # outputs
    row_parent_slots: wp.array(dtype=wp.int32),
    claims: wp.array(dtype=wp.int32),
    local_out: wp.array(dtype=wp.mat44d),
    world_out: wp.array(dtype=wp.mat44d),
    status_out: wp.array(dtype=wp.int32),
    keep_rows: wp.array(dtype=wp.int32),
    keep_mask: wp.array(dtype=wp.bool),
    keep_pos: wp.array(dtype=wp.vec3f),
    keep_quat: wp.array(dtype=wp.quatf),
    keep_scale: wp.array(dtype=wp.vec3f),
):
    """The first launch of a write of a view without nested prims (no view prim lies above another, so each prim's
    parent is an anchor that this write cannot move, or none): new local and world matrix of each written prim into
    view-indexed scratch, nothing written to Fabric.

    ``keep`` (a writer scope's write at its call; MASK_ROWS never): each thread first copies its row of the write
    into the ``keep_*`` arrays (:func:`~frameview._core.argument_kernels.copy_write_row`), whatever the checks find
    after.

    Rows: ``kind`` ALL (row ``k`` is prim ``k``), MASK (prim ``k`` if ``mask[k]``), INDEXED (prim ``indices[k]``, or
    ``wide[k]`` when the caller passed int64 indices, narrowed into ``indices`` here for :func:`_commit_flat`;
    reported when out of range; each prim is claimed in ``claims``, -1 between calls, so an index given twice is
    reported; :func:`_commit_flat` releases the claims) or MASK_ROWS (prim ``indices[k]``, a mask compacted on the
    host, whose data and reports use the prim's row). A prim's slot comes from ``slots``, its parent's from
    ``row_parent_slots`` (per view index), each used only when the tag column confirms it (the prim there carries the
    expected tag), else found through ``parent_slots`` or by :func:`scan_slot` and written back: no launch inverts the
    tables while the Fabric arrays stay the same, and a stale table costs time, never a wrong row.

    The slot tables are loaded beside the mask (small loads: one latency fewer on a masked row's path), the
    matrices and values past it, every load before the first branch on a loaded value (an index is clamped into
    range for that; the checks come after), and the parent's slot is one load (perf/RESULTS.md, "The reset path").
    """
    k = wp.tid()
    i, r = _write_row(k, kind, indices, wide, count)
    if keep != 0:  # a writer scope's write at its call: its copy, as given (the index narrowed)
        copy_write_row(k, kind, i, mask, req.set_pos, req.pos, req.set_quat, req.quat, req.set_scale, req.scale,
                       keep_rows, keep_mask, keep_pos, keep_quat, keep_scale)  # fmt: skip
    dead = failed(status_out)
    ic = wp.clamp(i, 0, count - 1)
    s = slots[ic]  # the tables' 4-byte loads share the mask's latency (a mask's row is the prim: no index to wait
    up = node_parent[ic]  # for); the matrices and the values wait for the mask, which leaves most rows out
    ps = row_parent_slots[ic]
    live = True
    if kind == _KIND_MASK:
        live = mask[k]
    stale = is_stale(layout, expected)  # its word loaded beside the mask: nothing past here touches a stale Fabric
    if not live:
        return
    if stale:
        _report_first(status_out, r, CODE_STALE_LAYOUT, dead)
        return
    t, q, sc = request_values(r, req)
    local = view_local[wp.clamp(s, 0, count - 1)]
    tag = int(tags[wp.clamp(s, 0, count - 1)])
    pc = wp.clamp(ps, 0, wp.max(parent_count, 1) - 1)
    pw = parent_world[pc]
    parent_tag = int(parent_tags[pc])
    if i != ic:
        _report_first(status_out, r, CODE_INDEX_RANGE, dead)
        return
    claimed = int(-1)
    if kind == _KIND_INDEXED:
        claimed = wp.atomic_exch(claims, i, k)
    if dead:
        return
    if claimed != -1:
        report(status_out, r, CODE_INDEX_DUPLICATE)
        return
    if not values_ok(r, req, t, q, sc, status_out):
        return
    local, found = _confirmed_local(tags, view_local, slots, count, i, s, tag, local)
    if not found:  # a tag missing from its column: the host's count check makes this unreachable
        report(status_out, r, CODE_INDEX_RANGE)
        return
    if up < 0:
        pw = _IDENTITY
    else:
        pw, found = _confirmed_parent_world(
            parent_tags, parent_world, parent_slots, parent_count, row_parent_slots, i, up - count, ps, parent_tag, pw
        )
        if not found:
            report(status_out, r, CODE_INDEX_RANGE)
            return
    m, status = solve_values(local, pw, req, t, q, sc)
    report_solve(status_out, r, status)
    local_out[i] = m
    world_out[i] = m @ pw


@wp.func
def _commit_row(
    k: int,
    i: int,
    s: int,
    kind: int,
    live: bool,
    ok: bool,
    claims: wp.array(dtype=wp.int32),
    local_new: wp.array(dtype=wp.mat44d),
    world_new: wp.array(dtype=wp.mat44d),
    view_local_out: Any,
    view_world_out: Any,
):
    """Thread ``(0, k)`` of :func:`_commit_flat`, for a ``live`` row ``k`` (prim ``i``): release the row's claim
    (``INDEXED``) and, when the call is ``ok``, copy its solved matrices into Fabric slot ``s``. The slot written, or
    -1."""
    written = int(-1)
    if live:
        if kind == _KIND_INDEXED:  # noqa: SIM102 - Warp kernels: plain branches
            if claims[i] == k:
                claims[i] = -1
        if ok:
            view_local_out[s] = local_new[i]
            view_world_out[s] = world_new[i]
            written = s
    return written


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
    itself; the dense tables of :class:`~.providers.memory.follow.FollowPlan`, loaded beside the mask). No
    descendant of a prim lies below another view prim (the view has no nesting), so no thread reads what another
    writes. Nothing is written if any row of the call failed. Thread ``(0, 0)`` publishes the call's status word
    (final: the solve reported) when ``publish`` is set."""
    j, k = wp.tid()  # j first: see nested_write_kernels._commit_follow
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
        written_slots_out[k] = _commit_row(k, i, s, kind, live, ok, claims, local_new, world_new, view_local_out,
                                           view_world_out)  # fmt: skip
        return
    if not live or not ok or d < 0:  # d < 0: no follow, or row i has fewer descendants than the widest
        return
    m = local[d]
    while up >= 0:
        m = m @ local[follow_slot[i, up]]
        up = follow_up[i, up]
    world_out[d] = m @ world_new[i]


for _tags_t, _mats_t in COLUMN_KINDS:
    for _parent_tags_t, _parent_mats_t in COLUMN_KINDS:
        wp.overload(_solve_flat, {"tags": _tags_t, "view_local": _mats_t, "parent_tags": _parent_tags_t,
                                  "parent_world": _parent_mats_t})  # fmt: skip
        wp.overload(_commit_flat, {"local": _parent_mats_t, "view_local_out": _mats_t, "view_world_out": _mats_t,
                                   "world_out": _parent_mats_t})  # fmt: skip

# SPDX-License-Identifier: Apache-2.0
"""Read kernels of :class:`~frameview.fabric.view.FabricFrameView`: pose and scale reads over a selection (all rows, a
mask, or indices through the inverted tag column). The write kernels are in :mod:`frameview.fabric.write_kernels`.

They take fabric arrays, arrays and counts; they know nothing of stages or views.
"""

from __future__ import annotations

from typing import Any

import warp as wp

from .._core.device_errors import CODE_INDEX_RANGE, CODE_STALE_LAYOUT, failed, publish_word, report
from ..kernels.slots import COLUMN_KINDS, scan_slot
from ..kernels.transforms import decompose_matrix, pose_of
from .epoch import is_stale

_NAN = wp.constant(float("nan"))
_NO_OFFSET = wp.quatf(0.0, 0.0, 0.0, 1.0)


@wp.func
def _stale_pose(
    row: int, pos_out: wp.array(dtype=wp.vec3f), quat_out: wp.array(dtype=wp.quatf), status: wp.array(dtype=wp.int32)
):
    """Row ``row`` of a stale launch (:func:`is_stale`): NaN, and the stale layout reported."""
    pos_out[row] = wp.vec3f(_NAN, _NAN, _NAN)
    quat_out[row] = wp.quatf(_NAN, _NAN, _NAN, _NAN)
    report(status, row, CODE_STALE_LAYOUT)


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
    Replayed from the caller's graph after a layout change (:func:`is_stale`): every row NaN, reported."""
    slot = wp.tid()
    if is_stale(layout, expected):
        _stale_pose(slot, pos_out, quat_out, status_out)
        return
    i = int(tags[slot])
    p, q = pose_of(mats[slot], offset)
    pos_out[i] = p
    quat_out[i] = q


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
    and reported when replayed stale (:func:`is_stale`, its word loaded beside the mask). With ``compact`` (the CPU,
    whose launches loop over their threads) thread ``t`` reads row ``mask_rows[t]``, the mask's rows compacted on the
    host.

    The slot is loaded beside the mask and used when the tag column confirms it (the prim there carries tag ``k``),
    else found by :func:`scan_slot` and written back: a stale table costs time, never a wrong row (a tag missing
    from its column, which the host's count check makes unreachable, gives NaN). Two dependent loads before the
    matrix instead of three (tag, then mask, then matrix)."""
    k = wp.tid()
    if compact != 0:
        k = mask_rows[k]
    s = slots[k]
    live = mask[k]
    stale = is_stale(layout, expected)
    if not live:
        return
    if stale:
        _stale_pose(k, pos_out, quat_out, status_out)
        return
    sc = wp.clamp(s, 0, count - 1)
    m = mats[sc]
    tag = int(tags[sc])
    if tag != k or s != sc:
        s = scan_slot(tags, slots, k, count)
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
    :func:`is_stale`), so that the gather after it reports nothing and can publish the call's final status word."""
    t = wp.tid()
    if is_stale(layout, expected):
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
    if is_stale(layout, expected):
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
    (:func:`is_stale`): row ``slot`` (where masked) NaN, reported."""
    slot = wp.tid()
    if is_stale(layout, expected):
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
    if is_stale(layout, expected):
        i = -1
    if i < 0 or i >= count:
        scale_out[k] = wp.vec3f(_NAN, _NAN, _NAN)
        return
    _t, _q, s = decompose_matrix(mats[slots[i]])
    scale_out[k] = wp.vec3f(s)


for _tags_t, _mats_t in COLUMN_KINDS:
    wp.overload(_scatter_poses, {"tags": _tags_t, "mats": _mats_t})
    wp.overload(_mask_poses, {"tags": _tags_t, "mats": _mats_t})

# SPDX-License-Identifier: Apache-2.0
"""The Newton backend's pose reads and the device functions of its frame model: frame poses from ``state.body_q``,
and each frame's cached offset (the writes: :mod:`frameview.newton.write_kernels`; the scale reads:
:mod:`frameview.newton.scale_kernels`, each a Warp module of its own, hashed and loaded at its first launch).

A frame's world matrix is ``local[n] @ chain[n]``, up through its anchors, then its body's pose (see
:mod:`frameview.newton.frames`). World pose reads take each frame's offset from its body as a cached translation and
rotation (:func:`refresh_offsets`, rerun whenever ``local`` changes: by a write's commit for the frames it wrote when
no frame is anchored on another, else by a fourth launch over every frame).
Every kernel takes the rows of a call as ``(view_node, count, kind, indices, mask)`` (all, int32 indices checked
here, or a mask). Launched by :class:`~frameview.newton.view.NewtonFrameView` through
:class:`~frameview._core.launch_caches.LaunchCache`.
"""

from __future__ import annotations

import numpy as np
import warp as wp

from .._core.device_errors import CODE_INDEX_RANGE, failed, report
from .._core.rows import ALL, INDEXED, MASK
from ..kernels.transforms import (
    axis_rotation,
    axis_scale,
    compose_matrix,
    pose_of,
    rotation_quat,
    unit_quat,
)

__all__ = [
    "DIRECT",
    "IDENTITY",
    "NAN",
    "NO_OFFSET",
    "body_matrix",
    "cache_offset",
    "read_local_poses_all",
    "read_poses",
    "refresh_offsets",
    "view_row",
    "world_matrix",
]

IDENTITY = wp.constant(wp.mat44d(np.eye(4)))
NAN = wp.constant(float("nan"))
_ALL = wp.constant(ALL)
_INDEXED = wp.constant(INDEXED)
_MASK = wp.constant(MASK)
NO_OFFSET = wp.quatf(0.0, 0.0, 0.0, 1.0)
"""The identity rotation offset: plain pose reads (no camera convention)."""

# ---------------------------------------------------------------- device functions


@wp.func
def view_row(
    k: int,
    kind: int,
    indices: wp.array(dtype=wp.int32),
    mask: wp.array(dtype=wp.bool),
    count: int,
):
    """The view index of call row ``k``: -1 for a masked-out row, -2 for an index out of range."""
    if kind == _INDEXED:
        i = indices[k]
        if i < 0 or i >= count:
            return -2
        return i
    if kind == _MASK:  # noqa: SIM102 - Warp does not short-circuit: mask is empty unless kind is MASK
        if not mask[k]:
            return -1
    return k


@wp.func
def body_matrix(body_q: wp.array(dtype=wp.transformf), b: int):
    """Row-vector matrix of body ``b``'s pose (identity for -1: fixed in the world)."""
    if b < 0:
        return IDENTITY
    x = body_q[b]
    one = wp.float64(1.0)
    return compose_matrix(
        wp.vec3d(wp.transform_get_translation(x)), wp.quatd(wp.transform_get_rotation(x)), wp.vec3d(one, one, one)
    )


@wp.func
def _offset_matrix(
    node: int,
    local: wp.array(dtype=wp.mat44d),
    chain: wp.array(dtype=wp.mat44d),
    anchor: wp.array(dtype=wp.int32),
):
    """A frame's matrix relative to its body (to the world when it has none): its local matrix, up through its
    anchors."""
    m = local[node] @ chain[node]
    a = anchor[node]
    while a >= 0:
        m = m @ local[a] @ chain[a]
        a = anchor[a]
    return m


@wp.func
def world_matrix(
    node: int,
    local: wp.array(dtype=wp.mat44d),
    chain: wp.array(dtype=wp.mat44d),
    anchor: wp.array(dtype=wp.int32),
    body: wp.array(dtype=wp.int32),
    body_q: wp.array(dtype=wp.transformf),
):
    """World matrix of a frame: its offset matrix, then its body's pose."""
    return _offset_matrix(node, local, chain, anchor) @ body_matrix(body_q, body[node])


_SHEARED = wp.constant(1)
"""Bit of a frame's flags (``sheared``): its offset matrix on a body is sheared (world reads decompose the world
matrix)."""
DIRECT = wp.constant(2)
"""Bit of a frame's flags: its USD parent is its body or the world (no anchor, an identity chain): its local pose is
its cached offset."""

_SQUARED_COSINE = wp.constant(1.0e-18)
"""Largest squared cosine between two rows of an offset's upper 3x3 for which reads compose in transform space
(orthogonal rows up to float64 rounding, :func:`refresh_offsets`); a sheared offset takes the world matrix itself."""


@wp.func
def _rows_orthogonal(m: wp.mat44d):
    """Whether the rows of ``m``'s upper 3x3 are orthogonal (squared cosines, no square roots, no divisions)."""
    r0 = wp.vec3d(m[0, 0], m[0, 1], m[0, 2])
    r1 = wp.vec3d(m[1, 0], m[1, 1], m[1, 2])
    r2 = wp.vec3d(m[2, 0], m[2, 1], m[2, 2])
    l0 = wp.dot(r0, r0)
    l1 = wp.dot(r1, r1)
    l2 = wp.dot(r2, r2)
    d01 = wp.dot(r0, r1)
    d02 = wp.dot(r0, r2)
    d12 = wp.dot(r1, r2)
    tol = wp.float64(_SQUARED_COSINE)
    return d01 * d01 <= tol * l0 * l1 and d02 * d02 <= tol * l0 * l2 and d12 * d12 <= tol * l1 * l2


@wp.func
def _is_identity(m: wp.mat44d):
    """Whether ``m`` is the identity up to float64 rounding (a frame whose USD parent is its body: the chain between
    them composed to the identity); its float32 reads are then the same either way."""
    for r in range(4):
        for c in range(4):
            expected = wp.float64(0.0)
            if r == c:
                expected = wp.float64(1.0)
            if wp.abs(m[r, c] - expected) > wp.float64(1.0e-12):
                return False
    return True


@wp.func
def _signed_pose(x: wp.transformf, offset: wp.quatf, sign: float):
    """Float32 position and xyzw orientation of the rigid transform ``x``, the orientation times ``offset``. ``sign``
    0 returns ``w >= 0``; +1 or -1 keeps the product's sign times ``sign`` (Isaac Lab's Newton view returns the
    product's sign: the adapter passes the sign that aligns the cached offset with Isaac Lab's)."""
    q = wp.transform_get_rotation(x)
    if offset[3] != 1.0:  # not the identity (a unit quaternion with w == 1)
        q = q * offset
    if sign == 0.0:
        if q[3] < 0.0:
            q = -q
    else:
        q = q * sign
    return wp.transform_get_translation(x), q


@wp.func
def _frame_pose(offset_pose: wp.transformf, b: int, body_q: wp.array(dtype=wp.transformf), offset: wp.quatf,
                sign: float):  # fmt: skip
    """Float32 world position and xyzw orientation of a frame whose shear-free pose relative to body ``b`` (-1: the
    world) is ``offset_pose`` (:func:`refresh_offsets`; unit rotation), the orientation times ``offset``, signed as
    :func:`_signed_pose` signs it.

    The body's pose is rigid, so the frame's pose is the product of two rigid transforms: no matrix, no
    decomposition, in float32 as the body's pose is stored (against composing in float64 the positions differ by
    rounding only; ``perf/bench_newton.py`` checks its reads against float64 truth)."""
    x = offset_pose
    if b >= 0:
        x = body_q[b] * x
    return _signed_pose(x, offset, sign)


@wp.func
def _local_pose(n: int, local: wp.array(dtype=wp.mat44d), offsets: wp.array(dtype=wp.transformf),
                sheared: wp.array(dtype=wp.int32), offset: wp.quatf, sign: float):  # fmt: skip
    """Float32 local position and xyzw orientation of frame ``n`` (orientation times ``offset``): its cached offset
    when its USD parent is its body or the world (signed by :func:`_signed_pose`), else its local matrix
    decomposed (``w >= 0``)."""
    if (sheared[n] & DIRECT) != 0:
        return _signed_pose(offsets[n], offset, sign)
    return pose_of(local[n], offset)


# ---------------------------------------------------------------- kernels


@wp.func
def cache_offset(
    n: int,
    m: wp.mat44d,
    direct: int,
    body: wp.array(dtype=wp.int32),
    offsets_out: wp.array(dtype=wp.transformf),
    sheared_out: wp.array(dtype=wp.int32),
):
    """Store frame ``n``'s cached offset (:func:`refresh_offsets`) from its matrix ``m`` relative to its body: its
    translation and unit rotation, rounded to float32 once."""
    q = unit_quat(rotation_quat(axis_rotation(m, axis_scale(m))))
    offsets_out[n] = wp.transformf(wp.vec3f(wp.vec3d(m[3, 0], m[3, 1], m[3, 2])), wp.quatf(q))
    flag = int(0)
    if body[n] >= 0 and not _rows_orthogonal(m):
        flag = _SHEARED
    if direct != 0:
        flag = flag | DIRECT
    sheared_out[n] = flag


@wp.kernel(enable_backward=False)
def refresh_offsets(
    # inputs
    local: wp.array(dtype=wp.mat44d),
    chain: wp.array(dtype=wp.mat44d),
    anchor: wp.array(dtype=wp.int32),
    body: wp.array(dtype=wp.int32),
    # outputs
    offsets_out: wp.array(dtype=wp.transformf),
    sheared_out: wp.array(dtype=wp.int32),
):
    """Cache each frame's pose relative to its body (to the world when it has none) for the world reads: the
    translation and unit rotation of its offset matrix, in float32, and
    whether that matrix is sheared on a body (reads then decompose the world matrix itself). Run over every frame
    after ``local`` changes (a node added, a write committed), so no read sees a stale offset."""
    n = wp.tid()
    direct = int(0)
    if anchor[n] < 0 and _is_identity(chain[n]):
        direct = 1
    cache_offset(n, _offset_matrix(n, local, chain, anchor), direct, body, offsets_out, sheared_out)


@wp.kernel(enable_backward=False)
def read_poses(
    # inputs
    local: wp.array(dtype=wp.mat44d),
    chain: wp.array(dtype=wp.mat44d),
    anchor: wp.array(dtype=wp.int32),
    body: wp.array(dtype=wp.int32),
    offsets: wp.array(dtype=wp.transformf),
    sheared: wp.array(dtype=wp.int32),
    body_q: wp.array(dtype=wp.transformf),
    view_node: wp.array(dtype=wp.int32),
    count: int,
    kind: int,
    indices: wp.array(dtype=wp.int32),
    mask: wp.array(dtype=wp.bool),
    world: int,
    offset: wp.quatf,
    signs: wp.array(dtype=wp.float32),
    # outputs
    pos_out: wp.array(dtype=wp.vec3f),
    quat_out: wp.array(dtype=wp.quatf),
    status_out: wp.array(dtype=wp.int32),
):
    """World (``world``) or local pose of each row's frame, orientation times ``offset``; an index out of range gives
    NaN and is reported. World poses compose the frames' cached offsets (:func:`refresh_offsets`) with their
    bodies' poses; local poses of a frame whose USD parent is its body are its cached offset (the same numbers as
    decomposing its local matrix, without the decomposition). ``signs`` (one per view row, or empty: ``w >= 0``)
    gives the sign of each orientation relative to the product ``body * offset`` (:func:`_frame_pose`), and of a
    local one relative to the cached offset."""
    k = wp.tid()
    i = view_row(k, kind, indices, mask, count)
    if i == -2:
        pos_out[k] = wp.vec3f(NAN, NAN, NAN)
        quat_out[k] = wp.quatf(NAN, NAN, NAN, NAN)
        if not failed(status_out):
            report(status_out, k, CODE_INDEX_RANGE)
        return
    if i < 0:
        return
    n = view_node[i]
    p = wp.vec3f()
    q = wp.quatf()
    sign = float(0.0)
    if signs.shape[0] > 0:
        sign = signs[i]
    if world == 0:
        p, q = _local_pose(n, local, offsets, sheared, offset, sign)
    elif (sheared[n] & _SHEARED) != 0:  # rare: the world matrix itself, decomposed as on every other backend
        p, q = pose_of(world_matrix(n, local, chain, anchor, body, body_q), offset)
    else:
        p, q = _frame_pose(offsets[n], body[n], body_q, offset, sign)
    pos_out[k] = p
    quat_out[k] = q


@wp.kernel(enable_backward=False)
def read_local_poses_all(
    # inputs
    local: wp.array(dtype=wp.mat44d),
    offsets: wp.array(dtype=wp.transformf),
    sheared: wp.array(dtype=wp.int32),
    view_node: wp.array(dtype=wp.int32),
    offset: wp.quatf,
    signs: wp.array(dtype=wp.float32),
    # outputs
    pos_out: wp.array(dtype=wp.vec3f),
    quat_out: wp.array(dtype=wp.quatf),
):
    """:func:`read_poses`' local read of every view row, one thread per row: no row selection, no body state (a full
    read takes no index to check). Its own kernel because its few arguments keep a CPU thread cheap: on the CPU each
    row calls the kernel body, which loads every argument a branch may use."""
    i = wp.tid()
    sign = float(0.0)
    if signs.shape[0] > 0:
        sign = signs[i]
    p, q = _local_pose(view_node[i], local, offsets, sheared, offset, sign)
    pos_out[i] = p
    quat_out[i] = q

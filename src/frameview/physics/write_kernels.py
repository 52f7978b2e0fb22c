# SPDX-License-Identifier: Apache-2.0
"""The physics views' reset writes: DOF positions and velocities and the root's pose and velocities, scattered into
the engine's joint coordinates, all rows or none, and the articulations written marked for forward kinematics.

A write is one or two launches over ``(call rows, columns)``. Inputs the host checked (host indices and data) go
straight to :func:`scatter_dof_values` / :func:`scatter_root_values`; device inputs first pass :func:`check_write`
(indices in range and given once, values finite, quaternions non-zero), whose errors land in the view's status word,
and the scatter writes nothing once the word holds one (``gated``). The scatter marks each written row's
articulation in ``fk_mask_out`` and its world in ``world_mask_out`` (Isaac Lab's reset masks, or the view's own mask
for ``newton.eval_fk``).
"""

from __future__ import annotations

from typing import Any

import warp as wp

from .._core.device_errors import (
    CODE_INDEX_DUPLICATE,
    CODE_INDEX_RANGE,
    CODE_VALUE_NOT_FINITE,
    CODE_ZERO_QUATERNION,
    failed,
    report,
)
from .kernels import call_row

__all__ = ["check_write", "scatter_dof_values", "scatter_root_values"]


@wp.kernel(enable_backward=False)
def check_write(
    # inputs
    kind: int,
    indices: wp.array(dtype=Any),
    mask: wp.array(dtype=wp.bool),
    count: int,
    values: wp.array2d(dtype=wp.float32),
    values2: wp.array2d(dtype=wp.float32),
    quat2: int,
    # outputs
    claims_out: wp.array(dtype=wp.int32),
    status_out: wp.array(dtype=wp.int32),
):
    """One thread per call row: its index in range and claimed once (``claims_out`` is zero between writes), the
    values of both arguments finite (an argument with no rows is absent), and with ``quat2`` the second one a
    non-zero quaternion."""
    k = wp.tid()
    row = call_row(k, kind, indices, mask, count)
    if row == -1:
        return
    if row == -2:
        report(status_out, k, CODE_INDEX_RANGE)
        return
    if wp.atomic_add(claims_out, row, 1) > 0:
        report(status_out, k, CODE_INDEX_DUPLICATE)
    if values.shape[0] > 0:
        for c in range(values.shape[1]):
            if not wp.isfinite(values[k, c]):
                report(status_out, k, CODE_VALUE_NOT_FINITE)
                return
    if values2.shape[0] > 0:
        norm = float(0.0)
        for c in range(values2.shape[1]):
            v = values2[k, c]
            if not wp.isfinite(v):
                report(status_out, k, CODE_VALUE_NOT_FINITE)
                return
            norm += v * v
        if quat2 != 0 and norm < 1.0e-12:
            report(status_out, k, CODE_ZERO_QUATERNION)


@wp.func
def _written_row(
    k: int,
    kind: int,
    indices: Any,
    mask: wp.array(dtype=wp.bool),
    count: int,
    column: int,
    gated: int,
    status: wp.array(dtype=wp.int32),
    claims_out: wp.array(dtype=wp.int32),
):
    """A scatter's view row for call row ``k``, or -1: masked out, out of range, or (``gated``) a write the device
    checks rejected. Column 0 releases the row's claim of :func:`check_write` first, accepted or not."""
    row = call_row(k, kind, indices, mask, count)
    if row < 0:
        return -1
    if column == 0:
        claims_out[row] = 0
    if gated != 0 and failed(status):
        return -1
    return row


@wp.func
def _mark(row: int, art: wp.array(dtype=wp.int32), art_world: wp.array(dtype=wp.int32),
          fk_mask_out: wp.array(dtype=wp.bool), world_mask_out: wp.array(dtype=wp.bool)):  # fmt: skip
    a = art[row]
    fk_mask_out[a] = True
    if world_mask_out.shape[0] > 0:
        w = art_world[a]
        if w >= 0:
            world_mask_out[w] = True
        else:
            world_mask_out[world_mask_out.shape[0] - 1] = True  # Isaac Lab's slot for the global world


@wp.kernel(enable_backward=False)
def scatter_dof_values(
    # inputs
    kind: int,
    indices: wp.array(dtype=Any),
    mask: wp.array(dtype=wp.bool),
    count: int,
    q_table: wp.array2d(dtype=wp.int32),
    qd_table: wp.array2d(dtype=wp.int32),
    positions: wp.array2d(dtype=wp.float32),
    velocities: wp.array2d(dtype=wp.float32),
    dof_sign: wp.array(dtype=wp.float32),
    art: wp.array(dtype=wp.int32),
    art_world: wp.array(dtype=wp.int32),
    gated: int,
    status: wp.array(dtype=wp.int32),
    # outputs
    claims_out: wp.array(dtype=wp.int32),
    joint_q_out: wp.array(dtype=wp.float32),
    joint_qd_out: wp.array(dtype=wp.float32),
    fk_mask_out: wp.array(dtype=wp.bool),
    world_mask_out: wp.array(dtype=wp.bool),
):
    """``joint_q_out[q_table[row, c]] = positions[k, c] * dof_sign[c]`` and the same for velocities into
    ``joint_qd_out`` (an argument with no rows is absent), for every call row ``k`` (view row ``row``) and DOF column
    ``c``; the row's articulation (and world) marked for forward kinematics. Nothing is written once the status word
    holds an error (``gated``: the inputs were checked on the device by :func:`check_write`)."""
    k, c = wp.tid()
    row = _written_row(k, kind, indices, mask, count, c, gated, status, claims_out)
    if row < 0:
        return
    if positions.shape[0] > 0:
        joint_q_out[q_table[row, c]] = positions[k, c] * dof_sign[c]
    if velocities.shape[0] > 0:
        joint_qd_out[qd_table[row, c]] = velocities[k, c] * dof_sign[c]
    if c == 0:
        _mark(row, art, art_world, fk_mask_out, world_mask_out)


@wp.kernel(enable_backward=False)
def scatter_root_values(
    # inputs
    kind: int,
    indices: wp.array(dtype=Any),
    mask: wp.array(dtype=wp.bool),
    count: int,
    start: wp.array(dtype=wp.int32),
    root_body: wp.array(dtype=wp.int32),
    joint_frame: wp.array(dtype=wp.transformf),
    child_frame: wp.array(dtype=wp.transformf),
    velocities: int,
    has_a: int,
    a: wp.array2d(dtype=wp.float32),
    has_b: int,
    b: wp.array2d(dtype=wp.float32),
    body_q: wp.array(dtype=wp.transformf),
    art: wp.array(dtype=wp.int32),
    art_world: wp.array(dtype=wp.int32),
    gated: int,
    status: wp.array(dtype=wp.int32),
    # outputs
    claims_out: wp.array(dtype=wp.int32),
    engine_out: wp.array(dtype=wp.float32),
    fk_mask_out: wp.array(dtype=wp.bool),
    world_mask_out: wp.array(dtype=wp.bool),
):
    """A floating root's free joint, from world-frame values (``None`` components keep the current ones).

    ``a`` and ``b`` are (M, 3) and (M, 4) / (M, 3) float32 rows (empty when absent). Poses (``velocities`` 0):
    ``a`` positions, ``b`` xyzw orientations (normalised here) of the root link; the
    free joint's 7 coordinates at ``engine_out[start[row]]`` become ``inv(joint_frame) * pose * child_frame``, so
    forward kinematics puts the root link at the pose. Velocities (``velocities`` 1): ``a`` linear velocity of the
    centre of mass, ``b.xyz`` angular velocity, world frame; the 6 joint velocities are the same vectors in the
    joint's parent frame (Newton's free-joint convention)."""
    k = wp.tid()
    row = _written_row(k, kind, indices, mask, count, 0, gated, status, claims_out)
    if row < 0:
        return
    s = start[row]
    frame = wp.transform_get_rotation(joint_frame[row])
    if velocities == 0:
        current = body_q[root_body[row]]
        p = wp.transform_get_translation(current)
        q = wp.transform_get_rotation(current)
        if has_a != 0:
            p = wp.vec3f(a[k, 0], a[k, 1], a[k, 2])
        if has_b != 0:
            q = wp.normalize(wp.quatf(b[k, 0], b[k, 1], b[k, 2], b[k, 3]))
        x = wp.transform_inverse(joint_frame[row]) * wp.transform(p, q) * child_frame[row]
        t = wp.transform_get_translation(x)
        r = wp.transform_get_rotation(x)
        for i in range(3):
            engine_out[s + i] = t[i]
        for i in range(4):
            engine_out[s + 3 + i] = r[i]
    else:
        if has_a != 0:
            lin = wp.quat_rotate_inv(frame, wp.vec3f(a[k, 0], a[k, 1], a[k, 2]))
            for i in range(3):
                engine_out[s + i] = lin[i]
        if has_b != 0:
            ang = wp.quat_rotate_inv(frame, wp.vec3f(b[k, 0], b[k, 1], b[k, 2]))
            for i in range(3):
                engine_out[s + 3 + i] = ang[i]
    _mark(row, art, art_world, fk_mask_out, world_mask_out)

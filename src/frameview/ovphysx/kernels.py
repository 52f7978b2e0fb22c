# SPDX-License-Identifier: Apache-2.0
"""The ovphysx views' DOF gathers: :mod:`frameview.physics.kernels`' value and joint-state gathers with a per-DOF
sign applied to positions, velocities *and* efforts (ovphysx reports a DOF of a joint whose ``body0`` is the
articulation child negated; the views undo it, and the effort conjugate to a negated coordinate is negated too)."""

from __future__ import annotations

from typing import Any

import warp as wp

from ..physics.kernels import _view_row

__all__ = ["gather_signed_joint_state", "gather_signed_values"]


@wp.kernel(enable_backward=False)
def gather_signed_values(
    kind: int,
    indices: wp.array(dtype=Any),
    mask: wp.array(dtype=wp.bool),
    count: int,
    table: wp.array2d(dtype=wp.int32),
    values: wp.array(dtype=wp.float32),
    sign: wp.array(dtype=wp.float32),
    status: wp.array(dtype=wp.int32),
    out: wp.array2d(dtype=wp.float32),
):
    """One DOF quantity, ``values[table[row, c]] * sign[c]``."""
    k, c = wp.tid()
    row = _view_row(k, kind, indices, mask, count, status, c)
    if row < 0:
        return
    out[k, c] = values[table[row, c]] * sign[c]


@wp.kernel(enable_backward=False)
def gather_signed_joint_state(
    kind: int,
    indices: wp.array(dtype=Any),
    mask: wp.array(dtype=wp.bool),
    count: int,
    table: wp.array2d(dtype=wp.int32),
    joint_q: wp.array(dtype=wp.float32),
    joint_qd: wp.array(dtype=wp.float32),
    joint_f: wp.array(dtype=wp.float32),
    sign: wp.array(dtype=wp.float32),
    status: wp.array(dtype=wp.int32),
    pos_out: wp.array2d(dtype=wp.float32),
    vel_out: wp.array2d(dtype=wp.float32),
    effort_out: wp.array2d(dtype=wp.float32),
):
    """DOF positions, velocities and efforts of every articulation row in one launch, each times ``sign[c]``; the
    three engine arrays share one layout (``table``)."""
    k, c = wp.tid()
    row = _view_row(k, kind, indices, mask, count, status, c)
    if row < 0:
        return
    s = sign[c]
    i = table[row, c]
    pos_out[k, c] = joint_q[i] * s
    vel_out[k, c] = joint_qd[i] * s
    effort_out[k, c] = joint_f[i] * s

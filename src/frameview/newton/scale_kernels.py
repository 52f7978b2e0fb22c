# SPDX-License-Identifier: Apache-2.0
"""The Newton view's scale reads (the frame model: :mod:`frameview.newton.kernels`). A module of their own: Warp hashes
and loads a module whole at its first launch, so a view's first pose read never pays for these.
"""

from __future__ import annotations

import warp as wp

from .._core.device_errors import CODE_INDEX_RANGE, failed, report
from ..kernels.transforms import decompose_matrix
from .kernels import NAN, view_row, world_matrix

__all__ = ["read_scales"]


@wp.kernel(enable_backward=False)
def read_scales(
    # inputs
    local: wp.array(dtype=wp.mat44d),
    chain: wp.array(dtype=wp.mat44d),
    anchor: wp.array(dtype=wp.int32),
    body: wp.array(dtype=wp.int32),
    body_q: wp.array(dtype=wp.transformf),
    view_node: wp.array(dtype=wp.int32),
    count: int,
    kind: int,
    indices: wp.array(dtype=wp.int32),
    mask: wp.array(dtype=wp.bool),
    world: int,
    # outputs
    scale_out: wp.array(dtype=wp.vec3f),
    status_out: wp.array(dtype=wp.int32),
):
    """World (``world``) or local scale of each row's frame (NaN and a report for an index out of range)."""
    k = wp.tid()
    i = view_row(k, kind, indices, mask, count)
    if i == -2:
        scale_out[k] = wp.vec3f(NAN, NAN, NAN)
        if not failed(status_out):
            report(status_out, k, CODE_INDEX_RANGE)
        return
    if i < 0:
        return
    n = view_node[i]
    m = local[n]
    if world != 0:
        m = world_matrix(n, local, chain, anchor, body, body_q)
    _t, _q, s = decompose_matrix(m)
    scale_out[k] = wp.vec3f(s)

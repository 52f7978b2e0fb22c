# SPDX-License-Identifier: Apache-2.0
"""Kernels of a world-space writer scope over nested view prims: the held writes' components gathered per view row
(the last value written to each component wins), and the rows of one component set and nesting level selected for
one backend write.

A world scope over a view that holds a prim and one of its ancestors cannot apply its held writes one after another:
a later write of the ancestor (or of another component of the same prim) would move what an earlier write placed.
The scope gathers every held write into (N,) per-row buffers with a per-row bit set of the components written
(:func:`accumulate_write`), then writes each group of rows with the same component set through the backend, ancestors'
levels first (:func:`select_rows`), so every prim ends at the world values last written to it.
"""

from __future__ import annotations

import warp as wp

from .._core.device_errors import failed

__all__ = ["COMPONENT_POS", "COMPONENT_QUAT", "COMPONENT_SCALE", "accumulate_write", "select_rows"]

COMPONENT_POS = wp.constant(1)
COMPONENT_QUAT = wp.constant(2)
COMPONENT_SCALE = wp.constant(4)


@wp.kernel(enable_backward=False)
def accumulate_write(
    # inputs
    kind: int,
    indices: wp.array(dtype=wp.int32),
    mask: wp.array(dtype=wp.bool),
    has_pos: int,
    pos: wp.array(dtype=wp.vec3f),
    has_quat: int,
    quat: wp.array(dtype=wp.quatf),
    has_scale: int,
    scale: wp.array(dtype=wp.vec3f),
    gated: int,
    status: wp.array(dtype=wp.int32),
    # outputs
    pos_out: wp.array(dtype=wp.vec3f),
    quat_out: wp.array(dtype=wp.quatf),
    scale_out: wp.array(dtype=wp.vec3f),
    flags_out: wp.array(dtype=wp.int32),
):
    """Row ``k`` of one held write (``kind`` 0: all rows, 1: ``indices``, 2: ``mask``) into view row ``i``'s
    buffers, and its component bits into ``flags_out[i]``. ``gated``: the write was applied through the backend first
    (its device inputs were checked there): nothing is gathered once the view's status word holds an error."""
    k = wp.tid()
    if gated != 0 and failed(status):
        return
    i = k
    if kind == 1:
        i = indices[k]
    elif kind == 2:  # noqa: SIM102 - Warp does not short-circuit: mask is empty unless kind is 2
        if not mask[k]:
            return
    bits = flags_out[i]
    if has_pos != 0:
        pos_out[i] = pos[k]
        bits = bits | COMPONENT_POS
    if has_quat != 0:
        quat_out[i] = quat[k]
        bits = bits | COMPONENT_QUAT
    if has_scale != 0:
        scale_out[i] = scale[k]
        bits = bits | COMPONENT_SCALE
    flags_out[i] = bits


@wp.kernel(enable_backward=False)
def select_rows(
    # inputs
    flags: wp.array(dtype=wp.int32),
    level: wp.array(dtype=wp.int32),
    components: int,
    at_level: int,
    # outputs
    mask_out: wp.array(dtype=wp.bool),
):
    """``mask_out[i]``: row ``i`` was written with exactly the component set ``components`` (and lies at nesting
    level ``at_level``, unless it is -1)."""
    i = wp.tid()
    mask_out[i] = flags[i] == components and (at_level < 0 or level[i] == at_level)

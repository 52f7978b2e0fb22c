# SPDX-License-Identifier: Apache-2.0
"""Internal: the kernel of the Isaac Lab adapter that a Newton view's first read launches (:func:`offset_signs`), a
Warp module of its own: Warp hashes and loads a module whole at its first launch, so the first read does not pay for
the adapter's other kernels (:mod:`.kernels`)."""

from __future__ import annotations

import warp as wp

__all__ = ["offset_signs"]


@wp.kernel
def offset_signs(
    # inputs
    view_node: wp.array(dtype=wp.int32),
    node_offset: wp.array(dtype=wp.transformf),
    isaaclab_offset: wp.array(dtype=wp.quatf),
    # outputs
    signs_out: wp.array(dtype=wp.float32),
):
    """Per view row, the sign that aligns frameview's cached offset rotation with Isaac Lab's (``resolve_prim_pose``
    of the frame relative to its body): world reads then return Isaac Lab's product ``body * offset``, sign included,
    from the view's own read launch (:meth:`frameview.NewtonFrameView._use_quat_signs`)."""
    i = wp.tid()
    s = float(1.0)
    if wp.dot(wp.transform_get_rotation(node_offset[view_node[i]]), isaaclab_offset[i]) < 0.0:
        s = -1.0
    signs_out[i] = s

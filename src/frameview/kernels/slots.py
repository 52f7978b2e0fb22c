# SPDX-License-Identifier: Apache-2.0
"""Slot tables: from a view's private tag column to "view index -> Fabric slot", in one launch."""

from __future__ import annotations

import warp as wp

__all__ = ["invert_tag_column"]


@wp.kernel(enable_backward=False)
def invert_tag_column(
    # inputs
    tags: wp.fabricarray(dtype=wp.uint32),
    # outputs
    slots_out: wp.array(dtype=wp.int32),
):
    """``slots_out[tags[slot]] = slot``: the Fabric slot of each view index.

    The tag column holds each prim's view index, so its inverse is the slot table. Launch with ``dim`` equal to the
    selection's count, which the caller has checked equals the view's count.
    """
    slot = wp.tid()
    slots_out[int(tags[slot])] = slot

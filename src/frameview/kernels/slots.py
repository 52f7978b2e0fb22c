# SPDX-License-Identifier: Apache-2.0
"""Slot tables: from a view's private tag column to "view index -> Fabric slot", in one launch."""

from __future__ import annotations

from typing import Any

import warp as wp

__all__ = ["COLUMN_KINDS", "invert_tag_column", "scan_slot"]

# Fabric columns reach the reset path's kernels as fabric arrays or, for a selection of one bucket, as plain arrays
# over that bucket (frameview.fabric.columns): the same code, one overload per kind, all compiled with the module.
COLUMN_KINDS = (
    (wp.fabricarray(dtype=wp.uint32), wp.fabricarray(dtype=wp.mat44d)),
    (wp.array(dtype=wp.uint32), wp.array(dtype=wp.mat44d)),
)
"""The ``(tags, matrices)`` column types of the Fabric kernels' overloads."""


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


@wp.func
def scan_slot(tags: Any, table: wp.array(dtype=wp.int32), i: int, count: int):
    """The Fabric slot whose tag is ``i``, found by scanning the tag column and written back to ``table``; -1 if no
    prim carries the tag. For a slot table entry that the tag column did not confirm (a stale table): slow, never
    wrong."""
    for t in range(count):
        if int(tags[t]) == i:
            table[i] = t
            return t
    return -1

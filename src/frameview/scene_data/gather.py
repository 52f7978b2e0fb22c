# SPDX-License-Identifier: Apache-2.0
"""The kernels of :class:`~frameview.scene_data.SceneDataProvider`: gather source rows into a consumer's order."""

from __future__ import annotations

import warp as wp

from ..kernels.transforms import decompose_matrix

__all__ = ["gather_matrix_transforms", "gather_pose_transforms"]


@wp.func
def _source_row(
    mapping: wp.array(dtype=wp.int32), source_count: wp.int32, i: int, status_out: wp.array(dtype=wp.int32)
):
    """Source row of output row ``i`` (``i`` when there is no mapping); -1 to skip it (unmapped, or out of range, which
    is flagged in ``status_out[1]``)."""
    if not mapping:
        return i
    j = int(mapping[i])
    if j != -1 and (j < 0 or j >= int(source_count)):
        status_out[1] = 1
        return -1
    return j


@wp.kernel
def gather_matrix_transforms(
    # inputs
    matrices: wp.array(dtype=wp.mat44d),
    mapping: wp.array(dtype=wp.int32),
    source_count: wp.int32,
    # outputs
    positions_out: wp.array(dtype=wp.vec3f),
    orientations_out: wp.array(dtype=wp.quatf),
    scales_out: wp.array(dtype=wp.vec3f),
    status_out: wp.array(dtype=wp.int32),
):
    """Decompose ``matrices[mapping[i]]`` into row ``i`` of the outputs; ``-1`` rows are left untouched.

    ``status_out[0]`` is set to 1 if a row was written, ``status_out[1]`` if a mapping value was out of range.
    Outputs passed as ``None`` are skipped; ``mapping`` ``None`` is the identity.
    """
    i = wp.tid()
    j = _source_row(mapping, source_count, i, status_out)
    if j < 0:
        return
    p, q, s = decompose_matrix(matrices[j])
    if positions_out:
        positions_out[i] = wp.vec3f(p)
    if orientations_out:
        orientations_out[i] = wp.quatf(q)
    if scales_out:
        scales_out[i] = wp.vec3f(s)
    status_out[0] = 1


@wp.kernel
def gather_pose_transforms(
    # inputs
    positions: wp.array(dtype=wp.vec3f),
    orientations: wp.array(dtype=wp.quatf),
    mapping: wp.array(dtype=wp.int32),
    source_count: wp.int32,
    # outputs
    positions_out: wp.array(dtype=wp.vec3f),
    orientations_out: wp.array(dtype=wp.quatf),
    status_out: wp.array(dtype=wp.int32),
):
    """Copy ``positions[mapping[i]]`` / ``orientations[mapping[i]]`` into row ``i``; ``-1`` rows are left untouched.

    ``status_out`` as in :func:`gather_matrix_transforms`.
    """
    i = wp.tid()
    j = _source_row(mapping, source_count, i, status_out)
    if j < 0:
        return
    if positions_out:
        positions_out[i] = positions[j]
    if orientations_out:
        orientations_out[i] = orientations[j]
    status_out[0] = 1

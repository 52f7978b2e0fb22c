# SPDX-License-Identifier: Apache-2.0
"""The write solve of :class:`~frameview.usd.UsdFrameView`: new local matrices of the written prims.

One launch per level of nesting solves each written prim against its parent's world matrix as it will be after the
write (:func:`frameview.kernels.requests.solve_request`, the same solve as the Fabric backend), then decomposes the
result into the translate / orient / scale that :mod:`frameview.usd.author` authors.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import warp as wp
from pxr import Usd, UsdGeom

from .._core.host import to_numpy
from ..kernels.requests import WriteRequest, WriteRequests, solve_request
from ..kernels.transforms import decompose_matrix, is_sheared

__all__ = ["SolvedWrites", "UsdWriteSolver"]


@wp.kernel(enable_backward=False)
def _solve_writes(
    # inputs
    local: wp.array(dtype=wp.mat44d),
    parent_world: wp.array(dtype=wp.mat44d),
    src_rows: wp.array(dtype=wp.int32),
    req: WriteRequest,
    # outputs
    local_out: wp.array(dtype=wp.mat44d),
    t_out: wp.array(dtype=wp.vec3d),
    q_out: wp.array(dtype=wp.quatd),
    s_out: wp.array(dtype=wp.vec3d),
    sheared_out: wp.array(dtype=wp.int32),
    status_out: wp.array(dtype=wp.int32),
):
    """New local matrix (and its translate/orient/scale) of each written prim: the same :func:`solve_local` as the
    Fabric backend. Row ``j`` reads the request at ``src_rows[j]``; ``sheared_out`` flags a sheared result."""
    j = wp.tid()
    m, status = solve_request(local[j], parent_world[j], src_rows[j], req)
    local_out[j] = m
    status_out[j] = status
    lt, lq, ls = decompose_matrix(m)
    t_out[j] = lt
    q_out[j] = lq
    s_out[j] = ls
    sheared_out[j] = 0
    if is_sheared(m):
        sheared_out[j] = 1


@dataclass
class SolvedWrites:
    """The solve of one write, per written prim (float64 host arrays, row-vector matrices)."""

    local: np.ndarray
    """(M, 4, 4) the new local matrices."""
    trs: tuple[np.ndarray, np.ndarray, np.ndarray]
    """Their translations (M, 3), orientations (M, 4) xyzw and per-axis scales (M, 3)."""
    sheared: np.ndarray
    """(M,) int32: 1 where the new local matrix has shear (no translate/orient/scale expresses it)."""
    status: np.ndarray
    """(M,) int32: a ``WRITE_*`` code of :mod:`frameview.kernels.transforms` (``WRITE_OK``: solved)."""
    parent_scale: np.ndarray
    """(M, 3) the per-axis scales of the parents' world matrices (world scale writes); ones otherwise."""


class UsdWriteSolver:
    """Solves writes of :class:`~frameview.usd.UsdFrameView` on one Warp device (used from the view's lock)."""

    def __init__(self, device: wp.context.Device) -> None:
        self._device = device
        self._requests = WriteRequests(device)

    def solve(
        self,
        prims: list[Usd.Prim],
        paths: list[str],
        local: np.ndarray,
        resets: list[bool],
        *,
        in_world: bool,
        pos: wp.array | None,
        quat: wp.array | None,
        scale: wp.array | None,
    ) -> SolvedWrites:
        """Solve the new local matrices of ``prims`` (row ``k`` reads request row ``k``).

        A prim and its descendant may be written in one call, in any row order: prims are solved level by level
        of nesting, each against its parent's world matrix as it will be after the write.

        Args:
            prims: The written prims (live).
            paths: Their paths.
            local: (M, 4, 4) float64, their current local matrices.
            resets: Their ``resetXformStack`` flags.
            in_world: True for a world write (the requests are in the world frame).
            pos: (M, 3) float32 positions on the view's device, or ``None`` to keep them.
            quat: (M, 4) float32 xyzw orientations, or ``None``.
            scale: (M, 3) float32 scales, or ``None``.
        """
        n = len(prims)
        level = _nesting_levels(paths)
        cache = UsdGeom.XformCache(Usd.TimeCode.Default())
        out = SolvedWrites(
            local=np.empty((n, 4, 4), dtype=np.float64),
            trs=(np.empty((n, 3)), np.empty((n, 4)), np.empty((n, 3))),
            sheared=np.zeros(n, dtype=np.int32),
            status=np.zeros(n, dtype=np.int32),
            parent_scale=np.ones((n, 3)),  # a world scale write authors world / parent scale (as solve_local does)
        )
        new_world: dict[str, np.ndarray] = {}
        for lv in range(int(level.max()) + 1 if n else 0):
            batch = np.flatnonzero(level == lv)
            parents = np.array(
                [_parent_world(prims[k], resets[k], cache, new_world, nested=lv > 0) for k in batch]
            ).reshape(-1, 4, 4)
            solved = self._launch(local[batch], parents, batch, in_world, pos, quat, scale)
            out.local[batch], out.sheared[batch], out.status[batch] = solved[0], solved[4], solved[5]
            for part, value in zip(out.trs, solved[1:4], strict=True):
                part[batch] = value
            if in_world and scale is not None:
                out.parent_scale[batch] = _axis_scales(parents)
            for j, k in enumerate(batch):
                new_world[paths[k]] = out.local[k] @ parents[j]
        return out

    def _launch(
        self,
        local: np.ndarray,
        parents: np.ndarray,
        src_rows: np.ndarray,
        in_world: bool,
        pos: wp.array | None,
        quat: wp.array | None,
        scale: wp.array | None,
    ) -> tuple[np.ndarray, ...]:
        device, m = self._device, local.shape[0]
        outs = [wp.empty(m, dtype=dt, device=device) for dt in (wp.mat44d, wp.vec3d, wp.quatd, wp.vec3d)]
        flags_out = [wp.empty(m, dtype=wp.int32, device=device) for _ in range(2)]
        wp.launch(
            _solve_writes,
            dim=m,
            inputs=[
                wp.array(local, dtype=wp.mat44d, device=device),
                wp.array(parents, dtype=wp.mat44d, device=device),
                wp.array(src_rows.astype(np.int32), dtype=wp.int32, device=device),
                self._requests.build(in_world, pos, quat, scale),
            ],
            outputs=[*outs, *flags_out],
            device=device,
        )
        return tuple(to_numpy(a) for a in (*outs, *flags_out))


def _parent_world(
    prim: Usd.Prim, reset: bool, cache: UsdGeom.XformCache, new_world: dict[str, np.ndarray], nested: bool
) -> np.ndarray:
    """The parent's world matrix as it will be after the write: through the new world matrix of the nearest
    written ancestor (``new_world``) when ``nested``, else the stage's."""
    if reset:
        return np.eye(4)
    if not nested:
        return np.array(cache.GetLocalToWorldTransform(prim.GetParent()), dtype=np.float64)
    acc = np.eye(4)
    parent = prim.GetParent()
    while parent and not parent.IsPseudoRoot():
        written = new_world.get(str(parent.GetPath()))
        if written is not None:
            return acc @ written
        local, parent_resets = cache.GetLocalTransformation(parent)
        acc = acc @ np.array(local, dtype=np.float64)
        if parent_resets:
            return acc
        parent = parent.GetParent()
    return acc


def _axis_scales(mats: np.ndarray) -> np.ndarray:
    """(M, 3) per-axis scales of (M, 4, 4) row-vector matrices as ``decompose_matrix`` reports them: the lengths of
    the rows of the upper 3x3, the sign of its determinant on x."""
    upper = mats[:, :3, :3]
    out = np.linalg.norm(upper, axis=2)
    out[:, 0] *= np.where(np.linalg.det(upper) < 0.0, -1.0, 1.0)
    return out


def _nesting_levels(paths: list[str]) -> np.ndarray:
    """For each path, how many of the other paths are its ancestors (0: no written ancestor)."""
    written = set(paths)
    levels = np.zeros(len(paths), dtype=np.int64)
    for k, path in enumerate(paths):
        parent = path.rsplit("/", 1)[0]
        while parent:
            if parent in written:
                levels[k] += 1
            parent = parent.rsplit("/", 1)[0]
    return levels

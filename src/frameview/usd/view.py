# SPDX-License-Identifier: Apache-2.0
"""UsdFrameView: the pxr reference backend (``UsdGeom.XformCache`` reads, xformOp writes).

This backend is the reference the others are checked against: it favours correctness over speed. Every read builds
a fresh ``UsdGeom.XformCache`` (nothing is cached between calls, so edits made by anyone are always seen), and every
write authors the prims' ``xformOp:translate`` / ``xformOp:orient`` / ``xformOp:scale`` on the stage's current edit
target at the default time code.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

import numpy as np
import warp as wp

from .._core.host import to_numpy

try:
    from pxr import Sdf, Usd, UsdGeom, Vt
except ImportError as exc:  # usd-core is the optional extra frameview[usd]; Kit ships its own pxr
    raise ImportError(
        "UsdFrameView needs pxr: install frameview[usd] (or run inside Kit / Isaac Sim, which ships pxr)", name="pxr"
    ) from exc

from .._core.device_errors import CODE_RESULT_NOT_FINITE, CODE_SHEAR, CODE_SINGULAR_PARENT, STATUS_CODES
from .._core.rows import Rows
from ..base import BaseFrameView
from ..kernels.transforms import WRITE_NOT_FINITE, WRITE_OK, WRITE_SHEAR, WRITE_SINGULAR_PARENT, decompose_matrices
from ..visibility import INVISIBLE, VISIBLE, PxrVisibilityTree, plan_visibility
from .author import (
    author_local,
)
from .solve import UsdWriteSolver

__all__ = ["UsdFrameView"]

logger = logging.getLogger(__name__)

_USD_LOCK = threading.RLock()
"""Serialises every UsdFrameView call in the process: pxr authoring is not safe from several threads at once."""


def _lost_state(prim: Usd.Prim) -> str | None:
    """Why a viewed prim has no pose any more (``"was removed from the stage"``...), or None."""
    if not prim.IsValid():
        return "was removed from the stage"
    if prim.IsInstanceProxy():
        return "became an instance proxy (an ancestor was made instanceable)"
    if not prim.IsActive():
        return "was deactivated"
    if not prim.IsA(UsdGeom.Xformable):
        return f"became a {prim.GetTypeName() or 'typeless'} prim (not Xformable)"
    return None


class UsdFrameView(BaseFrameView):
    """FrameView over a pxr ``Usd.Stage``: the reference backend.

    Reads compose the stage with a fresh ``UsdGeom.XformCache`` per call (world) and each prim's
    ``GetLocalTransformation`` (local), at the default time code. Writes author the prims' xformOps (default time
    code) on the stage's edit target, inside one ``Sdf.ChangeBlock``; every prim is checked before anything is
    authored, so a rejected write writes nothing:

    - A prim whose op stack is a subset of ``[xformOp:translate][, xformOp:orient][, xformOp:scale]`` in that order
      (any precision) keeps it; only the written components are authored, missing ops are added in that order
      (new ops are double precision: ``double3`` / ``quatd`` / ``double3``).
    - Any other stack (``rotateXYZ``, a ``transform`` matrix op, pivots, suffixed or inverse ops) is read as is; the
      first write to the prim replaces it by the equivalent ``[translate, orient, scale]`` (logged once per view).
      A local matrix with shear cannot be expressed that way: such a write raises ``ValueError`` naming the prim,
      and nothing is written.
    - World writes keep the prim's **local** scale and bring the world pose into the parent frame with the parent's
      world matrix (the same solve as the Fabric backend). Positions are always exact; the local rotation is
      ``conj(q_parent) * q``, exact under a uniformly scaled parent, and under a non-uniformly scaled one only when
      the rotation relative to the parent maps the parent's scale axes onto each other (otherwise the world matrix
      would need shear, which no translate/orient/scale local expresses). A parent whose world matrix cannot be
      inverted (a zero scale) makes a world write raise ``ValueError``.
    - A prim with ``!resetXformStack!`` ignores its ancestors: its world matrix is its local matrix, and world
      writes treat its parent's world as identity.

    A prim removed from the stage after the view was built raises ``RuntimeError`` on the next access that touches
    it; recreate the view. The view keeps no other state, so edits made to the stage by anyone are always seen.
    World scales are row lengths of the world matrix: they assume no shear. A view is meant for one thread; calls
    from other threads are serialised on one process-wide lock and get their own output buffers.

    Example:
        >>> from pxr import Usd, UsdGeom
        >>> import frameview as fv
        >>> stage = Usd.Stage.CreateInMemory()
        >>> _ = UsdGeom.Xform.Define(stage, "/World/A").AddTranslateOp().Set((1.0, 2.0, 3.0))
        >>> with fv.UsdFrameView("/World/A", stage=stage) as view:
        ...     pos, quat = view.get_world_poses()
        ...     pos.numpy().tolist()
        [[1.0, 2.0, 3.0]]
    """

    def __init__(
        self, prim_path: str | Sequence[str], *, stage: Usd.Stage, device: str = "cpu", quat_order: str = "xyzw"
    ) -> None:
        """Build a view over the prims ``prim_path`` resolves to.

        Args:
            prim_path: A prim path, a pattern with a regular expression per component (``/World/envs/env_.*/Cam``)
                or a list of them; see :func:`frameview.resolve_prim_paths` for the rules and the order.
            stage: The pxr stage holding the prims.
            device: Warp device of the returned arrays, e.g. ``"cpu"`` or ``"cuda:0"``.
            quat_order: ``"xyzw"`` (the default) or ``"wxyz"``: the order of every orientation the view takes and
                returns (see :class:`~frameview.BaseFrameView`).

        Raises:
            TypeError: ``stage`` is not a pxr ``Usd.Stage``.
            ValueError: The pattern matches no prim, matches a prim twice, or a matched prim is not Xformable; an
                unknown ``quat_order``.
        """
        if not isinstance(stage, Usd.Stage):
            raise TypeError(f"stage: expected a pxr Usd.Stage, got {type(stage).__name__}")
        from ..paths import resolve_prim_paths  # lazy: another module of this package, loaded on first use

        paths = resolve_prim_paths(prim_path, stage)
        prims = [stage.GetPrimAtPath(p) for p in paths]
        for path, prim in zip(paths, prims, strict=True):
            if not prim.IsValid():
                raise ValueError(f"prim_path: no prim at {path!r}")
            if not prim.IsA(UsdGeom.Xformable):
                raise ValueError(
                    f"prim_path: prim {path!r} is a {prim.GetTypeName() or 'typeless prim'}, expected an Xformable "
                    "(Xform, Camera, Mesh, ...); select Xformable prims only"
                )
        self._lock = _USD_LOCK  # BaseFrameView runs every public call under it
        super().__init__(prim_path, paths, device=device, quat_order=quat_order)
        self._stage = stage
        self._prims = prims
        self._warned_standardise = False
        self._solver = UsdWriteSolver(self._device)

    @property
    def backend(self) -> str:
        """``"usd"``."""
        return "usd"

    @property
    def stage(self) -> Usd.Stage:
        """The pxr stage the view reads and writes."""
        return self._stage

    # ---------------------------------------------------------------- reads

    def _read_world_poses(self, rows: Rows, pos_out: wp.array, quat_out: wp.array) -> None:
        scratch = self._args.outputs("usd_scratch_scale", wp.vec3f, rows.count)
        self._decompose(self._world_matrices(self._live_prims(rows)), pos_out, quat_out, scratch)

    def _read_local_poses(self, rows: Rows, pos_out: wp.array, quat_out: wp.array) -> None:
        scratch = self._args.outputs("usd_scratch_scale", wp.vec3f, rows.count)
        self._decompose(self._local_matrices(self._live_prims(rows))[0], pos_out, quat_out, scratch)

    def _read_world_scales(self, rows: Rows, scale_out: wp.array) -> None:
        pos = self._args.outputs("usd_scratch_pos", wp.vec3f, rows.count)
        quat = self._args.outputs("usd_scratch_quat", wp.quatf, rows.count)
        self._decompose(self._world_matrices(self._live_prims(rows)), pos, quat, scale_out)

    def _read_local_scales(self, rows: Rows, scale_out: wp.array) -> None:
        pos = self._args.outputs("usd_scratch_pos", wp.vec3f, rows.count)
        quat = self._args.outputs("usd_scratch_quat", wp.quatf, rows.count)
        self._decompose(self._local_matrices(self._live_prims(rows))[0], pos, quat, scale_out)

    # ---------------------------------------------------------------- writes

    def _write_world_poses(self, rows: Rows, pos: wp.array | None, quat: wp.array | None) -> None:
        self._write(rows, in_world=True, pos=pos, quat=quat, scale=None)

    def _write_local_poses(self, rows: Rows, pos: wp.array | None, quat: wp.array | None) -> None:
        self._write(rows, in_world=False, pos=pos, quat=quat, scale=None)

    def _write_local_scales(self, rows: Rows, scales: wp.array) -> None:
        self._write(rows, in_world=False, pos=None, quat=None, scale=scales)

    def _release(self) -> None:
        self._prims = []

    # ---------------------------------------------------------------- visibility (host path)

    def _read_visibility(self, rows: np.ndarray | None) -> np.ndarray:
        prims = self._live_prims(list(range(self.count)) if rows is None else rows.tolist())
        invisible = UsdGeom.Tokens.invisible
        return np.array([UsdGeom.Imageable(p).ComputeVisibility() != invisible for p in prims], dtype=bool)

    def _write_visibility(self, rows: np.ndarray | None, visible: np.ndarray) -> None:
        """Plan every opinion first (reads), then author them all in one ``Sdf.ChangeBlock`` (writes only)."""
        prims = self._live_prims(list(range(self.count)) if rows is None else rows.tolist())
        changes = plan_visibility(PxrVisibilityTree(self._stage), [str(p.GetPath()) for p in prims], visible)
        tokens = {VISIBLE: UsdGeom.Tokens.inherited, INVISIBLE: UsdGeom.Tokens.invisible}
        with Sdf.ChangeBlock():
            for path, opinion in changes.items():
                UsdGeom.Imageable(self._stage.GetPrimAtPath(path)).CreateVisibilityAttr().Set(tokens[opinion])

    # ---------------------------------------------------------------- helpers

    def _view_rows(self, rows: Rows) -> list[int]:
        idx = rows.host_indices()
        return list(range(self.count)) if idx is None else idx.tolist()

    def _live_prims(self, rows: Rows | list[int]) -> list[Usd.Prim]:
        """The prims at ``rows``; ``RuntimeError`` naming the prim when one was removed from the stage, became an
        instance proxy, was deactivated or is no longer xformable (as the Fabric backend, which drops such prims)."""
        view_rows = rows if isinstance(rows, list) else self._view_rows(rows)
        prims = []
        for row in view_rows:
            prim = self._prims[row]
            state = _lost_state(prim)
            if state is not None and not prim.IsValid():  # the handle expired: say why (the path may hold a new prim)
                now = self._stage.GetPrimAtPath(self._prim_paths[row])
                if now.IsValid() and now.IsInstanceProxy():
                    state = _lost_state(now)
            if state is not None:
                raise RuntimeError(
                    f"{type(self).__name__}: prim {self._prim_paths[row]!r} {state} after the view was created, so "
                    "it has no pose this view can read or write; restore it or recreate the view without it"
                )
            prims.append(prim)
        return prims

    @staticmethod
    def _world_matrices(prims: list[Usd.Prim]) -> np.ndarray:
        cache = UsdGeom.XformCache(Usd.TimeCode.Default())
        return np.array(Vt.Matrix4dArray([cache.GetLocalToWorldTransform(p) for p in prims]), dtype=np.float64)

    @staticmethod
    def _local_matrices(prims: list[Usd.Prim]) -> tuple[np.ndarray, list[bool]]:
        """Local matrices (M, 4, 4) float64 and each prim's ``resetXformStack`` flag."""
        cache = UsdGeom.XformCache(Usd.TimeCode.Default())
        pairs = [cache.GetLocalTransformation(p) for p in prims]
        mats = np.array(Vt.Matrix4dArray([m for m, _ in pairs]), dtype=np.float64)
        return mats, [bool(r) for _, r in pairs]

    def _decompose(self, mats: np.ndarray, pos_out: wp.array, quat_out: wp.array, scale_out: wp.array) -> None:
        arr = wp.array(mats, dtype=wp.mat44d, device=self._device)
        wp.launch(
            decompose_matrices,
            dim=arr.shape[0],
            inputs=[arr],
            outputs=[pos_out, quat_out, scale_out],
            device=self._device,
        )

    def _write(
        self,
        rows: Rows,
        *,
        in_world: bool,
        pos: wp.array | None,
        quat: wp.array | None,
        scale: wp.array | None,
    ) -> None:
        """Solve the new local matrices on the device (:mod:`frameview.usd.solve`), then author them on the stage
        (:mod:`frameview.usd.author`): all or nothing.

        A prim and its descendant may be written in one call, in any row order: prims are solved level by level
        of nesting, each against its parent's world matrix as it will be after the write.
        """
        view_rows = self._view_rows(rows)
        prims = self._live_prims(view_rows)
        local, resets = self._local_matrices(prims)
        paths = [self._prim_paths[i] for i in view_rows]
        solved = self._solver.solve(prims, paths, local, resets, in_world=in_world, pos=pos, quat=quat, scale=scale)
        bad = np.flatnonzero(solved.status != int(WRITE_OK))
        if bad.size:
            k = int(bad[0])
            code = {int(WRITE_SINGULAR_PARENT): CODE_SINGULAR_PARENT, int(WRITE_SHEAR): CODE_SHEAR,
                    int(WRITE_NOT_FINITE): CODE_RESULT_NOT_FINITE}[int(solved.status[k])]  # fmt: skip
            call = "set_local_scales" if scale is not None else ("set_world" if in_world else "set_local")
            raise self._status_error(call, rows)(k * int(STATUS_CODES) + int(code))
        req_scale = None if scale is None else to_numpy(scale).astype(np.float64) / solved.parent_scale
        flags = (pos is not None, quat is not None, scale is not None)
        replaced = author_local(prims, solved.local, solved.trs, solved.sheared, flags, req_scale)
        if replaced and not self._warned_standardise:
            self._warned_standardise = True
            logger.info(
                "%s: replaced the xformOp stack of %d prim(s) (first: %s) by the equivalent "
                "[xformOp:translate, xformOp:orient, xformOp:scale] (or one xformOp:transform where it has shear); "
                "further replacements by this view are not logged",
                type(self).__name__,
                len(replaced),
                paths[replaced[0]],
            )

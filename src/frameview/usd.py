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
from typing import Any

import numpy as np
import warp as wp

try:
    from pxr import Gf, Sdf, Usd, UsdGeom, Vt
except ImportError as exc:  # usd-core is the optional extra frameview[usd]; Kit ships its own pxr
    raise ImportError(
        "UsdFrameView needs pxr: install frameview[usd] (or run inside Kit / Isaac Sim, which ships pxr)", name="pxr"
    ) from exc

from ._rows import CODE_RESULT_NOT_FINITE, CODE_SHEAR, CODE_SINGULAR_PARENT, STATUS_CODES, Rows
from .base import BaseFrameView
from .kernels.requests import solve_request
from .kernels.transforms import (
    SHEAR_TOLERANCE,
    WRITE_NOT_FINITE,
    WRITE_OK,
    WRITE_SHEAR,
    WRITE_SINGULAR_PARENT,
    decompose_matrices,
    decompose_matrix,
    shear_error,
)
from .visibility import INVISIBLE, VISIBLE, PxrVisibilityTree, plan_visibility

__all__ = ["UsdFrameView"]

logger = logging.getLogger(__name__)

_USD_LOCK = threading.RLock()
"""Serialises every UsdFrameView call in the process: pxr authoring is not safe from several threads at once."""

_TRANSLATE, _ORIENT, _SCALE, _TRANSFORM = 0, 1, 2, 3
_STANDARD_OP_NAMES = {"xformOp:translate": _TRANSLATE, "xformOp:orient": _ORIENT, "xformOp:scale": _SCALE}
_OP_NAMES = {kind: name for name, kind in _STANDARD_OP_NAMES.items()}
# attribute type name -> Gf constructor for a vec3 / quaternion given as float64 (x, y, z) / (x, y, z, w)
_VEC3_TYPES = {"double3": Gf.Vec3d, "float3": Gf.Vec3f, "half3": Gf.Vec3h}
_QUAT_TYPES = {"quatd": (Gf.Quatd, Gf.Vec3d), "quatf": (Gf.Quatf, Gf.Vec3f), "quath": (Gf.Quath, Gf.Vec3h)}


@wp.kernel(enable_backward=False)
def _solve_writes(
    # inputs
    local: wp.array(dtype=wp.mat44d),
    parent_world: wp.array(dtype=wp.mat44d),
    src_rows: wp.array(dtype=wp.int32),
    in_world: int,
    set_pos: int,
    pos: wp.array(dtype=wp.vec3f),
    set_quat: int,
    quat: wp.array(dtype=wp.quatf),
    set_scale: int,
    scale: wp.array(dtype=wp.vec3f),
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
    m, status = solve_request(local[j], parent_world[j], src_rows[j], in_world, set_pos, pos, set_quat, quat,
                              set_scale, scale)  # fmt: skip
    local_out[j] = m
    status_out[j] = status
    lt, lq, ls = decompose_matrix(m)
    t_out[j] = lt
    q_out[j] = lq
    s_out[j] = ls
    sheared_out[j] = 0
    if shear_error(m) > wp.float64(SHEAR_TOLERANCE):
        sheared_out[j] = 1


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


def _rotation_for_scale(local: np.ndarray, scale: np.ndarray) -> np.ndarray | None:
    """xyzw ``q`` with ``rotate(q) @ scale`` equal to the upper 3x3 of ``local`` (row-vector: row ``i`` is axis ``i``
    times ``scale[i]``), or None when dividing out ``scale`` leaves no proper rotation. Plain float math: it runs once
    per written prim."""
    sx, sy, sz = (float(v) for v in scale)
    if min(abs(sx), abs(sy), abs(sz)) < 1e-12:
        return None
    (a, b, c), (d, e, f), (g, h, i) = (row[:3] for row in local[:3].tolist())
    a, b, c, d, e, f, g, h, i = a / sx, b / sx, c / sx, d / sy, e / sy, f / sy, g / sz, h / sz, i / sz
    rows = ((a, b, c), (d, e, f), (g, h, i))
    for m in range(3):  # orthonormal rows
        for n in range(m, 3):
            dot = sum(rows[m][k] * rows[n][k] for k in range(3))
            if abs(dot - (1.0 if m == n else 0.0)) > 1e-6:
                return None
    if a * (e * i - f * h) - b * (d * i - f * g) + c * (d * h - e * g) <= 0.0:
        return None
    # the column-vector rotation is the transpose of the rows: R[r][c] = rows[c][r]
    r00, r01, r02, r10, r11, r12, r20, r21, r22 = a, d, g, b, e, h, c, f, i
    trace = r00 + r11 + r22
    if trace > 0.0:
        t = 2.0 * (trace + 1.0) ** 0.5
        q = ((r21 - r12) / t, (r02 - r20) / t, (r10 - r01) / t, 0.25 * t)
    elif r00 > r11 and r00 > r22:
        t = 2.0 * (1.0 + r00 - r11 - r22) ** 0.5
        q = (0.25 * t, (r01 + r10) / t, (r02 + r20) / t, (r21 - r12) / t)
    elif r11 > r22:
        t = 2.0 * (1.0 + r11 - r00 - r22) ** 0.5
        q = ((r01 + r10) / t, 0.25 * t, (r12 + r21) / t, (r02 - r20) / t)
    else:
        t = 2.0 * (1.0 + r22 - r00 - r11) ** 0.5
        q = ((r02 + r20) / t, (r12 + r21) / t, 0.25 * t, (r10 - r01) / t)
    out = np.array(q, dtype=np.float64)
    out /= np.linalg.norm(out)
    return -out if out[3] < 0 else out


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


def _standard_ops(xformable: UsdGeom.Xformable) -> dict[int, UsdGeom.XformOp] | None:
    """The prim's ops by kind when its stack is a subset of [translate][, orient][, scale] in that order, else None."""
    found: dict[int, UsdGeom.XformOp] = {}
    last = -1
    for op in xformable.GetOrderedXformOps():
        kind = _STANDARD_OP_NAMES.get(op.GetName())
        if kind is None or op.IsInverseOp() or kind <= last:
            return None
        found[kind] = op
        last = kind
    return found


def _vec3_value(attr: Usd.Attribute, v: np.ndarray) -> Any:
    return _VEC3_TYPES[str(attr.GetTypeName())](float(v[0]), float(v[1]), float(v[2]))


def _quat_value(attr: Usd.Attribute, q: np.ndarray) -> Any:
    """xyzw float64 -> the attribute's Gf quaternion (Gf stores real part first: (w, (x, y, z)))."""
    quat_type, vec_type = _QUAT_TYPES[str(attr.GetTypeName())]
    return quat_type(float(q[3]), vec_type(float(q[0]), float(q[1]), float(q[2])))


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

    def __init__(self, prim_path: str | Sequence[str], *, stage: Usd.Stage, device: str = "cpu") -> None:
        """Build a view over the prims ``prim_path`` resolves to.

        Args:
            prim_path: A prim path, a pattern with a regular expression per component (``/World/envs/env_.*/Cam``)
                or a list of them; see :func:`frameview.resolve_prim_paths` for the rules and the order.
            stage: The pxr stage holding the prims.
            device: Warp device of the returned arrays, e.g. ``"cpu"`` or ``"cuda:0"``.

        Raises:
            TypeError: ``stage`` is not a pxr ``Usd.Stage``.
            ValueError: The pattern matches no prim, matches a prim twice, or a matched prim is not Xformable.
        """
        if not isinstance(stage, Usd.Stage):
            raise TypeError(f"stage: expected a pxr Usd.Stage, got {type(stage).__name__}")
        from .paths import resolve_prim_paths  # lazy: another module of this package, loaded on first use

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
        super().__init__(prim_path, paths, device=device)
        self._stage = stage
        self._prims = prims
        self._warned_standardise = False
        self._no_vec3 = wp.empty(0, dtype=wp.vec3f, device=self._device)
        self._no_quat = wp.empty(0, dtype=wp.quatf, device=self._device)

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
        scratch = self._outputs("usd_scratch_scale", wp.vec3f, rows.count)
        self._decompose(self._world_matrices(self._live_prims(rows)), pos_out, quat_out, scratch)

    def _read_local_poses(self, rows: Rows, pos_out: wp.array, quat_out: wp.array) -> None:
        scratch = self._outputs("usd_scratch_scale", wp.vec3f, rows.count)
        self._decompose(self._local_matrices(self._live_prims(rows))[0], pos_out, quat_out, scratch)

    def _read_world_scales(self, rows: Rows, scale_out: wp.array) -> None:
        pos = self._outputs("usd_scratch_pos", wp.vec3f, rows.count)
        quat = self._outputs("usd_scratch_quat", wp.quatf, rows.count)
        self._decompose(self._world_matrices(self._live_prims(rows)), pos, quat, scale_out)

    def _read_local_scales(self, rows: Rows, scale_out: wp.array) -> None:
        pos = self._outputs("usd_scratch_pos", wp.vec3f, rows.count)
        quat = self._outputs("usd_scratch_quat", wp.quatf, rows.count)
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
        """Solve the new local matrices on the device, then author them on the stage (all or nothing).

        A prim and its descendant may be written in one call, in any row order: prims are solved level by level
        of nesting, each against its parent's world matrix as it will be after the write.
        """
        view_rows = self._view_rows(rows)
        prims = self._live_prims(view_rows)
        n = len(prims)
        local, resets = self._local_matrices(prims)
        paths = [self._prim_paths[i] for i in view_rows]
        level = _nesting_levels(paths)
        cache = UsdGeom.XformCache(Usd.TimeCode.Default())
        new_local = np.empty((n, 4, 4), dtype=np.float64)
        t, q, s = np.empty((n, 3)), np.empty((n, 4)), np.empty((n, 3))
        sheared, status = np.zeros(n, dtype=np.int32), np.zeros(n, dtype=np.int32)
        new_world: dict[str, np.ndarray] = {}
        parent_scale = np.ones((n, 3))  # a world scale write authors world / parent scale (as solve_local solves it)
        flags = (pos is not None, quat is not None, scale is not None)
        for lv in range(int(level.max()) + 1 if n else 0):
            batch = np.flatnonzero(level == lv)
            parents = np.array(
                [self._parent_world(prims[k], resets[k], cache, new_world, nested=lv > 0) for k in batch]
            ).reshape(-1, 4, 4)
            out = self._solve(local[batch], parents, batch, in_world, flags, pos, quat, scale)
            new_local[batch], t[batch], q[batch], s[batch], sheared[batch], status[batch] = out
            if in_world and scale is not None:
                parent_scale[batch] = _axis_scales(parents)
            for j, k in enumerate(batch):
                new_world[paths[k]] = new_local[k] @ parents[j]
        bad = np.flatnonzero(status != int(WRITE_OK))
        if bad.size:
            k = int(bad[0])
            code = {int(WRITE_SINGULAR_PARENT): CODE_SINGULAR_PARENT, int(WRITE_SHEAR): CODE_SHEAR,
                    int(WRITE_NOT_FINITE): CODE_RESULT_NOT_FINITE}[int(status[k])]  # fmt: skip
            call = "set_local_scales" if scale is not None else ("set_world" if in_world else "set_local")
            raise self._status_error(call, rows)(k * int(STATUS_CODES) + int(code))
        req_scale = None if scale is None else scale.numpy().astype(np.float64) / parent_scale
        self._author(prims, paths, new_local, (t, q, s), sheared, flags, req_scale)

    def _solve(
        self,
        local: np.ndarray,
        parents: np.ndarray,
        src_rows: np.ndarray,
        in_world: bool,
        flags: tuple[bool, bool, bool],
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
                int(in_world),
                int(flags[0]),
                self._no_vec3 if pos is None else pos,
                int(flags[1]),
                self._no_quat if quat is None else quat,
                int(flags[2]),
                self._no_vec3 if scale is None else scale,
            ],
            outputs=[*outs, *flags_out],
            device=device,
        )
        return tuple(a.numpy() for a in (*outs, *flags_out))

    @staticmethod
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

    def _author(
        self,
        prims: list[Usd.Prim],
        paths: list[str],
        new_local: np.ndarray,
        trs: tuple[np.ndarray, np.ndarray, np.ndarray],
        sheared: np.ndarray,
        flags: tuple[bool, bool, bool],
        req_scale: np.ndarray | None,
    ) -> None:
        """Author the solved local matrices, all in one change block; only what the write changes is authored.

        A ``[translate][, orient][, scale]`` stack keeps its ops: the translate op gets a written translation; a write
        that changes the upper 3x3 authors the orient op that, with the scale op's kept (or written) value, composes
        exactly the solved matrix — or, where no rotation does (a kept scale with a negative axis against the new
        rotation), orient and scale together. Any other stack is replaced by the equivalent
        ``[translate, orient, scale]``, or, when the local matrix has shear (translation-only writes), by one
        ``xformOp:transform`` holding it.
        """
        t, q, s = trs
        set_t, set_q, set_s = flags
        plans = []  # (k, {kind: op}, kinds to author, orient value or None, scale value or None)
        standardised = []
        for k, prim in enumerate(prims):
            x = UsdGeom.Xformable(prim)
            ops = _standard_ops(x)
            if ops is None:
                standardised.append(paths[k])
                if sheared[k]:  # translation-only write on a sheared local: one matrix op holds it exactly
                    resets = x.GetResetXformStack()
                    plans.append((k, {_TRANSFORM: x.MakeMatrixXform()}, (_TRANSFORM,), None, None))
                    if resets:
                        x.SetResetXformStack(True)
                    continue
                ops = self._set_stack(x, (_TRANSLATE, _ORIENT, _SCALE), {})
                plans.append((k, ops, (_TRANSLATE, _ORIENT, _SCALE), q[k], s[k]))
                continue
            kinds = {_TRANSLATE} if set_t else set()
            orient, scale = None, None
            if set_q or set_s:
                if set_s:
                    scale = req_scale[k]
                elif _SCALE in ops:
                    scale = np.array(ops[_SCALE].GetAttr().Get(), dtype=np.float64)
                else:
                    scale = np.ones(3)
                orient = _rotation_for_scale(new_local[k], scale)
                if orient is None:  # no rotation composes with this scale: author the decomposition
                    orient, scale = q[k], s[k]
                    kinds |= {_ORIENT, _SCALE}
                else:
                    if set_s:
                        kinds.add(_SCALE)
                    if _ORIENT in ops or abs(abs(orient[3]) - 1.0) > 1e-12:
                        kinds.add(_ORIENT)
            kinds_sorted = tuple(sorted(kinds))
            if any(kind not in ops for kind in kinds_sorted):
                ops = self._set_stack(x, tuple(sorted(set(ops) | kinds)), ops)
            plans.append((k, ops, kinds_sorted, orient, scale))
        if standardised and not self._warned_standardise:
            self._warned_standardise = True
            logger.info(
                "%s: replaced the xformOp stack of %d prim(s) (first: %s) by the equivalent "
                "[xformOp:translate, xformOp:orient, xformOp:scale] (or one xformOp:transform where it has shear); "
                "further replacements by this view are not logged",
                type(self).__name__,
                len(standardised),
                standardised[0],
            )
        with Sdf.ChangeBlock():
            for k, ops, kinds, orient, scale in plans:
                for kind in kinds:
                    attr = ops[kind].GetAttr()
                    if kind == _TRANSFORM:
                        attr.Set(Gf.Matrix4d(*new_local[k].ravel().tolist()))
                    elif kind == _TRANSLATE:
                        attr.Set(_vec3_value(attr, t[k]))
                    elif kind == _ORIENT:
                        attr.Set(_quat_value(attr, orient))
                    else:
                        attr.Set(_vec3_value(attr, scale))

    @staticmethod
    def _set_stack(
        xformable: UsdGeom.Xformable, kinds: tuple[int, ...], existing: dict[int, UsdGeom.XformOp]
    ) -> dict[int, UsdGeom.XformOp]:
        """Make the op order exactly ``kinds`` (in translate/orient/scale order), keeping ``resetXformStack``.

        Ops in ``existing`` are kept as they are; others reuse an existing ``xformOp:<kind>`` attribute (and its
        precision) when the prim has one, or are created in double precision. New ops are not given a value here.
        """
        prim = xformable.GetPrim()
        ops = {}
        for kind in kinds:
            if kind in existing:
                ops[kind] = existing[kind]
                continue
            attr = prim.GetAttribute(_OP_NAMES[kind])
            if attr:
                accepted = _QUAT_TYPES if kind == _ORIENT else _VEC3_TYPES
                if str(attr.GetTypeName()) not in accepted:
                    raise ValueError(
                        f"prim {str(prim.GetPath())!r}: attribute {_OP_NAMES[kind]} has type {attr.GetTypeName()}, "
                        f"expected one of {sorted(accepted)}; remove or retype it"
                    )
                ops[kind] = UsdGeom.XformOp(attr)
            else:
                attr = prim.CreateAttribute(
                    _OP_NAMES[kind],
                    Sdf.ValueTypeNames.Quatd if kind == _ORIENT else Sdf.ValueTypeNames.Double3,
                )
                ops[kind] = UsdGeom.XformOp(attr)
        xformable.SetXformOpOrder([ops[kind] for kind in kinds], xformable.GetResetXformStack())
        return ops

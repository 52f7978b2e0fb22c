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

from .base import BaseFrameView
from .kernels.transforms import (
    compose_matrix,
    decompose_matrices,
    decompose_matrix,
    is_singular,
    local_from_world_pose,
)

__all__ = ["UsdFrameView"]

logger = logging.getLogger(__name__)

_USD_LOCK = threading.RLock()
"""Serialises every UsdFrameView call in the process: pxr authoring is not safe from several threads at once."""

# Relative tolerance on |compose(decompose(m)) - m| above which a local matrix counts as sheared.
_SHEAR_TOLERANCE = 1.0e-6

_TRANSLATE, _ORIENT, _SCALE = 0, 1, 2
_STANDARD_OP_NAMES = {"xformOp:translate": _TRANSLATE, "xformOp:orient": _ORIENT, "xformOp:scale": _SCALE}
_OP_NAMES = {kind: name for name, kind in _STANDARD_OP_NAMES.items()}
# attribute type name -> Gf constructor for a vec3 / quaternion given as float64 (x, y, z) / (x, y, z, w)
_VEC3_TYPES = {"double3": Gf.Vec3d, "float3": Gf.Vec3f, "half3": Gf.Vec3h}
_QUAT_TYPES = {"quatd": (Gf.Quatd, Gf.Vec3d), "quatf": (Gf.Quatf, Gf.Vec3f), "quath": (Gf.Quath, Gf.Vec3h)}


@wp.kernel
def _solve_local_components(
    # inputs
    local: wp.array(dtype=wp.mat44d),
    parent_world: wp.array(dtype=wp.mat44d),
    in_world: int,
    set_pos: int,
    pos: wp.array(dtype=wp.vec3f),
    set_quat: int,
    quat: wp.array(dtype=wp.quatf),
    set_scale: int,
    scale: wp.array(dtype=wp.vec3f),
    # outputs
    t_out: wp.array(dtype=wp.vec3d),
    q_out: wp.array(dtype=wp.quatd),
    s_out: wp.array(dtype=wp.vec3d),
    shear_out: wp.array(dtype=wp.float64),
    singular_out: wp.array(dtype=wp.int32),
):
    """New local (translation, xyzw rotation, scale) after replacing the flagged components.

    With ``in_world`` the given position / orientation are world-frame and are brought into the parent frame with
    ``parent_world``; the local scale is always kept unless ``set_scale``. ``shear_out`` is the relative error of
    recomposing the current local matrix from its components (> 0 when it holds shear); ``singular_out`` is 1 where
    a world write meets a parent world matrix that cannot be inverted.
    """
    i = wp.tid()
    m = local[i]
    t, q, s = decompose_matrix(m)
    r = compose_matrix(t, q, s)
    err = wp.float64(0.0)
    size = wp.float64(1.0)
    for a in range(3):
        size = wp.max(size, wp.abs(s[a]))
        for b in range(3):
            err = wp.max(err, wp.abs(r[a, b] - m[a, b]))
    shear_out[i] = err / size
    singular_out[i] = 0
    if in_world != 0:
        pw = parent_world[i]
        if is_singular(pw):
            singular_out[i] = 1
        # the same world -> local solve as the Fabric backend: exact translation, rotation conj(q_parent) * q;
        # the translation depends only on the position and the rotation only on the orientation
        wt = wp.vec3d(wp.float64(0.0), wp.float64(0.0), wp.float64(0.0))
        wq = wp.quatd(wp.float64(0.0), wp.float64(0.0), wp.float64(0.0), wp.float64(1.0))
        if set_pos != 0:
            wt = wp.vec3d(pos[i])
        if set_quat != 0:
            wq = wp.normalize(wp.quatd(quat[i]))
        ones = wp.vec3d(wp.float64(1.0), wp.float64(1.0), wp.float64(1.0))
        lt, lq, _ls = decompose_matrix(local_from_world_pose(wt, wq, ones, pw))
        if set_pos != 0:
            t = lt
        if set_quat != 0:
            q = lq
    else:
        if set_pos != 0:
            t = wp.vec3d(pos[i])
        if set_quat != 0:
            q = wp.normalize(wp.quatd(quat[i]))
            if q[3] < wp.float64(0.0):
                q = -q
    if set_scale != 0:
        s = wp.vec3d(scale[i])
    t_out[i] = t
    q_out[i] = q
    s_out[i] = s


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

    def _read_world_poses(self, indices: wp.array | None, pos_out: wp.array, quat_out: wp.array) -> None:
        scratch = self._outputs("usd_scratch_scale", wp.vec3f, indices)
        self._decompose(self._world_matrices(self._live_prims(indices)), pos_out, quat_out, scratch)

    def _read_local_poses(self, indices: wp.array | None, pos_out: wp.array, quat_out: wp.array) -> None:
        scratch = self._outputs("usd_scratch_scale", wp.vec3f, indices)
        self._decompose(self._local_matrices(self._live_prims(indices))[0], pos_out, quat_out, scratch)

    def _read_world_scales(self, indices: wp.array | None, scale_out: wp.array) -> None:
        pos = self._outputs("usd_scratch_pos", wp.vec3f, indices)
        quat = self._outputs("usd_scratch_quat", wp.quatf, indices)
        self._decompose(self._world_matrices(self._live_prims(indices)), pos, quat, scale_out)

    def _read_local_scales(self, indices: wp.array | None, scale_out: wp.array) -> None:
        pos = self._outputs("usd_scratch_pos", wp.vec3f, indices)
        quat = self._outputs("usd_scratch_quat", wp.quatf, indices)
        self._decompose(self._local_matrices(self._live_prims(indices))[0], pos, quat, scale_out)

    # ---------------------------------------------------------------- writes

    def _write_world_poses(self, indices: wp.array | None, pos: wp.array | None, quat: wp.array | None) -> None:
        self._write(indices, in_world=True, pos=pos, quat=quat, scale=None)

    def _write_local_poses(self, indices: wp.array | None, pos: wp.array | None, quat: wp.array | None) -> None:
        self._write(indices, in_world=False, pos=pos, quat=quat, scale=None)

    def _write_local_scales(self, indices: wp.array | None, scales: wp.array) -> None:
        self._write(indices, in_world=False, pos=None, quat=None, scale=scales)

    def _release(self) -> None:
        self._prims = []

    # ---------------------------------------------------------------- helpers

    def _live_prims(self, indices: wp.array | None) -> list[Usd.Prim]:
        """The prims at ``indices`` (all for ``None``); ``RuntimeError`` when one was removed from the stage,
        deactivated or is no longer xformable (as the Fabric backend, which drops such prims from Fabric)."""
        rows = range(self.count) if indices is None else indices.numpy().tolist()
        prims = [self._prims[i] for i in rows]
        for row, prim in zip(rows, prims, strict=True):
            if not prim.IsValid():
                raise RuntimeError(
                    f"{type(self).__name__}: prim {self._prim_paths[row]!r} was removed from the stage after the view "
                    "was created; recreate the view"
                )
            if not (prim.IsActive() and prim.IsA(UsdGeom.Xformable)):
                kind = prim.GetTypeName() or "typeless"
                state = "was deactivated" if not prim.IsActive() else f"became a {kind} prim (not Xformable)"
                raise RuntimeError(
                    f"{type(self).__name__}: prim {self._prim_paths[row]!r} {state} after the view was created, so it "
                    "has no pose to read or write; restore it or recreate the view without it"
                )
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
        indices: wp.array | None,
        *,
        in_world: bool,
        pos: wp.array | None,
        quat: wp.array | None,
        scale: wp.array | None,
    ) -> None:
        """Solve the new local components on the device, then author them on the stage (all or nothing)."""
        rows = list(range(self.count)) if indices is None else indices.numpy().tolist()
        prims = self._live_prims(indices)
        local, resets = self._local_matrices(prims)
        device = self._device
        local_arr = wp.array(local, dtype=wp.mat44d, device=device)
        parent_arr = local_arr  # read only when in_world
        if in_world:
            cache = UsdGeom.XformCache(Usd.TimeCode.Default())
            identity = Gf.Matrix4d(1.0)
            parents = Vt.Matrix4dArray(
                [
                    identity if reset else cache.GetLocalToWorldTransform(p.GetParent())
                    for p, reset in zip(prims, resets, strict=True)
                ]
            )
            parent_arr = wp.array(np.array(parents, dtype=np.float64), dtype=wp.mat44d, device=device)
        n = len(prims)
        t_out = wp.empty(n, dtype=wp.vec3d, device=device)
        q_out = wp.empty(n, dtype=wp.quatd, device=device)
        s_out = wp.empty(n, dtype=wp.vec3d, device=device)
        shear_out = wp.empty(n, dtype=wp.float64, device=device)
        singular_out = wp.empty(n, dtype=wp.int32, device=device)
        wp.launch(
            _solve_local_components,
            dim=n,
            inputs=[
                local_arr,
                parent_arr,
                int(in_world),
                int(pos is not None),
                self._no_vec3 if pos is None else pos,
                int(quat is not None),
                self._no_quat if quat is None else quat,
                int(scale is not None),
                self._no_vec3 if scale is None else scale,
            ],
            outputs=[t_out, q_out, s_out, shear_out, singular_out],
            device=device,
        )
        t, q, s, shear = t_out.numpy(), q_out.numpy(), s_out.numpy(), shear_out.numpy()
        singular = singular_out.numpy().astype(bool)

        # plan every prim before touching the stage, so that a rejected write writes nothing
        finite = np.isfinite(t).all(axis=1) & np.isfinite(q).all(axis=1) & np.isfinite(s).all(axis=1)
        if singular.any() or not finite.all():
            k = int(np.flatnonzero(singular | ~finite)[0])
            raise ValueError(
                f"prim {self._prim_paths[rows[k]]!r}: the new local transform is not finite (its parent's world "
                "matrix is singular, e.g. a zero scale, or its local matrix is degenerate); nothing was written"
            )
        xformables = [UsdGeom.Xformable(p) for p in prims]
        stacks = [_standard_ops(x) for x in xformables]
        for k, ops in enumerate(stacks):
            if ops is None and shear[k] > _SHEAR_TOLERANCE:
                raise ValueError(
                    f"prim {self._prim_paths[rows[k]]!r}: its local transform has shear (relative error "
                    f"{shear[k]:.3g} as translate/orient/scale), which xformOp:translate/orient/scale cannot "
                    "express; remove the shear from its xformOps (or write it through another tool); nothing was "
                    "written"
                )
        wanted = [kind for kind, given in ((_TRANSLATE, pos), (_ORIENT, quat), (_SCALE, scale)) if given is not None]
        plans = []  # (prim index k, {kind: op}, kinds to author)
        standardised = []
        for k, (x, ops) in enumerate(zip(xformables, stacks, strict=True)):
            if ops is None:
                ops = self._set_stack(x, (_TRANSLATE, _ORIENT, _SCALE), {})
                plans.append((k, ops, (_TRANSLATE, _ORIENT, _SCALE)))
                standardised.append(self._prim_paths[rows[k]])
            else:
                if any(kind not in ops for kind in wanted):
                    ops = self._set_stack(x, tuple(sorted(set(ops) | set(wanted))), ops)
                plans.append((k, ops, wanted))
        if standardised and not self._warned_standardise:
            self._warned_standardise = True
            logger.info(
                "%s: replaced the xformOp stack of %d prim(s) (first: %s) by the equivalent "
                "[xformOp:translate, xformOp:orient, xformOp:scale]; further replacements by this view are not logged",
                type(self).__name__,
                len(standardised),
                standardised[0],
            )
        with Sdf.ChangeBlock():
            for k, ops, kinds in plans:
                for kind in kinds:
                    attr = ops[kind].GetAttr()
                    if kind == _TRANSLATE:
                        attr.Set(_vec3_value(attr, t[k]))
                    elif kind == _ORIENT:
                        attr.Set(_quat_value(attr, q[k]))
                    else:
                        attr.Set(_vec3_value(attr, s[k]))

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

# SPDX-License-Identifier: Apache-2.0
"""Authoring of :class:`~frameview.usd.UsdFrameView`'s writes: solved local matrices -> the prims' xformOps.

A ``[translate][, orient][, scale]`` stack keeps its ops and only what the write changes is authored; any other stack
is replaced by the equivalent ``[translate, orient, scale]`` (or one ``xformOp:transform`` when the local matrix has
shear). See :func:`author_local`.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
from pxr import Gf, Sdf, Usd, UsdGeom

__all__ = ["author_local"]

_TRANSLATE, _ORIENT, _SCALE, _TRANSFORM = 0, 1, 2, 3
_STANDARD_OP_NAMES = {"xformOp:translate": _TRANSLATE, "xformOp:orient": _ORIENT, "xformOp:scale": _SCALE}
_OP_NAMES = {kind: name for name, kind in _STANDARD_OP_NAMES.items()}
_STANDARD_STACK = (_TRANSLATE, _ORIENT, _SCALE)
# attribute type name -> Gf constructor for a vec3 / quaternion given as float64 (x, y, z) / (x, y, z, w)
_VEC3_TYPES = {"double3": Gf.Vec3d, "float3": Gf.Vec3f, "half3": Gf.Vec3h}
_QUAT_TYPES = {"quatd": (Gf.Quatd, Gf.Vec3d), "quatf": (Gf.Quatf, Gf.Vec3f), "quath": (Gf.Quath, Gf.Vec3h)}


class _Plan(NamedTuple):
    """What to author on one prim: the values of ``kinds`` through ``ops``."""

    k: int
    ops: dict[int, UsdGeom.XformOp]
    kinds: tuple[int, ...]
    orient: np.ndarray | None
    scale: np.ndarray | None


def author_local(
    prims: list[Usd.Prim],
    new_local: np.ndarray,
    trs: tuple[np.ndarray, np.ndarray, np.ndarray],
    sheared: np.ndarray,
    flags: tuple[bool, bool, bool],
    req_scale: np.ndarray | None,
) -> list[int]:
    """Author the solved local matrices, all in one change block; only what the write changes is authored.

    A ``[translate][, orient][, scale]`` stack keeps its ops: the translate op gets a written translation; a write
    that changes the upper 3x3 authors the orient op that, with the scale op's kept (or written) value, composes
    exactly the solved matrix — or, where no rotation does (a kept scale with a negative axis against the new
    rotation), orient and scale together. Any other stack is replaced by the equivalent
    ``[translate, orient, scale]``, or, when the local matrix has shear (translation-only writes), by one
    ``xformOp:transform`` holding it.

    Args:
        prims: The written prims (live, Xformable).
        new_local: (M, 4, 4) float64 row-vector local matrices to author.
        trs: Their translations (M, 3), xyzw orientations (M, 4) and per-axis scales (M, 3), float64.
        sheared: (M,) nonzero where ``new_local`` has shear.
        flags: Whether the write sets positions, orientations, scales.
        req_scale: (M, 3) float64 local scales the write requests, or ``None`` when it sets none.

    Returns:
        The positions in ``prims`` of the prims whose op stack was replaced.

    Raises:
        ValueError: A prim holds an ``xformOp:<kind>`` attribute of a type that op cannot have.
    """
    t, q, s = trs
    plans: list[_Plan] = []
    replaced: list[int] = []
    for k, prim in enumerate(prims):
        x = UsdGeom.Xformable(prim)
        ops = _standard_ops(x)
        if ops is None:
            replaced.append(k)
            plans.append(_replace_stack(x, k, bool(sheared[k]), q[k], s[k]))
        else:
            requested = None if req_scale is None else req_scale[k]
            plans.append(_keep_stack(x, k, ops, new_local[k], q[k], s[k], flags, requested))
    with Sdf.ChangeBlock():
        for plan in plans:
            for kind in plan.kinds:
                attr = plan.ops[kind].GetAttr()
                attr.Set(_op_value(kind, attr, new_local[plan.k], t[plan.k], plan.orient, plan.scale))
    return replaced


def _replace_stack(x: UsdGeom.Xformable, k: int, sheared: bool, q: np.ndarray, s: np.ndarray) -> _Plan:
    """A non-standard stack: ``[translate, orient, scale]``, or one matrix op for a sheared (translation-only) local."""
    if sheared:  # translation-only write on a sheared local: one matrix op holds it exactly
        resets = x.GetResetXformStack()
        plan = _Plan(k, {_TRANSFORM: x.MakeMatrixXform()}, (_TRANSFORM,), None, None)
        if resets:
            x.SetResetXformStack(True)
        return plan
    return _Plan(k, _set_stack(x, _STANDARD_STACK, {}), _STANDARD_STACK, q, s)


def _keep_stack(
    x: UsdGeom.Xformable,
    k: int,
    ops: dict[int, UsdGeom.XformOp],
    local: np.ndarray,
    q: np.ndarray,
    s: np.ndarray,
    flags: tuple[bool, bool, bool],
    req_scale: np.ndarray | None,
) -> _Plan:
    """A standard stack: the ops the write changes (missing ones added in translate/orient/scale order)."""
    set_t, set_q, set_s = flags
    kinds = {_TRANSLATE} if set_t else set()
    orient, scale = None, None
    if set_q or set_s:
        orient, scale, changed = _orient_and_scale(ops, local, q, s, req_scale)
        kinds |= changed
    kinds_sorted = tuple(sorted(kinds))
    if any(kind not in ops for kind in kinds_sorted):
        ops = _set_stack(x, tuple(sorted(set(ops) | kinds)), ops)
    return _Plan(k, ops, kinds_sorted, orient, scale)


def _orient_and_scale(
    ops: dict[int, UsdGeom.XformOp], local: np.ndarray, q: np.ndarray, s: np.ndarray, req_scale: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, set[int]]:
    """The orient that composes ``local``'s upper 3x3 with the written (or kept) scale, that scale, and which of the
    two ops to author; the decomposition ``(q, s)`` and both ops where no rotation composes with the scale."""
    if req_scale is not None:
        scale = req_scale
    elif _SCALE in ops:
        scale = np.array(ops[_SCALE].GetAttr().Get(), dtype=np.float64)
    else:
        scale = np.ones(3)
    orient = _rotation_for_scale(local, scale)
    if orient is None:  # no rotation composes with this scale: author the decomposition
        return q, s, {_ORIENT, _SCALE}
    kinds = {_SCALE} if req_scale is not None else set()
    if _ORIENT in ops or abs(abs(orient[3]) - 1.0) > 1e-12:
        kinds.add(_ORIENT)
    return orient, scale, kinds


def _op_value(kind: int, attr: Usd.Attribute, local: np.ndarray, t: np.ndarray, orient: Any, scale: Any) -> Any:
    """The value of op ``kind`` in the attribute's own type."""
    if kind == _TRANSFORM:
        return Gf.Matrix4d(*local.ravel().tolist())
    if kind == _TRANSLATE:
        return _vec3_value(attr, t)
    if kind == _ORIENT:
        return _quat_value(attr, orient)
    return _vec3_value(attr, scale)


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

# SPDX-License-Identifier: Apache-2.0
"""Internal: the kernels of the Isaac Lab adapter (:mod:`.adapter`): quaternions signed as Isaac Lab's view of each
backend signs them (:data:`SIGN_GF` ...), and the scales of the collision shapes on a frame's body (Isaac Lab's
Newton ``get_scales`` / ``set_scales``). Quaternions are xyzw."""

from __future__ import annotations

from typing import Any

import warp as wp

from .sign_kernels import offset_signs

__all__ = [
    "NO_QUATS",
    "SIGN_GF",
    "SIGN_NEWTON",
    "SIGN_NEWTON_LOCAL",
    "SIGN_WARP",
    "EmptyArrays",
    "gather_shape_scales",
    "offset_signs",
    "scatter_shape_scales",
    "signed_quats",
    "written_signs",
]

SIGN_GF, SIGN_WARP, SIGN_NEWTON, SIGN_NEWTON_LOCAL = 0, 1, 2, 3
"""How Isaac Lab's view of a backend signs the quaternions it returns (``q`` and ``-q`` are the same rotation):

- ``SIGN_GF``: pxr's ``Gf.Matrix4d.ExtractRotationQuat`` (Isaac Lab's USD view, and the local poses of its Newton
  view, from ``resolve_prim_pose``): ``w`` positive when the matrix trace exceeds its largest diagonal entry
  ``m_ii``, else ``q_i`` positive (see ``_gf_sign``);
- ``SIGN_WARP``: ``wp.quat_from_matrix`` (Isaac Lab's Fabric view): ``w >= 0`` when the matrix trace ``4 w^2 - 1`` is
  not negative, else the largest of x, y, z positive;
- ``SIGN_NEWTON``: the product ``body_q[body].q * q_offset`` (Isaac Lab's Newton view), ``q_offset`` the frame's
  rotation from its body signed as Isaac Lab's ``resolve_prim_pose`` signs it from the stage when the view is built,
  and as written after a world write: the frameview view's read applies it itself (:func:`offset_signs`,
  :meth:`frameview.NewtonFrameView._use_quat_signs`);
- ``SIGN_NEWTON_LOCAL``: the local poses of Isaac Lab's Newton view are the offsets above, relative to the body, where
  frameview's are relative to the USD parent: for a frame right below its body they agree, signed as the offset."""


@wp.func
def _largest_positive(q: wp.quatf, count: int) -> float:
    """-1.0 when the component of largest magnitude among the first ``count`` (the first of ties) is negative."""
    k = int(0)
    best = wp.abs(q[0])
    for i in range(1, count):
        if wp.abs(q[i]) > best:
            best = wp.abs(q[i])
            k = i
    if q[k] < 0.0:
        return -1.0
    return 1.0


@wp.func
def _gf_sign(q: wp.quatf) -> float:
    """-1.0 when pxr's ``ExtractRotationQuat`` gives ``-q``: it picks the largest diagonal entry ``m_ii`` of the
    rotation matrix (the later of equal ones) and makes ``w`` positive when the trace exceeds it, else ``q_i``."""
    xx = q[0] * q[0]
    yy = q[1] * q[1]
    zz = q[2] * q[2]
    m00 = 1.0 - 2.0 * (yy + zz)
    m11 = 1.0 - 2.0 * (xx + zz)
    m22 = 1.0 - 2.0 * (xx + yy)
    i = int(2)
    mii = m22
    if m00 > m11:
        if m00 > m22:
            i = 0
            mii = m00
    elif m11 > m22:
        i = 1
        mii = m11
    c = q[i]
    if m00 + m11 + m22 > mii:
        c = q[3]
    if c < 0.0:
        return -1.0
    return 1.0


@wp.kernel
def signed_quats(
    quat: wp.array(dtype=wp.quatf),
    rule: int,
    rows: wp.array(dtype=wp.int32),
    offset_sign: wp.array(dtype=wp.quatf),
    out: wp.array(dtype=wp.vec4f),
):
    """``out[i]``: ``quat[i]`` or ``-quat[i]``, signed as Isaac Lab's view of the backend signs it (``rule``:
    ``SIGN_GF``, ``SIGN_WARP`` or ``SIGN_NEWTON_LOCAL``; Newton world poses are signed by the view's read itself,
    :func:`offset_signs`)."""
    i = wp.tid()
    q = quat[i]
    s = float(1.0)
    if rule == 0:
        s = _gf_sign(q)
    elif rule == 1:
        if 4.0 * q[3] * q[3] - 1.0 >= 0.0:
            if q[3] < 0.0:
                s = -1.0
        else:
            s = _largest_positive(q, 3)
    else:
        r = i
        if rows.shape[0] > 0:
            r = rows[i]
        if wp.dot(q, offset_sign[r]) < 0.0:
            s = -1.0
    out[i] = wp.vec4f(s * q[0], s * q[1], s * q[2], s * q[3])


@wp.kernel
def gather_shape_scales(
    shape_scale: wp.array(dtype=wp.vec3f),
    shape_body: wp.array(dtype=wp.int32),
    frame_body: wp.array(dtype=wp.int32),
    rows: wp.array(dtype=wp.int32),
    out: wp.array(dtype=wp.vec3f),
):
    """Isaac Lab's Newton ``get_scales``: the scale of the first shape on each frame's body, else ones."""
    i = wp.tid()
    r = i
    if rows.shape[0] > 0:
        r = rows[i]
    b = frame_body[r]
    out[i] = wp.vec3f(1.0, 1.0, 1.0)
    for s in range(shape_body.shape[0]):
        if shape_body[s] == b:
            out[i] = shape_scale[s]
            return


@wp.kernel
def scatter_shape_scales(
    scales: wp.array(dtype=wp.vec3f),
    frame_body: wp.array(dtype=wp.int32),
    rows: wp.array(dtype=wp.int32),
    shape_body: wp.array(dtype=wp.int32),
    shape_scale: wp.array(dtype=wp.vec3f),
):
    """Isaac Lab's Newton ``set_scales``: every shape on each frame's body gets the frame's scale."""
    i = wp.tid()
    r = i
    if rows.shape[0] > 0:
        r = rows[i]
    b = frame_body[r]
    for s in range(shape_body.shape[0]):
        if shape_body[s] == b:
            shape_scale[s] = scales[i]


class EmptyArrays:
    """Empty placeholder arrays of one dtype, one per device."""

    def __init__(self, dtype: Any) -> None:
        self._dtype = dtype
        self._arrays: dict[str, wp.array] = {}

    def get(self, device: Any) -> wp.array:
        key = str(device)
        array = self._arrays.get(key)
        if array is None:
            array = self._arrays[key] = wp.empty(0, dtype=self._dtype, device=device)
        return array


NO_QUATS = EmptyArrays(wp.quatf)


@wp.kernel
def written_signs(
    # inputs
    rows: wp.array(dtype=wp.int32),
    written: wp.array(dtype=wp.quatf),
    view_node: wp.array(dtype=wp.int32),
    node_body: wp.array(dtype=wp.int32),
    node_offset: wp.array(dtype=wp.transformf),
    body_q: wp.array(dtype=wp.transformf),
    # outputs
    signs_out: wp.array(dtype=wp.float32),
):
    """After a world write of orientations ``written`` (xyzw rows) to view rows ``rows`` (empty: all), the sign of
    each row that makes ``body * offset`` the quaternion written, as Isaac Lab's Newton view stores the offset
    ``inv(body) * written`` and returns the sign written."""
    k = wp.tid()
    i = k
    if rows.shape[0] > 0:
        i = rows[k]
    n = view_node[i]
    q = wp.transform_get_rotation(node_offset[n])
    b = node_body[n]
    if b >= 0:
        q = wp.transform_get_rotation(body_q[b]) * q
    s = float(1.0)
    if wp.dot(q, written[k]) < 0.0:
        s = -1.0
    signs_out[i] = s

# SPDX-License-Identifier: Apache-2.0
"""Warp functions and kernels between Fabric matrices and (position, quaternion, scale).

Conventions (Fabric's):
- matrices are ``wp.mat44d``, row-vector: a point transforms as ``p' = p @ M``; translation is ``m[3, 0:3]``;
- row ``i`` of the upper 3x3 is the rotated basis axis ``i`` times scale ``i``;
- ``world = local @ parent_world`` and ``local = world @ inverse(parent_world)``;
- quaternions are **xyzw** (Warp's order), unit length, returned with ``w >= 0``;
- scale is the length of each row of the upper 3x3: world scale assumes no shear (a sheared matrix decomposes
  to the closest rotation and per-axis lengths, which do not recompose to it). A negative determinant is put on
  the x scale.

Kernels here know nothing of stages or views: they take arrays and counts.
"""

from __future__ import annotations

import warp as wp

_EPS = 1.0e-12


@wp.func
def axis_scale(m: wp.mat44d):
    """The per-axis scale of a row-vector matrix, as :func:`decompose_matrix` reports it (the axis lengths, negative
    on x for a mirror), without its rotation."""
    r0 = wp.vec3d(m[0, 0], m[0, 1], m[0, 2])
    r1 = wp.vec3d(m[1, 0], m[1, 1], m[1, 2])
    r2 = wp.vec3d(m[2, 0], m[2, 1], m[2, 2])
    sx = wp.length(r0)
    if wp.dot(wp.cross(r0, r1), r2) < wp.float64(0.0):
        sx = -sx
    return wp.vec3d(sx, wp.length(r1), wp.length(r2))


@wp.func
def rotation_quat(rot: wp.mat33d):
    """The xyzw quaternion of a column-vector rotation matrix, not normalised (unit up to rounding for a rotation):
    Shepperd's method, the largest of ``|w|``, ``|x|``, ``|y|``, ``|z|`` from the diagonal and the others from
    off-diagonal sums. Constant indices only: Warp's ``quat_from_matrix`` indexes the diagonal by a variable, which
    puts the matrix in local memory (a store and a load on every read)."""
    one = wp.float64(1.0)
    half = wp.float64(0.5)
    d0 = rot[0, 0]
    d1 = rot[1, 1]
    d2 = rot[2, 2]
    tr = d0 + d1 + d2
    x = wp.float64(0.0)
    y = wp.float64(0.0)
    z = wp.float64(0.0)
    w = wp.float64(0.0)
    if tr >= wp.float64(0.0):
        h = wp.sqrt(tr + one)
        w = half * h
        h = half / h
        x = (rot[2, 1] - rot[1, 2]) * h
        y = (rot[0, 2] - rot[2, 0]) * h
        z = (rot[1, 0] - rot[0, 1]) * h
    elif d0 >= d1 and d0 >= d2:
        h = wp.sqrt(d0 - (d1 + d2) + one)
        x = half * h
        h = half / h
        y = (rot[0, 1] + rot[1, 0]) * h
        z = (rot[2, 0] + rot[0, 2]) * h
        w = (rot[2, 1] - rot[1, 2]) * h
    elif d1 >= d2:
        h = wp.sqrt(d1 - (d2 + d0) + one)
        y = half * h
        h = half / h
        z = (rot[1, 2] + rot[2, 1]) * h
        x = (rot[0, 1] + rot[1, 0]) * h
        w = (rot[0, 2] - rot[2, 0]) * h
    else:
        h = wp.sqrt(d2 - (d0 + d1) + one)
        z = half * h
        h = half / h
        x = (rot[2, 0] + rot[0, 2]) * h
        y = (rot[1, 2] + rot[2, 1]) * h
        w = (rot[1, 0] - rot[0, 1]) * h
    return wp.quatd(x, y, z, w)


@wp.func
def axis_rotation(m: wp.mat44d, scale: wp.vec3d):
    """The column-vector rotation of a row-vector matrix whose per-axis scale is ``scale``: its columns are the
    upper 3x3's rows divided by their scale (a zero axis is left as is: it has no direction)."""
    ix = wp.float64(1.0)
    iy = wp.float64(1.0)
    iz = wp.float64(1.0)
    if wp.abs(scale[0]) > wp.float64(_EPS):
        ix = wp.float64(1.0) / scale[0]
    if wp.abs(scale[1]) > wp.float64(_EPS):
        iy = wp.float64(1.0) / scale[1]
    if wp.abs(scale[2]) > wp.float64(_EPS):
        iz = wp.float64(1.0) / scale[2]
    return wp.mat33d(
        m[0, 0] * ix, m[1, 0] * iy, m[2, 0] * iz,
        m[0, 1] * ix, m[1, 1] * iy, m[2, 1] * iz,
        m[0, 2] * ix, m[1, 2] * iy, m[2, 2] * iz,
    )  # fmt: skip


@wp.func
def decompose_matrix(m: wp.mat44d):
    """Split a row-vector matrix into translation, xyzw rotation (``w >= 0``) and per-axis scale."""
    scale = axis_scale(m)
    q = wp.normalize(rotation_quat(axis_rotation(m, scale)))
    if q[3] < wp.float64(0.0):
        q = -q
    t = wp.vec3d(m[3, 0], m[3, 1], m[3, 2])
    return t, q, scale


@wp.func
def compose_matrix(t: wp.vec3d, q: wp.quatd, s: wp.vec3d):
    """Build a row-vector matrix from translation, xyzw rotation (any sign, any norm > 0) and scale."""
    r = wp.quat_to_matrix(wp.normalize(q))
    return wp.mat44d(
        r[0, 0] * s[0], r[1, 0] * s[0], r[2, 0] * s[0], wp.float64(0.0),
        r[0, 1] * s[1], r[1, 1] * s[1], r[2, 1] * s[1], wp.float64(0.0),
        r[0, 2] * s[2], r[1, 2] * s[2], r[2, 2] * s[2], wp.float64(0.0),
        t[0], t[1], t[2], wp.float64(1.0),
    )  # fmt: skip


@wp.func
def unit_quat(q: wp.quatd):
    """``q`` over its norm through one reciprocal square root (a plain ``normalize`` divides each component); a
    zero quaternion is returned as is."""
    n = wp.dot(q, q)
    if n > wp.float64(0.0):
        return q * (wp.float64(1.0) / wp.sqrt(n))
    return q


@wp.func
def finish_pose(t: wp.vec3d, q: wp.quatd, offset: wp.quatf):
    """Float32 position and xyzw orientation (``w >= 0``) from float64 ones, the orientation (any norm > 0)
    right-multiplied by ``offset`` unless ``offset`` is the identity (plain reads skip the product), normalised by
    :func:`unit_quat`."""
    if offset[3] != 1.0:  # not the identity (a unit quaternion with w == 1)
        q = q * wp.quatd(offset)
    q = unit_quat(q)
    if q[3] < wp.float64(0.0):
        q = -q
    return wp.vec3f(t), wp.quatf(q)


@wp.func
def pose_of(m: wp.mat44d, offset: wp.quatf):
    """Float32 position and xyzw orientation (``w >= 0``) of a matrix, the orientation right-multiplied by
    ``offset`` (:func:`finish_pose`)."""
    q = rotation_quat(axis_rotation(m, axis_scale(m)))
    return finish_pose(wp.vec3d(m[3, 0], m[3, 1], m[3, 2]), q, offset)


SHEAR_TOLERANCE = wp.constant(1.0e-6)
"""Largest cosine between two rows of a local 3x3 above which it counts as sheared."""

# write statuses (solve_local)
WRITE_OK = wp.constant(0)
WRITE_SINGULAR_PARENT = wp.constant(1)
WRITE_SHEAR = wp.constant(2)
WRITE_NOT_FINITE = wp.constant(3)


@wp.func
def _rows_sheared(r0: wp.vec3d, r1: wp.vec3d, r2: wp.vec3d, l0: wp.float64, l1: wp.float64, l2: wp.float64):
    """:func:`is_sheared` of the rows ``r0``-``r2`` of an upper 3x3 whose lengths are ``l0``-``l2``."""
    tiny = wp.float64(_EPS)
    tol = wp.float64(SHEAR_TOLERANCE)
    sheared = False
    if l0 > tiny and l1 > tiny and wp.abs(wp.dot(r0, r1)) > tol * l0 * l1:
        sheared = True
    if l0 > tiny and l2 > tiny and wp.abs(wp.dot(r0, r2)) > tol * l0 * l2:
        sheared = True
    if l1 > tiny and l2 > tiny and wp.abs(wp.dot(r1, r2)) > tol * l1 * l2:
        sheared = True
    return sheared


@wp.func
def is_sheared(m: wp.mat44d):
    """Whether the upper 3x3 of ``m`` is not (per-axis scale) x (rotation): the cosine between two of its rows
    exceeds ``SHEAR_TOLERANCE`` (compared without divisions; a zero row counts as no shear)."""
    r0 = wp.vec3d(m[0, 0], m[0, 1], m[0, 2])
    r1 = wp.vec3d(m[1, 0], m[1, 1], m[1, 2])
    r2 = wp.vec3d(m[2, 0], m[2, 1], m[2, 2])
    return _rows_sheared(r0, r1, r2, wp.length(r0), wp.length(r1), wp.length(r2))


@wp.func
def rotation_rows(m: wp.mat44d):
    """The rotation (rows: the unit axes) and per-axis scale of a shear-free upper 3x3, the mirror on x as in
    :func:`decompose_matrix`; where an axis has zero length the rotation comes from :func:`decompose_matrix`."""
    _t, q, s = decompose_matrix(m)
    tiny = wp.float64(_EPS)
    if wp.abs(s[0]) > tiny and wp.abs(s[1]) > tiny and wp.abs(s[2]) > tiny:
        rows = wp.mat33d(
            m[0, 0] / s[0], m[0, 1] / s[0], m[0, 2] / s[0],
            m[1, 0] / s[1], m[1, 1] / s[1], m[1, 2] / s[1],
            m[2, 0] / s[2], m[2, 1] / s[2], m[2, 2] / s[2],
        )  # fmt: skip
        return rows, s
    return wp.transpose(wp.quat_to_matrix(q)), s


@wp.func
def with_upper(m: wp.mat44d, scale: wp.vec3d, rows: wp.mat33d):
    """``m`` with its upper 3x3 replaced by ``diag(scale) @ rows`` (translation kept)."""
    out = m
    for a in range(3):
        for b in range(3):
            out[a, b] = scale[a] * rows[a, b]
    return out


@wp.func
def with_translation(m: wp.mat44d, t: wp.vec3d):
    """``m`` with its translation row replaced (the upper 3x3, shear included, is kept bit for bit)."""
    out = m
    out[3, 0] = t[0]
    out[3, 1] = t[1]
    out[3, 2] = t[2]
    return out


@wp.func
def local_point(p: wp.vec3d, m: wp.mat44d):
    """The point ``x`` with ``x @ m = p`` (row vectors): ``p @ inverse(m)``. For an affine ``m`` (last column
    ``0 0 0 1``, what Fabric holds) ``(p - translation) @ inverse(upper 3x3)`` through its adjugate, a fraction of
    a general 4x4 inverse's float64 work; any other matrix takes the general inverse."""
    zero = wp.float64(0.0)
    one = wp.float64(1.0)
    if m[0, 3] != zero or m[1, 3] != zero or m[2, 3] != zero or m[3, 3] != one:
        return transform_point(p, wp.inverse(m))
    r0 = wp.vec3d(m[0, 0], m[0, 1], m[0, 2])
    r1 = wp.vec3d(m[1, 0], m[1, 1], m[1, 2])
    r2 = wp.vec3d(m[2, 0], m[2, 1], m[2, 2])
    c0 = wp.cross(r1, r2)
    v = p - wp.vec3d(m[3, 0], m[3, 1], m[3, 2])
    inv_det = wp.float64(1.0) / wp.dot(r0, c0)
    return wp.vec3d(wp.dot(v, c0), wp.dot(v, wp.cross(r2, r0)), wp.dot(v, wp.cross(r0, r1))) * inv_det


@wp.func
def transform_point(p: wp.vec3d, m: wp.mat44d):
    """Row-vector point transform ``p @ m``."""
    return wp.vec3d(
        p[0] * m[0, 0] + p[1] * m[1, 0] + p[2] * m[2, 0] + m[3, 0],
        p[0] * m[0, 1] + p[1] * m[1, 1] + p[2] * m[2, 1] + m[3, 1],
        p[0] * m[0, 2] + p[1] * m[1, 2] + p[2] * m[2, 2] + m[3, 2],
    )


@wp.func
def kept_scale(m: wp.mat44d):
    """The scale an orientation write keeps: the per-axis scale of ``m``'s upper 3x3 as :func:`axis_scale` reports it
    (the row lengths, a mirror's sign on x), and whether its rows are sheared (:func:`_rows_sheared`: then no
    rotation can be written without changing them); one pass over the rows, where :func:`axis_scale` and
    :func:`is_sheared` would each take the three lengths."""
    r0 = wp.vec3d(m[0, 0], m[0, 1], m[0, 2])
    r1 = wp.vec3d(m[1, 0], m[1, 1], m[1, 2])
    r2 = wp.vec3d(m[2, 0], m[2, 1], m[2, 2])
    l0 = wp.length(r0)
    l1 = wp.length(r1)
    l2 = wp.length(r2)
    if wp.dot(wp.cross(r0, r1), r2) < wp.float64(0.0):
        return wp.vec3d(-l0, l1, l2), _rows_sheared(r0, r1, r2, l0, l1, l2)
    return wp.vec3d(l0, l1, l2), _rows_sheared(r0, r1, r2, l0, l1, l2)


@wp.func
def _written_rotation(q: wp.quatd, in_world: int, p0: wp.vec3d, p1: wp.vec3d, sq0: wp.float64, mirror: wp.float64):
    """An orientation write of :func:`solve_local`: the rows of the new local rotation for the world (``in_world``) or
    local orientation ``q``. A world orientation gives ``diag(e, 1, 1) R(q) M^T``: ``M`` the parent's rows ``p0``,
    ``p1`` (``sq0 = |p0|^2``) by Gram-Schmidt, ``e = mirror = det M``."""
    zero = wp.float64(0.0)
    one = wp.float64(1.0)
    rows = wp.transpose(wp.quat_to_matrix(unit_quat(q)))
    if in_world != 0:
        m0 = p0 * (one / wp.sqrt(sq0))
        g1 = p1 - wp.dot(p1, m0) * m0
        m1 = g1 * (one / wp.length(g1))
        m2 = wp.cross(m0, m1) * mirror
        rows = rows @ wp.mat33d(m0[0], m1[0], m2[0], m0[1], m1[1], m2[1], m0[2], m1[2], m2[2])
        if mirror < zero:
            rows[0] = -rows[0]
    return rows


@wp.func
def _written_scale(s: wp.vec3d, in_world: int, sq0: wp.float64, sq1: wp.float64, sq2: wp.float64, mirror: wp.float64):
    """A scale write of :func:`solve_local`: the new local scale for the world (``in_world``) or local scale ``s``; a
    world scale is divided per parent axis by its length (``sq*``: squared), a mirror's sign on x
    (``mirror``), as :func:`decompose_matrix` reports it."""
    scale = s
    if in_world != 0:
        scale = wp.vec3d(s[0] / (wp.sqrt(sq0) * mirror), s[1] / wp.sqrt(sq1), s[2] / wp.sqrt(sq2))
    return scale


@wp.func
def finite_status(m: wp.mat44d):
    """``WRITE_NOT_FINITE`` when an entry of ``m`` is not finite, else ``WRITE_OK``."""
    status = int(WRITE_OK)
    for a in range(4):
        for b in range(4):
            if not wp.isfinite(m[a, b]):
                status = WRITE_NOT_FINITE
    return status


@wp.func
def solve_local(
    local: wp.mat44d,
    parent_world: wp.mat44d,
    in_world: int,
    set_t: int,
    t: wp.vec3d,
    set_q: int,
    q: wp.quatd,
    set_s: int,
    s: wp.vec3d,
):
    """The new local matrix of a prim after a write, and a status (``WRITE_*``).

    Only what is asked changes; whatever is ``None`` (flag 0) is kept exactly:

    - a translation-only write (either space) replaces the translation row and keeps the upper 3x3 bit for bit
      (shear included); in world space the local translation is ``t @ inverse(parent_world)``, always exact;
    - an orientation and/or scale write rebuilds the upper 3x3 from the kept and the given components, so the prim's
      local matrix must have no shear (``WRITE_SHEAR`` otherwise). A world orientation ``q`` gives the local rotation
      ``diag(e, 1, 1) R(q) M^T`` (rows), ``M`` the parent's orthogonal part and ``e = det M``: exact under any
      similarity parent, mirrors included. A world scale ``s`` gives the local scale ``s / p`` per axis, ``p`` the
      parent's scale as :func:`decompose_matrix` reports it (axis lengths, ``e`` on x): under a similarity parent
      that is ``(e s_x, s_y, s_z) / |p|``, exact whatever the local rotation; under a non-uniformly scaled parent
      (Isaac Lab's ``local = world / parent``) exact when the local rotation maps each parent axis onto itself
      (identity, half turns), otherwise the child's world matrix has shear and its axis lengths differ from ``s``.
      The local scale is kept unless ``set_s``, the local rotation unless ``set_q``;
    - a world write needs an invertible parent world matrix (``WRITE_SINGULAR_PARENT`` otherwise).
    """
    out = local
    zero = wp.float64(0.0)
    one = wp.float64(1.0)
    # the parent's rows, their squared lengths and volume (its upper 3x3's determinant), computed once: the singular
    # check, the orthogonal part and the parent's scale use them
    p0 = wp.vec3d(parent_world[0, 0], parent_world[0, 1], parent_world[0, 2])
    p1 = wp.vec3d(parent_world[1, 0], parent_world[1, 1], parent_world[1, 2])
    p2 = wp.vec3d(parent_world[2, 0], parent_world[2, 1], parent_world[2, 2])
    volume = wp.dot(p0, wp.cross(p1, p2))
    sq0 = wp.dot(p0, p0)
    sq1 = wp.dot(p1, p1)
    sq2 = wp.dot(p2, p2)
    # |volume| > 1e-12 |p0| |p1| |p2|, squared: no square root (the lengths are taken where a branch needs them)
    if in_world != 0 and not (volume * volume > wp.float64(1.0e-24) * sq0 * sq1 * sq2):  # singular: no volume
        return out, WRITE_SINGULAR_PARENT
    mirror = one
    if volume < zero:
        mirror = -one
    if set_q != 0 or set_s != 0:
        scale, sheared = kept_scale(local)
        if sheared:
            return out, WRITE_SHEAR
        rows = wp.mat33d()
        if set_q != 0:  # the local rotation is replaced: only the kept scale is needed
            rows = _written_rotation(q, in_world, p0, p1, sq0, mirror)
        else:
            rows, scale = rotation_rows(local)
        if set_s != 0:
            scale = _written_scale(s, in_world, sq0, sq1, sq2, mirror)
        out = with_upper(local, scale, rows)
    if set_t != 0:
        lt = t
        if in_world != 0:
            lt = local_point(t, parent_world)
        out = with_translation(out, lt)
    return out, finite_status(out)


@wp.kernel(enable_backward=False)
def decompose_matrices(
    # inputs
    mats: wp.array(dtype=wp.mat44d),
    # outputs
    pos_out: wp.array(dtype=wp.vec3f),
    quat_out: wp.array(dtype=wp.quatf),
    scale_out: wp.array(dtype=wp.vec3f),
):
    """Decompose each matrix into float32 position, xyzw quaternion and scale."""
    i = wp.tid()
    t, q, s = decompose_matrix(mats[i])
    pos_out[i] = wp.vec3f(t)
    quat_out[i] = wp.quatf(q)
    scale_out[i] = wp.vec3f(s)

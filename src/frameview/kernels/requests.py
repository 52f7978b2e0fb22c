# SPDX-License-Identifier: Apache-2.0
"""A write's request, checked and solved on the device: shared by every backend's write kernels.

A write passes its components as one :class:`WriteRequest` (``pos`` / ``quat`` / ``scale``, each with a ``set_*``
flag; unset ones are empty arrays), made on the host by :class:`WriteRequests`. :func:`request_ok` reports a row
holding a non-finite value or a zero quaternion into the view's status word; :func:`solve_request` turns a row into
the prim's new local matrix with :func:`~frameview.kernels.transforms.solve_local`. :func:`request_values` and
:func:`values_ok` are the two halves of :func:`request_ok`, for kernels that load a row before their first branch.
"""

from __future__ import annotations

from typing import Any

import warp as wp

from .._core.device_errors import (
    CODE_QUAT_NOT_FINITE,
    CODE_RESULT_NOT_FINITE,
    CODE_SHEAR,
    CODE_SINGULAR_PARENT,
    CODE_VALUE_NOT_FINITE,
    CODE_ZERO_QUATERNION,
    report,
)
from .transforms import WRITE_NOT_FINITE, WRITE_SHEAR, WRITE_SINGULAR_PARENT, solve_local

__all__ = [
    "WriteRequest",
    "WriteRequests",
    "report_solve",
    "request_ok",
    "request_values",
    "solve_request",
    "solve_values",
    "values_ok",
]


@wp.struct
class WriteRequest:
    """A write's request rows: ``in_world`` (1: world frame, 0: local), and per component a ``set_*`` flag (0: kept)
    and its rows (float32 positions / translations, xyzw quaternions, scales; an empty array where unset)."""

    in_world: wp.int32
    set_pos: wp.int32
    pos: wp.array(dtype=wp.vec3f)
    set_quat: wp.int32
    quat: wp.array(dtype=wp.quatf)
    set_scale: wp.int32
    scale: wp.array(dtype=wp.vec3f)


class WriteRequests:
    """The :class:`WriteRequest` of a view's writes, kept per request (``in_world`` and the arrays, by identity).

    A request is a new object whenever it changes, never one changed in place: a recorded launch compares its
    arguments by identity and re-packs only those that changed. Building one costs microseconds of host time, so the
    last few are kept (holding their arrays, whose addresses then cannot be reused) and a call with the same arrays
    (a reset loop's buffers) gets the same object.

    Args:
        device: The view's Warp device (where the empty arrays of unset components live).
    """

    _KEPT = 8

    def __init__(self, device: Any) -> None:
        self._no_vec3 = wp.empty(0, dtype=wp.vec3f, device=device)
        self._no_quat = wp.empty(0, dtype=wp.quatf, device=device)
        self._kept: dict[tuple, tuple[WriteRequest, Any, Any, Any]] = {}

    def __call__(
        self, in_world: bool, pos: wp.array | None, quat: wp.array | None, scale: wp.array | None
    ) -> WriteRequest:
        """The request of a write of ``pos`` / ``quat`` / ``scale`` (``None``: kept) in the world or local frame."""
        key = (in_world, id(pos), id(quat), id(scale))
        kept = self._kept.get(key)
        if kept is not None and kept[1] is pos and kept[2] is quat and kept[3] is scale:
            return kept[0]
        if len(self._kept) >= self._KEPT:
            self._kept.clear()
        request = self.build(in_world, pos, quat, scale)
        self._kept[key] = (request, pos, quat, scale)  # holds the arrays: their ids stay their own
        return request

    def build(
        self, in_world: bool, pos: wp.array | None, quat: wp.array | None, scale: wp.array | None
    ) -> WriteRequest:
        """A new request, not kept (one-off launches: the usd backend's solve)."""
        request = WriteRequest()
        request.in_world = int(in_world)
        request.set_pos = int(pos is not None)
        request.pos = self._no_vec3 if pos is None else pos
        request.set_quat = int(quat is not None)
        request.quat = self._no_quat if quat is None else quat
        request.set_scale = int(scale is not None)
        request.scale = self._no_vec3 if scale is None else scale
        return request

    def clear(self) -> None:
        """Forget every request (and release the arrays held)."""
        self._kept.clear()


@wp.func
def request_values(r: int, req: WriteRequest):
    """The request row ``r`` in float64: translation, xyzw quaternion and scale (zeros / the identity where unset).
    A kernel loads them before its first branch on a loaded value, so that their latency overlaps the others'."""
    t = wp.vec3d()
    q = wp.quatd(wp.float64(0.0), wp.float64(0.0), wp.float64(0.0), wp.float64(1.0))
    s = wp.vec3d()
    if req.set_pos != 0:
        t = wp.vec3d(req.pos[r])
    if req.set_quat != 0:
        q = wp.quatd(req.quat[r])
    if req.set_scale != 0:
        s = wp.vec3d(req.scale[r])
    return t, q, s


@wp.func
def _finite3(v: wp.vec3d):
    """Whether every component of ``v`` is finite."""
    ok = True
    for a in range(3):
        if not wp.isfinite(v[a]):
            ok = False
    return ok


@wp.func
def _quat_code(q: wp.quatd):
    """The error code of a requested quaternion: non-finite, zero (norm), or 0 when usable."""
    finite = True
    for a in range(4):
        if not wp.isfinite(q[a]):
            finite = False
    code = int(0)
    if not finite:
        code = CODE_QUAT_NOT_FINITE
    elif wp.dot(q, q) < wp.float64(1.0e-12):
        code = CODE_ZERO_QUATERNION
    return code


@wp.func
def values_ok(r: int, req: WriteRequest, t: wp.vec3d, q: wp.quatd, s: wp.vec3d, status_out: wp.array(dtype=wp.int32)):
    """Check the values of request row ``r`` (:func:`request_values`: non-finite values, zero quaternion); report
    and return False when bad."""
    ok = True
    if req.set_pos != 0:
        ok = _finite3(t)
    if req.set_scale != 0:  # noqa: SIM102 - Warp kernels: plain branches
        if not _finite3(s):
            ok = False
    if not ok:
        report(status_out, r, CODE_VALUE_NOT_FINITE)
    if req.set_quat != 0:
        code = _quat_code(q)
        if code != 0:
            report(status_out, r, code)
            ok = False
    return ok


@wp.func
def request_ok(r: int, req: WriteRequest, status_out: wp.array(dtype=wp.int32)):
    """Check the request row ``r`` (non-finite values, zero quaternion); report and return False when bad."""
    t, q, s = request_values(r, req)
    return values_ok(r, req, t, q, s, status_out)


@wp.func
def solve_values(local: wp.mat44d, parent_world: wp.mat44d, req: WriteRequest, t: wp.vec3d, q: wp.quatd, s: wp.vec3d):
    """:func:`solve_local` of a request row's values (:func:`request_values`): the prim's new local matrix and a
    ``WRITE_*`` status."""
    return solve_local(local, parent_world, req.in_world, req.set_pos, t, req.set_quat, q, req.set_scale, s)


@wp.func
def solve_request(local: wp.mat44d, parent_world: wp.mat44d, r: int, req: WriteRequest):
    """:func:`solve_local` of request row ``r``: the prim's new local matrix and a ``WRITE_*`` status."""
    t, q, s = request_values(r, req)
    return solve_values(local, parent_world, req, t, q, s)


@wp.func
def report_solve(status_out: wp.array(dtype=wp.int32), r: int, status: int):
    """Report the ``WRITE_*`` status of :func:`solve_local` for request row ``r`` (nothing for ``WRITE_OK``)."""
    if status == WRITE_SINGULAR_PARENT:
        report(status_out, r, CODE_SINGULAR_PARENT)
    elif status == WRITE_SHEAR:
        report(status_out, r, CODE_SHEAR)
    elif status == WRITE_NOT_FINITE:
        report(status_out, r, CODE_RESULT_NOT_FINITE)

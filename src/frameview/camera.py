# SPDX-License-Identifier: Apache-2.0
"""Camera world poses on reset, in the frame convention the consumer asks for.

Three conventions name the same camera pose with different camera axes:

================  ===============  ===============  ====================================================
convention        forward          up               where it is used
================  ===============  ===============  ====================================================
``"opengl"``      -Z               +Y               USD cameras (``UsdGeom.Camera``), OpenGL, Omniverse
``"ros"``         +Z               -Y (+Y is down)  ROS optical frames, OpenCV, most vision code
``"world"``       +X               +Z               robotics body frames (REP 103: x forward, z up)
================  ===============  ===============  ====================================================

A camera prim's world orientation, as a FrameView returns it, **is** the ``"opengl"`` one. The others are the same
rotation followed by a constant rotation of the camera's own axes (right-multiplication, xyzw, Hamilton product)::

    q_ros   = q_opengl * (1, 0, 0, 0)            # 180 deg about the camera's local X: Y and Z flip
    q_world = q_opengl * (-0.5, 0.5, 0.5, 0.5)   # columns x_w = -z_gl, y_w = -x_gl, z_w = +y_gl

Any pair converts through opengl: ``q_target = q_origin * conj(offset[origin]) * offset[target]``.
Positions are the same in every convention.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import warp as wp

from ._core.array_types import IndicesLike, MaskLike, TensorLike
from ._core.host import to_numpy
from ._core.values import unwrap
from .base import BaseFrameView

__all__ = ["CAMERA_CONVENTIONS", "CameraPoses", "convert_camera_orientations"]

# xyzw offsets: q_convention = q_opengl * offset
_OFFSETS: dict[str, tuple[float, float, float, float]] = {
    "opengl": (0.0, 0.0, 0.0, 1.0),
    "ros": (1.0, 0.0, 0.0, 0.0),
    "world": (-0.5, 0.5, 0.5, 0.5),
}
CAMERA_CONVENTIONS: tuple[str, ...] = tuple(_OFFSETS)
"""Names accepted by ``convention`` / ``origin`` / ``target``: ``("opengl", "ros", "world")``."""


def _hamilton(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product of xyzw quaternions (float64)."""
    ax, ay, az, aw = a
    bx, by, bz, bw = b
    return np.array(
        [
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
            aw * bw - ax * bx - ay * by - az * bz,
        ],
        dtype=np.float64,
    )


def _check_convention(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name}: expected one of {list(CAMERA_CONVENTIONS)}, got {type(value).__name__}")
    if value not in _OFFSETS:
        raise ValueError(f"{name}: expected one of {list(CAMERA_CONVENTIONS)}, got {value!r}")
    return value


def _offset(origin: str, target: str) -> np.ndarray:
    """xyzw ``p`` such that ``q_target = q_origin * p`` (float64)."""
    o = np.array(_OFFSETS[origin], dtype=np.float64)
    t = np.array(_OFFSETS[target], dtype=np.float64)
    conj = np.array([-o[0], -o[1], -o[2], o[3]])
    return _hamilton(conj, t)


def _right_multiplication_matrix(p: np.ndarray) -> np.ndarray:
    """(4, 4) ``R`` with ``q * p == R @ q`` for xyzw ``q`` (right-multiplication by ``p`` is linear in ``q``)."""
    return np.stack([_hamilton(e, p) for e in np.eye(4)], axis=1)


@wp.kernel
def _convert_camera_poses(
    # inputs
    pos: wp.array(dtype=wp.vec3f),
    quat: wp.array(dtype=wp.quatf),
    offset: wp.quatf,
    # outputs
    pos_out: wp.array(dtype=wp.vec3f),
    quat_out: wp.array(dtype=wp.quatf),
):
    """``pos_out = pos``; ``quat_out = normalize(quat * offset)`` with ``w >= 0``."""
    i = wp.tid()
    pos_out[i] = pos[i]
    quat_out[i] = _convert_quat(quat[i], offset)


@wp.func
def _convert_quat(q: wp.quatf, offset: wp.quatf):
    """``normalize(q * offset)`` with ``w >= 0`` (xyzw)."""
    r = wp.normalize(q * offset)
    if r[3] < 0.0:
        r = -r
    return r


@wp.kernel
def _convert_masked_camera_poses(
    # inputs
    pos: wp.array(dtype=wp.vec3f),
    quat: wp.array(dtype=wp.quatf),
    offset: wp.quatf,
    mask: wp.array(dtype=wp.bool),
    rows: wp.array(dtype=wp.int32),
    use_rows: int,
    # outputs
    pos_out: wp.array(dtype=wp.vec3f),
    quat_out: wp.array(dtype=wp.quatf),
):
    """Env ``e`` where ``mask[e]``: its camera's pose (view row ``rows[e]`` with ``use_rows``, else ``e``) with the
    orientation converted as :func:`_convert_camera_poses` does; the other envs' rows are left as they are."""
    e = wp.tid()
    if not mask[e]:
        return
    r = e
    if use_rows != 0:
        r = rows[e]
    pos_out[e] = pos[r]
    quat_out[e] = _convert_quat(quat[r], offset)


@wp.kernel
def _multiply_quats_right_f(
    # inputs
    quats: wp.array(dtype=wp.quatf),
    offset: wp.quatf,
    # outputs
    quats_out: wp.array(dtype=wp.quatf),
):
    """``quats_out = quats * offset`` (float32, sign kept)."""
    i = wp.tid()
    quats_out[i] = quats[i] * offset


@wp.kernel
def _multiply_quats_right_d(
    # inputs
    quats: wp.array(dtype=wp.quatd),
    offset: wp.quatd,
    # outputs
    quats_out: wp.array(dtype=wp.quatd),
):
    """``quats_out = quats * offset`` (float64, sign kept)."""
    i = wp.tid()
    quats_out[i] = quats[i] * offset


def _torch_module(value: Any) -> Any:
    torch = sys.modules.get("torch")  # never import torch ourselves
    return torch if torch is not None and isinstance(value, torch.Tensor) else None


def _convert_warp(quats: wp.array, p: np.ndarray, out: wp.array | None) -> wp.array:
    """Right-multiply a Warp array of quaternions: (N,) quatf/quatd, or (N, 4) float32/float64."""
    if quats.dtype in (wp.quatf, wp.quatd) and quats.ndim == 1:
        flat = quats
    elif quats.dtype in (wp.float32, wp.float64) and quats.ndim == 2 and quats.shape[1] == 4:
        if not quats.is_contiguous:
            raise ValueError(
                "quats: expected a contiguous (N, 4) Warp array, got a strided one; pass quats.contiguous()"
            )
        flat = quats.view(wp.quatf if quats.dtype == wp.float32 else wp.quatd).reshape((quats.shape[0],))
    else:
        raise TypeError(
            f"quats: expected a Warp array of quatf/quatd (N,) or float32/float64 (N, 4), got dtype {quats.dtype} "
            f"and shape {quats.shape}"
        )
    single = flat.dtype == wp.quatf
    if out is None:
        out = wp.empty_like(quats)
    elif out.dtype != quats.dtype or out.shape != quats.shape or str(out.device) != str(quats.device):
        raise ValueError(
            f"out: expected a Warp array of dtype {quats.dtype}, shape {quats.shape} on {quats.device}, got dtype "
            f"{out.dtype}, shape {out.shape} on {out.device}"
        )
    out_flat = out if out.ndim == 1 else out.view(flat.dtype).reshape((out.shape[0],))
    if flat.shape[0]:
        kernel, qtype = (_multiply_quats_right_f, wp.quatf) if single else (_multiply_quats_right_d, wp.quatd)
        wp.launch(kernel, dim=flat.shape[0], inputs=[flat, qtype(*p.tolist())], outputs=[out_flat], device=quats.device)
    return out


def convert_camera_orientations(
    quats: wp.array | np.ndarray | TensorLike,
    origin: str = "opengl",
    target: str = "ros",
    *,
    out: wp.array | None = None,
) -> Any:
    """Re-express camera orientations from one camera convention in another.

    ``q_target = q_origin * conj(offset[origin]) * offset[target]`` (see the module docstring for the offsets). The
    product is linear in ``q``: a unit quaternion stays unit, and the sign of the input is kept (no ``w >= 0``
    canonicalisation), so torch inputs stay differentiable.

    Example:
        >>> import numpy as np
        >>> convert_camera_orientations(np.array([0.0, 0.0, 0.0, 1.0]), "opengl", "ros").tolist()
        [1.0, 0.0, 0.0, 0.0]

    Args:
        quats: xyzw orientations, world frame: a Warp array ((N,) ``quatf``/``quatd`` or (N, 4) float32/float64),
            a NumPy array or a torch tensor of shape (..., 4) and floating dtype.
        origin: Convention of ``quats``: ``"opengl"``, ``"ros"`` or ``"world"``.
        target: Convention wanted, from the same list.
        out: For Warp input only: a preallocated array like ``quats`` to write into (may be ``quats`` itself).

    Returns:
        The same kind of array as ``quats`` (same dtype, shape and device), xyzw, in ``target``'s convention. Warp
        results are computed in one launch on ``quats.device``.

    Raises:
        ValueError: Unknown convention, or a last dimension other than 4.
        TypeError: Not a Warp/NumPy/torch array of floating dtype.
    """
    p = _offset(_check_convention("origin", origin), _check_convention("target", target))
    if out is not None and not isinstance(quats, wp.array):
        raise TypeError(f"out: only supported for Warp arrays, got quats of type {type(quats).__name__}")
    if isinstance(quats, wp.array):
        return _convert_warp(quats, p, out)
    torch = _torch_module(quats)
    if torch is not None:
        if not quats.is_floating_point():
            raise TypeError(f"quats: expected a floating-point tensor of shape (..., 4), got dtype {quats.dtype}")
        if quats.ndim < 1 or quats.shape[-1] != 4:
            raise ValueError(f"quats: expected shape (..., 4), got {tuple(quats.shape)}")
        rt = torch.as_tensor(_right_multiplication_matrix(p).T, dtype=quats.dtype, device=quats.device)
        return quats @ rt
    if isinstance(quats, np.ndarray):
        if quats.dtype.kind != "f":
            raise TypeError(f"quats: expected a floating-point array of shape (..., 4), got dtype {quats.dtype}")
        if quats.ndim < 1 or quats.shape[-1] != 4:
            raise ValueError(f"quats: expected shape (..., 4), got {quats.shape}")
        return quats @ _right_multiplication_matrix(p).T.astype(quats.dtype)
    raise TypeError(
        f"quats: expected a Warp array, a NumPy array or a torch tensor, got {type(quats).__name__} "
        "(wrap lists with np.asarray)"
    )


class CameraPoses:
    """Camera world poses of selected environments, read on reset, in the convention the consumer asks for.

    Row ``r`` of the view is environment ``r`` by default (views built from ``/World/envs/env_.*/...`` list the envs
    in the stage's depth-first order, which is env order when the envs were created in order). When it is not, pass
    ``env_rows``: ``env_rows[env_id]`` is the view row of that env's camera.

    Without ``env_rows``, a read on a :class:`~frameview.FabricFrameView` (or a Newton view) is the view's own read
    with the convention applied in the same launch (indexed: the slot-table inversion, then the gather; masked or
    all: one launch). With ``env_rows``, or on a :class:`~frameview.UsdFrameView` (which composes the matrices on
    the host), it is the view's read plus **one** launch that converts into buffers owned by this object. Env ids
    and masks on the view's device stay there. The returned arrays are overwritten by the next :meth:`read`; clone
    what you keep. Use from one thread, like the view.

    Example:
        >>> cams = CameraPoses(fv.make_frame_view(cfg, stage))  # doctest: +SKIP
        >>> pos, quat = cams.read(env_ids=[3, 17], convention="ros")  # doctest: +SKIP
        >>> wp.to_torch(quat)  # zero-copy (2, 4) xyzw  # doctest: +SKIP

    Args:
        view: A FrameView over the camera prims (one camera per env).
        env_rows: Optional env id -> view row map, 1-D integers in ``[0, view.count)``; its length is the number
            of envs. ``None`` means row ``i`` is env ``i``.
    """

    def __init__(self, view: BaseFrameView, *, env_rows: IndicesLike = None) -> None:
        if not isinstance(view, BaseFrameView):
            raise TypeError(f"view: expected a FrameView (frameview.BaseFrameView), got {type(view).__name__}")
        self._view = view
        self._env_rows: np.ndarray | None = None
        if env_rows is not None:
            self._env_rows = self._check_env_rows(env_rows, view.count)
        self._num_envs = view.count if self._env_rows is None else int(self._env_rows.shape[0])
        device = view.device
        capacity = max(self._num_envs, 1)
        self._pos = wp.empty(capacity, dtype=wp.vec3f, device=device)
        self._quat = wp.empty(capacity, dtype=wp.quatf, device=device)
        self._offsets = {name: wp.quatf(*_offset("opengl", name).tolist()) for name in CAMERA_CONVENTIONS}
        rows = self._env_rows if self._env_rows is not None else np.zeros(1)
        self._rows_device = wp.array(rows.astype(np.int32), dtype=wp.int32, device=device)  # masked reads' env_rows

    def _read_masked(self, mask: Any, offset: wp.quatf) -> tuple[wp.array, wp.array]:
        """A masked read without the view's fused read (host-composed backends) or with ``env_rows``: the view's
        poses (its masked rows, or all rows through ``env_rows``), then one launch that converts the masked envs."""
        view, n = self._view, self._num_envs
        env_mask = view._args.mask_to_device(mask, n)
        if self._env_rows is None:
            pos, quat = view._get_world_poses_xyzw(mask=env_mask)
        else:
            pos, quat = view._get_world_poses_xyzw()
        pos_out, quat_out = self._pos[:n], self._quat[:n]
        if n:
            wp.launch(
                _convert_masked_camera_poses,
                dim=n,
                inputs=[pos, quat, offset, env_mask, self._rows_device, int(self._env_rows is not None)],
                outputs=[pos_out, quat_out],
                device=view.device,
            )
        return pos_out, view._ordered(quat_out, env_mask)

    @staticmethod
    def _check_env_rows(env_rows: Any, count: int) -> np.ndarray:
        if isinstance(env_rows, wp.array):
            host = to_numpy(env_rows)
        elif _torch_module(env_rows) is not None:
            host = env_rows.detach().cpu().numpy()
        else:
            host = np.asarray(env_rows)
        if host.dtype == np.bool_ or host.dtype.kind not in "iu":
            raise TypeError(f"env_rows: expected integer view rows, got dtype {host.dtype}")
        if host.ndim != 1:
            raise ValueError(f"env_rows: expected a 1-D array (one view row per env), got shape {host.shape}")
        if host.size and (host.min() < 0 or host.max() >= count):
            raise IndexError(
                f"env_rows: expected rows in [0, {count}) (the view's count), got [{host.min()}, {host.max()}]"
            )
        return np.ascontiguousarray(host, dtype=np.int64)

    @property
    def view(self) -> BaseFrameView:
        """The FrameView of the cameras."""
        return self._view

    @property
    def num_envs(self) -> int:
        """Number of environments (``len(env_rows)``, or the view's count)."""
        return self._num_envs

    @property
    def device(self) -> str:
        """Warp device of the returned arrays (the view's)."""
        return self._view.device

    def rows(self, env_ids: IndicesLike = None) -> np.ndarray | None:
        """The view rows read for ``env_ids`` (``None``: all envs in env order, or ``None`` for the identity map)."""
        if self._env_rows is None:
            return None if env_ids is None else self._env_ids_to_numpy(env_ids)
        if env_ids is None:
            return self._env_rows
        return self._env_rows[self._env_ids_to_numpy(env_ids)]

    def _env_ids_to_numpy(self, env_ids: Any) -> np.ndarray:
        if isinstance(env_ids, wp.array):
            host = to_numpy(env_ids)
        elif _torch_module(env_ids) is not None:
            host = env_ids.detach().cpu().numpy()
        elif isinstance(env_ids, (list, tuple, range)) and len(env_ids) == 0:
            host = np.empty(0, dtype=np.int64)
        else:
            host = np.asarray(env_ids)
        if host.dtype == np.bool_ or host.dtype.kind not in "iu":
            raise TypeError(
                f"env_ids: expected integer env ids (int32/int64), got dtype {host.dtype}; for a mask pass mask=..."
            )
        if host.ndim != 1:
            raise ValueError(f"env_ids: expected a 1-D array of env ids, got shape {host.shape}")
        if host.size and (host.min() < 0 or host.max() >= self._num_envs):
            bad = int(host.min()) if host.min() < 0 else int(host.max())
            raise IndexError(f"env_ids: env id {bad} is out of range; expected 0 <= env id < num_envs={self._num_envs}")
        return host

    def read(
        self, env_ids: IndicesLike = None, convention: str = "ros", *, mask: MaskLike = None
    ) -> tuple[wp.array, wp.array]:
        """World poses of the cameras of ``env_ids`` (or of the envs ``mask`` selects).

        Args:
            env_ids: Env ids to read (a list, or an integer NumPy/Warp/torch array), ``None`` for all envs in env
                order. Row ``k`` of the result is env ``env_ids[k]``.
            convention: ``"ros"`` (+Z forward, -Y up), ``"opengl"`` (-Z forward, +Y up: the USD camera's own) or
                ``"world"`` (+X forward, +Z up).
            mask: Boolean (:attr:`num_envs`,) selection of envs instead of ``env_ids`` (Warp, torch or NumPy): the
                results have one row per env and only the masked rows are written (fixed shapes: a reset read
                that a CUDA graph can capture).

        Returns:
            Positions, (M,) ``wp.vec3f``, world frame, stage units; orientations, (M,) ``wp.quatf``, **xyzw**,
            ``w >= 0``, world frame, in ``convention`` (a view made with ``quat_order="wxyz"``: (M,) ``wp.vec4f``,
            w, x, y, z). Both on :attr:`device`, owned by this object (or its view)
            and overwritten by the next read: clone what you keep. Without ``env_rows``, env ids and masks go to
            the view as they are (device inputs stay on the device) and a Fabric or Newton view gathers and converts
            in one launch; with ``env_rows`` a mask costs a full view read and one launch, no host work.

        Raises:
            ValueError: Unknown convention, or a mask of the wrong shape. IndexError / TypeError: bad ``env_ids``,
                a mask that is not boolean, or both ``env_ids`` and ``mask``.
            RuntimeError: The view is closed or stale (recreate it, then this object).
        """
        offset = self._offsets[_check_convention("convention", convention)]
        env_ids, mask = unwrap(env_ids), unwrap(mask)
        if mask is not None and env_ids is not None:
            raise TypeError("env_ids and mask: pass one of them, not both")
        if self._env_rows is None:  # env i is view row i: gather and convert in the view's own read launch
            fused = self._view._get_world_poses_rotated(env_ids, offset, mask)
            if fused is not None:
                return fused
        if mask is not None:
            return self._read_masked(mask, offset)
        rows = self.rows(env_ids)
        pos, quat = self._view._get_world_poses_xyzw(rows)
        m = pos.shape[0]
        pos_out, quat_out = self._pos[:m], self._quat[:m]
        if m:
            wp.launch(
                _convert_camera_poses,
                dim=m,
                inputs=[pos, quat, offset],
                outputs=[pos_out, quat_out],
                device=self._view.device,
            )
        return pos_out, self._view._ordered(quat_out)

# SPDX-License-Identifier: Apache-2.0
"""Internal: the quaternion order of a view's inputs and outputs, ``quat_order="xyzw"`` (the default) or ``"wxyz"``.

Inside frameview every quaternion is xyzw (Warp's order: kernels, buffers, Fabric's and Newton's data). A view made
with ``quat_order="wxyz"`` (Isaac Lab 2.x's order, and pxr ``Gf.Quat*``'s constructors) owns a :class:`QuatOrder`
that reorders at the boundary, once per call:

- inputs: host data on the host (one NumPy take before the staged copy); device data by one launch into a
  view-owned scratch buffer (the caller's array is never written);
- outputs: one launch over the returned buffer, in place (a mask's rows only), returned as ``wp.vec4f``
  ``(w, x, y, z)``: not a ``wp.quatf``, whose components Warp reads as xyzw, so that a Warp kernel expecting a
  quaternion refuses it instead of misreading it.

A view with the default order holds ``None`` instead: its calls take no extra launch, allocation or branch per row.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import warp as wp

from .config_checks import QUAT_ORDERS, check_quat_order
from .interop import rows_view
from .launch import RecordedLaunch, block_dim_for

__all__ = ["QUAT_ORDERS", "XYZW", "QuatOrder", "check_quat_order", "quat_order_part", "wxyz_outputs"]

XYZW, WXYZ = QUAT_ORDERS

_WXYZ_TO_XYZW = [1, 2, 3, 0]
"""Column order that takes (M, 4) wxyz rows to xyzw."""

_MAX_KEPT = 64


@wp.kernel(enable_backward=False)
def wxyz_rows_to_xyzw(
    # inputs
    quats: wp.array(dtype=wp.quatf),
    # outputs
    quats_out: wp.array(dtype=wp.quatf),
):
    """``quats`` holds (w, x, y, z) in each element (rows may be strided): ``quats_out`` the same rotations xyzw."""
    i = wp.tid()
    q = quats[i]
    quats_out[i] = wp.quatf(q[1], q[2], q[3], q[0])


@wp.kernel(enable_backward=False)
def xyzw_rows_to_wxyz(
    # inputs
    columns: int,
    mask: wp.array(dtype=wp.bool),
    use_mask: int,
    # outputs
    quats_out: wp.array(dtype=wp.quatf),
):
    """In place: element ``i`` (row ``i // columns``; only the rows ``mask`` selects when ``use_mask``) from
    (x, y, z, w) to (w, x, y, z)."""
    i = wp.tid()
    if use_mask != 0:  # noqa: SIM102 - Warp evaluates both operands of `and`: the mask is empty without use_mask
        if not mask[i // columns]:
            return
    q = quats_out[i]
    quats_out[i] = wp.quatf(q[3], q[0], q[1], q[2])


def quat_order_part(value: Any, device: Any, name: str = "quat_order") -> QuatOrder | None:
    """The view's reordering part for ``quat_order`` ``value`` (checked): ``None`` for ``"xyzw"``."""
    return None if check_quat_order(value, name) == XYZW else QuatOrder(device)


def wxyz_outputs(quats: wp.array, mask: wp.array | None = None) -> wp.array:
    """Reorder xyzw ``quats`` (``wp.quatf``, contiguous, any shape) in place to wxyz, returned as ``wp.vec4f``: one
    plain launch (what a :class:`QuatOrder` does without its cache)."""
    flat = quats.flatten() if quats.ndim > 1 else quats
    rows = quats.shape[0]
    if flat.shape[0]:
        columns = flat.shape[0] // max(rows, 1)
        no_mask = mask if mask is not None else wp.empty(0, dtype=wp.bool, device=quats.device)
        wp.launch(xyzw_rows_to_wxyz, dim=flat.shape[0], inputs=[columns, no_mask, int(mask is not None)],
                  outputs=[flat], device=quats.device)  # fmt: skip
    return quats.view(wp.vec4f)


class QuatOrder:
    """The wxyz boundary of one view (``quat_order="wxyz"``): inputs reordered to xyzw, outputs to wxyz.

    Args:
        device: The view's Warp device.
    """

    __slots__ = ("_device", "_launches", "_no_mask", "_views", "order")

    def __init__(self, device: Any) -> None:
        self._device = device
        self.order = WXYZ
        self._no_mask = wp.empty(0, dtype=wp.bool, device=device)
        self._views: dict[tuple, tuple[wp.array, wp.array, int]] = {}  # (ptr, shape) -> (flat quatf, vec4f, columns)
        self._launches: dict[Any, RecordedLaunch] = {}

    @staticmethod
    def host_input(host: np.ndarray) -> np.ndarray:
        """(M, 4) wxyz host rows -> (M, 4) xyzw (a new array: the caller's is not touched)."""
        return host[:, _WXYZ_TO_XYZW]

    def device_input(self, quats: wp.array, out: wp.array) -> wp.array:
        """(M,) ``wp.quatf`` holding wxyz (the caller's memory, rows possibly strided) -> ``out``, (M,) xyzw on the
        view's device: one launch."""
        n = quats.shape[0]
        if n:
            self._launch("in", wxyz_rows_to_xyzw, n, [quats, out])
        return out

    def float_rows_input(self, rows: wp.array, out: wp.array) -> wp.array:
        """(M, 4) float32 rows holding wxyz (unit column stride) -> ``out`` ((M,) ``wp.quatf``, the view's), returned
        as (M, 4) float32 rows xyzw over ``out``'s memory (which the caller keeps: the view owns it)."""
        n = rows.shape[0]
        if n:
            quats = rows_view(rows, wp.quatf)
            if quats is None:  # another layout: a contiguous copy first
                quats = rows_view(wp.clone(rows), wp.quatf)
            self.device_input(quats, out)
        return wp.array(ptr=out.ptr, dtype=wp.float32, shape=(n, 4), device=out.device, copy=False)

    def outputs(self, quats: wp.array, mask: wp.array | None = None) -> wp.array:
        """The view's xyzw output buffer ``quats`` (contiguous ``wp.quatf``, (M,) or (M, K)) reordered in place to
        wxyz (only the rows ``mask`` selects, when given), returned as a ``wp.vec4f`` array over the same memory."""
        key = (quats.ptr, quats.shape)
        kept = self._views.get(key)
        if kept is None:
            if len(self._views) >= _MAX_KEPT:
                self._views.clear()
            flat = quats.flatten() if quats.ndim > 1 else quats
            kept = self._views[key] = (flat, quats.view(wp.vec4f), flat.shape[0] // max(quats.shape[0], 1))
        flat, vec4, columns = kept
        if flat.shape[0]:
            use_mask = mask is not None
            self._launch("out", xyzw_rows_to_wxyz, flat.shape[0],
                         [columns, mask if use_mask else self._no_mask, int(use_mask), flat])  # fmt: skip
        return vec4

    def _launch(self, key: str, kernel: Any, dim: int, params: list) -> None:
        """A recorded launch on the device's current stream (inside the caller's graph capture: captured there)."""
        cmd = self._launches.get(key)
        if cmd is None:
            cmd = self._launches[key] = RecordedLaunch(kernel, dim, params, self._device, block_dim_for(self._device))
        cmd.launch(dim, params)

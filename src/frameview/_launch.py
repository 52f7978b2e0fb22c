# SPDX-License-Identifier: Apache-2.0
"""Recorded Warp launches that re-pack only what changed: the host side of a small launch at the GPU floor."""

from __future__ import annotations

from typing import Any

import warp as wp

__all__ = ["RecordedLaunch"]


class RecordedLaunch:
    """``kernel(*params)`` recorded once, then launched with only the changed parameters re-packed.

    ``wp.launch`` looks the kernel up and packs every argument on every call, most of a small launch's host time; a
    recorded command keeps the packed arguments, and :meth:`launch` updates those whose object changed (arrays by
    identity, scalars by value) and the dimension. The command holds raw pointers: this object keeps every array it
    was given alive, so no address can be reused while it is recorded.

    Args:
        kernel: The Warp kernel.
        dim: Launch dimension.
        params: Every argument, inputs then outputs, in the kernel's order.
        device: The device to launch on.
    """

    __slots__ = ("_cmd", "_dim", "_params")

    def __init__(self, kernel: Any, dim: Any, params: list, device: Any) -> None:
        self._cmd = wp.launch(kernel, dim=dim, inputs=params, device=device, record_cmd=True)
        self._params = list(params)
        self._dim = dim

    def launch(self, dim: Any, params: list) -> None:
        """Launch with ``params`` (same length and kinds as recorded) over ``dim``."""
        cmd, last = self._cmd, self._params
        for j, value in enumerate(params):
            old = last[j]
            if value is not old and (isinstance(value, (wp.array, wp.fabricarray)) or value != old):
                cmd.set_param_at_index(j, value)
                last[j] = value
        if dim != self._dim:
            cmd.set_dim(dim)
            self._dim = dim
        cmd.launch()

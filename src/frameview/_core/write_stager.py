# SPDX-License-Identifier: Apache-2.0
"""Internal: :class:`WriteStager` (a view's ``_stager``): a write that the view does not make at once (a writer
scope's, or ``set_world_scales``') validated when it is made and its rows described, handed back as a
:class:`PendingWrite`.

The view's methods open the scopes and apply the writes (:class:`~frameview.BaseFrameView`); the scopes are in
:mod:`frameview.writers`.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import TYPE_CHECKING, Any

import numpy as np
import warp as wp

from .host import to_numpy
from .interop import borrow_host
from .rows import ALL, MASK, Rows
from .values import check_host_rows

if TYPE_CHECKING:
    from .arguments import Arguments

__all__ = ["PendingWrite", "WriteStager", "write_call"]


def write_call(space: str, poses: bool, scales: bool) -> str:
    """The name errors give a write in ``space`` of poses and/or scales (it selects the argument named in
    device-side value errors)."""
    if not scales:
        return f"set_{space}"
    return f"set_{space}_poses_and_scales" if poses else f"set_{space}_scales"


@dataclasses.dataclass
class PendingWrite:
    """One validated write: its rows and data on the view's device (``None``: keep that component)."""

    rows: Rows
    pos: wp.array | None
    quat: wp.array | None
    scale: wp.array | None
    from_host: bool
    """Rows and data were checked on the host: the write's device errors are raised by the write itself."""
    key: tuple | None = None
    """The rows as host data, to compare with a later write (``None``: device rows, not comparable for free)."""

    def call(self, space: str) -> str:
        """The name errors give this write (:func:`write_call`)."""
        return write_call(space, self.pos is not None or self.quat is not None, self.scale is not None)


def _host_copy(value: Any) -> np.ndarray | None:
    """``value`` (indices or a mask) as NumPy when it lives on the host, ``None`` for device arrays."""
    if isinstance(value, wp.array):
        return value.numpy().copy() if value.device.is_cpu else None
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return value.detach().numpy().copy() if str(value.device) == "cpu" else None
    if isinstance(value, (np.ndarray, list, tuple, range)):
        return np.array(value)
    return None


class WriteStager:
    """How a view validates a write that it does not make at once (a writer scope's, or
    :meth:`~frameview.BaseFrameView.set_world_scales`'s, which the view applies through its combined write): a view's
    ``_stager``.

    Args:
        args: The view's row resolver (:class:`~frameview._core.arguments.Arguments`).
        device: The view's Warp device.
        device_rows: Whether the backend takes device indices and masks as they are (its kernels check them).
        prim_paths: The view's prims, in view order.
    """

    def __init__(self, args: Arguments, device: Any, device_rows: bool, prim_paths: tuple[str, ...]) -> None:
        self._args = args
        self._device = device
        self._device_rows = device_rows
        self._prim_paths = prim_paths
        self._nested: bool | None = None

    def stage(
        self,
        indices: Any,
        mask: Any,
        values: tuple[tuple[Any, str, type], ...],
        scale_only: bool = False,
        now: bool = False,
    ) -> PendingWrite | None:
        """Validate a write as the view's setters do; ``None`` when it writes nothing. ``values``: (positions,
        orientations[, scales]) or, with ``scale_only``, (scales,). ``now`` (writer scopes): on the CPU, also check
        device indices and data here, on the host (they are host memory there), so that the call raises and the
        write counts as checked."""
        args = self._args
        with args.host_inputs():  # host inputs reach a CUDA device in one copy
            rows, pairs = args.write_values(args.prepare(indices, mask, write=True), values)
        arrays = [array for array, _host in pairs]
        if rows.count == 0 or all(a is None for a in arrays):
            return None
        if scale_only:
            arrays = [None, None, arrays[0]]
        arrays += [None] * (3 - len(arrays))
        # checked at the call: host inputs, and everything a host-bound backend takes (it checks device data at once)
        from_host = (rows.checked and all(host for _array, host in pairs)) or not self._device_rows
        if now and not from_host and self._device.is_cpu:
            rows = self._check_on_host(rows, arrays, [name for _value, name, _dtype in values], scale_only)
            from_host = True
        return PendingWrite(rows, arrays[0], arrays[1], arrays[2], from_host)

    def _check_on_host(self, rows: Rows, arrays: list, names: list[str], scale_only: bool) -> Rows:
        """CPU: check a write's device indices and data on the host (the checks the kernels would make, with the same
        messages as host inputs), reading the arrays in place; return the rows marked checked."""
        if not rows.checked:
            source = rows.source if rows.source is not None else rows.indices
            # a Warp array was accepted by prepare (an integer dtype, 1-D): read in place
            host = borrow_host(source) if isinstance(source, wp.array) else self._args.indices_to_numpy(source)
            self._args.check_host_indices(host if host.dtype.kind == "i" else host.astype(np.int64), write=True)
            rows = Rows(rows.kind, rows.count, rows.indices, rows.mask, True, rows.source, rows.narrow)
        read = np.flatnonzero(borrow_host(rows.mask)) if rows.kind == MASK else None
        if scale_only:
            names = [names[0], names[0], names[0]]
        for array, name, quat in zip(arrays, names, (False, True, False), strict=False):
            if array is not None:
                check_host_rows(borrow_host(array).reshape(array.shape[0], -1), read, name, quat and not scale_only)
        return rows

    def rows_key(self, rows: Rows, indices: Any, mask: Any) -> tuple | None:
        """The rows of a validated write as host data, or ``None`` when that would cost a host round trip."""
        if rows.kind == ALL:
            return (ALL, None)
        if self._device.is_cpu:  # the rows are host memory: a copy
            return (rows.kind, borrow_host(rows.mask if rows.kind == MASK else rows.indices).copy())
        if not self._device_rows:  # the rows were copied to the device from the host
            host = to_numpy(rows.mask) if rows.kind == MASK else to_numpy(rows.indices)
            return (rows.kind, host.copy())
        host = _host_copy(mask if mask is not None else indices)
        return None if host is None else (rows.kind, host)

    def nested_prims(self) -> bool:
        """Whether a view prim is an ancestor of another one (computed once per view)."""
        if self._nested is None:
            paths = set(self._prim_paths)
            nested = False
            for path in paths:
                parent = path.rsplit("/", 1)[0]
                while parent and not nested:
                    nested = parent in paths
                    parent = parent.rsplit("/", 1)[0]
                if nested:
                    break
            self._nested = nested
        return self._nested

# SPDX-License-Identifier: Apache-2.0
"""Which rows a call reads or writes: all, indices or a mask.

Internal to the views. A call's rows are one :class:`Rows`: ``ALL`` (every view prim, row ``i`` is prim ``i``),
``INDEXED`` (row ``k`` is prim ``indices[k]``, int32 on the view's device) or ``MASK`` (row ``i`` is prim ``i``,
written / read only where ``mask[i]``). Errors found on the device are reported through
:mod:`frameview._core.device_errors`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import numpy as np
import warp as wp

from .host import to_numpy

ALL, INDEXED, MASK = 0, 1, 2
MASK_ROWS = 3
"""A kernel-only row kind: a mask's rows compacted into ``indices`` (CPU writes, where every launch loops over its
rows on one core): row ``k`` is prim ``indices[k]``, whose data and reports use that prim's row, as for ``MASK``."""


@dataclass(frozen=True)
class Rows:
    """The rows of one call.

    Attributes:
        kind: ``ALL``, ``INDEXED`` or ``MASK``.
        count: Rows of the data and of the outputs (the view's count for ``ALL`` and ``MASK``).
        indices: int32 view indices on the view's device (``INDEXED``); possibly unchecked, see ``checked``.
        mask: bool (count,) on the view's device (``MASK``).
        checked: Bounds and duplicates were checked on the host (host inputs); else the kernels check them.
        source: What the caller passed (error messages read it on the error path only).
        narrow: ``(kernel, array)``: ``indices`` is not filled yet; the backend's first launch of the call narrows
            ``array`` (the caller's indices, another dtype or strided) into it (only backends that ask for it with
            ``_folds_narrow`` get such rows, from the calls that hand them straight to their launches).
    """

    kind: int
    count: int
    indices: wp.array | None = None
    mask: wp.array | None = None
    checked: bool = True
    source: Any = None
    narrow: tuple | None = None

    def host_indices(self) -> np.ndarray | None:
        """The view indices as NumPy (``None`` for ``ALL``). Copies device data: host-bound backends only."""
        if self.kind == ALL:
            return None
        if self.kind == MASK:
            return np.flatnonzero(to_numpy(self.mask))
        return to_numpy(self.indices).astype(np.int64)


def is_torch_tensor(value: Any) -> bool:
    """Whether ``value`` is a torch tensor (without importing torch)."""
    torch = sys.modules.get("torch")  # never import torch ourselves
    return torch is not None and isinstance(value, torch.Tensor)


def source_index(rows: Rows, row: int) -> int:
    """The view index the caller passed at ``row`` (error path: may copy from the device)."""
    source = rows.source if rows.source is not None else rows.indices
    try:
        if is_torch_tensor(source):
            return int(source[row].item())
        host = to_numpy(source) if isinstance(source, wp.array) else np.asarray(source)
        return int(host[row])
    except Exception:  # the caller changed or freed it: report the row
        return row


class MaskCompaction:
    """CPU: a mask's rows compacted into the view's index buffer (``MASK_ROWS``), so that a call's launches loop over
    the rows written (or read) instead of every row of the mask (Warp's CPU launches run one thread after another: a
    reset's 256 of 8192 rows otherwise pay ~5 ns per row left out in each launch). The CPU's arrays are host memory:
    NumPy reads the mask in place.

    Args:
        index_buffer: The view's (N,) int32 index buffer (CPU: host memory).
        index_host: Its NumPy view (CPU), where the rows are written.
        heads: The view's cache of the buffer's heads (``buf[:rows]`` by ``(address, rows)``).

    Attributes:
        enabled: Whether CPU views compact masks (a class attribute: the tests switch it off to run the kernels'
            ``MASK`` path, the one CUDA takes, on the CPU).
    """

    __slots__ = ("_buffer", "_heads", "_host", "_views")

    enabled = True

    def __init__(self, index_buffer: wp.array, index_host: np.ndarray, heads: dict[tuple[int, int], wp.array]) -> None:
        self._buffer = index_buffer
        self._host = index_host
        self._heads = heads
        self._views: dict[int, tuple[wp.array, np.ndarray]] = {}  # the NumPy views of the masks last seen

    def __call__(self, rows: Rows) -> Rows:
        """``rows`` (``MASK``, host memory) as ``MASK_ROWS`` over the index buffer."""
        views = self._views
        view = views.get(id(rows.mask))
        if view is None or view[0] is not rows.mask:  # a reset loop passes the same mask: its view is kept
            if len(views) >= 8:
                views.clear()
            view = views[id(rows.mask)] = (rows.mask, to_numpy(rows.mask))  # holds the mask: its id stays its own
        host = view[1].nonzero()[0]
        n = host.size
        self._host[:n] = host
        return Rows(MASK_ROWS, n, indices=head_of(self._heads, self._buffer, n))


def head_of(heads: dict[tuple[int, int], wp.array], buf: wp.array, rows: int) -> wp.array:
    """``buf[:rows]``, remembered in ``heads`` (slicing a Warp array costs more host time than a small read's kernels);
    the views' argument handling keeps the same kind of cache (``Arguments.head``)."""
    if rows == buf.shape[0]:
        return buf
    key = (buf.ptr, rows)
    head = heads.get(key)
    if head is None:
        if len(heads) >= 256:
            heads.clear()
        head = heads[key] = buf[:rows]  # holds ``buf``: its address cannot be reused while cached
    return head

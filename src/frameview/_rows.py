# SPDX-License-Identifier: Apache-2.0
"""Which rows a call reads or writes: all, indices or a mask.

Internal to the views. A call's rows are one :class:`Rows`: ``ALL`` (every view prim, row ``i`` is prim ``i``),
``INDEXED`` (row ``k`` is prim ``indices[k]``, int32 on the view's device) or ``MASK`` (row ``i`` is prim ``i``,
written / read only where ``mask[i]``). Errors found on the device are reported through
:mod:`frameview._device_errors`.
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

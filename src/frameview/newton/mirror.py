# SPDX-License-Identifier: Apache-2.0
"""The Fabric mirror of a Newton view: which of its rows each target view's prims are (``NewtonFrameView.mirror_to``).

A target (a :class:`~frameview.FabricFrameView`, usually, so that Fabric consumers such as renderers see the
simulated frames) may list the Newton view's prims in another order, or only some of them. Its rows are looked up
once per target prim list, kept on the device, and handed to the Newton view's indexed read; the target is then
written in one call.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import warp as wp

__all__ = ["MirrorRows"]


class MirrorRows:
    """The rows of a Newton view that each mirror target reads, by the target's prim list.

    Args:
        prim_paths: The Newton view's prim paths, in its row order.
        device: The Newton view's device (the row arrays live there).
    """

    def __init__(self, prim_paths: tuple[str, ...], device: Any) -> None:
        self._paths = prim_paths
        self._device = device
        self._rows: dict[tuple[str, ...], wp.array | None] = {}

    def rows_for(self, target_paths: tuple[str, ...]) -> wp.array | None:
        """int32 rows of the Newton view, one per target prim, in the target's order (None: the same prims in the
        same order, read them all).

        Raises:
            ValueError: The target has a prim that the Newton view does not.
        """
        if target_paths in self._rows:
            return self._rows[target_paths]
        if target_paths == self._paths:
            rows = None
        else:
            row = {p: i for i, p in enumerate(self._paths)}
            missing = [p for p in target_paths if p not in row]
            if missing:
                raise ValueError(
                    f"target: {len(missing)} of its prims are not in this view, e.g. {missing[:3]}; mirror into a "
                    "view over this view's prims (or a subset of them)"
                )
            host = np.array([row[p] for p in target_paths], dtype=np.int32)
            rows = wp.array(host, dtype=wp.int32, device=self._device)
        self._rows[target_paths] = rows
        return rows

    def clear(self) -> None:
        """Forget every target (the view is closed)."""
        self._rows.clear()

# SPDX-License-Identifier: Apache-2.0
"""Visibility of the viewed prims: ``get_visibility`` / ``set_visibility``, shared by every backend."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["VisibilityMixin"]


class VisibilityMixin:
    """Public visibility API of :class:`~frameview.BaseFrameView`; backends implement the two host hooks."""

    def _read_visibility(self, rows: np.ndarray) -> np.ndarray:
        """Computed visibility (bool, one per row) of view prims ``rows`` (int64 view indices)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement visibility")

    def _write_visibility(self, rows: np.ndarray, visible: np.ndarray) -> None:
        """Make view prims ``rows`` visible or invisible."""
        raise NotImplementedError(f"{type(self).__name__} does not implement visibility")

    def _visibility_placeholder(self) -> Any:  # replaced by the public API in the next commit
        return None

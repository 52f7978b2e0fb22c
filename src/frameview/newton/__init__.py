# SPDX-License-Identifier: Apache-2.0
"""The Newton backend: camera and sensor frames that ride on Newton bodies (needs ``frameview[newton]``).

Users import :class:`NewtonFrameView` from ``frameview`` (``fv.NewtonFrameView``), which loads this package on first
use: ``import frameview`` never imports newton.
"""

from __future__ import annotations

from .view import NewtonFrameView

__all__ = ["NewtonFrameView"]

# SPDX-License-Identifier: Apache-2.0
"""The USD backend: :class:`UsdFrameView`, the pxr reference backend (needs ``frameview[usd]`` or Kit's pxr).

Users import :class:`UsdFrameView` from ``frameview`` (``fv.UsdFrameView``). The view's reads and checks are in
:mod:`.view`, its write solve in :mod:`.solve`, its xformOp authoring in :mod:`.author`.
"""

from __future__ import annotations

from .view import UsdFrameView

__all__ = ["UsdFrameView"]

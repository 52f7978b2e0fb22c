# SPDX-License-Identifier: Apache-2.0
"""The Newton backend (needs ``frameview[newton]``): camera and sensor frames that ride on Newton bodies
(:class:`NewtonFrameView`, which also needs pxr), and the typed physics views (:class:`NewtonRigidBodyView`,
:class:`NewtonArticulationView`, which need no stage).

Users import these from ``frameview``, which loads this package on first use: ``import frameview`` never imports
newton. Each class loads its own module on first use, so the physics views never import pxr.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = ["NewtonArticulationView", "NewtonFrameView", "NewtonRigidBodyView"]

_MODULES = {"NewtonFrameView": ".view", "NewtonRigidBodyView": ".bodies", "NewtonArticulationView": ".bodies"}


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:  # pragma: no cover
    from .bodies import NewtonArticulationView, NewtonRigidBodyView
    from .view import NewtonFrameView

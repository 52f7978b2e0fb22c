# SPDX-License-Identifier: Apache-2.0
"""The ovphysx backend of the typed physics views: :class:`OvPhysxRigidBodyView` and
:class:`OvPhysxArticulationView` over an ``ovphysx.PhysX`` instance with an attached ovstage ``Stage``.

Users import these from ``frameview``, which loads this package on first use: ``import frameview`` never imports
ovphysx. Importing this package checks that ovphysx and ovstage are installed (and raises ``ImportError`` saying
how to install them); it loads no native library (``import ovphysx`` loads none until a ``PhysX`` is made).
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

__all__ = ["OvPhysxArticulationView", "OvPhysxRigidBodyView"]

INSTALL_HINT = "pip install ovstage && pip install --no-deps ovphysx physx-usd-schemas"

_missing = [m for m in ("ovphysx", "ovstage") if importlib.util.find_spec(m) is None]
if _missing:
    raise ImportError(
        f"the ovphysx physics views need {' and '.join(_missing)}: install with {INSTALL_HINT}", name=_missing[0]
    )

_MODULES = {"OvPhysxRigidBodyView": ".bodies", "OvPhysxArticulationView": ".bodies"}


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:  # pragma: no cover
    from .bodies import OvPhysxArticulationView, OvPhysxRigidBodyView

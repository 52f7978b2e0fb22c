# SPDX-License-Identifier: Apache-2.0
"""Choosing the Fabric provider for the stage a user hands over."""

from __future__ import annotations

import importlib.util
import logging
from typing import Any

from ..stage import FabricStage

__all__ = ["FABRIC_PROVIDERS", "OVSTAGE_MIN_VERSION", "open_fabric_stage", "ovstage_version_problem"]

logger = logging.getLogger(__name__)

FABRIC_PROVIDERS = ("auto", "memory", "ovstage", "usdrt")

_INSTALL = {
    "ovstage": "pip install 'frameview[ovstage]'  (or: pip install ovstage)",
    "usdrt": "usdrt ships with Isaac Sim / Omniverse Kit and is not on PyPI: run inside Isaac Sim's Python",
    "pxr": "install frameview[usd] (or run inside Kit / Isaac Sim, which ships pxr)",
}


OVSTAGE_MIN_VERSION = (0, 2, 1)
"""The oldest ovstage the ``ovstage`` provider supports: 0.2.1 (the one Isaac Lab 3.0 pins) and 0.3 are tested."""


def ovstage_version_problem(version: tuple[int, ...] | None) -> str | None:
    """Why the ``ovstage`` provider refuses an ovstage of ``version`` (``None`` when it is supported).

    Args:
        version: ``ovstage.library_version()``, e.g. ``(0, 2, 1)``; ``None`` when it cannot be told.
    """
    need = ".".join(map(str, OVSTAGE_MIN_VERSION))
    if version is None:
        return f"the installed ovstage does not report its version; frameview needs ovstage >= {need}"
    if tuple(version[:3]) < OVSTAGE_MIN_VERSION:
        got = ".".join(map(str, version))
        return f"frameview needs ovstage >= {need}, found {got}: pip install 'ovstage>={need}'"
    return None


def _require_pxr(what: str) -> None:
    """Raise the ImportError that names the ``frameview[usd]`` extra when pxr cannot be imported."""
    try:
        import pxr.Usd  # noqa: F401
    except ImportError as exc:
        raise ImportError(f"{what} needs pxr: {_INSTALL['pxr']}", name="pxr") from exc


def _is_pxr_stage(stage: Any) -> bool:
    return type(stage).__module__.startswith("pxr") and hasattr(stage, "GetPseudoRoot")


def _is_ovstage_stage(stage: Any) -> bool:
    return type(stage).__module__.split(".")[0] == "ovstage"


def _is_usdrt_stage(stage: Any) -> bool:
    return type(stage).__module__.split(".")[0] == "usdrt"


def _is_fabric_stage(stage: Any) -> bool:
    return all(hasattr(stage, a) for a in ("provider", "select", "set_uint_attribute", "propagate_world", "lock"))


def _available(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def open_fabric_stage(stage: Any, device: str, provider: str = "auto") -> FabricStage:
    """The Fabric stage for ``stage``: a pxr ``Usd.Stage``, an ``ovstage.Stage``, a usdrt stage, or a FabricStage.

    Args:
        stage: What the user holds.
        device: Warp device for the columns.
        provider: ``"auto"`` (chosen by the stage's type, logged), ``"memory"``, ``"ovstage"`` or ``"usdrt"``.

    Raises:
        ValueError: Unknown provider, or a provider that cannot serve this kind of stage.
        ImportError: The requested provider is not installed (the message says how to install it).
    """
    if provider not in FABRIC_PROVIDERS:
        raise ValueError(f"fabric_provider: expected one of {list(FABRIC_PROVIDERS)}, got {provider!r}")
    if _is_fabric_stage(stage):
        if provider not in ("auto", stage.provider):
            raise ValueError(f"fabric_provider={provider!r} was requested, but the stage is a {stage.provider!r} one")
        return stage
    kind = "pxr" if _is_pxr_stage(stage) else "ovstage" if _is_ovstage_stage(stage) else "usdrt" if (
        _is_usdrt_stage(stage)) else None  # fmt: skip
    if kind is None:
        raise TypeError(
            f"stage: expected a pxr Usd.Stage, an ovstage.Stage or a usdrt stage, got {type(stage).__name__}"
        )
    chosen = provider
    if provider == "auto":
        chosen = ("usdrt" if _available("usdrt") else "memory") if kind == "pxr" else kind
        logger.info("frameview: fabric_provider='auto' chose %r for a %s stage on %s", chosen, kind, device)
    if chosen == "memory":
        if kind != "pxr":
            raise ValueError(f"fabric_provider='memory' needs a pxr Usd.Stage, got a {kind} stage")
        _require_pxr("populating the embedded Fabric model (fabric_provider='memory') from a pxr stage")
        from .memory import attach

        return attach(stage, device)
    if chosen == "ovstage":
        if kind != "ovstage":
            raise ValueError(
                "fabric_provider='ovstage' needs an ovstage.Stage; ovstage cannot take a pxr stage: export it "
                "(stage.Export(path)) and open it with ovstage.population.open_usd(...)"
            )
        if not _available("ovstage"):
            raise ImportError(f"fabric_provider='ovstage' needs ovstage: {_INSTALL['ovstage']}")
        from .ovstage.fabric_stage import attach as attach_ovstage

        return attach_ovstage(stage, device)
    # usdrt
    if not _available("usdrt"):
        raise ImportError(f"fabric_provider='usdrt' needs usdrt: {_INSTALL['usdrt']}")
    from .usdrt import attach as attach_usdrt

    return attach_usdrt(stage, device)

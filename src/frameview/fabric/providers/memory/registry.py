# SPDX-License-Identifier: Apache-2.0
"""The registry of embedded Fabric models: one per (pxr stage, device), built on first use, forgotten with the stage."""

from __future__ import annotations

import threading
import weakref
from typing import Any

import warp as wp

from .model import MemoryFabricStage

__all__ = ["attach"]

_MODELS: dict[tuple[int, str], MemoryFabricStage] = {}
_MODELS_LOCK = threading.RLock()
"""Re-entrant: building a model allocates, a garbage collection can then finalise another stage on this very
thread, and its ``_forget`` takes this lock again (a plain Lock deadlocked there)."""


def attach(stage: Any, device: str = "cpu") -> MemoryFabricStage:
    """The embedded Fabric model of a pxr stage on ``device``, built on first use (like usdrt's ``Stage.Attach``).

    One model per (stage, device); it lives as long as the stage and follows its edits.
    """
    device = str(wp.get_device(device))
    key = (id(stage), device)
    with _MODELS_LOCK:
        model = _MODELS.get(key)
        if model is not None and model.is_alive():
            return model
        model = MemoryFabricStage(device)
        model._populate(stage)
        _MODELS[key] = model
        weakref.finalize(stage, _forget, key, model)
        return model


def _forget(key: tuple[int, str], model: MemoryFabricStage) -> None:
    with _MODELS_LOCK:
        if _MODELS.get(key) is model:
            del _MODELS[key]
    model.detach()

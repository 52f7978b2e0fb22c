# SPDX-License-Identifier: Apache-2.0
"""The ovstage provider: real Fabric without Kit (needs ``frameview[ovstage]``).

:class:`OvstageFabricStage` and :func:`attach` (:mod:`.fabric_stage`, the facade); its selections
(:mod:`.selection`) and the per-stage core they share (:mod:`.core`: lock, ordinals and seals, path lists).
"""

from __future__ import annotations

from .fabric_stage import OvstageFabricStage, attach

__all__ = ["OvstageFabricStage", "attach"]

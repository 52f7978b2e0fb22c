# SPDX-License-Identifier: Apache-2.0
"""Visibility opinions of the embedded Fabric model: written in the model (never USD), replaced by later USD edits
of the same prims (host path, see :mod:`frameview.visibility`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ....visibility import NO_OPINION, VISIBLE, PxrVisibilityTree, compute_visibility, plan_visibility
from .usd_sync import _NON_STRUCTURAL_FIELDS, _outermost, _UsdSync


class _VisibilityOpinions(_UsdSync):
    """The ``visibility`` opinions written through the model, and the USD edits that replace them."""

    def __init__(self, device: str) -> None:
        super().__init__(device)
        self._vis_written: dict[str, int] = {}  # visibility opinions written in Fabric (path -> VISIBLE/INVISIBLE)
        self._vis_listener: Any = None  # follows USD visibility edits once Fabric holds its own opinions
        self._vis_stale: set[str] = set()  # prims whose USD visibility changed since the last visibility call
        self._vis_stale_trees: set[str] = set()  # roots of structural USD changes since then

    def visibility(self, paths: Sequence[str]) -> np.ndarray:
        """Computed visibility from the Fabric ``visibility`` opinions of the prims and their ancestors.

        The model holds the opinions written through it; every other prim's opinion is the USD stage's, read when
        asked (so the model needs no copy of every prim's opinion, and USD edits show at once)."""
        self._sync_visibility()
        return compute_visibility(self._visibility_tree(), [str(p) for p in paths])

    def set_visibility(self, paths: Sequence[str], visible: np.ndarray) -> None:
        """Write ``visibility`` opinions in the model (never USD). A later USD edit of a prim's ``visibility`` (or a
        structural change at or above it) replaces what the model wrote for that prim, as an xformOp edit replaces
        a Fabric pose write."""
        self._sync_visibility()
        changes = plan_visibility(self._visibility_tree(), [str(p) for p in paths], np.asarray(visible, dtype=bool))
        self._vis_written.update(changes)
        stage = self._stage_ref() if self._stage_ref is not None else None
        if changes and self._vis_listener is None and stage is not None:
            from pxr import Tf, Usd

            self._vis_listener = Tf.Notice.Register(Usd.Notice.ObjectsChanged, self._on_visibility_edits, stage)

    def _visibility_tree(self) -> Any:
        stage = self._stage_ref() if self._stage_ref is not None else None
        if stage is not None:
            return PxrVisibilityTree(stage, self._vis_written)
        return _ModelVisibilityTree(self)

    def _on_visibility_edits(self, notice: Any, sender: Any) -> None:
        """Queue the USD edits that replace opinions the model wrote: ``visibility`` authored on a prim, and
        structural changes (prims removed or re-created). Poses are not touched (``_on_objects_changed`` owns them)."""
        for p in notice.GetResyncedPaths():
            if p.IsPropertyPath():
                if p.name == "visibility":
                    self._vis_stale.add(str(p.GetPrimPath()))
            else:
                fields = set(notice.GetChangedFields(p))
                if not fields or not fields <= _NON_STRUCTURAL_FIELDS:
                    self._vis_stale_trees.add(str(p))
        for p in notice.GetChangedInfoOnlyPaths():
            if p.IsPropertyPath() and p.name == "visibility":
                self._vis_stale.add(str(p.GetPrimPath()))

    def _sync_visibility(self) -> None:
        """Drop the written opinions that USD edits replaced since the last visibility call."""
        written = self._vis_written
        stale, trees = self._vis_stale, self._vis_stale_trees  # swap first: notices may arrive meanwhile
        self._vis_stale, self._vis_stale_trees = set(), set()
        for path in stale:
            written.pop(path, None)
        if trees:
            roots = _outermost(trees)
            prefixes = tuple(r.rstrip("/") + "/" for r in roots)
            for path in [p for p in written if p in roots or p.startswith(prefixes)]:
                del written[path]

    def detach(self) -> None:
        """Stop following USD notices."""
        super().detach()
        if self._vis_listener is not None:
            self._vis_listener.Revoke()
            self._vis_listener = None


class _ModelVisibilityTree:
    """Visibility over a model built without USD (:meth:`MemoryFabricStage.from_arrays`): its prims and its own
    opinions (no opinion: visible)."""

    def __init__(self, model: _VisibilityOpinions) -> None:
        self._model = model

    def opinions(self, paths: Sequence[str]) -> np.ndarray:
        written = self._model._vis_written
        out = np.full(len(paths), NO_OPINION, dtype=np.int8)
        for i, path in enumerate(paths):
            own = written.get(path)
            out[i] = own if own is not None else VISIBLE if self._model.has_prim(path) else NO_OPINION
        return out

    def children(self, paths: Sequence[str]) -> list[list[str]]:
        return [[f"{path}/{name}" for name in self._model.child_names(path)] for path in paths]

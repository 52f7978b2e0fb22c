# SPDX-License-Identifier: Apache-2.0
"""USD sync of the embedded Fabric model: population from a pxr stage, and the stage's structural and xformOp edits
followed through USD change notices, applied lazily on the next access (:meth:`_UsdSync.sync`)."""

from __future__ import annotations

import logging
import weakref
from typing import Any

import numpy as np

from ...stage import LOCAL_MATRIX
from .hierarchy import _Hierarchy

logger = logging.getLogger(__name__)


class _UsdSync(_Hierarchy):
    """Follows a pxr stage: its xformables enter the model, its edits reach it, and prims that leave it are
    remembered with the reason (error messages)."""

    def __init__(self, device: str) -> None:
        super().__init__(device)
        self._stage_ref: Any = None
        self._listener: Any = None
        self._pending_resync: set[str] = set()
        self._pending_info: set[str] = set()
        self._lost: dict[str, str] = {}  # path -> why it left the model (error messages only)
        self.usd_edits = 0
        """Advanced by each USD change notice that queues edits for the model (a writer scope that wrote at its
        call compares it at exit: an edit since then may have moved the prims' parents)."""

    def _populate(self, stage: Any) -> None:
        from pxr import Tf, Usd

        self._stage_ref = weakref.ref(stage)
        added = self._add_new_prims(stage.GetPseudoRoot())
        self._listener = Tf.Notice.Register(Usd.Notice.ObjectsChanged, self._on_objects_changed, stage)
        logger.debug("embedded Fabric model: %d prims from %s on %s", added, stage, self.device)

    def _on_objects_changed(self, notice: Any, sender: Any) -> None:
        """Queue the edits that change what Fabric holds: xformOp / xformOpOrder properties, and prim-level changes
        that are structural. Everything else (other attributes created, set or removed, kind, applied API schemas,
        documentation...) leaves Fabric as written, as Kit's Fabric does."""
        for p in notice.GetResyncedPaths():
            if p.IsPropertyPath():
                if _is_xform_property(p.name):
                    self._pending_info.add(str(p.GetPrimPath()))
            else:
                fields = set(notice.GetChangedFields(p))
                if not fields or not fields <= _NON_STRUCTURAL_FIELDS:
                    self._pending_resync.add(str(p))
            # a prim resync whose changed fields are all non-structural (kind, apiSchemas...) is ignored
        for p in notice.GetChangedInfoOnlyPaths():
            if p.IsPropertyPath() and _is_xform_property(p.name):
                self._pending_info.add(str(p.GetPrimPath()))
        if self._pending_resync or self._pending_info:
            self.usd_edits += 1

    def sync(self) -> None:
        """Apply USD edits noticed since the last access (structure first, then xformOp values)."""
        if not (self._pending_resync or self._pending_info):
            return
        stage = self._stage_ref() if self._stage_ref is not None else None
        resync, info = self._pending_resync, self._pending_info
        self._pending_resync, self._pending_info = set(), set()
        if stage is None:
            return
        from pxr import UsdGeom

        dirty: list[int] = []
        for root in _outermost(resync):
            dirty.extend(self._resync(stage, root))
        for path in info - resync:
            pid = self._pid_of.get(path)
            if pid is None or not self._alive[pid]:
                continue
            prim = stage.GetPrimAtPath(path)
            if _lost_reason(prim) is None:
                mat = np.array(UsdGeom.Xformable(prim).GetLocalTransformation(), dtype=np.float64)
                self._write_matrices(np.array([pid]), LOCAL_MATRIX, mat[None])
                dirty.append(pid)
        if dirty:
            self._readd_reparented(stage, dirty)
            self._update_world(self._descendants(np.unique(np.asarray(dirty, dtype=np.int64)), include_self=True))

    def _readd_reparented(self, stage: Any, pids: list[int]) -> None:
        """Re-add the prims whose composition parent changed (``resetXformStack`` toggled, an ancestor became
        xformable): they get new prim ids, so their tags go with the old ones and views over them raise instead of
        composing with the old parent."""
        from pxr import UsdGeom

        moved: list[int] = []
        for pid in np.unique(np.asarray(pids, dtype=np.int64)):
            if not self._alive[pid]:
                continue
            path = self._paths[pid]
            parent = -1
            if not UsdGeom.Xformable(stage.GetPrimAtPath(path)).GetResetXformStack():
                ancestor = path.rsplit("/", 1)[0]
                while ancestor:
                    known = self._pid_of.get(ancestor)
                    if known is not None and self._alive[known]:
                        parent = known
                        break
                    ancestor = ancestor.rsplit("/", 1)[0]
            if parent != self._parent[pid]:
                moved.append(int(pid))
        if moved:
            for pid in moved:
                self._remember_lost(self._paths[pid], "was re-parented (xformable ancestor or resetXformStack changed)")
            self._kill(np.asarray(moved, dtype=np.int64))
            for pid in moved:
                self._add_new_prims(stage.GetPrimAtPath(self._paths[pid]))

    def _resync(self, stage: Any, root: str) -> list[int]:
        """Reconcile the subtree at ``root`` with USD; returns pids whose local changed (for the world update)."""
        from pxr import UsdGeom

        # model prims at or under root
        anchor = root
        while anchor and (anchor not in self._pid_of or not self._alive[self._pid_of[anchor]]):
            anchor = anchor.rsplit("/", 1)[0]
        existing: np.ndarray = np.empty(0, dtype=np.int64)
        if anchor:
            sub = self._descendants(np.array([self._pid_of[anchor]]), include_self=True)
            prefix = root + "/"
            existing = np.array([p for p in sub if self._paths[p] == root or self._paths[p].startswith(prefix)],
                                dtype=np.int64)  # fmt: skip
        elif root == "/":
            existing = np.flatnonzero(self._alive)
        dirty: list[int] = []
        gone: list[int] = []
        for pid in existing:
            prim = stage.GetPrimAtPath(self._paths[pid])
            reason = _lost_reason(prim)
            if reason is not None:
                gone.append(int(pid))
                self._remember_lost(self._paths[pid], reason)
            else:
                mat = np.array(UsdGeom.Xformable(prim).GetLocalTransformation(), dtype=np.float64)
                self._write_matrices(np.array([pid]), LOCAL_MATRIX, mat[None])
                dirty.append(int(pid))
        if gone:
            self._kill(np.asarray(gone, dtype=np.int64))
        # prims new under root (or root itself)
        prim = stage.GetPrimAtPath(root)
        if prim.IsValid() and prim.IsActive():
            self._add_new_prims(prim)
        return dirty

    def _add_new_prims(self, prim: Any) -> int:
        """Add the xformables at or under ``prim`` that the model does not hold, in traversal order.

        A path that held a removed prim gets a new prim id: the old prim's attributes (tags) went with it.
        """
        from pxr import Usd, UsdGeom

        paths: list[str] = []
        parents: list[int] = []
        locals_: list[Any] = []
        types: list[str] = []
        batch: dict[str, int] = {}
        for p in Usd.PrimRange(prim):
            if not p.IsA(UsdGeom.Xformable):
                continue
            path = str(p.GetPath())
            pid = self._pid_of.get(path)
            if pid is not None and self._alive[pid]:
                continue
            xf = UsdGeom.Xformable(p)
            parent = -1
            if not xf.GetResetXformStack():
                ancestor = path.rsplit("/", 1)[0]
                while ancestor:
                    if ancestor in batch:
                        parent = batch[ancestor]
                        break
                    known = self._pid_of.get(ancestor)
                    if known is not None and self._alive[known]:
                        parent = -2 - known
                        break
                    ancestor = ancestor.rsplit("/", 1)[0]
            batch[path] = len(paths)
            paths.append(path)
            parents.append(parent)
            locals_.append(xf.GetLocalTransformation())
            types.append(str(p.GetTypeName()))
        if not paths:
            return 0
        for path in paths:
            self._pid_of.pop(path, None)  # a dead pid at this path
        encoded = np.asarray(parents, dtype=np.int64)
        ext = np.where(encoded <= -2, -2 - encoded, -1)
        self._add_prims(paths, np.maximum(encoded, -1), _stack(locals_), types, ext)
        return len(paths)

    def detach(self) -> None:
        """Stop following USD notices."""
        if self._listener is not None:
            self._listener.Revoke()
            self._listener = None

    def lost_reason(self, path: str) -> str | None:
        """Why a prim that was in the model left it (``"was removed from the stage"``, ``"became an instance proxy
        ..."``), or None when the model does not know. Used in error messages."""
        return self._lost.get(str(path))

    def _remember_lost(self, path: str, reason: str) -> None:
        if len(self._lost) >= 4096:
            self._lost.pop(next(iter(self._lost)))
        self._lost[path] = reason


_NON_STRUCTURAL_FIELDS = frozenset(
    {"kind", "apiSchemas", "documentation", "comment", "customData", "assetInfo", "hidden", "displayName",
     "displayGroup", "propertyOrder", "primOrder", "clipSets", "clips"}
)  # fmt: skip
"""Prim metadata whose change neither moves a prim nor changes its transform: a resync made only of these is not
structural (an empty field list — a prim added, removed or re-created — is)."""


def _lost_reason(prim: Any) -> str | None:
    """Why a pxr prim has no place in Fabric, or None when it has one."""
    from pxr import UsdGeom

    if not prim.IsValid():
        return "was removed from the stage"
    if prim.IsInstanceProxy():
        return "became an instance proxy (an ancestor was made instanceable): instance proxies are not in Fabric"
    if not prim.IsActive():
        return "was deactivated"
    if not prim.IsA(UsdGeom.Xformable):
        return f"became a {prim.GetTypeName() or 'typeless'} prim (not Xformable)"
    return None


def _is_xform_property(name: str) -> bool:
    return name.startswith("xformOp:") or name == "xformOpOrder"


def _stack(mats: list[Any]) -> np.ndarray:
    if not mats:
        return np.empty((0, 4, 4), dtype=np.float64)
    return np.array([np.array(m, dtype=np.float64) for m in mats], dtype=np.float64).reshape(-1, 4, 4)


def _outermost(paths: set[str]) -> list[str]:
    """Drop paths that lie under another path of the set."""
    out: list[str] = []
    for p in sorted(paths):
        if not any(p == q or p.startswith(q.rstrip("/") + "/") for q in out):
            out.append(p)
    return out

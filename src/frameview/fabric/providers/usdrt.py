# SPDX-License-Identifier: Apache-2.0
"""Real Fabric inside Kit / Isaac Sim: a thin :class:`~frameview.fabric.stage.FabricStage` over usdrt.

usdrt ships with Omniverse Kit (not on PyPI), so this module imports it lazily and is only exercised inside Isaac
Sim's Python (run the contract suite there with ``FRAMEVIEW_TEST_PROVIDER=usdrt``). It was written from the usdrt
Scenegraph documentation and Isaac Lab's Fabric frame view, not run here.

Mapping of the protocol:

- stage: ``usdrt.Usd.Stage.Attach(stage_id)`` (a pxr stage is first put in ``UsdUtils.StageCache``); one provider and
  one lock per (stage id, device).
- selections: ``stage.SelectPrims(require_attrs=[(type, name, access), ...], device=..., want_paths=...)``;
  ``PrepareForReuse()`` reports bucket changes, ``GetCount()`` the size, and the selection object itself carries
  ``__fabric_arrays_interface__``. Fabric pointers are writable in place (usdrt tracks ReadWrite selections), so no
  staging is needed.
- tags: ``prim.CreateAttribute(name, Sdf.ValueTypeNames.UInt, True).Set(v)`` / ``prim.RemoveProperty(name)``, one
  call per prim (usdrt's Python API has no batched attribute authoring).
- world matrices of descendants after a write: by default frameview recomputes them itself (``world = local @
  parent world``, depth first below each written prim), because ``IFabricHierarchy.update_world_xforms()`` was seen
  (Isaac Lab) to re-read USD's authored xformOps and overwrite Fabric-only edits. Set
  ``FRAMEVIEW_USDRT_WORLD_UPDATE=hierarchy`` (or ``attach(..., world_update="hierarchy")``) to call
  ``update_world_xforms()`` instead.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np
import warp as wp

from ..._core.host import to_numpy
from ...visibility import (
    INVISIBLE,
    NO_OPINION,
    TOKENS,
    VISIBILITY_ATTR,
    VISIBLE,
    WORLD_VISIBILITY_ATTR,
    compute_visibility,
    plan_visibility,
    subtree_visibility,
)
from ..stage import LOCAL_MATRIX, WORLD_MATRIX

__all__ = ["UsdrtFabricStage", "UsdrtSelection", "attach"]

logger = logging.getLogger(__name__)

RESET_XFORM_STACK = "omni:fabric:resetXformStack"
WORLD_UPDATE_ENV = "FRAMEVIEW_USDRT_WORLD_UPDATE"
_WORLD_UPDATES = ("descendants", "hierarchy")


def _usdrt() -> Any:
    import usdrt  # Kit-only; never imported at frameview import time

    return usdrt


class UsdrtSelection:
    """A usdrt ``SelectPrims`` selection. Implements :class:`frameview.fabric.stage.FabricSelection`."""

    def __init__(self, provider: UsdrtFabricStage, require: Sequence[str], write: bool) -> None:
        usdrt = _usdrt()
        access = usdrt.Usd.Access.ReadWrite if write else usdrt.Usd.Access.Read
        self.require = tuple(str(r) for r in require)
        self._provider = provider
        self._sel = provider.rt_stage.SelectPrims(
            require_attrs=[(provider.value_type(name), name, access) for name in self.require],
            device=provider.device,
            want_paths=write,
        )
        self._first = True

    @property
    def count(self) -> int:
        return int(self._sel.GetCount())

    def prepare_for_reuse(self) -> bool:
        changed = bool(self._sel.PrepareForReuse())
        if self._first:
            self._first = False
            return True
        return changed

    @property
    def __fabric_arrays_interface__(self) -> dict[str, Any]:
        return self._sel.__fabric_arrays_interface__

    def release(self) -> None:
        """usdrt pins nothing between accesses."""

    def paths(self) -> list[str]:
        """Prim paths in slot order (write selections only: they are created with ``want_paths=True``)."""
        return [str(p) for p in self._sel.GetPaths()]


class UsdrtFabricStage:
    """Fabric through usdrt. Implements :class:`frameview.fabric.stage.FabricStage`; get it with :func:`attach`."""

    provider = "usdrt"

    def __init__(self, rt_stage: Any, device: str, lock: threading.RLock, world_update: str, owner: Any) -> None:
        if world_update not in _WORLD_UPDATES:
            raise ValueError(f"world_update: expected one of {list(_WORLD_UPDATES)}, got {world_update!r}")
        self.rt_stage = rt_stage
        self.device = str(wp.get_device(device))
        self.lock = lock
        self.world_update = world_update
        self._owner = owner  # weakref to the pxr stage, or None for a usdrt stage handed over directly
        self._hierarchy: Any = None

    # ---------------------------------------------------------------- helpers

    def value_type(self, name: str) -> Any:
        names = _usdrt().Sdf.ValueTypeNames
        return names.Matrix4d if name in (WORLD_MATRIX, LOCAL_MATRIX) else names.UInt

    def _prim(self, path: str) -> Any:
        prim = self.rt_stage.GetPrimAtPath(str(path))
        return prim if prim and prim.IsValid() else None

    @staticmethod
    def _carries_matrices(prim: Any) -> bool:
        return bool(prim.HasAttribute(WORLD_MATRIX) and prim.HasAttribute(LOCAL_MATRIX))

    def _matrix(self, prim: Any, name: str) -> np.ndarray:
        return np.array(prim.GetAttribute(name).Get(), dtype=np.float64).reshape(4, 4)

    def _set_matrix(self, prim: Any, name: str, m: np.ndarray) -> None:
        gf = _usdrt().Gf
        prim.GetAttribute(name).Set(gf.Matrix4d(*np.asarray(m, dtype=np.float64).ravel().tolist()))

    def _resets(self, prim: Any) -> bool:
        return bool(prim.HasAttribute(RESET_XFORM_STACK) and prim.GetAttribute(RESET_XFORM_STACK).Get())

    def _fabric_hierarchy(self) -> Any:
        if self._hierarchy is None:
            usdrt = _usdrt()
            self._hierarchy = usdrt.hierarchy.IFabricHierarchy().get_fabric_hierarchy(
                self.rt_stage.GetFabricId(), self.rt_stage.GetStageIdAsUInt()
            )
            self._hierarchy.track_local_xform_changes(True)
            self._hierarchy.track_world_xform_changes(True)
        return self._hierarchy

    # ---------------------------------------------------------------- FabricStage protocol

    def is_alive(self) -> bool:
        if self._owner is not None and not self._owner():  # gone, or an expired (falsy) pxr stage
            return False
        try:
            return bool(self.rt_stage.GetPseudoRoot().IsValid())
        except Exception:  # a released stage raises on any call
            return False

    def _ensure_matrices(self, prim: Any) -> bool:
        """Whether ``prim`` carries Fabric world/local matrices. An xformable prim without them (no Fabric Scene
        Delegate) gets them, filled with its USD local and world transforms from the pxr stage (pxr
        ``UsdGeom.XformCache``). ``SetLocalXformFromUsd`` / ``SetWorldXformFromUsd`` are not used: they fill the
        OmniHydra attributes (``_localMatrix``, ``_worldPosition``...), not ``omni:fabric:*Matrix``, which would keep
        their creation value (a wrong pose, silently). Without a pxr stage (a usdrt stage handed over directly) such
        a prim counts as missing."""
        if self._carries_matrices(prim):
            return True
        usdrt = _usdrt()
        pxr_stage = self._owner() if self._owner is not None else None
        if not pxr_stage:
            return False
        try:
            if not prim.IsA(usdrt.UsdGeom.Xformable):
                return False
            from pxr import Usd, UsdGeom

            source = pxr_stage.GetPrimAtPath(str(prim.GetPath()))
            if not source.IsValid():
                return False
            cache = UsdGeom.XformCache(Usd.TimeCode.Default())
            local = np.array(cache.GetLocalTransformation(source)[0], dtype=np.float64)
            world = np.array(cache.GetLocalToWorldTransform(source), dtype=np.float64)
            xformable = usdrt.Rt.Xformable(prim)
            xformable.CreateFabricHierarchyWorldMatrixAttr()
            xformable.CreateFabricHierarchyLocalMatrixAttr()
            self._set_matrix(prim, LOCAL_MATRIX, local)
            self._set_matrix(prim, WORLD_MATRIX, world)
        except (AttributeError, RuntimeError, TypeError):
            logger.debug("usdrt: could not author Fabric matrices on %s", prim.GetPath(), exc_info=True)
            return False
        return self._carries_matrices(prim)

    def missing_prims(self, paths: Sequence[str]) -> list[str]:
        """Paths that are not prims carrying Fabric matrices (xformable USD prims get them from USD first)."""
        with self.lock:
            return [str(p) for p in paths if (prim := self._prim(p)) is None or not self._ensure_matrices(prim)]

    def xform_parents(self, paths: Sequence[str]) -> list[str | None]:
        with self.lock:
            out: list[str | None] = []
            for path in paths:
                prim = self._prim(path)
                if prim is None:
                    raise KeyError(f"prim {path!r} is not on the usdrt stage")
                parent = None
                if not self._resets(prim):
                    ancestor = str(path).rsplit("/", 1)[0]
                    while ancestor:
                        candidate = self._prim(ancestor)
                        if candidate is not None and self._ensure_matrices(candidate):
                            parent = ancestor
                            break
                        ancestor = ancestor.rsplit("/", 1)[0]
                out.append(parent)
            return out

    def set_uint_attribute(self, paths: Sequence[str], name: str, values: np.ndarray) -> None:
        with self.lock:
            values = np.ascontiguousarray(values, dtype=np.uint32)
            if values.shape != (len(paths),):
                raise ValueError(f"values: expected shape ({len(paths)},), got {values.shape}")
            prims = [self._prim(p) for p in paths]
            missing = [str(p) for p, prim in zip(paths, prims, strict=True) if prim is None]
            if missing:
                raise KeyError(f"prims not on the usdrt stage: {missing[:3]} ({len(missing)} of {len(paths)})")
            uint = _usdrt().Sdf.ValueTypeNames.UInt
            for prim, value in zip(prims, values.tolist(), strict=True):
                prim.CreateAttribute(name, uint, True).Set(int(value))

    def remove_attribute(self, paths: Sequence[str], name: str) -> None:
        with self.lock:
            for path in paths:
                prim = self._prim(path)
                if prim is not None and prim.HasAttribute(name):
                    prim.RemoveProperty(name)

    def attribute_names(self, path: str) -> list[str]:
        with self.lock:
            prim = self._prim(path)
            if prim is None:
                raise KeyError(f"prim {path!r} is not on the usdrt stage")
            return sorted(str(a.GetName()) for a in prim.GetAttributes())

    def select(self, require: Sequence[str], *, write: bool = False) -> UsdrtSelection:
        return UsdrtSelection(self, require, write)

    def propagate_world(self, selection: Any, slots: wp.array) -> None:
        """Bring the world matrices of the descendants of the prims written at ``slots`` up to date."""
        with self.lock:
            if self.world_update == "hierarchy":
                self._fabric_hierarchy().update_world_xforms()
                return
            if not isinstance(selection, UsdrtSelection):
                raise TypeError(f"selection: expected a UsdrtSelection, got {type(selection).__name__}")
            written = np.unique(to_numpy(slots)) if slots.shape[0] else np.empty(0, np.int64)
            if not written.size:
                return
            paths = selection.paths()
            for slot in written.tolist():
                prim = self._prim(paths[slot])
                if prim is not None:
                    self._update_below(prim, self._matrix(prim, WORLD_MATRIX))

    def _update_below(self, prim: Any, world: np.ndarray) -> None:
        """Depth first: ``world = local @ parent world`` for every descendant carrying Fabric matrices."""
        stack = [(child, world) for child in prim.GetChildren()]
        while stack:
            child, parent_world = stack.pop()
            if self._carries_matrices(child):
                child_world = (
                    self._matrix(child, LOCAL_MATRIX)
                    if self._resets(child)
                    else self._matrix(child, LOCAL_MATRIX) @ parent_world
                )
                self._set_matrix(child, WORLD_MATRIX, child_world)
                stack.extend((grandchild, child_world) for grandchild in child.GetChildren())
            else:
                stack.extend((grandchild, parent_world) for grandchild in child.GetChildren())

    # ---------------------------------------------------------------- visibility (host path)

    def visibility(self, paths: Sequence[str]) -> np.ndarray:
        """Computed visibility from the Fabric ``visibility`` tokens of the prims and their ancestors."""
        with self.lock:
            return compute_visibility(_UsdrtVisibilityTree(self), [str(p) for p in paths])

    def set_visibility(self, paths: Sequence[str], visible: np.ndarray) -> None:
        """Set the planned ``visibility`` tokens in Fabric (created where absent), then ``_worldVisibility`` (what
        Kit's renderer reads) on every prim under them that carries it; one call per prim (usdrt has no batched
        authoring). USD is not touched."""
        with self.lock:
            changes = plan_visibility(_UsdrtVisibilityTree(self), [str(p) for p in paths], visible)
            if not changes:
                return
            world = subtree_visibility(_UsdrtVisibilityTree(self, changes), list(changes))
            token = _usdrt().Sdf.ValueTypeNames.Token
            for path, opinion in changes.items():
                prim = self._prim(path)
                if prim is None:
                    continue
                attr = (prim.GetAttribute(VISIBILITY_ATTR) if prim.HasAttribute(VISIBILITY_ATTR)
                        else prim.CreateAttribute(VISIBILITY_ATTR, token, False))  # fmt: skip
                attr.Set(TOKENS[opinion])
            for path, vis in world.items():
                prim = self._prim(path)
                if prim is not None and prim.HasAttribute(WORLD_VISIBILITY_ATTR):
                    prim.GetAttribute(WORLD_VISIBILITY_ATTR).Set(bool(vis))

    # ---------------------------------------------------------------- PrimTree

    def has_prim(self, path: str) -> bool:
        with self.lock:
            return self._prim(path) is not None

    def child_names(self, path: str) -> list[str]:
        with self.lock:
            prim = self.rt_stage.GetPseudoRoot() if path == "/" else self._prim(path)
            return [] if prim is None else [str(c.GetName()) for c in prim.GetChildren()]


class _UsdrtVisibilityTree:
    """:class:`frameview.visibility.VisibilityTree` over usdrt: Imageable prims take part; a prim without a Fabric
    ``visibility`` attribute has no authored opinion (``inherited``); ``overrides`` replace opinions."""

    def __init__(self, provider: UsdrtFabricStage, overrides: dict[str, int] | None = None) -> None:
        self._provider = provider
        self._overrides = overrides or {}
        self._imageable = _usdrt().UsdGeom.Imageable

    def opinions(self, paths: Sequence[str]) -> np.ndarray:
        out = np.full(len(paths), NO_OPINION, dtype=np.int8)
        for i, path in enumerate(paths):
            own = self._overrides.get(path)
            if own is not None:
                out[i] = own
                continue
            prim = self._provider._prim(path)
            if prim is None or not prim.IsA(self._imageable):
                continue
            token = prim.GetAttribute(VISIBILITY_ATTR).Get() if prim.HasAttribute(VISIBILITY_ATTR) else None
            out[i] = INVISIBLE if token is not None and str(token) == TOKENS[INVISIBLE] else VISIBLE
        return out

    def children(self, paths: Sequence[str]) -> list[list[str]]:
        out = []
        for path in paths:
            prim = self._provider._prim(path)
            out.append([str(c.GetPath()) for c in prim.GetChildren()] if prim is not None else [])
        return out


_LOCKS: dict[int, threading.RLock] = {}
_PROVIDERS: weakref.WeakValueDictionary[tuple[int, str], UsdrtFabricStage] = weakref.WeakValueDictionary()
_REGISTRY_LOCK = threading.Lock()


def _stage_id(stage: Any) -> tuple[int, Any]:
    """(stage id, weakref to the pxr stage or None) for a pxr or usdrt stage."""
    if type(stage).__module__.startswith("pxr"):
        from pxr import UsdUtils

        cache = UsdUtils.StageCache.Get()
        sid = cache.GetId(stage)
        if not sid.IsValid():
            sid = cache.Insert(stage)
        return int(sid.ToLongInt()), weakref.ref(stage)
    return int(stage.GetStageIdAsUInt()), None


def attach(stage: Any, device: str = "cpu", world_update: str | None = None) -> UsdrtFabricStage:
    """The usdrt provider for a pxr stage (through ``UsdUtils.StageCache``) or a ``usdrt.Usd.Stage``.

    One provider per (stage id, device); every device of one stage shares one lock.

    Args:
        stage: A pxr ``Usd.Stage`` (Kit's) or a ``usdrt.Usd.Stage``.
        device: Warp device of the selections (``"cpu"`` or ``"cuda:N"``).
        world_update: ``"descendants"`` (default) or ``"hierarchy"``; default from ``FRAMEVIEW_USDRT_WORLD_UPDATE``.
    """
    usdrt = _usdrt()
    mode = world_update or os.environ.get(WORLD_UPDATE_ENV, "descendants")
    sid, owner = _stage_id(stage)
    device = str(wp.get_device(device))
    with _REGISTRY_LOCK:
        provider = _PROVIDERS.get((sid, device))
        if provider is not None and provider.is_alive() and provider.world_update == mode:
            return provider
        rt_stage = stage if owner is None else usdrt.Usd.Stage.Attach(sid)
        lock = _LOCKS.setdefault(sid, threading.RLock())
        provider = UsdrtFabricStage(rt_stage, device, lock, mode, owner)
        _PROVIDERS[(sid, device)] = provider
        logger.debug("usdrt provider attached to stage id %d on %s (world update: %s)", sid, device, mode)
        return provider

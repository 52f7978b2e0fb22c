# SPDX-License-Identifier: Apache-2.0
"""A stand-in for Kit's ``usdrt``, so that :mod:`frameview.fabric.providers.usdrt` runs in CI.

usdrt ships only with Omniverse Kit / Isaac Sim. This module builds a ``usdrt`` module object that implements exactly
the calls ``fabric/providers/usdrt.py`` makes, with the semantics the usdrt documentation gives them, over a small
bucketed Fabric store of its own (Warp arrays on one device), populated from the pxr stage it attaches to:

- ``usdrt.Usd.Stage.Attach(stage_id)`` finds the pxr stage in ``pxr.UsdUtils.StageCache``; every ``Attach`` of one
  id shares one store (one Fabric per stage). ``GetPrimAtPath`` / ``GetPseudoRoot`` / ``GetFabricId`` /
  ``GetStageIdAsStageId`` / ``GetStageIdAsUInt`` / ``SelectPrims``.
- Prims exist where the pxr stage has a prim that ``Usd.PrimDefaultPredicate`` accepts (active, defined, loaded,
  non-abstract). With ``fabric_scene_delegate=True`` (the default, Kit 105.2+ with the Fabric Scene Delegate) every
  ``UsdGeom.Imageable`` prim carries ``omni:fabric:localMatrix`` and ``omni:fabric:worldMatrix`` (matrix4d,
  row-vector, from USD) from the moment the stage is attached, ``omni:fabric:resetXformStack`` (bool) where USD
  resets the stack, and ``visibility`` (token, USD's opinion) and ``_worldVisibility`` (bool, USD's computed
  visibility), as ovstage's population gives them. With ``False`` prims carry no Fabric attributes until someone
  creates them. Tokens are stored as ids (``uint64``); ``Get`` returns the token's text, ``Set`` takes it.
- Attributes live in buckets keyed by the prim's attribute set: creating or removing one moves the prim to another
  bucket, which reallocates both buckets' columns (other prims' slots and pointers change).
- ``SelectPrims(require_attrs=[(type, name, access), ...], device=..., want_paths=...)`` spans every non-empty
  bucket whose attributes include the required (name, type) pairs; ``PrepareForReuse()`` returns True when that
  layout changed since the last call (False right after ``SelectPrims``); ``GetCount()``; ``GetPaths()`` (only with
  ``want_paths=True``); ``__fabric_arrays_interface__`` (Warp's Fabric array interface, version 1) over the
  required columns, writable in place. With ``shuffle_seed`` the buckets of each selection come in a random order.
- ``usdrt.Rt.Xformable``: ``CreateFabricHierarchyWorldMatrixAttr`` / ``CreateFabricHierarchyLocalMatrixAttr`` create
  the attribute if absent, zero-filled (as new Fabric columns are; Isaac Lab sets a value right after creating);
  ``SetLocalXformFromUsd`` / ``SetWorldXformFromUsd`` author the OmniHydra attributes the usdrt documentation names
  for them (``_localMatrix``; ``_worldPosition``, ``_worldOrientation``, ``_worldScale``), not the Fabric Hierarchy
  matrices.
- ``usdrt.hierarchy.IFabricHierarchy().get_fabric_hierarchy(fabric_id, stage_id)``: ``track_local_xform_changes``,
  ``track_world_xform_changes`` and ``update_world_xforms()`` (every prim carrying both matrices: world = local @
  parent world, depth first, the parent being the nearest ancestor carrying matrices; a reset stack uses local).

Not modelled (real Kit only): USD edits after attach (the store does not follow them), instance proxies, time
samples, change tracking, GPU mirroring (a selection on another device than the store's raises), and anything
``update_world_xforms`` does beyond composing matrices (Isaac Lab saw it re-read USD xformOps).

Use :func:`installed` (a context manager) or :func:`make_module`; :attr:`StandinRuntime.calls` counts the calls that
tests assert on.
"""

from __future__ import annotations

import collections
import contextlib
import enum
import importlib.machinery
import itertools
import random
import sys
import types
import weakref
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import warp as wp
from pxr import Usd, UsdGeom, UsdUtils

__all__ = ["StandinRuntime", "installed", "make_module"]

WORLD_MATRIX = "omni:fabric:worldMatrix"
LOCAL_MATRIX = "omni:fabric:localMatrix"
RESET_XFORM_STACK = "omni:fabric:resetXformStack"
VISIBILITY = "visibility"
WORLD_VISIBILITY = "_worldVisibility"

# value type name -> (Warp dtype, Warp Fabric-interface type tuple: (usable, base type, elements, array depth, role))
_TYPES: dict[str, tuple[Any, tuple]] = {
    "matrix4d": (wp.mat44d, (True, "f8", 16, 0, "matrix")),
    "uint": (wp.uint32, (True, "u4", 1, 0, "")),
    "int": (wp.int32, (True, "i4", 1, 0, "")),
    "bool": (wp.bool, (True, "b", 1, 0, "")),
    "double3": (wp.vec3d, (True, "f8", 3, 0, "")),
    "float3": (wp.vec3f, (True, "f4", 3, 0, "")),
    "quatf": (wp.quatf, (True, "f4", 4, 0, "quat")),
    "token": (wp.uint64, (True, "u8", 1, 0, "")),  # a token id (Fabric's TokenC): see _token_id
}

_TOKEN_NAMES: list[str] = []
_TOKEN_IDS: dict[str, int] = {}


def _token_id(name: str) -> int:
    """The id of a token (interned on first use, like Fabric's token table)."""
    tok = _TOKEN_IDS.get(name)
    if tok is None:
        tok = _TOKEN_IDS[name] = len(_TOKEN_NAMES)
        _TOKEN_NAMES.append(name)
    return tok


# ---------------------------------------------------------------- value types (usdrt.Sdf, usdrt.Gf)


class ValueTypeName:
    """``usdrt.Sdf.ValueTypeName``: compared by name."""

    __module__ = "usdrt.Sdf"

    def __init__(self, name: str) -> None:
        self.name = name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ValueTypeName) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return f"Sdf.ValueTypeNames.{self.name}"


class Path(str):
    """``usdrt.Sdf.Path``: a prim path; ``str(path)`` is its text."""

    __module__ = "usdrt.Sdf"

    @property
    def pathString(self) -> str:  # noqa: N802 - usdrt's name
        return str(self)


class Matrix4d:
    """``usdrt.Gf.Matrix4d``: 16 numbers in row-major order (row-vector convention, translation in row 3)."""

    __module__ = "usdrt.Gf"

    def __init__(self, *values: Any) -> None:
        if not values:
            self._m = np.eye(4)
        elif len(values) == 16:
            self._m = np.array(values, dtype=np.float64).reshape(4, 4)
        elif len(values) == 1:
            self._m = np.array(values[0], dtype=np.float64).reshape(4, 4)
        else:
            raise TypeError(f"Matrix4d: expected no argument, 16 numbers or one 4x4 value, got {len(values)} arguments")

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self._m.astype(dtype or np.float64, copy=True)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Matrix4d) and bool(np.array_equal(self._m, other._m))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Gf.Matrix4d({', '.join(map(repr, self._m.ravel().tolist()))})"


class Access(enum.IntEnum):
    """``usdrt.Usd.Access``."""

    Read = 1
    ReadWrite = 2
    Overwrite = 3


Access.__module__ = "usdrt.Usd"


class FabricId:
    """``omni.fabric.FabricId`` of one store."""

    __module__ = "usdrt.Usd"

    def __init__(self, value: int) -> None:
        self.id = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FabricId) and other.id == self.id

    def __hash__(self) -> int:
        return hash(self.id)


class UsdStageId:
    """``omni.fabric.UsdStageId``: the stage id as ``GetStageIdAsStageId`` returns it."""

    __module__ = "usdrt.Usd"

    def __init__(self, value: int) -> None:
        self.id = value


# ---------------------------------------------------------------- the Fabric store


class _Bucket:
    """Prims with one attribute set; one Warp column per attribute, exactly as long as the bucket."""

    _ids = itertools.count()

    def __init__(self, key: frozenset[tuple[str, str]], device: str) -> None:
        self.index = next(self._ids)
        self.key = key
        self.types = dict(key)
        self.device = device
        self.paths: list[str] = []
        self.columns: dict[str, wp.array] = {name: self._empty(t, 0) for name, t in key}
        self.generation = 0

    def _empty(self, type_name: str, n: int) -> wp.array:
        return wp.zeros(n, dtype=_TYPES[type_name][0], device=self.device)

    def row_values(self, row: int) -> dict[str, np.ndarray]:
        return {name: col.numpy()[row].copy() for name, col in self.columns.items()}

    def remove(self, row: int) -> None:
        self.paths.pop(row)
        for name, col in self.columns.items():
            host = np.delete(col.numpy(), row, axis=0)
            self.columns[name] = wp.array(host, dtype=col.dtype, device=self.device)
        self.generation += 1

    def append(self, path: str, values: dict[str, np.ndarray]) -> int:
        self.paths.append(path)
        for name, col in self.columns.items():
            host = col.numpy()
            new = np.zeros((1, *host.shape[1:]), dtype=host.dtype) if name not in values else values[name][None]
            self.columns[name] = wp.array(np.concatenate([host, new]), dtype=col.dtype, device=self.device)
        self.generation += 1
        return len(self.paths) - 1


class FabricStore:
    """One Fabric: prims of one pxr stage, their attributes in buckets (see the module docstring)."""

    _ids = itertools.count(1)

    def __init__(self, runtime: StandinRuntime, stage_id: int, stage: Usd.Stage) -> None:
        self.runtime = runtime
        self.device = runtime.device
        self.stage_id = stage_id
        self.fabric_id = FabricId(next(self._ids))
        self._stage = weakref.ref(stage)
        self.released = False
        self.layout = 0
        self._buckets: dict[frozenset[tuple[str, str]], _Bucket] = {}
        self._where: dict[str, tuple[_Bucket, int]] = {}
        if runtime.fabric_scene_delegate:
            cache = UsdGeom.XformCache(Usd.TimeCode.Default())
            for prim in stage.Traverse():
                if prim.IsA(UsdGeom.Imageable):
                    self._populate_xform(prim, cache)

    # -- prims

    def pxr_stage(self) -> Usd.Stage | None:
        stage = None if self.released else self._stage()
        return stage if stage else None  # a pxr weakref can resolve to an expired ("invalid null") stage

    def pxr_prim(self, path: str) -> Any:
        """The pxr prim at ``path`` when it is in Fabric's view of the stage, else None."""
        stage = self.pxr_stage()
        if stage is None or not path.startswith("/"):
            return None
        prim = stage.GetPrimAtPath(path) if path != "/" else stage.GetPseudoRoot()
        if not prim or (path != "/" and not Usd.PrimDefaultPredicate(prim)):
            return None
        return prim

    def prefetch(self, path: str) -> None:
        """Bring a prim into Fabric (GetPrimAtPath does this), with its Fabric Hierarchy matrices under FSD."""
        if path in self._where or path == "/":
            return
        prim = self.pxr_prim(path)
        if prim is None:
            raise RuntimeError(f"no prim at {path!r} in the stage's Fabric")
        if self.runtime.fabric_scene_delegate and prim.IsA(UsdGeom.Imageable):
            self._populate_xform(prim, UsdGeom.XformCache(Usd.TimeCode.Default()))
        else:
            self._place(path, {}, {})

    def _populate_xform(self, prim: Any, cache: Any) -> None:
        path = prim.GetPath().pathString
        xformable = UsdGeom.Xformable(prim)
        local = np.array(xformable.GetLocalTransformation()) if prim.IsA(UsdGeom.Xformable) else np.eye(4)
        values = {LOCAL_MATRIX: local, WORLD_MATRIX: np.array(cache.GetLocalToWorldTransform(prim))}
        types_ = {LOCAL_MATRIX: "matrix4d", WORLD_MATRIX: "matrix4d"}
        if prim.IsA(UsdGeom.Xformable) and xformable.GetResetXformStack():
            values[RESET_XFORM_STACK] = np.array(True)
            types_[RESET_XFORM_STACK] = "bool"
        imageable = UsdGeom.Imageable(prim)
        values[VISIBILITY] = np.array(_token_id(str(imageable.GetVisibilityAttr().Get())), dtype=np.uint64)
        values[WORLD_VISIBILITY] = np.array(imageable.ComputeVisibility() != UsdGeom.Tokens.invisible)
        types_[VISIBILITY], types_[WORLD_VISIBILITY] = "token", "bool"
        self._place(path, types_, values)

    def _place(self, path: str, types_: dict[str, str], values: dict[str, np.ndarray]) -> None:
        key = frozenset(types_.items())
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = _Bucket(key, self.device)
        self._where[path] = (bucket, bucket.append(path, values))
        self.layout += 1

    def _move(self, path: str, types_: dict[str, str], values: dict[str, np.ndarray]) -> None:
        bucket, row = self._where.pop(path)
        bucket.remove(row)
        for later in bucket.paths[row:]:
            self._where[later] = (bucket, self._where[later][1] - 1)
        self._place(path, types_, values)

    # -- attributes

    def attribute_types(self, path: str) -> dict[str, str]:
        entry = self._where.get(path)
        return dict(entry[0].types) if entry else {}

    def create_attribute(self, path: str, name: str, type_name: str) -> None:
        self.prefetch(path)
        types_ = self.attribute_types(path)
        if name in types_:
            if types_[name] != type_name:
                raise TypeError(f"attribute {name!r} of {path!r} is a {types_[name]}, not a {type_name}")
            return
        bucket, row = self._where[path]
        values = bucket.row_values(row)
        self._move(path, {**types_, name: type_name}, values)

    def remove_attribute(self, path: str, name: str) -> bool:
        types_ = self.attribute_types(path)
        if name not in types_:
            return False
        bucket, row = self._where[path]
        values = bucket.row_values(row)
        del types_[name], values[name]
        self._move(path, types_, values)
        return True

    def get(self, path: str, name: str) -> Any:
        bucket, row = self._where[path]
        value = bucket.columns[name].numpy()[row]
        type_name = bucket.types[name]
        if type_name == "matrix4d":
            return Matrix4d(value)
        if type_name in ("uint", "int"):
            return int(value)
        if type_name == "bool":
            return bool(value)
        if type_name == "token":
            return _TOKEN_NAMES[int(value)]
        return tuple(float(v) for v in np.ravel(value))

    def set(self, path: str, name: str, value: Any) -> None:
        bucket, row = self._where[path]
        col = bucket.columns[name]
        if bucket.types[name] == "token":
            value = _token_id(str(value))
        host = np.array(value, dtype=col.numpy().dtype).reshape((1, *col.numpy().shape[1:]))
        wp.copy(col, wp.array(host, dtype=col.dtype, device=self.device), dest_offset=row, count=1)

    # -- selections and the hierarchy

    def buckets_with(self, required: set[tuple[str, str]]) -> list[_Bucket]:
        return [b for b in self._buckets.values() if b.paths and required <= b.key]

    def update_world_xforms(self) -> None:
        for path in sorted(self._where, key=lambda p: p.count("/")):
            types_ = self.attribute_types(path)
            if types_.get(LOCAL_MATRIX) != "matrix4d" or types_.get(WORLD_MATRIX) != "matrix4d":
                continue
            local = np.array(self.get(path, LOCAL_MATRIX))
            world = local
            if not (RESET_XFORM_STACK in types_ and self.get(path, RESET_XFORM_STACK)):
                ancestor = path.rsplit("/", 1)[0]
                while ancestor:
                    if {LOCAL_MATRIX, WORLD_MATRIX} <= set(self.attribute_types(ancestor)):
                        world = local @ np.array(self.get(ancestor, WORLD_MATRIX))
                        break
                    ancestor = ancestor.rsplit("/", 1)[0]
            self.set(path, WORLD_MATRIX, world)


# ---------------------------------------------------------------- usdrt.Usd: Stage, Prim, Attribute, selections


class Attribute:
    """``usdrt.Usd.Attribute`` of a Fabric prim."""

    __module__ = "usdrt.Usd"

    def __init__(self, store: FabricStore, path: str, name: str) -> None:
        self._store, self._path, self._name = store, path, name

    def IsValid(self) -> bool:  # noqa: N802 - usdrt's names below
        return self._name in self._store.attribute_types(self._path)

    __bool__ = IsValid

    def GetName(self) -> str:  # noqa: N802
        return self._name

    def Get(self) -> Any:  # noqa: N802
        self._store.runtime.count("Attribute.Get")
        return self._store.get(self._path, self._name) if self.IsValid() else None

    def Set(self, value: Any) -> bool:  # noqa: N802
        self._store.runtime.count("Attribute.Set")
        if not self.IsValid():
            raise RuntimeError(f"attribute {self._name!r} does not exist on {self._path!r}")
        self._store.set(self._path, self._name, value)
        return True


class Prim:
    """``usdrt.Usd.Prim``: valid while the pxr stage shows the prim; attributes are the prim's Fabric attributes."""

    __module__ = "usdrt.Usd"

    def __init__(self, store: FabricStore, path: str) -> None:
        self._store, self._path = store, path

    def IsValid(self) -> bool:  # noqa: N802 - usdrt's names below
        return self._store.pxr_prim(self._path) is not None

    __bool__ = IsValid

    def GetPath(self) -> Path:  # noqa: N802
        return Path(self._path)

    def GetName(self) -> str:  # noqa: N802
        return "" if self._path == "/" else self._path.rsplit("/", 1)[1]

    def GetChildren(self) -> list[Prim]:  # noqa: N802
        prim = self._store.pxr_prim(self._path)
        if prim is None:
            return []
        prefix = "" if self._path == "/" else self._path
        children = []
        for name in prim.GetChildrenNames():
            self._store.prefetch(f"{prefix}/{name}")
            children.append(Prim(self._store, f"{prefix}/{name}"))
        return children

    def IsA(self, schema: type) -> bool:  # noqa: N802
        prim = self._store.pxr_prim(self._path)
        return bool(prim is not None and prim.IsA(getattr(UsdGeom, schema.__name__)))

    def HasAttribute(self, name: str) -> bool:  # noqa: N802
        return name in self._store.attribute_types(self._path)

    def GetAttribute(self, name: str) -> Attribute:  # noqa: N802
        return Attribute(self._store, self._path, name)

    def GetAttributes(self) -> list[Attribute]:  # noqa: N802
        return [Attribute(self._store, self._path, n) for n in self._store.attribute_types(self._path)]

    def CreateAttribute(self, name: str, type_name: ValueTypeName, custom: bool = True) -> Attribute:  # noqa: N802
        self._store.runtime.count("Prim.CreateAttribute")
        if not self.IsValid():
            raise RuntimeError(f"CreateAttribute on an invalid prim {self._path!r}")
        self._store.create_attribute(self._path, str(name), type_name.name)
        return Attribute(self._store, self._path, str(name))

    def RemoveProperty(self, name: str) -> bool:  # noqa: N802
        self._store.runtime.count("Prim.RemoveProperty")
        return self._store.remove_attribute(self._path, str(name))


class PrimSelection:
    """``usdrt.Rt.PrimSelection`` (what ``Stage.SelectPrims`` returns)."""

    __module__ = "usdrt.Rt"

    def __init__(self, store: FabricStore, require_attrs: Sequence[tuple], device: str, want_paths: bool) -> None:
        self._store = store
        self._require = [(str(name), type_name.name, Access(access)) for type_name, name, access in require_attrs]
        self._want_paths = want_paths
        self._signature: tuple = ()
        self._buckets: list[_Bucket] = []
        self._iface: dict[str, Any] = {}
        self._refresh()

    def _refresh(self) -> bool:
        required = {(name, type_name) for name, type_name, _ in self._require}
        buckets = self._store.buckets_with(required)
        signature = tuple(sorted((b.index, b.generation) for b in buckets))
        if signature == self._signature:
            return False
        self._signature = signature
        rng = self._store.runtime.rng
        if rng is not None:
            rng.shuffle(buckets)
        self._buckets = buckets
        self._iface = {
            "version": 1,
            "device": self._store.device,
            "attribs": {
                name: {
                    "type": _TYPES[type_name][1],
                    "access": int(access),
                    "pointers": [b.columns[name].ptr for b in buckets],
                    "counts": [len(b.paths) for b in buckets],
                }
                for name, type_name, access in self._require
            },
        }
        return True

    def PrepareForReuse(self) -> bool:  # noqa: N802 - usdrt's names below
        self._store.runtime.count("PrimSelection.PrepareForReuse")
        return self._refresh()

    def GetCount(self) -> int:  # noqa: N802
        return sum(len(b.paths) for b in self._buckets)

    def GetPaths(self) -> list[Path]:  # noqa: N802
        if not self._want_paths:
            raise RuntimeError("GetPaths() needs a selection made with want_paths=True")
        return [Path(p) for b in self._buckets for p in b.paths]

    @property
    def __fabric_arrays_interface__(self) -> dict[str, Any]:
        return self._iface


class Stage:
    """``usdrt.Usd.Stage`` over one :class:`FabricStore`; subclassed per runtime (``_runtime``)."""

    __module__ = "usdrt.Usd"
    _runtime: StandinRuntime

    def __init__(self, store: FabricStore) -> None:
        self._store = store

    @classmethod
    def Attach(cls, stage_id: int, *args: Any) -> Stage:  # noqa: N802 - usdrt's names below
        cls._runtime.count("Stage.Attach")
        return cls(cls._runtime.store(int(stage_id)))

    def _live(self) -> FabricStore:
        if self._store.pxr_stage() is None:
            raise RuntimeError(f"usdrt stage {self._store.stage_id} was released")
        return self._store

    def GetPrimAtPath(self, path: str) -> Prim:  # noqa: N802
        store = self._store
        path = str(path)
        if store.pxr_prim(path) is not None:
            store.prefetch(path)
        return Prim(store, path)

    def GetPseudoRoot(self) -> Prim:  # noqa: N802
        return Prim(self._live(), "/")

    def GetFabricId(self) -> FabricId:  # noqa: N802
        return self._live().fabric_id

    def GetStageIdAsStageId(self) -> UsdStageId:  # noqa: N802
        return UsdStageId(self._live().stage_id)

    def GetStageIdAsUInt(self) -> int:  # noqa: N802 - not in the usdrt docs we could read; frameview calls it
        return self._live().stage_id

    def SelectPrims(  # noqa: N802
        self,
        require_attrs: Sequence[tuple],
        device: str = "cpu",
        want_paths: bool = False,
        require_applied_schemas: Sequence[str] = (),
        require_prim_type: str | None = None,
    ) -> PrimSelection:
        store = self._live()
        store.runtime.count("Stage.SelectPrims")
        if require_applied_schemas or require_prim_type:
            raise NotImplementedError("the usdrt stand-in selects by attributes only")
        if str(wp.get_device(device)) != store.device:
            raise NotImplementedError(
                f"the usdrt stand-in keeps Fabric on {store.device!r} only; SelectPrims asked for {device!r}"
            )
        return PrimSelection(store, require_attrs, store.device, want_paths)


# ---------------------------------------------------------------- usdrt.Rt.Xformable, usdrt.hierarchy


class Xformable:
    """``usdrt.Rt.Xformable``: Fabric transform attributes of one prim."""

    __module__ = "usdrt.Rt"

    def __init__(self, prim: Prim) -> None:
        self._prim = prim

    def _create(self, name: str, type_name: str) -> Attribute:
        prim = self._prim
        prim._store.create_attribute(prim._path, name, type_name)
        return Attribute(prim._store, prim._path, name)

    def CreateFabricHierarchyWorldMatrixAttr(self) -> Attribute:  # noqa: N802 - usdrt's names below
        return self._create(WORLD_MATRIX, "matrix4d")

    def CreateFabricHierarchyLocalMatrixAttr(self) -> Attribute:  # noqa: N802
        return self._create(LOCAL_MATRIX, "matrix4d")

    def SetLocalXformFromUsd(self) -> bool:  # noqa: N802
        """OmniHydra's ``_localMatrix`` from the USD local transform (what the usdrt docs list this helper for)."""
        prim = self._prim._store.pxr_prim(self._prim._path)
        local = np.array(UsdGeom.Xformable(prim).GetLocalTransformation())
        self._create("_localMatrix", "matrix4d").Set(Matrix4d(local))
        return True

    def SetWorldXformFromUsd(self) -> bool:  # noqa: N802
        """OmniHydra's ``_worldPosition`` / ``_worldOrientation`` / ``_worldScale`` from the USD world transform."""
        prim = self._prim._store.pxr_prim(self._prim._path)
        world = UsdGeom.XformCache(Usd.TimeCode.Default()).GetLocalToWorldTransform(prim)
        m = np.array(world)
        scale = np.linalg.norm(m[:3, :3], axis=1)
        rotation = world.RemoveScaleShear().ExtractRotationQuat()
        self._create("_worldPosition", "double3").Set(m[3, :3])
        self._create("_worldOrientation", "quatf").Set([*rotation.GetImaginary(), rotation.GetReal()])
        self._create("_worldScale", "float3").Set(scale)
        return True


class FabricHierarchy:
    """What ``IFabricHierarchy.get_fabric_hierarchy`` returns for one store."""

    __module__ = "usdrt.hierarchy"

    def __init__(self, store: FabricStore) -> None:
        self._store = store
        self.tracking = {"local": False, "world": False}

    def track_local_xform_changes(self, enabled: bool) -> None:
        self.tracking["local"] = bool(enabled)

    def track_world_xform_changes(self, enabled: bool) -> None:
        self.tracking["world"] = bool(enabled)

    def update_world_xforms(self) -> None:
        self._store.runtime.count("FabricHierarchy.update_world_xforms")
        self._store.update_world_xforms()


class IFabricHierarchy:
    """``usdrt.hierarchy.IFabricHierarchy``; subclassed per runtime (``_runtime``)."""

    __module__ = "usdrt.hierarchy"
    _runtime: StandinRuntime

    def get_fabric_hierarchy(self, fabric_id: FabricId, stage_id: UsdStageId | int) -> FabricHierarchy:
        if not isinstance(fabric_id, FabricId):
            raise TypeError(f"fabric_id: expected a FabricId (Stage.GetFabricId()), got {type(fabric_id).__name__}")
        sid = stage_id.id if isinstance(stage_id, UsdStageId) else stage_id
        if not isinstance(sid, int):
            raise TypeError(f"stage_id: expected a UsdStageId or an int, got {type(stage_id).__name__}")
        store = self._runtime.stores.get(sid)
        if store is None or store.fabric_id != fabric_id:
            raise ValueError(f"no Fabric {fabric_id.id} attached to stage id {sid}")
        return FabricHierarchy(store)


# ---------------------------------------------------------------- the module


class UsdGeomSchema:
    """Marker classes for ``prim.IsA(usdrt.UsdGeom.<Schema>)``; resolved by name against pxr's UsdGeom."""


class StandinRuntime:
    """The state behind one stand-in ``usdrt`` module: options, the stores by stage id, call counts."""

    def __init__(self, device: str = "cpu", *, fabric_scene_delegate: bool = True, shuffle_seed: int | None = None):
        self.device = str(wp.get_device(device))
        self.fabric_scene_delegate = fabric_scene_delegate
        self.rng = random.Random(shuffle_seed) if shuffle_seed is not None else None
        self.stores: dict[int, FabricStore] = {}
        self.calls: collections.Counter[str] = collections.Counter()

    def count(self, name: str) -> None:
        self.calls[name] += 1

    def store(self, stage_id: int) -> FabricStore:
        store = self.stores.get(stage_id)
        if store is not None and not store.released:
            return store
        stage = UsdUtils.StageCache.Get().Find(Usd.StageCache.Id.FromLongInt(stage_id))
        if not stage:
            raise RuntimeError(f"Stage.Attach: no stage with id {stage_id} in UsdUtils.StageCache")
        store = self.stores[stage_id] = FabricStore(self, stage_id, stage)
        return store

    def release(self, stage_id: int) -> None:
        """Simulate Kit closing the stage: its usdrt stage and prims become invalid."""
        self.stores[stage_id].released = True


def make_module(runtime: StandinRuntime) -> types.ModuleType:
    """A ``usdrt`` module object over ``runtime`` (importable once put in ``sys.modules['usdrt']``)."""
    module = types.ModuleType("usdrt", "frameview's CI stand-in for Kit's usdrt (tests/fakes/usdrt_standin.py)")
    module.__spec__ = importlib.machinery.ModuleSpec("usdrt", None)  # importlib.util.find_spec needs one
    module.standin = runtime
    names = ("Matrix4d", "UInt", "Int", "Bool", "Double3", "Float3", "Quatf", "Token")
    value_types = types.SimpleNamespace(**{n: ValueTypeName(n.lower()) for n in names})
    module.Sdf = types.SimpleNamespace(ValueTypeNames=value_types, ValueTypeName=ValueTypeName, Path=Path)
    module.Gf = types.SimpleNamespace(Matrix4d=Matrix4d)
    stage_cls = type("Stage", (Stage,), {"_runtime": runtime, "__module__": "usdrt.Usd"})
    module.Usd = types.SimpleNamespace(Stage=stage_cls, Access=Access, Prim=Prim, Attribute=Attribute)
    module.UsdGeom = types.SimpleNamespace(
        **{n: type(n, (UsdGeomSchema,), {"__module__": "usdrt.UsdGeom"}) for n in ("Imageable", "Xformable", "Xform")}
    )
    module.Rt = types.SimpleNamespace(Xformable=Xformable, PrimSelection=PrimSelection)
    hierarchy_cls = type("IFabricHierarchy", (IFabricHierarchy,), {"_runtime": runtime})
    module.hierarchy = types.SimpleNamespace(IFabricHierarchy=hierarchy_cls)
    return module


@contextlib.contextmanager
def installed(device: str = "cpu", **options: Any) -> Iterator[StandinRuntime]:
    """Put a stand-in ``usdrt`` in ``sys.modules`` for the duration; yields its :class:`StandinRuntime`.

    On exit the previous ``usdrt`` (if any) comes back, and the stages that were attached leave
    ``UsdUtils.StageCache`` (frameview puts a pxr stage there to attach it).
    """
    runtime = StandinRuntime(device, **options)
    previous = sys.modules.get("usdrt")
    sys.modules["usdrt"] = make_module(runtime)
    try:
        yield runtime
    finally:
        if previous is None:
            sys.modules.pop("usdrt", None)
        else:
            sys.modules["usdrt"] = previous
        cache = UsdUtils.StageCache.Get()
        for stage_id in runtime.stores:
            stage = cache.Find(Usd.StageCache.Id.FromLongInt(stage_id))
            if stage:
                cache.Erase(stage)

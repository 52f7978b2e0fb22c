# SPDX-License-Identifier: Apache-2.0
"""How the ovphysx views reach the engine: tensor bindings, the session read, lifetime.

How a getter reads. ovphysx's session read API (``PhysX.read``) copies each requested column into a buffer of a new
read session, rows in engine order per group, and joint DOFs as one array per joint prim: read through it, every call
would cost Python work per group and per joint (N x joints arrays for N robots). The views read through ovphysx's
tensor bindings instead (deprecated since ovphysx 0.6 in favour of the session API, kept through its deprecation
window; the views silence that warning): one binding per quantity, made once over the view's prims, whose ``read``
copies the engine's values into a view-owned staging array of fixed layout in one engine call. One gather launch
then picks the call's rows (and converts signs) from it. Per getter call: one binding read per engine quantity (three
for the joint state), then one launch; no per-row host work. On CPU the binding read is the engine's copy itself (a
few microseconds); values are not zero-copy, ovphysx does not expose its state arrays.

Lifetime. A view subscribes to ovphysx's object-change notifications: once ovphysx destroys every physics object (a
detach, as before a reload), or creates or destroys one of the view's prims (its rows, an articulation's links and
DOF joints: the articulation was rebuilt), or the PhysX instance is destroyed, the view's next call raises
:class:`~frameview.physics.StaleViewError`. The check costs a flag test and a handle check per call.
"""

from __future__ import annotations

import contextlib
import re
import warnings
import weakref
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np
import warp as wp
from ovphysx.types import ObjectScope, SimObjectType, TensorType

from ..physics.base import PhysicsView, StaleViewError

_BINDING_WARNING = "ovphysx tensor bindings are deprecated"
_LATEST = (1 << 64) - 1


class Column(NamedTuple):
    """One tensor binding over the view's prims: the staging array it fills and the typed, flat alias a gather
    reads, with ``table[view row, column]`` indexing the alias."""

    name: str
    binding: Any
    staging: wp.array
    alias: wp.array
    table: wp.array


class _Lifetime:
    """ovphysx's object-change notifications (``PhysX.subscribe_object_changes``), turned into the reason a view went
    stale: the view's own prims (its rows, and an articulation's links and DOF joints) created or destroyed, or every
    physics object destroyed (a detach, before a reload). None while the view is current."""

    def __init__(self, physx: Any, prims: Iterable[str]) -> None:
        self.reason: str | None = None
        self._prims = frozenset(prims)
        self.subscription = physx.subscribe_object_changes(
            on_created=self._created, on_destroyed=self._destroyed, on_all_destroyed=self._all_destroyed
        )

    def _touches(self, path: str) -> bool:
        return str(path) in self._prims

    def _created(self, path: str, _kind: int) -> None:
        if self.reason is None and self._touches(path):
            self.reason = f"ovphysx created {path!r} among the view's prims (the topology changed)"

    def _destroyed(self, path: str, _kind: int) -> None:
        if self.reason is None and self._touches(path):
            self.reason = f"ovphysx removed {path!r} (a prim of the view)"

    def _all_destroyed(self) -> None:
        if self.reason is None:
            self.reason = "ovphysx destroyed every physics object (its stage was detached or reloaded)"


def _cleanup(physx: Any, subscription: int | None, bindings: list[Any]) -> None:
    """Destroy the view's bindings and its subscription (a destroyed PhysX instance took them with it)."""
    for binding in bindings:
        with contextlib.suppress(RuntimeError):
            binding.destroy()
    if subscription is not None:
        with contextlib.suppress(RuntimeError):
            physx.unsubscribe_object_changes(subscription)


def check_physx(physx: Any) -> None:
    # duck-typed: an isinstance check would load ovphysx's native library for a wrong argument
    needed = ("create_tensor_binding", "read_sync", "subscribe_object_changes", "is_stage_attached")
    if physx is None or not all(hasattr(physx, name) for name in needed):
        raise TypeError(f"physx: expected an ovphysx.PhysX instance, got {type(physx).__name__}")
    try:
        physx.handle  # noqa: B018 - raises once the instance was destroyed
    except RuntimeError as exc:
        raise ValueError(f"physx: {exc}") from None


def check_stage(physx: Any, stage: Any, required: str | None) -> None:
    if stage is None:
        if required:
            raise TypeError(f"stage: {required}; pass stage=<the ovstage.Stage attached to physx>")
        return
    if not physx.is_stage_attached(stage):
        raise ValueError("stage: this ovstage.Stage is not the one attached to physx (attach_ovstage)")


def session_read(
    physx: Any, object_type: SimObjectType, attributes: Sequence[str], *, prims: Sequence[int] | None = None,
    paths: frozenset[str] = frozenset(),
) -> dict[str, dict[str, Any]]:  # fmt: skip
    """``{attribute: {prim path: value}}`` from one session read (host copies); ``paths`` names the attributes whose
    values are interned prim paths, returned as lists of strings (0 pads dropped)."""
    out: dict[str, dict[str, Any]] = {a: {} for a in attributes}
    kwargs: dict[str, Any] = {"scope": ObjectScope.ALL} if prims is None else {"prim_paths": list(prims)}
    group = None
    with physx.read_sync(object_type, list(attributes), **kwargs) as result:
        pd = result.dictionary
        for group in result.groups:
            name = pd.token_to_string(group.attribute)
            listed = pd.get_path_strings(group.prim_list)[group.prim_offset : group.prim_offset + group.prim_count]
            values: list[Any]
            if group.is_array:
                values = [np.array(t.numpy()) for t in group.tensors]
            else:
                values = list(np.array(group.tensors[0].numpy())) if group.tensors else []
            if name in paths:
                values = [[pd.path_to_string(int(h)) for h in np.ravel(v) if int(h)] for v in values]
            out.setdefault(name, {}).update(zip(listed, values, strict=True))
        group = None  # drop the last group's arrays: a live read array blocks PhysX.destroy()
    return out


def joint_bodies(stage: Any, joints: Sequence[str]) -> dict[str, tuple[str, str]]:
    """Each joint's ``(physics:body0, physics:body1)`` target paths (``""`` for none: the world), from the stage."""
    import ovstage

    pd = ovstage.PathDictionary(stage)
    found: dict[str, list[str]] = {j: ["", ""] for j in joints}
    joint_of = {pd.intern_path(j): j for j in joints}  # prim handles compared as integers: no string per prim
    names: dict[int, str] = {}  # target handle -> path (a link is the body of two joints)
    tokens = [pd.intern_token("physics:body0"), pd.intern_token("physics:body1")]
    with pd.create_path_list_from_strings(list(joints)) as plist, stage.query_from_path_list(plist) as query:
        query.wait()
        with stage.read_attributes(query, tokens, ovstage.OrdinalRange.latest(_LATEST)) as read:
            read.wait()
            for group in read.groups():
                with group:
                    side = tokens.index(group.attribute)
                    listed = pd.get_paths(group.prim_list)
                    for k in range(group.prim_count):
                        joint = joint_of.get(listed[group.prim_index(k) if group.has_prim_index_map
                                                    else group.prim_offset + k])  # fmt: skip
                        row = group.data_row_index(k) if group.has_data_index_map else k
                        targets = np.ravel(ovstage.dltensor_to_numpy(group.tensor(row)))
                        if joint is not None and targets.size:
                            handle = int(targets[0])
                            if handle not in names:
                                names[handle] = pd.path_to_string(handle)
                            found[joint][side] = names[handle]
    return {j: (b[0], b[1]) for j, b in found.items()}


def binding_device(binding: Any, device: str | None) -> Any:
    native = binding.native_device
    kind, ordinal = (int(getattr(v, "value", v)) for v in (native.device_type, native.device_id))
    engine = wp.get_device(f"cuda:{ordinal}" if kind == 2 else "cpu")  # kDLCUDA
    if device is not None and wp.get_device(device) != engine:
        raise ValueError(
            f"device: ovphysx serves these prims on {str(engine)!r}, the view asks for {device!r}; pass "
            f"device={str(engine)!r} (or None)"
        )
    return engine


def natural_order(labels: Iterable[str]) -> list[str]:
    """Paths in natural order (``env_2`` before ``env_10``): ovphysx lists prims in an engine order that is not the
    env order."""
    return sorted(labels, key=lambda p: [(0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", p)])


class OvPhysxSource(PhysicsView):
    """Engine handling shared by the ovphysx views: bindings, staging arrays, lifetime."""

    _physx: Any = None
    _life: _Lifetime | None = None
    _columns: dict[str, Column]

    @property
    def backend(self) -> str:
        return "ovphysx"

    def _start(self, physx: Any, prims: Iterable[str]) -> None:
        """Subscribe to ovphysx's object changes of ``prims`` before any binding exists (a change during construction
        counts)."""
        self._physx = physx
        self._life = _Lifetime(physx, prims)
        self._columns = {}
        self._finalizer = weakref.finalize(self, _cleanup, physx, self._life.subscription, [])

    def _column(self, name: str, tensor_type: TensorType, dtype: Any, paths: Sequence[str]) -> Column:
        """A binding of ``tensor_type`` over ``paths`` (the view's rows), its staging array and its row table."""
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=_BINDING_WARNING)
            binding = self._physx.create_tensor_binding(prim_paths=list(paths), tensor_type=int(tensor_type))
        self._finalizer.detach()
        bindings = [c.binding for c in self._columns.values()] + [binding]
        assert self._life is not None
        self._finalizer = weakref.finalize(self, _cleanup, self._physx, self._life.subscription, bindings)
        order = {str(p): i for i, p in enumerate(binding.prim_paths)}
        missing = [p for p in paths if p not in order]
        if missing or binding.count != len(paths):
            raise ValueError(
                f"ovphysx has no {tensor_type.name} data for {missing[0] if missing else 'some'!r} of the view's "
                f"{len(paths)} prims (its tensor binding matched {binding.count})"
            )
        device = self._device if hasattr(self, "_device") else binding_device(binding, None)
        shape = tuple(int(s) for s in binding.shape)
        staging = wp.zeros(shape, dtype=wp.float32, device=device)
        if dtype is wp.float32:  # (N,) or (N, dofs) scalars: one element per row or DOF
            columns = shape[1] if len(shape) > 1 else 1
            alias = staging.reshape((staging.size,))
        else:  # (N, 7 | 6 | 9) rows or (N, links, 7 | 6): one element (the leading floats of a row) per row or link
            columns = shape[1] if len(shape) == 3 else 1
            alias = wp.array(ptr=staging.ptr, dtype=dtype, shape=(shape[0] * columns,), strides=(shape[-1] * 4,),
                             device=device, copy=False)  # fmt: skip
        rows = np.array([order[p] for p in paths], dtype=np.int64)
        table = (rows[:, None] * columns + np.arange(columns)[None, :]).astype(np.int32)
        column = Column(name, binding, staging, alias, wp.array(table, dtype=wp.int32, device=device))
        self._columns[name] = column
        return column

    def _fill(self, column: Column) -> wp.array:
        """Copy the engine's values into ``column``'s staging array (one binding read); returns the alias."""
        try:
            column.binding.read(column.staging)
        except RuntimeError as exc:
            self._check_current()
            if "invalidated" in str(exc) or "destroyed" in str(exc):
                raise StaleViewError(
                    f"{self!r}: ovphysx refused to read {column.name} ({exc}); create the view again"
                ) from exc
            raise
        return column.alias

    def _check_current(self) -> None:
        assert self._life is not None
        try:
            self._physx.handle  # noqa: B018 - raises once the instance was destroyed
            reason = self._life.reason
        except RuntimeError:
            reason = "its ovphysx.PhysX instance was destroyed"
        if reason is not None:
            raise StaleViewError(f"{self!r}: {reason}; create the view again")

    def _release(self) -> None:
        finalizer = getattr(self, "_finalizer", None)
        if finalizer is not None:
            finalizer()
        self._columns = {}
        self._physx = None

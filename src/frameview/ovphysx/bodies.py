# SPDX-License-Identifier: Apache-2.0
"""Typed physics views on ovphysx: rigid bodies and articulations of an ``ovphysx.PhysX`` instance.

How a getter reads. ovphysx's session read API (``PhysX.read``) copies each requested column into a buffer of a new
read session, rows in engine order per group, and joint DOFs as one array per joint prim: read through it, every call
would cost Python work per group and per joint (N x joints arrays for N robots). The views read through ovphysx's
tensor bindings instead (deprecated since ovphysx 0.6 in favour of the session API, kept through its deprecation
window; the views silence that warning): one binding per quantity, made once over the view's prims, whose ``read``
copies the engine's values into a view-owned staging array of fixed layout in one engine call. One gather launch
then picks the call's rows (and converts signs) from it. Per getter call: one binding read per engine quantity (three
for the joint state), then one launch; no per-row host work. On CPU the binding read is the engine's copy itself (a
few microseconds); values are not zero-copy, ovphysx does not expose its state arrays.

The articulations' metadata comes from the session read API at construction: ``dofJointPath`` / ``dofAxisIndex``
(DOF order and names), ``isFixedBase``, and the ``jacobian`` (which link each DOF moves, and whether it rotates or
translates); each joint's ``physics:body0`` / ``physics:body1`` come from the attached ovstage stage.

Conventions, as the other engines: SI units (the bindings report rotational DOFs in radians, where the session API
reports degrees), quaternions xyzw, velocities in the world frame. DOFs are reported **parent to child**: a positive
position rotates (translates) the articulation child of the joint relative to its parent about (along) the joint's
authored axis. ovphysx reports a DOF whose joint has ``body0`` = the child negated (the authored body order); the
views negate it back (position, velocity and effort), so that a joint reads the same whichever way it was authored.

Lifetime. A view subscribes to ovphysx's object-change notifications: once ovphysx destroys every physics object (a
detach, as before a reload), or creates or destroys one of the view's prims (its rows, an articulation's links and
DOF joints: the articulation was rebuilt), or the PhysX instance is destroyed, the view's next call raises
:class:`~frameview.physics.StaleViewError`. The check costs a flag test and a handle check per call.

Tested on CPU scenes. On a DirectGPU scene the bindings fill staging arrays on the GPU and the views run there
(untested); a binding read is a host call into ovphysx, so no getter can be captured in a CUDA graph.
"""

from __future__ import annotations

import contextlib
import re
import warnings
import weakref
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar, NamedTuple

import numpy as np
import warp as wp
from ovphysx.types import ObjectScope, SimObjectType, TensorType

from ..physics.base import ArticulationView, PhysicsView, RigidBodyView, StaleViewError, gather
from ..physics.labels import match_labels
from . import kernels

__all__ = ["OvPhysxArticulationView", "OvPhysxRigidBodyView"]

_EFFORT_SOURCE = (
    "ovphysx: jointActuationForce, the applied actuation effort (the joint forces and torques written to the engine, "
    "tensor type ARTICULATION_DOF_ACTUATION_FORCE), not the force a joint drive computes inside the solver; negated "
    "with its DOF where the joint's body0 is the articulation child"
)
_BINDING_WARNING = "ovphysx tensor bindings are deprecated"
_LATEST = (1 << 64) - 1


class _Column(NamedTuple):
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


def _check_physx(physx: Any) -> None:
    # duck-typed: an isinstance check would load ovphysx's native library for a wrong argument
    needed = ("create_tensor_binding", "read_sync", "subscribe_object_changes", "is_stage_attached")
    if physx is None or not all(hasattr(physx, name) for name in needed):
        raise TypeError(f"physx: expected an ovphysx.PhysX instance, got {type(physx).__name__}")
    try:
        physx.handle  # noqa: B018 - raises once the instance was destroyed
    except RuntimeError as exc:
        raise ValueError(f"physx: {exc}") from None


def _check_stage(physx: Any, stage: Any, required: str | None) -> None:
    if stage is None:
        if required:
            raise TypeError(f"stage: {required}; pass stage=<the ovstage.Stage attached to physx>")
        return
    if not physx.is_stage_attached(stage):
        raise ValueError("stage: this ovstage.Stage is not the one attached to physx (attach_ovstage)")


def _session_read(
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


def _joint_bodies(stage: Any, joints: Sequence[str]) -> dict[str, tuple[str, str]]:
    """Each joint's ``(physics:body0, physics:body1)`` target paths (``""`` for none: the world), from the stage."""
    import ovstage

    pd = ovstage.PathDictionary(stage)
    found: dict[str, list[str]] = {j: ["", ""] for j in joints}
    tokens = [pd.intern_token("physics:body0"), pd.intern_token("physics:body1")]
    with pd.create_path_list_from_strings(list(joints)) as plist, stage.query_from_path_list(plist) as query:
        query.wait()
        with stage.read_attributes(query, tokens, ovstage.OrdinalRange.latest(_LATEST)) as read:
            read.wait()
            for group in read.groups():
                with group:
                    side = tokens.index(group.attribute)
                    listed = pd.get_path_strings(group.prim_list)
                    for k in range(group.prim_count):
                        prim = listed[group.prim_index(k) if group.has_prim_index_map else group.prim_offset + k]
                        row = group.data_row_index(k) if group.has_data_index_map else k
                        targets = np.ravel(ovstage.dltensor_to_numpy(group.tensor(row)))
                        if prim in found and targets.size:
                            found[prim][side] = pd.path_to_string(int(targets[0]))
    return {j: (b[0], b[1]) for j, b in found.items()}


def _device(binding: Any, device: str | None) -> Any:
    native = binding.native_device
    kind, ordinal = (int(getattr(v, "value", v)) for v in (native.device_type, native.device_id))
    engine = wp.get_device(f"cuda:{ordinal}" if kind == 2 else "cpu")  # kDLCUDA
    if device is not None and wp.get_device(device) != engine:
        raise ValueError(
            f"device: ovphysx serves these prims on {str(engine)!r}, the view asks for {device!r}; pass "
            f"device={str(engine)!r} (or None)"
        )
    return engine


def _natural(labels: Iterable[str]) -> list[str]:
    """Paths in natural order (``env_2`` before ``env_10``): ovphysx lists prims in an engine order that is not the
    env order."""
    return sorted(labels, key=lambda p: [(0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", p)])


def _leaf(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


class _OvPhysxSource(PhysicsView):
    """Engine handling shared by the ovphysx views: bindings, staging arrays, lifetime."""

    _physx: Any = None
    _life: _Lifetime | None = None
    _columns: dict[str, _Column]

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

    def _column(self, name: str, tensor_type: TensorType, dtype: Any, paths: Sequence[str]) -> _Column:
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
        device = self._device if hasattr(self, "_device") else _device(binding, None)
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
        column = _Column(name, binding, staging, alias, wp.array(table, dtype=wp.int32, device=device))
        self._columns[name] = column
        return column

    def _fill(self, column: _Column) -> wp.array:
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


class OvPhysxRigidBodyView(_OvPhysxSource, RigidBodyView):
    """Rigid bodies of an ovphysx scene (standalone bodies and articulation links alike), by prim path or pattern.

    Args:
        prim_path: Body prim paths: a path, a pattern (``/World/envs/env_.*/Cube``) or a list of them, matched
            against ovphysx's rigid bodies and articulation links. A pattern's rows are in natural path order
            (``env_2`` before ``env_10``; ovphysx's own order is not the env order), a list's in its order.
        physx: The ``ovphysx.PhysX`` instance, its stage attached.
        stage: The attached ``ovstage.Stage`` (optional here: checked to be the attached one when given).
        device: Must be the device ovphysx serves the bodies on (CPU, or the GPU of a DirectGPU scene), or None.

    Every getter reads its quantity through one tensor binding (a copy by the engine into the view's staging array)
    and gathers the call's rows in one launch. Velocities and accelerations are of the centre of mass, world frame
    (``linearAcceleration`` / ``angularAcceleration``, which ovphysx computes from the last step). Inertias are
    ovphysx's ``inertia`` column: about the centre of mass, in its centre-of-mass frame. Centres of mass are the
    ``centerOfMassPosition`` offsets in the body frame.

    Raises:
        StaleViewError: On a call after ovphysx removed or recreated a body of the view, detached or reloaded its
            stage, or the PhysX instance was destroyed.
    """

    _QUANTITIES: ClassVar[dict[str, tuple[TensorType, str, Any]]] = {
        "poses": (TensorType.RIGID_BODY_POSE, "transform", wp.transformf),
        "velocities": (TensorType.RIGID_BODY_VELOCITY, "twist", wp.spatial_vectorf),
        "accelerations": (TensorType.RIGID_BODY_ACCELERATION, "twist", wp.spatial_vectorf),
        "masses": (TensorType.RIGID_BODY_MASS, "value", wp.float32),
        "inv_masses": (TensorType.RIGID_BODY_INV_MASS, "value", wp.float32),
        "inertias": (TensorType.RIGID_BODY_INERTIA, "value", wp.mat33f),
        "coms": (TensorType.RIGID_BODY_COM_POSE, "value", wp.vec3f),
    }

    def __init__(
        self, prim_path: str | Sequence[str], *, physx: Any, stage: Any = None, device: str | None = None
    ) -> None:
        _check_physx(physx)
        _check_stage(physx, stage, None)
        labels = list(_session_read(physx, SimObjectType.RIGID_BODY, ["mass"])["mass"])
        labels = _natural(labels + list(_session_read(physx, SimObjectType.ARTICULATION_LINK, ["mass"])["mass"]))
        what = "ovphysx rigid bodies and articulation links (RIGID_BODY and ARTICULATION_LINK reads)"
        paths = [labels[i] for i in match_labels(prim_path, labels, what)]
        self._start(physx, paths)
        try:
            first = self._column("poses", TensorType.RIGID_BODY_POSE, wp.transformf, paths)
            super().__init__(prim_path, paths, device=_device(first.binding, device))
            for name, (tensor_type, _kind, dtype) in self._QUANTITIES.items():
                if name != "poses":
                    self._column(name, tensor_type, dtype, paths)
        except BaseException:
            self._finalizer()
            raise

    def _source(self, what: str) -> tuple[Any, wp.array, list[Any]]:
        column = self._columns[what]
        return gather(self._QUANTITIES[what][1]), column.table, [self._fill(column)]


class OvPhysxArticulationView(_OvPhysxSource, ArticulationView):
    """Articulations of an ovphysx scene (N envs' copies of one robot), by root prim path or pattern.

    Args:
        prim_path: Articulation prims (those carrying ``PhysicsArticulationRootAPI``): a path, a pattern
            (``/World/envs/env_.*/Robot``) or a list of them; rows in natural path order, as for
            :class:`OvPhysxRigidBodyView`.
        physx: The ``ovphysx.PhysX`` instance, its stage attached.
        stage: The attached ``ovstage.Stage``: the view reads each joint's ``physics:body0`` / ``physics:body1``
            from it once, to report every DOF parent to child.
        device: Must be the device ovphysx serves the articulations on, or None.

    DOFs are in ovphysx's articulation (cache-DOF) order, named after their joint prim (``dofJointPath``), with
    ``name:k`` for the k-th unlocked axis of a multi-axis joint; a DOF's type is ``"rotation"`` when the articulation
    Jacobian shows it rotating its child link, else ``"translation"``. Links are ovphysx's, root first. Positions are
    radians / metres, velocities rad/s / m/s, parent to child (see the module); efforts are
    :attr:`effort_source`. Root and link velocities are of the centre of mass, world frame.

    Raises:
        StaleViewError: On a call after ovphysx removed or recreated a prim of the articulations (its links and
            joints included), detached or reloaded its stage, or the PhysX instance was destroyed.
    """

    effort_source = _EFFORT_SOURCE

    def __init__(self, prim_path: str | Sequence[str], *, physx: Any, stage: Any, device: str | None = None) -> None:
        _check_physx(physx)
        _check_stage(physx, stage, "the ovphysx articulation view reads each joint's body order from the stage")
        import ovstage

        art = SimObjectType.ARTICULATION
        labels = _natural(_session_read(physx, art, ["dofCount"])["dofCount"])
        what = "ovphysx articulations (ARTICULATION reads)"
        paths = [labels[i] for i in match_labels(prim_path, labels, what)]
        pd = ovstage.PathDictionary(stage)
        handles = [pd.intern_path(p) for p in paths]
        meta = _session_read(physx, art, ["isFixedBase", "dofCount", "linkCount", "dofJointPath", "dofAxisIndex"],
                             prims=handles, paths=frozenset({"dofJointPath"}))  # fmt: skip
        joints = {p: list(meta["dofJointPath"][p]) for p in paths}
        axes = {p: [int(a) for a in np.ravel(meta["dofAxisIndex"][p])[: len(joints[p])]] for p in paths}
        first = paths[0]

        def signature(p: str) -> tuple:
            return (bool(meta["isFixedBase"][p]), int(meta["linkCount"][p]), [_leaf(j) for j in joints[p]], axes[p])

        for p in paths:
            if int(meta["dofCount"][p]) != len(joints[p]):
                raise RuntimeError(
                    f"ovphysx reports {meta['dofCount'][p]} DOFs for {p!r} but {len(joints[p])} DOF joints"
                )
            if signature(p) != signature(first):
                raise ValueError(
                    f"prim_path {prim_path!r}: articulation {p!r} differs from {first!r} (fixed base, link count, DOF "
                    f"joints: {signature(p)} vs {signature(first)}); a view holds copies of one articulation"
                )
        if not joints[first]:
            raise ValueError(f"articulation {first!r} has no DOFs to read (every joint is fixed)")
        bodies = _joint_bodies(stage, sorted({j for p in paths for j in joints[p]}))
        self._start(physx, {*paths, *bodies, *(b for pair in bodies.values() for b in pair if b)})
        try:
            dof = self._column("dof_positions", TensorType.ARTICULATION_DOF_POSITION, wp.float32, paths)
            super().__init__(prim_path, paths, device=_device(dof.binding, device))
            self._column("dof_velocities", TensorType.ARTICULATION_DOF_VELOCITY, wp.float32, paths)
            self._column("dof_efforts", TensorType.ARTICULATION_DOF_ACTUATION_FORCE, wp.float32, paths)
            self._column("root_poses", TensorType.ARTICULATION_ROOT_POSE, wp.transformf, paths)
            self._column("root_velocities", TensorType.ARTICULATION_ROOT_VELOCITY, wp.spatial_vectorf, paths)
            links = self._column("link_poses", TensorType.ARTICULATION_LINK_POSE, wp.transformf, paths)
            self._column("link_velocities", TensorType.ARTICULATION_LINK_VELOCITY, wp.spatial_vectorf, paths)
            self._describe(physx, paths, handles[0], joints, axes, bodies, list(links.binding.body_names))
            self._fixed_base = bool(meta["isFixedBase"][first])
        except BaseException:
            self._finalizer()
            raise

    def _describe(
        self, physx: Any, paths: list[str], handle: int, joints: dict[str, list[str]], axes: dict[str, list[int]],
        bodies: dict[str, tuple[str, str]], link_names: list[str],
    ) -> None:  # fmt: skip
        """DOF names, types and signs, and link names, checked against the bindings' layout."""
        first = paths[0]
        dofs = len(joints[first])
        dof_binding = self._columns["dof_positions"].binding
        if int(dof_binding.shape[1]) != dofs or int(self._columns["link_poses"].binding.shape[1]) != len(link_names):
            raise RuntimeError(
                f"ovphysx's tensor bindings disagree with its articulation metadata for {first!r}: "
                f"{dof_binding.shape[1]} DOF columns for {dofs} DOFs"
            )
        leaves = [_leaf(j) for j in joints[first]]
        binding_names = [str(n) for n in dof_binding.dof_names]
        if binding_names and any(not b.startswith(leaf) for b, leaf in zip(binding_names, leaves, strict=False)):
            raise RuntimeError(
                f"ovphysx's DOF bindings order the DOFs {binding_names}, its dofJointPath {leaves}: cannot tell which "
                "column is which DOF"
            )
        order = {str(p): i for i, p in enumerate(dof_binding.prim_paths)}
        for name in ("dof_velocities", "dof_efforts"):
            if [str(p) for p in self._columns[name].binding.prim_paths] != list(order):
                raise RuntimeError(
                    "ovphysx's DOF bindings order the articulations differently; cannot read them at once"
                )
        names = [leaf if joints[first].count(j) == 1 else f"{leaf}:{a}"
                 for j, leaf, a in zip(joints[first], leaves, axes[first], strict=True)]  # fmt: skip
        jac = _session_read(physx, SimObjectType.ARTICULATION, ["jacobian", "jacobianShape"], prims=[handle])
        rows, cols = (int(v) for v in np.ravel(jac["jacobianShape"][first])[:2])
        jacobian = np.ravel(jac["jacobian"][first])[: rows * cols].reshape(rows, cols).astype(np.float64)
        blocks, offset = rows // 6, cols - dofs
        first_link = len(link_names) - blocks
        link_of = {leaf: i for i, leaf in enumerate(link_names)}
        if len(link_of) != len(link_names):
            raise NotImplementedError(f"articulation {first!r}: two links share a name ({link_names})")

        def moves(link: int | None, k: int) -> np.ndarray | None:
            """The Jacobian column of DOF ``k`` at ``link`` (linear, angular), or None where the DOF moves it not."""
            if link is None or link < first_link:
                return None
            col = jacobian[6 * (link - first_link) : 6 * (link - first_link) + 6, offset + k]
            return col if np.linalg.norm(col) > 0.5 else None

        types: list[str] = []
        signs = np.ones(dofs, dtype=np.float32)
        for p in paths:
            for k, joint in enumerate(joints[p]):
                b0, b1 = (link_of.get(_leaf(b)) if b else None for b in bodies[joint])
                c0, c1 = moves(b0, k), moves(b1, k)
                if (c0 is None) == (c1 is None):
                    raise RuntimeError(
                        f"joint {joint!r}: cannot tell which of its bodies {bodies[joint]} is the articulation child "
                        f"(links {link_names})"
                    )
                sign = -1.0 if c0 is not None else 1.0
                if p == first:
                    signs[k] = sign
                    child = c0 if c0 is not None else c1
                    assert child is not None
                    types.append("rotation" if np.linalg.norm(child[3:]) > 0.5 else "translation")
                elif sign != signs[k]:
                    raise ValueError(
                        f"articulation {p!r}: joint {joint!r} is authored in the other body order than in {first!r}; "
                        "a view holds copies of one articulation"
                    )
        self._dof_names, self._dof_types, self._link_names = tuple(names), tuple(types), tuple(link_names)
        self._sign: wp.array = wp.array(signs, dtype=wp.float32, device=self._device)

    def _source(self, what: str) -> tuple[Any, wp.array, list[Any]]:
        if what == "joint_state":
            q, qd, f = (self._columns[n] for n in ("dof_positions", "dof_velocities", "dof_efforts"))
            arrays = [self._fill(q), self._fill(qd), self._fill(f), self._sign]
            return kernels.gather_signed_joint_state, q.table, arrays
        column = self._columns.get(what)
        if column is None:
            raise NotImplementedError(f"{self!r}: {what}")
        if what.startswith("dof_"):
            return kernels.gather_signed_values, column.table, [self._fill(column), self._sign]
        kind = "transform" if what.endswith("poses") else "twist"
        return gather(kind), column.table, [self._fill(column)]

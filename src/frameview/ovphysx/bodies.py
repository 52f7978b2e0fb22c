# SPDX-License-Identifier: Apache-2.0
"""Typed physics views on ovphysx: rigid bodies and articulations of an ``ovphysx.PhysX`` instance.

The articulations' metadata comes from the session read API at construction: ``dofJointPath`` / ``dofAxisIndex``
(DOF order and names), ``isFixedBase``, and the ``jacobian`` (which link each DOF moves, and whether it rotates or
translates); each joint's ``physics:body0`` / ``physics:body1`` come from the attached ovstage stage.

Conventions, as the other engines: SI units (the bindings report rotational DOFs in radians, where the session API
reports degrees), quaternions xyzw, velocities in the world frame. DOFs are reported **parent to child**: a positive
position rotates (translates) the articulation child of the joint relative to its parent about (along) the joint's
authored axis. ovphysx reports a DOF whose joint has ``body0`` = the child negated (the authored body order); the
views negate it back (position, velocity and effort), so that a joint reads the same whichever way it was authored.

Tested on CPU scenes. On a DirectGPU scene the bindings fill staging arrays on the GPU and the views run there
(untested); a binding read is a host call into ovphysx, so no getter can be captured in a CUDA graph.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import warp as wp
from ovphysx.types import SimObjectType, TensorType

from ..physics.base import ArticulationView, RigidBodyView
from ..physics.kernels import gather_dof_values, gather_joint_state, gather_transforms, gather_twists, gather_values
from ..physics.labels import leaf_name, match_labels
from .engine import (
    OvPhysxSource,
    binding_device,
    check_physx,
    check_stage,
    joint_bodies,
    natural_order,
    session_read,
)

__all__ = ["OvPhysxArticulationView", "OvPhysxRigidBodyView"]

_EFFORT_SOURCE = (
    "ovphysx: jointActuationForce, the applied actuation effort (the joint forces and torques written to the engine, "
    "tensor type ARTICULATION_DOF_ACTUATION_FORCE), not the force a joint drive computes inside the solver; negated "
    "with its DOF where the joint's body0 is the articulation child"
)


_LINK_HINT = (
    "an articulation link, not an articulation root: read links with a rigid-body view (make_rigid_body_view, "
    "OvPhysxRigidBodyView), or name the prim carrying PhysicsArticulationRootAPI for an articulation view"
)


class OvPhysxRigidBodyView(OvPhysxSource, RigidBodyView):
    """Rigid bodies of an ovphysx scene (standalone bodies and articulation links alike), by prim path or pattern.

    Args:
        prim_path: Body prim paths: a path, a pattern (``/World/envs/env_.*/Cube``) or a list of them, matched
            against ovphysx's rigid bodies and articulation links. A pattern's rows are in natural path order
            (``env_2`` before ``env_10``; ovphysx's own order is not the env order), a list's in its order.
        physx: The ``ovphysx.PhysX`` instance, its stage attached.
        stage: The attached ``ovstage.Stage`` (optional here: checked to be the attached one when given).
        device: Must be the device ovphysx serves the bodies on (CPU, or the GPU of a DirectGPU scene), or None.
        quat_sign: ``"positive_w"`` (orientations with ``w >= 0``, the default) or ``"engine"`` (ovphysx's sign).
        quat_order: ``"xyzw"`` (the default) or ``"wxyz"``: the order of the orientations returned.

    Every getter reads its quantity through one tensor binding (a copy by the engine into the view's staging array)
    and gathers the call's rows in one launch. Velocities and accelerations are of the centre of mass, world frame
    (``linearAcceleration`` / ``angularAcceleration``, which ovphysx computes from the last step). Inertias are
    ovphysx's ``inertia`` column: about the centre of mass, in its centre-of-mass frame. Centres of mass are the
    ``centerOfMassPosition`` offsets in the body frame.

    Raises:
        StaleViewError: On a call after ovphysx removed or recreated a body of the view, detached or reloaded its
            stage, or the PhysX instance was destroyed.
    """

    _QUANTITIES: ClassVar[dict[str, tuple[TensorType, Any, Any]]] = {
        "poses": (TensorType.RIGID_BODY_POSE, gather_transforms, wp.transformf),
        "velocities": (TensorType.RIGID_BODY_VELOCITY, gather_twists, wp.spatial_vectorf),
        "accelerations": (TensorType.RIGID_BODY_ACCELERATION, gather_twists, wp.spatial_vectorf),
        "masses": (TensorType.RIGID_BODY_MASS, gather_values, wp.float32),
        "inv_masses": (TensorType.RIGID_BODY_INV_MASS, gather_values, wp.float32),
        "inertias": (TensorType.RIGID_BODY_INERTIA, gather_values, wp.mat33f),
        "coms": (TensorType.RIGID_BODY_COM_POSE, gather_values, wp.vec3f),
    }

    def __init__(
        self,
        prim_path: str | Sequence[str],
        *,
        physx: Any,
        stage: Any = None,
        device: str | None = None,
        quat_sign: str = "positive_w",
        quat_order: str = "xyzw",
    ) -> None:
        check_physx(physx)
        check_stage(physx, stage, None)
        labels = list(session_read(physx, SimObjectType.RIGID_BODY, ["mass"])["mass"])
        labels = natural_order(labels + list(session_read(physx, SimObjectType.ARTICULATION_LINK, ["mass"])["mass"]))
        what = "ovphysx rigid bodies and articulation links (RIGID_BODY and ARTICULATION_LINK reads)"
        paths = [labels[i] for i in match_labels(prim_path, labels, what)]
        self._start(physx, paths)
        try:
            first = self._column("poses", TensorType.RIGID_BODY_POSE, wp.transformf, paths)
            super().__init__(
                prim_path,
                paths,
                device=binding_device(first.binding, device),
                quat_sign=quat_sign,
                quat_order=quat_order,
            )
            for name, (tensor_type, _kind, dtype) in self._QUANTITIES.items():
                if name != "poses":
                    self._column(name, tensor_type, dtype, paths)
        except BaseException:
            self._finalizer()
            raise

    def _source(self, what: str) -> tuple[Any, wp.array, list[Any]]:
        column = self._columns[what]
        return self._QUANTITIES[what][1], column.table, [self._fill(column)]


class OvPhysxArticulationView(OvPhysxSource, ArticulationView):
    """Articulations of an ovphysx scene (N envs' copies of one robot), by root prim path or pattern.

    Args:
        prim_path: Articulation prims (those carrying ``PhysicsArticulationRootAPI``): a path, a pattern
            (``/World/envs/env_.*/Robot``) or a list of them; rows in natural path order, as for
            :class:`OvPhysxRigidBodyView`.
        physx: The ``ovphysx.PhysX`` instance, its stage attached.
        stage: The attached ``ovstage.Stage``: the view reads each joint's ``physics:body0`` / ``physics:body1``
            from it once, to report every DOF parent to child.
        device: Must be the device ovphysx serves the articulations on, or None.
        quat_sign: ``"positive_w"`` (orientations with ``w >= 0``, the default) or ``"engine"`` (ovphysx's sign).
        quat_order: ``"xyzw"`` (the default) or ``"wxyz"``: the order of the orientations returned.

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

    def __init__(
        self,
        prim_path: str | Sequence[str],
        *,
        physx: Any,
        stage: Any,
        device: str | None = None,
        quat_sign: str = "positive_w",
        quat_order: str = "xyzw",
    ) -> None:
        check_physx(physx)
        check_stage(physx, stage, "the ovphysx articulation view reads each joint's body order from the stage")
        import ovstage

        art = SimObjectType.ARTICULATION
        labels = natural_order(session_read(physx, art, ["dofCount"])["dofCount"])
        what = "ovphysx articulations (ARTICULATION reads)"
        links = (lambda: list(session_read(physx, SimObjectType.ARTICULATION_LINK, ["mass"])["mass"]), _LINK_HINT)
        paths = [labels[i] for i in match_labels(prim_path, labels, what, elsewhere=links)]
        pd = ovstage.PathDictionary(stage)
        handles = [pd.intern_path(p) for p in paths]
        meta = session_read(physx, art, ["isFixedBase", "dofCount", "linkCount", "dofJointPath", "dofAxisIndex"],
                             prims=handles, paths=frozenset({"dofJointPath"}))  # fmt: skip
        joints = {p: list(meta["dofJointPath"][p]) for p in paths}
        axes = {p: [int(a) for a in np.ravel(meta["dofAxisIndex"][p])[: len(joints[p])]] for p in paths}
        first = paths[0]

        def signature(p: str) -> tuple:
            return (bool(meta["isFixedBase"][p]), int(meta["linkCount"][p]), [leaf_name(j) for j in joints[p]], axes[p])

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
        bodies = joint_bodies(stage, sorted({j for p in paths for j in joints[p]}))
        self._start(physx, {*paths, *bodies, *(b for pair in bodies.values() for b in pair if b)})
        try:
            dof = self._column("dof_positions", TensorType.ARTICULATION_DOF_POSITION, wp.float32, paths)
            super().__init__(
                prim_path, paths, device=binding_device(dof.binding, device), quat_sign=quat_sign, quat_order=quat_order
            )
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
        leaves = [leaf_name(j) for j in joints[first]]
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
        jac = session_read(physx, SimObjectType.ARTICULATION, ["jacobian", "jacobianShape"], prims=[handle])
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
                b0, b1 = (link_of.get(leaf_name(b)) if b else None for b in bodies[joint])
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
            # one layout: one table twice; ovphysx always gives efforts
            arrays = [q.table, self._fill(q), self._fill(qd), self._fill(f), self._sign, 1]
            return gather_joint_state, q.table, arrays
        column = self._columns.get(what)
        if column is None:
            raise NotImplementedError(f"{self!r}: {what}")
        if what.startswith("dof_"):
            return gather_dof_values, column.table, [self._fill(column), self._sign]
        kernel = gather_transforms if what.endswith("poses") else gather_twists
        return kernel, column.table, [self._fill(column)]

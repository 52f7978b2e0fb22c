# SPDX-License-Identifier: Apache-2.0
"""Typed physics views on Newton: rigid bodies and articulations, read from the model and the simulation state.

Prims are found by their labels in the model (``model.body_label``, ``model.articulation_label``: the prim paths when
the model was built from USD, or what the builder was given), so no stage is needed. Each getter is one gather launch
from ``state.body_q`` / ``body_qd`` / ``joint_q`` / ``joint_qd``, ``control.joint_f`` or the model's mass properties.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import warp as wp

try:
    import newton
except ImportError as exc:  # the optional extra frameview[newton]
    raise ImportError(
        "the Newton physics views need newton: install frameview[newton] (newton, newton-usd-schemas)", name=exc.name
    ) from exc

from .._core.launch import RecordedLaunch
from .._core.rows import INDEXED, Rows
from ..physics.base import ArticulationView, PhysicsView, RigidBodyView
from ..physics.kernels import gather_joint_state, gather_transforms, gather_twists, gather_values
from ..physics.labels import leaf_name, match_labels
from ..physics.write_kernels import check_write, scatter_dof_values, scatter_root_values
from .engine import NewtonEngine

__all__ = ["NewtonArticulationView", "NewtonRigidBodyView"]

_EFFORT_SOURCE = (
    "newton: control.joint_f, the generalized forces applied to the joints (feed-forward efforts), not the force a "
    "PD drive or actuator computes inside the solver"
)


def _qdd_hint() -> str:
    version = str(getattr(newton, "__version__", ""))
    parts = version.split(".")
    modern = len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit() and (int(parts[0]), int(parts[1])) >= (1, 7)
    how = (
        "newton >= 1.7 computes them as a solver observable: allocate obs = solver.observables({'body_qdd'}), step "
        "with solver.step(..., observables=obs), and pass accelerations=obs (or a callable returning it) to the view"
        if modern
        else "newton < 1.7 keeps them in the state: call model.request_state_attributes('body_qdd') before creating "
        "the states, and step with a solver that fills them (MuJoCo Warp)"
    )
    return f"the view has no body accelerations (no accelerations= given, and state.body_qdd is None): {how}"


def _labels(model: Any, kind: str) -> list[str]:
    labels = getattr(model, f"{kind}_label", None)
    if labels is None:  # older newton spelt them *_key
        labels = getattr(model, f"{kind}_key", None)
    if labels is None:
        raise TypeError(f"model: the Newton model has no {kind}_label list; expected newton >= 1.6")
    return [str(label) for label in labels]


def _table(rows: Sequence[Sequence[int]], device: Any) -> wp.array:
    return wp.array(np.asarray(rows, dtype=np.int32).reshape(len(rows), -1), dtype=wp.int32, device=device)


class _NewtonSource(PhysicsView):
    """The engine handles shared by the Newton views (:class:`~frameview.newton.engine.NewtonEngine`): the model,
    state and control, each the object or a callable returning the current one (Isaac Lab's ``NewtonManager``
    getters), the kinematics hook every read runs first, and when the view is stale."""

    _engine: NewtonEngine

    @property
    def backend(self) -> str:
        return "newton"

    @property
    def model(self) -> Any:
        """The ``newton.Model`` the view was built from."""
        return self._engine.model

    def _check_current(self) -> None:
        self._engine.check_current()

    def _before_read(self) -> None:
        self._engine.fresh()

    def _state(self) -> Any:
        return self._engine.state()

    def _joint_f(self) -> wp.array | None:
        control = self._engine.control()
        return None if control is None else control.joint_f

    def _release(self) -> None:
        self._engine.release()

class NewtonRigidBodyView(_NewtonSource, RigidBodyView):
    """Rigid bodies of a Newton model (free bodies and articulation links alike), by prim path or pattern.

    Example:
        >>> cubes = fv.NewtonRigidBodyView("/World/envs/env_.*/Cube", model=model,  # doctest: +SKIP
        ...                                state=lambda: sim.state)
        >>> pos, quat = cubes.get_world_poses()  # (N,) vec3f metres, (N,) quatf xyzw, w >= 0

    Args:
        prim_path: Body labels: a path, a pattern (``/World/envs/env_.*/Cube``) or a list of them.
        model: The ``newton.Model``, or a callable returning the current one (a view made from a callable raises
            :class:`~frameview.StaleViewError` once it returns another model).
        state: The ``newton.State`` to read, or a callable returning the current one (solvers swap states).
        control: Unused by rigid bodies (accepted so that one set of engine arguments builds every view).
        forward: A callable run before each read (forward kinematics after a reset wrote joint coordinates);
            ``None``: Isaac Lab's ``NewtonManager.forward`` when the handles are Isaac Lab's
            (:doc:`newton`), else nothing.
        accelerations: Where :meth:`~frameview.RigidBodyView.get_accelerations` reads body accelerations: the
            solver's observables (``solver.observables({"body_qdd"})``, newton >= 1.7: an object with ``body_qdd``),
            a ``(body_count,)`` ``wp.spatial_vectorf`` array, or a callable returning either; ``None``:
            ``state.body_qdd`` (newton < 1.7, after ``model.request_state_attributes("body_qdd")``).
        device: Must be the model's device, or None.
        quat_sign: ``"positive_w"`` (orientations with ``w >= 0``, the default) or ``"engine"`` (the sign Newton
            holds, as Isaac Lab's data gives it).
        quat_order: ``"xyzw"`` (the default) or ``"wxyz"``: the order of the orientations returned.

    Velocities are ``state.body_qd``: linear velocity of the centre of mass and angular velocity, world frame.
    """

    def __init__(
        self,
        prim_path: str | Sequence[str],
        *,
        model: Any,
        state: Any,
        control: Any = None,
        forward: Any = None,
        accelerations: Any = None,
        device: str | None = None,
        quat_sign: str = "positive_w",
        quat_order: str = "xyzw",
    ) -> None:
        engine = NewtonEngine(f"NewtonRigidBodyView({prim_path!r})", model, state, control, forward)
        current = engine.model
        labels = _labels(current, "body")
        bodies = match_labels(prim_path, labels, "Newton bodies (model.body_label)")
        super().__init__(
            prim_path,
            [labels[b] for b in bodies],
            device=_device(current, device),
            quat_sign=quat_sign,
            quat_order=quat_order,
        )
        self._engine = engine
        engine.name(repr(self))
        self._table = _table([[b] for b in bodies], self._device)
        self._accelerations = accelerations

    def _body_qdd(self) -> wp.array:
        source = self._accelerations
        value = source() if callable(source) and not isinstance(source, wp.array) else source
        if value is None:
            value = getattr(self._state(), "body_qdd", None)
        elif not isinstance(value, wp.array):
            value = getattr(value, "body_qdd", value)  # newton's solver observables hold it as body_qdd
        if value is None:
            raise NotImplementedError(f"{self!r}: {_qdd_hint()}")
        if not isinstance(value, wp.array) or value.dtype != wp.spatial_vectorf or value.shape != (
            self._engine.body_count,
        ):
            got = (f"a {value.dtype.__name__} array of shape {value.shape}" if isinstance(value, wp.array)
                   else f"a {type(value).__name__}")  # fmt: skip
            raise TypeError(
                f"accelerations: expected a ({self._engine.body_count},) wp.spatial_vectorf array (the solver "
                f"observables' body_qdd), got {got}"
            )
        return value

    def _source(self, what: str) -> tuple[Any, wp.array, list[Any]]:
        if what == "poses":
            return gather_transforms, self._table, [self._state().body_q]
        if what == "velocities":
            return gather_twists, self._table, [self._state().body_qd]
        if what == "accelerations":
            return gather_twists, self._table, [self._body_qdd()]
        model = self._engine.model
        array = {"masses": model.body_mass, "inv_masses": model.body_inv_mass, "inertias": model.body_inertia,
                 "coms": model.body_com}[what]  # fmt: skip
        return gather_values, self._table, [array]

    def _release(self) -> None:
        super()._release()
        self._accelerations = None


_LINK_HINT = (
    "a rigid body (a link), not an articulation root: read links with a rigid-body view (make_rigid_body_view, "
    "NewtonRigidBodyView), or name the articulation root (model.articulation_label) for an articulation view"
)


def _device(model: Any, device: str | None) -> Any:
    model_device = wp.get_device(model.device)
    if device is not None and wp.get_device(device) != model_device:
        raise ValueError(
            f"device: the Newton model lives on {str(model_device)!r}, the view asks for {device!r}; pass "
            f"device={str(model_device)!r} (or None)"
        )
    return model_device


class NewtonArticulationView(_NewtonSource, ArticulationView):
    """Articulations of a Newton model (N envs' copies of one robot), by root prim path or pattern.

    Example:
        >>> robots = fv.NewtonArticulationView("/World/envs/env_.*/Robot", model=model,  # doctest: +SKIP
        ...                                    state=lambda: sim.state, control=sim.control)
        >>> q = robots.get_dof_positions()  # (N, dof_count) float32, radians / metres, in robots.dof_names order
        >>> state = robots.joint_state_reader().read(indices=env_ids)  # positions, velocities, efforts at once

    Args:
        prim_path: Articulation labels (``model.articulation_label``): a path, a pattern
            (``/World/envs/env_.*/Robot``) or a list of them.
        model: The ``newton.Model``, or a callable returning the current one.
        state: The ``newton.State`` to read, or a callable returning the current one.
        control: The ``newton.Control`` whose ``joint_f`` the efforts report (or a callable); ``None``:
            :meth:`~frameview.ArticulationView.get_dof_efforts` raises and a joint-state reading has ``efforts=None``.
        forward: A callable run before each read (forward kinematics after a reset wrote joint coordinates);
            ``None``: Isaac Lab's ``NewtonManager.forward`` when the handles are Isaac Lab's
            (:doc:`newton`), else nothing.
        device: Must be the model's device, or None.
        quat_sign: ``"positive_w"`` (orientations with ``w >= 0``, the default) or ``"engine"`` (the sign Newton
            holds, as Isaac Lab's data gives it).
        quat_order: ``"xyzw"`` (the default) or ``"wxyz"``: the order of the orientations returned.

    DOFs are the joints' ``joint_qd`` entries in the model's joint order (the articulation order), without the
    root's free joint; revolute, prismatic and D6 joints (one coordinate per DOF) are read, a ball joint or a free
    joint below the root is refused. Links are the joints' child bodies, root first.
    """

    effort_source = _EFFORT_SOURCE

    def __init__(
        self,
        prim_path: str | Sequence[str],
        *,
        model: Any,
        state: Any,
        control: Any = None,
        forward: Any = None,
        device: str | None = None,
        quat_sign: str = "positive_w",
        quat_order: str = "xyzw",
    ) -> None:
        engine = NewtonEngine(f"NewtonArticulationView({prim_path!r})", model, state, control, forward)
        current = engine.model
        art_labels = _labels(current, "articulation")
        rows = match_labels(prim_path, art_labels, "Newton articulations (model.articulation_label)",
                            elsewhere=(lambda: _labels(current, "body"), _LINK_HINT))  # fmt: skip
        topo = _Topology(current)
        layouts = [topo.layout(a, art_labels[a]) for a in rows]
        first = layouts[0]
        for a, layout in zip(rows, layouts, strict=True):
            if layout.signature != first.signature:
                raise ValueError(
                    f"prim_path {prim_path!r}: articulation {art_labels[a]!r} differs from {art_labels[rows[0]]!r} "
                    f"({layout.describe()} vs {first.describe()}); a view holds copies of one articulation"
                )
        super().__init__(
            prim_path,
            [art_labels[a] for a in rows],
            device=_device(current, device),
            quat_sign=quat_sign,
            quat_order=quat_order,
        )
        self._engine = engine
        engine.name(repr(self))
        self._dof_names, self._dof_types = first.dof_names, first.dof_types
        self._link_names, self._fixed_base = first.link_names, first.fixed_base
        self._root = _table([[lay.links[0]] for lay in layouts], self._device)
        self._links = _table([lay.links for lay in layouts], self._device)
        self._q = _table([lay.q for lay in layouts], self._device)
        self._qd = _table([lay.qd for lay in layouts], self._device)
        self._dof_sign = wp.ones(max(len(first.qd), 1), dtype=wp.float32, device=self._device)
        self._no_f32 = wp.empty(0, dtype=wp.float32, device=self._device)
        self._writes = _ResetWrites(current, rows, [lay.root_joint for lay in layouts], self._device)

    @property
    def has_efforts(self) -> bool:
        return not self._closed and self._joint_f() is not None

    def _efforts(self) -> wp.array:
        joint_f = self._joint_f()
        if joint_f is None:
            raise NotImplementedError(
                f"{self!r}: DOF efforts are Newton's control.joint_f; create the view with control=<the newton.Control "
                "the simulation steps with> (or a callable returning it, e.g. Isaac Lab's NewtonManager.get_control)"
            )
        return joint_f

    def _apply_write(self, what: str, rows: Rows, data: list[wp.array | None], checked: bool) -> None:
        """Scatter into the current state's ``joint_q`` / ``joint_qd``, then forward kinematics of the
        articulations written: marked for Isaac Lab's ``NewtonManager`` (its next ``forward()``, run by every read
        of every view, evaluates them with the solver's own kinematics and resets their worlds' solver state), else
        ``newton.eval_fk`` over exactly those articulations, at once."""
        state = self._state()
        self._writes.write(what, rows, data, checked, state, self, self._engine)

    def _source(self, what: str) -> tuple[Any, wp.array, list[Any]]:
        if what == "root_poses":
            return gather_transforms, self._root, [self._state().body_q]
        if what == "root_velocities":
            return gather_twists, self._root, [self._state().body_qd]
        if what == "link_poses":
            return gather_transforms, self._links, [self._state().body_q]
        if what == "link_velocities":
            return gather_twists, self._links, [self._state().body_qd]
        if what == "dof_positions":
            return gather_values, self._q, [self._state().joint_q]
        if what == "dof_velocities":
            return gather_values, self._qd, [self._state().joint_qd]
        if what == "dof_efforts":
            return gather_values, self._qd, [self._efforts()]
        if what == "joint_state":
            state, joint_f = self._state(), self._joint_f()
            efforts = (self._no_f32, 0) if joint_f is None else (joint_f, 1)
            return (
                gather_joint_state,
                self._q,
                [self._qd, state.joint_q, state.joint_qd, efforts[0], self._dof_sign, efforts[1]],
            )
        raise NotImplementedError(f"{self!r}: {what}")


class _Layout:
    """One articulation's links and DOFs: engine indices, names and types."""

    def __init__(self) -> None:
        self.links: list[int] = []
        self.link_names: tuple[str, ...] = ()
        self.q: list[int] = []
        self.qd: list[int] = []
        self.dof_names: tuple[str, ...] = ()
        self.dof_types: tuple[str, ...] = ()
        self.fixed_base = False
        self.root_joint = -1

    @property
    def signature(self) -> tuple:
        return (self.link_names, self.dof_names, self.dof_types, self.fixed_base)

    def describe(self) -> str:
        base = "fixed" if self.fixed_base else "floating"
        return f"{len(self.links)} links, DOFs {list(self.dof_names)}, {base} base"


class _Topology:
    """The model's joint arrays on the host, read once per view."""

    def __init__(self, model: Any) -> None:
        self.start = model.articulation_start.numpy()
        self.joint_type = model.joint_type.numpy()
        self.joint_parent = model.joint_parent.numpy()
        self.joint_child = model.joint_child.numpy()
        self.q_start = model.joint_q_start.numpy()
        self.qd_start = model.joint_qd_start.numpy()
        self.dof_dim = model.joint_dof_dim.numpy()
        self.joint_labels = _labels(model, "joint")
        self.body_labels = _labels(model, "body")

    def layout(self, a: int, label: str) -> _Layout:
        jt = newton.JointType
        out = _Layout()
        joints = range(int(self.start[a]), int(self.start[a + 1]))
        if not joints:
            raise ValueError(f"articulation {label!r} has no joints")
        names: list[str] = []
        types: list[str] = []
        out.root_joint = joints[0]
        for j in joints:
            kind, name = int(self.joint_type[j]), leaf_name(self.joint_labels[j])
            out.links.append(int(self.joint_child[j]))
            root = j == joints[0]
            if root and kind in (jt.FREE, jt.DISTANCE):
                continue  # a floating base: the root's six DOFs are the root's pose and velocity
            if root:
                out.fixed_base = int(self.joint_parent[j]) < 0
            q0, q1 = int(self.q_start[j]), int(self.q_start[j + 1])
            d0, d1 = int(self.qd_start[j]), int(self.qd_start[j + 1])
            if kind not in (jt.REVOLUTE, jt.PRISMATIC, jt.D6, jt.FIXED) or q1 - q0 != d1 - d0:
                raise ValueError(
                    f"articulation {label!r}: joint {self.joint_labels[j]!r} is a {jt(kind).name} joint, whose "
                    "coordinates are not one per DOF; the articulation views read revolute, prismatic and D6 joints"
                )
            lin = int(self.dof_dim[j][0]) if kind == jt.D6 else int(kind == jt.PRISMATIC)
            for k in range(d1 - d0):
                out.q.append(q0 + k)
                out.qd.append(d0 + k)
                names.append(name if d1 - d0 == 1 else f"{name}:{k}")
                types.append("translation" if k < lin else "rotation")
        if not names:
            raise ValueError(f"articulation {label!r} has no DOFs to read (every joint is fixed)")
        out.link_names = tuple(leaf_name(self.body_labels[b]) for b in out.links)
        out.dof_names, out.dof_types = tuple(names), tuple(types)
        return out


class _ResetWrites:
    """A Newton articulation view's reset writes: its per-row tables of the root's free joint, the articulation and
    world of each row, the claims buffer of the device checks and the forward-kinematics mask, made once."""

    def __init__(self, model: Any, arts: Sequence[int], root_joints: Sequence[int], device: Any) -> None:
        n = len(arts)
        self._device = device
        self._model = model
        q_start, qd_start = model.joint_q_start.numpy(), model.joint_qd_start.numpy()
        x_p, x_c = model.joint_X_p.numpy(), model.joint_X_c.numpy()
        roots = np.asarray(root_joints, dtype=np.int64)
        self.q_start = wp.array(q_start[roots].astype(np.int32), dtype=wp.int32, device=device)
        self.qd_start = wp.array(qd_start[roots].astype(np.int32), dtype=wp.int32, device=device)
        self.root_body = wp.array(model.joint_child.numpy()[roots].astype(np.int32), dtype=wp.int32, device=device)
        self.joint_frame = wp.array(x_p[roots], dtype=wp.transformf, device=device)
        self.child_frame = wp.array(x_c[roots], dtype=wp.transformf, device=device)
        self.art = wp.array(np.asarray(arts, dtype=np.int32), dtype=wp.int32, device=device)
        world = getattr(model, "articulation_world", None)
        art_world = world.numpy() if world is not None else np.full(model.articulation_count, -1)
        self.art_world = wp.array(art_world.astype(np.int32), dtype=wp.int32, device=device)
        self.claims = wp.zeros(n, dtype=wp.int32, device=device)
        self.fk_mask = wp.zeros(model.articulation_count, dtype=wp.bool, device=device)
        self.no_world = wp.empty(0, dtype=wp.bool, device=device)
        self.no_rows = wp.empty((0, 0), dtype=wp.float32, device=device)
        self.no_index = wp.empty(0, dtype=wp.int32, device=device)
        self.no_mask = wp.empty(0, dtype=wp.bool, device=device)
        self._cmds: dict[tuple, RecordedLaunch] = {}
        self._base: Any = _UNSET  # Isaac Lab's NewtonManager base class behind the engine, found on the first write

    def _launch(self, kernel: Any, key: tuple, dim: Any, params: list) -> None:
        """One recorded launch per kernel and call shape (only changed parameters are packed again)."""
        cmd = self._cmds.get(key)
        if cmd is None:
            cmd = self._cmds[key] = RecordedLaunch(kernel, dim, params, self._device)  # recorded, not launched
        cmd.launch(dim, params)

    def write(self, what: str, rows: Rows, data: list, checked: bool, state: Any, view: Any, engine: Any) -> None:
        status = view._errors.status
        indices = rows.narrow[1] if rows.narrow is not None else (rows.indices if rows.kind == INDEXED
                                                                 else self.no_index)  # fmt: skip
        mask = rows.mask if rows.mask is not None else self.no_mask
        head = [int(rows.kind), indices, mask, view.count]
        shape = (rows.kind, indices.dtype)
        a, b = (self.no_rows if d is None else d for d in data)
        if not checked:  # device inputs: bounds, repeats, finite values first; the scatter writes only if all pass
            self._launch(check_write, ("check", *shape), rows.count,
                         [*head, a, b, int(what == "root_poses"), self.claims, status])  # fmt: skip
        base = self._base
        if base is _UNSET:
            base = self._base = _isaaclab_base_manager(engine.manager)
        if base is not None:  # Isaac Lab: its reset masks, consumed by its next forward() (every view read runs it)
            fk_mask, world_mask = base._fk_reset_mask, base._world_reset_mask
        else:
            fk_mask, world_mask = self.fk_mask, self.no_world
            fk_mask.zero_()
        tail = [self.art, self.art_world, int(not checked), status, self.claims]
        if what == "dof_state":  # positions and velocities in one launch
            self._launch(scatter_dof_values, ("dof", *shape), (rows.count, view.dof_count), [
                *head, view._q, view._qd, a, b, view._dof_sign, *tail, state.joint_q, state.joint_qd, fk_mask,
                world_mask,
            ])  # fmt: skip
        else:
            velocities = what == "root_velocities"
            self._launch(scatter_root_values, ("root", int(velocities), *shape), rows.count, [
                *head, self.qd_start if velocities else self.q_start, self.root_body, self.joint_frame,
                self.child_frame, int(velocities), int(data[0] is not None), a, int(data[1] is not None), b,
                state.body_q, *tail, state.joint_qd if velocities else state.joint_q, fk_mask, world_mask,
            ])  # fmt: skip
        if base is not None:
            base.kinematics_dirty = True
            mark = getattr(base, "_mark_transforms_changed", None)
            if callable(mark):
                mark()
        else:
            import newton

            newton.eval_fk(self._model, state.joint_q, state.joint_qd, state, fk_mask)


_UNSET = object()


def _isaaclab_base_manager(manager: Any) -> Any:
    """Isaac Lab's ``NewtonManager`` base class (whose class attributes hold the reset masks), or ``None``."""
    if manager is None:
        return None
    for cls in getattr(manager, "__mro__", (manager,)):
        if hasattr(cls, "_fk_reset_mask") and hasattr(cls, "_world_reset_mask") and cls.__dict__.get(
            "_fk_reset_mask", None
        ) is not None:
            return cls
    return None

# SPDX-License-Identifier: Apache-2.0
"""The typed physics views' contract: rigid bodies, articulations and the joint-state reader.

A physics view reads what a physics engine holds for N prims of one kind (N envs' robots, N envs' objects) with one
gather launch per getter, straight from the engine's arrays on its device. Backends (Newton, ovphysx) resolve the
prims once, into tables of indices into the engine's arrays (:meth:`PhysicsView._source`); this module checks the
arguments, owns the output buffers and launches.

Conventions are the frame views': quaternions are xyzw, returned with ``w >= 0``; rows are all prims, ``indices``
(any integer dtype, Warp / torch / NumPy / list) or a boolean ``mask`` (rows where it is false are left untouched);
returned arrays are the view's buffers, overwritten by its next call of the same getter and row count. Units are
SI: metres, radians, seconds, kilograms; velocities and accelerations are in the world frame.
"""

from __future__ import annotations

import abc
import threading
import weakref
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import warp as wp

from .._core.arguments import Arguments, ArrayLike, IndicesLike, MaskLike
from .._core.device_errors import DeviceErrors, outside_capture, status_error
from .._core.host import to_numpy
from .._core.launch import RecordedLaunch
from .._core.quat_order import XYZW, quat_order_part
from .._core.rows import MASK, Rows
from .._core.values import check_host_rows, float32_rows, unwrap
from .kernels import gather_transforms

__all__ = [
    "ArticulationView",
    "JointState",
    "JointStateReader",
    "PhysicsView",
    "RigidBodyView",
    "StaleViewError",
]


QUAT_SIGNS = ("positive_w", "engine")
"""The quaternion sign conventions a physics view returns (``quat_sign=``)."""


class StaleViewError(RuntimeError):
    """The engine's model or scene was rebuilt after the view was created (Newton re-finalised, ovphysx reloaded, an
    articulation's topology changed): the view's tables index arrays that no longer exist. Create the view again."""


class JointState(NamedTuple):
    """One reading of a :class:`JointStateReader`: every DOF of every articulation row, in articulation order.

    Attributes:
        names (tuple[str, ...]): The DOF names, one per column.
        positions (wp.array): (M, dof_count) float32, radians (rotation DOFs) or metres (translation DOFs).
        velocities (wp.array): (M, dof_count) float32, rad/s or m/s.
        efforts (wp.array | None): (M, dof_count) float32, N·m or N: the effort the engine reports (see
            :attr:`ArticulationView.effort_source`); ``None`` where the engine gives none (a Newton view made
            without ``control=``: positions and velocities are read all the same).
    """

    names: tuple[str, ...]
    positions: wp.array
    velocities: wp.array
    efforts: wp.array | None


_Outputs = tuple[tuple[wp.array, ...], tuple[wp.array, ...]]


class PhysicsView(abc.ABC):
    """What every typed physics view shares: its prims, device, rows, output buffers, launches and lifetime.

    Args:
        prim_path: What the caller asked for (kept for ``repr``).
        prim_paths: The prims of the view's rows, in row order.
        device: The Warp device of the engine's arrays and of the returned arrays.
        quat_order: ``"xyzw"`` (the default) or ``"wxyz"``: the order of the orientations the view returns (wxyz:
            ``wp.vec4f`` arrays holding w, x, y, z).
    """

    def __init__(
        self,
        prim_path: str | Sequence[str],
        prim_paths: Sequence[str],
        *,
        device: Any,
        quat_sign: str = "positive_w",
        quat_order: str = XYZW,
    ) -> None:
        if quat_sign not in QUAT_SIGNS:
            raise ValueError(f"quat_sign: expected one of {QUAT_SIGNS}, got {quat_sign!r}")
        self._quat_sign = quat_sign
        self._positive_w = int(quat_sign == "positive_w")
        self._pattern = prim_path if isinstance(prim_path, str) else list(prim_path)
        self._prim_paths = tuple(str(p) for p in prim_paths)
        self._device = wp.get_device(device)
        self._closed = False
        self._lock = threading.RLock()
        self._errors = DeviceErrors(self._device)
        self._args = Arguments(self.count, self._device, self._errors, device_rows=True, folds_narrow=True,
                               owner=weakref.ref(self))  # fmt: skip
        self._none_i32 = wp.empty(0, dtype=wp.int32, device=self._device)
        self._none_bool = wp.empty(0, dtype=wp.bool, device=self._device)
        self._outputs: dict[tuple[str, int], _Outputs] = {}
        self._launches: dict[tuple[str, int], RecordedLaunch] = {}
        self._quat_order_part = self._args.quat_order = quat_order_part(quat_order, self._device)

    @property
    def quat_sign(self) -> str:
        """``"positive_w"``: orientations are returned with ``w >= 0`` (the default); ``"engine"``: with the sign
        the engine holds (Isaac Lab's data keeps it; a policy trained on it never saw the flip at ``w = 0``)."""
        return self._quat_sign

    @property
    def count(self) -> int:
        """Number of rows (prims) in the view."""
        return len(self._prim_paths)

    @property
    def prim_paths(self) -> tuple[str, ...]:
        """Paths of the viewed prims, in row order."""
        return self._prim_paths

    @property
    def device(self) -> str:
        """Warp device of the returned arrays (the engine's)."""
        return str(self._device)

    @property
    @abc.abstractmethod
    def backend(self) -> str:
        """The engine, ``"newton"`` or ``"ovphysx"``."""

    @property
    def quat_order(self) -> str:
        """The component order of the orientations the view returns, ``"xyzw"`` (the default) or ``"wxyz"``."""
        return XYZW if self._quat_order_part is None else self._quat_order_part.order

    @property
    def is_closed(self) -> bool:
        """True once :meth:`close` has been called."""
        return self._closed

    @property
    def is_current(self) -> bool:
        """False once the view is closed or the engine's model or scene was rebuilt since the view was made (its next
        call would raise :class:`StaleViewError`): a check without an exception, as a generation counter gives."""
        if self._closed:
            return False
        try:
            self._check_current()
        except StaleViewError:
            return False
        return True

    def __len__(self) -> int:
        return self.count

    def __repr__(self) -> str:
        state = ", closed" if self._closed else ""
        return f"{type(self).__name__}({self._pattern!r}, count={self.count}, backend={self.backend!r}{state})"

    def close(self) -> None:
        """Drop the view's tables and buffers. Idempotent; any later call raises ``RuntimeError``. (A physics view
        leaves nothing on the stage: dropping it without closing is as good.)"""
        with self._lock:
            self._closed = True
            self._outputs.clear()
            self._launches.clear()
            self._release()

    def __enter__(self) -> PhysicsView:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def check(self) -> None:
        """Wait for the view's queued device work and raise the first error it recorded (an index out of range in
        device indices on CUDA is otherwise raised by the view's next call)."""
        with self._lock:
            self._check_usable()
            self._errors.check(status_error("an earlier call", None, self._prim_paths))

    # ---------------------------------------------------------------- the backend's part

    @abc.abstractmethod
    def _source(self, what: str) -> tuple[Any, wp.array, list[Any]]:
        """The gather of getter ``what``: ``(kernel, table, engine arrays)``, read at each call (an engine may swap
        its state arrays between steps). Raises ``NotImplementedError`` for a quantity the engine does not give."""

    def _check_current(self) -> None:  # noqa: B027 - optional hook
        """Raise :class:`StaleViewError` when the engine's model or scene was rebuilt since the view was made."""

    def _before_read(self) -> None:  # noqa: B027 - optional hook
        """Run before each getter, once the view is usable (Newton: pending forward kinematics of reset envs)."""

    def _release(self) -> None:  # noqa: B027 - optional hook
        """Drop the backend's references to the engine (``close``)."""

    # ---------------------------------------------------------------- the shared call

    def _check_usable(self) -> None:
        if self._closed:
            raise RuntimeError(f"{self!r} is closed: create a new view to keep reading these prims")
        self._check_current()

    def _read(
        self, what: str, indices: IndicesLike, mask: MaskLike, dtypes: tuple[Any, ...], columns: int
    ) -> tuple[wp.array, ...]:
        """Gather ``what`` for the call's rows into the view's ``dtypes`` buffers of ``(rows, columns)`` (returned
        flat, ``(rows,)``, when ``columns`` is 0): one launch."""
        with self._lock:
            self._errors.forget_capturing()
            try:
                self._check_usable()
                self._before_read()
                rows = self._args.prepare(indices, mask, fold=True)  # device indices of any dtype: as they are
                launch_outs, user_outs = self._buffers(what, rows.count, dtypes, columns)
                if rows.count:
                    self._launch(what, rows, launch_outs, max(columns, 1))
                if self._quat_order_part is not None and wp.quatf in dtypes:  # quat_order="wxyz": one launch more
                    return (user_outs[0], self._quat_order_part.outputs(user_outs[1], rows.mask))
                return user_outs
            finally:
                self._errors.forget_capturing()

    def _buffers(self, what: str, rows: int, dtypes: tuple[Any, ...], columns: int) -> _Outputs:
        key = (what, rows)
        cached = self._outputs.get(key)
        if cached is None:
            outside_capture(repr(self), self._device, self._errors, f"its {what} output buffers")
            if len(self._outputs) >= 64:  # many row counts (indexed reads of every size): start again
                self._outputs.clear()
            shape = (rows, max(columns, 1))
            launch_outs = tuple(wp.zeros(shape, dtype=dt, device=self._device) for dt in dtypes)
            user_outs = launch_outs if columns else tuple(a.reshape((rows,)) for a in launch_outs)
            cached = self._outputs[key] = (launch_outs, user_outs)
        return cached

    def _launch(self, what: str, rows: Rows, outs: tuple[wp.array, ...], columns: int) -> None:
        kernel, table, arrays = self._source(what)
        if rows.narrow is not None:  # the caller's int64 / strided indices: read by the gather itself
            indices = rows.narrow[1]
        else:
            indices = rows.indices if rows.indices is not None else self._none_i32
        mask = rows.mask if rows.mask is not None else self._none_bool
        if kernel is gather_transforms:
            arrays = [*arrays, self._positive_w]
        params = [rows.kind, indices, mask, self.count, table, *arrays, self._errors.status, *outs]
        dim = (rows.count, columns)
        key = (what, rows.kind, indices.dtype)  # one recorded launch per overload
        cmd = self._launches.get(key)
        if cmd is None:
            self._launches[key] = RecordedLaunch(kernel, dim, params, self._device)
            self._launches[key].launch(dim, params)
        else:
            cmd.launch(dim, params)
        if not rows.checked:  # device indices: checked by the kernel, reported through the status word
            self._errors.settle(status_error(what, rows, self._prim_paths), now=False)


    # ---------------------------------------------------------------- reset writes

    def _write_rows(self, what: str, indices: IndicesLike, mask: MaskLike, values: list[tuple[Any, str, int]]) -> None:
        """Check a reset write's rows and data (``(value or None, name, width)`` each), then the backend's
        :meth:`_apply_write`: host inputs are checked here and raise at once; device inputs by the write's own
        kernels (CUDA: reported by the next call or :meth:`check`). All rows or none are written."""
        with self._lock:
            self._errors.forget_capturing()
            try:
                self._check_usable()
                self._before_read()  # kept components and forward kinematics start from the engine's current state
                rows = self._args.prepare(indices, mask, write=True, fold=True)
                data: list[tuple[wp.array | None, bool]] = []
                for value, name, width in values:
                    data.append(self._write_data(value, name, width, rows, quat=name == "orientations"))
                if rows.count == 0 or all(array is None for array, _ in data):
                    return
                checked = rows.checked and all(host for _array, host in data)
                self._apply_write(what, rows, [array for array, _ in data], checked)
                call = f"set_{what}"
                self._errors.settle(status_error(call, rows, self._prim_paths), now=checked)
            finally:
                self._errors.forget_capturing()

    def _write_data(self, value: Any, name: str, width: int, rows: Rows, quat: bool) -> tuple[wp.array | None, bool]:
        """One argument of a write as an (M, width) float32 array on the device, and whether the host checked it."""
        if value is None:
            return None, True
        arr, from_host = float32_rows(unwrap(value), name, width, self._device, True)
        if arr.shape[0] != rows.count:
            raise ValueError(f"{name}: expected shape ({rows.count}, {width}), got {tuple(arr.shape)}")
        if from_host:
            host = arr if isinstance(arr, np.ndarray) else to_numpy(arr)
            read = np.flatnonzero(to_numpy(rows.mask)) if rows.kind == MASK else None
            check_host_rows(host, read, name, quat)
            if isinstance(arr, np.ndarray):
                arr = wp.array(host, dtype=wp.float32, device=self._device)
        if quat and self._quat_order_part is not None:  # quat_order="wxyz": reordered once, into a view buffer
            arr = self._quat_order_part.float_rows_input(arr, self._args.outputs("quat_order_in", wp.quatf, rows.count))
        return arr, from_host

    def _apply_write(self, what: str, rows: Rows, data: list[wp.array | None], checked: bool) -> None:
        """Write ``data`` (one (M, width) float32 array or ``None`` per argument) for ``rows``; ``checked``: every
        input was checked on the host. Engines that hold no writable state raise ``NotImplementedError``."""
        raise NotImplementedError(
            f"{self!r}: the {self.backend} views do not write the engine's state; write it through the engine's own "
            "API (ovphysx: its write bindings), then read through the view"
        )


class RigidBodyView(PhysicsView):
    """N rigid bodies of an engine: poses, world-frame velocities and accelerations, and mass properties.

    The getters take ``indices`` or ``mask`` (see :doc:`physics`) and return the view's buffers.
    """

    def get_world_poses(self, indices: IndicesLike = None, mask: MaskLike = None) -> tuple[wp.array, wp.array]:
        """World poses of the bodies' frames (the body origin, not the centre of mass).

        Returns:
            ``(positions, orientations)``: (M,) ``wp.vec3f`` metres and (M,) ``wp.quatf`` **xyzw**, ``w >= 0``
            (``quat_order="wxyz"``: (M,) ``wp.vec4f``, w, x, y, z).
        """
        return self._read("poses", indices, mask, (wp.vec3f, wp.quatf), 0)  # type: ignore[return-value]

    def get_velocities(self, indices: IndicesLike = None, mask: MaskLike = None) -> tuple[wp.array, wp.array]:
        """Linear velocity of the centre of mass and angular velocity, both in the world frame.

        Returns:
            ``(linear, angular)``: (M,) ``wp.vec3f`` each, m/s and rad/s.
        """
        return self._read("velocities", indices, mask, (wp.vec3f, wp.vec3f), 0)  # type: ignore[return-value]

    def get_accelerations(self, indices: IndicesLike = None, mask: MaskLike = None) -> tuple[wp.array, wp.array]:
        """Linear acceleration of the centre of mass and angular acceleration, in the world frame.

        Returns:
            ``(linear, angular)``: (M,) ``wp.vec3f`` each, m/s² and rad/s².

        Raises:
            NotImplementedError: The engine does not compute accelerations as configured (the message says how to
                turn them on).
        """
        return self._read("accelerations", indices, mask, (wp.vec3f, wp.vec3f), 0)  # type: ignore[return-value]

    def get_masses(self, indices: IndicesLike = None, mask: MaskLike = None) -> wp.array:
        """Masses (M,) float32, kg."""
        return self._read("masses", indices, mask, (wp.float32,), 0)[0]

    def get_inv_masses(self, indices: IndicesLike = None, mask: MaskLike = None) -> wp.array:
        """Inverse masses (M,) float32, 1/kg (0 for a kinematic or static body)."""
        return self._read("inv_masses", indices, mask, (wp.float32,), 0)[0]

    def get_inertias(self, indices: IndicesLike = None, mask: MaskLike = None) -> wp.array:
        """Inertia tensors about the centre of mass, in the body frame: (M,) ``wp.mat33f``, kg·m²."""
        return self._read("inertias", indices, mask, (wp.mat33f,), 0)[0]

    def get_coms(self, indices: IndicesLike = None, mask: MaskLike = None) -> wp.array:
        """Centre-of-mass offsets in the body frame: (M,) ``wp.vec3f``, metres."""
        return self._read("coms", indices, mask, (wp.vec3f,), 0)[0]


class ArticulationView(PhysicsView):
    """N articulations of one topology (N envs' robots): root, links and DOFs, in articulation order.

    DOFs are the articulation's joint degrees of freedom without the root's free joint, in the engine's articulation
    order; links are its bodies, root first. Every row has the same DOF and link names (the view refuses a mix).

    Example:
        >>> cfg = fv.PhysicsViewCfg(prim_path="/World/envs/env_.*/Robot", backend="newton")  # doctest: +SKIP
        >>> robots = fv.make_articulation_view(cfg, model=model, state=lambda: sim.state, control=sim.control)
        >>> robots.dof_names  # ('leg0_joint0', ...), the columns of every DOF array
        >>> q = robots.get_dof_positions(indices=env_ids)  # (M, dof_count) float32, radians / metres
        >>> pos, quat = robots.get_root_poses()  # (N,) vec3f metres, (N,) quatf xyzw, world frame
    """

    _dof_names: tuple[str, ...] = ()
    _dof_types: tuple[str, ...] = ()
    _link_names: tuple[str, ...] = ()
    _fixed_base: bool = False
    effort_source: str = ""
    """What :meth:`~ArticulationView.get_dof_efforts` reports for this engine (e.g. the applied joint forces, not a
    drive's)."""

    @property
    def dof_count(self) -> int:
        """DOFs per articulation (the root's free joint not counted)."""
        return len(self._dof_names)

    @property
    def dof_names(self) -> tuple[str, ...]:
        """DOF names in articulation order, each its joint's name (``name:k`` for the k-th axis of a multi-DOF
        joint)."""
        return self._dof_names

    @property
    def dof_types(self) -> tuple[str, ...]:
        """Per DOF, ``"rotation"`` (radians) or ``"translation"`` (metres)."""
        return self._dof_types

    @property
    def link_count(self) -> int:
        """Links (bodies) per articulation, the root included."""
        return len(self._link_names)

    @property
    def link_names(self) -> tuple[str, ...]:
        """Link names (the last component of each link's prim path), root first, in articulation order."""
        return self._link_names

    @property
    def is_fixed_base(self) -> bool:
        """True when the root is fixed to the world, False for a floating base."""
        return self._fixed_base

    def get_root_poses(self, indices: IndicesLike = None, mask: MaskLike = None) -> tuple[wp.array, wp.array]:
        """World poses of the root links: (M,) ``wp.vec3f`` and (M,) ``wp.quatf`` **xyzw**, ``w >= 0`` (wxyz
        ``wp.vec4f`` with ``quat_order="wxyz"``)."""
        return self._read("root_poses", indices, mask, (wp.vec3f, wp.quatf), 0)  # type: ignore[return-value]

    def get_root_velocities(self, indices: IndicesLike = None, mask: MaskLike = None) -> tuple[wp.array, wp.array]:
        """The root links' centre-of-mass linear and angular velocities, world frame: (M,) ``wp.vec3f`` each."""
        return self._read("root_velocities", indices, mask, (wp.vec3f, wp.vec3f), 0)  # type: ignore[return-value]

    def get_link_poses(self, indices: IndicesLike = None, mask: MaskLike = None) -> tuple[wp.array, wp.array]:
        """World poses of every link: (M, link_count) ``wp.vec3f`` and ``wp.quatf`` **xyzw**, ``w >= 0`` (wxyz
        ``wp.vec4f`` with ``quat_order="wxyz"``)."""
        return self._read("link_poses", indices, mask, (wp.vec3f, wp.quatf), self.link_count)  # type: ignore[return-value]

    def get_link_velocities(self, indices: IndicesLike = None, mask: MaskLike = None) -> tuple[wp.array, wp.array]:
        """Every link's centre-of-mass linear and angular velocity, world frame: (M, link_count) ``wp.vec3f``."""
        return self._read("link_velocities", indices, mask, (wp.vec3f, wp.vec3f), self.link_count)  # type: ignore[return-value]

    def get_dof_positions(self, indices: IndicesLike = None, mask: MaskLike = None) -> wp.array:
        """DOF positions: (M, dof_count) float32, radians / metres."""
        return self._read("dof_positions", indices, mask, (wp.float32,), self.dof_count)[0]

    def get_dof_velocities(self, indices: IndicesLike = None, mask: MaskLike = None) -> wp.array:
        """DOF velocities: (M, dof_count) float32, rad/s / m/s."""
        return self._read("dof_velocities", indices, mask, (wp.float32,), self.dof_count)[0]

    def get_dof_efforts(self, indices: IndicesLike = None, mask: MaskLike = None) -> wp.array:
        """DOF efforts: (M, dof_count) float32, N·m / N (:attr:`effort_source` says which effort)."""
        return self._read("dof_efforts", indices, mask, (wp.float32,), self.dof_count)[0]

    def set_dof_positions(self, positions: ArrayLike, indices: IndicesLike = None, mask: MaskLike = None) -> None:
        """Write DOF positions (a reset), then the articulations written get forward kinematics: their link poses
        follow (Newton: at once, or at the next read where Isaac Lab's manager runs it).

        Args:
            positions: (M, dof_count) radians / metres, in :attr:`dof_names` order (Warp, torch, NumPy, lists).
            indices: Rows to write (any integer dtype, each at most once), ``None`` for all.
            mask: Boolean (N,) selection instead of ``indices``: the data has N rows, masked rows are written.

        Raises:
            IndexError: An index out of range (device indices on CUDA: at the next call or :meth:`check`).
            ValueError: Wrong shape, a non-finite value or a repeated index; nothing is written.
        """
        self.set_dof_state(positions, None, indices, mask)

    def set_dof_velocities(self, velocities: ArrayLike, indices: IndicesLike = None, mask: MaskLike = None) -> None:
        """Write DOF velocities (rad/s / m/s, (M, dof_count)); link velocities follow. See
        :meth:`set_dof_positions`."""
        self.set_dof_state(None, velocities, indices, mask)

    def set_dof_state(
        self,
        positions: ArrayLike | None = None,
        velocities: ArrayLike | None = None,
        indices: IndicesLike = None,
        mask: MaskLike = None,
    ) -> None:
        """Write DOF positions and velocities of the same rows at once (a reset): one forward kinematics for both
        (:meth:`set_dof_positions` then :meth:`set_dof_velocities` run it twice); ``None`` keeps a component."""
        d = self.dof_count
        self._write_rows("dof_state", indices, mask, [(positions, "positions", d), (velocities, "velocities", d)])

    def set_root_poses(
        self,
        positions: ArrayLike | None = None,
        orientations: ArrayLike | None = None,
        indices: IndicesLike = None,
        mask: MaskLike = None,
    ) -> None:
        """Place floating roots in the world (a reset): the root link at ``(positions, orientations)``, the other
        links following through forward kinematics; ``None`` keeps a component.

        Args:
            positions: (M, 3) world positions of the root links, metres.
            orientations: (M, 4) **xyzw** world orientations (wxyz with ``quat_order="wxyz"``; normalised here; a zero
                quaternion is refused).
            indices: Rows to write, ``None`` for all.
            mask: Boolean (N,) selection instead of ``indices``.

        Raises:
            ValueError: A fixed-base articulation (its root does not move), or bad data as for
                :meth:`set_dof_positions`.
        """
        self._check_floating("set_root_poses")
        self._write_rows("root_poses", indices, mask, [(positions, "positions", 3), (orientations, "orientations", 4)])

    def set_root_velocities(
        self,
        linear: ArrayLike | None = None,
        angular: ArrayLike | None = None,
        indices: IndicesLike = None,
        mask: MaskLike = None,
    ) -> None:
        """Set floating roots' velocities, world frame: ``linear`` of the root link's centre of mass (m/s),
        ``angular`` (rad/s), as :meth:`get_root_velocities` reads them; ``None`` keeps a component."""
        self._check_floating("set_root_velocities")
        self._write_rows("root_velocities", indices, mask, [(linear, "linear", 3), (angular, "angular", 3)])

    def _check_floating(self, call: str) -> None:
        if self._fixed_base:
            raise ValueError(
                f"{call}: {self!r} has a fixed base (its root is welded to the world): write its DOFs instead"
            )

    @property
    def has_efforts(self) -> bool:
        """Whether the engine gives DOF efforts to this view (a Newton view needs ``control=``); without them
        :meth:`~ArticulationView.get_dof_efforts` raises and a :class:`JointState` holds ``efforts=None``."""
        return True

    def _joint_state(self, indices: IndicesLike, mask: MaskLike) -> JointState:
        pos, vel, eff = self._read("joint_state", indices, mask, (wp.float32,) * 3, self.dof_count)
        return JointState(self._dof_names, pos, vel, eff if self.has_efforts else None)

    def joint_state_reader(self) -> JointStateReader:
        """A :class:`JointStateReader` over this view's articulations."""
        return JointStateReader(self)


class JointStateReader:
    """The joint-state sensor: every DOF position, velocity and effort of N articulations, with their names, in
    articulation order, in one reading (one launch, on the device, no per-env host work).

    Example:
        >>> cfg = fv.PhysicsViewCfg(prim_path="/World/envs/env_.*/Robot", backend="newton")  # doctest: +SKIP
        >>> joints = fv.make_joint_state_reader(cfg, model=model, state=lambda: sim.state, control=sim.control)
        >>> reading = joints.read(indices=env_ids)  # one launch: positions, velocities, efforts of every DOF
        >>> obs = torch.cat([fv.as_torch(reading.positions), fv.as_torch(reading.velocities)], dim=1)

    Args:
        articulations: The articulations to read (an :class:`ArticulationView`; see
            :func:`frameview.make_joint_state_reader` to make both from a config).
        owns_view: Close ``articulations`` with the reader.
    """

    def __init__(self, articulations: ArticulationView, *, owns_view: bool = False) -> None:
        if not isinstance(articulations, ArticulationView):
            raise TypeError(
                "articulations: expected an ArticulationView (make_articulation_view), got "
                f"{type(articulations).__name__}"
            )
        self._view = articulations
        self._owns_view = owns_view

    @property
    def view(self) -> ArticulationView:
        """The articulation view the reader reads."""
        return self._view

    @property
    def names(self) -> tuple[str, ...]:
        """DOF names, one per column of every reading."""
        return self._view.dof_names

    @property
    def count(self) -> int:
        """Articulations (rows) read."""
        return self._view.count

    @property
    def prim_paths(self) -> tuple[str, ...]:
        """The articulation root prims, in row order."""
        return self._view.prim_paths

    def read(self, indices: IndicesLike = None, mask: MaskLike = None) -> JointState:
        """Read positions, velocities and efforts of every DOF (radians / metres; see :class:`JointState`). Without
        efforts from the engine (a Newton view made without ``control=``), ``efforts`` is ``None`` and positions and
        velocities are read all the same.

        Args:
            indices: Rows to read (any integer dtype), or None for all.
            mask: (count,) bool selecting rows instead; rows where it is false are left untouched.

        Returns:
            A :class:`JointState` of (M, dof_count) float32 arrays on the view's device (the reader's buffers).
        """
        return self._view._joint_state(indices, mask)

    def close(self) -> None:
        """Close the reader (and its view when it made it)."""
        if self._owns_view:
            self._view.close()

    def __enter__(self) -> JointStateReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"JointStateReader({self._view!r}, dofs={len(self.names)})"

# SPDX-License-Identifier: Apache-2.0
"""frameview's typed physics views in Isaac Lab 3's terms (Newton physics): Isaac Lab's manager behind them, its
names, its quaternion sign, its ``ProxyArray`` outputs, and rebuilt after a hard reset.

Example:
    >>> import frameview.isaaclab as fvi  # doctest: +SKIP
    >>> robots = fvi.ArticulationView("{ENV_REGEX_NS}/Robot")  # once physics is ready (e.g. in the env's __init__)
    >>> q = robots.get_dof_positions().torch  # (num_envs, num_joints), robots.joint_names order
    >>> pos, quat = robots.get_link_poses()  # ProxyArrays (num_envs, num_bodies) vec3f / quatf xyzw, engine sign

What the adapter adds to :class:`frameview.NewtonArticulationView` / :class:`~frameview.NewtonRigidBodyView` /
:class:`~frameview.JointStateReader` (which keep their own contract):

- **The engine handles** are Isaac Lab's ``NewtonManager`` getters: nothing to pass, and reads are fresh on the
  reset step (the views run ``NewtonManager.forward()`` first, :mod:`frameview.newton.engine`).
- **Patterns** may use Isaac Lab's ``{ENV_REGEX_NS}`` (``/World/envs/env_.*`` unless ``env_regex_ns=`` says
  otherwise); a pattern that names no Newton prim says what Newton's labels hold.
- **Names**: Isaac Lab's ``joint_names`` / ``body_names`` / ``num_joints`` / ``num_bodies`` / ``num_instances``
  beside frameview's ``dof_names`` / ``link_names``.
- **Quaternion sign**: as the engine holds it (``quat_sign="engine"``, Isaac Lab's data keeps it); frameview's own
  views return ``w >= 0`` unless asked (``quat_sign="positive_w"``).
- **Outputs** are Isaac Lab ``ProxyArray`` s over the views' buffers, made once per buffer: ``.torch`` costs no
  conversion per call. As with every frameview getter, the next call of the same getter overwrites the buffer.
- **Lifetime**: built from the manager's current model; after a hard ``sim.reset()`` (a new model) the next call
  builds the view again over the new model (an info line in the log says so); before physics is ready, a
  ``RuntimeError`` says when to build.

Every other attribute of the frameview view is reachable on the adapter (``set_dof_positions``, ``check``, ...);
arrays it returns come wrapped as ``ProxyArray`` s, a ``JointState`` with its arrays wrapped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import warp as wp

from .adapter import import_isaaclab

__all__ = ["ENV_REGEX_NS", "ArticulationView", "JointStateReader", "RigidBodyView"]

logger = logging.getLogger(__name__)

ENV_REGEX_NS = "/World/envs/env_.*"
"""What Isaac Lab's ``{ENV_REGEX_NS}`` expands to in its interactive scene (``InteractiveScene.env_regex_ns``)."""

_MANAGER = "isaaclab_newton.physics.newton_manager"


def expand_env_ns(prim_path: str | Sequence[str], env_regex_ns: str = ENV_REGEX_NS) -> str | list[str]:
    """``prim_path`` with Isaac Lab's ``{ENV_REGEX_NS}`` replaced by ``env_regex_ns``."""
    if isinstance(prim_path, str):
        return prim_path.replace("{ENV_REGEX_NS}", env_regex_ns)
    return [p.replace("{ENV_REGEX_NS}", env_regex_ns) for p in prim_path]


class _IsaacLabPhysics:
    """A frameview physics view built from Isaac Lab's ``NewtonManager``, rebuilt over a new model, with
    ``ProxyArray`` outputs."""

    _kind = ""  # "articulation" or "rigid_body"

    def __init__(
        self,
        prim_path: str | Sequence[str],
        *,
        quat_sign: str = "engine",
        env_regex_ns: str = ENV_REGEX_NS,
        manager: Any = None,
        **options: Any,
    ) -> None:
        self._prim_path = expand_env_ns(prim_path, env_regex_ns)
        self._manager = manager if manager is not None else import_isaaclab(_MANAGER).NewtonManager
        self._proxy_type = _proxy_type()
        self._options = dict(options, quat_sign=quat_sign)
        self._view: Any = None
        self._proxies: dict[int, tuple[wp.array, Any]] = {}
        self._current()

    # ---------------------------------------------------------------- the view behind

    def _build(self) -> Any:
        from ..newton.bodies import NewtonArticulationView, NewtonRigidBodyView

        manager = self._manager
        if manager.get_model() is None:
            raise RuntimeError(
                f"{type(self).__name__}({self._prim_path!r}): Isaac Lab's Newton model does not exist yet; build the "
                "view once physics is ready (after sim.reset(), e.g. in the env's __init__ or _setup_scene's caller)"
            )
        cls = NewtonArticulationView if self._kind == "articulation" else NewtonRigidBodyView
        try:
            return cls(self._prim_path, model=manager.get_model, state=manager.get_state_0,
                       control=manager.get_control, **self._options)  # fmt: skip
        except ValueError as exc:
            if "matched" not in str(exc) and "match" not in str(exc):
                raise
            raise ValueError(
                f"{exc}. Newton labels each body and articulation with the prim path it was cloned from "
                "(/World/envs/env_<i>/...): check the asset's prim_path in the env config and that the scene is "
                "built (an articulation view names the articulation root, a rigid-body view a body or a link)"
            ) from None

    def _current(self) -> Any:
        view = self._view
        if view is None or not view.is_current:
            if view is not None:
                logger.info("%s(%r): Isaac Lab's Newton model was rebuilt; building the view again",
                            type(self).__name__, self._prim_path)  # fmt: skip
                view.close()
            self._view = view = self._build()
            self._proxies.clear()
        return view

    @property
    def view(self) -> Any:
        """The frameview view behind (current: built again after a hard reset)."""
        return self._current()

    # ---------------------------------------------------------------- Isaac Lab's names

    @property
    def num_instances(self) -> int:
        """Rows (envs' prims) in the view."""
        return self._current().count

    # ---------------------------------------------------------------- everything else, outputs wrapped

    def _wrap(self, value: Any) -> Any:
        if isinstance(value, wp.array):
            cached = self._proxies.get(id(value))
            if cached is None or cached[0] is not value:
                if len(self._proxies) >= 256:
                    self._proxies.clear()
                cached = self._proxies[id(value)] = (value, self._proxy_type(value))
            return cached[1]
        if isinstance(value, tuple) and hasattr(value, "_fields"):  # a JointState
            return type(value)(*(self._wrap(v) for v in value))
        if isinstance(value, tuple):
            return tuple(self._wrap(v) for v in value)
        return value

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        attr = getattr(self._current(), name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            return self._wrap(getattr(self._current(), name)(*args, **kwargs))

        call.__name__ = name
        call.__doc__ = attr.__doc__
        self.__dict__[name] = call  # made once: later lookups find it without __getattr__
        return call

    def close(self) -> None:
        """Close the view behind; a later call builds it again."""
        if self._view is not None:
            self._view.close()
            self._view = None
        self._proxies.clear()

    def __repr__(self) -> str:
        return f"frameview.isaaclab.{type(self).__name__}({self._prim_path!r})"


class ArticulationView(_IsaacLabPhysics):
    """N envs' articulations of Isaac Lab's Newton scene (see the module docstring).

    Args:
        prim_path: The articulation roots: a path or pattern (``{ENV_REGEX_NS}/Robot``), or a list of them.
        quat_sign: ``"engine"`` (the sign Newton holds, as Isaac Lab's data gives it; the default) or
            ``"positive_w"``.
        env_regex_ns: What ``{ENV_REGEX_NS}`` stands for.
        manager: Isaac Lab's ``NewtonManager`` (default: imported from Isaac Lab).
        **options: Passed to :class:`frameview.NewtonArticulationView` (e.g. ``forward=``).
    """

    _kind = "articulation"

    @property
    def joint_names(self) -> list[str]:
        """Isaac Lab's name for :attr:`frameview.ArticulationView.dof_names`."""
        return list(self._current().dof_names)

    @property
    def body_names(self) -> list[str]:
        """Isaac Lab's name for :attr:`frameview.ArticulationView.link_names`."""
        return list(self._current().link_names)

    @property
    def num_joints(self) -> int:
        return self._current().dof_count

    @property
    def num_bodies(self) -> int:
        return self._current().link_count

    def joint_state_reader(self) -> JointStateReader:
        """A :class:`JointStateReader` over these articulations (rebuilt with them)."""
        return JointStateReader(self)


class RigidBodyView(_IsaacLabPhysics):
    """N envs' rigid bodies (free bodies or articulation links) of Isaac Lab's Newton scene; arguments as
    :class:`ArticulationView`, options passed to :class:`frameview.NewtonRigidBodyView` (e.g. ``accelerations=``)."""

    _kind = "rigid_body"

    @property
    def body_names(self) -> list[str]:
        """The bodies' names (the last component of each prim path), one per row."""
        return [p.rsplit("/", 1)[-1] for p in self._current().prim_paths]


class JointStateReader:
    """The joint-state sensor over an :class:`ArticulationView` (or a pattern): every joint's position, velocity and
    effort in one read, as ``ProxyArray`` s, Isaac Lab's joint names.

    Args:
        articulations: An :class:`ArticulationView`, or its ``prim_path`` (then ``**options`` build it).
    """

    def __init__(self, articulations: ArticulationView | str | Sequence[str], **options: Any) -> None:
        owns = not isinstance(articulations, ArticulationView)
        self._articulations = ArticulationView(articulations, **options) if owns else articulations  # type: ignore[arg-type]
        self._owns = owns

    @property
    def joint_names(self) -> list[str]:
        return self._articulations.joint_names

    def read(self, indices: Any = None, mask: Any = None) -> Any:
        """Positions, velocities and efforts (``None`` without a Newton control) of every joint: a
        :class:`frameview.JointState` of ``ProxyArray`` s."""
        art = self._articulations
        return art._wrap(art._current()._joint_state(indices, mask))

    def close(self) -> None:
        if self._owns:
            self._articulations.close()


def _proxy_type() -> Callable[[wp.array], Any]:
    return import_isaaclab("isaaclab.utils.warp").ProxyArray

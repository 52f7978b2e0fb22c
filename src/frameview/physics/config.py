# SPDX-License-Identifier: Apache-2.0
"""PhysicsViewCfg and the factories of the typed physics views: swap engines by changing one config field."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import logging
from collections.abc import Mapping
from typing import Any

from .._core.config_checks import check_device, check_quat_order, config_from_dict
from .base import ArticulationView, JointStateReader, PhysicsView, RigidBodyView

__all__ = [
    "PHYSICS_BACKENDS",
    "PhysicsViewCfg",
    "make_articulation_view",
    "make_joint_state_reader",
    "make_rigid_body_view",
]

logger = logging.getLogger("frameview")

PHYSICS_BACKENDS: dict[str, tuple[str, str, str, str]] = {
    "newton": ("frameview.newton.bodies", "NewtonRigidBodyView", "NewtonArticulationView", "frameview[newton]"),
    "ovphysx": (
        "frameview.ovphysx",
        "OvPhysxRigidBodyView",
        "OvPhysxArticulationView",
        "frameview[ovstage] and ovphysx (pip install --no-deps ovphysx physx-usd-schemas)",
    ),
}
"""Engine name -> (module, rigid-body view class, articulation view class, what to install)."""

_HANDLES = {"model": "newton", "state": "newton", "control": "newton", "physx": "ovphysx"}
"""An engine handle keyword -> the engine that takes it (for the hint when a config names the other engine)."""


def _check_handles(cls: type, backend: str, engine: Mapping[str, Any], options: Mapping[str, Any]) -> None:
    """A clear ``TypeError`` for engine handles the view's constructor does not take, or required ones missing
    (instead of Python's ``__init__() got an unexpected keyword argument``)."""
    params = inspect.signature(cls.__init__).parameters
    keywords = {n for n, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY}
    required = [n for n in keywords if params[n].default is inspect.Parameter.empty]
    given = {*engine, *options}
    unknown = sorted(given - keywords)
    missing = sorted(n for n in required if n not in given)
    if not unknown and not missing:
        return
    needs = " and ".join(f"{n}=" for n in sorted(required))
    optional = sorted(keywords - set(required) - {"device", "quat_order"})
    text = f"PhysicsViewCfg.backend={backend!r} builds {cls.__name__}, which needs {needs}"
    text += f" (optional: {', '.join(f'{n}=' for n in optional)})" if optional else ""
    if missing:
        text += f"; {' and '.join(f'{n}=' for n in missing)} missing"
    if unknown:
        text += f"; it takes no {', '.join(f'{n}=' for n in unknown)}"
        others = sorted({_HANDLES[n] for n in unknown if _HANDLES.get(n, backend) != backend})
        if others:
            handles = "engine handles" if len(unknown) > 1 else "engine handle"
            text += f" ({' / '.join(others)}'s {handles}: set backend={others[0]!r})"
    raise TypeError(text)


@dataclasses.dataclass
class PhysicsViewCfg:
    """What a typed physics view is built from; env configs (YAML/JSON) carry it as a plain dict.

    Example:
        >>> cfg = PhysicsViewCfg.from_dict({"prim_path": "/World/envs/env_.*/Robot", "backend": "newton"})
        >>> robots = make_articulation_view(cfg, model=model, state=state)  # doctest: +SKIP

    Attributes:
        prim_path: A path, a regex pattern per path component, or a list of them: the rigid bodies, or the
            articulation roots.
        backend: The engine: ``"newton"`` or ``"ovphysx"``.
        device: The engine's device, or None to take it from the engine (a mismatch raises).
        quat_order: The component order of the orientations returned: ``"xyzw"`` (the default) or ``"wxyz"``
            (``wp.vec4f`` arrays holding w, x, y, z).
        options: Extra keyword arguments passed to the view's constructor.
    """

    prim_path: str | list[str] = ""
    backend: str = "newton"
    device: str | None = None
    quat_order: str = "xyzw"
    options: dict[str, Any] = dataclasses.field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PhysicsViewCfg:
        """Build from a mapping; unknown keys raise ``ValueError`` listing the known ones."""
        return config_from_dict(cls, data)

    def to_dict(self) -> dict[str, Any]:
        """A plain dict (the inverse of :meth:`from_dict`)."""
        return dataclasses.asdict(self)

    def validate(self) -> None:
        """Check prim_path, backend, quaternion order and device before any engine work.

        Raises:
            ValueError: Empty prim_path, or an unknown backend or quat_order (the message lists the known ones).
            TypeError: prim_path, quat_order or device of the wrong type.
        """
        if not self.prim_path:
            raise ValueError("PhysicsViewCfg.prim_path: expected a path, a pattern or a list of them, got nothing")
        if not isinstance(self.prim_path, (str, list, tuple)):
            raise TypeError(
                f"PhysicsViewCfg.prim_path: expected str or list of str, got {type(self.prim_path).__name__}"
            )
        if self.backend not in PHYSICS_BACKENDS:
            raise ValueError(
                f"PhysicsViewCfg.backend: unknown engine {self.backend!r}; expected one of {sorted(PHYSICS_BACKENDS)}"
            )
        check_quat_order(self.quat_order, "PhysicsViewCfg.quat_order")
        if self.device is not None:
            check_device(self.device, "PhysicsViewCfg.device")


def _make(cfg: PhysicsViewCfg | Mapping[str, Any], which: int, engine: dict[str, Any]) -> PhysicsView:
    if not isinstance(cfg, PhysicsViewCfg):
        cfg = PhysicsViewCfg.from_dict(cfg)
    else:
        cfg.validate()
    module_name, *classes, install = PHYSICS_BACKENDS[cfg.backend]
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ImportError(
            f"PhysicsViewCfg.backend={cfg.backend!r} needs {exc.name or 'a missing package'}: install {install}",
            name=exc.name,
        ) from exc
    cls = getattr(module, classes[which])
    options = dict(cfg.options)
    _check_handles(cls, cfg.backend, engine, options)
    if cfg.quat_order != "xyzw":
        options.setdefault("quat_order", cfg.quat_order)
    view = cls(cfg.prim_path, device=cfg.device, **engine, **options)
    logger.info("frameview: %s on %s (%d prims)", cls.__name__, view.device, view.count)
    return view


def make_rigid_body_view(cfg: PhysicsViewCfg | Mapping[str, Any], **engine: Any) -> RigidBodyView:
    """Build the :class:`RigidBodyView` of ``cfg.backend``.

    Args:
        cfg: A :class:`PhysicsViewCfg` or a plain dict of its fields.
        **engine: The engine's handles: ``model=``, ``state=`` (and ``control=``) for Newton; ``physx=`` for
            ovphysx (see each view class).

    Raises:
        ValueError: A bad config field, or a prim_path that names no body of the engine.
        ImportError: The engine's package is not installed (the message says what to install).
    """
    view = _make(cfg, 0, engine)
    assert isinstance(view, RigidBodyView)
    return view


def make_articulation_view(cfg: PhysicsViewCfg | Mapping[str, Any], **engine: Any) -> ArticulationView:
    """Build the :class:`ArticulationView` of ``cfg.backend`` (``prim_path``: the articulation roots); see
    :func:`make_rigid_body_view` for the arguments."""
    view = _make(cfg, 1, engine)
    assert isinstance(view, ArticulationView)
    return view


def make_joint_state_reader(cfg: PhysicsViewCfg | Mapping[str, Any], **engine: Any) -> JointStateReader:
    """Build a :class:`JointStateReader` over the articulations ``cfg.prim_path`` names (the reader closes its
    view); see :func:`make_rigid_body_view` for the arguments."""
    return JointStateReader(make_articulation_view(cfg, **engine), owns_view=True)

# SPDX-License-Identifier: Apache-2.0
"""FrameViewCfg, the backend registry and make_frame_view: swap backends by changing one config field."""

from __future__ import annotations

import dataclasses
import importlib.util
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from importlib import metadata
from typing import TYPE_CHECKING, Any

from ._core.config_checks import check_device, check_quat_order, config_from_dict

if TYPE_CHECKING:  # pragma: no cover - the return type of make_frame_view, without importing the views
    from .base import BaseFrameView

__all__ = ["FrameViewCfg", "available_backends", "make_frame_view", "register_backend"]

logger = logging.getLogger(__name__)

BackendFactory = Callable[..., Any]
"""``factory(prim_path, *, stage, device, **options) -> BaseFrameView``."""

ENTRY_POINT_GROUP = "frameview.backends"


@dataclasses.dataclass
class FrameViewCfg:
    """What a FrameView is built from; env configs (YAML/JSON) carry it as a plain dict.

    Example:
        >>> cfg = FrameViewCfg.from_dict({"prim_path": "/World/envs/env_.*/Camera", "backend": "fabric"})
        >>> view = make_frame_view(cfg, stage)  # doctest: +SKIP

    Attributes:
        prim_path: A path, a regex pattern per path component (``/World/envs/env_.*/Camera``), or a list of them.
        backend: A registered backend name (:func:`available_backends`): ``"usd"``, ``"fabric"``, ``"newton"``...
        device: Warp device of the returned arrays: ``"cpu"``, ``"cuda"`` or ``"cuda:N"``. :meth:`validate` checks
            that a CUDA device is visible before any stage work (``"no CUDA device is visible; use device='cpu'"``).
        fabric_provider: For the Fabric backend: ``"auto"``, ``"memory"``, ``"ovstage"`` or ``"usdrt"``.
        quat_order: The component order of every orientation the view takes and returns: ``"xyzw"`` (the default:
            Warp's, Newton's and Isaac Lab 3's) or ``"wxyz"`` (Isaac Lab 2.x's: its identity is ``[1, 0, 0, 0]``).
            With ``"wxyz"`` the getters return ``wp.vec4f`` arrays holding (w, x, y, z); see
            :class:`~frameview.BaseFrameView`.
        options: Extra keyword arguments passed to the backend's constructor.
    """

    prim_path: str | list[str] = ""
    backend: str = "fabric"
    device: str = "cpu"
    fabric_provider: str = "auto"
    quat_order: str = "xyzw"
    options: dict[str, Any] = dataclasses.field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FrameViewCfg:
        """Build from a mapping (a YAML/JSON section); unknown keys raise ``ValueError`` listing the known ones."""
        return config_from_dict(cls, data)

    def to_dict(self) -> dict[str, Any]:
        """A plain dict (the inverse of :meth:`from_dict`)."""
        return dataclasses.asdict(self)

    def validate(self) -> None:
        """Check the fields before any work is done: prim_path, backend, provider, quaternion order and device.

        Raises:
            ValueError: Empty prim_path, unknown backend, provider or quat_order (the message lists the valid ones),
                a device string Warp does not name (``"gpu"``), or a CUDA device that is not visible here (e.g.
                ``"cuda:0"`` on a machine without a GPU: use ``device="cpu"``).
            TypeError: prim_path, quat_order or device of the wrong type.
        """
        if not self.prim_path:
            raise ValueError("FrameViewCfg.prim_path: expected a path, a pattern or a list of them, got nothing")
        if not isinstance(self.prim_path, (str, list, tuple)):
            raise TypeError(f"FrameViewCfg.prim_path: expected str or list of str, got {type(self.prim_path).__name__}")
        names = available_backends()
        if self.backend not in names:
            missing = [f"{n}: {why}" for n in names if (why := backend_problem(n)) is not None]
            not_here = f" (not usable here: {'; '.join(missing)})" if missing else ""
            raise ValueError(f"FrameViewCfg.backend: unknown backend {self.backend!r}; available: {names}{not_here}")
        from .fabric.providers import FABRIC_PROVIDERS

        if self.fabric_provider not in FABRIC_PROVIDERS:
            raise ValueError(
                f"FrameViewCfg.fabric_provider: expected one of {list(FABRIC_PROVIDERS)}, got {self.fabric_provider!r}"
            )
        check_quat_order(self.quat_order, "FrameViewCfg.quat_order")
        check_device(self.device, "FrameViewCfg.device")


def _reject_options(backend: str, options: Mapping[str, Any], accepted: tuple[str, ...]) -> None:
    """A clear TypeError for arguments another backend takes (``model=``/``state=`` are the newton backend's)."""
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise TypeError(
            f"make_frame_view: backend {backend!r} takes no argument(s) {unknown} (backend-specific arguments, such "
            f"as newton's model= and state=, go to their own backend); it accepts {list(accepted) or 'none'}"
        )


def _usd_factory(prim_path: str | Sequence[str], *, stage: Any, device: str, **options: Any) -> Any:
    from .usd.view import UsdFrameView

    _reject_options("usd", options, ("quat_order",))
    return UsdFrameView(prim_path, stage=stage, device=device, **options)


def _fabric_factory(prim_path: str | Sequence[str], *, stage: Any, device: str, **options: Any) -> Any:
    from .fabric.view import FabricFrameView

    _reject_options("fabric", options, ("fabric_provider", "quat_order"))
    return FabricFrameView(prim_path, stage=stage, device=device, **options)


def _newton_factory(prim_path: str | Sequence[str], *, stage: Any, device: str, **options: Any) -> Any:
    from .newton import NewtonFrameView  # without newton installed: an ImportError naming the extra

    missing = [name for name in ("model", "state") if name not in options]
    if missing:
        raise TypeError(
            f"make_frame_view: backend 'newton' needs {' and '.join(missing)}: "
            "make_frame_view(cfg, stage, model=model, state=lambda: current_state)"
        )

    _reject_options("newton", options, ("model", "state", "forward", "quat_order"))
    return NewtonFrameView(prim_path, stage=stage, device=device, **options)


_REGISTRY: dict[str, BackendFactory] = {"usd": _usd_factory, "fabric": _fabric_factory, "newton": _newton_factory}
_ENTRY_POINTS_LOADED = False
_LOCK = threading.Lock()


def register_backend(name: str, factory: BackendFactory, *, replace: bool = False) -> None:
    """Register a backend under ``name`` (packages can also use the ``frameview.backends`` entry-point group).

    Args:
        name: The name env configs use in ``backend:``.
        factory: ``factory(prim_path, *, stage, device, **options)`` returning a BaseFrameView.
        replace: Allow replacing an existing registration.
    """
    if not callable(factory):
        raise TypeError(f"register_backend: factory for {name!r} must be callable, got {type(factory).__name__}")
    with _LOCK:
        if name in _REGISTRY and not replace and _REGISTRY[name] is not factory:
            raise ValueError(f"register_backend: backend {name!r} is already registered (pass replace=True)")
        _REGISTRY[name] = factory


def _load_entry_points() -> None:
    global _ENTRY_POINTS_LOADED
    if _ENTRY_POINTS_LOADED:
        return
    _ENTRY_POINTS_LOADED = True
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in _REGISTRY:
            continue
        try:
            _REGISTRY[ep.name] = ep.load()
        except Exception as exc:  # a broken plug-in must not hide the others
            logger.warning("frameview: backend entry point %r (%s) failed to load: %s", ep.name, ep.value, exc)


# built-in backend -> (top-level module it needs, how to get it); plug-ins are usable once their entry point loaded
_BACKEND_NEEDS: dict[str, tuple[str, str]] = {
    "usd": ("pxr", "the usd extra (pip install -e '.[usd]' from a clone) or Kit / Isaac Sim's pxr"),
    "newton": ("newton", "the newton extra (pip install -e '.[newton,usd]' from a clone)"),
}


def backend_problem(name: str) -> str | None:
    """Why the registered backend ``name`` cannot be used here (``None``: its package is installed).

    Looks the needed package up without importing it (``python -m frameview`` imports it and reports the error).
    """
    need = _BACKEND_NEEDS.get(name)
    if need is None:
        return None
    module, how = need
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a module set to None in sys.modules, or a broken parent
        found = False
    return None if found else f"{module} is not installed: install {how}"


def available_backends(usable: bool = False) -> list[str]:
    """Names of the registered backends (built-in and from the ``frameview.backends`` entry points).

    Args:
        usable: Only the backends whose packages are installed here (``"newton"`` needs the newton extra, ``"usd"``
            needs pxr). ``python -m frameview`` says why each other one is not usable.

    Returns:
        The sorted names. A registered backend that is not usable still validates in :class:`FrameViewCfg`, and
        building its view raises an ``ImportError`` naming the extra to install.
    """
    _load_entry_points()
    names = sorted(_REGISTRY)
    return [n for n in names if backend_problem(n) is None] if usable else names


def make_frame_view(cfg: FrameViewCfg | Mapping[str, Any], stage: Any, **backend_args: Any) -> BaseFrameView:
    """Build the FrameView a config asks for.

    Args:
        cfg: A :class:`FrameViewCfg` or a plain dict of its fields.
        stage: A pxr ``Usd.Stage``, an ``ovstage.Stage`` or a usdrt stage.
        backend_args: Objects for the backend's constructor that a config cannot carry, added to ``cfg.options``:
            ``model=`` and ``state=`` for ``"newton"``. A backend given arguments it does not take raises
            ``TypeError`` naming them.

    Returns:
        The view (a :class:`frameview.BaseFrameView`).

    Raises:
        ValueError: Unknown backend (the message lists the available ones), provider, config key or device, or a
            CUDA device that is not visible: all checked before the backend touches the stage.
    """
    if not isinstance(cfg, FrameViewCfg):
        cfg = FrameViewCfg.from_dict(cfg)
    cfg.validate()
    options = {**cfg.options, **backend_args}
    if cfg.backend == "fabric":
        options.setdefault("fabric_provider", cfg.fabric_provider)
    if cfg.quat_order != "xyzw":  # only then: a plug-in backend without the option is not handed it
        options.setdefault("quat_order", cfg.quat_order)
    factory = _REGISTRY[cfg.backend]
    view: BaseFrameView = factory(cfg.prim_path, stage=stage, device=cfg.device, **options)
    return view

# SPDX-License-Identifier: Apache-2.0
"""FrameViewCfg, the backend registry and make_frame_view: swap backends by changing one config field."""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from importlib import metadata
from typing import Any

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
        backend: A registered backend name (:func:`available_backends`): ``"usd"``, ``"fabric"``, ...
        device: Warp device of the returned arrays (``"cpu"``, ``"cuda:0"``).
        fabric_provider: For the Fabric backend: ``"auto"``, ``"memory"``, ``"ovstage"`` or ``"usdrt"``.
        options: Extra keyword arguments passed to the backend's constructor.
    """

    prim_path: str | list[str] = ""
    backend: str = "fabric"
    device: str = "cpu"
    fabric_provider: str = "auto"
    options: dict[str, Any] = dataclasses.field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FrameViewCfg:
        """Build from a mapping (a YAML/JSON section); unknown keys raise ``ValueError`` listing the known ones."""
        if not isinstance(data, Mapping):
            raise TypeError(f"FrameViewCfg.from_dict: expected a mapping, got {type(data).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"FrameViewCfg: unknown key(s) {unknown}; expected some of {sorted(known)}")
        cfg = cls(**dict(data))
        cfg.validate()
        return cfg

    def to_dict(self) -> dict[str, Any]:
        """A plain dict (the inverse of :meth:`from_dict`)."""
        return dataclasses.asdict(self)

    def validate(self) -> None:
        """Check the fields before any work is done (unknown backend or provider, empty prim_path)."""
        if not self.prim_path:
            raise ValueError("FrameViewCfg.prim_path: expected a path, a pattern or a list of them, got nothing")
        if not isinstance(self.prim_path, (str, list, tuple)):
            raise TypeError(f"FrameViewCfg.prim_path: expected str or list of str, got {type(self.prim_path).__name__}")
        names = available_backends()
        if self.backend not in names:
            raise ValueError(f"FrameViewCfg.backend: unknown backend {self.backend!r}; available: {names}")
        from .fabric.providers import FABRIC_PROVIDERS

        if self.fabric_provider not in FABRIC_PROVIDERS:
            raise ValueError(
                f"FrameViewCfg.fabric_provider: expected one of {list(FABRIC_PROVIDERS)}, got {self.fabric_provider!r}"
            )


def _usd_factory(prim_path: str | Sequence[str], *, stage: Any, device: str, **options: Any) -> Any:
    from .usd import UsdFrameView

    return UsdFrameView(prim_path, stage=stage, device=device, **options)


def _fabric_factory(prim_path: str | Sequence[str], *, stage: Any, device: str, **options: Any) -> Any:
    from .fabric.view import FabricFrameView

    return FabricFrameView(prim_path, stage=stage, device=device, **options)


_REGISTRY: dict[str, BackendFactory] = {"usd": _usd_factory, "fabric": _fabric_factory}
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


def available_backends() -> list[str]:
    """Names of the registered backends (built-in and from the ``frameview.backends`` entry points)."""
    _load_entry_points()
    return sorted(_REGISTRY)


def make_frame_view(cfg: FrameViewCfg | Mapping[str, Any], stage: Any) -> Any:
    """Build the FrameView a config asks for.

    Args:
        cfg: A :class:`FrameViewCfg` or a plain dict of its fields.
        stage: A pxr ``Usd.Stage``, an ``ovstage.Stage`` or a usdrt stage.

    Returns:
        The view (a :class:`frameview.BaseFrameView`).

    Raises:
        ValueError: Unknown backend (the message lists the available ones), provider, or config key.
    """
    if not isinstance(cfg, FrameViewCfg):
        cfg = FrameViewCfg.from_dict(cfg)
    cfg.validate()
    options = dict(cfg.options)
    if cfg.backend == "fabric":
        options.setdefault("fabric_provider", cfg.fabric_provider)
    factory = _REGISTRY[cfg.backend]
    return factory(cfg.prim_path, stage=stage, device=cfg.device, **options)

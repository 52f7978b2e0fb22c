# SPDX-License-Identifier: Apache-2.0
"""frameview behind Isaac Lab 3's ``FrameView(...)`` factory: one line, inside Isaac Lab's own environment.

Isaac Lab's ``isaaclab.sim.views.FrameView`` picks its class from the active physics backend (``"physx"`` when no
simulation context exists or PhysX runs, ``"newton"``, ``"ovphysx"``) through its registry ``FrameView._registry``,
which it fills on the first ``FrameView(...)`` of a backend. :func:`install` puts frameview's adapter there first;
:func:`uninstall` puts back what was there (Isaac Lab then imports its stock classes again on the next call).

Example:
    >>> import frameview.isaaclab  # doctest: +SKIP
    >>> frameview.isaaclab.install()  # before the scene is built
    >>> from isaaclab.sim.views import FrameView
    >>> view = FrameView("/World/envs/env_.*/Camera", device="cuda:0")  # a frameview Fabric view under PhysX
    >>> pos, quat = view.get_world_poses()  # ProxyArray: .warp (N,) vec3f / quatf xyzw, .torch (N, 3) / (N, 4)
    >>> frameview.isaaclab.uninstall()

What the adapter (:class:`IsaacLabFrameView`, a subclass of Isaac Lab's ``BaseFrameView``) does:

- getters return Isaac Lab ``ProxyArray`` wrappers of frameview's arrays (which the next call of the same getter
  overwrites, as Isaac Lab's own buffers are), shaped as Isaac Lab's view of the backend shapes them: ``(M, 3)`` /
  ``(M, 4)`` float32 arrays for its USD and Fabric views, ``(M,)`` ``vec3f`` / ``vec4f`` for its Newton view;
- quaternions (xyzw) are the numbers Isaac Lab's view gives, sign included: ``q`` and ``-q`` are one rotation, and
  each of Isaac Lab's views picks one its own way (pxr's ``ExtractRotationQuat``, ``wp.quat_from_matrix``, Newton's
  product ``body_q * offset``), which the adapter follows (:mod:`frameview.isaaclab.kernels`); frameview's own views
  return ``w >= 0``;
- writes go through Isaac Lab's writer-scope classes (``FrameViewWorldSpaceWriter`` /
  ``FrameViewLocalSpaceWriter``) backed by frameview's scopes;
- ``prims`` (the USD prims, in view order), ``prim_paths``, ``count``, ``device``, ``close()``;
- ``get_visibility(indices)`` returns an ``(M,)`` torch bool tensor, ``set_visibility(visibility, indices)`` takes
  one, as Isaac Lab's do;
- ``get_scales`` / ``set_scales`` keep Isaac Lab's meaning for the backend: world scales under PhysX (its Fabric
  view), local for a ``"usd"`` mapping, and under Newton the scale of the collision shapes on the frame's body (the
  first one read, every one written), as Isaac Lab's Newton view;
- under Newton the view is built from Isaac Lab's ``NewtonManager`` (its model, and ``get_state_0`` on every read),
  and, when the model does not exist yet, once physics is ready (Isaac Lab's ``PHYSICS_READY`` event); until then
  ``count`` is 0 and every other call raises ``RuntimeError``. Envs that kit-less Isaac Lab clones in Newton only
  are found through the model's body labels (:mod:`frameview.newton.clones`).

``validate_xform_ops`` is accepted and ignored: frameview reads the composed transforms and authors no xformOps.

The typed physics views in Isaac Lab's terms (its manager, names, quaternion sign, ``ProxyArray`` outputs) are
:class:`ArticulationView`, :class:`RigidBodyView` and :class:`JointStateReader` (:mod:`frameview.isaaclab.physics`).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from ..config import available_backends
from .adapter import INSTALL_HINT, LEGACY_SCALES, IsaacLabFrameView, import_isaaclab
from .physics import ENV_REGEX_NS, ArticulationView, JointStateReader, RigidBodyView

__all__ = [
    "DEFAULT_BACKENDS",
    "ENV_REGEX_NS",
    "ArticulationView",
    "IsaacLabFrameView",
    "JointStateReader",
    "RigidBodyView",
    "install",
    "installed",
    "uninstall",
]

DEFAULT_BACKENDS: Mapping[str, str] = {"physx": "fabric", "newton": "newton"}
"""Isaac Lab physics backend (a key of ``FrameView._registry``) -> frameview backend that serves it by default.
``"ovphysx"`` keeps Isaac Lab's ``OvPhysxFrameView`` (``install({"ovphysx": "fabric"})`` to change that); leave a key
out (``install({"physx": "fabric"})``) to keep Isaac Lab's class for that backend."""

_ABSENT = object()
_saved: dict[str, Any] | None = None  # registry key -> what install() replaced (_ABSENT: nothing)
_classes: dict[str, type] = {}


def _factory() -> Any:
    factory = import_isaaclab("isaaclab.sim.views").FrameView
    if not isinstance(getattr(factory, "_registry", None), dict):
        raise ImportError(f"isaaclab.sim.views.FrameView has no _registry dict: not Isaac Lab 3. {INSTALL_HINT}")
    return factory


def install(backends: Mapping[str, str] | None = None) -> None:
    """Make Isaac Lab's ``FrameView(...)`` return frameview views from now on. Call it before the scene is built.

    Args:
        backends: Isaac Lab physics backend -> frameview backend (``"fabric"``, ``"usd"`` or ``"newton"``); default
            :data:`DEFAULT_BACKENDS`. Backends not named keep Isaac Lab's classes.

    Raises:
        ImportError: Isaac Lab 3 is not importable (the message says how to install it).
        ValueError: An unknown frameview backend, or a second :func:`install` with other ``backends`` before
            :func:`uninstall`.
    """
    global _saved
    wanted = dict(DEFAULT_BACKENDS if backends is None else backends)
    for key, backend in wanted.items():
        if backend not in LEGACY_SCALES:
            raise ValueError(f"backends[{key!r}]: expected one of {sorted(LEGACY_SCALES)}, got {backend!r}")
    factory = _factory()
    classes = {key: _view_class(backend) for key, backend in wanted.items()}
    if _saved is not None:
        if set(_saved) == set(classes) and all(factory._registry.get(k) is c for k, c in classes.items()):
            return  # installed already, the same way
        raise ValueError("frameview.isaaclab is installed with other backends; call uninstall() first")
    for backend in dict.fromkeys(wanted.values()):  # now, as Isaac Lab imports its own view classes: not in a build
        importlib.import_module(_BACKEND_MODULES[backend])
    available_backends()  # the backend entry points too (one scan of the installed distributions per process)
    _saved = {key: factory._registry.get(key, _ABSENT) for key in classes}
    factory._registry.update(classes)


_BACKEND_MODULES = {"fabric": "frameview.fabric.view", "usd": "frameview.usd.view", "newton": "frameview.newton.view"}
"""The module of each frameview backend's view class: :func:`install` imports those it maps to."""


def uninstall() -> None:
    """Put back Isaac Lab's registry entries that :func:`install` replaced. Idempotent.

    Views already built stay frameview views; ``FrameView(...)`` builds Isaac Lab's own classes again.
    """
    global _saved
    if _saved is None:
        return
    registry = _factory()._registry
    for key, previous in _saved.items():
        if previous is _ABSENT:
            registry.pop(key, None)
        else:
            registry[key] = previous
    _saved = None


def installed() -> bool:
    """Whether :func:`install` is in effect."""
    return _saved is not None


def _view_class(backend: str) -> type:
    """The adapter class for ``backend``: a subclass of Isaac Lab's ``BaseFrameView`` (made once per backend)."""
    cls = _classes.get(backend)
    if cls is None:
        base = import_isaaclab("isaaclab.sim.views").BaseFrameView
        cls = type(f"IsaacLabFrameView_{backend}", (IsaacLabFrameView, base), {"frameview_backend": backend})
        cls.__module__ = __name__
        _classes[backend] = cls
    return cls

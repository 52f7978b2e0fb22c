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
  product ``body_q * offset``), which the adapter follows (see ``_GF``); frameview's own views return ``w >= 0``;
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
  are found through the model's body labels (:mod:`frameview.newton.frames`, *Clones*).

``validate_xform_ops`` is accepted and ignored: frameview reads the composed transforms and authors no xformOps.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import warp as wp

__all__ = ["DEFAULT_BACKENDS", "IsaacLabFrameView", "install", "installed", "uninstall"]

DEFAULT_BACKENDS: Mapping[str, str] = {"physx": "fabric", "newton": "newton"}
"""Isaac Lab physics backend (a key of ``FrameView._registry``) -> frameview backend that serves it by default.
``"ovphysx"`` keeps Isaac Lab's ``OvPhysxFrameView`` (``install({"ovphysx": "fabric"})`` to change that); leave a key
out (``install({"physx": "fabric"})``) to keep Isaac Lab's class for that backend."""

_LEGACY_SCALES = {"fabric": "world", "usd": "local", "newton": None}
"""Space of Isaac Lab's ``get_scales`` / ``set_scales`` for the views a frameview backend replaces (``None``: Isaac
Lab's are the scales of the collision shapes on the frame's body there)."""

_ABSENT = object()
_saved: dict[str, Any] | None = None  # registry key -> what install() replaced (_ABSENT: nothing)
_classes: dict[str, type] = {}
_INSTALL_HINT = (
    "frameview.isaaclab needs Isaac Lab 3 (isaaclab.sim.views.FrameView); install it into this environment "
    "(pip install 'isaaclab>=3.0'), then frameview beside it: pip install 'frameview[isaaclab]'"
)


def _import(module: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"{_INSTALL_HINT} ({exc})", name=module) from exc


def _factory() -> Any:
    factory = _import("isaaclab.sim.views").FrameView
    if not isinstance(getattr(factory, "_registry", None), dict):
        raise ImportError(f"isaaclab.sim.views.FrameView has no _registry dict: not Isaac Lab 3. {_INSTALL_HINT}")
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
        if backend not in _LEGACY_SCALES:
            raise ValueError(f"backends[{key!r}]: expected one of {sorted(_LEGACY_SCALES)}, got {backend!r}")
    factory = _factory()
    classes = {key: _view_class(backend) for key, backend in wanted.items()}
    if _saved is not None:
        if set(_saved) == set(classes) and all(factory._registry.get(k) is c for k, c in classes.items()):
            return  # installed already, the same way
        raise ValueError("frameview.isaaclab is installed with other backends; call uninstall() first")
    _saved = {key: factory._registry.get(key, _ABSENT) for key in classes}
    factory._registry.update(classes)


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
        base = _import("isaaclab.sim.views").BaseFrameView
        cls = type(f"IsaacLabFrameView_{backend}", (IsaacLabFrameView, base), {"frameview_backend": backend})
        cls.__module__ = __name__
        _classes[backend] = cls
    return cls


_GF, _WARP, _NEWTON, _NEWTON_LOCAL = 0, 1, 2, 3
"""How Isaac Lab's view of a backend signs the quaternions it returns (``q`` and ``-q`` are the same rotation):

- ``_GF``: pxr's ``Gf.Matrix4d.ExtractRotationQuat`` (Isaac Lab's USD view, and the local poses of its Newton
  view, from ``resolve_prim_pose``): ``w`` positive when the matrix trace exceeds its largest diagonal entry
  ``m_ii``, else ``q_i`` positive (see ``_gf_sign``);
- ``_WARP``: ``wp.quat_from_matrix`` (Isaac Lab's Fabric view): ``w >= 0`` when the matrix trace ``4 w^2 - 1`` is
  not negative, else the largest of x, y, z positive;
- ``_NEWTON``: the product ``body_q[body].q * q_offset`` (Isaac Lab's Newton view), ``q_offset`` the frame's
  rotation from its body signed as Isaac Lab's ``resolve_prim_pose`` signs it from the stage when the view is built
  (a write to a frame's offset keeps the sign nearest to that one);
- ``_NEWTON_LOCAL``: the local poses of Isaac Lab's Newton view are the offsets above, relative to the body, where
  frameview's are relative to the USD parent: for a frame right below its body they agree, signed as the offset."""


@wp.func
def _largest_positive(q: wp.quatf, count: int) -> float:
    """-1.0 when the component of largest magnitude among the first ``count`` (the first of ties) is negative."""
    k = int(0)
    best = wp.abs(q[0])
    for i in range(1, count):
        if wp.abs(q[i]) > best:
            best = wp.abs(q[i])
            k = i
    if q[k] < 0.0:
        return -1.0
    return 1.0


@wp.func
def _gf_sign(q: wp.quatf) -> float:
    """-1.0 when pxr's ``ExtractRotationQuat`` gives ``-q``: it picks the largest diagonal entry ``m_ii`` of the
    rotation matrix (the later of equal ones) and makes ``w`` positive when the trace exceeds it, else ``q_i``."""
    xx = q[0] * q[0]
    yy = q[1] * q[1]
    zz = q[2] * q[2]
    m00 = 1.0 - 2.0 * (yy + zz)
    m11 = 1.0 - 2.0 * (xx + zz)
    m22 = 1.0 - 2.0 * (xx + yy)
    i = int(2)
    mii = m22
    if m00 > m11:
        if m00 > m22:
            i = 0
            mii = m00
    elif m11 > m22:
        i = 1
        mii = m11
    c = q[i]
    if m00 + m11 + m22 > mii:
        c = q[3]
    if c < 0.0:
        return -1.0
    return 1.0


@wp.kernel
def _signed_quats(
    quat: wp.array(dtype=wp.quatf),
    rule: int,
    rows: wp.array(dtype=wp.int32),
    view_node: wp.array(dtype=wp.int32),
    node_body: wp.array(dtype=wp.int32),
    node_offset: wp.array(dtype=wp.transformd),
    offset_sign: wp.array(dtype=wp.quatf),
    body_q: wp.array(dtype=wp.transformf),
    out: wp.array(dtype=wp.vec4f),
):
    """``out[i]``: ``quat[i]`` or ``-quat[i]``, signed as Isaac Lab's view of the backend signs it (``rule``)."""
    i = wp.tid()
    q = quat[i]
    s = float(1.0)
    if rule == 0:
        s = _gf_sign(q)
    elif rule == 1:
        if 4.0 * q[3] * q[3] - 1.0 >= 0.0:
            if q[3] < 0.0:
                s = -1.0
        else:
            s = _largest_positive(q, 3)
    elif rule == 3:
        r = i
        if rows.shape[0] > 0:
            r = rows[i]
        if wp.dot(q, offset_sign[r]) < 0.0:
            s = -1.0
    else:
        r = i
        if rows.shape[0] > 0:
            r = rows[i]
        n = view_node[r]
        od = wp.transform_get_rotation(node_offset[n])
        off = wp.quatf(float(od[0]), float(od[1]), float(od[2]), float(od[3]))
        if wp.dot(off, offset_sign[r]) < 0.0:  # the offset's sign as Isaac Lab's resolve_prim_pose gives it
            off = -off
        ref = off
        b = node_body[n]
        if b >= 0:
            ref = wp.transform_get_rotation(body_q[b]) * off
        if wp.dot(q, ref) < 0.0:
            s = -1.0
    out[i] = wp.vec4f(s * q[0], s * q[1], s * q[2], s * q[3])


@wp.kernel
def _gather_shape_scales(
    shape_scale: wp.array(dtype=wp.vec3f),
    shape_body: wp.array(dtype=wp.int32),
    frame_body: wp.array(dtype=wp.int32),
    rows: wp.array(dtype=wp.int32),
    out: wp.array(dtype=wp.vec3f),
):
    """Isaac Lab's Newton ``get_scales``: the scale of the first shape on each frame's body, else ones."""
    i = wp.tid()
    r = i
    if rows.shape[0] > 0:
        r = rows[i]
    b = frame_body[r]
    out[i] = wp.vec3f(1.0, 1.0, 1.0)
    for s in range(shape_body.shape[0]):
        if shape_body[s] == b:
            out[i] = shape_scale[s]
            return


@wp.kernel
def _scatter_shape_scales(
    scales: wp.array(dtype=wp.vec3f),
    frame_body: wp.array(dtype=wp.int32),
    rows: wp.array(dtype=wp.int32),
    shape_body: wp.array(dtype=wp.int32),
    shape_scale: wp.array(dtype=wp.vec3f),
):
    """Isaac Lab's Newton ``set_scales``: every shape on each frame's body gets the frame's scale."""
    i = wp.tid()
    r = i
    if rows.shape[0] > 0:
        r = rows[i]
    b = frame_body[r]
    for s in range(shape_body.shape[0]):
        if shape_body[s] == b:
            shape_scale[s] = scales[i]


class _Proxies:
    """Isaac Lab ``ProxyArray``s over frameview's buffers, in the shapes Isaac Lab's view of the backend returns:
    ``(M, 3)`` / ``(M, 4)`` float32 arrays (its USD and Fabric views) or ``(M,)`` ``vec3f`` / ``vec4f`` (its Newton
    view). One proxy per buffer, reused while the getter returns that buffer."""

    def __init__(self, flat: bool) -> None:
        self._proxy_type = _import("isaaclab.utils.warp").ProxyArray
        self._flat = flat
        self._last: dict[str, tuple[wp.array, Any]] = {}
        self._buffers: dict[tuple[str, int], wp.array] = {}

    def wrap(self, name: str, array: wp.array) -> Any:
        last = self._last.get(name)
        if last is None or last[0] is not array:
            shaped = array.view(wp.float32) if self._flat else array
            last = self._last[name] = (array, self._proxy_type(shaped))
        return last[1]

    def buffer(self, name: str, count: int, dtype: Any, device: Any) -> wp.array:
        """A buffer of this getter (``name``) for ``count`` rows, reused by its later calls."""
        buf = self._buffers.get((name, count))
        if buf is None:
            buf = self._buffers[(name, count)] = wp.empty(count, dtype=dtype, device=device)
        return buf


class _Empty:
    """Empty placeholder arrays of one dtype, one per device."""

    def __init__(self, dtype: Any) -> None:
        self._dtype = dtype
        self._arrays: dict[str, wp.array] = {}

    def get(self, device: Any) -> wp.array:
        key = str(device)
        array = self._arrays.get(key)
        if array is None:
            array = self._arrays[key] = wp.empty(0, dtype=self._dtype, device=device)
        return array


_NO_OFFSETS = _Empty(wp.transformd)
_NO_BODIES = _Empty(wp.transformf)
_NO_QUATS = _Empty(wp.quatf)


class IsaacLabFrameView:
    """A frameview view behind Isaac Lab's ``BaseFrameView`` interface (what ``FrameView(...)`` returns after
    :func:`install`). The concrete classes also derive from Isaac Lab's ``BaseFrameView``.

    Args:
        prim_path: Isaac Lab prim path pattern (a regex per path component) or list of them.
        device: Warp device of the view (``"cpu"``, ``"cuda:0"``).
        validate_xform_ops: Accepted for Isaac Lab's signature; frameview authors no xformOps.
        stage: pxr ``Usd.Stage``; default Isaac Lab's current stage.
        **kwargs: Accepted for Isaac Lab's signature and ignored.
    """

    frameview_backend = "fabric"

    def __init__(
        self,
        prim_path: str | Sequence[str],
        device: str = "cpu",
        validate_xform_ops: bool = True,
        stage: Any = None,
        **kwargs: Any,
    ) -> None:
        del validate_xform_ops, kwargs
        self._prim_path = prim_path if isinstance(prim_path, str) else list(prim_path)
        self._device = str(device)
        self._stage = _import("isaaclab.sim").get_current_stage() if stage is None else stage
        self._view: Any = None
        self._prims: list[Any] | None = None
        self._proxies = _Proxies(flat=self.frameview_backend != "newton")
        self._no_rows = wp.empty(0, dtype=wp.int32, device=self._device)
        self._ready_handle: Any = None
        if self.frameview_backend != "newton":
            self._build(None)
            return
        manager = _import("isaaclab_newton.physics.newton_manager").NewtonManager
        if manager.get_model() is not None:
            self._build(manager)
        else:
            event = _import("isaaclab.physics").PhysicsEvent.PHYSICS_READY
            self._ready_handle = manager.register_callback(  # a bound method: Isaac Lab holds it weakly
                self._on_physics_ready, event, name=f"frameview_{self._prim_path}"
            )

    def _on_physics_ready(self, _event: Any) -> None:
        self._build(_import("isaaclab_newton.physics.newton_manager").NewtonManager)

    def _build(self, manager: Any) -> None:
        from .config import FrameViewCfg, make_frame_view

        cfg = FrameViewCfg(prim_path=self._prim_path, backend=self.frameview_backend, device=self._device)
        if manager is None:
            self._view = make_frame_view(cfg, self._stage)
        else:
            self._view = make_frame_view(cfg, self._stage, model=manager.get_model(), state=manager.get_state_0)
            self._offset_sign = self._isaaclab_offset_quats()

    def _isaaclab_offset_quats(self) -> wp.array:
        """Each Newton frame's rotation from its body (from the world, for a frame on no body) as Isaac Lab's
        ``resolve_prim_pose`` gives it, from the frame's stage prim (its source's for a cloned env): the sign its
        Newton view's quaternions inherit."""
        from pxr import UsdPhysics

        resolve = _import("isaaclab.sim").resolve_prim_pose
        view = self._view
        quats = []
        for path, body in zip(view.prim_paths, view.body_indices.tolist(), strict=True):
            prim = self._stage.GetPrimAtPath(view._store.source_path(path))
            ref = prim.GetParent() if body >= 0 else None
            while ref is not None and not ref.HasAPI(UsdPhysics.RigidBodyAPI):
                ref = ref.GetParent()
            quats.append(resolve(prim, ref)[1])
        return wp.array(np.array(quats, dtype=np.float32).reshape(-1, 4), dtype=wp.quatf, device=self._device)

    @property
    def frameview(self) -> Any:
        """The frameview view behind this one (``fv.FabricFrameView``, ``fv.UsdFrameView``, ``fv.NewtonFrameView``).

        Raises:
            RuntimeError: Under Newton, before physics is ready (the view is built then).
        """
        if self._view is None:
            raise RuntimeError(
                f"FrameView({self._prim_path!r}): the Newton model does not exist yet; the view is built when Isaac "
                f"Lab's physics is ready (after sim.reset())"
            )
        return self._view

    # ------------------------------------------------------------------ Isaac Lab's properties

    @property
    def count(self) -> int:
        """Number of prims (0 under Newton until physics is ready)."""
        return 0 if self._view is None else self._view.count

    @property
    def device(self) -> str:
        """Warp device of the returned arrays."""
        return self._device

    @property
    def prim_paths(self) -> list[str]:
        """Prim paths in view order."""
        return list(self.frameview.prim_paths)

    @property
    def prims(self) -> list[Any]:
        """The USD prims (``Usd.Prim``) in view order; under Newton, a frame of an env cloned in Newton only has
        no prim of its own: its source's (env_0's) stands in, as Isaac Lab's camera does with its Newton view."""
        if self._prims is None:
            view = self.frameview
            source = view._store.source_path if self.frameview_backend == "newton" else str
            self._prims = [self._stage.GetPrimAtPath(source(p)) for p in view.prim_paths]
        return self._prims

    def close(self) -> None:
        """Close the frameview view and drop the physics-ready callback. Idempotent."""
        handle, self._ready_handle = self._ready_handle, None
        if handle is not None:
            handle.deregister()
        if self._view is not None:
            self._view.close()

    # ------------------------------------------------------------------ Isaac Lab's backend hooks

    def _rows(self, indices: Any) -> wp.array:
        """``indices`` as a device int32 array (the empty array for all rows)."""
        if indices is None:
            return self._no_rows
        if isinstance(indices, wp.array) and indices.dtype == wp.int32 and str(indices.device) == self._device:
            return indices
        if isinstance(indices, wp.array):
            host = indices.numpy()
        elif hasattr(indices, "detach"):  # torch
            host = indices.detach().cpu().numpy()
        else:
            host = indices
        return wp.array(np.asarray(host, dtype=np.int64).astype(np.int32), dtype=wp.int32, device=self._device)

    def _signed(self, name: str, quat: wp.array, rule: int, indices: Any) -> wp.array:
        """``quat`` signed as Isaac Lab's view signs it (see ``_GF``), into this getter's own buffer."""
        out = self._proxies.buffer(name, quat.shape[0], wp.vec4f, quat.device)
        view = self.frameview
        if rule in (_NEWTON, _NEWTON_LOCAL):
            store = view._store
            params = [self._rows(indices), view._view_node, store.body, store.offset, self._offset_sign,
                      view.state.body_q]  # fmt: skip
        else:
            dev = quat.device
            params = [self._no_rows, self._no_rows, self._no_rows, _NO_OFFSETS.get(dev), _NO_QUATS.get(dev),
                      _NO_BODIES.get(dev)]  # fmt: skip
        wp.launch(_signed_quats, quat.shape[0], inputs=[quat, rule, *params], outputs=[out], device=quat.device)
        return out

    def _world_rule(self) -> int:
        return {"usd": _GF, "fabric": _WARP, "newton": _NEWTON}[self.frameview_backend]

    def _local_rule(self) -> int:
        return {"usd": _GF, "fabric": _WARP, "newton": _NEWTON_LOCAL}[self.frameview_backend]

    def _get_world_poses_impl(self, indices: Any = None) -> tuple[Any, Any]:
        pos, quat = self.frameview.get_world_poses(indices)
        quat = self._signed("world_quat", quat, self._world_rule(), indices)
        return self._proxies.wrap("world_pos", pos), self._proxies.wrap("world_quat", quat)

    def _get_local_poses_impl(self, indices: Any = None) -> tuple[Any, Any]:
        pos, quat = self.frameview.get_local_poses(indices)
        quat = self._signed("local_quat", quat, self._local_rule(), indices)
        return self._proxies.wrap("local_pos", pos), self._proxies.wrap("local_quat", quat)

    def _get_world_scales_impl(self, indices: Any = None) -> Any:
        return self._proxies.wrap("world_scale", self.frameview.get_world_scales(indices))

    def _get_local_scales_impl(self, indices: Any = None) -> Any:
        return self._proxies.wrap("local_scale", self.frameview.get_local_scales(indices))

    def _frame_bodies(self) -> wp.array:
        """The Newton body of each frame (-1: none), on the device (made once)."""
        bodies = getattr(self, "_bodies_dev", None)
        if bodies is None:
            bodies = self._bodies_dev = wp.array(self.frameview.body_indices, dtype=wp.int32, device=self._device)
        return bodies

    def _get_scales_impl(self, indices: Any = None) -> Any:
        space = _LEGACY_SCALES[self.frameview_backend]
        if space == "world":
            return self._get_world_scales_impl(indices)
        if space == "local":
            return self._get_local_scales_impl(indices)
        # Newton: Isaac Lab's legacy get_scales reads the scale of the first collision shape on the frame's body
        model = self.frameview.model
        rows = self._rows(indices)
        count = self.count if indices is None else rows.shape[0]
        out = self._proxies.buffer("shape_scale", count, wp.vec3f, self._device)
        wp.launch(_gather_shape_scales, count, inputs=[model.shape_scale, model.shape_body, self._frame_bodies(),
                  rows], outputs=[out], device=self._device)  # fmt: skip
        return self._proxies.wrap("shape_scale", out)

    def _set_scales_impl(self, scales: Any, indices: Any = None) -> None:
        space = _LEGACY_SCALES[self.frameview_backend]
        if space is not None:
            writer = self.xform_world_space_writer if space == "world" else self.xform_local_space_writer
            with writer() as w:
                w.set_scales(scales, indices)
            return
        # Newton: Isaac Lab's legacy set_scales writes the scale to every collision shape on the frame's body
        model = self.frameview.model
        rows = self._rows(indices)
        count = self.count if indices is None else rows.shape[0]
        data = scales.warp if hasattr(scales, "warp") else scales
        if not (isinstance(data, wp.array) and data.dtype == wp.vec3f):
            data = wp.array(np.asarray(data.numpy() if isinstance(data, wp.array) else (
                data.detach().cpu().numpy() if hasattr(data, "detach") else data), dtype=np.float32).reshape(-1, 3),
                dtype=wp.vec3f, device=self._device)  # fmt: skip
        if data.shape[0] != count:
            raise ValueError(f"set_scales: scales has {data.shape[0]} rows, expected {count} (one per index)")
        wp.launch(_scatter_shape_scales, count, inputs=[data, self._frame_bodies(), rows, model.shape_body],
                  outputs=[model.shape_scale], device=self._device)  # fmt: skip

    def _make_world_space_writer(self) -> Any:
        return _writer_class("world")(self)

    def _make_local_space_writer(self) -> Any:
        return _writer_class("local")(self)

    # ------------------------------------------------------------------ visibility (torch, as Isaac Lab's)

    def get_visibility(self, indices: Any = None) -> Any:
        """Computed visibility: ``(M,)`` torch bool tensor on :attr:`device` (a copy)."""
        return wp.to_torch(self.frameview.get_visibility(indices)).clone()

    def set_visibility(self, visibility: Any, indices: Any = None) -> None:
        """Make prims visible / invisible: ``visibility`` an ``(M,)`` torch bool tensor (or any frameview accepts)."""
        self.frameview.set_visibility(visibility, indices)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._prim_path!r}, device={self._device!r}, view={self._view!r})"


_writers: dict[str, type] = {}


def _writer_class(space: str) -> type:
    """Isaac Lab's writer class for ``space``, backed by frameview's writer scope (made once per space)."""
    cls = _writers.get(space)
    if cls is None:
        views = _import("isaaclab.sim.views")
        base = views.FrameViewWorldSpaceWriter if space == "world" else views.FrameViewLocalSpaceWriter
        cls = type(f"_{space.capitalize()}SpaceWriter", (_ScopeWriter, base), {"space": space})
        cls.__module__ = __name__
        _writers[space] = cls
    return cls


class _ScopeWriter:
    """Isaac Lab's writer-scope interface over frameview's scope of the same space (the concrete classes also derive
    from Isaac Lab's ``FrameViewWorldSpaceWriter`` / ``FrameViewLocalSpaceWriter``, which hold the one-writer lock)."""

    space = "world"
    _view: IsaacLabFrameView

    def _enter_impl(self) -> None:
        view = self._view
        try:
            fv_view = view.frameview
            self._scope = (fv_view.xform_world_space_writer if self.space == "world" else (
                fv_view.xform_local_space_writer))()  # fmt: skip
            self._scope.__enter__()
        except BaseException:
            view._active_writer = None  # Isaac Lab's __enter__ claimed the view before calling this hook
            raise

    def _exit_impl(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> None:
        scope, self._scope = self._scope, None
        scope.__exit__(exc_type, exc_val, exc_tb)

    def set_poses(
        self, positions: Any = None, orientations: Any = None, indices: Any = None, *, translations: Any = None
    ) -> None:
        """Write positions (``translations`` in a local scope) and/or xyzw orientations of ``indices``."""
        if translations is not None:
            if positions is not None:
                raise TypeError("set_poses: pass positions or translations, not both")
            positions = translations
        self._scope.set_poses(positions, orientations, indices)

    def set_scales(self, scales: Any, indices: Any = None) -> None:
        """Write scales of ``indices`` in this scope's space."""
        self._scope.set_scales(scales, indices)

    def get_poses(self, indices: Any = None) -> tuple[Any, Any]:
        """Poses in this scope's space, the scope's writes applied, as ``ProxyArray``s."""
        view = self._view
        pos, quat = self._scope.get_poses(indices)
        rule = view._world_rule() if self.space == "world" else view._local_rule()
        quat = view._signed(f"{self.space}_quat", quat, rule, indices)  # signed as Isaac Lab's getters sign them
        return view._proxies.wrap(f"{self.space}_pos", pos), view._proxies.wrap(f"{self.space}_quat", quat)

    def get_scales(self, indices: Any = None) -> Any:
        """Scales in this scope's space, the scope's writes applied, as a ``ProxyArray``."""
        return self._view._proxies.wrap(f"{self.space}_scale", self._scope.get_scales(indices))

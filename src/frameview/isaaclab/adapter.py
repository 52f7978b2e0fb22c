# SPDX-License-Identifier: Apache-2.0
"""Internal: the Isaac Lab adapter that :mod:`frameview.isaaclab` installs (and re-exports): :class:`IsaacLabFrameView`,
a frameview view behind Isaac Lab's ``BaseFrameView`` interface, and its writer scopes. The package docstring of
:mod:`frameview.isaaclab` says what it does; its kernels are in :mod:`.kernels`."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import warp as wp

from .._core.launch import RecordedLaunch
from .._core.values import device_data, unwrap
from .kernels import (
    NO_QUATS,
    SIGN_GF,
    SIGN_NEWTON,
    SIGN_NEWTON_LOCAL,
    SIGN_WARP,
    gather_shape_scales,
    offset_signs,
    scatter_shape_scales,
    signed_quats,
    written_signs,
)

__all__ = ["INSTALL_HINT", "LEGACY_SCALES", "IsaacLabFrameView", "import_isaaclab"]

LEGACY_SCALES = {"fabric": "world", "usd": "local", "newton": None}
"""Space of Isaac Lab's ``get_scales`` / ``set_scales`` for the views a frameview backend replaces (``None``: Isaac
Lab's are the scales of the collision shapes on the frame's body there)."""


INSTALL_HINT = (
    "frameview.isaaclab needs Isaac Lab 3 (isaaclab.sim.views.FrameView); install it into this environment "
    "(pip install 'isaaclab>=3.0'), then frameview beside it: pip install 'frameview[isaaclab]'"
)


def import_isaaclab(module: str) -> Any:
    """``module`` of Isaac Lab, or an ImportError that says how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"{INSTALL_HINT} ({exc})", name=module) from exc


class _Proxies:
    """Isaac Lab ``ProxyArray``s over frameview's buffers, in the shapes Isaac Lab's view of the backend returns:
    ``(M, 3)`` / ``(M, 4)`` float32 arrays (its USD and Fabric views) or ``(M,)`` ``vec3f`` / ``vec4f`` (its Newton
    view). One proxy per buffer, reused while the getter returns that buffer."""

    def __init__(self, flat: bool) -> None:
        self._proxy_type = import_isaaclab("isaaclab.utils.warp").ProxyArray
        self._flat = flat
        self._last: dict[str, tuple[wp.array, Any]] = {}
        self._buffers: dict[tuple[str, int], wp.array] = {}

    def wrap(self, name: str, array: wp.array) -> Any:
        last = self._last.get(name)
        if last is None or last[0] is not array:
            if self._flat:
                shaped = array.view(wp.float32)
            else:  # Isaac Lab's Newton view: (M,) vec3f / vec4f (frameview's quatf buffers, viewed as vec4f)
                shaped = array.view(wp.vec4f) if array.dtype == wp.quatf else array
            last = self._last[name] = (array, self._proxy_type(shaped))
        return last[1]

    def buffer(self, name: str, count: int, dtype: Any, device: Any) -> wp.array:
        """A buffer of this getter (``name``) for ``count`` rows, reused by its later calls."""
        buf = self._buffers.get((name, count))
        if buf is None:
            buf = self._buffers[(name, count)] = wp.empty(count, dtype=dtype, device=device)
        return buf


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
        self._stage = import_isaaclab("isaaclab.sim").get_current_stage() if stage is None else stage
        self._view: Any = None
        self._prims: list[Any] | None = None
        self._proxies = _Proxies(flat=self.frameview_backend != "newton")
        self._no_rows = wp.empty(0, dtype=wp.int32, device=self._device)
        self._casts: dict = {}  # device casts of written orientations (device_data keeps them alive)
        self._direct_local = False  # Newton: every frame right below its body (local reads signed by the view)
        self._ready_handle: Any = None
        if self.frameview_backend != "newton":
            self._build(None)
            return
        manager = import_isaaclab("isaaclab_newton.physics.newton_manager").NewtonManager
        if manager.get_model() is not None:
            self._build(manager)
        else:
            event = import_isaaclab("isaaclab.physics").PhysicsEvent.PHYSICS_READY
            self._ready_handle = manager.register_callback(  # a bound method: Isaac Lab holds it weakly
                self._on_physics_ready, event, name=f"frameview_{self._prim_path}"
            )

    def _on_physics_ready(self, _event: Any) -> None:
        self._build(import_isaaclab("isaaclab_newton.physics.newton_manager").NewtonManager)

    def _build(self, manager: Any) -> None:
        from ..config import FrameViewCfg, make_frame_view

        cfg = FrameViewCfg(prim_path=self._prim_path, backend=self.frameview_backend, device=self._device)
        if manager is None:
            self._view = make_frame_view(cfg, self._stage)
        else:
            self._view = make_frame_view(cfg, self._stage, model=manager.get_model(), state=manager.get_state_0)
            self._offset_sign = self._isaaclab_offset_quats()
            # world reads signed as Isaac Lab's Newton view signs them, inside the view's own read launch
            view = self._view
            self._world_signs = signs = wp.empty(view.count, dtype=wp.float32, device=self._device)

            def fill() -> None:  # before the view's first read or write (construction launches nothing)
                wp.launch(offset_signs, view.count, inputs=[view._view_node, view._store.offset, self._offset_sign],
                          outputs=[signs], device=self._device)  # fmt: skip

            view._use_quat_signs(signs, fill)
            nodes = view._nodes
            store = view._store
            # frames whose USD parent is their body: their local pose is the offset the read signs itself
            self._direct_local = bool(np.all(store._anchor[nodes] < 0)) and bool(
                np.all(np.abs(store._chain[nodes] - np.eye(4)) <= 1.0e-12)
            )

    def _isaaclab_offset_quats(self) -> wp.array:
        """Each Newton frame's rotation from its body (from the world, for a frame on no body) as Isaac Lab's
        ``resolve_prim_pose`` gives it, from the frame's stage prim (its source's for a cloned env): the sign its
        Newton view's quaternions inherit."""
        from pxr import UsdPhysics

        resolve = import_isaaclab("isaaclab.sim").resolve_prim_pose
        view = self._view
        sources = view._store.sources
        # frames of cloned envs share their source's prim: one row per (source, on a body), resolved once
        keys = [
            (sources[n], body >= 0) for n, body in zip(view._nodes.tolist(), view.body_indices.tolist(), strict=True)
        ]
        rows = {key: k for k, key in enumerate(dict.fromkeys(keys))}
        quats: list[Any] = []
        for source, on_body in rows:
            prim = self._stage.GetPrimAtPath(source)
            ref = prim.GetParent() if on_body else None
            while ref is not None and not ref.HasAPI(UsdPhysics.RigidBodyAPI):
                ref = ref.GetParent()
            quats.append(resolve(prim, ref)[1])
        table = np.array(quats, dtype=np.float32).reshape(-1, 4)
        row_of = np.fromiter(map(rows.__getitem__, keys), dtype=np.int64, count=len(keys))
        return wp.array(table[row_of], dtype=wp.quatf, device=self._device)

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
        """``indices`` as device int32 view indices, checked, narrowed on the device where they live there (the empty
        array for all rows)."""
        if indices is None:
            return self._no_rows
        rows = self.frameview._args.prepare(indices, None)
        return rows.indices if rows.indices is not None else self._no_rows

    def _signed(self, space: str, quat: wp.array, indices: Any) -> wp.array:
        """``quat`` of a ``space`` read, signed as Isaac Lab's view signs it (see ``SIGN_GF``): Newton world poses,
        and local poses of frames right below their body, come signed from the view's own read (``_build``); the
        others take one launch into this getter's own buffer."""
        newton = self.frameview_backend == "newton"
        if newton and (space == "world" or self._direct_local):
            return quat
        rule = self._world_rule() if space == "world" else self._local_rule()
        out = self._proxies.buffer(f"{space}_quat", quat.shape[0], wp.vec4f, quat.device)
        rows, signs = (self._rows(indices), self._offset_sign) if newton else (self._no_rows, NO_QUATS.get(quat.device))
        wp.launch(signed_quats, quat.shape[0], inputs=[quat, rule, rows, signs], outputs=[out], device=quat.device)
        return out

    def _world_rule(self) -> int:
        return {"usd": SIGN_GF, "fabric": SIGN_WARP, "newton": SIGN_NEWTON}[self.frameview_backend]

    def _local_rule(self) -> int:
        return {"usd": SIGN_GF, "fabric": SIGN_WARP, "newton": SIGN_NEWTON_LOCAL}[self.frameview_backend]

    def _get_world_poses_impl(self, indices: Any = None) -> tuple[Any, Any]:
        pos, quat = self.frameview.get_world_poses(indices)
        quat = self._signed("world", quat, indices)
        return self._proxies.wrap("world_pos", pos), self._proxies.wrap("world_quat", quat)

    def _after_world_write(self, orientations: Any, indices: Any) -> None:
        """Newton: after a world write of ``orientations``, the written rows' read sign follows what was written (as
        Isaac Lab's Newton view, which stores ``inv(body) * written``); one launch, on the device."""
        if orientations is None or self.frameview_backend != "newton":
            return
        view = self.frameview
        if not view._store.anchored:  # the write's own commit launch set them (NewtonFrameView._use_quat_signs)
            return
        rows = view._args.prepare(indices, None)  # device int32 rows (narrowed on the device if need be)
        value = unwrap(orientations)
        written = device_data(value, wp.quatf, view._device, self._casts)  # zero-copy where the write's was
        if written is None:
            host = np.asarray(value.detach().cpu().numpy() if hasattr(value, "detach") else (
                value.numpy() if isinstance(value, wp.array) else value), dtype=np.float32)  # fmt: skip
            written = wp.array(host.reshape(-1, 4), dtype=wp.quatf, device=self._device)
        store = view._store
        idx = rows.indices if rows.indices is not None else self._no_rows
        params = [idx, written, view._view_node, store.body, store.offset, view.state.body_q, self._world_signs]
        cmd = self.__dict__.get("_signs_cmd")
        if cmd is None:
            cmd = self._signs_cmd = RecordedLaunch(written_signs, rows.count, params, view._device)
        cmd.launch(rows.count, params)

    def _get_local_poses_impl(self, indices: Any = None) -> tuple[Any, Any]:
        pos, quat = self.frameview.get_local_poses(indices)
        quat = self._signed("local", quat, indices)
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
        space = LEGACY_SCALES[self.frameview_backend]
        if space == "world":
            return self._get_world_scales_impl(indices)
        if space == "local":
            return self._get_local_scales_impl(indices)
        # Newton: Isaac Lab's legacy get_scales reads the scale of the first collision shape on the frame's body
        model = self.frameview.model
        rows = self._rows(indices)
        count = self.count if indices is None else rows.shape[0]
        out = self._proxies.buffer("shape_scale", count, wp.vec3f, self._device)
        wp.launch(gather_shape_scales, count, inputs=[model.shape_scale, model.shape_body, self._frame_bodies(),
                  rows], outputs=[out], device=self._device)  # fmt: skip
        return self._proxies.wrap("shape_scale", out)

    def _set_scales_impl(self, scales: Any, indices: Any = None) -> None:
        space = LEGACY_SCALES[self.frameview_backend]
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
        wp.launch(scatter_shape_scales, count, inputs=[data, self._frame_bodies(), rows, model.shape_body],
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
        views = import_isaaclab("isaaclab.sim.views")
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
        """Open frameview's own writer scope only where holding writes changes the result (a view that holds a prim
        and one of its ancestors); otherwise each write goes straight to the view: one frameview write per
        ``set_poses``, no held copy, no second scope (Isaac Lab's scope already locks the view's getters)."""
        view = self._view
        self._scope: Any = None
        try:
            fv_view = view.frameview
            fv_view._check_open()
            if fv_view._stager.nested_prims():
                self._scope = (fv_view.xform_world_space_writer if self.space == "world" else (
                    fv_view.xform_local_space_writer))()  # fmt: skip
                self._scope.__enter__()
        except BaseException:
            view._active_writer = None  # Isaac Lab's __enter__ claimed the view before calling this hook
            raise

    def _exit_impl(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> None:
        scope, self._scope = self._scope, None
        if scope is not None:
            scope.__exit__(exc_type, exc_val, exc_tb)
            for orientations, indices in getattr(self, "_written", ()):
                self._view._after_world_write(orientations, indices)
        self._written: list = []

    def set_poses(
        self, positions: Any = None, orientations: Any = None, indices: Any = None, *, translations: Any = None
    ) -> None:
        """Write positions (``translations`` in a local scope) and/or xyzw orientations of ``indices``."""
        if translations is not None:
            if positions is not None:
                raise TypeError("set_poses: pass positions or translations, not both")
            positions = translations
        view = self._view
        if self._scope is not None:
            self._scope.set_poses(positions, orientations, indices)
            if self.space == "world" and orientations is not None:
                self._written = [*getattr(self, "_written", []), (orientations, indices)]
            return
        fv_view = view.frameview
        write = fv_view.set_world_poses if self.space == "world" else fv_view.set_local_poses
        write(positions, orientations, indices)
        if self.space == "world":
            view._after_world_write(orientations, indices)

    def set_scales(self, scales: Any, indices: Any = None) -> None:
        """Write scales of ``indices`` in this scope's space."""
        if self._scope is not None:
            self._scope.set_scales(scales, indices)
            return
        fv_view = self._view.frameview
        (fv_view.set_world_scales if self.space == "world" else fv_view.set_local_scales)(scales, indices)

    def get_poses(self, indices: Any = None) -> tuple[Any, Any]:
        """Poses in this scope's space, the scope's writes applied, as ``ProxyArray``s."""
        view = self._view
        if self._scope is not None:
            pos, quat = self._scope.get_poses(indices)
        else:
            fv_view = view.frameview
            pos, quat = (fv_view.get_world_poses if self.space == "world" else fv_view.get_local_poses)(indices)
        quat = view._signed(self.space, quat, indices)  # signed as Isaac Lab's getters sign them
        return view._proxies.wrap(f"{self.space}_pos", pos), view._proxies.wrap(f"{self.space}_quat", quat)

    def get_scales(self, indices: Any = None) -> Any:
        """Scales in this scope's space, the scope's writes applied, as a ``ProxyArray``."""
        if self._scope is not None:
            return self._view._proxies.wrap(f"{self.space}_scale", self._scope.get_scales(indices))
        fv_view = self._view.frameview
        scales = (fv_view.get_world_scales if self.space == "world" else fv_view.get_local_scales)(indices)
        return self._view._proxies.wrap(f"{self.space}_scale", scales)

# SPDX-License-Identifier: Apache-2.0
"""frameview.isaaclab.install() / uninstall() against a small fake of Isaac Lab 3's FrameView registry (runs without
Isaac Lab; tests/test_isaaclab_install.py runs the real one where it is installed).

The fake has what the adapter uses: ``FrameView._registry`` and a factory ``__new__`` reading it,
``BaseFrameView``'s guarded getters and writer hooks, the writer base classes' one-writer lock, ``ProxyArray``,
``get_current_stage``, and Newton's manager with its physics-ready callback.
"""

from __future__ import annotations

import sys
import types
from typing import Any, ClassVar

import numpy as np
import pytest
import warp as wp
from pxr import Gf, Usd, UsdGeom

import frameview as fv
import frameview.isaaclab as fv_isaaclab
import frameview.isaaclab.adapter as fv_isaaclab_adapter

CHILD_OFFSET = (0.1, 0.0, 0.05)


class _ProxyArray:
    def __init__(self, array: wp.array) -> None:
        self.warp = array

    @property
    def torch(self) -> Any:
        return wp.to_torch(self.warp)


class _BaseFrameView:
    _active_writer = None

    def _assert_no_active_writer(self, name: str) -> None:
        if self._active_writer is not None:
            raise RuntimeError(f"{name}: a writer scope is active")

    def get_world_poses(self, indices: Any = None) -> Any:
        self._assert_no_active_writer("get_world_poses")
        return self._get_world_poses_impl(indices)

    def get_local_poses(self, indices: Any = None) -> Any:
        self._assert_no_active_writer("get_local_poses")
        return self._get_local_poses_impl(indices)

    def get_scales(self, indices: Any = None) -> Any:
        return self._get_scales_impl(indices)

    def set_scales(self, scales: Any, indices: Any = None) -> None:
        self._set_scales_impl(scales, indices)

    def xform_world_space_writer(self) -> Any:
        return self._make_world_space_writer()

    def xform_local_space_writer(self) -> Any:
        return self._make_local_space_writer()


class _WriterBase:
    def __init__(self, view: Any) -> None:
        self._view = view

    def __enter__(self) -> Any:
        if self._view._active_writer is not None:
            raise RuntimeError("already has an active writer scope")
        self._view._active_writer = self
        self._enter_impl()
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self._exit_impl(*exc)
        finally:
            self._view._active_writer = None


class _WorldWriter(_WriterBase):
    pass


class _LocalWriter(_WriterBase):
    pass


class _StockView(_BaseFrameView):
    """Stands for Isaac Lab's own class of a backend."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args = args


class _NewtonManager:
    model: ClassVar[Any] = None
    callbacks: ClassVar[list[Any]] = []

    @classmethod
    def get_model(cls) -> Any:
        return cls.model

    @classmethod
    def get_state_0(cls) -> Any:
        return None

    @classmethod
    def register_callback(cls, callback: Any, event: Any, name: str | None = None) -> Any:
        handle = types.SimpleNamespace(callback=callback, event=event, deregister=lambda: cls.callbacks.remove(handle))
        cls.callbacks.append(handle)
        return handle


def _module(name: str, **attrs: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    return module


@pytest.fixture
def fake_isaaclab(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The fake Isaac Lab in sys.modules, its backend set by ``factory.backend``; uninstall() after the test."""
    stage_box: dict[str, Any] = {}

    class FrameView(_BaseFrameView):
        _registry: ClassVar[dict[str, type]] = {"physx": _StockView}
        backend = "physx"

        def __new__(cls, *args: Any, **kwargs: Any) -> Any:
            return cls._registry.get(cls.backend, _StockView)(*args, **kwargs)

    views = _module(
        "isaaclab.sim.views",
        FrameView=FrameView,
        BaseFrameView=_BaseFrameView,
        FrameViewWorldSpaceWriter=_WorldWriter,
        FrameViewLocalSpaceWriter=_LocalWriter,
    )
    sim = _module("isaaclab.sim", views=views, get_current_stage=lambda: stage_box["stage"])
    modules = {
        "isaaclab": _module("isaaclab", sim=sim),
        "isaaclab.sim": sim,
        "isaaclab.sim.views": views,
        "isaaclab.utils": _module("isaaclab.utils"),
        "isaaclab.utils.warp": _module("isaaclab.utils.warp", ProxyArray=_ProxyArray),
        "isaaclab.physics": _module("isaaclab.physics", PhysicsEvent=types.SimpleNamespace(PHYSICS_READY="ready")),
        "isaaclab_newton": _module("isaaclab_newton"),
        "isaaclab_newton.physics": _module("isaaclab_newton.physics"),
        "isaaclab_newton.physics.newton_manager": _module(
            "isaaclab_newton.physics.newton_manager", NewtonManager=_NewtonManager
        ),
    }
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(fv_isaaclab, "_classes", {})
    monkeypatch.setattr(fv_isaaclab_adapter, "_writers", {})  # the scope classes made over the fake Isaac Lab
    _NewtonManager.model, _NewtonManager.callbacks = None, []
    stage = Usd.Stage.CreateInMemory()
    for i in range(3):
        UsdGeom.Xform.Define(stage, f"/World/Parent_{i}").AddTranslateOp().Set((float(i), 0.0, 1.0))
        UsdGeom.Xform.Define(stage, f"/World/Parent_{i}/Child").AddTranslateOp().Set(CHILD_OFFSET)
    stage_box["stage"] = stage
    FrameView.stage_box = stage_box  # type: ignore[attr-defined]  (tests may swap the stage)
    yield FrameView
    fv_isaaclab.uninstall()


def _truth(stage: Usd.Stage, paths: list[str]) -> np.ndarray:
    cache = UsdGeom.XformCache()
    return np.array([list(cache.GetLocalToWorldTransform(stage.GetPrimAtPath(p)).ExtractTranslation()) for p in paths])


def test_install_fills_the_registry_and_uninstall_restores_it(fake_isaaclab: Any) -> None:
    """install() puts an adapter under 'physx' (and 'newton' when asked); uninstall() restores the registry."""
    assert not fv_isaaclab.installed()
    fv_isaaclab.install()
    assert fv_isaaclab.installed()
    assert issubclass(fake_isaaclab._registry["physx"], fv_isaaclab.IsaacLabFrameView)
    assert issubclass(fake_isaaclab._registry["physx"], _BaseFrameView)
    assert fake_isaaclab._registry["newton"].frameview_backend == "newton"
    fv_isaaclab.install()  # the same again: nothing changes
    with pytest.raises(ValueError, match="uninstall"):
        fv_isaaclab.install({"physx": "usd"})
    fv_isaaclab.uninstall()
    fv_isaaclab.install({"physx": "fabric"})
    assert "newton" not in fake_isaaclab._registry
    fv_isaaclab.uninstall()
    assert fake_isaaclab._registry == {"physx": _StockView}
    fv_isaaclab.uninstall()  # idempotent
    assert isinstance(fake_isaaclab("/World/Parent_.*/Child"), _StockView)


def test_unknown_backend_is_refused(fake_isaaclab: Any) -> None:
    """A frameview backend name that does not exist raises ValueError naming the key; nothing is installed."""
    with pytest.raises(ValueError, match=r"backends\['physx'\]: expected one of"):
        fv_isaaclab.install({"physx": "fabrik"})
    assert not fv_isaaclab.installed()


def test_factory_returns_proxy_arrays_of_xform_cache_poses(fake_isaaclab: Any) -> None:
    """FrameView(...) after install() reads pxr's XformCache poses as ProxyArrays, with prims in view order."""
    fv_isaaclab.install()
    view = fake_isaaclab("/World/Parent_.*/Child", device="cpu")
    try:
        assert isinstance(view.frameview, fv.FabricFrameView)
        paths = [f"/World/Parent_{i}/Child" for i in range(3)]
        assert view.count == 3 and view.prim_paths == paths
        assert [p.GetPath().pathString for p in view.prims] == paths
        pos, quat = view.get_world_poses()
        assert isinstance(pos, _ProxyArray) and isinstance(quat, _ProxyArray)
        stage = sys.modules["isaaclab.sim"].get_current_stage()
        np.testing.assert_allclose(pos.warp.numpy(), _truth(stage, paths), atol=1e-6)
        np.testing.assert_allclose(quat.warp.numpy(), np.tile([0.0, 0.0, 0.0, 1.0], (3, 1)), atol=1e-7)
        assert view.get_world_poses()[0] is pos  # the same buffer: the same ProxyArray
    finally:
        view.close()


def test_writer_scope_is_isaac_labs_class_and_locks_the_view(fake_isaaclab: Any) -> None:
    """Writes go through Isaac Lab's writer classes; the view's getters raise inside; the local pose follows."""
    fv_isaaclab.install()
    view = fake_isaaclab("/World/Parent_.*/Child", device="cpu")
    try:
        ids = wp.array([1], dtype=wp.int32)
        with view.xform_world_space_writer() as w:
            assert isinstance(w, _WorldWriter)
            w.set_poses(wp.array([wp.vec3f(4.0, 5.0, 6.0)], dtype=wp.vec3f), None, ids)
            with pytest.raises(RuntimeError):
                view.get_world_poses()
            np.testing.assert_allclose(w.get_poses(ids)[0].warp.numpy(), [[4.0, 5.0, 6.0]], atol=1e-6)
        with view.xform_local_space_writer() as w:
            assert isinstance(w, _LocalWriter)
            w.set_poses(translations=wp.array([wp.vec3f(0.0, 0.0, 2.0)], dtype=wp.vec3f), indices=ids)
        np.testing.assert_allclose(view.get_world_poses(ids)[0].warp.numpy(), [[1.0, 0.0, 3.0]], atol=1e-6)
        view.set_scales(wp.array([wp.vec3f(3.0, 3.0, 3.0)], dtype=wp.vec3f), ids)  # PhysX: world space
        np.testing.assert_allclose(view.get_scales(ids).warp.numpy(), [[3.0, 3.0, 3.0]], atol=1e-6)
    finally:
        view.close()


def test_a_failed_scope_entry_unlocks_the_view(fake_isaaclab: Any) -> None:
    """When frameview refuses the scope (a closed view), Isaac Lab's one-writer lock is released again."""
    fv_isaaclab.install()
    view = fake_isaaclab("/World/Parent_.*/Child", device="cpu")
    view.close()
    with pytest.raises(RuntimeError), view.xform_world_space_writer():
        pass
    assert view._active_writer is None


def test_newton_view_waits_for_physics(fake_isaaclab: Any) -> None:
    """Under Newton before the model exists: count 0, reads raise naming the wait, close() drops the callback."""
    fv_isaaclab.install({"physx": "fabric", "newton": "newton"})
    fake_isaaclab.backend = "newton"
    view = fake_isaaclab("/World/Parent_.*/Child", device="cpu")
    assert len(_NewtonManager.callbacks) == 1 and _NewtonManager.callbacks[0].event == "ready"
    assert view.count == 0
    with pytest.raises(RuntimeError, match="physics is ready"):
        view.get_world_poses()
    with pytest.raises(RuntimeError, match="physics is ready"):
        view.get_scales()
    view.close()
    assert _NewtonManager.callbacks == []


def test_without_isaaclab_install_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """install() where Isaac Lab is not importable raises ImportError with the pip command."""
    monkeypatch.setitem(sys.modules, "isaaclab", None)
    monkeypatch.setitem(sys.modules, "isaaclab.sim", None)
    monkeypatch.setitem(sys.modules, "isaaclab.sim.views", None)
    with pytest.raises(ImportError, match=r"pip install 'frameview\[isaaclab\]'"):
        fv_isaaclab.install()
    assert not fv_isaaclab.installed()


def _rotated_stage(fake_isaaclab: Any, n: int = 64) -> np.ndarray:
    """Replace the fake's stage by ``n`` prims at random orientations (plus the half turns and quarter turns whose
    quaternions tie in magnitude); return their xyzw quaternions as authored."""
    rng = np.random.default_rng(7)
    q = rng.normal(size=(n, 4))
    special = [[0, 0, 0.7071068, 0.7071068], [0, 0, -0.7071068, 0.7071068], [0.5, 0.5, 0.5, 0.5], [1, 0, 0, 0],
               [0, 0, 1, 0], [0.8, 0, 0, 0.6], [-0.8, 0, 0, 0.6], [0.6, 0, 0, -0.8], [0, 0, 0, 1]]  # fmt: skip
    q = np.concatenate([q, special])
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    stage = Usd.Stage.CreateInMemory()
    for i, (x, y, z, w) in enumerate(q):
        xf = UsdGeom.Xform.Define(stage, f"/World/Parent_{i}")
        xf.AddTranslateOp().Set((float(i), 0.0, 1.0))
        xf.AddOrientOp(UsdGeom.XformOp.PrecisionDouble).Set(Gf.Quatd(float(w), float(x), float(y), float(z)))
        UsdGeom.Xform.Define(stage, f"/World/Parent_{i}/Child").AddTranslateOp().Set(CHILD_OFFSET)
    fake_isaaclab.stage_box["stage"] = stage
    return q


def _gf_truth(stage: Usd.Stage, paths: list[str], world: bool) -> tuple[list[Any], np.ndarray]:
    """(orthonormalized pxr matrices, Gf's ExtractRotationQuat of each as xyzw): what Isaac Lab's USD view does."""
    cache = UsdGeom.XformCache()
    mats, quats = [], []
    for p in paths:
        prim = stage.GetPrimAtPath(p)
        m = cache.GetLocalToWorldTransform(prim) if world else cache.GetLocalTransformation(prim)[0]
        m = Gf.Matrix4d(m)
        m.Orthonormalize()
        g = m.ExtractRotationQuat()
        mats.append(m)
        quats.append([*g.GetImaginary(), g.GetReal()])
    return mats, np.array(quats)


@pytest.mark.parametrize("world", [True, False], ids=["world", "local"])
def test_usd_mapping_gives_isaaclab_usd_views_numbers(fake_isaaclab: Any, world: bool) -> None:
    """With "usd", poses come as Isaac Lab's UsdFrameView gives them: (M, 3) / (M, 4) float32 arrays and the
    quaternion pxr's ExtractRotationQuat gives (the same sign), within float32 rounding."""
    q = _rotated_stage(fake_isaaclab)
    fv_isaaclab.install({"physx": "usd"})
    view = fake_isaaclab("/World/Parent_.*", device="cpu")
    pos, quat = view.get_world_poses() if world else view.get_local_poses()
    assert pos.warp.dtype == wp.float32 and pos.warp.shape == (len(q), 3)
    assert quat.warp.dtype == wp.float32 and quat.warp.shape == (len(q), 4)
    mats, expected = _gf_truth(fake_isaaclab.stage_box["stage"], view.prim_paths, world)
    np.testing.assert_allclose(quat.warp.numpy(), expected, atol=2e-6)  # no sign freedom: same numbers
    np.testing.assert_allclose(pos.warp.numpy(), [list(m.ExtractTranslation()) for m in mats], atol=1e-6)
    with view.xform_world_space_writer() if world else view.xform_local_space_writer() as w:  # a scope's reads too
        np.testing.assert_allclose(w.get_poses()[1].warp.numpy(), expected, atol=2e-6)
    scales = view._get_world_scales_impl()  # the fake's BaseFrameView has no public scale getters
    assert scales.warp.dtype == wp.float32 and scales.warp.shape == (len(q), 3)
    view.close()


def test_fabric_mapping_signs_as_warp_quat_from_matrix(fake_isaaclab: Any) -> None:
    """With "fabric", quaternions are signed as Isaac Lab's FabricFrameView's wp.quat_from_matrix signs them."""
    q = _rotated_stage(fake_isaaclab)
    fv_isaaclab.install()
    view = fake_isaaclab("/World/Parent_.*", device="cpu")
    quat = view.get_world_poses()[1].warp.numpy()
    assert quat.shape == (len(q), 4)
    mats, _ = _gf_truth(fake_isaaclab.stage_box["stage"], view.prim_paths, True)
    rot = np.array([[[m[r][c] for c in range(3)] for r in range(3)] for m in mats])
    # Warp's quat_from_matrix takes a column-vector matrix: the transpose of pxr's row-vector one
    cols = wp.array(np.transpose(rot, (0, 2, 1)).astype(np.float32), dtype=wp.mat33f)
    out = wp.empty(len(q), dtype=wp.quatf)
    wp.launch(_quat_from_matrix, len(q), inputs=[cols], outputs=[out])
    np.testing.assert_allclose(quat, out.numpy(), atol=2e-6)
    view.close()


@wp.kernel
def _quat_from_matrix(m: wp.array(dtype=wp.mat33f), out: wp.array(dtype=wp.quatf)):
    i = wp.tid()
    out[i] = wp.quat_from_matrix(m[i])

# SPDX-License-Identifier: Apache-2.0
"""frameview.isaaclab.install() inside a real Isaac Lab 3 (skipped where isaaclab is not importable).

Isaac Lab's own frame-view contract (``frame_view_contract_utils.py``, shipped in its wheel: 17 tests, its scene, its
inputs, its tolerances) runs here against what ``FrameView(...)`` returns after :func:`frameview.isaaclab.install`;
the tests below it check the factory's registry before and after, and what the adapter adds (``prims``, torch
visibility, the legacy scale space). ``./scripts/isaaclab-check`` runs this file inside a fresh Isaac Lab venv.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("isaaclab.sim.views", reason="Isaac Lab 3 is not installed (pip install 'frameview[isaaclab]')")

import isaaclab
import isaaclab.sim as sim_utils
import torch
import warp as wp
from isaaclab.sim.views import BaseFrameView, FrameView
from isaaclab.utils.warp import ProxyArray
from pxr import Gf, Sdf, UsdGeom

import frameview as fv
import frameview.isaaclab as fv_isaaclab

_CONTRACT_DIR = Path(isaaclab.__file__).parent / "source" / "isaaclab" / "test" / "sim"
if not (_CONTRACT_DIR / "frame_view_contract_utils.py").is_file():
    pytest.skip(f"Isaac Lab's frame-view contract is not in its wheel ({_CONTRACT_DIR})", allow_module_level=True)
sys.path.insert(0, str(_CONTRACT_DIR))

from frame_view_contract_utils import *  # noqa: E402, F403  (Isaac Lab's contract tests, collected here)
from frame_view_contract_utils import CHILD_OFFSET, ViewBundle  # noqa: E402

PARENT_POS = (0.0, 0.0, 1.0)


@pytest.fixture(autouse=True)
def _stage_and_install():
    """A fresh Isaac Lab stage, and frameview installed behind FrameView(...) for the test."""
    sim_utils.create_new_stage()
    fv_isaaclab.install()
    yield
    fv_isaaclab.uninstall()
    if sim_utils.get_current_stage() is not None:  # a simulation context's exit may have released it
        sim_utils.clear_stage()
    sim_utils.SimulationContext.clear_instance()


def _parent_positions(num_envs: int, device: str = "cpu") -> torch.Tensor:
    """Parent positions from pxr's XformCache (the independent truth)."""
    stage = sim_utils.get_current_stage()
    cache = UsdGeom.XformCache()
    rows = []
    for i in range(num_envs):
        t = cache.GetLocalToWorldTransform(stage.GetPrimAtPath(f"/World/Parent_{i}")).ExtractTranslation()
        rows.append([float(t[0]), float(t[1]), float(t[2])])
    return torch.tensor(rows, dtype=torch.float32, device=device)


def _set_parent_positions(positions: torch.Tensor, num_envs: int) -> None:
    """Move the parents in USD (the embedded Fabric model follows USD's changes)."""
    stage = sim_utils.get_current_stage()
    with Sdf.ChangeBlock():
        for i in range(num_envs):
            p = positions[i]
            stage.GetPrimAtPath(f"/World/Parent_{i}").GetAttribute("xformOp:translate").Set(
                Gf.Vec3d(float(p[0]), float(p[1]), float(p[2]))
            )


@pytest.fixture
def view_factory():
    """Isaac Lab's contract scene (parent Xforms, a child at CHILD_OFFSET), viewed through FrameView(...)."""
    views = []

    def factory(num_envs: int, device: str) -> ViewBundle:
        stage = sim_utils.get_current_stage()
        for i in range(num_envs):
            sim_utils.create_prim(f"/World/Parent_{i}", "Xform", translation=PARENT_POS, stage=stage)
            sim_utils.create_prim(f"/World/Parent_{i}/Child", "Xform", translation=CHILD_OFFSET, stage=stage)
        view = FrameView("/World/Parent_[^/]*/Child", device=device)
        views.append(view)
        return ViewBundle(view, _parent_positions, _set_parent_positions, lambda: None)

    yield factory
    for view in views:
        view.close()


def _scene(num_envs: int = 3) -> None:
    stage = sim_utils.get_current_stage()
    for i in range(num_envs):
        sim_utils.create_prim(f"/World/Parent_{i}", "Xform", translation=(float(i), 0.0, 1.0), stage=stage)
        sim_utils.create_prim(f"/World/Parent_{i}/Child", "Xform", translation=CHILD_OFFSET, stage=stage)


def test_factory_returns_frameview_views_and_uninstall_restores() -> None:
    """After install() FrameView(...) is a frameview Fabric view behind BaseFrameView; uninstall() empties the slot."""
    _scene()
    before = dict(FrameView._registry)
    view = FrameView("/World/Parent_.*/Child", device="cpu")
    try:
        assert isinstance(view, BaseFrameView) and isinstance(view, fv_isaaclab.IsaacLabFrameView)
        assert isinstance(view.frameview, fv.FabricFrameView)
        assert view.count == 3 and view.prim_paths == [f"/World/Parent_{i}/Child" for i in range(3)]
        assert [p.GetPath().pathString for p in view.prims] == view.prim_paths
    finally:
        view.close()
    fv_isaaclab.uninstall()
    assert not fv_isaaclab.installed()
    assert "physx" not in FrameView._registry and "newton" not in FrameView._registry
    fv_isaaclab.install()
    assert {k: v for k, v in before.items()} == dict(FrameView._registry)


def test_poses_match_xform_cache_and_writes_keep_other_space() -> None:
    """World poses equal pxr's XformCache; a world write through Isaac Lab's writer moves the local pose to match."""
    _scene()
    view = FrameView("/World/Parent_.*/Child", device="cpu")
    try:
        pos, quat = view.get_world_poses()
        assert isinstance(pos, ProxyArray) and isinstance(quat, ProxyArray)
        truth = _parent_positions(3).numpy() + np.array(CHILD_OFFSET, np.float32)
        np.testing.assert_allclose(pos.torch.numpy(), truth, atol=1e-6)
        np.testing.assert_allclose(quat.torch.numpy(), np.tile([0.0, 0.0, 0.0, 1.0], (3, 1)), atol=1e-7)  # xyzw
        ids = wp.array([2], dtype=wp.int32)
        with view.xform_world_space_writer() as w:
            w.set_poses(wp.array([wp.vec3f(5.0, 6.0, 7.0)], dtype=wp.vec3f), None, ids)
            np.testing.assert_allclose(w.get_poses(ids)[0].torch.numpy(), [[5.0, 6.0, 7.0]], atol=1e-6)
        local, _ = view.get_local_poses(ids)
        np.testing.assert_allclose(local.torch.numpy(), [[5.0 - 2.0, 6.0, 7.0 - 1.0]], atol=1e-5)
    finally:
        view.close()


def test_legacy_scales_are_world_and_visibility_is_torch() -> None:
    """Under PhysX Isaac Lab's set_scales/get_scales are world-space; visibility is an (M,) torch bool tensor."""
    _scene(2)
    stage = sim_utils.get_current_stage()
    stage.GetPrimAtPath("/World/Parent_1").GetAttribute("xformOp:scale").Set(Gf.Vec3d(2.0, 2.0, 2.0))
    view = FrameView("/World/Parent_.*/Child", device="cpu")
    try:
        np.testing.assert_allclose(view.get_scales().torch.numpy(), [[1, 1, 1], [2, 2, 2]], atol=1e-6)
        view.set_scales(wp.array([wp.vec3f(4.0, 4.0, 4.0)], dtype=wp.vec3f), wp.array([1], dtype=wp.int32))
        np.testing.assert_allclose(view.get_world_scales().torch.numpy(), [[1, 1, 1], [4, 4, 4]], atol=1e-6)
        np.testing.assert_allclose(view.get_local_scales().torch.numpy(), [[1, 1, 1], [2, 2, 2]], atol=1e-6)
        visible = view.get_visibility()
        assert isinstance(visible, torch.Tensor) and visible.dtype == torch.bool and visible.tolist() == [True, True]
        view.set_visibility(torch.tensor([False, True]))
        assert view.get_visibility().tolist() == [False, True]
    finally:
        view.close()


def test_newton_view_matches_isaaclabs_own_view() -> None:
    """Under Isaac Lab's Newton physics, kit-less (env_0 alone on the stage), FrameView(...) after the default
    install() waits for sim.reset(), then finds the mount of every env and gives the numbers Isaac Lab's own
    NewtonSiteFrameView gives on the same scene: positions, xyzw quaternions with their sign, local poses and the
    legacy get_scales (collision-shape scales), with bodies and mounts turned so that the signs matter."""
    newton_cfg = pytest.importorskip("isaaclab_newton.physics")
    from isaaclab.assets import RigidObjectCfg
    from isaaclab.scene import InteractiveScene, InteractiveSceneCfg
    from isaaclab.sim import SimulationCfg, build_simulation_context
    from isaaclab.utils import configclass
    from isaaclab_newton.physics.newton_manager import NewtonManager
    from isaaclab_newton.sim.views import NewtonSiteFrameView

    num_envs = 11  # env_10 after env_9

    @configclass
    class _SceneCfg(InteractiveSceneCfg):
        cube: RigidObjectCfg = RigidObjectCfg(
            prim_path="{ENV_REGEX_NS}/Cube",
            spawn=sim_utils.CuboidCfg(
                size=(0.2, 0.3, 0.4),
                rigid_props=sim_utils.UsdPhysicsRigidBodyCfg(),
                mass_props=sim_utils.MassCfg(mass=1.0),
                collision_props=sim_utils.UsdPhysicsCollisionCfg(),
            ),
            init_state=RigidObjectCfg.InitialStateCfg(pos=(0.0, 0.0, 1.0), rot=(0.0, 0.0, 0.9238795, -0.3826834)),
        )

    assert fv_isaaclab.installed() and "newton" in fv_isaaclab.DEFAULT_BACKENDS
    cfg = SimulationCfg(physics=newton_cfg.NewtonCfg(solver_cfg=newton_cfg.MJWarpSolverCfg()))
    cfg.device = "cpu"
    with build_simulation_context(device="cpu", sim_cfg=cfg, add_ground_plane=False) as sim:  # ground: a download
        sim._app_control_on_stop_handle = None
        InteractiveScene(_SceneCfg(num_envs=num_envs, env_spacing=2.0))
        stage = sim_utils.get_current_stage()
        assert not stage.GetPrimAtPath("/World/envs/env_1/Cube").IsValid()  # kit-less: env_0 alone on the stage
        sim_utils.create_prim(
            "/World/envs/env_0/Cube/CameraMount", translation=CHILD_OFFSET, orientation=(0.5, -0.5, 0.5, -0.5)
        )
        pattern = "/World/envs/env_[^/]+/Cube/CameraMount"
        view = FrameView(pattern, device="cpu")
        stock = NewtonSiteFrameView(pattern, device="cpu")
        try:
            assert isinstance(view, fv_isaaclab.IsaacLabFrameView) and view.count == 0
            with pytest.raises(RuntimeError, match="physics is ready"):
                view.get_world_poses()
            sim.reset()
            for _ in range(3):
                sim.step()
            assert isinstance(view.frameview, fv.NewtonFrameView)
            assert view.prim_paths == [f"/World/envs/env_{i}/Cube/CameraMount" for i in range(num_envs)]
            assert view.count == stock.count == num_envs
            body_q = wp.to_torch(NewtonManager.get_state_0().body_q).numpy()
            labels = list(NewtonManager.get_model().body_label)
            assert [labels[b] for b in view.frameview.body_indices] == [
                f"/World/envs/env_{i}/Cube" for i in range(num_envs)
            ]
            ids = wp.array([10, 3, 0], dtype=wp.int32)
            for args in ((), (ids,)):
                pos, quat = view.get_world_poses(*args)
                spos, squat = stock.get_world_poses(*args)
                assert pos.warp.dtype == spos.warp.dtype and quat.warp.dtype == squat.warp.dtype  # vec3f, vec4f
                np.testing.assert_allclose(pos.torch.numpy(), spos.torch.numpy(), atol=2e-6)
                np.testing.assert_allclose(quat.torch.numpy(), squat.torch.numpy(), atol=2e-6)  # the same sign
                lpos, lquat = view.get_local_poses(*args)
                slpos, slquat = stock.get_local_poses(*args)
                np.testing.assert_allclose(lpos.torch.numpy(), slpos.torch.numpy(), atol=2e-6)
                np.testing.assert_allclose(lquat.torch.numpy(), slquat.torch.numpy(), atol=2e-6)
                np.testing.assert_allclose(view.get_scales(*args).torch.numpy(), stock.get_scales(*args).torch.numpy())
            assert (quat.torch.numpy()[:, 3] < 0).any() or (quat.torch.numpy()[:, :3] < 0).any()
            np.testing.assert_allclose(view.get_scales().torch.numpy()[0], [0.1, 0.15, 0.2], rtol=1e-6)  # half sizes
            # sign parity after writes: world orientations with w < 0 read back as Isaac Lab's view reads them
            rng = np.random.default_rng(4)
            q = rng.normal(size=(3, 4)).astype(np.float32)
            q /= np.linalg.norm(q, axis=1, keepdims=True)
            q[:2, 3] = -np.abs(q[:2, 3])  # two with w < 0, one with w >= 0
            p = rng.uniform(-1.0, 1.0, (3, 3)).astype(np.float32)
            for v in (view, stock):
                with v.xform_world_space_writer() as w:
                    w.set_poses(positions=wp.array(p, dtype=wp.vec3f), orientations=wp.array(q, dtype=wp.vec4f),
                                indices=ids)  # fmt: skip
            for args in ((), (ids,)):
                pos, quat = view.get_world_poses(*args)
                spos, squat = stock.get_world_poses(*args)
                np.testing.assert_allclose(pos.torch.numpy(), spos.torch.numpy(), atol=2e-6)
                np.testing.assert_allclose(quat.torch.numpy(), squat.torch.numpy(), atol=2e-6)  # the sign written
            np.testing.assert_allclose(view.get_world_poses(ids)[1].torch.numpy(), q, atol=2e-6)
            assert np.isfinite(body_q).all()
        finally:
            view.close()
            stock.close()

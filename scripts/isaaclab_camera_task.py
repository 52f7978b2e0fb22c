# SPDX-License-Identifier: Apache-2.0
"""Isaac-Cartpole-Camera-Direct, kit-less on the CPU with Newton physics and Newton's renderer, on a stand-in
cartpole: records what the task observes, with Isaac Lab's own frame views or with frameview's.

Isaac Lab's cartpole asset lives on its asset server, which these machines cannot reach; the stand-in authored here
has the same articulation (a rail fixed to the world, a cart on the prismatic joint ``slider_to_cart``, a pole on
the revolute joint ``cart_to_pole``), so the task's config, joint lookup and actuators run unchanged.

Usage (``scripts/isaaclab-check`` runs it twice and compares the two files bit for bit)::

    python scripts/isaaclab_camera_task.py stock OUT.npz
    python scripts/isaaclab_camera_task.py frameview OUT.npz

Records, per step (a fixed seed and fixed actions): the policy observation (the rendered images, when the renderer
runs) and the camera poses as the task's camera reads them from its frame view (``pos_w``, ``quat_w_world``,
``quat_w_ros``, ``quat_w_opengl``), and the critic observation (the joint state).
"""

from __future__ import annotations

import atexit
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ENVS = 4
STEPS = 6


def stand_in_path() -> Path:
    """Where a run authors its stand-in cartpole: a temporary folder, removed when the process exits."""
    folder = tempfile.mkdtemp(prefix="cartpole-stand-in-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return Path(folder) / "cartpole.usda"


def stand_in_cartpole(path: Path) -> None:
    """Author the stand-in cartpole: rail (fixed), cart (prismatic along x), pole (revolute about y)."""
    from pxr import Gf, Usd, UsdGeom, UsdPhysics

    stage = Usd.Stage.CreateNew(str(path))
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.z)
    UsdGeom.SetStageMetersPerUnit(stage, 1.0)
    root = UsdGeom.Xform.Define(stage, "/cartpole")
    stage.SetDefaultPrim(root.GetPrim())
    UsdPhysics.ArticulationRootAPI.Apply(root.GetPrim())

    def body(name: str, pos: tuple[float, float, float], size: tuple[float, float, float], mass: float) -> str:
        path = f"/cartpole/{name}"
        xf = UsdGeom.Xform.Define(stage, path)
        xf.AddTranslateOp().Set(Gf.Vec3d(*pos))
        UsdPhysics.RigidBodyAPI.Apply(xf.GetPrim())
        UsdPhysics.MassAPI.Apply(xf.GetPrim()).CreateMassAttr(mass)
        geom = UsdGeom.Cube.Define(stage, f"{path}/geometry")
        geom.CreateSizeAttr(1.0)
        geom.AddScaleOp().Set(Gf.Vec3f(*size))
        UsdPhysics.CollisionAPI.Apply(geom.GetPrim())
        return path

    rail = body("rail", (0.0, 0.0, 0.0), (8.0, 0.03, 0.03), 1.0)
    cart = body("cart", (0.0, 0.0, 0.0), (0.2, 0.25, 0.2), 1.0)
    pole = body("pole", (0.0, 0.12, 0.47), (0.04, 0.04, 1.0), 0.2)
    fixed = UsdPhysics.FixedJoint.Define(stage, "/cartpole/rootJoint")
    fixed.CreateBody1Rel().SetTargets([rail])
    slider = UsdPhysics.PrismaticJoint.Define(stage, "/cartpole/slider_to_cart")
    slider.CreateBody0Rel().SetTargets([rail])
    slider.CreateBody1Rel().SetTargets([cart])
    slider.CreateAxisAttr("X")
    slider.CreateLowerLimitAttr(-4.0)
    slider.CreateUpperLimitAttr(4.0)
    hinge = UsdPhysics.RevoluteJoint.Define(stage, "/cartpole/cart_to_pole")
    hinge.CreateBody0Rel().SetTargets([cart])
    hinge.CreateBody1Rel().SetTargets([pole])
    hinge.CreateAxisAttr("Y")
    hinge.CreateLocalPos0Attr(Gf.Vec3f(0.0, 0.12, 0.0))
    hinge.CreateLocalPos1Attr(Gf.Vec3f(0.0, 0.0, -0.47))
    for joint in (slider, hinge):
        UsdPhysics.DriveAPI.Apply(joint.GetPrim(), "linear" if joint is slider else "angular")
    stage.Save()


def main(mode: str, out: str) -> None:
    import torch

    if mode == "frameview":
        import frameview.isaaclab

        frameview.isaaclab.install()
    elif mode != "stock":
        raise SystemExit(f"mode: expected 'stock' or 'frameview', got {mode!r}")

    sys.path.insert(0, str(Path(__file__).parent))
    from isaaclab_views_plugin import use_local_ground_plane

    use_local_ground_plane()
    from isaaclab_tasks.core.cartpole.cartpole_direct_camera_env import CartpoleCameraEnv
    from isaaclab_tasks.core.cartpole.cartpole_direct_camera_env_cfg import CartpoleCameraEnvCfg
    from isaaclab_tasks.utils.hydra import resolve_presets

    asset = stand_in_path()
    stand_in_cartpole(asset)
    cfg = resolve_presets(CartpoleCameraEnvCfg(), {"newton_mjwarp", "newton_renderer", "rgb"})
    cfg.scene.num_envs = ENVS
    cfg.scene.cartpole.spawn.usd_path = str(asset)
    cfg.sim.device = "cpu"
    cfg.seed = 7
    started = time.perf_counter()
    env = CartpoleCameraEnv(cfg)
    camera = env._tiled_camera
    view = camera._view
    print(f"{mode}: camera view {type(view).__module__}.{type(view).__name__}, count {view.count}", flush=True)
    record: dict[str, list[np.ndarray]] = {}

    def keep(name: str, value: object) -> None:
        array = value.torch if hasattr(value, "torch") else value
        record.setdefault(name, []).append(torch.as_tensor(array).detach().cpu().numpy().copy())

    obs, _ = env.reset()
    actions = torch.linspace(-1.0, 1.0, ENVS).reshape(ENVS, 1)
    for step in range(STEPS):
        obs, *_ = env.step(actions * (1 if step % 2 else -1))
        data = camera.data
        for name in ("pos_w", "quat_w_world", "quat_w_ros", "quat_w_opengl"):
            keep(name, getattr(data, name))
        keep("critic", obs["critic"])
        keep("policy", obs["policy"])
        pos, quat = view.get_world_poses()
        keep("view_pos", pos)
        keep("view_quat", quat)
    env.close()
    np.savez(out, **{k: np.stack(v) for k, v in record.items()})
    print(f"{mode}: {STEPS} steps of {ENVS} envs in {time.perf_counter() - started:.1f} s -> {out}")


if __name__ == "__main__":
    main(*sys.argv[1:3])

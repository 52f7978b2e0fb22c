# SPDX-License-Identifier: Apache-2.0
"""Isaac-Cartpole-Direct, kit-less on the CPU with Newton physics (MuJoCo Warp): frameview's physics views and a
camera frame, read right after every ``env.step`` (before Isaac Lab's own data), against Isaac Lab's articulation
data, bit for bit, on every row, the rows reset in that step included.

Isaac Lab's cartpole asset lives on its asset server, which these machines cannot reach: the stand-in authored here
has the task's joints (``slider_to_cart``, ``cart_to_pole``) and a camera Xform ``pole/Cam`` riding on the pole;
``floating`` drops the rail's fixed joint (a floating base). The ground plane is switched off.

Usage (``scripts/isaaclab-check`` runs both bases)::

    python scripts/isaaclab_physics_task.py fixed [STEPS] [ENVS]
    python scripts/isaaclab_physics_task.py floating [STEPS] [ENVS]

Compared after every step (random actions, the task's own resets, an ``env.reset()`` and a ``_reset_idx`` of a
subset on the way):

=====================================  ==============================================================
frameview                              Isaac Lab (``cartpole.data``)
=====================================  ==============================================================
reader / ``get_dof_positions``         ``joint_pos`` (columns by ``joint_names``)
reader / ``get_dof_velocities``        ``joint_vel``
reader efforts                         ``control.joint_f`` through Isaac Lab's binding (its actuators' command)
``get_root_poses``                     ``root_link_pose_w``
``get_root_velocities``                ``root_com_vel_w`` (linear of the centre of mass, angular; world)
``get_link_poses``                     ``body_link_pose_w`` (columns by ``body_names``)
``get_link_velocities``                ``body_com_vel_w``
``RigidBodyView(pole)`` poses/vels     ``body_link_pose_w`` / ``body_com_vel_w`` of the pole
camera on the pole (``install()``)     the pole's pose composed with the camera's offset, float64
=====================================  ==============================================================

Exit status 0 when every quantity is bit-identical on every row of every step (the camera within float32
rounding of the float64 composition), 1 otherwise; one summary line per quantity.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

CAM_OFFSET = (0.05, -0.1, 0.3)  # the camera's translation in the pole's frame
CAM_ROT_DEG = 30.0  # and its rotation about the pole's x axis


def stand_in_cartpole(path: Path, floating: bool) -> None:
    """The stand-in cartpole of scripts/isaaclab_camera_task.py, with a camera Xform on the pole (and, ``floating``,
    no fixed joint on the rail)."""
    sys.path.insert(0, str(Path(__file__).parent))
    from isaaclab_camera_task import stand_in_cartpole as author
    from pxr import Gf, Usd, UsdGeom

    author(path)
    stage = Usd.Stage.Open(str(path))
    cam = UsdGeom.Xform.Define(stage, "/cartpole/pole/Cam")
    cam.AddTranslateOp().Set(Gf.Vec3d(*CAM_OFFSET))
    cam.AddRotateXOp().Set(CAM_ROT_DEG)
    if floating:
        stage.RemovePrim("/cartpole/rootJoint")
    stage.Save()


def _rot(q: np.ndarray) -> np.ndarray:
    """Row-vector rotation matrix of an xyzw quaternion, float64."""
    x, y, z, w = (float(v) for v in q / np.linalg.norm(q))
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y + z * w), 2 * (x * z - y * w)],
        [2 * (x * y - z * w), 1 - 2 * (x * x + z * z), 2 * (y * z + x * w)],
        [2 * (x * z + y * w), 2 * (y * z - x * w), 1 - 2 * (x * x + y * y)],
    ])  # fmt: skip


def main(base: str = "fixed", steps: str = "100", envs: str = "16") -> int:
    import torch

    import frameview.isaaclab as fvi

    if base not in ("fixed", "floating"):
        raise SystemExit(f"base: expected 'fixed' or 'floating', got {base!r}")
    n_steps, n_envs = int(steps), int(envs)
    fvi.install()
    from isaaclab.sim.views import FrameView
    from isaaclab_camera_task import stand_in_path
    from isaaclab_tasks.core.cartpole.cartpole_direct_env import CartpoleEnv
    from isaaclab_tasks.core.cartpole.cartpole_direct_env_cfg import CartpoleEnvCfg
    from isaaclab_tasks.utils.hydra import resolve_presets

    asset = stand_in_path()
    stand_in_cartpole(asset, floating=base == "floating")
    cfg = resolve_presets(CartpoleEnvCfg(), {"newton_mjwarp"})
    cfg.scene.num_envs = n_envs
    cfg.scene.ground = None  # no asset server: no ground plane
    cfg.scene.cartpole.spawn.usd_path = str(asset)
    cfg.sim.device = "cpu"
    cfg.seed = 11
    cfg.episode_length_s = 0.4  # time-outs every 24 steps: the task's own resets, staggered by terminations
    started = time.perf_counter()
    env = CartpoleEnv(cfg)
    robot = env.cartpole
    data = robot.data
    arts = fvi.ArticulationView("{ENV_REGEX_NS}/Robot")
    reader = arts.joint_state_reader()
    poles = fvi.RigidBodyView("{ENV_REGEX_NS}/Robot/pole")
    cams = FrameView("/World/envs/env_.*/Robot/pole/Cam", device="cpu")
    if arts.is_fixed_base != (base == "fixed"):
        raise SystemExit(f"the stand-in cartpole's base is not {base}: is_fixed_base={arts.is_fixed_base}")
    jcol = [arts.joint_names.index(n) for n in robot.joint_names]
    bcol = [arts.body_names.index(n) for n in robot.body_names]
    pole = list(robot.body_names).index("pole")
    print(f"{base} base: {n_envs} envs; frameview joints {arts.joint_names}, bodies {arts.body_names}; "
          f"Isaac Lab joints {list(robot.joint_names)}, bodies {list(robot.body_names)}", flush=True)  # fmt: skip
    torch.manual_seed(3)
    worst: dict[str, list] = {}  # name -> [rows differing (all steps), rows differing on reset rows, steps]
    reset_rows_total = 0

    def compare(name: str, ours: np.ndarray, theirs: np.ndarray, reset: np.ndarray) -> None:
        entry = worst.setdefault(name, [0, 0, 0.0])
        ours, theirs = np.asarray(ours), np.asarray(theirs)
        differ = ~np.all((ours == theirs).reshape(ours.shape[0], -1), axis=1)
        entry[0] += int(differ.sum())
        entry[1] += int((differ & reset).sum())
        if differ.any():
            entry[2] = max(entry[2], float(np.abs(ours.astype(np.float64) - theirs).max()))

    def t(x: object) -> np.ndarray:
        return np.asarray(x.torch.detach().cpu().numpy() if hasattr(x, "torch") else x).copy()  # type: ignore[attr-defined]

    def read_and_compare(reset: np.ndarray) -> None:
        # frameview first: nothing has run forward kinematics of the rows reset in this step
        state = reader.read()
        q, qd = t(state.positions), t(state.velocities)
        eff = None if state.efforts is None else t(state.efforts)
        rp, rq = (t(a) for a in arts.get_root_poses())
        rl, ra = (t(a) for a in arts.get_root_velocities())
        lp, lq = (t(a) for a in arts.get_link_poses())
        ll, la = (t(a) for a in arts.get_link_velocities())
        pp, pq = (t(a) for a in poles.get_world_poses())
        pl, pa = (t(a) for a in poles.get_velocities())
        cp, _cq = (t(a) for a in cams.get_world_poses())
        # then Isaac Lab's data
        compare("dof positions", q[:, jcol], t(data.joint_pos), reset)
        compare("dof velocities", qd[:, jcol], t(data.joint_vel), reset)
        if eff is not None:
            compare("dof efforts (control.joint_f)", eff[:, jcol], t(data._sim_bind_joint_effort), reset)
        root_pose, root_vel = t(data.root_link_pose_w), t(data.root_com_vel_w)
        compare("root poses", np.concatenate([rp, rq], axis=1), root_pose, reset)
        compare("root velocities", np.concatenate([rl, ra], axis=1), root_vel, reset)
        body_pose, body_vel = t(data.body_link_pose_w), t(data.body_com_vel_w)
        compare("link poses", np.concatenate([lp, lq], axis=2)[:, bcol], body_pose, reset)
        compare("link velocities", np.concatenate([ll, la], axis=2)[:, bcol], body_vel, reset)
        compare("rigid-body view (pole) poses", np.concatenate([pp, pq], axis=1), body_pose[:, pole], reset)
        compare("rigid-body view (pole) velocities", np.concatenate([pl, pa], axis=1), body_vel[:, pole], reset)
        # the camera: the pole's pose composed with the offset, float64
        want = np.zeros((n_envs, 3))
        for e in range(n_envs):
            p, r = body_pose[e, pole, :3].astype(np.float64), _rot(body_pose[e, pole, 3:].astype(np.float64))
            want[e] = np.asarray(CAM_OFFSET) @ r + p
        cam_err = np.abs(cp.reshape(n_envs, 3) - want).max()
        entry = worst.setdefault("camera on the pole (position, m)", [0, 0, 0.0])
        entry[2] = max(entry[2], float(cam_err))
        if cam_err > 2e-5:
            entry[0] += 1

    env.reset()
    all_envs = np.ones(n_envs, dtype=bool)
    read_and_compare(all_envs)
    for step in range(n_steps):
        if step == n_steps // 3:
            env.reset()  # every env, through Isaac Lab, then read at once
            read_and_compare(all_envs)
            reset_rows_total += n_envs
        if step == 2 * n_steps // 3:  # a subset, as a curriculum or an event term does
            subset = torch.arange(0, n_envs, 3, device=env.device)
            env._reset_idx(subset)
            rows = np.zeros(n_envs, dtype=bool)
            rows[subset.cpu().numpy()] = True
            read_and_compare(rows)
            reset_rows_total += int(rows.sum())
        actions = 2.0 * torch.rand((n_envs, 1), device=env.device) - 1.0
        env.step(actions)
        reset = env.reset_buf.cpu().numpy().astype(bool)  # the envs the step reset (terminated or timed out)
        reset_rows_total += int(reset.sum())
        read_and_compare(reset)
    env.close()
    print(f"{n_steps} steps, {reset_rows_total} rows reset on the way, {time.perf_counter() - started:.0f} s")
    ok = True
    for name, (rows, reset_rows, err) in worst.items():
        verdict = "bit-identical" if rows == 0 else f"DIFFERS on {rows} rows ({reset_rows} of them reset rows)"
        if name.startswith("camera"):
            verdict = f"within 2e-5 m of float64 (largest {err:.2e} m)" if rows == 0 else f"FAILED ({err:.2e} m)"
        elif rows:
            verdict += f", up to {err:.3g}"
        print(f"  {name:38s} {verdict}")
        ok &= rows == 0
    print("passed" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))

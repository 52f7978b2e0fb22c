# SPDX-License-Identifier: Apache-2.0
"""The Newton backend on the reset path: camera poses read from bodies simulated by Newton, as users run it.

Scene: ``envs`` envs, each ``/World/envs/env_i/Body`` (a free rigid body: ``UsdPhysics.RigidBodyAPI`` and
``MassAPI``, with a ``Collider`` cube child carrying ``CollisionAPI``) and ``Body/Camera`` at a fixed offset on it;
metres, z up. The stage is authored with Sdf batch edits in one ``Sdf.ChangeBlock`` (as ``perf/harness/scenes.py``
builds the Fabric harness's pxr stage), turned into a model by ``newton.ModelBuilder().add_usd(stage)``, and stepped
a few times with ``SolverXPBD`` (states swapped each step, as solvers do) so that body poses are physics-driven. One
view through the public API: ``fv.NewtonFrameView("/World/envs/env_.*/Body/Camera", state=lambda: sim["state"])``.

Every time is a median over repetitions, each ending in ``wp.synchronize_device`` (so it includes the device's
work), after warm-up calls. Rows:

- ``get_world_poses``: all cameras;
- ``reset_read`` / ``reset_read_mask``: the cameras of ``reset`` envs, int32 device indices / a boolean device mask;
- ``camera_read_ros``: ``fv.CameraPoses(view).read(indices, "ros")`` for those envs;
- ``reset``: the reset envs' bodies written through Newton (``state.body_q``, ``state.body_qd``: one ``wp.launch``
  over the device indices, as a user resets bodies), then their cameras read by index;
- ``set_world_poses_frames``: a world write of the ``reset`` cameras (device data: their current poses, so the
  scene does not change). Cameras are frames: the write changes their offsets on their bodies, never a body;
- ``reset_graph`` (CUDA): the masked body reset kernel and the masked camera read, captured once with
  ``wp.ScopedCapture`` and replayed.

Before timing, one reset is checked against float64 truth (camera world = the body's new pose composed with the
camera's fixed offset, from the authored values), for the indexed read and the ROS read; the largest error goes to
the JSON. Results go to perf/out/ (git-ignored) unless ``--save-as NAME`` writes perf/results/newton_NAME.json.

Usage::

    python perf/bench_newton.py                                   # CPU: 1024 and 8192 envs
    python perf/bench_newton.py --envs 1024 --save-as cpu         # the committed CPU result
    python perf/bench_newton.py --device cuda:0 --save-as h200
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import warp as wp

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT.parent / "examples"))
from harness.machine import HostLoad, machine_info  # noqa: E402  (also quiets Warp's banner)
from harness.timing import Timer  # noqa: E402
from newton_cameras import camera_orientation, random_poses, reset_bodies  # noqa: E402  (the example's helpers)

import frameview as fv  # noqa: E402

TARGETS_US = {  # H200 targets of the Newton issue (14), 8192 frames, medians including the synchronisation
    "get_world_poses": 15.0,
    "reset_read": 20.0,
}
CAMERAS = "/World/envs/env_.*/Body/Camera"
CAMERA_OFFSET = (0.2, 0.0, 0.3)
CAMERA_PITCH_DEG = 20.0
BODY_HEIGHT = 5.0
SPACING = 2.0
DT = 1.0 / 60.0


@wp.kernel(enable_backward=False)
def reset_bodies_masked(
    # inputs
    mask: wp.array(dtype=wp.bool),
    body_of_env: wp.array(dtype=wp.int32),
    poses: wp.array(dtype=wp.transformf),
    # outputs
    body_q_out: wp.array(dtype=wp.transformf),
    body_qd_out: wp.array(dtype=wp.spatial_vectorf),
):
    """Put the body of every masked env ``e`` at ``poses[e]``, at rest (the masked twin of the example's kernel)."""
    e = wp.tid()
    if mask[e]:
        b = body_of_env[e]
        body_q_out[b] = poses[e]
        body_qd_out[b] = wp.spatial_vectorf()


# ---------------------------------------------------------------- scene


def env_origins(envs: int) -> np.ndarray:
    """(envs, 3) float64 grid origins of the envs."""
    side = int(np.ceil(np.sqrt(envs)))
    ids = np.arange(envs)
    return np.stack([SPACING * (ids % side), SPACING * (ids // side), np.zeros(envs)], axis=1)


def body_yaws(envs: int) -> np.ndarray:
    return 0.37 * np.arange(envs) % (2.0 * np.pi)


def build_stage(envs: int) -> tuple[Any, dict[str, float]]:
    """The scene on a pxr stage, authored with Sdf in one change block; returns ``(stage, seconds by phase)``."""
    from pxr import Gf, Sdf, Usd, UsdGeom, UsdPhysics, Vt

    t0 = time.perf_counter()
    names = Sdf.ValueTypeNames
    tr_orient = Vt.TokenArray(["xformOp:translate", "xformOp:orient"])
    translate_only = Vt.TokenArray(["xformOp:translate"])
    body_api = Sdf.TokenListOp.Create(prependedItems=["PhysicsRigidBodyAPI", "PhysicsMassAPI"])
    collider_api = Sdf.TokenListOp.Create(prependedItems=["PhysicsCollisionAPI"])
    cam_q = camera_orientation(CAMERA_PITCH_DEG)
    origins, yaws = env_origins(envs), body_yaws(envs)

    def attr(spec: Any, name: str, type_name: Any, value: Any, uniform: bool = False) -> None:
        variability = Sdf.VariabilityUniform if uniform else Sdf.VariabilityVarying
        Sdf.AttributeSpec(spec, name, type_name, variability=variability).default = value

    layer = Sdf.Layer.CreateAnonymous("frameview_bench_newton")
    with Sdf.ChangeBlock():
        world = Sdf.PrimSpec(layer, "World", Sdf.SpecifierDef, "Xform")
        root = Sdf.PrimSpec(world, "envs", Sdf.SpecifierDef, "Xform")
        for i in range(envs):
            env = Sdf.PrimSpec(root, f"env_{i}", Sdf.SpecifierDef, "Xform")
            attr(env, "xformOp:translate", names.Double3, Gf.Vec3d(*origins[i].tolist()))
            attr(env, "xformOpOrder", names.TokenArray, translate_only, uniform=True)
            body = Sdf.PrimSpec(env, "Body", Sdf.SpecifierDef, "Xform")
            body.SetInfo("apiSchemas", body_api)
            half = float(yaws[i]) / 2.0
            attr(body, "xformOp:translate", names.Double3, Gf.Vec3d(0.0, 0.0, BODY_HEIGHT))
            attr(body, "xformOp:orient", names.Quatf, Gf.Quatf(float(np.cos(half)), 0.0, 0.0, float(np.sin(half))))
            attr(body, "xformOpOrder", names.TokenArray, tr_orient, uniform=True)
            attr(body, "physics:mass", names.Float, 1.0)
            attr(body, "physics:diagonalInertia", names.Float3, Gf.Vec3f(0.01, 0.01, 0.01))
            collider = Sdf.PrimSpec(body, "Collider", Sdf.SpecifierDef, "Cube")
            collider.SetInfo("apiSchemas", collider_api)
            attr(collider, "size", names.Double, 0.2)
            camera = Sdf.PrimSpec(body, "Camera", Sdf.SpecifierDef, "Camera")
            attr(camera, "xformOp:translate", names.Double3, Gf.Vec3d(*CAMERA_OFFSET))
            attr(camera, "xformOp:orient", names.Quatf, cam_q)
            attr(camera, "xformOpOrder", names.TokenArray, tr_orient, uniform=True)
    t1 = time.perf_counter()
    stage = Usd.Stage.Open(layer)
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.z)
    UsdGeom.SetStageMetersPerUnit(stage, 1.0)  # Newton works in metres: gravity would be cm/s^2 otherwise
    scene = UsdPhysics.Scene.Define(stage, "/physicsScene")
    scene.CreateGravityDirectionAttr(Gf.Vec3f(0.0, 0.0, -1.0))
    scene.CreateGravityMagnitudeAttr(9.81)
    return stage, {"author_s": t1 - t0, "open_s": time.perf_counter() - t1}


def camera_local() -> np.ndarray:
    """Float64 row-vector matrix of the camera on its body, from the authored (float32) values."""
    from pxr import Gf

    q = camera_orientation(CAMERA_PITCH_DEG)
    m = np.eye(4)
    m[:3, :3] = np.array(Gf.Matrix3d(Gf.Quatd(float(q.GetReal()), Gf.Vec3d(*q.GetImaginary()))), dtype=np.float64)
    m[3, :3] = CAMERA_OFFSET
    return m


def pose_matrix(x: np.ndarray) -> np.ndarray:
    """Float64 row-vector matrix of a body pose ``[p xyz, q xyzw]``."""
    p, q = x[:3].astype(np.float64), x[3:7].astype(np.float64)
    q = q / np.linalg.norm(q)
    qx, qy, qz, qw = q
    rot = np.array([  # row-vector: rows are the rotated axes
        [1 - 2 * (qy * qy + qz * qz), 2 * (qx * qy + qz * qw), 2 * (qx * qz - qy * qw)],
        [2 * (qx * qy - qz * qw), 1 - 2 * (qx * qx + qz * qz), 2 * (qy * qz + qx * qw)],
        [2 * (qx * qz + qy * qw), 2 * (qy * qz - qx * qw), 1 - 2 * (qx * qx + qy * qy)],
    ])  # fmt: skip
    m = np.eye(4)
    m[:3, :3] = rot
    m[3, :3] = p
    return m


def rotation_quat(rows: np.ndarray) -> np.ndarray:
    """xyzw quaternion of a float64 row-vector rotation (rows are the rotated axes)."""
    from pxr import Gf

    gq = Gf.Matrix3d(*rows.ravel().tolist()).ExtractRotation().GetQuat()
    return np.array([*gq.GetImaginary(), gq.GetReal()], dtype=np.float64)


def quat_error(got: np.ndarray, want: np.ndarray) -> float:
    """Largest component difference of unit quaternions, up to sign (q and -q are one rotation)."""
    got = got.astype(np.float64)
    return float(np.minimum(np.abs(got - want).max(1), np.abs(got + want).max(1)).max())


def check_reset(cams: Any, camera_poses: Any, ids: wp.array, poses: np.ndarray) -> dict[str, float]:
    """Largest errors of one reset's camera reads (world and ROS) against float64 truth: camera world = camera
    local @ the body's new pose. The bodies must already be at ``poses``."""
    local = camera_local()
    worlds = np.array([local @ pose_matrix(x) for x in poses])
    want_pos = worlds[:, 3, :3]
    want_quat = np.array([rotation_quat(w[:3, :3]) for w in worlds])
    want_ros = np.array([rotation_quat(np.stack([w[0, :3], -w[1, :3], -w[2, :3]])) for w in worlds])
    pos, quat = (a.numpy() for a in cams.get_world_poses(ids))
    ros_pos, ros_quat = (a.numpy() for a in camera_poses.read(ids, "ros"))
    return {
        "position": float(max(np.abs(pos - want_pos).max(), np.abs(ros_pos - want_pos).max())),
        "orientation": max(quat_error(quat, want_quat), quat_error(ros_quat, want_ros)),
    }


# ---------------------------------------------------------------- one case


def run_case(device: str, envs: int, reset: int, reps: int, steps: int, budget_s: float) -> dict[str, Any]:
    import newton

    setup: dict[str, float] = {}
    stage, phases = build_stage(envs)
    setup.update(phases)
    t0 = time.perf_counter()
    builder = newton.ModelBuilder()
    builder.add_usd(stage)
    model = builder.finalize(device=device)
    setup["model_s"] = time.perf_counter() - t0
    if model.body_count != envs:
        raise RuntimeError(f"add_usd made {model.body_count} bodies from {envs} envs")
    solver = newton.solvers.SolverXPBD(model)
    control = model.control()
    sim = {"state": model.state(), "next": model.state()}
    t0 = time.perf_counter()
    for _ in range(steps):
        solver.step(sim["state"], sim["next"], control, None, DT)
        sim["state"], sim["next"] = sim["next"], sim["state"]  # the view's callable sees the new state
    wp.synchronize_device(device)
    setup["steps_s"] = time.perf_counter() - t0
    fall = BODY_HEIGHT - float(sim["state"].body_q.numpy()[:, 2].mean())

    t0 = time.perf_counter()
    cams = fv.NewtonFrameView(CAMERAS, stage=stage, model=model, state=lambda: sim["state"])
    setup["view_s"] = time.perf_counter() - t0
    camera_poses = fv.CameraPoses(cams)
    rng = np.random.default_rng(5)
    rows: dict[str, dict] = {}
    try:
        body_of_env = wp.array(cams.body_indices, dtype=wp.int32, device=device)
        ids_host = np.sort(rng.choice(envs, size=reset, replace=False)).astype(np.int32)
        ids = wp.array(ids_host, dtype=wp.int32, device=device)
        mask_host = np.zeros(envs, dtype=bool)
        mask_host[ids_host] = True
        mask = wp.array(mask_host, dtype=wp.bool, device=device)
        poses_host = random_poses(rng, env_origins(envs)[ids_host])
        poses = wp.array(poses_host, dtype=wp.transformf, device=device)
        all_poses_host = sim["state"].body_q.numpy()[cams.body_indices]
        all_poses_host[ids_host] = poses_host
        all_poses = wp.array(all_poses_host, dtype=wp.transformf, device=device)

        def reset_write() -> None:
            state = sim["state"]
            wp.launch(reset_bodies, dim=reset, inputs=[ids, body_of_env, poses], outputs=[state.body_q, state.body_qd],
                      device=device)  # fmt: skip

        reset_write()
        errors = check_reset(cams, camera_poses, ids, poses_host)
        frame_pos = wp.clone(cams.get_world_poses(ids)[0])  # the reset cameras' poses: writing them changes nothing
        frame_quat = wp.clone(cams.get_world_poses(ids)[1])

        def reset_once() -> None:
            reset_write()
            cams.get_world_poses(ids)

        timer = Timer(device, reps, budget_s)
        with HostLoad() as load:
            rows["get_world_poses"] = timer(cams.get_world_poses, warmup=3)
            rows["reset_read"] = timer(lambda: cams.get_world_poses(ids), warmup=3)
            rows["reset_read_mask"] = timer(lambda: cams.get_world_poses(mask=mask), warmup=3)
            rows["camera_read_ros"] = timer(lambda: camera_poses.read(ids, "ros"), warmup=3)
            rows["reset"] = timer(reset_once, warmup=3)
            rows["set_world_poses_frames"] = timer(lambda: cams.set_world_poses(frame_pos, frame_quat, ids), warmup=3)
            if wp.get_device(device).is_cuda:
                rows["reset_graph"] = _graph_replay(cams, sim, mask, body_of_env, all_poses, timer)
        cams.check()
        after = check_reset(cams, camera_poses, ids, poses_host)  # the timed calls left the reset envs as they were
        errors = {k: max(v, after[k]) for k, v in errors.items()}
    finally:
        cams.close()
    return {"device": device, "envs": envs, "reset_envs": reset, "xpbd_steps": steps, "mean_fall_m": fall,
            "setup_s": setup, "check_max_abs_error": errors, "other_cpus_busy": load.other_cpus,
            "median_us": {k: v["median_s"] * 1e6 for k, v in rows.items()},
            "min_us": {k: v["min_s"] * 1e6 for k, v in rows.items()},
            "reps": {k: v["reps"] for k, v in rows.items()}}  # fmt: skip


def _graph_replay(cams: Any, sim: dict, mask: wp.array, body_of_env: wp.array, poses: wp.array, timer: Timer) -> dict:
    """Capture the masked body reset and the masked camera read once, then time replays."""
    device = cams.device
    envs = cams.count

    def masked_reset() -> None:
        state = sim["state"]
        wp.launch(reset_bodies_masked, dim=envs, inputs=[mask, body_of_env, poses],
                  outputs=[state.body_q, state.body_qd], device=device)  # fmt: skip
        cams.get_world_poses(mask=mask)

    masked_reset()  # warm: compile, allocate the output buffers
    wp.synchronize_device(device)
    with wp.ScopedCapture(device=device, force_module_load=False) as capture:
        masked_reset()
    return timer(lambda: wp.capture_launch(capture.graph), warmup=3)


# ---------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--device", default="cpu")
    p.add_argument("--envs", type=int, nargs="+", default=[1024, 8192])
    p.add_argument("--reset", type=int, default=256, help="envs reset per call (default 256)")
    p.add_argument("--reps", type=int, default=200, help="timed calls per row (default 200)")
    p.add_argument("--budget-s", type=float, default=20.0, help="stop a row after this long, at least 3 reps")
    p.add_argument("--steps", type=int, default=4, help="XPBD steps before timing (default 4)")
    p.add_argument("--save-as", default=None, help="write perf/results/newton_NAME.json (committed results)")
    args = p.parse_args(argv)
    wp.init()
    machine = machine_info(args.device)
    started = time.perf_counter()
    cases = []
    for envs in args.envs:
        case = run_case(args.device, envs, min(args.reset, envs), args.reps, args.steps, args.budget_s)
        cases.append(case)
        err = case["check_max_abs_error"]
        cells = "  ".join(
            f"{k}={v:.1f}" + (f" (H200 target <= {TARGETS_US[k]:.0f})" if k in TARGETS_US else "")
            for k, v in case["median_us"].items()
        )
        print(f"newton {args.device} envs={envs} reset={case['reset_envs']} err pos={err['position']:.1e} "
              f"quat={err['orientation']:.1e}  us: {cells}", flush=True)  # fmt: skip
    out_dir = ROOT / "results" if args.save_as else ROOT / "out"
    out_dir.mkdir(parents=True, exist_ok=True)
    name = f"newton_{args.save_as}.json" if args.save_as else f"newton_{args.device.replace(':', '')}.json"
    result = {"command": " ".join(["python", "perf/bench_newton.py", *(sys.argv[1:] if argv is None else argv)]),
              "machine": machine, "wall_s": time.perf_counter() - started, "targets_us_h200_8192": TARGETS_US,
              "cases": cases}  # fmt: skip
    (out_dir / name).write_text(json.dumps(result, indent=1))
    print(f"wrote {out_dir / name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

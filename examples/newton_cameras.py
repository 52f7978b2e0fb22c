# SPDX-License-Identifier: Apache-2.0
"""Cameras on bodies simulated by Newton: N envs, a free rigid body with a camera on it each, falling under gravity.

Random envs are reset every step: their bodies get a new pose through Newton (``state.body_q``, ``state.body_qd``,
one Warp launch), and their cameras are read through frameview in the ROS convention (``fv.CameraPoses`` over a
``fv.NewtonFrameView``), which composes each body's pose with the camera's fixed offset on it, in one launch::

    python examples/newton_cameras.py                       # 16 envs, 100 steps, CPU
    python examples/newton_cameras.py --envs 4096 --device cuda:0
    python examples/newton_cameras.py --check               # also compare every camera read with NumPy

The stage (built here with UsdPhysics) is ``/World/envs/env_i/Body`` (``UsdPhysics.RigidBodyAPI``, 1 kg) with
``Body/Camera`` (a ``UsdGeom.Camera`` looking along the body's +X, pitched down); ``newton.ModelBuilder.add_usd``
turns each body into a free body labelled by its prim path, which is how the view finds the body under each camera.
The first run compiles Newton's kernels (about half a minute on a CPU); later runs reuse Warp's kernel cache.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Sequence
from typing import Any

try:
    import numpy as np
    import warp as wp
    from pxr import Gf, Usd, UsdGeom, UsdPhysics

    import frameview as fv
except ImportError as exc:  # run outside frameview's environment: say how to get into it
    raise SystemExit(
        f"newton_cameras: {exc}. Run it in frameview's environment: ./scripts/run examples/newton_cameras.py, or "
        "pip install 'frameview[newton,usd]'."
    ) from exc

GRAVITY = 9.81
POSITION_TOLERANCE_M = 1e-5
"""--check: the largest camera position difference allowed, metres (float32 positions of a few metres: ~1e-6)."""
ORIENTATION_TOLERANCE_RAD = 1e-5
"""--check: the largest camera orientation difference allowed, as the angle of the rotation between them, radians."""


@wp.kernel
def reset_bodies(
    # inputs
    env_ids: wp.array(dtype=wp.int32),
    body_of_env: wp.array(dtype=wp.int32),
    poses: wp.array(dtype=wp.transformf),
    # outputs
    body_q_out: wp.array(dtype=wp.transformf),
    body_qd_out: wp.array(dtype=wp.spatial_vectorf),
):
    """Put the body of env ``env_ids[k]`` at ``poses[k]``, at rest."""
    k = wp.tid()
    b = body_of_env[env_ids[k]]
    body_q_out[b] = poses[k]
    body_qd_out[b] = wp.spatial_vectorf()


def camera_orientation(pitch_deg: float) -> Gf.Quatf:
    """USD (opengl: -Z forward, +Y up) camera orientation on the body: looking along +X, pitched down."""
    t = np.radians(pitch_deg)
    forward = np.array([np.cos(t), 0.0, -np.sin(t)])
    up = np.array([np.sin(t), 0.0, np.cos(t)])
    rows = np.stack([np.cross(forward, up), up, -forward])  # the camera's +X, +Y, +Z in the body frame
    return Gf.Quatf(Gf.Matrix3d(*rows.ravel().tolist()).ExtractRotation().GetQuat())


def build_stage(num_envs: int, camera_offset: Sequence[float], pitch_deg: float, spacing: float = 2.0) -> Usd.Stage:
    """UsdPhysics stage in metres, z up: a free body per env, 5 m up, with a camera on it."""
    stage = Usd.Stage.CreateInMemory()
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.z)
    UsdGeom.SetStageMetersPerUnit(stage, 1.0)  # Newton works in metres: gravity would be cm/s^2 otherwise
    scene = UsdPhysics.Scene.Define(stage, "/physicsScene")
    scene.CreateGravityDirectionAttr(Gf.Vec3f(0.0, 0.0, -1.0))
    scene.CreateGravityMagnitudeAttr(GRAVITY)
    UsdGeom.Xform.Define(stage, "/World")
    side = int(np.ceil(np.sqrt(num_envs)))
    cam_q = camera_orientation(pitch_deg)
    for i in range(num_envs):
        env = UsdGeom.Xform.Define(stage, f"/World/envs/env_{i}")
        env.AddTranslateOp().Set(Gf.Vec3d(spacing * (i % side), spacing * (i // side), 0.0))
        body = UsdGeom.Xform.Define(stage, f"/World/envs/env_{i}/Body")
        body.AddTranslateOp().Set(Gf.Vec3d(0.0, 0.0, 5.0))
        UsdPhysics.RigidBodyAPI.Apply(body.GetPrim())
        mass = UsdPhysics.MassAPI.Apply(body.GetPrim())
        mass.CreateMassAttr(1.0)
        mass.CreateDiagonalInertiaAttr(Gf.Vec3f(0.01, 0.01, 0.01))
        camera = UsdGeom.Camera.Define(stage, f"/World/envs/env_{i}/Body/Camera")
        camera.AddTranslateOp().Set(Gf.Vec3d(*(float(v) for v in camera_offset)))
        camera.AddOrientOp().Set(cam_q)
    return stage


def random_poses(rng: np.random.Generator, origins: np.ndarray) -> np.ndarray:
    """(M, 7) float32 body poses ``[p, q xyzw]``: 3-6 m above each env origin, random yaw."""
    yaw = rng.uniform(-np.pi, np.pi, size=len(origins))
    pos = origins + np.stack([np.zeros_like(yaw), np.zeros_like(yaw), rng.uniform(3.0, 6.0, len(yaw))], axis=1)
    quat = np.stack([np.zeros_like(yaw), np.zeros_like(yaw), np.sin(yaw / 2), np.cos(yaw / 2)], axis=1)
    return np.concatenate([pos, quat], axis=1).astype(np.float32)


def expected_ros_cameras(body_q: np.ndarray, offset_pos: np.ndarray, offset_rows: np.ndarray) -> tuple:
    """NumPy truth: camera world poses in ROS axes from body poses (M, 7) and the camera's offset on its body."""
    pos, quat = [], []
    for x in body_q.astype(np.float64):
        q = Gf.Quatd(float(x[6]), Gf.Vec3d(*(float(v) for v in x[3:6])))
        body_rows = np.array(Gf.Matrix3d(q), dtype=np.float64)  # row-vector: rows are the body's axes in the world
        rows = offset_rows @ body_rows  # the camera's USD axes in the world
        pos.append(x[:3] + offset_pos @ body_rows)
        ros = np.stack([rows[0], -rows[1], -rows[2]])  # ROS: x right, y down, z forward
        gq = Gf.Matrix3d(*ros.ravel().tolist()).ExtractRotation().GetQuat()
        quat.append([*gq.GetImaginary(), gq.GetReal()])
    return np.array(pos), np.array(quat)


def rotation_angles(got_xyzw: np.ndarray, want_xyzw: np.ndarray) -> np.ndarray:
    """Angle (radians, float64) of the rotation between each pair of xyzw quaternions (q and -q are one rotation)."""
    a = got_xyzw / np.linalg.norm(got_xyzw, axis=1, keepdims=True)
    b = want_xyzw / np.linalg.norm(want_xyzw, axis=1, keepdims=True)
    return 2.0 * np.arccos(np.clip(np.abs((a * b).sum(axis=1)), 0.0, 1.0))


def verdict(what: str, largest: float, tolerance: float, unit: str, quiet: bool) -> bool:
    """Print one check's result (its tolerance and unit, then passed or FAILED; FAILED even when ``quiet``)."""
    passed = bool(largest <= tolerance)
    line = f"check: {what}: largest difference {largest:.3g} {unit} (tolerance {tolerance:g} {unit}): "
    line += "passed" if passed else "FAILED"
    if not quiet or not passed:
        print(line, file=sys.stdout if passed else sys.stderr)
    return passed


def run(
    num_envs: int = 16,
    steps: int = 100,
    device: str = "cpu",
    seed: int = 0,
    reset_probability: float = 0.05,
    dt: float = 1.0 / 60.0,
    check: bool = False,
) -> dict[str, Any]:
    """Build, simulate, reset and read; returns the camera reads on reset and timings."""
    import newton  # frameview[newton]

    rng = np.random.default_rng(seed)
    camera_offset, pitch = (0.2, 0.0, 0.3), 20.0
    stage = build_stage(num_envs, camera_offset, pitch)
    builder = newton.ModelBuilder()
    builder.add_usd(stage)
    model = builder.finalize(device=device)
    solver = newton.solvers.SolverXPBD(model)
    control = model.control()
    sim = {"state": model.state(), "next": model.state()}

    cameras = fv.NewtonFrameView("/World/envs/env_.*/Body/Camera", stage=stage, model=model, state=lambda: sim["state"])
    cams = fv.CameraPoses(cameras)  # row i = env i
    body_of_env = wp.array(cameras.body_indices, dtype=wp.int32, device=device)
    origins = model.body_q.numpy()[cameras.body_indices, :3] - [0.0, 0.0, 5.0]
    offset_rows = np.array(Gf.Matrix3d(Gf.Quatd(camera_orientation(pitch))), dtype=np.float64)

    reads, pos_errors, angle_errors, step_s, reset_s, read_s = 0, [], [], [], [], []
    for _ in range(steps):
        start = time.perf_counter()
        solver.step(sim["state"], sim["next"], control, None, dt)
        sim["state"], sim["next"] = sim["next"], sim["state"]  # the view's callable sees the new state
        wp.synchronize_device(device)
        step_s.append(time.perf_counter() - start)

        env_ids = np.flatnonzero(rng.random(num_envs) < reset_probability).astype(np.int32)
        if env_ids.size == 0:
            continue
        poses = random_poses(rng, origins[env_ids])
        start = time.perf_counter()
        state = sim["state"]
        wp.launch(
            reset_bodies,
            dim=env_ids.size,
            inputs=[wp.array(env_ids, device=device), body_of_env, wp.array(poses, dtype=wp.transformf, device=device)],
            outputs=[state.body_q, state.body_qd],
            device=device,
        )
        mid = time.perf_counter()
        pos, quat = cams.read(env_ids, convention="ros")  # (M,) vec3f, (M,) quatf xyzw, world frame
        wp.synchronize_device(device)
        end = time.perf_counter()
        reset_s.append(mid - start)
        read_s.append(end - mid)
        reads += int(env_ids.size)
        if check:
            want_pos, want_quat = expected_ros_cameras(poses, np.array(camera_offset), offset_rows)
            pos_errors.append(float(np.linalg.norm(pos.numpy() - want_pos, axis=1).max()))
            angle_errors.append(float(rotation_angles(quat.numpy().astype(np.float64), want_quat).max()))

    final_pos, _final_quat = cams.read(convention="ros")
    cameras.close()
    return {
        "num_envs": num_envs,
        "steps": steps,
        "device": device,
        "camera_reads_on_reset": reads,
        "position_error_m": max(pos_errors) if pos_errors else None,
        "orientation_error_rad": max(angle_errors) if angle_errors else None,
        "final_heights": final_pos.numpy()[:, 2].copy(),
        "timings_ms": {
            name: float(np.median(s) * 1e3) if s else float("nan")
            for name, s in (("step", step_s), ("reset_write", reset_s), ("camera_read", read_s))
        },
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", type=int, default=16, help="number of envs (default: %(default)s)")
    parser.add_argument("--steps", type=int, default=100, help="simulation steps (default: %(default)s)")
    parser.add_argument("--device", default="cpu", help="Warp device: cpu or cuda:N (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the resets (default: %(default)s)")
    parser.add_argument("--reset-probability", type=float, default=0.05,
                        help="chance per env and step that the env resets (default: %(default)s)")  # fmt: skip
    parser.add_argument("--check", action="store_true",
                        help=f"compare each camera read on reset with NumPy; exit 1 beyond {POSITION_TOLERANCE_M:g} m "
                        f"or {ORIENTATION_TOLERANCE_RAD:g} rad")  # fmt: skip
    parser.add_argument("--quiet", action="store_true", help="print nothing but a failed check")
    parser.add_argument("--verbose", action="store_true", help="leave Warp's start-up and kernel-load messages on")
    args = parser.parse_args(argv)
    fv.FrameViewCfg(prim_path="/World", backend="newton", device=args.device).validate()  # a bad device fails here
    result = run(args.envs, args.steps, args.device, args.seed, args.reset_probability, check=args.check)
    if not args.quiet:
        t = result["timings_ms"]
        print(
            f"newton on {result['device']}: {result['num_envs']} envs, {result['steps']} XPBD steps, "
            f"{result['camera_reads_on_reset']} camera poses read on reset (ROS convention)\n"
            f"  median per step {t['step']:.3f} ms, body reset write {t['reset_write']:.3f} ms, "
            f"camera read {t['camera_read']:.3f} ms\n"
            f"  camera heights now: {result['final_heights'].min():.2f} to {result['final_heights'].max():.2f} m"
        )
    result["check_passed"] = None
    if args.check:
        if result["position_error_m"] is None:  # no env reset: nothing was read to compare
            print("check: no env was reset, so no camera was read on reset: raise --steps or --reset-probability",
                  file=sys.stderr)  # fmt: skip
            result["check_passed"] = False
            return result
        reads = f"{result['camera_reads_on_reset']} camera poses read on reset vs NumPy"
        result["check_passed"] = all([  # both verdicts printed
            verdict(f"{reads}, positions", result["position_error_m"], POSITION_TOLERANCE_M, "m", args.quiet),
            verdict(f"{reads}, orientations (rotation angle)", result["orientation_error_rad"],
                    ORIENTATION_TOLERANCE_RAD, "rad", args.quiet),
        ])  # fmt: skip
    return result


def exit_status(argv: Sequence[str]) -> int | str:
    """The command line's exit status: 0, 1 when a ``--check`` failed, or the error message of a bad argument."""
    try:
        outcome = main(argv)
    except (ValueError, ImportError) as exc:
        return f"newton_cameras: error: {exc}"
    return 1 if outcome["check_passed"] is False else 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    from _warp_quiet import quiet_warp  # beside this file

    quiet_warp(verbose="--verbose" in sys.argv[1:], announce="--quiet" not in sys.argv[1:])
    sys.exit(exit_status(sys.argv[1:]))

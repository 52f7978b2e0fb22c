# SPDX-License-Identifier: Apache-2.0
"""Joint state and root velocities of N robots simulated by Newton: the observations of a locomotion task.

Each env holds a 12-DOF quadruped-like robot (a floating base and four legs of three revolute joints, PD-driven to
straight legs), built once and replicated, labelled ``/World/envs/env_i/Robot/...`` as a model built from an Isaac
Lab stage is. Every step reads, through frameview's typed physics views, what a policy observes: the joint state of
every env (``fv.JointStateReader``: names, positions, velocities, efforts) and every base's velocities
(``fv.RigidBodyView``); random envs are reset through the articulation view's writes (root poses and velocities,
joint state, for the reset envs at once, on the device)::

    python examples/newton_robots.py                       # 16 envs, 50 steps, CPU
    python examples/newton_robots.py --envs 4096 --device cuda:0
    python examples/newton_robots.py --check               # also compare every reading with Newton's arrays
    python examples/newton_robots.py --verbose             # Warp's own start-up and kernel-load messages too

The views find the robots by their labels (``model.articulation_label``, ``model.body_label``): no stage is needed.
The first run compiles Newton's kernels (about half a minute on a CPU); later runs reuse Warp's kernel cache.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

try:
    import numpy as np
    import warp as wp

    import frameview as fv
except ImportError as exc:  # run outside frameview's environment: say how to get into it
    raise SystemExit(
        f"newton_robots: {exc}. Run it in frameview's environment: ./scripts/run examples/newton_robots.py, or "
        "pip install 'frameview[newton]'."
    ) from exc

LEGS, LEG_DOFS = 4, 3
ROBOTS = "/World/envs/env_.*/Robot"
STANDING = np.zeros(LEGS * LEG_DOFS, dtype=np.float32)  # the drives' target: straight legs (radians)
TOLERANCE = 1e-6
"""--check: the largest difference allowed between a reading and Newton's arrays, in rad (positions) and rad/s
(velocities); every DOF here is revolute. The views copy float32 values, so the difference is 0 when all is well."""


def robot_template(newton: Any) -> Any:
    """One robot labelled for env 0: a floating base and four three-joint legs (12 revolute DOFs)."""
    b = newton.ModelBuilder()
    root = "/World/envs/env_0/Robot"
    base = b.add_link(mass=5.0, inertia=wp.mat33(np.eye(3) * 0.1), label=f"{root}/base")
    b.add_shape_box(base, hx=0.3, hy=0.15, hz=0.05)
    joints = [b.add_joint_free(base, label=f"{root}/root_joint")]
    for leg in range(LEGS):
        parent = base
        corner = ((-1) ** leg * 0.3, (-1) ** (leg // 2) * 0.2, 0.0)
        for k in range(LEG_DOFS):
            link = b.add_link(mass=0.5, inertia=wp.mat33(np.eye(3) * 0.01), label=f"{root}/leg{leg}_link{k}")
            b.add_shape_capsule(link, radius=0.03, half_height=0.08)
            offset = corner if k == 0 else (0.0, 0.0, -0.2)
            joints.append(
                b.add_joint_revolute(
                    parent,
                    link,
                    parent_xform=wp.transform(offset, wp.quat_identity()),
                    axis=(1.0, 0.0, 0.0) if k == 0 else (0.0, 1.0, 0.0),
                    target_ke=50.0,
                    target_kd=2.0,
                    label=f"{root}/leg{leg}_joint{k}",
                )
            )
            parent = link
    b.add_articulation(joints, label=root)
    return b


def build_model(newton: Any, envs: int, device: str) -> Any:
    """``envs`` copies of the robot, each labelled with its env (``/World/envs/env_i/Robot/...``), 1 m up."""
    b = newton.ModelBuilder()
    b.replicate(robot_template(newton), envs)
    for kind, per_env in (("body", 1 + LEGS * LEG_DOFS), ("joint", 1 + LEGS * LEG_DOFS), ("articulation", 1)):
        labels = getattr(b, f"{kind}_label")
        for i, label in enumerate(labels):
            labels[i] = label.replace("/env_0/", f"/env_{i // per_env}/", 1)
    return b.finalize(device=device)


def dof_tables(model: Any) -> tuple[np.ndarray, np.ndarray]:
    """(envs, 12) coordinate and DOF indices of each env's leg joints, from the joint labels (the check's truth)."""
    joint = {str(label): j for j, label in enumerate(model.joint_label)}
    q_start, qd_start = model.joint_q_start.numpy(), model.joint_qd_start.numpy()
    envs = model.articulation_count
    names = [f"leg{g}_joint{k}" for g in range(LEGS) for k in range(LEG_DOFS)]
    js = np.array([[joint[f"/World/envs/env_{e}/Robot/{n}"] for n in names] for e in range(envs)])
    return q_start[js], qd_start[js]


def reset_envs(robots: fv.ArticulationView, envs: np.ndarray, rng: np.random.Generator) -> None:
    """Put the robots of ``envs`` back 1 m up at rest, their legs near the standing pose: the articulation view's
    reset writes, for all those envs at once (on the device, then forward kinematics of exactly those robots)."""
    n = envs.size
    ids = wp.array(envs.astype(np.int32), dtype=wp.int32, device=robots.device)
    origin = np.stack([2.0 * (envs % 32), 2.0 * (envs // 32), np.ones(n)], axis=1).astype(np.float32)
    upright = np.tile(np.array([0.0, 0.0, 0.0, 1.0], dtype=np.float32), (n, 1))  # xyzw identity
    still = np.zeros((n, 3), dtype=np.float32)
    robots.set_root_poses(origin, upright, indices=ids)
    robots.set_root_velocities(still, still, indices=ids)
    legs = STANDING + rng.normal(0.0, 0.1, (n, robots.dof_count)).astype(np.float32)
    robots.set_dof_state(legs, np.zeros_like(legs), indices=ids)


def model_origin(env: int) -> tuple[float, float]:
    return (2.0 * (env % 32), 2.0 * (env // 32))


def verdict(what: str, largest: float, tolerance: float, unit: str, quiet: bool) -> bool:
    """Print one check's result (its tolerance and unit, then passed or FAILED; FAILED even when ``quiet``)."""
    passed = bool(largest <= tolerance)
    line = f"check: {what}: largest difference {largest:.3g} {unit} (tolerance {tolerance:g} {unit}): "
    line += "passed" if passed else "FAILED"
    if not quiet or not passed:
        print(line, file=sys.stdout if passed else sys.stderr)
    return passed


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", type=int, default=16, help="number of envs, one robot each (default: %(default)s)")
    parser.add_argument("--steps", type=int, default=50, help="simulation steps (default: %(default)s)")
    parser.add_argument("--device", default="cpu", help="Warp device: cpu or cuda:N (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the resets and leg poses (default: %(default)s)")
    parser.add_argument("--reset-probability", type=float, default=0.05,
                        help="chance per env and step that the env resets (default: %(default)s)")  # fmt: skip
    parser.add_argument(
        "--check",
        action="store_true",
        help=f"compare every reading with Newton's arrays; exit 1 beyond {TOLERANCE:g} rad or rad/s",
    )
    parser.add_argument("--quiet", action="store_true", help="print nothing but a failed check")
    parser.add_argument("--verbose", action="store_true", help="leave Warp's start-up and kernel-load messages on")
    return parser


def main(argv: Sequence[str] | None = None) -> dict:
    """Run the example with command-line arguments ``argv``; return the last reading, the resets and the check's
    largest differences (``check_passed``: None without ``--check``)."""
    args = build_parser().parse_args(argv)
    try:
        import newton
    except ImportError as exc:
        raise SystemExit(f"newton_robots: {exc}; pip install 'frameview[newton]'") from exc

    model = build_model(newton, args.envs, args.device)
    sim = {"state": model.state(), "next": model.state()}
    control = model.control()
    solver = newton.solvers.SolverFeatherstone(model)
    rng = np.random.default_rng(args.seed)

    # the observations: one config field picks the engine
    cfg = fv.PhysicsViewCfg(prim_path=ROBOTS, backend="newton")
    engine = {"model": model, "state": lambda: sim["state"], "control": control}
    joints = fv.make_joint_state_reader(cfg, **engine)
    bases = fv.make_rigid_body_view({"prim_path": f"{ROBOTS}/base", "backend": "newton"}, **engine)
    robots = joints.view  # the reader's articulation view also writes the resets
    reset_envs(robots, np.arange(args.envs), rng)
    q_idx, qd_idx = dof_tables(model)
    pos_error, vel_error, resets = 0.0, 0.0, 0
    for step in range(args.steps):
        sim["state"].clear_forces()
        solver.step(sim["state"], sim["next"], control, None, 1.0 / 120.0)
        sim["state"], sim["next"] = sim["next"], sim["state"]
        reset = np.flatnonzero(rng.random(args.envs) < args.reset_probability)
        if reset.size:
            reset_envs(robots, reset, rng)
            resets += int(reset.size)
        reading = joints.read()  # (envs, 12) positions, velocities, efforts, in articulation order
        lin, ang = bases.get_velocities()  # (envs,) world-frame COM linear and angular velocities
        if args.check:
            q, qd = sim["state"].joint_q.numpy(), sim["state"].joint_qd.numpy()
            pos_error = max(pos_error, float(np.abs(reading.positions.numpy() - q[q_idx]).max()))
            vel_error = max(vel_error, float(np.abs(reading.velocities.numpy() - qd[qd_idx]).max()))
        if not args.quiet and step % 10 == 0:
            speed = np.linalg.norm(lin.numpy(), axis=1)
            print(f"step {step:4d}  mean |q - standing| {np.abs(reading.positions.numpy() - STANDING).mean():.3f} rad"
                  f"  mean base speed {speed.mean():.3f} m/s  resets so far {resets}")  # fmt: skip
    result = {"names": reading.names, "positions": reading.positions.numpy(), "base_angular": ang.numpy(),
              "resets": resets, "position_error_rad": pos_error, "velocity_error_rad_s": vel_error,
              "max_error": max(pos_error, vel_error), "check_passed": None}  # fmt: skip
    joints.close()
    bases.close()
    if not args.quiet:
        print(f"DOFs: {', '.join(result['names'])}")
    if args.check:
        steps = f"over {args.steps} steps, {args.envs} envs"
        result["check_passed"] = all(
            [  # both verdicts printed
                verdict(f"joint positions vs Newton's joint_q {steps}", pos_error, TOLERANCE, "rad", args.quiet),
                verdict(f"joint velocities vs Newton's joint_qd {steps}", vel_error, TOLERANCE, "rad/s", args.quiet),
            ]
        )
    return result


def exit_status(argv: Sequence[str]) -> int | str:
    """The command line's exit status: 0, 1 when a ``--check`` failed, or the error message of a bad argument."""
    try:
        outcome = main(argv)
    except (ValueError, ImportError) as exc:
        return f"newton_robots: error: {exc}"
    return 1 if outcome["check_passed"] is False else 0


if __name__ == "__main__":
    from _warp_quiet import quiet_warp  # beside this file

    quiet_warp(verbose="--verbose" in sys.argv[1:], announce="--quiet" not in sys.argv[1:])
    sys.exit(exit_status(sys.argv[1:]))

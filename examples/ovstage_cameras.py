# SPDX-License-Identifier: Apache-2.0
"""Camera poses from real Fabric without Kit: a USD file opened in an ``ovstage.Stage``, read and written through a
``fabric:ovstage`` view (the recipe of docs/ovstage.md).

Run it as::

    python examples/ovstage_cameras.py                 # 64 envs, CPU
    python examples/ovstage_cameras.py --envs 8192 --usd out/scene.usda
    python examples/ovstage_cameras.py --envs 8192 --device cuda:0 --hierarchy gpu-incremental --steps 100

It writes a small scene with pxr (``/World/envs/env_i/Robot/Camera``, the camera 1.5 m above its robot) to a
``.usda`` file, opens that file in ovstage, builds one view of the robots and one of the cameras with
``fabric_provider="ovstage"``, moves some robots and reads their cameras back, and checks every pose against the
positions and orientations it wrote (the cameras follow their robots: Fabric updates the children of a written prim),
printing each check's tolerance and verdict; a failed check exits with status 1. With ``--steps N`` it does that N
times, as a kit-less GPU pipeline would on every reset: half the envs picked at random each step, their robots'
new poses and the env ids handed over as Warp arrays on the view's device, the cameras read there, every step
checked against float64 NumPy truth. ``--hierarchy`` creates the stage with that hierarchy computation model
(``gpu-incremental``: Fabric re-derives the cameras' world matrices on the GPU, as Isaac Lab asks for).
Needs ``frameview[ovstage]`` (ovstage's native runtime needs ``libGL.so.1``: Debian/Ubuntu package ``libgl1``).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

try:
    import numpy as np
    from pxr import Usd, UsdGeom

    import frameview as fv
except ImportError as exc:  # run outside frameview's environment: say how to get into it
    raise SystemExit(
        f"ovstage_cameras: {exc}. Run it in frameview's environment: ./scripts/run examples/ovstage_cameras.py, or "
        "pip install -e '.[ovstage,usd]' from a clone."
    ) from exc

CAMERA_HEIGHT = 1.5
POSITION_TOLERANCE_M = 1e-4
"""The largest camera position difference allowed, metres (float32 positions up to ~100 m from the origin)."""
ORIENTATION_TOLERANCE_RAD = 1e-5
"""The largest camera orientation difference allowed, as the angle of the rotation between them, radians."""


def write_scene(path: Path, num_envs: int, spacing: float = 2.0) -> None:
    """A USD file with ``/World/envs/env_i/Robot`` (on a grid) and ``Robot/Camera`` 1.5 m above it, for each env."""
    stage = Usd.Stage.CreateInMemory()
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.z)
    side = int(np.ceil(np.sqrt(num_envs)))
    for i in range(num_envs):
        robot = UsdGeom.Xform.Define(stage, f"/World/envs/env_{i}/Robot")
        robot.AddTranslateOp().Set((spacing * (i % side), spacing * (i // side), 0.0))
        camera = UsdGeom.Camera.Define(stage, f"/World/envs/env_{i}/Robot/Camera")
        camera.AddTranslateOp().Set((0.0, 0.0, CAMERA_HEIGHT))
    path.parent.mkdir(parents=True, exist_ok=True)
    stage.GetRootLayer().Export(str(path))


HIERARCHY_MODELS = {
    "cpu-incremental": "CPU_INCREMENTAL",
    "gpu-incremental": "GPU_INCREMENTAL",
    "gpu-global": "GPU_GLOBAL",
}


def open_in_ovstage(path: Path, hierarchy: str | None = None) -> Any:
    """An ``ovstage.Stage`` populated from the USD file (ovstage takes files or USDA text, never a pxr stage), made with
    the ``hierarchy`` computation model (process-wide in ovstage; ``None``: ovstage's default, the CPU model)."""
    import ovstage  # frameview[ovstage]
    from ovstage import population

    config = None
    if hierarchy is not None:
        model = getattr(ovstage.HierarchyComputationModel, HIERARCHY_MODELS[hierarchy])
        config = ovstage.StageConfig(runtime_default_hierarchy_computation_model=model)
    stage = ovstage.Stage(path.stem, config)
    population.open_usd(stage, str(path), ordinal=1)
    return stage


def run(
    num_envs: int, usd_path: Path, device: str = "cpu", seed: int = 0, steps: int = 1, hierarchy: str | None = None
) -> dict[str, Any]:
    """Write the scene, open it in ovstage, then ``steps`` times move half the robots (picked at random) and read their
    cameras; return the largest errors against float64 truth, and timings."""
    import warp as wp

    write_scene(usd_path, num_envs)
    stage = open_in_ovstage(usd_path, hierarchy)
    cfg = fv.FrameViewCfg(
        prim_path="/World/envs/env_.*/Robot/Camera", backend="fabric", fabric_provider="ovstage", device=device
    )
    rng = np.random.default_rng(seed)
    pos_err, rot_err, write_ms, read_ms = 0.0, 0.0, [], []
    with (
        fv.make_frame_view(cfg, stage) as cameras,
        fv.make_frame_view({**cfg.to_dict(), "prim_path": "/World/envs/env_.*/Robot"}, stage) as robots,
    ):
        for _ in range(steps):
            env_ids = np.sort(rng.choice(num_envs, size=max(1, num_envs // 2), replace=False)).astype(np.int32)
            positions = rng.uniform(-50.0, 50.0, size=(env_ids.size, 3))
            orientations = rng.normal(size=(env_ids.size, 4))  # xyzw, any rotation
            orientations /= np.linalg.norm(orientations, axis=1, keepdims=True)
            ids = wp.array(env_ids, dtype=wp.int32, device=device)  # what a GPU pipeline hands over
            p = wp.array(positions, dtype=wp.vec3f, device=device)
            q = wp.array(orientations, dtype=wp.quatf, device=device)
            wp.synchronize_device(device)
            start = time.perf_counter()
            robots.set_world_poses(p, q, indices=ids)
            wp.synchronize_device(device)
            mid = time.perf_counter()
            pos, quat = cameras.get_world_poses(indices=ids)
            wp.synchronize_device(device)
            end = time.perf_counter()
            write_ms.append((mid - start) * 1e3)
            read_ms.append((end - mid) * 1e3)
            # the truth, float64: the camera sits 1.5 m along its robot's +Z axis and shares its orientation
            written_q = q.numpy().astype(np.float64)
            expected = p.numpy().astype(np.float64) + CAMERA_HEIGHT * z_axes(written_q)
            pos_err = max(pos_err, float(np.linalg.norm(pos.numpy() - expected, axis=1).max()))
            rot_err = max(rot_err, float(rotation_angles(quat.numpy(), written_q).max()))
        backend = cameras.backend
        model = getattr(cameras.fabric_stage, "hierarchy_model", "unknown")
    return {
        "backend": backend,
        "hierarchy_model": model,
        "num_envs": num_envs,
        "written": max(1, num_envs // 2),
        "steps": steps,
        "max_position_error": pos_err,
        "max_orientation_error": rot_err,
        "timings_ms": {"robot_write": float(np.median(write_ms)), "camera_read": float(np.median(read_ms))},
    }


def z_axes(xyzw: np.ndarray) -> np.ndarray:
    """The +Z axis of each rotation, in world coordinates (float64)."""
    x, y, z, w = xyzw.T
    return np.stack([2.0 * (x * z + w * y), 2.0 * (y * z - w * x), 1.0 - 2.0 * (x * x + y * y)], axis=1)


def rotation_angles(got_xyzw: np.ndarray, want_xyzw: np.ndarray) -> np.ndarray:
    """Angle (radians, float64) of the rotation between each pair of xyzw quaternions (q and -q are one rotation)."""
    a = got_xyzw.astype(np.float64)
    b = want_xyzw.astype(np.float64)
    a, b = a / np.linalg.norm(a, axis=1, keepdims=True), b / np.linalg.norm(b, axis=1, keepdims=True)
    return 2.0 * np.arccos(np.clip(np.abs((a * b).sum(axis=1)), 0.0, 1.0))


def verdict(what: str, largest: float, tolerance: float, unit: str, quiet: bool) -> bool:
    """Print one check's result (its tolerance and unit, then passed or FAILED; FAILED even when ``quiet``)."""
    passed = bool(largest <= tolerance)
    line = f"check: {what}: largest difference {largest:.3g} {unit} (tolerance {tolerance:g} {unit}): "
    line += "passed" if passed else "FAILED"
    if not quiet or not passed:
        print(line, file=sys.stdout if passed else sys.stderr)
    return passed


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", type=int, default=64, help="number of envs (default: %(default)s)")
    parser.add_argument("--device", default="cpu", help="Warp device: cpu or cuda:N (default: %(default)s)")
    parser.add_argument(
        "--usd", default="out/ovstage_scene.usda", help="where the scene is written (default: %(default)s, git-ignored)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the robots' new poses (default: %(default)s)")
    parser.add_argument("--steps", type=int, default=1, help="resets, each checked (default: %(default)s)")
    parser.add_argument(
        "--hierarchy", choices=sorted(HIERARCHY_MODELS), default=None, help="the stage's hierarchy computation model"
    )
    parser.add_argument("--quiet", action="store_true", help="print nothing but a failed check")
    parser.add_argument("--verbose", action="store_true", help="leave Warp's start-up and kernel-load messages on")
    args = parser.parse_args(argv)
    fv.FrameViewCfg(prim_path="/World", device=args.device).validate()  # a bad device fails before any work
    if args.steps < 1:
        raise ValueError(f"--steps: expected >= 1, got {args.steps}")
    result = run(args.envs, Path(args.usd), args.device, args.seed, args.steps, args.hierarchy)
    if not args.quiet:
        t = result["timings_ms"]
        calls = "one call each, first calls included" if args.steps == 1 else f"medians of {args.steps} steps"
        print(
            f"{result['backend']} on {args.device} ({result['hierarchy_model']} hierarchy): {result['num_envs']} envs "
            f"from {args.usd}; {result['written']} robots written per step, their cameras read back\n"
            f"  robot write {t['robot_write']:.3f} ms, camera read {t['camera_read']:.3f} ms ({calls})"
        )
    what = f"{result['written']} cameras vs their robots' written poses"
    result["check_passed"] = all(  # both verdicts printed
        [
            verdict(f"{what}, positions", result["max_position_error"], POSITION_TOLERANCE_M, "m", args.quiet),
            verdict(
                f"{what}, orientations (rotation angle)",
                result["max_orientation_error"],
                ORIENTATION_TOLERANCE_RAD,
                "rad",
                args.quiet,
            ),
        ]
    )
    return result


def exit_status(argv: Sequence[str]) -> int | str:
    """The command line's exit status: 0, 1 when a check failed, or the error message of a bad argument."""
    try:
        outcome = main(argv)
    except (ValueError, ImportError) as exc:
        return f"ovstage_cameras: error: {exc}"
    return 1 if outcome["check_passed"] is False else 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    from _warp_quiet import quiet_warp  # beside this file

    quiet_warp(verbose="--verbose" in sys.argv[1:], announce="--quiet" not in sys.argv[1:])
    sys.exit(exit_status(sys.argv[1:]))

# SPDX-License-Identifier: Apache-2.0
"""Camera poses from real Fabric without Kit: a USD file opened in an ``ovstage.Stage``, read and written through a
``fabric:ovstage`` view (the recipe of docs/ovstage.md).

Run it as::

    python examples/ovstage_cameras.py                 # 64 envs, CPU
    python examples/ovstage_cameras.py --envs 8192 --usd out/scene.usda

It writes a small scene with pxr (``/World/envs/env_i/Robot/Camera``, the camera 1.5 m above its robot) to a
``.usda`` file, opens that file in ovstage, builds one view of the robots and one of the cameras with
``fabric_provider="ovstage"``, moves some robots and reads their cameras back, and checks every pose against the
positions and orientations it wrote (the cameras follow their robots: Fabric updates the children of a written prim),
printing each check's tolerance and verdict; a failed check exits with status 1.
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


def open_in_ovstage(path: Path) -> Any:
    """An ``ovstage.Stage`` populated from the USD file (ovstage takes files or USDA text, never a pxr stage)."""
    import ovstage  # frameview[ovstage]
    from ovstage import population

    stage = ovstage.Stage(path.stem)
    population.open_usd(stage, str(path), ordinal=1)
    return stage


def run(num_envs: int, usd_path: Path, device: str = "cpu", seed: int = 0) -> dict[str, Any]:
    """Write the scene, open it in ovstage, move half the robots, read their cameras; return poses and timings."""
    write_scene(usd_path, num_envs)
    stage = open_in_ovstage(usd_path)
    cfg = fv.FrameViewCfg(
        prim_path="/World/envs/env_.*/Robot/Camera", backend="fabric", fabric_provider="ovstage", device=device
    )
    rng = np.random.default_rng(seed)
    with (
        fv.make_frame_view(cfg, stage) as cameras,
        fv.make_frame_view({**cfg.to_dict(), "prim_path": "/World/envs/env_.*/Robot"}, stage) as robots,
    ):
        env_ids = np.sort(rng.choice(num_envs, size=max(1, num_envs // 2), replace=False)).astype(np.int32)
        positions = rng.uniform(-50.0, 50.0, size=(env_ids.size, 3)).astype(np.float32)
        yaw = rng.uniform(0.0, 2.0 * np.pi, size=env_ids.size)
        zero = np.zeros_like(yaw)
        orientations = np.stack([zero, zero, np.sin(0.5 * yaw), np.cos(0.5 * yaw)], axis=1).astype(np.float32)  # xyzw
        start = time.perf_counter()
        robots.set_world_poses(positions, orientations, indices=env_ids)
        mid = time.perf_counter()
        pos, quat = cameras.get_world_poses(indices=env_ids)  # the view's buffers: copied below
        end = time.perf_counter()
        cam_pos, cam_quat = pos.numpy().copy(), quat.numpy().copy()
        backend = cameras.backend
    # the camera sits 1.5 m above its robot along the robot's +Z, which a yaw leaves vertical
    expected = positions + np.array([0.0, 0.0, CAMERA_HEIGHT], np.float32)
    return {
        "backend": backend,
        "num_envs": num_envs,
        "written": int(env_ids.size),
        "max_position_error": float(np.linalg.norm(cam_pos - expected, axis=1).max()),
        "max_orientation_error": float(rotation_angles(cam_quat, orientations).max()),
        "timings_ms": {"robot_write": (mid - start) * 1e3, "camera_read": (end - mid) * 1e3},
    }


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
    parser.add_argument("--quiet", action="store_true", help="print nothing but a failed check")
    parser.add_argument("--verbose", action="store_true", help="leave Warp's start-up and kernel-load messages on")
    args = parser.parse_args(argv)
    fv.FrameViewCfg(prim_path="/World", device=args.device).validate()  # a bad device fails before any work
    result = run(args.envs, Path(args.usd), args.device, args.seed)
    if not args.quiet:
        t = result["timings_ms"]
        print(
            f"{result['backend']}: {result['num_envs']} envs from {args.usd}; {result['written']} robots written, "
            f"their cameras read back\n"
            f"  robot write {t['robot_write']:.3f} ms, camera read {t['camera_read']:.3f} ms (one call each, "
            "first calls included)"
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

# SPDX-License-Identifier: Apache-2.0
"""A minimal multi-env loop driven by an env config: move robots every step, reset random envs, read their cameras.

The FrameView backend comes from the config's ``frame_view:`` section, so the same env runs on ``usd``, ``fabric``
or ``newton`` by changing one field::

    python examples/reset_env.py                                   # examples/env_config.yaml as is (fabric)
    python examples/reset_env.py --set frame_view.backend=usd      # the pxr reference backend
    python examples/reset_env.py --set frame_view.backend=newton   # Newton's frames (frameview[newton])
    python examples/reset_env.py --envs 8192 --steps 20 --dump out/poses.npy   # out/ is git-ignored
    python examples/reset_env.py --check                           # compare every camera read with NumPy (float64)
    python examples/reset_env.py --set frame_view.device=cuda:0 --set env.reset_probability=0.5

The stage is ``/World/envs/env_i/Robot/Camera`` (a ``UsdGeom.Camera`` under each robot). Every step moves all robots
along circles through a FrameView of the robots (built from the same ``frame_view`` section with the robots'
``prim_path``); the cameras follow as children. Envs that reset get a new robot pose and their camera poses are read
through :class:`frameview.CameraPoses` in the configured convention. A Fabric view writes Fabric only and the USD view
writes USD: both give the same camera poses, which ``tests/test_example_env.py`` checks.

Config errors (unknown backend, key or convention) are reported before any stage is built. The timings exclude
the first call of each kind, made once before the loop: that is when Warp compiles (or loads) its kernels.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import json
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

try:
    import numpy as np
    import warp as wp
    from pxr import Gf, Sdf, Usd, UsdGeom

    import frameview as fv
except ImportError as exc:  # run outside frameview's environment: say how to get into it
    raise SystemExit(
        f"reset_env: {exc}. Run the example in frameview's environment: ./scripts/run examples/reset_env.py "
        "(creates .venv on first use), or `source .venv/bin/activate` first, or pip install 'frameview[usd]' pyyaml."
    ) from exc

DEFAULT_CONFIG = Path(__file__).with_name("env_config.yaml")
POSITION_TOLERANCE_M = 1e-4
"""--check: the largest camera position difference allowed, metres (float32 positions of envs up to ~250 m away)."""
ORIENTATION_TOLERANCE_RAD = 1e-5
"""--check: the largest camera orientation difference allowed, as the angle of the rotation between them, radians."""
DUMP_FIELDS = ("px", "py", "pz", "qx", "qy", "qz", "qw")
"""The columns of a ``--dump`` .npy: position (stage units, world frame), then orientation xyzw in the convention."""
CONVENTION_AXES = {
    "opengl": np.eye(3),
    "ros": np.diag([1.0, -1.0, -1.0]),  # x right, y down, z forward
    "world": np.array([[0.0, 0.0, -1.0], [-1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]),  # x forward, y left, z up
}
"""--check's truth: each convention's camera axes (rows) over the USD camera's own (opengl: -Z forward, +Y up)."""

# every key the example understands, with its default (frame_view is checked by FrameViewCfg itself)
DEFAULTS: dict[str, dict[str, Any]] = {
    "env": {
        "num_envs": 64,
        "steps": 20,
        "seed": 0,
        "env_spacing": 2.5,
        "reset_probability": 0.1,
        "speed": [0.5, 2.0],
        "dt": 0.05,
    },
    "scene": {
        "robot_prim_path": "/World/envs/env_.*/Robot",
        "camera_offset": [0.2, 0.0, 0.5],
        "camera_pitch_deg": 20.0,
    },
    "camera": {"convention": "ros"},
}


# ---------------------------------------------------------------- config


def load_config(path: str | Path) -> dict[str, Any]:
    """Read a YAML (needs PyYAML) or JSON env config into a dict."""
    path = Path(path)
    text = path.read_text()
    if path.suffix.lower() == ".json":
        return json.loads(text)
    try:
        import yaml
    except ImportError as exc:
        raise ValueError(
            f"--config {path}: reading YAML needs PyYAML (pip install pyyaml), or pass a .json config"
        ) from exc
    return yaml.safe_load(text) or {}


def parse_value(text: str) -> Any:
    """A ``--set`` value: YAML (or JSON without PyYAML) when it parses, else the plain string."""
    try:
        import yaml

        return yaml.safe_load(text)
    except ImportError:
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return text


def apply_override(config: dict[str, Any], assignment: str) -> None:
    """Apply ``dotted.key=value`` to ``config`` in place (missing intermediate sections are created)."""
    key, sep, raw = assignment.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"--set: expected KEY=VALUE with a dotted key (frame_view.backend=usd), got {assignment!r}")
    parts = key.strip().split(".")
    node = config
    for depth, part in enumerate(parts[:-1]):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            where = ".".join(parts[: depth + 1])
            raise ValueError(f"--set {key}: {where!r} is a value ({child!r}), not a section")
        node = child
    node[parts[-1]] = parse_value(raw)


def resolve_config(config: dict[str, Any]) -> tuple[dict[str, dict[str, Any]], fv.FrameViewCfg]:
    """Fill defaults, reject unknown keys, and validate the FrameView section (backend names are checked here)."""
    unknown = sorted(set(config) - {*DEFAULTS, "frame_view"})
    if unknown:
        raise ValueError(f"config: unknown section(s) {unknown}; expected some of {sorted({*DEFAULTS, 'frame_view'})}")
    merged: dict[str, dict[str, Any]] = {}
    for section, defaults in DEFAULTS.items():
        given = config.get(section) or {}
        if not isinstance(given, dict):
            raise ValueError(f"config: section {section!r} must be a mapping, got {given!r}")
        bad = sorted(set(given) - set(defaults))
        if bad:
            raise ValueError(f"config: unknown key(s) {bad} in {section!r}; expected some of {sorted(defaults)}")
        merged[section] = {**defaults, **given}
    view_cfg = fv.FrameViewCfg.from_dict(config.get("frame_view") or {})  # unknown backend -> lists available ones
    convention = merged["camera"]["convention"]
    if convention not in ("opengl", "ros", "world"):
        raise ValueError(f"camera.convention: expected one of ['opengl', 'ros', 'world'], got {convention!r}")
    env = merged["env"]
    if int(env["num_envs"]) < 1 or int(env["steps"]) < 0:
        raise ValueError(f"env: expected num_envs >= 1 and steps >= 0, got {env['num_envs']} and {env['steps']}")
    return merged, view_cfg


# ---------------------------------------------------------------- scene


def camera_orientation(pitch_deg: float) -> Gf.Quatd:
    """USD (opengl) camera orientation in the robot frame: looking along +X, tilted down by ``pitch_deg``."""
    t = np.radians(pitch_deg)
    forward = np.array([np.cos(t), 0.0, -np.sin(t)])
    up = np.array([np.sin(t), 0.0, np.cos(t)])
    right = np.cross(forward, up)
    rows = np.stack([right, up, -forward])  # opengl camera: +X right, +Y up, +Z back
    return Gf.Matrix3d(*rows.ravel().tolist()).ExtractRotation().GetQuat()


def _define(layer: Sdf.Layer, path: str, type_name: str, translate: Gf.Vec3d, orient: Gf.Quatd | None) -> None:
    """Author a typed prim with ``xformOp:translate`` [and ``xformOp:orient``] directly in the layer (fast)."""
    spec = Sdf.CreatePrimInLayer(layer, path)
    spec.specifier = Sdf.SpecifierDef
    spec.typeName = type_name
    ops = ["xformOp:translate"]
    Sdf.AttributeSpec(spec, "xformOp:translate", Sdf.ValueTypeNames.Double3).default = translate
    if orient is not None:
        Sdf.AttributeSpec(spec, "xformOp:orient", Sdf.ValueTypeNames.Quatd).default = orient
        ops.append("xformOp:orient")
    Sdf.AttributeSpec(
        spec, "xformOpOrder", Sdf.ValueTypeNames.TokenArray, variability=Sdf.VariabilityUniform
    ).default = ops


def build_stage(num_envs: int, scene: dict[str, Any], env: dict[str, Any]) -> Usd.Stage:
    """An in-memory stage: ``/World/envs/env_i`` (grid origin) / ``Robot`` / ``Camera`` for each env."""
    stage = Usd.Stage.CreateInMemory()
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.z)
    layer = stage.GetRootLayer()
    side = int(np.ceil(np.sqrt(num_envs)))
    spacing = float(env["env_spacing"])
    cam_offset = Gf.Vec3d(*(float(v) for v in scene["camera_offset"]))
    cam_quat = camera_orientation(float(scene["camera_pitch_deg"]))
    zero, identity = Gf.Vec3d(0.0, 0.0, 0.0), Gf.Quatd(1.0)
    with Sdf.ChangeBlock():
        _define(layer, "/World", "Xform", zero, None)
        _define(layer, "/World/envs", "Xform", zero, None)
        for i in range(num_envs):
            env_path = f"/World/envs/env_{i}"
            _define(layer, env_path, "Xform", Gf.Vec3d(spacing * (i % side), spacing * (i // side), 0.0), None)
            _define(layer, f"{env_path}/Robot", "Xform", zero, identity)
            _define(layer, f"{env_path}/Robot/Camera", "Camera", cam_offset, cam_quat)
    return stage


def robot_poses(origins: np.ndarray, phase: np.ndarray, radius: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """World positions (M, 3) and xyzw orientations (M, 4) of robots moving along circles, facing their motion."""
    pos = origins + np.stack([radius * np.cos(phase), radius * np.sin(phase), np.zeros_like(phase)], axis=1)
    yaw = phase + 0.5 * np.pi
    quat = np.stack([np.zeros_like(yaw), np.zeros_like(yaw), np.sin(0.5 * yaw), np.cos(0.5 * yaw)], axis=1)
    return pos.astype(np.float32), quat.astype(np.float32)


def backend_args(view_cfg: fv.FrameViewCfg) -> dict[str, Any]:
    """What the backend needs beside the stage: for ``newton``, a Newton model and its state.

    The robots here are moved by the env, not simulated, so the model has no bodies: every prim is a frame fixed in
    the world and robot writes carry the cameras, as on the other backends. examples/newton_cameras.py has cameras on
    simulated bodies.
    """
    if view_cfg.backend != "newton":
        return {}
    import newton  # frameview[newton]

    model = newton.ModelBuilder().finalize(device=view_cfg.device)
    return {"model": model, "state": model.state()}


# ---------------------------------------------------------------- the loop


def expected_cameras(
    robot_pos: np.ndarray, robot_quat: np.ndarray, scene: dict[str, Any], convention: str
) -> tuple[np.ndarray, np.ndarray]:
    """--check's truth, in float64 with pxr Gf: the world poses of the cameras of robots at ``robot_pos`` (M, 3) /
    ``robot_quat`` (M, 4) xyzw, in ``convention``: the camera's offset composed with its robot's pose."""
    offset = np.array([float(v) for v in scene["camera_offset"]])
    local = np.array(Gf.Matrix3d(camera_orientation(float(scene["camera_pitch_deg"]))))  # rows: camera axes on robot
    axes = CONVENTION_AXES[convention] @ local
    pos, quat = [], []
    for p, (x, y, z, w) in zip(robot_pos.astype(np.float64), robot_quat.astype(np.float64), strict=True):
        robot = np.array(Gf.Matrix3d(Gf.Quatd(float(w), float(x), float(y), float(z)).GetNormalized()))
        pos.append(p + offset @ robot)
        q = Gf.Matrix3d(*(axes @ robot).ravel().tolist()).ExtractRotation().GetQuat()
        quat.append([*q.GetImaginary(), q.GetReal()])
    return np.array(pos).reshape(-1, 3), np.array(quat).reshape(-1, 4)


def rotation_angles(got_xyzw: np.ndarray, want_xyzw: np.ndarray) -> np.ndarray:
    """Angle (radians, float64) of the rotation between each pair of xyzw quaternions (q and -q are one rotation)."""
    a = got_xyzw / np.linalg.norm(got_xyzw, axis=1, keepdims=True)
    b = want_xyzw / np.linalg.norm(want_xyzw, axis=1, keepdims=True)
    return 2.0 * np.arccos(np.clip(np.abs((a * b).sum(axis=1)), 0.0, 1.0))


def _clock(device: str) -> float:
    wp.synchronize_device(device)
    return time.perf_counter()


def _stats_ms(samples: Sequence[float]) -> dict[str, float]:
    if not samples:
        return {"median": float("nan"), "min": float("nan"), "max": float("nan"), "count": 0}
    ms = np.asarray(samples) * 1e3
    return {"median": float(np.median(ms)), "min": float(ms.min()), "max": float(ms.max()), "count": len(ms)}


def run(config: dict[str, Any], check: bool = False) -> dict[str, Any]:
    """Validate ``config``, build the stage and views, run the loop; return the final poses and timings (and, with
    ``check``, the largest differences of every camera read from :func:`expected_cameras`)."""
    merged, view_cfg = resolve_config(config)  # before any stage work: a bad backend fails here
    env, scene, convention = merged["env"], merged["scene"], merged["camera"]["convention"]
    num_envs, steps = int(env["num_envs"]), int(env["steps"])
    rng = np.random.default_rng(int(env["seed"]))
    device = view_cfg.device

    t0 = time.perf_counter()
    stage = build_stage(num_envs, scene, env)
    t_stage = time.perf_counter() - t0

    robot_cfg = dataclasses.replace(view_cfg, prim_path=scene["robot_prim_path"])
    with contextlib.ExitStack() as views:  # closes every view built so far on every path, errors included
        t0 = time.perf_counter()
        extra = backend_args(view_cfg)
        robots = fv.make_frame_view(robot_cfg, stage, **extra)
        views.callback(robots.close)
        cameras = fv.make_frame_view(view_cfg, stage, **extra)
        views.callback(cameras.close)
        t_views = time.perf_counter() - t0
        if robots.count != num_envs or cameras.count != num_envs:
            raise ValueError(
                f"expected one robot and one camera per env ({num_envs}), got {robots.count} robots "
                f"({robot_cfg.prim_path!r}) and {cameras.count} cameras ({view_cfg.prim_path!r})"
            )
        for view, leaf in ((robots, "/Robot"), (cameras, "/Robot/Camera")):
            if list(view.prim_paths) != [f"/World/envs/env_{i}{leaf}" for i in range(num_envs)]:
                raise ValueError(f"{view!r}: rows are not in env order; map them with CameraPoses(env_rows=...)")
        cams = fv.CameraPoses(cameras)  # row i = env i
        origins, _ = robots.get_world_poses()
        origins = origins.numpy().astype(np.float64)
        low, high = (float(v) for v in env["speed"])
        speed = rng.uniform(low, high, size=num_envs)
        radius = rng.uniform(0.2, 0.8, size=num_envs)
        phase = rng.uniform(0.0, 2.0 * np.pi, size=num_envs)
        dt = float(env["dt"])

        # once, not timed: the first call of each kind compiles (or loads) Warp's kernels; the robots keep their poses
        written_pos, written_quat = (a.numpy().astype(np.float32) for a in robots.get_world_poses())
        robots.set_world_poses(written_pos, written_quat)
        first = np.zeros(1, dtype=np.int32)
        robots.set_world_poses(written_pos[first], written_quat[first], indices=first)
        cams.read(first, convention=convention)
        cams.read(convention=convention)
        pos_errors: list[float] = []
        angle_errors: list[float] = []

        def compare(env_ids: np.ndarray | None, cam_pos: wp.array, cam_quat: wp.array) -> None:
            rows = slice(None) if env_ids is None else env_ids
            want_pos, want_quat = expected_cameras(written_pos[rows], written_quat[rows], scene, convention)
            pos_errors.append(float(np.linalg.norm(cam_pos.numpy() - want_pos, axis=1).max()))
            angle_errors.append(float(rotation_angles(cam_quat.numpy().astype(np.float64), want_quat).max()))

        reset_pos = np.full((num_envs, 3), np.nan, dtype=np.float32)  # last camera pose read on each env's reset
        reset_quat = np.full((num_envs, 4), np.nan, dtype=np.float32)
        step_s, reset_write_s, reset_read_s, reset_sizes = [], [], [], []
        for _ in range(steps):
            phase += speed * dt
            pos, quat = robot_poses(origins, phase, radius)
            start = _clock(device)
            robots.set_world_poses(pos, quat)
            step_s.append(_clock(device) - start)
            written_pos, written_quat = pos, quat

            env_ids = np.flatnonzero(rng.random(num_envs) < float(env["reset_probability"])).astype(np.int32)
            if env_ids.size == 0:
                continue
            phase[env_ids] = rng.uniform(0.0, 2.0 * np.pi, size=env_ids.size)
            radius[env_ids] = rng.uniform(0.2, 0.8, size=env_ids.size)
            pos, quat = robot_poses(origins[env_ids], phase[env_ids], radius[env_ids])
            start = _clock(device)
            robots.set_world_poses(pos, quat, indices=env_ids)
            mid = _clock(device)
            cam_pos, cam_quat = cams.read(env_ids, convention=convention)
            end = _clock(device)
            written_pos, written_quat = written_pos.copy(), written_quat.copy()
            written_pos[env_ids], written_quat[env_ids] = pos, quat
            if check:
                compare(env_ids, cam_pos, cam_quat)
            reset_write_s.append(mid - start)
            reset_read_s.append(end - mid)
            reset_sizes.append(int(env_ids.size))
            reset_pos[env_ids] = cam_pos.numpy()
            reset_quat[env_ids] = cam_quat.numpy()

        start = _clock(device)
        final_pos, final_quat = cams.read(convention=convention)
        t_read_all = _clock(device) - start
        if check:
            compare(None, final_pos, final_quat)
        result = {
            "backend": cameras.backend,
            "device": device,
            "convention": convention,
            "num_envs": num_envs,
            "steps": steps,
            "positions": final_pos.numpy().copy(),
            "orientations": final_quat.numpy().copy(),
            "reset_positions": reset_pos,
            "reset_orientations": reset_quat,
            "timings_ms": {
                "build_stage": t_stage * 1e3,
                "build_views": t_views * 1e3,
                "step_write": _stats_ms(step_s),
                "reset_write": _stats_ms(reset_write_s),
                "reset_read": _stats_ms(reset_read_s),
                "read_all": t_read_all * 1e3,
            },
            "reset_envs_per_step": float(np.mean(reset_sizes)) if reset_sizes else 0.0,
            "camera_reads_checked": len(pos_errors),
            "position_error_m": max(pos_errors) if pos_errors else None,
            "orientation_error_rad": max(angle_errors) if angle_errors else None,
            "stage": stage,
        }
    return result


# ---------------------------------------------------------------- CLI


def dump(result: dict[str, Any], path: str | Path) -> str:
    """Write the final camera poses, one per env in env order, and return a line that says what was written.

    ``.npy``: an (N,) array of records whose fields name the columns (:data:`DUMP_FIELDS`: ``px, py, pz`` the world
    position in stage units, ``qx, qy, qz, qw`` the xyzw orientation in the camera convention), float32 each; read it
    with ``np.load(path)["px"]``, or ``numpy.lib.recfunctions.structured_to_unstructured`` for an (N, 7) array.
    ``.json``: the same with the run's backend, convention, sizes and timings.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    n = len(result["positions"])
    what = (f"{n} camera poses (env order): position px py pz (world frame, stage units), orientation qx qy qz qw "
            f"(xyzw, {result['convention']!r} camera convention)")  # fmt: skip
    if path.suffix.lower() == ".npy":
        columns = np.concatenate([result["positions"], result["orientations"]], axis=1)
        records = np.empty(n, dtype=[(name, np.float32) for name in DUMP_FIELDS])
        for k, name in enumerate(DUMP_FIELDS):
            records[name] = columns[:, k]
        np.save(path, records)
        return f"  {path}: {what}, an (N,) array of records with those fields"
    if path.suffix.lower() == ".json":
        keys = ("backend", "device", "convention", "num_envs", "steps", "timings_ms")
        payload = {k: result[k] for k in keys}
        payload["columns"] = what
        payload["positions"] = result["positions"].tolist()
        payload["orientations_xyzw"] = result["orientations"].tolist()
        path.write_text(json.dumps(payload, indent=1))
        return f"  {path}: {what}, with the run's backend, convention and timings"
    raise ValueError(f"--dump: expected a .npy or .json path, got {str(path)!r}")


def summary(result: dict[str, Any]) -> str:
    """A few lines: backend, sizes and median (min-max) timings."""
    t = result["timings_ms"]

    def fmt(s: dict[str, float]) -> str:
        return f"{s['median']:.3f} ms (min {s['min']:.3f}, max {s['max']:.3f}, n={s['count']})"

    return "\n".join(
        [
            f"backend {result['backend']} on {result['device']}: {result['num_envs']} envs, {result['steps']} steps, "
            f"camera convention {result['convention']!r}",
            f"  build: stage {t['build_stage']:.1f} ms, views {t['build_views']:.1f} ms",
            f"  per step, robot world write (all envs): {fmt(t['step_write'])}",
            f"  per reset ({result['reset_envs_per_step']:.1f} envs on average): robot write {fmt(t['reset_write'])}",
            f"  per reset, camera pose read (CameraPoses.read): {fmt(t['reset_read'])}",
            f"  final read of all cameras: {t['read_all']:.3f} ms",
        ]
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default=str(DEFAULT_CONFIG), help="YAML or JSON env config (default: %(default)s)")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config field by dotted key, e.g. frame_view.backend=usd (repeatable)",
    )
    parser.add_argument("--envs", type=int, help="number of envs (env.num_envs)")
    parser.add_argument("--steps", type=int, help="number of steps (env.steps)")
    parser.add_argument("--seed", type=int, help="random seed (env.seed)")
    parser.add_argument(
        "--dump", help="write the final camera poses to this .npy or .json file (e.g. out/poses.npy, git-ignored)"
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help=f"compare every camera read with float64 truth; exit 1 beyond {POSITION_TOLERANCE_M:g} m or "
        f"{ORIENTATION_TOLERANCE_RAD:g} rad",
    )
    parser.add_argument("--quiet", action="store_true", help="print nothing but a failed check")
    parser.add_argument("--verbose", action="store_true", help="leave Warp's start-up and kernel-load messages on")
    return parser


def verdict(what: str, largest: float, tolerance: float, unit: str, quiet: bool) -> bool:
    """Print one check's result (its tolerance and unit, then passed or FAILED; FAILED even when ``quiet``)."""
    passed = bool(largest <= tolerance)
    line = f"check: {what}: largest difference {largest:.3g} {unit} (tolerance {tolerance:g} {unit}): "
    line += "passed" if passed else "FAILED"
    if not quiet or not passed:
        print(line, file=sys.stdout if passed else sys.stderr)
    return passed


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the example with command-line arguments ``argv``; return the result of :func:`run`.

    Raises:
        ValueError: A bad config or override (unknown backend: the message lists the available ones).
    """
    args = build_parser().parse_args(argv)
    if args.dump and Path(args.dump).suffix.lower() not in (".npy", ".json"):
        raise ValueError(f"--dump: expected a .npy or .json path, got {args.dump!r}")
    config = copy.deepcopy(load_config(args.config))
    for assignment in args.overrides:
        apply_override(config, assignment)
    for flag, key in ((args.envs, "num_envs"), (args.steps, "steps"), (args.seed, "seed")):
        if flag is not None:
            config.setdefault("env", {})[key] = flag
    result = run(config, check=args.check)
    written = dump(result, args.dump) if args.dump else None
    if not args.quiet:
        print(summary(result))
        if written:
            print(written)
    result["check_passed"] = None
    if args.check:
        reads = f"{result['camera_reads_checked']} camera reads vs float64 truth"
        result["check_passed"] = all(  # both verdicts printed
            [
                verdict(f"{reads}, positions", result["position_error_m"], POSITION_TOLERANCE_M, "m", args.quiet),
                verdict(
                    f"{reads}, orientations (rotation angle)",
                    result["orientation_error_rad"],
                    ORIENTATION_TOLERANCE_RAD,
                    "rad",
                    args.quiet,
                ),
            ]
        )
    return result


def exit_status(argv: Sequence[str]) -> int | str:
    """The command line's exit status: 0, 1 when a ``--check`` failed, or the error message of a bad argument."""
    try:
        outcome = main(argv)
    except (ValueError, ImportError) as exc:
        return f"reset_env: error: {exc}"
    return 1 if outcome["check_passed"] is False else 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    from _warp_quiet import quiet_warp  # beside this file

    quiet_warp(verbose="--verbose" in sys.argv[1:], announce="--quiet" not in sys.argv[1:])
    sys.exit(exit_status(sys.argv[1:]))

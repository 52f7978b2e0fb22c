# SPDX-License-Identifier: Apache-2.0
"""examples/reset_env.py: the env-config example runs on usd and fabric and both give the same camera poses.

The truth for the USD run is the stage itself (``UsdGeom.XformCache``), with the ROS camera axes built by hand from the
camera's USD axes; the Fabric run (which never writes USD) must then agree with the USD run.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from helpers import decompose_all, env_paths, quat_to_rotation, xform_cache_world

import frameview as fv

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "reset_env.py"
SMALL = ["--envs", "64", "--steps", "20", "--quiet"]


@pytest.fixture(scope="module")
def example() -> ModuleType:
    """The example script, imported as a module (it is not a package)."""
    spec = importlib.util.spec_from_file_location("reset_env_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses and pickling look modules up by name
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def needs_yaml() -> None:
    """The shipped config is YAML: reading it needs PyYAML."""
    pytest.importorskip("yaml", reason="examples/env_config.yaml needs PyYAML (pip install pyyaml)")


@pytest.fixture(scope="module")
def runs(example: ModuleType, needs_yaml: None) -> dict[str, dict]:
    """The example run once per backend on the CPU, same seed, 64 envs and 20 steps."""
    return {
        backend: example.main([*SMALL, "--set", f"frame_view.backend={backend}", "--set", "frame_view.device=cpu"])
        for backend in ("usd", "fabric")
    }


def same_rotations(a: np.ndarray, b: np.ndarray, atol: float) -> None:
    """Rows of ``a`` and ``b`` are the same rotations (q and -q are equal)."""
    err = np.minimum(np.abs(a - b).max(axis=1), np.abs(a + b).max(axis=1))
    assert np.all(err <= atol), f"orientations differ by up to {err.max():.3g} in rows {np.flatnonzero(err > atol)}"


def test_usd_and_fabric_give_the_same_camera_poses(runs: dict[str, dict]):
    """The final camera poses and every pose read on reset agree between the usd and fabric backends (atol 1e-4)."""
    usd, fabric = runs["usd"], runs["fabric"]
    assert usd["backend"] == "usd" and fabric["backend"].startswith("fabric:")
    np.testing.assert_allclose(fabric["positions"], usd["positions"], atol=1e-4)
    same_rotations(fabric["orientations"], usd["orientations"], atol=1e-4)
    # the same envs were reset (same seed) and read the same poses on reset
    np.testing.assert_array_equal(np.isnan(fabric["reset_positions"]), np.isnan(usd["reset_positions"]))
    was_reset = ~np.isnan(usd["reset_positions"][:, 0])
    assert 0 < was_reset.sum() < 64, "the run should reset some envs, not all"
    np.testing.assert_allclose(fabric["reset_positions"][was_reset], usd["reset_positions"][was_reset], atol=1e-4)
    same_rotations(fabric["reset_orientations"][was_reset], usd["reset_orientations"][was_reset], atol=1e-4)


def test_usd_run_matches_the_stage(runs: dict[str, dict]):
    """The USD run's camera poses are the stage's (XformCache), in ROS axes built by hand from the USD camera axes."""
    usd = runs["usd"]
    assert usd["convention"] == "ros"
    t, q_gl, _ = decompose_all(xform_cache_world(usd["stage"], env_paths(64, "/Robot/Camera")))
    np.testing.assert_allclose(usd["positions"], t, atol=1e-4)
    for k, (q, qg) in enumerate(zip(usd["orientations"], q_gl, strict=True)):
        right, up, back = quat_to_rotation(qg)
        np.testing.assert_allclose(quat_to_rotation(q), np.stack([right, -up, -back]), atol=1e-4, err_msg=f"env {k}")


def test_robots_moved(example: ModuleType, runs: dict[str, dict]):
    """The loop moved the cameras: zero steps leaves every camera elsewhere than 20 steps do."""
    still = example.main([*SMALL[:2], "--steps", "0", "--quiet", "--set", "frame_view.backend=usd"])
    moved = np.linalg.norm(runs["fabric"]["positions"] - still["positions"], axis=1)
    assert np.all(moved > 1e-3)


def test_unknown_backend_fails_before_any_stage_is_built(example: ModuleType, needs_yaml: None, monkeypatch):
    """An unknown backend raises ValueError listing the available backends, and no stage is built."""

    def no_stage(*args, **kwargs):
        raise AssertionError("build_stage was called before the config was validated")

    monkeypatch.setattr(example, "build_stage", no_stage)
    expected = str(fv.available_backends()).replace("[", r"\[").replace("]", r"\]")
    with pytest.raises(ValueError, match=rf"unknown backend 'physx'; available: {expected}"):
        example.main([*SMALL, "--set", "frame_view.backend=physx"])


def test_config_errors_are_reported(example: ModuleType, needs_yaml: None, monkeypatch):
    """Bad overrides, unknown keys and conventions raise ValueError naming the key, before any stage is built."""
    monkeypatch.setattr(example, "build_stage", lambda *a, **k: pytest.fail("stage built for a bad config"))
    cases = [
        (["--set", "frame_view.backend"], "expected KEY=VALUE"),
        (["--set", "env.num_env=3"], r"unknown key\(s\) \['num_env'\] in 'env'"),
        (["--set", "frame_view.devices=cpu"], r"unknown key\(s\) \['devices'\]"),
        (["--set", "camera.convention=cv"], "camera.convention: expected one of"),
        (["--set", "env.seed.x=1"], "'env.seed' is a value"),
        (["--set", "physics.dt=1"], r"unknown section\(s\) \['physics'\]"),
        (["--dump", "poses.txt"], r"--dump: expected a \.npy or \.json path"),
    ]
    for argv, message in cases:
        with pytest.raises(ValueError, match=message):
            example.main([*SMALL, *argv])


def test_overrides_parse_values(example: ModuleType):
    """--set values parse as YAML/JSON scalars and lists; dotted keys create nested sections."""
    config: dict = {"env": {"steps": 1}}
    example.apply_override(config, "env.steps=7")
    example.apply_override(config, "env.speed=[1.0, 2.5]")
    example.apply_override(config, "frame_view.options.extra=on_demand")
    assert config == {"env": {"steps": 7, "speed": [1.0, 2.5]}, "frame_view": {"options": {"extra": "on_demand"}}}


def test_json_config_and_dumps(example: ModuleType, tmp_path: Path):
    """A JSON config works without PyYAML; --dump writes an .npy of records whose fields name the columns (px ... qw)
    and a .json with the same poses and a description of the columns."""
    config = {
        "env": {"num_envs": 9, "steps": 3, "seed": 1, "reset_probability": 0.5},
        "camera": {"convention": "world"},
        "frame_view": {"backend": "fabric", "device": "cpu", "prim_path": "/World/envs/env_.*/Robot/Camera"},
    }
    path = tmp_path / "env.json"
    path.write_text(json.dumps(config))
    result = example.main(["--config", str(path), "--quiet", "--dump", str(tmp_path / "poses.npy")])
    records = np.load(tmp_path / "poses.npy")
    assert records.shape == (9,) and records.dtype.names == ("px", "py", "pz", "qx", "qy", "qz", "qw")
    poses = np.stack([records[name] for name in records.dtype.names], axis=1)
    assert poses.dtype == np.float32
    np.testing.assert_array_equal(poses[:, :3], result["positions"])
    np.testing.assert_array_equal(poses[:, 3:], result["orientations"])
    example.main(["--config", str(path), "--quiet", "--dump", str(tmp_path / "poses.json")])
    dumped = json.loads((tmp_path / "poses.json").read_text())
    assert dumped["convention"] == "world" and dumped["num_envs"] == 9
    assert "orientation qx qy qz qw (xyzw, 'world' camera convention)" in dumped["columns"]
    np.testing.assert_allclose(dumped["positions"], poses[:, :3])
    np.testing.assert_allclose(dumped["orientations_xyzw"], poses[:, 3:])


def test_cli_subprocess(needs_yaml: None, tmp_path: Path):
    """The CLI runs end to end, and an unknown backend exits non-zero listing the available backends on stderr."""
    bad = subprocess.run(
        [sys.executable, str(EXAMPLE), "--set", "frame_view.backend=nope"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert bad.returncode != 0
    assert f"unknown backend 'nope'; available: {fv.available_backends()}" in bad.stderr
    assert "Traceback" not in bad.stderr
    ok = subprocess.run(
        [sys.executable, str(EXAMPLE), "--envs", "8", "--steps", "2", "--dump", str(tmp_path / "p.npy")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert ok.returncode == 0, ok.stderr
    assert "per reset, camera pose read" in ok.stdout
    assert np.load(tmp_path / "p.npy").shape == (8,)
    assert f"{tmp_path / 'p.npy'}: 8 camera poses (env order): position px py pz" in ok.stdout


def small_config(tmp_path: Path, backend: str = "fabric") -> str:
    """A JSON config (no PyYAML needed) of 9 envs and 4 steps, every env likely to reset."""
    config = {
        "env": {"num_envs": 9, "steps": 4, "seed": 2, "reset_probability": 0.5},
        "frame_view": {"backend": backend, "device": "cpu", "prim_path": "/World/envs/env_.*/Robot/Camera"},
    }
    path = tmp_path / f"{backend}.json"
    path.write_text(json.dumps(config))
    return str(path)


@pytest.mark.parametrize("backend", ["usd", "fabric"])
def test_check_states_tolerances_and_passes(example: ModuleType, tmp_path: Path, capsys, backend: str):
    """--check compares every camera read with the float64 truth and prints each verdict with its tolerance and unit."""
    assert example.exit_status(["--config", small_config(tmp_path, backend), "--check"]) == 0
    out = capsys.readouterr().out
    assert "positions: largest difference" in out and "(tolerance 0.0001 m): passed" in out
    assert "orientations (rotation angle): largest difference" in out and "(tolerance 1e-05 rad): passed" in out


def test_check_fails_on_wrong_poses(example: ModuleType, tmp_path: Path, capsys, monkeypatch):
    """A camera read that disagrees with the truth (here the truth's ROS axes flipped) prints FAILED, even with
    --quiet, and the exit status is 1."""
    monkeypatch.setitem(example.CONVENTION_AXES, "ros", np.diag([-1.0, 1.0, -1.0]))
    assert example.exit_status(["--config", small_config(tmp_path), "--check", "--quiet"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "orientations (rotation angle): largest difference 3.14 rad (tolerance 1e-05 rad): FAILED" in captured.err

# SPDX-License-Identifier: Apache-2.0
"""The examples on the newton backend: the env-config example switched by one field, and simulated cameras.

Truth: the env-config example's ``usd`` run (checked against the stage by tests/test_example_env.py), and NumPy
camera poses composed from the body poses the example writes into Newton's state.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from newton_helpers import newton_module

ROOT = Path(__file__).resolve().parents[1]


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"{name}_newton_test", ROOT / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look modules up by name
    spec.loader.exec_module(module)
    return module


def test_env_config_example_runs_on_newton_by_one_field() -> None:
    """reset_env.py with frame_view.backend=newton gives the usd run's camera poses, on every reset and at the end."""
    newton_module()
    pytest.importorskip("yaml", reason="examples/env_config.yaml needs PyYAML")
    example = load("reset_env")
    args = ["--envs", "16", "--steps", "20", "--quiet", "--set", "frame_view.device=cpu"]
    runs = {b: example.main([*args, "--set", f"frame_view.backend={b}"]) for b in ("usd", "newton")}
    usd, newton = runs["usd"], runs["newton"]
    assert newton["backend"] == "newton"
    np.testing.assert_allclose(newton["positions"], usd["positions"], atol=1e-4)
    err = np.minimum(
        np.abs(newton["orientations"] - usd["orientations"]).max(1),
        np.abs(newton["orientations"] + usd["orientations"]).max(1),
    )
    assert err.max() < 1e-4
    np.testing.assert_array_equal(np.isnan(newton["reset_positions"]), np.isnan(usd["reset_positions"]))
    reset = ~np.isnan(usd["reset_positions"][:, 0])
    assert reset.any()
    np.testing.assert_allclose(newton["reset_positions"][reset], usd["reset_positions"][reset], atol=1e-4)


@pytest.mark.slow
def test_newton_cameras_example() -> None:
    """examples/newton_cameras.py: cameras read on reset (ROS convention) equal NumPy's body pose times the camera's
    offset, and the bodies fall between resets."""
    newton_module()
    example = load("newton_cameras")
    result = example.main(["--envs", "8", "--steps", "40", "--reset-probability", "0.2", "--check", "--quiet"])
    assert result["camera_reads_on_reset"] > 0
    assert result["check_passed"] is True
    assert result["position_error_m"] < example.POSITION_TOLERANCE_M
    assert result["orientation_error_rad"] < example.ORIENTATION_TOLERANCE_RAD
    assert result["final_heights"].min() < 5.3  # a camera starts 5.3 m up (reset ones 3.3-6.3 m): some have fallen


def test_newton_robots_example() -> None:
    """examples/newton_robots.py: every step's joint-state reading equals Newton's joint arrays gathered by label, with
    resets between steps, and the DOFs come in articulation order."""
    newton_module()
    example = load("newton_robots")
    result = example.main(["--envs", "6", "--steps", "20", "--reset-probability", "0.2", "--check", "--quiet"])
    assert result["resets"] > 0
    assert result["max_error"] == 0.0 and result["check_passed"] is True
    assert result["names"] == tuple(f"leg{g}_joint{k}" for g in range(4) for k in range(3))
    assert result["positions"].shape == (6, 12)


def test_newton_robots_check_fails_on_wrong_readings(monkeypatch, capsys) -> None:
    """examples/newton_robots.py --check: readings compared with the wrong DOFs of Newton's arrays print FAILED with
    the tolerance and unit, and the exit status is 1."""
    newton_module()
    example = load("newton_robots")
    right = example.dof_tables
    monkeypatch.setattr(example, "dof_tables", lambda model: tuple(np.roll(t, 1, axis=1) for t in right(model)))
    assert example.exit_status(["--envs", "2", "--steps", "3", "--check", "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "joint positions vs Newton's joint_q over 3 steps, 2 envs: largest difference" in err
    assert "(tolerance 1e-06 rad): FAILED" in err

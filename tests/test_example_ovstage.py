# SPDX-License-Identifier: Apache-2.0
"""examples/ovstage_cameras.py (the recipe of docs/ovstage.md) runs: a USD file opened in ovstage, robots written
through a fabric:ovstage view, their cameras read back where the written poses put them (NumPy math)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

from ovstage_helpers import requires_ovstage

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "ovstage_cameras.py"


@requires_ovstage
def test_cameras_follow_written_robots(tmp_path: Path) -> None:
    """Every camera read back sits 1.5 m above the pose written to its robot, with the robot's orientation."""
    spec = importlib.util.spec_from_file_location("ovstage_cameras_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    result = example.main(["--envs", "24", "--usd", str(tmp_path / "scene.usda"), "--quiet"])
    assert result["backend"] == "fabric:ovstage"
    assert result["written"] == 12
    assert result["max_position_error"] < 1e-4
    assert result["max_orientation_error"] < 1e-5


@requires_ovstage
def test_cli_is_quiet(tmp_path: Path) -> None:
    """The command line prints its summary and none of Warp's start-up lines."""
    out = subprocess.run(
        [sys.executable, str(EXAMPLE), "--envs", "8", "--usd", str(tmp_path / "s.usda")],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    assert "fabric:ovstage on cpu (cpu-incremental hierarchy): 8 envs" in out.stdout
    assert "Warp " not in out.stdout + out.stderr.replace("Warp compiles", "")


@requires_ovstage
def test_pipeline_on_a_gpu_hierarchy(tmp_path: Path, device: str) -> None:
    """The kit-less pipeline (``--steps``): 20 resets of half of 512 envs with device inputs, on a stage whose
    hierarchy model is the GPU one, every step's cameras checked against float64 truth by the example (exit status
    1 on a failed check). In its own process: ovstage's hierarchy model is process-wide."""
    out = subprocess.run(
        [sys.executable, str(EXAMPLE), "--envs", "512", "--steps", "20", "--device", device, "--hierarchy",
         "gpu-incremental", "--usd", str(tmp_path / "s.usda")],
        capture_output=True,
        text=True,
        timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert "gpu-incremental hierarchy" in out.stdout
    assert out.stdout.count(": passed") == 2, out.stdout

# SPDX-License-Identifier: Apache-2.0
"""docs/isaaclab.md's install() sketch runs as written inside Isaac Lab 3 (kit-less, CPU, Newton physics), in a fresh
interpreter, and prints what the doc says (skipped where Isaac Lab with its Newton physics is not installed)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "isaaclab.md"
MARKER = "<!-- isaaclab-install-example: tests/test_isaaclab_docs_install.py runs this block -->"


def sketch() -> str:
    """The first ```python block after the marker in docs/isaaclab.md."""
    text = DOC.read_text()
    if MARKER not in text:
        raise AssertionError(f"docs/isaaclab.md lost the sketch marker {MARKER!r}")
    match = re.search(r"```python\n(.*?)```", text[text.index(MARKER) :], flags=re.DOTALL)
    if match is None:
        raise AssertionError("docs/isaaclab.md: no ```python block after the sketch marker")
    return match.group(1)


def test_the_sketch_is_in_the_doc() -> None:
    """Runs everywhere: the marked block exists and calls install() before anything of Isaac Lab is imported."""
    code = sketch()
    assert code.index("frameview.isaaclab.install()") < code.index("import isaaclab")


def test_install_sketch_runs_verbatim(tmp_path: Path) -> None:
    """Four envs, env_0 alone on the stage: four mounts through Isaac Lab's FrameView(...), a frameview Newton view."""
    pytest.importorskip("isaaclab.sim.views", reason="Isaac Lab 3 is not installed")
    pytest.importorskip("isaaclab_newton.physics", reason="Isaac Lab's Newton physics is not installed")
    script = tmp_path / "isaaclab_install_sketch.py"
    script.write_text(sketch())
    run = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False
    )
    assert run.returncode == 0, f"stdout:\n{run.stdout[-4000:]}\nstderr:\n{run.stderr[-4000:]}"
    assert "4 NewtonFrameView torch.Size([4, 3]) torch.Size([4, 4])" in run.stdout, run.stdout[-4000:]

# SPDX-License-Identifier: Apache-2.0
"""The guide's runnable blocks run as written: docs/physics.md's first example, in a fresh interpreter."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"


def marked_block(page: str, marker: str) -> str:
    """The first ```python block after ``marker`` in ``docs/<page>``."""
    text = (DOCS / page).read_text()
    assert marker in text, f"docs/{page} lost the marker {marker!r}"
    match = re.search(r"```python\n(.*?)```", text[text.index(marker) :], flags=re.DOTALL)
    assert match is not None, f"docs/{page}: no ```python block after the marker"
    return match.group(1)


def test_physics_example_runs(tmp_path: Path) -> None:
    """docs/physics.md's example defines every name it uses and reads joint states, velocities and link poses."""
    pytest.importorskip("newton", reason="the example builds a Newton model: install frameview[newton]")
    script = tmp_path / "physics_example.py"
    marker = "<!-- physics-example: tests/test_docs_examples.py runs this block -->"
    script.write_text(marked_block("physics.md", marker))
    run = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, f"stdout:\n{run.stdout}\nstderr:\n{run.stderr}"
    assert "('hinge',) (16, 1) ('base', 'arm') (16, 2)" in run.stdout, run.stdout

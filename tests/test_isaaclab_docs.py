# SPDX-License-Identifier: Apache-2.0
"""docs/isaaclab.md's writer-scope example runs as written, in a fresh interpreter, and prints what the doc says."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "isaaclab.md"
MARKER = "<!-- isaaclab-example: tests/test_isaaclab_docs.py runs this block -->"


def example_code() -> str:
    """The first ```python block after the marker in docs/isaaclab.md."""
    text = DOC.read_text()
    if MARKER not in text:
        raise AssertionError(f"docs/isaaclab.md lost the example marker {MARKER!r}")
    match = re.search(r"```python\n(.*?)```", text[text.index(MARKER) :], flags=re.DOTALL)
    if match is None:
        raise AssertionError("docs/isaaclab.md: no ```python block after the example marker")
    return match.group(1)


def test_writer_scope_example_runs(tmp_path: Path) -> None:
    """The example writes env 1's world pose and scale in one scope; env 0 keeps its pose; local = world - parent."""
    pytest.importorskip("pxr", reason="the example builds a pxr stage: install frameview[usd]")
    script = tmp_path / "isaaclab_example.py"
    script.write_text(example_code())
    run = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False
    )
    assert run.returncode == 0, f"stdout:\n{run.stdout}\nstderr:\n{run.stderr}"
    expected = (
        "world [[1.0, 2.0, 3.0]] local [[0.1, 0.0, 0.05], [1.0, 2.0, 2.0]] scales [[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]]"
    )
    assert expected in run.stdout, run.stdout

# SPDX-License-Identifier: Apache-2.0
"""The README's quickstart runs as written: its code block, extracted from README.md, runs in a fresh interpreter."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
MARKER = "<!-- quickstart: tests/test_readme_quickstart.py runs this block -->"


def quickstart_code() -> str:
    """The first ```python block after the quickstart marker in README.md."""
    text = README.read_text()
    if MARKER not in text:
        raise AssertionError(f"README.md lost the quickstart marker {MARKER!r}")
    match = re.search(r"```python\n(.*?)```", text[text.index(MARKER) :], flags=re.DOTALL)
    if match is None:
        raise AssertionError("README.md: no ```python block after the quickstart marker")
    return match.group(1)


def test_quickstart_is_near_the_top() -> None:
    """The quickstart is the README's first section and runs on the CPU (no GPU needed)."""
    sections = re.findall(r"^## (.+)$", README.read_text(), flags=re.MULTILINE)
    assert sections[0] == "Quickstart", sections
    assert '"device": "cpu"' in quickstart_code()


def test_quickstart_runs(tmp_path: Path) -> None:
    """The quickstart block runs on the CPU in a fresh interpreter and prints both backends' poses."""
    pytest.importorskip("pxr", reason="the quickstart builds a pxr stage: install frameview[usd]")
    script = tmp_path / "quickstart.py"
    script.write_text(quickstart_code())
    run = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False
    )
    assert run.returncode == 0, f"stdout:\n{run.stdout}\nstderr:\n{run.stderr}"
    assert "fabric [[0.0, 5.0, 1.5], [1.0, 5.0, 1.5]]" in run.stdout, run.stdout
    assert "usd [[0.0, 5.0, 1.5], [1.0, 5.0, 1.5]]" in run.stdout, run.stdout
    assert run.stdout.rstrip().endswith("ok: the fabric and usd backends read the same camera poses"), run.stdout


def test_quickstart_file_is_the_readme_block() -> None:
    """examples/quickstart.py (what the README tells users to run) holds the README's quickstart block verbatim."""
    shipped = (README.parent / "examples" / "quickstart.py").read_text()
    assert quickstart_code() in shipped


def test_env_config_yaml_agrees() -> None:
    """The frame_view section shown in README.md and docs/env-config.md is examples/env_config.yaml's, line for line."""
    example = (README.parent / "examples" / "env_config.yaml").read_text()
    section = example[example.index("frame_view:") :].strip()
    for page in (README, README.parent / "docs" / "env-config.md"):
        blocks = re.findall(r"```yaml\n(.*?)```", page.read_text(), flags=re.DOTALL)
        assert [b.strip() for b in blocks if b.startswith("frame_view:")] == [section], page.name

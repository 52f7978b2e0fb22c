# SPDX-License-Identifier: Apache-2.0
"""Changelog fragments are named as towncrier (configured in pyproject.toml) reads them: ``<topic>.<type>.md``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TYPES = {"added", "changed", "fixed", "removed"}


def _towncrier_config() -> dict:
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["tool"]["towncrier"]


def test_towncrier_config_names_the_fragment_types() -> None:
    cfg = _towncrier_config()
    assert cfg["directory"] == "CHANGELOG.d"
    assert cfg["filename"] == "CHANGELOG.md"
    assert {t["directory"] for t in cfg["type"]} == TYPES
    assert cfg["start_string"].strip() in (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")


def test_every_fragment_is_topic_type_md() -> None:
    pattern = re.compile(r"^[a-z0-9][a-z0-9-]*\.(" + "|".join(sorted(TYPES)) + r")\.md$")
    names = [p.name for p in (ROOT / "CHANGELOG.d").iterdir() if p.name != "README.md"]
    bad = [n for n in names if not pattern.match(n)]
    assert not bad, f"CHANGELOG.d fragments not named <topic>.<added|changed|fixed|removed>.md: {bad}"

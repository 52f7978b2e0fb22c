# SPDX-License-Identifier: Apache-2.0
"""examples/reset_env.py closes its views on every path: a failing second view does not leak the first."""

from __future__ import annotations

import importlib.util
import logging
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import frameview as fv

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "reset_env.py"


@pytest.fixture(scope="module")
def example() -> ModuleType:
    """The example script, imported as a module under its own name."""
    spec = importlib.util.spec_from_file_location("reset_env_example_close", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    built: list[Any] = []
    real = fv.make_frame_view

    def make(cfg: Any, stage: Any) -> Any:
        view = real(cfg, stage)
        built.append(view)
        return view

    monkeypatch.setattr(fv, "make_frame_view", make)
    return built


@pytest.mark.parametrize("backend", ["fabric", "usd"])
def test_first_view_is_closed_when_the_second_fails(
    example: ModuleType, backend: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The robots view is closed (no garbage-collection warning) when building the cameras view raises."""
    built = _spy(monkeypatch)
    config = {
        "env": {"num_envs": 4, "steps": 1},
        "frame_view": {"backend": backend, "device": "cpu", "prim_path": "/World/envs/env_.*/Robot/NoSuchCamera"},
    }
    with caplog.at_level(logging.WARNING, logger="frameview"), pytest.raises((KeyError, ValueError)):
        example.run(config)
    assert len(built) == 1, "only the robots view was built"
    assert built[0].is_closed
    assert not [r for r in caplog.records if "close" in r.getMessage().lower()], caplog.text


def test_views_are_closed_after_a_normal_run(example: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    """After a run both views are closed."""
    built = _spy(monkeypatch)
    example.run({"env": {"num_envs": 4, "steps": 2}, "frame_view": {"prim_path": "/World/envs/env_.*/Robot/Camera"}})
    assert len(built) == 2
    assert all(v.is_closed for v in built)

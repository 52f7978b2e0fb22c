# SPDX-License-Identifier: Apache-2.0
"""Fixtures of the reliability suite: every test runs against both pxr backends of tests/backends.py (``usd``,
``fabric``) and every device."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from helpers import build_env_stage
from pxr import Usd

import frameview as fv

from ._support import BACKENDS, N


@pytest.fixture(params=list(BACKENDS))
def backend(request: pytest.FixtureRequest) -> str:
    """``"usd"`` or ``"fabric"``."""
    return request.param


@pytest.fixture
def make_view(backend: str, device: str) -> Iterator[Callable[..., fv.BaseFrameView]]:
    """``make_view(prim_path, stage)``: a view of the backend and device under test, closed at teardown."""
    views: list[fv.BaseFrameView] = []

    def factory(prim_path: str | Sequence[str], stage: Any) -> fv.BaseFrameView:
        view = BACKENDS[backend](prim_path, stage, device)
        views.append(view)
        return view

    yield factory
    for view in views:
        view.close()


@pytest.fixture
def stage() -> Usd.Stage:
    """A fresh 8-env stage (robots with non-uniform scale, cameras below them)."""
    return build_env_stage(N, seed=21)

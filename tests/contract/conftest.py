# SPDX-License-Identifier: Apache-2.0
"""Backend factories for the contract suite.

The backends are those of the one registry, tests/backends.py (:data:`backends.BACKENDS`): adding one there is one
entry, a factory ``(prim_path, stage, device) -> view`` that calls ``pytest.skip`` with a reason when it cannot run
here. Every contract test then runs against it, on every device of the ``device`` fixture (``cpu``, and ``cuda:0``
when present).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from backends import BACKENDS, ViewFactory, real_usdrt

import frameview as fv


@pytest.fixture(params=[pytest.param(name, id=name) for name in BACKENDS])
def backend(request: pytest.FixtureRequest) -> str:
    """Name of the backend under test (a key of :data:`BACKENDS`)."""
    return request.param


@pytest.fixture
def usdrt_module(backend: str, device: str) -> Iterator[Any]:
    """For the usdrt backend outside Kit: the usdrt stand-in in ``sys.modules`` for the test and its teardown
    (yields its runtime); ``None`` for other backends and on Kit's real usdrt."""
    if backend != "usdrt" or real_usdrt():
        yield None
        return
    from fakes.usdrt_standin import installed

    with installed(device, shuffle_seed=0) as runtime:
        yield runtime


@pytest.fixture
def make_view(backend: str, device: str, usdrt_module: Any) -> Iterator[ViewFactory]:
    """``make_view(prim_path, stage, device=<the device parameter>)``: a view of the backend under test.

    Every view made is closed at teardown.
    """
    views: list[fv.BaseFrameView] = []

    def factory(prim_path: str | Sequence[str], stage: Any, device: str = device) -> fv.BaseFrameView:
        view = BACKENDS[backend](prim_path, stage, device)
        views.append(view)
        return view

    yield factory
    for view in views:
        view.close()

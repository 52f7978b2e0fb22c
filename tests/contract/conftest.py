# SPDX-License-Identifier: Apache-2.0
"""Backend factories for the contract suite.

Adding a backend is one entry in :data:`BACKENDS`: a factory ``(prim_path, stage, device) -> view`` that calls
``pytest.skip`` with a reason when the backend cannot run here. Every contract test then runs against it, on every
device of the ``device`` fixture (``cpu``, and ``cuda:0`` when present).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

import frameview as fv

ViewFactory = Callable[..., fv.BaseFrameView]


def make_usd_view(prim_path: str | Sequence[str], stage: Any, device: str) -> fv.BaseFrameView:
    """The pxr reference backend."""
    return fv.UsdFrameView(prim_path, stage=stage, device=device)


def make_fabric_view(prim_path: str | Sequence[str], stage: Any, device: str) -> fv.BaseFrameView:
    """The Fabric backend on the embedded Fabric model (what a pxr stage gets outside Kit)."""
    return fv.FabricFrameView(prim_path, stage=stage, device=device)


def make_ovstage_view(prim_path: str | Sequence[str], stage: Any, device: str) -> fv.BaseFrameView:
    """The Fabric backend over real Fabric (ovstage): the pxr stage is copied into ovstage once per stage."""
    from ovstage_helpers import OVSTAGE_SKIP_REASON, ovstage_for

    if OVSTAGE_SKIP_REASON:
        pytest.skip(OVSTAGE_SKIP_REASON)
    return fv.FabricFrameView(prim_path, stage=ovstage_for(stage), device=device)


def _real_usdrt() -> bool:
    """Whether the usdrt backend runs on Kit's real usdrt (FRAMEVIEW_TEST_PROVIDER=usdrt in Isaac Sim's Python)."""
    return os.environ.get("FRAMEVIEW_TEST_PROVIDER") == "usdrt"


def make_usdrt_view(prim_path: str | Sequence[str], stage: Any, device: str) -> fv.BaseFrameView:
    """The Fabric backend through the usdrt provider: on Kit's Fabric inside Isaac Sim's Python with
    FRAMEVIEW_TEST_PROVIDER=usdrt, else on the CI stand-in for usdrt (tests/fakes/usdrt_standin.py, installed by the
    :func:`usdrt_module` fixture)."""
    if _real_usdrt():
        pytest.importorskip("usdrt", reason="FRAMEVIEW_TEST_PROVIDER=usdrt, but usdrt is not importable (not in Kit?)")
    return fv.FabricFrameView(prim_path, stage=stage, device=device, fabric_provider="usdrt")


def make_newton_view(prim_path: str | Sequence[str], stage: Any, device: str) -> fv.BaseFrameView:
    """The Newton backend: the stage's env prims become bodies of a tiny Newton model (one per stage), the viewed
    prims ride on them (tests/newton_helpers.py)."""
    from newton_helpers import contract_newton_view

    return contract_newton_view(prim_path, stage, device)


BACKENDS: dict[str, Callable[[str | Sequence[str], Any, str], fv.BaseFrameView]] = {
    "usd": make_usd_view,
    "fabric": make_fabric_view,
    "ovstage": make_ovstage_view,
    "usdrt": make_usdrt_view,
    "newton": make_newton_view,
}


@pytest.fixture(params=[pytest.param(name, id=name) for name in BACKENDS])
def backend(request: pytest.FixtureRequest) -> str:
    """Name of the backend under test (a key of :data:`BACKENDS`)."""
    return request.param


@pytest.fixture
def usdrt_module(backend: str, device: str) -> Iterator[Any]:
    """For the usdrt backend outside Kit: the usdrt stand-in in ``sys.modules`` for the test and its teardown
    (yields its runtime); ``None`` for other backends and on Kit's real usdrt."""
    if backend != "usdrt" or _real_usdrt():
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

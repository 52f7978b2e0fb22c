# SPDX-License-Identifier: Apache-2.0
"""The one registry of test backends: ``name -> factory(prim_path, stage, device) -> view``.

The contract suite (tests/contract) runs every entry of :data:`BACKENDS`; the reliability suite (tests/reliability)
runs :data:`PXR_BACKENDS`, the two that need nothing but pxr. Adding a backend is one entry in :data:`BACKENDS`: a
factory that calls ``pytest.skip`` with a reason when the backend cannot run here.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
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


def real_usdrt() -> bool:
    """Whether the usdrt backend runs on Kit's real usdrt (FRAMEVIEW_TEST_PROVIDER=usdrt in Isaac Sim's Python)."""
    return os.environ.get("FRAMEVIEW_TEST_PROVIDER") == "usdrt"


def make_usdrt_view(prim_path: str | Sequence[str], stage: Any, device: str) -> fv.BaseFrameView:
    """The Fabric backend through the usdrt provider: on Kit's Fabric inside Isaac Sim's Python with
    FRAMEVIEW_TEST_PROVIDER=usdrt, else on the CI stand-in for usdrt (tests/fakes/usdrt_standin.py, installed by the
    contract suite's ``usdrt_module`` fixture)."""
    if real_usdrt():
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
"""Every backend, in parametrisation order (the names are the test ids)."""

PXR_BACKENDS: dict[str, Callable[[str | Sequence[str], Any, str], fv.BaseFrameView]] = {
    name: BACKENDS[name] for name in ("usd", "fabric")
}
"""The backends that run on a plain pxr stage with no optional package and no stand-in (the reliability suite)."""

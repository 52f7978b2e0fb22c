# SPDX-License-Identifier: Apache-2.0
"""`python -m frameview` names the pxr provider in use and says when two distributions install pxr, and reports
the ovstage version the ovstage provider would use."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata

import pytest

from frameview import __main__ as cli


def test_names_the_pxr_distribution() -> None:
    """The pxr line names the distribution that installed pxr here, as importlib.metadata sees it."""
    pytest.importorskip("pxr.Usd")
    owners = metadata.packages_distributions().get("pxr", [])
    out = subprocess.run([sys.executable, "-m", "frameview"], capture_output=True, text=True, check=True).stdout
    line = next(x for x in out.splitlines() if x.startswith("pxr: "))
    for dist in owners:
        assert f"{dist} {metadata.version(dist)}" in line
    assert "problem" not in out or len(owners) > 1


def test_two_pxr_distributions_are_a_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    """usd-core beside usd-exchange is reported as a problem naming both and how to keep one."""
    monkeypatch.setattr(cli.metadata, "packages_distributions", lambda: {"pxr": ["usd-exchange", "usd-core"]})
    monkeypatch.setattr(cli, "_version", lambda dist: {"usd-core": "26.11", "usd-exchange": "3.0.1"}.get(dist))
    provider, problem = cli.pxr_provider()
    assert provider == "usd-core 26.11, usd-exchange 3.0.1"
    assert problem is not None
    assert "2 distributions install pxr" in problem
    assert "pip uninstall usd-core usd-exchange" in problem


def test_one_pxr_distribution_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """usd-exchange alone is Isaac Lab 3's pxr, with the USD version pxr reports."""
    usd = pytest.importorskip("pxr.Usd")
    monkeypatch.setattr(cli.metadata, "packages_distributions", lambda: {"pxr": ["usd-exchange"]})
    monkeypatch.setattr(cli, "_version", lambda dist: "3.0.1" if dist == "usd-exchange" else None)
    provider, problem = cli.pxr_provider()
    assert problem is None
    assert provider.startswith("usd-exchange 3.0.1: OpenUSD Exchange's pxr (Isaac Lab 3's)")
    assert provider.endswith("USD " + ".".join(map(str, usd.GetVersion())))


@pytest.mark.parametrize(("installed", "refused"), [("0.2.1.385922", False), ("0.3.0.1791986420", False),
                                                    ("0.2.0.377349", True), (None, False)])  # fmt: skip
def test_ovstage_version_is_judged(monkeypatch: pytest.MonkeyPatch, installed: str | None, refused: bool) -> None:
    """ovstage 0.2.1 and 0.3 are supported; 0.2.0 is reported as refused with the version needed."""
    monkeypatch.setattr(cli, "_version", lambda dist: installed if dist == "ovstage" else None)
    problem = cli._ovstage_problem()
    assert (problem is not None) == refused
    if refused:
        assert "needs ovstage >= 0.2.1, found 0.2.0" in problem


def test_newton_backend_is_reported_with_what_it_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The built-in newton backend is reported as such: usable, or unusable with the extra that brings it (never as
    a plug-in)."""
    real = cli._try_import
    monkeypatch.setattr(cli, "_try_import", lambda m: "ModuleNotFoundError: No module named 'newton'"
                        if m == "newton" else real(m))  # fmt: skip
    line = next(x for x in cli.report().splitlines() if x.strip().startswith("newton "))
    assert "not usable here: needs newton" in line and "pip install -e '.[newton,usd]'" in line
    assert "plug-in" not in cli.report()


def test_make_frame_view_newton_without_newton_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """``backend: newton`` without newton installed raises the ImportError that names the extra, not a complaint
    about model= and state=."""
    import frameview as fv

    monkeypatch.setitem(sys.modules, "frameview.newton", None)  # as if newton could not be imported
    cfg = fv.FrameViewCfg.from_dict({"prim_path": "/World/Cam", "backend": "newton", "device": "cpu"})
    with pytest.raises(ImportError):
        fv.make_frame_view(cfg, object())


def test_available_backends_says_which_are_usable(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without newton, ``available_backends(usable=True)`` leaves newton out (it stays registered), and the unknown
    backend error says newton is not usable here and which extra brings it."""
    import frameview as fv

    monkeypatch.setitem(sys.modules, "newton", None)  # as if newton were not installed
    assert "newton" in fv.available_backends()
    assert "newton" not in fv.available_backends(usable=True)
    assert "fabric" in fv.available_backends(usable=True)
    with pytest.raises(ValueError, match=r"not usable here: newton: newton is not installed: install the newton extra"):
        fv.FrameViewCfg(prim_path="/World/Cam", backend="physx").validate()


def test_every_backend_and_provider_is_reported_usable_or_not() -> None:
    """Each registered backend and each provider has one line that says usable or not usable here."""
    import frameview as fv

    text = cli.report()
    body = text.split("backends (FrameViewCfg.backend):")[1].split("devices (")[0]
    for name in [*fv.available_backends(), "memory", "ovstage", "usdrt"]:
        line = next(x for x in body.splitlines() if x.strip().startswith(f"{name} "))
        assert "usable" in line, line
    assert text.splitlines()[-1].startswith("kernels: ")  # compiled on first use, or in Warp's cache


def test_physics_views_are_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    """The report has a section for PhysicsViewCfg.backend naming newton and ovphysx, usable or not with the reason
    and what to install, and ovphysx in its package line."""
    real = cli._try_import
    missing = "ImportError: the ovphysx physics views need ovphysx: install with pip install --no-deps ovphysx"
    monkeypatch.setattr(cli, "_try_import", lambda m: missing if m == "frameview.ovphysx.bodies" else real(m))
    text = cli.report()
    lines = text.splitlines()
    assert "physics views (PhysicsViewCfg.backend):" in lines
    assert "ovphysx" in lines[1] and ("ovphysx: not installed" in lines[1] or "ovphysx 0" in lines[1])
    at = next(k for k, x in enumerate(lines) if x.strip().startswith("ovphysx "))
    assert lines[at].endswith(f"not usable here: {missing}")
    assert "to get it: install frameview[ovstage] and ovphysx" in lines[at + 1]
    newton = next(x for x in lines[lines.index("physics views (PhysicsViewCfg.backend):"):] if "newton " in x)
    assert "newton.Model" in newton


def test_kernel_line_follows_the_cache(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """The kernels line says they compile on first use only while Warp's cache holds none of frameview's."""
    import warp as wp

    monkeypatch.setattr(wp.config, "kernel_cache_dir", str(tmp_path))
    assert cli.kernel_cache_line().startswith("kernels: Warp compiles frameview's on first use")
    (tmp_path / "wp_frameview.kernels.transforms_0123abc").mkdir()
    assert cli.kernel_cache_line().startswith(f"kernels: Warp's cache ({tmp_path}) holds frameview's compiled kernels")

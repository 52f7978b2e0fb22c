# SPDX-License-Identifier: Apache-2.0
"""Which ovstage versions the ovstage provider takes: 0.2.1 (Isaac Lab 3.0's pin) and later; older ones are refused
with an ImportError that names the version needed."""

from __future__ import annotations

import pytest
from ovstage_helpers import requires_ovstage

from frameview.fabric.providers import OVSTAGE_MIN_VERSION, ovstage_version_problem


@pytest.mark.parametrize("version", [(0, 2, 1), (0, 3, 0), (1, 0, 0, 7)])
def test_supported_versions(version: tuple[int, ...]) -> None:
    """0.2.1 and every later version are accepted."""
    assert ovstage_version_problem(version) is None


@pytest.mark.parametrize("version", [(0, 1, 1), (0, 2, 0)])
def test_older_versions_are_refused(version: tuple[int, ...]) -> None:
    """Versions before 0.2.1 get a message naming what was found and the pip command."""
    problem = ovstage_version_problem(version)
    assert problem is not None
    assert ".".join(map(str, version)) in problem
    assert "pip install 'ovstage>=0.2.1'" in problem
    assert OVSTAGE_MIN_VERSION == (0, 2, 1)


def test_unknown_version_is_refused() -> None:
    """An ovstage that does not report its version is not guessed at."""
    assert "ovstage >= 0.2.1" in (ovstage_version_problem(None) or "")


@requires_ovstage
def test_attach_refuses_an_old_ovstage(monkeypatch: pytest.MonkeyPatch) -> None:
    """attach() raises ImportError (naming ovstage) before touching a stage when the library is too old."""
    import frameview.fabric.providers.ovstage.fabric_stage as fv_ovstage

    monkeypatch.setattr(fv_ovstage, "_library_version", lambda: (0, 2, 0))
    with pytest.raises(ImportError, match=r"needs ovstage >= 0\.2\.1, found 0\.2\.0") as info:
        fv_ovstage.attach(object(), "cpu")
    assert info.value.name == "ovstage"

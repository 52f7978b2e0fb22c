# SPDX-License-Identifier: Apache-2.0
"""Importing frameview stays light: no optional dependency is imported, every public name resolves."""

from __future__ import annotations

import subprocess
import sys

import frameview as fv


def test_import_does_not_load_optional_dependencies() -> None:
    """`import frameview` (and touching the config API) imports neither torch, ovstage, usdrt nor matplotlib."""
    code = (
        "import sys, frameview as fv; fv.FrameViewCfg; fv.available_backends(); "
        "print(','.join(m for m in ('torch', 'ovstage', 'usdrt', 'matplotlib') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_every_public_name_resolves() -> None:
    """Every name in frameview.__all__ is importable from the package (one import path per name)."""
    for name in fv.__all__:
        assert getattr(fv, name) is not None, name


def test_unknown_attribute_raises() -> None:
    """A missing public name is an AttributeError, not a silent None."""
    try:
        fv.NoSuchThing  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:
        raise AssertionError("expected AttributeError")


def test_each_view_is_one_class_over_the_contract() -> None:
    """A backend view composes its parts (``_args``, ``_data``, ``_writer``, ...) instead of mixing them in: its
    method resolution order is the view, BaseFrameView, ABC and object."""
    import contextlib

    import frameview as fv

    classes = [fv.UsdFrameView, fv.FabricFrameView]
    with contextlib.suppress(ImportError):  # newton is an extra
        classes.append(fv.NewtonFrameView)
    for cls in classes:
        assert [c.__name__ for c in cls.__mro__] == [cls.__name__, "BaseFrameView", "ABC", "object"]

# SPDX-License-Identifier: Apache-2.0
"""The examples' command lines keep the README's promises: ``--verbose`` and ``--quiet`` everywhere, a help text (with
its default) for every option, a ``--seed`` where the run is random, and a description that reads as a sentence."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
WITH_CLI = ("reset_env", "newton_cameras", "newton_robots", "ovstage_cameras")


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"{name}_cli_test", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look modules up by name
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", WITH_CLI)
def test_every_option_is_explained(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each option has a help text, options with a default show it, --verbose, --quiet and --seed exist, and the
    description does not end in a reStructuredText ``::``."""
    parsers: list[argparse.ArgumentParser] = []

    def capture(self: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        parsers.append(self)
        raise SystemExit(0)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", capture)
    with pytest.raises(SystemExit):
        load(name).main([])
    (parser,) = parsers
    options = {opt: action for action in parser._actions for opt in action.option_strings}
    for flag in ("--verbose", "--quiet", "--seed"):
        assert flag in options, f"{name}: no {flag}"
    for flag, action in options.items():
        assert action.help, f"{name} {flag}: no help text"
        if action.default not in (None, False, [], argparse.SUPPRESS) and flag.startswith("--"):
            assert "%(default)s" in action.help or str(action.default) in action.help, f"{name} {flag}: no default"
    description = parser.description or ""
    assert description and not description.rstrip().endswith(":"), f"{name}: description {description!r}"

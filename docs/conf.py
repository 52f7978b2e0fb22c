# SPDX-License-Identifier: Apache-2.0
"""Sphinx configuration: the API reference from the docstrings, and the Markdown pages beside it.

Build (what CI runs, warnings are errors): sphinx-build -W --keep-going -b html docs docs/_build/html
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))  # the checkout's frameview, installed or not

import frameview  # noqa: E402

project = "frameview"
copyright = "frameview contributors"
release = version = frameview.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "myst_parser",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]

# Google-style docstrings; types come from the annotations
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
napoleon_use_ivar = True  # dataclass fields: one description each (the docstring's Attributes section)
autodoc_typehints = "description"
autodoc_typehints_description_target = "documented_params"
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "undoc-members": False, "show-inheritance": True}
# optional packages the reference names without needing them installed
autodoc_mock_imports = ["usdrt", "ovstage", "ovphysx", "isaaclab", "torch"]

myst_heading_anchors = 3


html_theme = "furo"
html_title = f"frameview {release}"


# The Markdown pages link to files of the repository outside docs/ (perf/RESULTS.md, examples/*.py) by relative path,
# which works on GitHub and in a clone. Sphinx would take a link to a .md file for a page of its own: mark those links
# as files (MyST's path: scheme) so that links between the pages are still checked and a broken one fails the build.
_OUTSIDE_MD = re.compile(r"\]\((\.\./[^)#\s]+\.md)([)#])")


def _repository_links(app, docname, source):
    source[0] = _OUTSIDE_MD.sub(r"](path:\1\2", source[0])


def setup(app):
    app.connect("source-read", _repository_links)

# SPDX-License-Identifier: Apache-2.0
"""Sphinx configuration: the API reference from the docstrings, and the Markdown pages beside it.

Build (what CI runs, warnings are errors): sphinx-build -W --keep-going -b html docs docs/_build/html
"""

from __future__ import annotations

import abc
import inspect
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

# the argument types keep their names in signatures (each links to its entry in the reference) instead of being
# expanded into their unions
autodoc_type_aliases = {
    name: f"frameview.{name}" for name in ("ArrayLike", "IndicesLike", "MaskLike", "BoolsLike", "TensorLike")
}


def _keep_aliases_in_unions() -> None:
    """Sphinx renders an alias kept by ``autodoc_type_aliases`` inside a union (``ArrayLike | None``) as its repr,
    ``TypeAliasForwardRef('frameview.ArrayLike')``: render it as the alias (a link) there too. Versions without the
    class leave the annotation as its string, which reads as well."""
    try:
        import sphinx.util.typing as sphinx_typing
        from sphinx.util.inspect import TypeAliasForwardRef
    except ImportError:
        return
    stringify, restify = sphinx_typing.stringify_annotation, sphinx_typing.restify

    def stringify_alias(annotation, /, *args, **kwargs):
        if isinstance(annotation, TypeAliasForwardRef):
            return annotation.name
        return stringify(annotation, *args, **kwargs)

    def restify_alias(cls, *args, **kwargs):
        if isinstance(cls, TypeAliasForwardRef):
            return f":py:data:`~{cls.name}`"
        return restify(cls, *args, **kwargs)

    sphinx_typing.stringify_annotation, sphinx_typing.restify = stringify_alias, restify_alias


_keep_aliases_in_unions()


html_theme = "furo"
html_title = f"frameview {release}"
html_static_path = ["_static"]
html_css_files = ["frameview.css"]  # tables and code that fit the text column


# The Markdown pages link to files of the repository outside docs/ (perf/RESULTS.md, examples/*.py) by relative path,
# which works on GitHub and in a clone. Sphinx would take a link to a .md file for a page of its own: mark those links
# as files (MyST's path: scheme) so that links between the pages are still checked and a broken one fails the build.
_OUTSIDE_MD = re.compile(r"\]\((\.\./[^)#\s]+\.md)([)#])")


def _repository_links(app, docname, source):
    source[0] = _OUTSIDE_MD.sub(r"](path:\1\2", source[0])


def _public_bases(app, name, obj, options, bases):
    """Show only the bases a user can name (``frameview.*`` exports and non-frameview classes): a backend's private
    mixin (``_NewtonSource``, ``OvPhysxSource``) is replaced by the public bases behind it."""
    shown: list = []
    for base in bases:
        queue = [base]
        while queue:
            b = queue.pop(0)
            public = not b.__module__.startswith("frameview") or getattr(frameview, b.__name__, None) is b
            if public:
                if b not in shown:
                    shown.append(b)
            else:
                queue.extend(b.__bases__)
    # a base another shown base already derives from says nothing more (ABC behind RigidBodyView), nor does ABC
    shown = [b for b in shown if b is not abc.ABC and not any(o is not b and issubclass(o, b) for o in shown)]
    bases[:] = [b for b in shown if b is not object] or [object]


def _no_abstract_signature(app, what, name, obj, options, signature, return_annotation):
    """Contract classes (abstract: users get instances from a backend or a factory, never call them) and protocols
    (types to check against) show no constructor signature."""
    if what == "class" and (inspect.isabstract(obj) or getattr(obj, "_is_protocol", False)):
        return "", None
    return None


def setup(app):
    app.connect("source-read", _repository_links)
    app.connect("autodoc-process-bases", _public_bases)
    app.connect("autodoc-process-signature", _no_abstract_signature)

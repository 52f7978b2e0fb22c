# SPDX-License-Identifier: Apache-2.0
"""Prim path patterns, resolved level by level.

A *pattern* is an absolute prim path whose components may be regular expressions, such as
``/World/envs/env_.*/Robot/Camera``. A component is a regular expression only when it contains a regex
metacharacter (one of ``.^$*+?{}[]\\|()``); otherwise it is a literal prim name. Regex components are
full-matched (:func:`re.fullmatch`) against the names of the children of each prim matched so far, so
``env_.*`` matches ``env_0`` and ``env_12`` but ``env_`` alone is a literal name. ``.`` and ``..`` are regex
components, not relative-path steps.

The pattern is split into components at every ``/`` except one inside a regex character class, so
``/World/Parent_[^/]*/Child`` has the three components ``World``, ``Parent_[^/]*`` and ``Child`` (Isaac Lab writes
patterns this way). A class follows Python's :mod:`re` rules: it opens at an unescaped ``[``, a ``]`` right after
the ``[`` or ``[^`` is a member, ``\\]`` is an escaped member, and it closes at the next unescaped ``]``. A ``/``
escaped outside a class (``\\/``) does not split either, but it can never match: prim names contain no ``/``. A
``[`` that is never closed opens no class, and its component is reported as an invalid regular expression.

Resolution never visits the whole stage: a literal component is one direct child lookup per current match
(consecutive literal components are looked up together as one path), and a regex component lists only the
children of the current matches. The cost is therefore O(matched prims + children of the prims that sit above
a regex component), independent of the rest of the stage.

Which prims are visible: those that ``Usd.Prim.GetChildren()`` and ``Usd.Stage.Traverse()`` visit with the
default predicate -- active, defined, loaded, non-abstract prims -- and not instance proxies (descendants of
instanceable prims). A pattern never matches an inactive prim, an ``over`` without a ``def``, a ``class`` or
anything below one, an unloaded payload, or a prim inside an instance; a literal path naming such a prim is a
``ValueError`` that names it. The result for one pattern is the same list, in the same order, as filtering
``stage.Traverse()`` by matching each path component. This is deliberate: those are the prims a stage presents
as scene content, and a view over an inactive prim or a ``class`` would read poses of things that are not in the
scene. A prim inside an instanceable asset (an instance proxy) is out of reach: make that asset
non-instanceable, or select a prim above the instance.

Any stage that is not a pxr ``Usd.Stage`` can take part by implementing :class:`PrimTree`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

__all__ = ["PrimTree", "resolve_prim_paths"]

logger = logging.getLogger(__name__)

# A component containing any of these characters is compiled as a regular expression.
_REGEX_METACHARACTERS = frozenset(".^$*+?{}[]\\|()")

_PLACEHOLDER = re.compile(r"\{[A-Za-z_][A-Za-z0-9_]*\}")
"""A ``{NAME}`` template placeholder (Isaac Lab's ``{ENV_REGEX_NS}``), never a regex quantifier such as ``{2}``."""

_GLOB_STAR = re.compile(r"(?<![.\]\)\\])\*")
"""A ``*`` that repeats neither ``.``, a class, a group nor an escape: as a glob wildcard would be written."""

_VISIBILITY_HINT = (
    "regex components must match whole prim names; only active, defined, loaded, non-abstract prims that are "
    "not instance proxies are considered"
)


@runtime_checkable
class PrimTree(Protocol):
    """The slice of a stage that :func:`resolve_prim_paths` needs.

    Paths are absolute prim path strings; the root is ``"/"``. Implementations must agree with each other:
    ``has_prim(path)`` is true exactly when ``path`` would be reached from the root by following
    ``child_names`` -- so a true ``has_prim`` implies that every ancestor is visible too. Both calls are expected
    to cost O(1) per prim or per listed child (a hash lookup and a children list), never a stage traversal.

    Example:
        >>> class DictTree:  # children by parent path, in authoring order
        ...     def __init__(self, children):
        ...         self.children = children
        ...
        ...     def child_names(self, path):
        ...         return self.children[path]
        ...
        ...     def has_prim(self, path):
        ...         return path in self.children
        >>> tree = DictTree({"/": ["World"], "/World": ["env_1", "env_0"], "/World/env_1": [], "/World/env_0": []})
        >>> isinstance(tree, PrimTree)
        True
        >>> resolve_prim_paths("/World/env_.*", tree)
        ['/World/env_1', '/World/env_0']
    """

    def child_names(self, path: str) -> list[str]:
        """Return the names of the visible children of the prim at ``path``, in authoring (depth-first) order.

        Args:
            path: An absolute path of a visible prim, or ``"/"`` for the root.

        Returns:
            The child names, in the order a depth-first traversal visits them.
        """
        ...

    def has_prim(self, path: str) -> bool:
        """Return whether a visible prim exists at ``path``.

        Args:
            path: An absolute prim path (never ``"/"``), made of valid prim names.

        Returns:
            True when the prim exists and is visible.
        """
        ...


class _UsdPrimTree:
    """:class:`PrimTree` over a pxr ``Usd.Stage`` with the default child predicate, instance proxies excluded."""

    def __init__(self, stage: Any) -> None:
        from pxr import Usd  # only for pxr stages: pxr is optional (frameview[usd]) and never needed at import

        self._get_prim = stage.GetPrimAtPath
        self._predicate = Usd.PrimDefaultPredicate
        # Instance proxies exist only below instanceable prims, which always come with prototypes: a stage with
        # none needs no per-prim IsInstanceProxy() call (about a third of a lookup's cost).
        self._has_instances = bool(stage.GetPrototypes())

    def child_names(self, path: str) -> list[str]:
        # GetChildrenNames applies the default predicate (active, defined, loaded, non-abstract) and, like
        # Traverse(), does not list the children of an instanceable prim.
        return list(self._get_prim(path).GetChildrenNames())

    def has_prim(self, path: str) -> bool:
        # GetPrimAtPath is a hash lookup. Inactive ancestors hide their descendants (invalid prim); "defined",
        # "loaded" and "abstract" are inherited, so the predicate on the prim itself covers its ancestors.
        # The default predicate accepts instance proxies when asked directly, so reject them explicitly.
        prim = self._get_prim(path)
        if not prim or not self._predicate(prim):
            return False
        return not (self._has_instances and prim.IsInstanceProxy())


def _as_prim_tree(stage: Any) -> PrimTree:
    if isinstance(stage, PrimTree):
        return stage
    try:
        from pxr import Usd
    except ImportError:  # no pxr (frameview[usd] not installed): the stage cannot be a pxr stage
        Usd = None
    if Usd is not None and isinstance(stage, Usd.Stage):
        return _UsdPrimTree(stage)
    raise TypeError(
        f"stage: expected a pxr Usd.Stage or an object implementing frameview.paths.PrimTree "
        f"(child_names(path) and has_prim(path)), got {type(stage).__name__}"
    )


def _entry_to_str(entry: Any, name: str) -> str:
    if isinstance(entry, str):
        return entry
    path_string = getattr(entry, "pathString", None)  # pxr Sdf.Path, without importing pxr
    if isinstance(path_string, str):
        return path_string
    raise TypeError(f"{name}: expected a str or Sdf.Path, got {type(entry).__name__}")


def _class_end(pattern: str, start: int) -> int:
    """Index just past the character class opened by the ``[`` at ``start``, or -1 when it is never closed.

    Python's :mod:`re` rules: an optional ``^``, then a ``]`` in first position is a member; ``\\`` escapes the
    next character; the class closes at the next ``]``.
    """
    i = start + 1
    if i < len(pattern) and pattern[i] == "^":
        i += 1
    if i < len(pattern) and pattern[i] == "]":
        i += 1
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            i += 2
        elif ch == "]":
            return i + 1
        else:
            i += 1
    return -1


def _split_components(pattern: str) -> list[str]:
    """Split ``pattern`` (without its leading ``/``) at every ``/`` that is neither escaped nor inside a
    character class: ``"World/Parent_[^/]*/Child"`` -> ``["World", "Parent_[^/]*", "Child"]``."""
    if "[" not in pattern and "\\" not in pattern:
        return pattern.split("/")
    components: list[str] = []
    start = i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "/":
            components.append(pattern[start:i])
            start = i = i + 1
        elif ch == "\\":
            i += 2
        elif ch == "[" and (end := _class_end(pattern, i)) != -1:
            i = end
        else:
            i += 1
    components.append(pattern[start:])
    return components


def _parse_pattern(pattern: str, name: str) -> tuple[tuple[str, re.Pattern[str] | None], ...]:
    """Validate ``pattern`` and split it into groups, each regex compiled once.

    Returns:
        The groups in order: ``(literal_suffix, None)`` for a run of consecutive literal components
        (``literal_suffix`` is ``"/A/B"``), ``(component, compiled)`` for a regex component.
    """
    placeholder = _PLACEHOLDER.search(pattern)
    if placeholder is not None:
        found = placeholder.group(0)
        how = "expand it (str.format) before building the view"
        if found == "{ENV_REGEX_NS}":
            expanded = pattern.replace(found, "/World/envs/env_.*").replace("//", "/")
            how = ("Isaac Lab expands it to '/World/envs/env_.*' when it builds the scene: expand it first, e.g. "
                   f"{expanded!r}")  # fmt: skip
        raise ValueError(f"{name}: {pattern!r} holds the unexpanded placeholder {found} (frameview takes prim paths as "
                         f"they are on the stage); {how}")  # fmt: skip
    if not pattern.startswith("/"):
        raise ValueError(
            f"{name}: expected an absolute prim path starting with '/', got {pattern!r}; "
            f"write it as '/{pattern}' if it is meant from the stage root"
        )
    components = _split_components(pattern[1:])
    if pattern == "/" or "" in components:
        raise ValueError(
            f"{name}: expected a prim path with no empty components (no '//', no trailing '/', not the root "
            f"'/'), got {pattern!r}"
        )
    if _REGEX_METACHARACTERS.isdisjoint(pattern) and all(map(str.isidentifier, components)):
        return ((pattern, None),)  # a plain prim path: one lookup
    groups: list[tuple[str, re.Pattern[str] | None]] = []
    literal_run: list[str] = []
    for level, component in enumerate(components):
        if _REGEX_METACHARACTERS.isdisjoint(component):
            if not component.isidentifier():  # same rule as USD prim names: XID_Start or '_', then XID_Continue
                raise ValueError(
                    f"{name}: component {level} {component!r} of {pattern!r} is neither a valid prim name "
                    f"(letters, digits and '_', not starting with a digit) nor a regular expression"
                )
            literal_run.append(component)
            continue
        try:
            compiled = re.compile(component)
        except re.error as exc:
            raise ValueError(
                f"{name}: component {level} {component!r} of {pattern!r} is not a valid regular expression "
                f"({exc}){_glob_hint(component)}; fix it, or escape the metacharacters"
            ) from None
        if literal_run:
            groups.append(("/" + "/".join(literal_run), None))
            literal_run = []
        groups.append((component, compiled))
    if literal_run:
        groups.append(("/" + "/".join(literal_run), None))
    return tuple(groups)


def _glob_hint(component: str) -> str:
    """For a component written as a glob (``env_*``): `` (... write 'env_.*')``, else ``""``."""
    if not _GLOB_STAR.search(component):
        return ""
    regex = _GLOB_STAR.sub(".*", component)
    return (f" ({component!r} reads as a glob, but components are regular expressions, where '*' repeats what comes "
            f"before it: write {regex!r})")  # fmt: skip


def _no_match_error(name: str, pattern: str, tree: PrimTree, matches: list[str], level: int, group: str) -> ValueError:
    """Build the error for a pattern whose group at ``level`` matched nothing below ``matches``."""
    components = _split_components(pattern[1:])
    if group.startswith("/"):  # a literal run: find the first of its names that no current match has
        names = group[1:].split("/")
        base, base_level = matches, level
        for depth in range(1, len(names)):
            deeper = [path for m in base if tree.has_prim(path := m + "/" + "/".join(names[:depth]))]
            if not deeper:
                break
            matches, level = deeper, base_level + depth
        missing = f"child named {components[level]!r}"
    else:
        missing = f"child whose name matches {components[level]!r}{_glob_hint(components[level])}"
    if level == 0:
        where = f"the stage root has no {missing}"
    elif len(matches) == 1:
        where = f"{matches[0]!r} has no {missing}"
    else:
        where = f"matched {len(matches)} prims up to {'/' + '/'.join(components[:level])!r}, none has a {missing}"
    return ValueError(f"{name} {pattern!r} matched no prim: {where} ({_VISIBILITY_HINT})")


def _resolve_pattern(pattern: str, tree: PrimTree, name: str) -> list[str]:
    """Resolve one pattern level by level; matches are in depth-first order."""
    groups = _parse_pattern(pattern, name)
    matches = [""]  # the root; a path is built as parent + "/" + name
    level = 0
    for group, compiled in groups:
        if compiled is None:
            # Literal run: one lookup per match. All matches share a depth, so order is kept.
            found = [path for m in matches if tree.has_prim(path := m + group)]
            width = group.count("/")
        else:
            fullmatch = compiled.fullmatch
            found = [m + "/" + child for m in matches for child in tree.child_names(m or "/") if fullmatch(child)]
            width = 1
        if not found:
            raise _no_match_error(name, pattern, tree, matches, level, group)
        matches = found
        level += width
    return matches


def resolve_prim_paths(prim_path: str | Sequence[str], stage: Any) -> list[str]:
    """Resolve a prim path, a pattern, or a list of them to the matching prim paths.

    Components of a path may be regular expressions (``/World/envs/env_.*/Robot/Camera``): see the module
    docstring for the rules. The pattern is resolved level by level, so the cost is O(matched prims), never
    O(stage).

    Example:
        >>> from pxr import Usd
        >>> stage = Usd.Stage.CreateInMemory()
        >>> for i in range(3):
        ...     _ = stage.DefinePrim(f"/World/envs/env_{i}/Camera")
        >>> resolve_prim_paths("/World/envs/env_.*/Camera", stage)
        ['/World/envs/env_0/Camera', '/World/envs/env_1/Camera', '/World/envs/env_2/Camera']

    Args:
        prim_path: An absolute prim path or pattern (``str`` or ``Sdf.Path``), or a sequence of them.
        stage: A pxr ``Usd.Stage``, or any object implementing :class:`PrimTree`.

    Returns:
        The matching prim paths. For one pattern: in the stage's depth-first (authoring) order. For a sequence:
        each entry's matches in turn, in the given order.

    Raises:
        TypeError: ``prim_path`` is not a str, ``Sdf.Path`` or a sequence of them, or ``stage`` is neither a
            ``Usd.Stage`` nor a :class:`PrimTree`.
        ValueError: A pattern is not absolute, has an empty component, a component that is neither a valid
            prim name nor a valid regular expression, or matches no prim (the message names the deepest level
            that still matched); the sequence is empty; or two entries match the same prim.
    """
    tree = _as_prim_tree(stage)
    if isinstance(prim_path, str) or isinstance(getattr(prim_path, "pathString", None), str):
        return _resolve_pattern(_entry_to_str(prim_path, "prim_path"), tree, "prim_path")
    if isinstance(prim_path, bytes) or not isinstance(prim_path, Iterable):
        raise TypeError(f"prim_path: expected a str, Sdf.Path or a sequence of them, got {type(prim_path).__name__}")
    entries = [_entry_to_str(entry, f"prim_path[{i}]") for i, entry in enumerate(prim_path)]
    if not entries:
        raise ValueError("prim_path: expected at least one prim path or pattern, got an empty sequence")
    result: list[str] = []
    first_entry: dict[str, int] = {}
    for i, entry in enumerate(entries):
        for path in _resolve_pattern(entry, tree, f"prim_path[{i}]"):
            previous = first_entry.setdefault(path, i)
            if previous != i:
                raise ValueError(
                    f"prim_path[{i}] {entry!r} matched {path!r}, which prim_path[{previous}] "
                    f"{entries[previous]!r} already matched; a list must name each prim once -- remove or narrow "
                    f"one of the entries"
                )
            result.append(path)
    logger.debug("resolved %d prim path entries to %d prims", len(entries), len(result))
    return result

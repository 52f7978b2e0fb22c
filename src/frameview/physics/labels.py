# SPDX-License-Identifier: Apache-2.0
"""Prim path patterns matched against an engine's labels (Newton's ``body_label``, ovphysx's prim lists).

The typed physics views name their prims as the frame views do (``/World/envs/env_.*/Robot``, or a list of paths and
patterns); the engine, not a stage, says which prims exist. :func:`match_labels` resolves a pattern over the engine's
labels with :func:`frameview.resolve_prim_paths`'s rules, children in the engine's order (env order for replicated
envs).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..paths import resolve_prim_paths

__all__ = ["LabelTree", "leaf_name", "match_labels"]


class LabelTree:
    """The prim tree spanned by a list of absolute paths (a :class:`frameview.PrimTree`), children in first-seen
    order.

    Args:
        labels: Absolute prim paths; entries that are not (e.g. an empty label) are ignored.
    """

    def __init__(self, labels: Sequence[str]) -> None:
        children: dict[str, dict[str, None]] = {"/": {}}
        for label in labels:
            if not label.startswith("/") or label == "/":
                continue
            parent = "/"
            for name in label[1:].split("/"):
                path = f"/{name}" if parent == "/" else f"{parent}/{name}"
                children[parent].setdefault(name, None)
                children.setdefault(path, {})
                parent = path
        self._children = children

    def child_names(self, path: str) -> list[str]:
        return list(self._children.get(path, ()))

    def has_prim(self, path: str) -> bool:
        return path in self._children


def match_labels(
    prim_path: str | Sequence[str],
    labels: Sequence[str],
    what: str,
    elsewhere: tuple[Callable[[], Sequence[str]], str] | None = None,
) -> list[int]:
    """The indices of the labels that ``prim_path`` names, in match order.

    Args:
        prim_path: A path, a pattern or a list of them (as for the frame views).
        labels: The engine's labels, by engine index.
        what: What the labels are, for the error (e.g. ``"Newton articulations (model.articulation_label)"``).
        elsewhere: ``(other_labels, hint)``: when the pattern matches none of ``labels`` but names some of
            ``other_labels()`` (another kind of prim, e.g. links for an articulation view; asked on that error only),
            the error ends with ``hint`` (what to use instead).

    Raises:
        ValueError: The pattern matches no labelled prim (the message says what the labels hold), or a matched
            path is an ancestor of labelled prims but not a label itself, or several engine entries share a label.
    """
    index: dict[str, int] = {}
    shared: set[str] = set()
    for i, label in enumerate(labels):
        if label in index:
            shared.add(label)
        index.setdefault(label, i)
    try:
        paths = resolve_prim_paths(prim_path, LabelTree(list(index)))
    except ValueError as exc:
        sample = ", ".join(repr(label) for label in list(index)[:3])
        hint = _elsewhere_hint(prim_path, elsewhere)
        raise ValueError(f"{exc} (matched against the {what}: {len(index)} labels, e.g. {sample}){hint}") from None
    missing = [p for p in paths if p not in index]
    if missing:
        raise ValueError(
            f"prim_path {prim_path!r} matched {missing[0]!r}, which is not one of the {what} (only a path above "
            f"them); name the labelled prims themselves, e.g. {next(iter(index), '')!r}"
        )
    dup = [p for p in paths if p in shared]
    if dup:
        raise ValueError(
            f"prim_path {prim_path!r}: {dup[0]!r} labels several of the {what}, so a row cannot name one; give each "
            "its own label (e.g. the env's prim path)"
        )
    return [index[p] for p in paths]


def _elsewhere_hint(prim_path: str | Sequence[str], elsewhere: tuple[Callable[[], Sequence[str]], str] | None) -> str:
    """``"; " + hint`` when ``prim_path`` names labels of the other kind (``elsewhere``), else ``""``."""
    if elsewhere is None:
        return ""
    other_labels, hint = elsewhere
    try:
        found = resolve_prim_paths(prim_path, LabelTree(list(dict.fromkeys(other_labels()))))
    except ValueError:  # not the other kind either: the error as it is
        return ""
    return f"; {found[0]!r} is {hint}" if found else ""


def leaf_name(path: str) -> str:
    """The last component of a prim path (a link's or joint's name)."""
    return path.rstrip("/").rsplit("/", 1)[-1]

# SPDX-License-Identifier: Apache-2.0
"""Visibility of the viewed prims: ``get_visibility`` / ``set_visibility`` on every backend.

USD's ``visibility`` is a per-prim *opinion* (token ``inherited`` or ``invisible``) that prunes: a prim is visible
when neither it nor any Imageable ancestor says ``invisible``. Every backend reads and writes it with the same
rules, written once here over a small :class:`VisibilityTree` that each backend (or Fabric provider) implements:

- :func:`compute_visibility`: the computed visibility of prims (pxr's ``UsdGeomImageable.ComputeVisibility() !=
  invisible``) from the opinions of the prims and their ancestors.
- :func:`plan_visibility`: the opinions to author so that the requested prims become visible or invisible with
  ``MakeVisible`` / ``MakeInvisible`` semantics: making a prim visible under an invisible ancestor makes that ancestor
  (and the ones between) ``inherited`` and authors ``invisible`` on their other children, so that only the requested
  prim, the ancestors it needs and what under it has no ``invisible`` opinion of its own become visible.
- :func:`subtree_visibility`: the computed visibility of every prim under some roots (providers that keep Fabric's
  computed ``_worldVisibility`` column up to date after a write).

Visibility is a host path (tools, randomisation at reset, debugging): a few batched provider calls per request, not
device kernels. Keep it out of per-step loops.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import warp as wp

from ._core.host import to_numpy
from ._core.rows import ALL

if TYPE_CHECKING:
    from ._core.arguments import Arguments

__all__ = [
    "INVISIBLE",
    "NO_OPINION",
    "VISIBLE",
    "VisibilityTree",
    "author_visibility",
    "compute_visibility",
    "gather_visibility",
    "plan_visibility",
    "subtree_visibility",
    "visibility_paths",
    "visibility_rows",
    "visible_to_numpy",
]

NO_OPINION = -1
"""The prim takes no part in visibility (not Imageable, or not there): it neither hides nor can be hidden."""
VISIBLE = 0
"""Opinion ``inherited`` (or none authored): the prim is visible when its ancestors are."""
INVISIBLE = 1
"""Opinion ``invisible``: the prim and everything under it are invisible."""

VISIBILITY_ATTR = "visibility"
"""USD's (and Fabric's) per-prim opinion: token ``inherited`` / ``invisible``."""
WORLD_VISIBILITY_ATTR = "_worldVisibility"
"""Fabric's computed visibility (bool), what Kit's renderer reads; Fabric providers keep it up to date on writes."""
TOKENS = {VISIBLE: "inherited", INVISIBLE: "invisible"}


class VisibilityTree(Protocol):
    """A stage's namespace as visibility needs it: opinions and children of prims, by path, in batches."""

    def opinions(self, paths: Sequence[str]) -> np.ndarray:
        """(n,) int8: :data:`INVISIBLE`, :data:`VISIBLE` or :data:`NO_OPINION` for each path."""
        ...

    def children(self, paths: Sequence[str]) -> list[list[str]]:
        """Paths of the children of each prim (empty for a prim that is not there)."""
        ...


def _prefixes(path: str) -> list[str]:
    """``"/a/b/c"`` -> ``["/a", "/a/b", "/a/b/c"]`` (the prim and its ancestors, top down, without ``"/"``)."""
    parts = path.split("/")[1:]
    return ["/" + "/".join(parts[: k + 1]) for k in range(len(parts))]


def _parent(path: str) -> str | None:
    head = path.rsplit("/", 1)[0]
    return head or None


class _Opinions:
    """Opinions fetched from a tree in batches, plus the changes planned on top of them."""

    def __init__(self, tree: VisibilityTree) -> None:
        self.tree = tree
        self.known: dict[str, int] = {}
        self.planned: dict[str, int] = {}
        self._children: dict[str, list[str]] = {}

    def fetch(self, paths: Sequence[str]) -> None:
        missing = [p for p in dict.fromkeys(paths) if p not in self.known]
        if missing:
            values = np.asarray(self.tree.opinions(missing), dtype=np.int64)
            self.known.update(zip(missing, values.tolist(), strict=True))

    def __getitem__(self, path: str) -> int:
        planned = self.planned.get(path)
        return self.known[path] if planned is None else planned

    def children(self, paths: Sequence[str]) -> dict[str, list[str]]:
        missing = [p for p in dict.fromkeys(paths) if p not in self._children]
        if missing:
            self._children.update(zip(missing, self.tree.children(missing), strict=True))
        return {p: self._children[p] for p in paths}


def compute_visibility(tree: VisibilityTree, paths: Sequence[str]) -> np.ndarray:
    """(n,) bool: whether each prim is visible (no ``invisible`` opinion on it or on any ancestor).

    One :meth:`VisibilityTree.opinions` call over the prims and their ancestors.
    """
    opinions = _Opinions(tree)
    chains = [_prefixes(str(p)) for p in paths]
    opinions.fetch([a for chain in chains for a in chain])
    hidden: dict[str, bool] = {}
    out = np.empty(len(chains), dtype=bool)
    for i, chain in enumerate(chains):
        above = False
        for a in chain:
            h = hidden.get(a)
            if h is None:
                h = hidden[a] = above or opinions[a] == INVISIBLE
            above = h
        out[i] = not above
    return out


def plan_visibility(tree: VisibilityTree, paths: Sequence[str], visible: np.ndarray) -> dict[str, int]:
    """The opinions to author (``{path: VISIBLE or INVISIBLE}``, only those that change) so that each of ``paths``
    becomes visible (``visible[i]``) or invisible, with ``MakeVisible`` / ``MakeInvisible`` semantics.

    - Invisible: the prim gets ``invisible`` (its descendants follow; nothing else changes).
    - Visible: the prim gets ``inherited``; when an ancestor is ``invisible``, that ancestor and the ones below it on
      the way to the prim get ``inherited`` and their other children ``invisible`` (through non-Imageable children:
      their topmost Imageable descendants): apart from those ancestors and the prim's own subtree, no prim changes
      its computed visibility.

    Raises:
        ValueError: A prim is asked visible while one of its ancestors is asked invisible in the same request
            (visibility prunes: that prim cannot be visible).
    """
    paths = [str(p) for p in paths]
    flags = np.asarray(visible, dtype=bool).tolist()
    hide = {p for p, v in zip(paths, flags, strict=True) if not v}
    show = [p for p, v in zip(paths, flags, strict=True) if v]
    _check_not_under_hidden(show, hide)
    opinions = _Opinions(tree)
    opinions.fetch([a for p in paths for a in _prefixes(p)])
    for p in hide:
        if opinions[p] != INVISIBLE:
            opinions.planned[p] = INVISIBLE
    for p in show:
        _reveal(opinions, p)
    return {p: v for p, v in opinions.planned.items() if v != max(opinions.known[p], VISIBLE)}


def _check_not_under_hidden(show: list[str], hide: set[str]) -> None:
    """Raise ``ValueError`` when a prim of ``show`` lies under a prim of ``hide``."""
    if not hide:
        return
    for p in show:
        for a in _prefixes(p)[:-1]:
            if a in hide:
                raise ValueError(
                    f"visible: prim {p!r} is asked visible and its ancestor {a!r} invisible in one call; "
                    "visibility is inherited (an invisible prim hides everything under it), so pass one of "
                    "them, or make the ancestor visible and hide its other children instead"
                )


def _reveal(opinions: _Opinions, path: str) -> None:
    """Plan ``MakeVisible`` of ``path``: ``inherited`` on it and on its ancestors from the topmost ``invisible`` one
    down, ``invisible`` on those ancestors' other children (their topmost Imageable descendants)."""
    chain = _prefixes(path)
    top = next((k for k, a in enumerate(chain[:-1]) if opinions[a] == INVISIBLE), None)
    if top is not None:
        nodes = chain[top:-1]
        kids = opinions.children(nodes)
        for k, node in enumerate(nodes):
            if opinions[node] == INVISIBLE:
                opinions.planned[node] = VISIBLE
            _hide_all(opinions, [c for c in kids[node] if c != chain[top + k + 1]])
    if opinions[path] == INVISIBLE:
        opinions.planned[path] = VISIBLE


def _hide_all(opinions: _Opinions, paths: list[str]) -> None:
    """Author ``invisible`` on each Imageable prim of ``paths``; look through the others to their children."""
    while paths:
        opinions.fetch(paths)
        through = [p for p in paths if opinions[p] == NO_OPINION]
        for p in paths:
            if opinions[p] == VISIBLE:
                opinions.planned[p] = INVISIBLE
        kids = opinions.children(through) if through else {}
        paths = [c for p in through for c in kids[p]]


def subtree_visibility(tree: VisibilityTree, roots: Sequence[str]) -> dict[str, bool]:
    """The computed visibility of every prim at or under ``roots`` (``{path: visible}``), level by level: one
    :meth:`VisibilityTree.opinions` and one :meth:`VisibilityTree.children` call per level of the subtrees."""
    tops = _outermost([str(r) for r in roots])
    if not tops:
        return {}
    parents = [_parent(r) for r in tops]
    known_parents = [p for p in parents if p is not None]
    parent_visible = dict(zip(known_parents, compute_visibility(tree, known_parents).tolist(), strict=True))
    level = [(r, parent_visible.get(p, True) if p is not None else True) for r, p in zip(tops, parents, strict=True)]
    out: dict[str, bool] = {}
    while level:
        level_paths = [p for p, _ in level]
        ops = np.asarray(tree.opinions(level_paths))
        kids = tree.children(level_paths)
        nxt = []
        for (path, above), op, children in zip(level, ops.tolist(), kids, strict=True):
            vis = above and op != INVISIBLE
            out[path] = vis
            nxt.extend((c, vis) for c in children)
        level = nxt
    return out


def _outermost(paths: list[str]) -> list[str]:
    """Drop the paths that lie under another path of the list (order kept)."""
    chosen = set(paths)
    return [p for p in dict.fromkeys(paths) if not any(a in chosen for a in _prefixes(p)[:-1])]


class PxrVisibilityTree:
    """:class:`VisibilityTree` over a pxr stage: opinions are the composed ``visibility`` values at the default time.

    ``overrides`` (``{path: opinion}``) replace what the stage says for those prims (the embedded Fabric model's own
    writes).
    """

    def __init__(self, stage: Any, overrides: dict[str, int] | None = None) -> None:
        self._stage = stage
        self._overrides = overrides or {}

    def opinions(self, paths: Sequence[str]) -> np.ndarray:
        from pxr import UsdGeom

        out = np.full(len(paths), NO_OPINION, dtype=np.int8)
        get_prim, imageable, invisible = self._stage.GetPrimAtPath, UsdGeom.Imageable, UsdGeom.Tokens.invisible
        overrides = self._overrides
        for i, path in enumerate(paths):
            own = overrides.get(path)
            if own is not None:
                out[i] = own
                continue
            prim = get_prim(path)
            if prim and prim.IsA(imageable):
                out[i] = INVISIBLE if prim.GetAttribute(VISIBILITY_ATTR).Get() == invisible else VISIBLE
        return out

    def children(self, paths: Sequence[str]) -> list[list[str]]:
        out = []
        for path in paths:
            prim = self._stage.GetPrimAtPath(path)
            out.append([str(c.GetPath()) for c in prim.GetChildren()] if prim else [])
        return out


def _is_torch_tensor(value: Any) -> bool:
    torch = sys.modules.get("torch")  # never import torch ourselves
    return torch is not None and isinstance(value, torch.Tensor)


def visibility_rows(args: Arguments, indices: Any, write: bool) -> np.ndarray | None:
    """Host view indices (int64) of a visibility call, or None for all prims; checked by the view's row resolver
    ``args`` as the pose calls check them (the caller checked the view is open)."""
    rows = args.prepare(indices, write=write)
    if rows.kind == ALL:
        return None
    if not rows.checked:  # device indices: a host path checks them here (same messages as host indices)
        source = rows.source if rows.source is not None else rows.indices
        rows = args.prepare(args.indices_to_numpy(source), write=write)
    return np.asarray(rows.host_indices(), dtype=np.int64)


def gather_visibility(args: Arguments, indices: Any, read: Callable[[np.ndarray | None], np.ndarray]) -> wp.array:
    """``get_visibility``'s rows checked by ``args``, the backend's host read ``read(rows)`` copied into the view's
    ``visibility`` output buffer (``wp.bool`` on the view's device, one per row)."""
    rows = visibility_rows(args, indices, write=False)
    count = args.count if rows is None else rows.shape[0]
    out = args.outputs("visibility", wp.bool, count)
    if count:
        host = np.ascontiguousarray(read(rows), dtype=bool)
        wp.copy(out, wp.array(host, dtype=wp.bool, device="cpu"))
    return out


def author_visibility(
    args: Arguments, indices: Any, visible: Any, write: Callable[[np.ndarray | None, np.ndarray], None]
) -> None:
    """``set_visibility``'s rows checked by ``args`` and ``visible`` coerced (:func:`visible_to_numpy`), then the
    backend's host write ``write(rows, values)`` (not called for no rows)."""
    rows = visibility_rows(args, indices, write=True)
    count = args.count if rows is None else rows.shape[0]
    values = visible_to_numpy(visible, count)
    if count:
        write(rows, values)


def visibility_paths(paths: Sequence[str], rows: np.ndarray | None) -> list[str]:
    """The paths of view prims ``rows`` (None: all)."""
    return list(paths) if rows is None else [paths[i] for i in rows.tolist()]


def visible_to_numpy(visible: Any, count: int) -> np.ndarray:
    """``visible`` as an (count,) bool NumPy array, or a clear error naming the argument."""
    expected = f"a bool or a boolean array of shape ({count},)"
    if visible is None:
        raise ValueError(f"visible: expected {expected}, got None")
    if isinstance(visible, (bool, np.bool_)):
        return np.full(count, bool(visible), dtype=bool)
    if isinstance(visible, wp.array):
        if visible.dtype != wp.bool:
            raise TypeError(f"visible: expected a Warp array of dtype wp.bool, got {visible.dtype}")
        host = to_numpy(visible)
    elif _is_torch_tensor(visible):
        if visible.dtype != sys.modules["torch"].bool:
            raise TypeError(f"visible: expected a boolean tensor, got dtype {visible.dtype}")
        host = visible.detach().cpu().numpy()
    elif isinstance(visible, (np.ndarray, list, tuple)):
        try:
            host = np.asarray(visible)
        except ValueError as exc:  # ragged nested lists
            raise ValueError(f"visible: expected {expected}, got a ragged {type(visible).__name__}") from exc
        if host.dtype != np.bool_ and not (host.size == 0 and host.dtype == np.float64):
            raise TypeError(f"visible: expected booleans, got dtype {host.dtype} (use True/False, not 1/0)")
    else:
        raise TypeError(f"visible: expected {expected}, got {type(visible).__name__}")
    if host.shape != (count,):
        raise ValueError(f"visible: expected shape ({count},), got {tuple(host.shape)}")
    return np.ascontiguousarray(host, dtype=bool)

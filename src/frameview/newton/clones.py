# SPDX-License-Identifier: Apache-2.0
"""Envs cloned in the Newton model only: the prims a view finds there, and where they are placed.

A Newton model built by replicating one env (``ModelBuilder.replicate`` / ``add_builder`` with label
prefixes, as Isaac Lab's Newton cloner does kit-less) has a body per env, labelled by its prim path
(``/World/envs/env_7/Robot/base``), while the stage holds env_0's prims alone (and maybe empty env Xforms). A body
whose label is not a prim of the stage is a *clone* of the one stage body whose label differs from it in exactly
one path component (``env_0`` for ``env_7``), which ends the *clone root* (``/World/envs/env_7``): the prims below
the source root that the stage lacks below the clone root are mirrored there. Views resolve their patterns over
the stage with these mirrored prims added (:class:`CloneTree`): ``/World/envs/env_.*/Camera`` finds one frame per
env, in the stage's order of the env Xforms, or, for envs missing from the stage, after the stage's own in the
model's body order. A cloned frame on a body gets its source's offset from its body, applied to its own env's
body. One on no body (a camera fixed in its env) gets its source's offset from the source root, applied to the
clone root's stage pose, or, when the clone root is not on the stage either, to the source root moved by the env's
placement relative to the source env, read from the model's initial body poses (``model.body_q``: every body of
the clone must be its source's moved by one rigid transform, else the frame is refused). A clone with more than one
candidate source is refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter
from os.path import commonprefix
from typing import Any

import numpy as np
from pxr import Usd

__all__ = ["CloneTree", "StageListing", "rigid_placements"]


class CloneTree:
    """The stage as a :class:`frameview.paths.PrimTree`, with the prims of envs cloned in Newton only added.

    A Newton body whose label (a prim path) is not on the stage is a clone of the stage body whose label differs
    from it in exactly one component (see the module docstring). That component ends its *clone root* (``env_7`` in
    ``/World/envs/env_7/Robot``), which mirrors the source's root (``/World/envs/env_0``): a path below a clone root
    that is not on the stage exists when the path below the source's root does. Children are listed the stage's
    first, then the mirrored ones in the source's order; a clone root not on the stage comes after its parent's
    stage children, in the model's body order. A clone root with several candidate sources is *ambiguous*:
    reaching a path below it raises ``ValueError``.

    Labels laid out as a replicating cloner lays them out (one block per env, the same suffixes in each) over a stage
    that holds one env's bodies and nothing below the others are searched with one listing per env, not per label
    (:func:`_replica_blocks`); the answer is the general search's, which decides any other stage.

    Args:
        stage: The stage's prims (:class:`StageListing`, kept for one view build).
        labels: ``model.body_label`` (prim paths; other labels are ignored).
    """

    def __init__(self, stage: StageListing, labels: Sequence[str]) -> None:
        self._stage = stage
        self.prefixes: dict[str, str] = {}
        """Clone root -> source root."""
        self.ambiguous: dict[str, list[str]] = {}
        """Clone root -> its candidate source roots (more than one)."""
        self._extra_children: dict[str, list[str]] = {}
        self._clone_of: dict[str, tuple[str, str] | str | None] = {}
        self._pairs: dict[str, list[tuple[int, str, str, list[tuple[int, str]]]]] = {}  # see pairs_of
        self._depths: list[int] = []  # the depths (components) of the clone roots, ascending
        self._blocks: tuple[str, list[str]] | None = None  # replicated blocks: (source root, suffixes)
        unique = list(dict.fromkeys(labels))
        blocks = _replica_blocks(unique)
        if blocks is not None and self._from_blocks(stage, *blocks):
            return
        # the labels by parent (one listing, one match per parent: an env's bodies share theirs), in label order
        by_parent: dict[str, list[tuple[int, str]]] = {}
        last: str | None = None  # the labels of one parent come in a run (a builder adds an env's bodies in turn)
        group: list[tuple[int, str]] = []
        for k, label in enumerate(unique):
            parent, slash, name = label.rpartition("/")
            if not slash:
                continue
            if parent != last:
                last, found = parent, by_parent.get(parent)
                group = by_parent[parent] = [] if found is None else found
            group.append((k, name))
        stage_bodies: list[tuple[int, str]] = []
        missing: dict[str, list[tuple[int, str]]] = {}
        for parent, names in by_parent.items():
            probe = parent + "/x"  # the labels' own check on their shared part: an absolute path, no empty component
            if not probe.startswith("/") or "//" in probe[1:]:
                continue
            if parent and not stage.valid(parent):  # no prim (an env cloned in Newton only): no label is on the stage
                missing[parent] = names
                continue
            shown = stage.shown_children(parent)
            if not shown:
                missing[parent] = names
                continue
            for k, name in names:
                if name in shown:
                    stage_bodies.append((k, parent + "/" + name))
                else:
                    missing.setdefault(parent, []).append((k, name))
        if not missing:
            return
        stage_bodies.sort()
        sources = _Sources([label for _k, label in stage_bodies])
        bodies = sources.bodies
        sightings: list[tuple[int, str, str]] = []  # (label index, clone root, source root) of each first sight
        for parent, names in missing.items():
            matches = sources.by_parent(parent)
            if matches is None:  # a label's own name changes its matches: each on its own
                for k, name in names:
                    for clone, root, source in sources.of(parent + "/" + name):
                        sightings.append((k, clone, root))
                        self._pairs.setdefault(clone, []).append((k, parent + "/" + name, source, []))
                continue
            for clone, root, prefix in matches:  # below ``parent``, ``name`` matches where prefix + name is a body
                hits = [(k, name) for k, name in names if prefix + name in bodies]
                if hits:
                    sightings.append((hits[0][0], clone, root))
                    self._pairs.setdefault(clone, []).append((hits[0][0], parent + "/", prefix, hits))
        found: dict[str, list[str]] = {}  # clone root -> source roots, in order of first sight (the labels' order)
        sightings.sort(key=itemgetter(0))  # stable: one label's in component order
        for _k, clone, root in sightings:
            roots = found.get(clone)
            if roots is None:
                found[clone] = [root]
            elif root not in roots:
                roots.append(root)
        for clone, roots in found.items():
            if len(roots) == 1:
                self.prefixes[clone] = roots[0]
            else:
                self.ambiguous[clone] = roots
            if not stage.has_prim(clone):
                parent, _, name = clone.rpartition("/")
                self._extra_children.setdefault(parent or "/", []).append(name)
        self._depths = sorted({root.count("/") for root in found})

    def _from_blocks(self, stage: StageListing, head: str, envs: list[str], suffixes: list[str]) -> bool:
        """The clone search on labels made of replicated blocks (:func:`_replica_blocks`), one listing per env: when
        exactly one env holds prims on the stage and they are its block's bodies, every other env has nothing below
        it on the stage, and each of its labels then differs from exactly one stage body (its source env's, with the
        same suffix) in exactly one component (the env's), so the general search finds each env a clone of that one.
        False (nothing set) for any other stage: the general search decides."""
        empty = stage.empty
        holding = [env for env in envs if not empty(head + env)]
        if len(holding) != 1 or not all(stage.has_prim(head + holding[0] + suffix) for suffix in suffixes):
            return False
        source = holding[0]
        source_root = head + source
        clones = [env for env in envs if env != source]
        self.prefixes = dict.fromkeys([head + env for env in clones], source_root)
        self._blocks = (source_root, suffixes)
        shown = stage.shown_children(head[:-1])  # (the root's for head "/")
        extra = [env for env in clones if env not in shown]
        if extra:
            self._extra_children[head[:-1] or "/"] = extra
        self._depths = [head.count("/")]
        return True

    def pairs_of(self, clone: str) -> list[tuple[str, str]]:
        """``(clone body label, source body label)`` of each body of clone root ``clone``, in the labels' order."""
        if self._blocks is not None:  # replicated blocks: the source's suffixes, in both envs
            source_root, suffixes = self._blocks
            return [(clone + suffix, source_root + suffix) for suffix in suffixes] if clone in self.prefixes else []
        pairs: list[tuple[int, str, str]] = []
        for k, label_or_parent, source_or_prefix, hits in self._pairs.get(clone, ()):
            if hits:  # the labels of one parent, ``hits`` their (index, name)
                pairs += [(j, label_or_parent + name, source_or_prefix + name) for j, name in hits]
            else:
                pairs.append((k, label_or_parent, source_or_prefix))
        pairs.sort()
        return [(label, source) for _k, label, source in pairs]

    def clone_of(self, path: str) -> tuple[str, str] | None:
        """``(clone root, source root)`` of a path at or below a clone root; None for any other path.

        Raises:
            ValueError: ``path`` lies below an ambiguous clone root.
        """
        clone = self._clone_root(path)
        if isinstance(clone, str):
            raise ValueError(
                f"prim_path: {path!r} exists only in the Newton model, and its env {clone!r} could be a clone of "
                f"any of {self.ambiguous[clone]!r} (their bodies' labels differ from its bodies' in one "
                "component each): author its prims on the stage, or leave the ambiguous envs out of the pattern"
            )
        return clone

    def root_of(self, path: str) -> str | None:
        """The clone root at or above ``path`` (ambiguous or not), or None; remembered per path."""
        clone = self._clone_root(path)
        return clone if isinstance(clone, str) or clone is None else clone[0]

    def _clone_root(self, path: str) -> tuple[str, str] | str | None:
        """:meth:`clone_of`, or the ambiguous clone root above ``path`` (a str); remembered per path."""
        memo = self._clone_of
        known = memo.get(path, _UNSEEN)
        if known is not _UNSEEN:
            return known  # type: ignore[no-any-return]
        clone: tuple[str, str] | str | None = None
        # the path's ancestor at each depth that holds clone roots, the shallowest first: the shallowest root wins
        for depth in self._depths:
            parts = path.split("/", depth + 1)
            if len(parts) <= depth:  # shallower than the roots from here on
                break
            root = path if len(parts) == depth + 1 else path[: len(path) - len(parts[depth + 1]) - 1]
            source = self.prefixes.get(root)
            if source is not None:
                clone = (root, source)
                break
            if root in self.ambiguous:
                clone = root
                break
        memo[path] = clone
        return clone

    def source_of(self, path: str) -> str | None:
        """The stage path that ``path`` mirrors (itself below no clone root is not mirrored: None)."""
        clone = self.clone_of(path)
        return None if clone is None else clone[1] + path[len(clone[0]) :]

    def child_names(self, path: str) -> list[str]:
        """Names of the children of ``path``: the stage's, then the mirrored ones (see the class docstring)."""
        stage = self._stage
        names = stage.child_names(path) if path == "/" or stage.has_prim(path) else []
        source = self.source_of(path) if path != "/" else None
        if source is not None and stage.has_prim(source):
            seen = set(names)
            names = names + [n for n in stage.child_names(source) if n not in seen]
        extra = self._extra_children.get(path)
        if extra:
            seen = set(names)
            names = names + [n for n in extra if n not in seen]
        return names

    def has_prim(self, path: str) -> bool:
        """Whether ``path`` is on the stage or mirrors a stage prim below a clone root."""
        stage = self._stage
        clone = self._clone_root(path)
        # below a clone root with nothing under it on the stage, the stage has no prim: skip asking it
        if clone is None or isinstance(clone, str) or path == clone[0] or not stage.empty(clone[0]):
            if stage.has_prim(path):
                return True
            if not isinstance(clone, tuple):
                return clone is not None and self.clone_of(path) is not None  # an ambiguous root raises here
        return stage.has_prim(clone[1] + path[len(clone[0]) :])


_UNSEEN: Any = object()


def _replica_blocks(labels: list[str]) -> tuple[str, list[str], list[str]] | None:
    """``labels`` (distinct) as blocks of one size, block ``j`` being ``head + envs[j] + suffix`` for each of
    ``suffixes`` in order (a model replicated per env, as Isaac Lab's Newton cloner builds it): ``(head, envs,
    suffixes)``, or None when they are not (then the general search runs). ``head`` is an absolute path ending in
    ``/``, ``envs`` distinct names, each suffix starts with ``/``; no component is empty."""
    if len(labels) < 2:
        return None
    first = labels[0]
    common = len(commonprefix([first, labels[-1]]))  # noqa: RUF071 (by character: env names differ inside one)
    head = first[: first.rfind("/", 0, common) + 1]
    start = len(head)
    end = first.find("/", start)
    if not head.startswith("/") or "//" in head or end <= start:
        return None
    inside = first[:end] + "/"
    width = 1
    while width < len(labels) and labels[width].startswith(inside):
        width += 1
    if len(labels) % width:
        return None
    suffixes = [label[end:] for label in labels[:width]]
    if any("//" in suffix or suffix.endswith("/") for suffix in suffixes):
        return None
    # each block, joined by a character no label holds, is its first label's env name between the head and each
    # suffix
    envs = [label[start : label.find("/", start)] for label in labels[::width]]
    glue = "\0".join(suffixes)
    if glue.count("\0") != width - 1:
        return None
    for j, env in enumerate(envs):
        prefix = head + env
        block = "\0".join(labels[j * width : (j + 1) * width])
        if not env or block != prefix + glue.replace("\0", "\0" + prefix) or block.count("\0") != width - 1:
            return None
    if len(set(envs)) < len(envs):
        return None
    return head, envs, suffixes


class _Sources:
    """The candidate sources of missing body labels among the stage's bodies: a stage body is a source of a label of
    the same depth that differs from it in exactly one component, ``(clone root, source root, source body)`` per
    match, the components from the root, the bodies of one component in the model's order.

    A label's matches in the components of its parent path are found once per parent (the labels of one env share
    it), as the stage parents that differ from that parent in one component; the label's own name then picks the
    stage body below each. Its last component matches the stage bodies beside it (same parent, another name).
    """

    def __init__(self, stage_bodies: list[str]) -> None:
        self.bodies = set(stage_bodies)
        """The stage bodies' labels."""
        self._order = {label: k for k, label in enumerate(stage_bodies)}
        self._siblings: dict[str, list[str]] = {}  # stage parent -> its stage bodies
        self._befores: set[str] = {""}  # every path that precedes a component of a stage body (closed under prefix)
        self._below: dict[str, list[str]] = {}  # a path of _befores -> its children in _befores
        for label in stage_bodies:
            parent = label.rpartition("/")[0]
            siblings = self._siblings.get(parent)
            if siblings is None:
                siblings = self._siblings[parent] = []
                path = parent
                while path not in self._befores:
                    self._befores.add(path)
                    up = path.rpartition("/")[0]
                    self._below.setdefault(up, []).append(path)
                    path = up
            siblings.append(label)
        self._matches: dict[str, list[tuple[str, str, list[str]]]] = {"": []}  # see _prefix_matches
        self._parent_matches: dict[str, list[tuple[str, str, list[str]]]] = {}
        self._below_matches: dict[tuple[str, str], list[str]] = {}  # see _below_found

    def by_parent(self, parent: str) -> list[tuple[str, str, str]] | None:
        """What :meth:`of` finds for any label below ``parent``, as ``(clone root, source root, prefix)``: the label
        ``parent + "/" + name`` matches where ``prefix + name`` is a stage body. None where the label's name changes
        more than that (a stage body beside the label, or several stage parents in one component): ask :meth:`of`."""
        befores = self._befores
        if parent in befores:
            return None
        # the deepest ancestor that precedes a component of a stage body, and the path below its next component
        anchor = parent.rpartition("/")[0]
        while anchor not in befores:
            anchor = anchor.rpartition("/")[0]
        if not self._prefix_matches(anchor):  # no match above the anchor: the envs' parents share one answer
            end = parent.find("/", len(anchor) + 1)
            rest = "" if end == -1 else parent[end:]
            found = self._below_found(anchor, rest)
            if len(found) > 1:
                return None
            return [(parent if end == -1 else parent[:end], p[: len(p) - len(rest)], p + "/") for p in found]
        out = []
        for clone, after, parents in self._parent_matches_of(parent):
            if len(parents) > 1:
                return None
            source_parent = parents[0]
            out.append((clone, source_parent[: len(source_parent) - len(after)], source_parent + "/"))
        return out

    def of(self, label: str) -> list[tuple[str, str, str]]:
        """``(clone root, source root, source body)`` of each stage body that ``label`` could be a clone of."""
        parent, _, name = label.rpartition("/")
        out: list[tuple[str, str, str]] = []
        for clone, after, parents in self._parent_matches_of(parent):
            hits = [s for p in parents if (s := p + "/" + name) in self.bodies]
            if len(hits) > 1:
                hits.sort(key=self._order.__getitem__)
            cut = len(after) + 1 + len(name)
            out += [(clone, s[: len(s) - cut], s) for s in hits]
        if parent in self._befores:  # the last component: the stage bodies beside the label
            out += [(label, s, s) for s in self._siblings.get(parent, ())]
        return out

    def _parent_matches_of(self, parent: str) -> list[tuple[str, str, list[str]]]:
        """``(clone root, after, stage parents)`` per component of ``parent`` (from the root) in which stage-body
        parents of its depth differ from it alone (``after``: the path after that component)."""
        matches = self._parent_matches.get(parent)
        if matches is not None:
            return matches
        # the deepest ancestor (or itself) that precedes a component of a stage body: a component further down
        # is preceded by a path that none does, so it cannot differ alone
        anchor = parent
        while anchor not in self._befores:
            anchor = anchor.rpartition("/")[0]
        suffix = parent[len(anchor) :]
        siblings = self._siblings
        matches = []
        for clone, after, paths in self._prefix_matches(anchor):  # components above: the anchor's, extended
            found = [p for q in paths if (p := q + suffix) in siblings]
            if found:
                matches.append((clone, after + suffix, found))
        if suffix:  # the component below the anchor
            end = suffix.find("/", 1)
            rest = "" if end == -1 else suffix[end:]
            found = self._below_found(anchor, rest)
            if found:
                matches.append((anchor + (suffix if end == -1 else suffix[:end]), rest, found))
        self._parent_matches[parent] = matches
        return matches

    def _below_found(self, anchor: str, rest: str) -> list[str]:
        """The stage-body parents ``q + rest`` for the paths ``q`` of :attr:`_befores` just below ``anchor``: the
        matches in the component below the anchor, the same for every env's parent (remembered)."""
        found = self._below_matches.get((anchor, rest))
        if found is None:
            found = [p for q in self._below.get(anchor, ()) if (p := q + rest) in self._siblings]
            self._below_matches[(anchor, rest)] = found
        return found

    def _prefix_matches(self, path: str) -> list[tuple[str, str, list[str]]]:
        """As :meth:`_parent_matches_of`, for the paths of :attr:`_befores` (prefixes of stage bodies' parents),
        from the matches of ``path``'s parent (remembered: the envs' paths share their parents' up to the env)."""
        matches = self._matches.get(path)
        if matches is not None:
            return matches
        up, _, name = path.rpartition("/")
        matches = []
        for clone, after, paths in self._prefix_matches(up):  # a component above: extend those matches by ``name``
            longer = [p for q in paths if (p := q + "/" + name) in self._befores]
            if longer:
                matches.append((clone, after + "/" + name, longer))
        if up in self._befores:  # the last component: the prefixes beside ``path``
            beside = [p for p in self._below.get(up, ()) if p != path]
            if beside:
                matches.append((path, "", beside))
        self._matches[path] = matches
        return matches


class StageListing:
    """A pxr stage's prims for one view build, answered from one listing per parent asked about (kept while the stage
    does not change): a model with thousands of cloned bodies asks about each of them, and they share a few
    thousand parents, most of them absent or empty (then their children are absent without another lookup).

    As a :class:`~frameview.paths.PrimTree` it shows what pattern resolution shows (the default predicate, no
    instance proxies); :meth:`valid` answers ``GetPrimAtPath(path).IsValid()`` (inactive, undefined and
    instance-proxy prims included) from the same listings.
    """

    def __init__(self, stage: Usd.Stage) -> None:
        self._get_prim = stage.GetPrimAtPath
        self._root = stage.GetPseudoRoot()
        self._every: dict[str, dict[str, Usd.Prim] | None] = {}  # parent -> its children by name; None: invalid
        self._shown: dict[str, list[str]] = {}  # parent -> its children's names that the default predicate shows
        self._shown_sets: dict[str, frozenset[str]] = {}

    def empty(self, path: str) -> bool:
        """Whether no prim lies below ``path`` (or ``path`` itself is not valid)."""
        every = self._every.get(path, _UNSEEN)
        if every is _UNSEEN:
            every = self._list(path)
        return not every

    def below_bare(self, path: str, root: str) -> bool:
        """Whether ``path`` lies strictly below ``root`` and no prim lies below ``root`` (then ``path`` is not valid:
        answered from ``root``'s listing, without listing the parents in between)."""
        return path != root and self.empty(root)

    def valid(self, path: str) -> bool:
        """``GetPrimAtPath(path).IsValid()``."""
        parent, _, name = path.rpartition("/")
        every = self._every.get(parent, _UNSEEN)
        if every is _UNSEEN:
            every = self._list(parent)
        return every is not None and name in every

    def has_prim(self, path: str) -> bool:
        parent, _, name = path.rpartition("/")
        shown = self._shown_sets.get(parent)
        if shown is None:
            shown = self.shown_children(parent)
        return name in shown

    def shown_children(self, path: str) -> frozenset[str]:
        """The names of ``path``'s children that :meth:`child_names` lists (none when ``path`` is not shown);
        ``""`` for the root."""
        shown = self._shown_sets.get(path)
        if shown is None:
            every = self._every.get(path, _UNSEEN)
            if every is _UNSEEN:
                every = self._list(path)
            shown = self._shown_sets[path] = frozenset(self.child_names(path or "/")) if every else frozenset()
        return shown

    def child_names(self, path: str) -> list[str]:
        key = "" if path == "/" else path
        names = self._shown.get(key)
        if names is None:
            if key and not self.has_prim(key):
                names = []
            else:
                names = list((self._get_prim(key) if key else self._root).GetChildrenNames())
            self._shown[key] = names
        return names

    def _list(self, path: str) -> dict[str, Usd.Prim] | None:
        every = self._every
        if path:
            up, _, name = path.rpartition("/")
            above = every.get(up, _UNSEEN)
            if above is _UNSEEN:
                above = self._list(up)
            prim = above.get(name) if above else None
            if prim is None:
                every[path] = None
                return None
        else:
            prim = self._root
        # the children's prims with their names (a prim from its parent's list costs no path lookup: a model with
        # thousands of envs asks about each env's children, most of them bare: one call each)
        names = prim.GetFilteredChildrenNames(_EVERY_PRIM)
        listed: dict[str, Usd.Prim] = {}
        if names:
            listed = dict(zip(names, prim.GetFilteredChildren(_EVERY_PRIM), strict=True))
        every[path] = listed
        return listed


_EVERY_PRIM = Usd.TraverseInstanceProxies(Usd.PrimAllPrimsPredicate)
"""Every prim :meth:`StageListing.valid` counts: inactive, undefined and instance proxies included."""


def rigid_placements(
    pairs: dict[str, list[tuple[str, str]]], bodies: dict[str, int], initial_body_q: np.ndarray | None, tolerance: float
) -> dict[str, np.ndarray | None]:
    """The placement of each clone root relative to its source root: ``D`` (row-vector, float64) with
    ``pose(clone body) = pose(source body) @ D`` for every body pair of the clone in the model's initial poses
    (``model.body_q``), the clone env's placement relative to its source's; None when its pairs disagree by more than
    ``tolerance`` (the clone is not a rigid copy of its source) or there are no initial poses.

    Args:
        pairs: Clone root -> ``(clone body label, source body label)`` of each of its bodies
            (:meth:`CloneTree.pairs_of`).
        bodies: Body label -> body index in the model.
        initial_body_q: ``model.body_q`` on the host, ``(bodies, 7)``, or None.
        tolerance: Largest difference of two pairs' placements (stage units, or rotation-matrix entries).
    """
    roots = list(pairs)
    if initial_body_q is None:
        return dict.fromkeys(roots)
    owner, sources, clones = [], [], []
    for k, root in enumerate(roots):
        for clone, source in pairs[root]:
            owner.append(k)
            sources.append(bodies[source])
            clones.append(bodies[clone])
    deltas = np.linalg.inv(_poses(initial_body_q[sources])) @ _poses(initial_body_q[clones])
    first: dict[int, np.ndarray] = {}
    rigid = [True] * len(roots)
    for k, delta in zip(owner, deltas, strict=True):
        if k not in first:
            first[k] = delta
        elif np.abs(delta - first[k]).max() > tolerance:
            rigid[k] = False
    return {root: first[k] if rigid[k] and k in first else None for k, root in enumerate(roots)}


def _poses(x: np.ndarray) -> np.ndarray:
    """Row-vector matrices (n, 4, 4), float64, of Newton transforms ``(n, 7)``: ``(px, py, pz, qx, qy, qz, qw)``."""
    x = np.asarray(x, dtype=np.float64).reshape(-1, 7)
    q = x[:, 3:7] / np.linalg.norm(x[:, 3:7], axis=1, keepdims=True)
    qx, qy, qz, qw = q.T
    m = np.zeros((len(x), 4, 4))
    # rows are the rotated axes (the transpose of the column-vector rotation)
    m[:, 0, 0] = 1 - 2 * (qy * qy + qz * qz)
    m[:, 0, 1] = 2 * (qx * qy + qz * qw)
    m[:, 0, 2] = 2 * (qx * qz - qy * qw)
    m[:, 1, 0] = 2 * (qx * qy - qz * qw)
    m[:, 1, 1] = 1 - 2 * (qx * qx + qz * qz)
    m[:, 1, 2] = 2 * (qy * qz + qx * qw)
    m[:, 2, 0] = 2 * (qx * qz + qy * qw)
    m[:, 2, 1] = 2 * (qy * qz - qx * qw)
    m[:, 2, 2] = 1 - 2 * (qx * qx + qy * qy)
    m[:, 3, :3] = x[:, :3]
    m[:, 3, 3] = 1.0
    return m

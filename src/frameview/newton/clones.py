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

from collections.abc import Iterator, Sequence

import numpy as np
from pxr import Usd

from ..paths import PrimTree, _as_prim_tree

__all__ = ["CloneTree", "ListedTree", "rigid_placements"]


class CloneTree:
    """The stage as a :class:`frameview.paths.PrimTree`, with the prims of envs cloned in Newton only added.

    A Newton body whose label (a prim path) is not on the stage is a clone of the stage body whose label differs
    from it in exactly one component (see the module docstring). That component ends its *clone root* (``env_7`` in
    ``/World/envs/env_7/Robot``), which mirrors the source's root (``/World/envs/env_0``): a path below a clone root
    that is not on the stage exists when the path below the source's root does. Children are listed the stage's
    first, then the mirrored ones in the source's order; a clone root not on the stage comes after its parent's
    stage children, in the model's body order. A clone root with several candidate sources is *ambiguous*:
    reaching a path below it raises ``ValueError``.

    Args:
        stage: The pxr stage.
        labels: ``model.body_label`` (prim paths; other labels are ignored).
    """

    def __init__(self, stage: Usd.Stage, labels: Sequence[str]) -> None:
        self._stage = ListedTree(_as_prim_tree(stage))
        self.prefixes: dict[str, str] = {}
        """Clone root -> source root."""
        self.ambiguous: dict[str, list[str]] = {}
        """Clone root -> its candidate source roots (more than one)."""
        self.pairs: dict[str, list[tuple[str, str]]] = {}
        """Clone root -> (clone body label, source body label) of each of its bodies."""
        self._extra_children: dict[str, list[str]] = {}
        on_stage = self._stage.has_prim
        paths = [label for label in dict.fromkeys(labels) if label.startswith("/") and "//" not in label[1:]]
        missing = [label for label in paths if not on_stage(label)]
        if not missing:
            return
        # stage bodies by (depth, the path before a component, the path after it): the clones' candidate sources
        by_key: dict[tuple[int, str, str], list[str]] = {}
        before_sets: set[str] = set()  # every path that precedes a component of a stage body
        missing_set = set(missing)
        for label in paths:
            if label not in missing_set:
                depth = label.count("/")
                for start, end in _components(label):
                    by_key.setdefault((depth, label[:start], label[end:]), []).append(label)
                    before_sets.add(label[:start])
        sources: dict[str, list[str]] = {}  # clone root -> source roots, in order of first sight
        for label in missing:
            depth = label.count("/")
            for start, end in _components(label):  # from the root
                before = label[:start]
                if before not in before_sets:  # no stage body shares this path: nor any longer one
                    break
                after = label[end:]
                for source in by_key.get((depth, before, after), ()):
                    clone = label[:end]
                    source_root = source[: len(source) - len(after)]
                    found = sources.setdefault(clone, [])
                    if source_root not in found:
                        found.append(source_root)
                    self.pairs.setdefault(clone, []).append((label, source))
        for clone, found in sources.items():
            if len(found) == 1:
                self.prefixes[clone] = found[0]
            else:
                self.ambiguous[clone] = found
            if not on_stage(clone):
                parent, _, name = clone.rpartition("/")
                self._extra_children.setdefault(parent or "/", []).append(name)

    def clone_of(self, path: str) -> tuple[str, str] | None:
        """``(clone root, source root)`` of a path at or below a clone root; None for any other path.

        Raises:
            ValueError: ``path`` lies below an ambiguous clone root.
        """
        end = 0
        while end != -1:
            end = path.find("/", end + 1)
            prefix = path if end == -1 else path[:end]
            source = self.prefixes.get(prefix)
            if source is not None:
                return prefix, source
            if prefix in self.ambiguous:
                raise ValueError(
                    f"prim_path: {path!r} exists only in the Newton model, and its env {prefix!r} could be a clone of "
                    f"any of {self.ambiguous[prefix]!r} (their bodies' labels differ from its bodies' in one "
                    "component each): author its prims on the stage, or leave the ambiguous envs out of the pattern"
                )
        return None

    def child_names(self, path: str) -> list[str]:
        """Names of the children of ``path``: the stage's, then the mirrored ones (see the class docstring)."""
        stage = self._stage
        names = stage.child_names(path) if path == "/" or stage.has_prim(path) else []
        clone = self.clone_of(path) if path != "/" else None
        if clone is not None:
            source = clone[1] + path[len(clone[0]) :]
            if stage.has_prim(source):
                seen = set(names)
                names = names + [n for n in stage.child_names(source) if n not in seen]
        extra = self._extra_children.get(path)
        if extra:
            seen = set(names)
            names = names + [n for n in extra if n not in seen]
        return names

    def has_prim(self, path: str) -> bool:
        """Whether ``path`` is on the stage or mirrors a stage prim below a clone root."""
        if self._stage.has_prim(path):
            return True
        clone = self.clone_of(path)
        return clone is not None and self._stage.has_prim(clone[1] + path[len(clone[0]) :])


def _components(path: str) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of each component of an absolute path, from the root: ``path[start]`` is the ``/`` before
    it."""
    start = 0
    while start < len(path):
        end = path.find("/", start + 1)
        end = len(path) if end == -1 else end
        yield start, end
        start = end


class ListedTree:
    """A :class:`~frameview.paths.PrimTree` over another, answering ``has_prim`` from the parent's listed children:
    one listing per parent asked about, kept for the tree's life (a :class:`CloneTree` or a frame build, while the
    stage does not change). A model with thousands of cloned bodies asks about each of them, and they share a
    few hundred parents, most of them absent (then their children are absent without a lookup)."""

    def __init__(self, tree: PrimTree) -> None:
        self._tree = tree
        self._children: dict[str, list[str]] = {}
        self._child_sets: dict[str, frozenset[str] | None] = {}  # None: the parent itself is not on the stage

    def child_names(self, path: str) -> list[str]:
        names = self._children.get(path)
        if names is None:
            names = self._children[path] = self._tree.child_names(path)
        return names

    def has_prim(self, path: str) -> bool:
        parent, _, name = path.rpartition("/")
        parent = parent or "/"
        listed = self._child_sets.get(parent, ())
        if listed == ():
            on_stage = parent == "/" or self.has_prim(parent)
            listed = self._child_sets[parent] = frozenset(self.child_names(parent)) if on_stage else None
        return listed is not None and name in listed


def rigid_placements(
    pairs: dict[str, list[tuple[str, str]]], bodies: dict[str, int], initial_body_q: np.ndarray | None, tolerance: float
) -> dict[str, np.ndarray | None]:
    """The placement of each clone root relative to its source root: ``D`` (row-vector, float64) with
    ``pose(clone body) = pose(source body) @ D`` for every body pair of the clone in the model's initial poses
    (``model.body_q``), the clone env's placement relative to its source's; None when its pairs disagree by more than
    ``tolerance`` (the clone is not a rigid copy of its source) or there are no initial poses.

    Args:
        pairs: Clone root -> ``(clone body label, source body label)`` of each of its bodies (:attr:`CloneTree.pairs`).
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

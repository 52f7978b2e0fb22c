# SPDX-License-Identifier: Apache-2.0
"""The node graph of a Fabric view's write: which prims a write reads to place the view's prims, and their parents."""

from __future__ import annotations

from typing import Any

import numpy as np

from .nested_write_kernels import _ANCHOR

__all__ = ["node_graph"]


def node_graph(fabric: Any, paths: tuple[str, ...]) -> tuple[np.ndarray, tuple[str, ...]]:
    """The nodes a write reads to place the view's prims: ``(node_parent, extra paths)``.

    Node ``i < N`` is view prim ``i``; node ``N + e`` is extra prim ``e``: the nearest Fabric ancestor of a view prim
    when it is outside the view (an *anchor*: no view prim lies above it, so a write cannot move it, and its world
    matrix is read as is), or a prim between nested view prims (its local matrix is composed). ``node_parent`` is the
    node of each node's Fabric parent, -1 for none (identity) and ``_ANCHOR`` for anchors.
    """
    n = len(paths)
    view_index = {p: i for i, p in enumerate(paths)}

    def under_view(path: str) -> bool:
        parent = path.rsplit("/", 1)[0]
        while parent:
            if parent in view_index:
                return True
            parent = parent.rsplit("/", 1)[0]
        return False

    extras: dict[str, int] = {}
    extra_parent: list[int] = []
    node_parent = np.full(n, -1, dtype=np.int64)

    def node_of(path: str | None, pending: list[str]) -> int:
        if path is None:
            return -1
        if path in view_index:
            return view_index[path]
        e = extras.get(path)
        if e is None:
            e = extras[path] = len(extra_parent)
            extra_parent.append(int(_ANCHOR))
            if under_view(path):  # between nested view prims: its own parent matters
                pending.append(path)
        return n + e

    pending: list[str] = []
    for i, parent in enumerate(fabric.xform_parents(paths)):
        node_parent[i] = node_of(parent, pending)
    while pending:
        batch, pending = tuple(pending), []
        for path, parent in zip(batch, fabric.xform_parents(batch), strict=True):
            extra_parent[extras[path]] = node_of(parent, pending)
    return np.concatenate([node_parent, np.asarray(extra_parent, dtype=np.int64)]), tuple(extras)

# SPDX-License-Identifier: Apache-2.0
"""What the scoped selections are compared with, and the slot-table timing seam.

- :class:`ScopedRebuild`: FabricFrameView's own per-access rebuild, through ``FabricFrameView.rebuild_slot_table``.
- :class:`StageWideRebuild`: the PR's "develop" rebuild (a stage-wide selection and a host dict over its paths).
- :func:`stage_wide_first_access` / :func:`stage_wide_resolve`: develop's first access and pattern resolution.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import warp as wp

from frameview.fabric.stage import LOCAL_MATRIX, WORLD_MATRIX
from frameview.kernels.transforms import decompose_matrix

from .scenes import PATTERN, Scene


@wp.kernel
def gather_world_poses(
    # inputs
    mats: wp.fabricarray(dtype=wp.mat44d),
    slots: wp.array(dtype=wp.int32),
    # outputs
    pos_out: wp.array(dtype=wp.vec3f),
    quat_out: wp.array(dtype=wp.quatf),
):
    """The stage-wide baseline's read: ``pos_out[i], quat_out[i] = decompose(mats[slots[i]])``."""
    i = wp.tid()
    t, q, _s = decompose_matrix(mats[slots[i]])
    pos_out[i] = wp.vec3f(t)
    quat_out[i] = wp.quatf(q)


class ScopedRebuild:
    """The scoped slot-table rebuild exactly as FabricFrameView runs it on every access, through the view's own
    seam :meth:`FabricFrameView.rebuild_slot_table` (``prepare_for_reuse()``, the count check, fabric arrays rebuilt
    only when buckets changed, and the one ``invert_tag_column`` launch, replayed as a CUDA graph once buckets are
    stable)."""

    def __init__(self, view: Any, parents: bool) -> None:
        self.view, self.parents = view, parents
        self.slots, world = view.rebuild_slot_table(parents)
        self.arrays = {WORLD_MATRIX: world}

    def __call__(self) -> None:
        self.view.rebuild_slot_table(self.parents)

    def selection_size(self) -> int:
        return self.view.selection_size(self.parents)


class StageWideRebuild:
    """The PR's "develop" rebuild: a stage-wide selection and a host dict over every path it holds."""

    def __init__(self, scene: Scene, require: tuple[str, ...], lookup: Sequence[str], write: bool) -> None:
        self.scene, self.require, self.lookup = scene, require, list(lookup)
        self.sel = scene.fabric.select(list(require), write=write)
        self.arrays: dict[str, Any] = {}
        self.slots = wp.empty(max(len(self.lookup), 1), dtype=wp.int32, device=scene.device)

    def __call__(self) -> None:
        sel = self.sel
        try:
            changed = sel.prepare_for_reuse()
            if changed or not self.arrays:
                self.arrays = {name: wp.fabricarray(sel, name) for name in self.require}
            path_to_idx = {str(p): i for i, p in enumerate(self.scene.selection_paths(sel))}
            host = np.fromiter((path_to_idx[p] for p in self.lookup), dtype=np.int32, count=len(self.lookup))
            self.slots.assign(host)
        finally:
            sel.release()

    def selection_size(self) -> int:
        self.sel.prepare_for_reuse()
        n = self.sel.count
        self.sel.release()
        return n


def _as_sdf_paths(selection_paths: Callable[[Any], list[str]]) -> Callable[[Any], list[Any]]:
    """``--baseline-paths sdf``: hand the baseline ``Sdf.Path`` objects, as usdrt's ``GetPaths()`` does."""
    from pxr import Sdf

    def paths(sel: Any) -> list[Any]:
        return [Sdf.Path(p) for p in selection_paths(sel)]

    return paths


def stage_wide_first_access(scene: Scene, pos: wp.array, quat: wp.array) -> None:
    """develop's first access: resolve, find parents, build both slot tables stage-wide, read once."""
    from frameview import resolve_prim_paths

    fabric = scene.fabric
    with fabric.lock:
        paths = resolve_prim_paths(PATTERN, fabric)
        parents = list(dict.fromkeys(p for p in fabric.xform_parents(paths) if p is not None))
        children = StageWideRebuild(scene, (WORLD_MATRIX, LOCAL_MATRIX), paths, write=True)
        children()
        StageWideRebuild(scene, (WORLD_MATRIX,), parents, write=False)()
        wp.launch(
            gather_world_poses,
            dim=len(paths),
            inputs=[children.arrays[WORLD_MATRIX], children.slots],
            outputs=[pos, quat],
            device=scene.device,
        )


def stage_wide_resolve(scene: Scene, sel: Any) -> list[str]:
    """Baseline pattern resolution: list every path of the stage-wide selection and full-match each component."""
    matchers = [re.compile(c) for c in PATTERN[1:].split("/")]
    depth = len(matchers)
    out = []
    sel.prepare_for_reuse()
    try:
        for p in scene.selection_paths(sel):
            path = str(p)
            names = path[1:].split("/")
            if len(names) == depth and all(m.fullmatch(n) for m, n in zip(matchers, names, strict=True)):
                out.append(path)
    finally:
        sel.release()
    return out

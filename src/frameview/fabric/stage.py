# SPDX-License-Identifier: Apache-2.0
"""The slice of Fabric that FabricFrameView uses, as a protocol every provider implements.

Providers (:mod:`frameview.fabric.providers`): :mod:`~frameview.fabric.providers.memory` (embedded Fabric model
over a pxr stage), :mod:`~frameview.fabric.providers.ovstage` (real Fabric without Kit),
:mod:`~frameview.fabric.providers.usdrt` (real Fabric inside Kit / Isaac Sim).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
import warp as wp

__all__ = [
    "COLUMN_TYPES",
    "LOCAL_MATRIX",
    "RESET_XFORM_STACK",
    "WORLD_MATRIX",
    "FabricSelection",
    "FabricStage",
    "column_type",
    "nearest_xform_ancestors",
    "parent_path",
]

WORLD_MATRIX = "omni:fabric:worldMatrix"
"""World matrix attribute: matrix4d, row-vector, translation in ``m[3, 0:3]``."""

LOCAL_MATRIX = "omni:fabric:localMatrix"
"""Local matrix attribute (relative to the nearest xformable ancestor): matrix4d, row-vector."""

RESET_XFORM_STACK = "omni:fabric:resetXformStack"
"""Bool attribute: the prim ignores its ancestors' transforms (world == local)."""

COLUMN_TYPES: dict[str, tuple[Any, tuple]] = {
    "matrix4d": (wp.mat44d, (True, "f8", 16, 0, "matrix")),
    "uint": (wp.uint32, (True, "u4", 1, 0, "")),
    "int": (wp.int32, (True, "i4", 1, 0, "")),
    "double": (wp.float64, (True, "f8", 1, 0, "")),
    "float": (wp.float32, (True, "f4", 1, 0, "")),
}
"""Fabric type name -> (Warp dtype, type tuple of Warp's Fabric array interface) of the columns a selection can
expose (the views select ``matrix4d`` matrices and ``uint`` tags)."""


def column_type(name: str) -> str:
    """The Fabric type of a column the views select: ``"matrix4d"`` for the world/local matrices, else ``"uint"``
    (frameview's tags)."""
    return "matrix4d" if name in (WORLD_MATRIX, LOCAL_MATRIX) else "uint"


def parent_path(path: str) -> str | None:
    """The parent of an absolute prim path (``"/World/a"`` -> ``"/World"``), ``None`` for a root prim's parent."""
    parent = path.rsplit("/", 1)[0]
    return parent or None


def nearest_xform_ancestors(
    paths: Sequence[str], reset: Sequence[bool], missing_prims: Callable[[list[str]], list[str]]
) -> list[str | None]:
    """For each path, its nearest ancestor carrying Fabric matrices (``None``: none, or ``reset[i]``).

    Walks up one level at a time for all paths together: each level asks ``missing_prims`` once about the
    candidates not seen before (a provider's batched :meth:`FabricStage.missing_prims`).

    Args:
        paths: Prim paths.
        reset: Per path, True when the prim resets its transform stack (it has no xform parent).
        missing_prims: Returns the given paths that are not prims carrying Fabric matrices.
    """
    result: list[str | None] = [None] * len(paths)
    pending = {i: parent_path(p) for i, p in enumerate(paths) if not reset[i]}
    carries: dict[str, bool] = {}
    while pending:
        unknown = sorted({c for c in pending.values() if c is not None and c not in carries})
        if unknown:
            missing = set(missing_prims(unknown))
            carries.update((c, c not in missing) for c in unknown)
        nxt: dict[int, str | None] = {}
        for i, cand in pending.items():
            if cand is None:
                continue
            if carries[cand]:
                result[i] = cand
            else:
                nxt[i] = parent_path(cand)
        pending = nxt
    return result


@runtime_checkable
class FabricSelection(Protocol):
    """Prims that carry every required attribute, across all buckets, in Fabric slot order.

    Slot ``k`` is the ``k``-th prim when the buckets are concatenated in the selection's order. Column pointers and
    slots are valid until the next :meth:`prepare_for_reuse`; they change when buckets change.

    Optional hook: a provider whose zero-copy columns must not be written (ovstage: writes through read pointers
    are not change-tracked) also implements ``prepare_for_write() -> bool``, with the same contract as
    :meth:`prepare_for_reuse` but exposing writable (staging) columns. Callers that write through the columns call
    it instead of :meth:`prepare_for_reuse` when present, then :meth:`FabricStage.propagate_world`.
    """

    @property
    def count(self) -> int:
        """Number of prims (slots) selected, as of the last :meth:`prepare_for_reuse`."""
        ...

    def prepare_for_reuse(self) -> bool:
        """Bring the selection up to date with the stage.

        Returns:
            True when its buckets changed (pointers, bucket sizes or membership) since the last call, so that
            fabric arrays built from :attr:`__fabric_arrays_interface__` must be rebuilt. Always True on the first call.
        """
        ...

    @property
    def __fabric_arrays_interface__(self) -> dict[str, Any]:
        """Warp's Fabric array interface (version 1) over the required attributes, for ``wp.fabricarray``."""
        ...

    def release(self) -> None:
        """End of an access: let the provider unpin storage (ovstage read groups). A no-op where nothing is pinned."""
        ...


@runtime_checkable
class FabricStage(Protocol):
    """A Fabric stage as the views need it, and nothing more.

    All calls are made with :attr:`lock` held by the caller (views take it around every access).

    Optional attribute: a provider that follows USD edits into Fabric on its own (the embedded model) keeps a counter
    ``usd_edits`` advanced whenever it notices one; a writer scope that wrote at its call compares it at exit.
    """

    provider: str
    """Provider name: ``"memory"``, ``"ovstage"`` or ``"usdrt"``."""

    device: str
    """Warp device where the columns live (``"cpu"`` or ``"cuda:N"``)."""

    lock: threading.RLock
    """Serialises every call on this stage (real Fabric runtimes are not thread-safe)."""

    def is_alive(self) -> bool:
        """False once the stage the provider attached to is gone."""
        ...

    def missing_prims(self, paths: Sequence[str]) -> list[str]:
        """The paths that are not prims carrying Fabric world and local matrices (empty when all are present)."""
        ...

    def xform_parents(self, paths: Sequence[str]) -> list[str | None]:
        """For each path, its nearest ancestor carrying Fabric matrices, or ``None`` (identity parent)."""
        ...

    def set_uint_attribute(self, paths: Sequence[str], name: str, values: np.ndarray) -> None:
        """Create (if absent) and set a ``uint`` attribute on many prims in one batched call.

        Adding an attribute moves the prims to another bucket and may change other prims' slots.
        """
        ...

    def remove_attribute(self, paths: Sequence[str], name: str) -> None:
        """Remove an attribute from many prims in one batched call; prims without it (or gone) are skipped."""
        ...

    def attribute_names(self, path: str) -> list[str]:
        """Names of the Fabric attributes a prim carries (diagnostics and tests)."""
        ...

    def select(self, require: Sequence[str], *, write: bool = False) -> FabricSelection:
        """A selection over the prims that carry every attribute in ``require``.

        Args:
            require: Attribute names; the interface exposes exactly these columns.
            write: True when the caller writes through the columns (read-write access).
        """
        ...

    def visibility(self, paths: Sequence[str]) -> np.ndarray:
        """Computed visibility of many prims, ``(n,)`` bool, in one batched host call: False where the prim or an
        ancestor holds the ``visibility`` opinion ``invisible`` in Fabric (see :mod:`frameview.visibility`)."""
        ...

    def set_visibility(self, paths: Sequence[str], visible: np.ndarray) -> None:
        """Make prims visible or invisible in Fabric (never in USD), with ``MakeVisible`` / ``MakeInvisible``
        semantics (:func:`frameview.visibility.plan_visibility`), in one batched host call. Providers whose Fabric
        holds the computed ``_worldVisibility`` bring it up to date under every prim whose opinion changed.

        A host path (tools, reset-time randomisation), not the reset hot path.
        """
        ...

    def propagate_world(self, selection: FabricSelection, slots: wp.array) -> None:
        """After a writer set consistent local and world matrices at ``slots`` of ``selection``, bring the
        world matrices of their descendants up to date.

        Providers that stage writes (``prepare_for_write``) commit the staged matrices to Fabric here. The write path
        hands ``slots`` over as a host (CPU) int32 array: the providers that need this call work on the host.
        """
        ...

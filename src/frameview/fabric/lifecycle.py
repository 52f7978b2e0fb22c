# SPDX-License-Identifier: Apache-2.0
"""The life of a :class:`~frameview.fabric.view.FabricFrameView`: its state, and the tag removals deferred by views
garbage-collected during another access to their stage."""

from __future__ import annotations

import contextlib
import enum
import weakref
from collections.abc import Callable
from typing import Any

from .epoch import layout_changed

__all__ = ["DEFERRED_TAGS", "DeferredTagRemoval", "Lifecycle"]


class Lifecycle(enum.Enum):
    """Where a :class:`~frameview.fabric.view.FabricFrameView` stands: only an ``OPEN`` view has tags on the stage to
    remove."""

    BUILDING = "building"  # until the prims are tagged: nothing to clean up (close() and __del__ do nothing)
    OPEN = "open"  # tags on the stage: close() removes them, or __del__ does (or defers it) for a dropped view
    CLOSED = "closed"  # tags removed, or their removal handed to the DeferredTagRemoval


class DeferredTagRemoval:
    """The tag removals of views garbage-collected during another access to their stage.

    Removing a view's tags in the middle of an access would move bucket columns under that access, so ``__del__``
    calls :meth:`defer` instead; the stage's next access (a view's construction, refresh or release, holding the
    stage's lock and using no selection of it) calls :meth:`flush`. Entries hold the stage weakly: a stage that is
    gone takes its tags with it.
    """

    def __init__(self) -> None:
        self._pending: list[tuple[Callable[[], Any], tuple[str, ...], str, tuple[str, ...], str]] = []

    def defer(
        self, fabric: Any, paths: tuple[str, ...], tag: str, parent_paths: tuple[str, ...], parent_tag: str
    ) -> None:
        """Remove ``tag`` from ``paths`` and ``parent_tag`` from ``parent_paths`` at ``fabric``'s next access."""
        try:
            ref: Callable[[], Any] = weakref.ref(fabric)
        except TypeError:
            ref = (lambda f: lambda: f)(fabric)
        self._pending.append((ref, paths, tag, parent_paths, parent_tag))

    def flush(self, fabric: Any) -> None:
        """Do the removals deferred on ``fabric`` (and drop those of stages that are gone); the caller holds its lock
        and is not inside an access: no selection of this stage is in use."""
        if not self._pending:
            return
        for entry in list(self._pending):
            target = entry[0]()
            if target is not None and target is not fabric:
                continue
            with contextlib.suppress(ValueError):
                self._pending.remove(entry)
            if target is not None and fabric.is_alive():
                _ref, paths, tag, parent_paths, parent_tag = entry
                fabric.remove_attribute(paths, tag)
                if parent_paths:
                    fabric.remove_attribute(parent_paths, parent_tag)
                layout_changed(fabric)


DEFERRED_TAGS = DeferredTagRemoval()
"""Process-wide: one list for every stage (a view collected during an access has no other place to leave it)."""

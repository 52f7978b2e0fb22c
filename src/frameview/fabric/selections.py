# SPDX-License-Identifier: Apache-2.0
"""How a :class:`~frameview.fabric.view.FabricFrameView` opens each access: its scoped selections brought up to date,
their counts checked (a mismatch raises naming the lost prims), the fabric arrays rebuilt only if buckets changed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import warp as wp

from .epoch import LayoutEpoch, layout_changed
from .lifecycle import DEFERRED_TAGS
from .stage import LOCAL_MATRIX, WORLD_MATRIX, FabricSelection

__all__ = ["SelectionsMixin", "check_column", "plain_column"]


def check_column(fabric: Any, name: str, array: wp.fabricarray, tag: bool) -> None:
    """Raise unless column ``name`` has the dtype the view's kernels are compiled for (``uint32`` tags, ``mat44d``
    matrices).

    The kernels take their columns generically: launched with another dtype, Warp would add an overload to the
    module of every Fabric view, fail to compile it, and keep it there, so that every later Fabric view of the process
    (of any provider) failed to build its kernels too. A provider that hands over another type is refused here,
    before any launch.

    Raises:
        TypeError: The column has another dtype (the message names the provider and the column).
    """
    expected = wp.uint32 if tag else wp.mat44d
    if not wp.types.types_equal(array.dtype, expected):
        provider = getattr(fabric, "provider", type(fabric).__name__)
        raise TypeError(
            f"Fabric provider {provider!r}: column {name!r} has dtype {wp.types.type_repr(array.dtype)}, expected "
            f"{wp.types.type_repr(expected)}; this provider's version is not supported (python -m frameview "
            f"reports the versions in use)"
        )


def plain_column(sel: FabricSelection, name: str, array: wp.fabricarray) -> Any:
    """Attribute ``name`` of ``sel`` as the reset path's kernels index it: a plain Warp array over its one bucket
    when the selection spans one bucket (its elements then lie slot after slot at one address), else ``array``.

    Indexing a fabric array finds the element's bucket first, a load from the bucket table that every thread waits
    for; a plain array's address is a launch parameter (H200: the reset's three launches 14.2 -> 12.6 us,
    perf/RESULTS.md). It is as valid as ``array``: both are made from the same interface and replaced together when
    the selection changes (and a launch captured in the caller's graph compares the layout epoch before using either,
    :mod:`.epoch`)."""
    attrib = sel.__fabric_arrays_interface__["attribs"][name]
    pointers, counts = attrib["pointers"], attrib["counts"]
    if len(pointers) != 1 or not pointers[0] or not counts[0]:
        return array
    return wp.array(ptr=int(pointers[0]), shape=(int(counts[0]),), dtype=array.dtype, device=array.device)


class SelectionsMixin:
    """The access plumbing of :class:`~frameview.fabric.view.FabricFrameView`: selections, counts, fabric arrays."""

    _fabric: Any
    _sel: FabricSelection
    _parent_sel: FabricSelection
    _tag: str
    _parent_tag: str
    _parent_paths: tuple[str, ...]
    _arrays: dict[str, Any]
    _columns: dict[str, Any]
    _launches: dict[Any, Any]
    _slots_fresh: bool
    _view_slots_fresh: bool
    _epoch: LayoutEpoch

    if TYPE_CHECKING:

        @property
        def count(self) -> int: ...

        def _outside_capture(self, what: str) -> None: ...

        @property
        def prim_paths(self) -> tuple[str, ...]: ...

    def _refresh(self, parents: bool, write: bool = False) -> None:
        """Bring the selections up to date, check their counts, rebuild fabric arrays only if buckets changed.

        ``write``: this access writes through the prims' columns (providers with read-only zero-copy columns then
        expose writable staging columns, see ``FabricSelection.prepare_for_write``).
        """
        fabric = self._fabric
        if not fabric.is_alive():
            raise RuntimeError(f"{self!r}: its stage was released; create the view again on a live stage")
        DEFERRED_TAGS.flush(fabric)
        self._refresh_one(self._sel, self.count, "prims", (self._tag, WORLD_MATRIX, LOCAL_MATRIX), write)
        if parents and self._parent_paths:
            attrs = (self._parent_tag, WORLD_MATRIX, LOCAL_MATRIX)
            self._refresh_one(self._parent_sel, len(self._parent_paths), "parents", attrs)
        if self._epoch.dirty:  # the layout changed during a capture: what it captures would compare a stale word
            self._outside_capture("its records of the stage's layout")
            self._epoch.flush()

    def _refresh_one(
        self, sel: FabricSelection, expected: int, what: str, attrs: tuple[str, ...], write: bool = False
    ) -> None:
        prepare_for_write = getattr(sel, "prepare_for_write", None) if write else None
        changed = prepare_for_write() if prepare_for_write is not None else sel.prepare_for_reuse()
        if changed:
            layout_changed(self._fabric)  # graphs the caller captured against the old layout fail from now on
        if sel.count != expected:
            sel.release()
            lost = self._untagged(self.prim_paths if what == "prims" else self._parent_paths, attrs[0])
            reason = getattr(self._fabric, "lost_reason", lambda _path: None)
            named = [f"{path!r} ({reason(path) or 'removed, deactivated, re-parented or no longer xformable'})"
                     for path in lost]  # fmt: skip
            raise RuntimeError(
                f"{self!r}: Fabric now holds {sel.count} of its {expected} tagged {what}; lost since the view was "
                f"created: {', '.join(named) or 'unknown prims'}; recreate the view"
            )
        prefix = "" if what == "prims" else "parent:"
        if changed or prefix + attrs[0] not in self._arrays:
            self._outside_capture("its Fabric arrays")  # the callers release the selections in a finally
            for name in attrs:
                array = wp.fabricarray(sel, name)
                check_column(self._fabric, name, array, tag=name == attrs[0])
                self._arrays[prefix + name] = array
                self._columns[prefix + name] = plain_column(sel, name, array)
            self._launches.clear()
            self._slots_fresh = False  # a write of a view without nesting inverts its slot tables again
            self._view_slots_fresh = False  # and a masked read the view's table

    def _untagged(self, paths: Sequence[str], tag: str, limit: int = 3) -> list[str]:
        """Up to ``limit`` of ``paths`` that no longer carry ``tag`` (error path only: one lookup per prim)."""
        lost = []
        for path in paths:
            try:
                tagged = tag in self._fabric.attribute_names(path)
            except Exception:  # a prim gone from Fabric: any provider error means "not tagged"
                tagged = False
            if not tagged:
                lost.append(path)
                if len(lost) == limit:
                    break
        return lost

    def _release_selections(self) -> None:
        self._sel.release()
        self._parent_sel.release()

# SPDX-License-Identifier: Apache-2.0
"""How a :class:`~frameview.fabric.view.FabricFrameView` opens each access: its scoped selections brought up to date,
their counts checked (a mismatch raises naming the lost prims), the fabric arrays rebuilt only if buckets changed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import warp as wp

from .._core.device_errors import outside_capture
from .epoch import UNGUARDED, LayoutEpoch, layout_changed
from .lifecycle import DEFERRED_TAGS
from .stage import LOCAL_MATRIX, WORLD_MATRIX, FabricSelection

if TYPE_CHECKING:
    from .._core.device_errors import DeviceErrors
    from .launches import FabricLaunches

__all__ = ["FabricData", "check_column", "plain_column"]


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


class FabricData:
    """The Fabric data of one :class:`~frameview.fabric.view.FabricFrameView`: its two tag-scoped selections, their
    fabric arrays, the stage's layout epoch and the slot tables inverted from the tag columns.

    Each access opens with :meth:`refresh` (selections brought up to date, counts checked, a mismatch raises naming
    the lost prims, fabric arrays rebuilt only if buckets changed: then the view's launches are dropped and the slot
    tables marked stale) and ends with :meth:`release`.

    Args:
        fabric: The provider's stage (a FabricStage).
        label: The view's ``repr``, for error messages.
        prim_paths: The view's prims, in view order.
        tag: The index tag the view's prims carry.
        parent_paths: The parents a write reads (``FabricFrameView.parent_paths``).
        parent_tag: Their index tag.
        sel: The writable selection of the view's prims (tag, world and local matrices).
        parent_sel: The read selection of the parents.
        epoch: The stage's layout epoch.
        errors: The view's status word (whether the device is capturing).
        device: The view's Warp device.
        launches: The view's launches, dropped when the fabric arrays are rebuilt.

    Attributes:
        arrays: Fabric arrays by attribute name (``"parent:"`` + name for the parents').
        columns: The same as the reset path's kernels index them (:func:`plain_column`).
        slots: (N,) int32, view index -> Fabric slot of the view's selection.
        parent_slots: (P,) int32, parent index -> slot of the parents' selection.
        row_parent_slots: (N,) int32, view index -> its parent's slot (a write of a view without nesting verifies
            each entry it uses and repairs stale ones).
        req_row: (N,) int32, view index -> request row, -1: not written (a view without nesting keeps it -1 between
            calls: its claims).
        slots_fresh: Whether the slot tables were inverted since the fabric arrays were last rebuilt.
        view_slots_fresh: The same for :attr:`slots` alone (masked reads need only that one).
        no_index, no_mask, no_table: Empty arrays standing for absent arguments.

    The slot tables are the seams the tests scramble (a stale table costs time, never a row).
    """

    __slots__ = ("arrays", "columns", "count", "device", "epoch", "errors", "fabric", "label", "launches",
                 "no_index", "no_mask", "no_table", "parent_paths", "parent_sel", "parent_slots", "parent_tag",
                 "prim_paths", "req_row", "row_parent_slots", "sel", "slots", "slots_fresh", "tag",
                 "view_slots_fresh")  # fmt: skip

    def __init__(
        self,
        fabric: Any,
        label: str,
        prim_paths: tuple[str, ...],
        tag: str,
        parent_paths: tuple[str, ...],
        parent_tag: str,
        sel: FabricSelection,
        parent_sel: FabricSelection,
        epoch: LayoutEpoch,
        errors: DeviceErrors,
        device: Any,
        launches: FabricLaunches,
    ) -> None:
        self.fabric, self.label = fabric, label
        self.prim_paths, self.count, self.tag = prim_paths, len(prim_paths), tag
        self.parent_paths, self.parent_tag = parent_paths, parent_tag
        self.sel, self.parent_sel = sel, parent_sel
        self.epoch, self.errors, self.launches = epoch, errors, launches
        dev = self.device = device
        n = max(self.count, 1)
        self.arrays: dict[str, Any] = {}
        self.columns: dict[str, Any] = {}
        self.slots = wp.empty(n, dtype=wp.int32, device=dev)
        self.parent_slots = wp.empty(max(len(parent_paths), 1), dtype=wp.int32, device=dev)
        self.row_parent_slots = wp.full(n, -1, dtype=wp.int32, device=dev)
        self.req_row = wp.full(n, -1, dtype=wp.int32, device=dev)
        self.slots_fresh = False
        self.view_slots_fresh = False
        self.no_index = wp.empty(0, dtype=wp.int32, device=dev)
        self.no_mask = wp.empty(0, dtype=wp.bool, device=dev)
        self.no_table = wp.empty((0, 0), dtype=wp.int32, device=dev)

    def guard(self, every_launch: bool = False) -> list:
        """The ``layout, expected`` arguments of a launch (:mod:`frameview.fabric.epoch`): the stage's epoch word, and
        its value for a launch captured in the caller's graph, which compares them first at every replay; -1 for a
        launch inside a view call (the call brought the view's Fabric arrays up to date, and the epoch's word).

        ``every_launch``: on CUDA, the value in every launch, captured or not, without asking whether the stream
        captures (a driver call, ~1 us of host time): for launches that are never part of the view's own graphs and
        whose kernel loads the word beside the mask (no GPU time; on the CPU, where nothing is captured, a load per
        row)."""
        epoch = self.epoch
        if (every_launch and self.device.is_cuda) or self.errors.is_capturing():
            return [epoch.word, epoch.value]
        return [epoch.word, UNGUARDED]

    def refresh(
        self,
        parents: bool,
        write: bool = False,
        read: tuple[str, ...] | None = None,
        parent_read: tuple[str, ...] | None = None,
    ) -> None:
        """Bring the selections up to date, check their counts, rebuild fabric arrays only if buckets changed.

        ``write``: this access writes through the prims' columns (providers with read-only zero-copy columns then
        expose writable staging columns, see ``FabricSelection.prepare_for_write``).
        ``read``: the only columns of the prims this access reads (providers that gather columns, as ovstage does on
        a CUDA device, then gather just those: ``prepare_for_read``); the launches of the access must not read the
        others. ``parent_read``: the same for the parents' selection.
        """
        fabric = self.fabric
        if not fabric.is_alive():
            raise RuntimeError(f"{self.label}: its stage was released; create the view again on a live stage")
        DEFERRED_TAGS.flush(fabric)
        self.refresh_one(self.sel, self.count, "prims", (self.tag, WORLD_MATRIX, LOCAL_MATRIX), write, read)
        if parents and self.parent_paths:
            attrs = (self.parent_tag, WORLD_MATRIX, LOCAL_MATRIX)
            self.refresh_one(self.parent_sel, len(self.parent_paths), "parents", attrs, read=parent_read)
        if self.epoch.dirty:  # the layout changed during a capture: what it captures would compare a stale word
            self._outside_capture("its records of the stage's layout")
            self.epoch.flush()

    def refresh_one(
        self,
        sel: FabricSelection,
        expected: int,
        what: str,
        attrs: tuple[str, ...],
        write: bool = False,
        read: tuple[str, ...] | None = None,
    ) -> None:
        """:meth:`refresh` for one selection (``what``: ``"prims"`` or ``"parents"``; ``attrs``: its tag first)."""
        prepare_for_write = getattr(sel, "prepare_for_write", None) if write else None
        prepare_for_read = getattr(sel, "prepare_for_read", None) if read and not write else None
        if prepare_for_write is not None:
            changed = prepare_for_write()
        elif prepare_for_read is not None:
            changed = prepare_for_read(read)
        else:
            changed = sel.prepare_for_reuse()
        if changed:
            layout_changed(self.fabric)  # graphs the caller captured against the old layout fail from now on
        if sel.count != expected:
            sel.release()
            lost = self._untagged(self.prim_paths if what == "prims" else self.parent_paths, attrs[0])
            reason = getattr(self.fabric, "lost_reason", lambda _path: None)
            named = [f"{path!r} ({reason(path) or 'removed, deactivated, re-parented or no longer xformable'})"
                     for path in lost]  # fmt: skip
            raise RuntimeError(
                f"{self.label}: Fabric now holds {sel.count} of its {expected} tagged {what}; lost since the view was "
                f"created: {', '.join(named) or 'unknown prims'}; recreate the view"
            )
        prefix = "" if what == "prims" else "parent:"
        if changed or prefix + attrs[0] not in self.arrays:
            self._outside_capture("its Fabric arrays")  # the callers release the selections in a finally
            for name in attrs:
                array = wp.fabricarray(sel, name)
                check_column(self.fabric, name, array, tag=name == attrs[0])
                self.arrays[prefix + name] = array
                self.columns[prefix + name] = plain_column(sel, name, array)
            self.launches.clear()
            self.slots_fresh = False  # a write of a view without nesting inverts its slot tables again
            self.view_slots_fresh = False  # and a masked read the view's table

    def _outside_capture(self, what: str) -> None:
        outside_capture(self.label, self.device, self.errors, what)

    def _untagged(self, paths: Sequence[str], tag: str, limit: int = 3) -> list[str]:
        """Up to ``limit`` of ``paths`` that no longer carry ``tag`` (error path only: one lookup per prim)."""
        lost = []
        for path in paths:
            try:
                tagged = tag in self.fabric.attribute_names(path)
            except Exception:  # a prim gone from Fabric: any provider error means "not tagged"
                tagged = False
            if not tagged:
                lost.append(path)
                if len(lost) == limit:
                    break
        return lost

    def release(self) -> None:
        """End an access: release both selections."""
        self.sel.release()
        self.parent_sel.release()

    def clear(self) -> None:
        """Drop the fabric arrays and whatever the selections keep on the stage (the view is closed)."""
        self.arrays.clear()
        self.columns.clear()
        for sel in (self.sel, self.parent_sel):
            close = getattr(sel, "close", None)
            if close is not None and self.fabric.is_alive():
                close()

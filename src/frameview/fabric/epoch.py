# SPDX-License-Identifier: Apache-2.0
"""A stage's layout epoch: how a view's launches captured in the caller's CUDA graph find out, on the device, that
the Fabric layout they were captured against is gone.

A launch captured in the caller's graph keeps raw Fabric addresses (bucket columns, the fabric arrays' bucket
tables), and a graph is replayed without any host code of the view. When prims are added, removed or re-tagged (a
view created or closed), Fabric moves those columns, and a replay would read and write freed memory. So every Fabric
stage has one counter, advanced at each layout change and mirrored into one device word; a launch captured in the
caller's graph takes the counter's value at capture (``expected``) and compares the word first: on a mismatch it
neither reads nor writes Fabric, reports :data:`~frameview._core.device_errors.CODE_STALE_LAYOUT` (raised by
``view.check()`` or a later call) and gives NaN rows. The view's own launches and graphs pass ``expected = -1`` and
skip the comparison: they run inside a view call, after the call brought the view's arrays up to date.
"""

from __future__ import annotations

import weakref
from typing import Any

import warp as wp

from .._core.host import CAPTURE_LOCK

__all__ = ["UNGUARDED", "LayoutEpoch", "is_stale", "layout_changed", "layout_epoch"]

UNGUARDED = -1
"""``expected`` of a launch made inside a view call (no comparison with the device word)."""


class LayoutEpoch:
    """The layout counter of one Fabric stage and its device word (and the count of the views' pose writes).

    Args:
        device: The stage's Warp device.
        exact: The provider advances it at every change of its buckets (the embedded model). Otherwise the views
            advance it at the changes they make (tags) or see (a selection that changed at a view's call).
    """

    def __init__(self, device: Any, *, exact: bool = False) -> None:
        self.exact = exact
        self.value = 0
        self.writes = 0
        """The pose writes frameview's views made to the stage (each Fabric write counts one): a writer scope that
        wrote at its call compares it at exit (:mod:`frameview.writers`)."""
        self._device = wp.get_device(device)
        self.word = wp.zeros(1, dtype=wp.int32, device=self._device)
        self._written = 0

    @property
    def dirty(self) -> bool:
        """The device word lags :attr:`value` (it advanced while the current stream was capturing)."""
        return self._written != self.value

    def advance(self) -> None:
        """The layout changed: every launch captured against the old one fails from now on."""
        self.value += 1
        self.flush()

    def flush(self) -> None:
        """Write :attr:`value` into the device word, and wait until it is there (any stream's later replay sees it);
        deferred while the current stream captures (no host wait then), to the next call outside a capture."""
        if not self.dirty:
            return
        if self._device.is_cuda and self._device.stream.is_capturing:
            return
        with CAPTURE_LOCK:  # the wait takes its turn behind the views' own captures (frameview._core.host)
            self.word.fill_(self.value)
            if self._device.is_cuda:
                wp.synchronize_stream(self._device.stream)
        self._written = self.value


_EPOCHS: weakref.WeakKeyDictionary[Any, LayoutEpoch] = weakref.WeakKeyDictionary()


def layout_epoch(fabric: Any) -> LayoutEpoch:
    """The layout epoch of the Fabric stage ``fabric``: its own (``fabric.layout_epoch``, exact) where the provider
    keeps one, else one kept here per stage object, advanced by the views (:func:`layout_changed`)."""
    own = getattr(fabric, "layout_epoch", None)
    if own is not None:
        return own
    epoch = _EPOCHS.get(fabric)
    if epoch is None:
        epoch = _EPOCHS[fabric] = LayoutEpoch(fabric.device)
    return epoch


def layout_changed(fabric: Any) -> None:
    """A view changed (tags) or saw (a selection that changed) ``fabric``'s layout: advance the epoch, unless the
    provider keeps an exact one of its own (which advanced already)."""
    epoch = layout_epoch(fabric)
    if not epoch.exact:
        epoch.advance()


@wp.func
def is_stale(layout: wp.array(dtype=wp.int32), expected: int):
    """Whether a launch captured in the caller's CUDA graph replays after the stage's layout changed: the epoch word
    ``layout[0]`` is no longer the ``expected`` value of the capture (:class:`LayoutEpoch`). A launch made inside a
    view call passes ``expected`` -1: never stale, nothing loaded. A stale launch must not touch Fabric."""
    stale = bool(False)
    if expected >= 0:
        stale = layout[0] != expected
    return stale

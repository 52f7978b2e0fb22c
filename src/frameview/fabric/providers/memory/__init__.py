# SPDX-License-Identifier: Apache-2.0
"""The embedded Fabric model: Fabric's bucketed storage in Warp arrays, on the CPU or a CUDA device.

It keeps the semantics of Fabric that the views depend on, so that their Fabric code runs for real without Kit:

- prims live in buckets keyed by (prim type, attribute set); each bucket holds one column per attribute;
- adding or removing an attribute moves the prim to another bucket, and fills the hole it leaves with the
  bucket's last prim (swap-remove), which changes that other prim's slot;
- a selection requires a set of attributes and spans every bucket that carries them; ``prepare_for_reuse()``
  reports whether any of its buckets changed; columns are exposed through ``__fabric_arrays_interface__``;
- attributes are created, set and removed for many prims in one batched call;
- world matrices are computed from local matrices in Warp, level by level of the hierarchy.

A model is populated from a pxr ``Usd.Stage`` (:func:`attach`, one model per (stage, device)) and follows the
stage's structural and xformOp edits through USD change notices, applied lazily on the next access. It can also
be built directly from arrays (:meth:`MemoryFabricStage.from_arrays`) for benchmarks at millions of prims.

The model is split by job: :mod:`.storage` (buckets, swap-remove, raw-column kernels, selections),
:mod:`.hierarchy` (parents, CSR children, descendants, world update), :mod:`.usd_sync` (population and change
notices), :mod:`.opinions` (visibility opinions), :mod:`.model` (the :class:`MemoryFabricStage` facade),
:mod:`.registry` (:func:`attach`) and :mod:`.follow` (the device descendant update of one view).
"""

from __future__ import annotations

from .model import MemoryFabricStage
from .registry import attach
from .storage import MemorySelection

__all__ = ["MemoryFabricStage", "MemorySelection", "attach"]

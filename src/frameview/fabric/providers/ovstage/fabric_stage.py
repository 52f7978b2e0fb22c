# SPDX-License-Identifier: Apache-2.0
"""Real Fabric without Kit: a :class:`~frameview.fabric.stage.FabricStage` over an ``ovstage.Stage``.

How the protocol maps onto ovstage 0.3 (and 0.2.1, whose matrices come as rows of 16 float64 lanes):

- **Tags** are one batched ``write_attribute`` of a ``uint32`` column over a path-list query, sealed at once.
  Paths are validated first (``get_hierarchy`` status): ovstage's default ``UPSERT`` would create a ghost prim at
  an unknown path. Removal is one ``delete_attributes`` over a path-list query, sealed.
- **Selections** keep one ``HAS`` query over every required attribute across accesses (issued again after frameview
  tags or untags prims, after the first matrix write that follows, and when the buckets or the count change) and read
  the columns at the latest ordinal. ovstage returns one read group per (attribute, bucket); the groups of one bucket
  are row-aligned (row ``i`` is the same prim in the tag, world and local groups), so slot ``k`` is the ``k``-th row
  when the buckets are concatenated in read order -- exactly Warp's Fabric array interface, one pointer per bucket.
- **Reads are zero-copy** on the CPU: the interface points into Fabric storage and the groups stay pinned until
  :meth:`OvstageSelection.release`. Pointers are re-read on every access and never cached across accesses.
- **Writes go through staging columns.** Writing into read pointers sticks but is not change-tracked, so
  ``compute_hierarchy`` would ignore it. A selection prepared for writing
  (:meth:`OvstageSelection.prepare_for_write`) gathers its columns into provider-owned buffers; the view writes world
  and local matrices there; :meth:`OvstageFabricStage.propagate_world` releases every pinned read group (a write
  fails while a read overlaps it), hands the written local matrices to ovstage
  (``write_attribute(..., semantic=MATRIX)`` with a row mask) and seals; ovstage's automatic hierarchy update then
  re-derives the world matrices of the written prims and their descendants (``compute_hierarchy`` is O(stage): it
  runs only on stages configured without automatic updates, detected on the first write).
- **Ordinals**: the provider owns a monotonic counter per stage; a tag write uses one ordinal above the write floors
  of the attributes it touches, a matrix write the next ordinal of the counter (when ovstage rejects it because
  someone else sealed a later one, it is made again above the floors ovstage reports); each write seals its
  attributes at its ordinal (``Scope.INCLUDE``) so reads never see an unsealed change.
- **Threads**: one ``threading.RLock`` per ``ovstage.Stage`` serialises every read -> release and
  write -> compute -> seal sequence (ovstage's calls are thread-safe, the sequences are not).
- **CUDA devices**: a read reads only the columns its launches use (``prepare_for_read``) on the host and copies
  each bucket straight from Fabric's host storage into a staging column on the device (index-mapped buckets through
  pinned memory); a write gathers the prims' columns and the parents' tag and world columns that way, and hands the
  written local matrices back from the host (``write_placement="host"``, the default) or as the CUDA column placed on
  the GPU (``"device"``, ovstage >= 0.3). Reads placed on the GPU (``read_placement="device"``) are exposed in place
  when ovstage hands back compact device columns. Which is cheaper was measured, not assumed: docs/ovstage.md.
- **Hierarchy model**: ovstage re-derives world matrices after a write with the process-wide model of its
  ``StageConfig`` (:attr:`OvstageFabricStage.hierarchy_model`); the CPU model (ovstage's default) makes CUDA writes
  several times slower than a GPU model.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np
import ovstage
import warp as wp
from ovstage import AttributeSemantic, HierarchyRelation

try:  # ovstage >= 0.3: device placements (experimental in ovstage)
    from ovstage import Placement
except ImportError:  # ovstage 0.2.1: host writes only
    Placement = None

from ...._core.host import to_numpy
from ....visibility import compute_visibility
from ...stage import LOCAL_MATRIX, RESET_XFORM_STACK, WORLD_MATRIX, nearest_xform_ancestors
from .. import ovstage_version_problem
from .core import (
    STATUS_OK,
    USD_PATH,
    OvstageVisibilityTree,
    StageCore,
)
from .selection import (
    OvstageSelection,
)

__all__ = ["RESET_XFORM_STACK", "USD_PATH", "OvstageFabricStage", "OvstageSelection", "attach"]

logger = logging.getLogger(__name__)

_DL_CUDA = 2  # DLPack's kDLCUDA

_MODEL_NAMES = {"CPU_INCREMENTAL": "cpu-incremental", "GPU_INCREMENTAL": "gpu-incremental", "GPU_GLOBAL": "gpu-global",
                "DEFAULT_CPU": "cpu-incremental", "DEFAULT_GPU": "gpu-incremental"}  # fmt: skip


def hierarchy_model_name(stage: ovstage.Stage) -> str:
    """The hierarchy computation model of ``stage``'s process configuration, as ``"cpu-incremental"``,
    ``"gpu-incremental"`` or ``"gpu-global"`` (``"cpu-incremental"`` when unset: ovstage's process default;
    ``"unknown"`` when this ovstage cannot tell)."""
    try:
        model = stage.config.runtime_default_hierarchy_computation_model
    except (AttributeError, RuntimeError, ovstage.OvstageError):
        return "unknown"
    if model is None or getattr(model, "name", "") == "RUNTIME_DEFAULT":
        return "cpu-incremental"
    return _MODEL_NAMES.get(getattr(model, "name", ""), str(model).lower())


class OvstageFabricStage:
    """Fabric through ovstage, for FabricFrameView. Implements :class:`frameview.fabric.stage.FabricStage`.

    Get it with :func:`attach` (one per (stage, device); the lock is shared by every device of one stage).
    Callers hold :attr:`lock` around every access; the methods take it too, so direct calls are safe.

    Example:
        >>> import ovstage  # doctest: +SKIP
        >>> stage = ovstage.Stage("scene")
        >>> ovstage.population.open_usd(stage, "/abs/path/scene.usda", ordinal=1)
        >>> view = fv.FabricFrameView("/World/envs/env_.*/Camera", stage=stage, device="cpu")
        >>> view.backend
        'fabric:ovstage'
    """

    provider = "ovstage"

    def __init__(self, core: StageCore, device: str) -> None:
        self._core = core
        dev = wp.get_device(device)
        self.device = str(dev)
        self._zero_copy = dev.is_cpu
        self._write_placement = "host"
        self._read_placement = "host"
        self.lock = core.lock

    @property
    def read_placement(self) -> str:
        """Where a read on this provider asks ovstage for the columns.

        ``"host"`` (the default): host columns, zero-copy on the CPU, gathered into pinned memory and uploaded in
        one copy per column on a CUDA device. ``"device"`` (CUDA providers, ovstage >= 0.3): reads placed on the
        view's GPU, exposed in place when ovstage hands back compact device columns (the column is current there
        after device-placed writes), else read on the host as above.

        Raises:
            ValueError: An unknown value, or ``"device"`` on a CPU provider or an ovstage without ``Placement``.
        """
        return self._read_placement

    @read_placement.setter
    def read_placement(self, value: str) -> None:
        self._read_placement = self._checked_placement("read_placement", value)

    def read_placement_on_device(self) -> Any:
        """The ``ovstage.Placement`` of a read on this provider's GPU (``read_placement == "device"``), else None."""
        if self._read_placement != "device":
            return None
        return Placement(device_type=_DL_CUDA, device_id=wp.get_device(self.device).ordinal)

    def _checked_placement(self, what: str, value: str) -> str:
        if value not in ("device", "host"):
            raise ValueError(f"{what}: expected 'device' or 'host', got {value!r}")
        if value == "device" and (wp.get_device(self.device).is_cpu or Placement is None):
            why = "a CPU provider" if Placement is not None else f"ovstage {ovstage.__version__} (no ovstage.Placement)"
            raise ValueError(f"{what}: 'device' needs a CUDA provider and ovstage >= 0.3, got {why}")
        return value

    @property
    def write_placement(self) -> str:
        """How a write on this provider hands the written local matrices to ovstage.

        ``"host"`` (the default): a host copy of the staged column, written without a placement; ovstage re-derives
        the world matrices with the stage's hierarchy model (:attr:`hierarchy_model`). ``"device"`` (CUDA providers,
        ovstage >= 0.3): the staged CUDA column itself, as a DLPack source placed on the view's GPU, ordered after
        the view's kernels on its stream. Measured on an H200 (ovstage 0.3, GPU hierarchy model, 256 of 8192 robots
        written): ``"host"`` 2.2 ms, ``"device"`` 2.7 ms per reset write (``perf/bench_ovstage.py``).

        Raises:
            ValueError: An unknown value, or ``"device"`` on a CPU provider or an ovstage without ``Placement``.
        """
        return self._write_placement

    @write_placement.setter
    def write_placement(self, value: str) -> None:
        self._write_placement = self._checked_placement("write_placement", value)

    @property
    def hierarchy_model(self) -> str:
        """The hierarchy computation model ovstage uses to re-derive world matrices after a write on this stage.

        Process-wide, fixed by the ``StageConfig`` of the first live stage: ``"cpu-incremental"`` (the default of a
        process that never asked for another), ``"gpu-incremental"`` or ``"gpu-global"``. Writes on a CUDA device
        cost about 15x more under the CPU model (docs/ovstage.md); create the first stage with
        ``ovstage.Stage(name, ovstage.StageConfig(runtime_default_hierarchy_computation_model=
        ovstage.HierarchyComputationModel.GPU_INCREMENTAL))``, as Isaac Lab does.
        """
        return hierarchy_model_name(self._core.stage)

    def _placement(self) -> Any:
        """The ``ovstage.Placement`` of a device-placed write on this provider's GPU, else ``None``."""
        if self._write_placement != "device":
            return None
        dev = wp.get_device(self.device)
        return Placement(device_type=_DL_CUDA, device_id=dev.ordinal, stream=int(wp.get_stream(dev).cuda_stream))

    @property
    def zero_copy(self) -> bool:
        """True when read accesses expose Fabric storage in place (the default on the CPU).

        Set it to False on a CPU provider to make reads gather into staging columns, as a CUDA device does on every
        access (``perf/bench_ovstage.py`` compares the two); it applies from the next access. Writes always go
        through staging columns.

        Raises:
            ValueError: Set to True on a CUDA provider (ovstage columns live on the host).
        """
        return self._zero_copy

    @zero_copy.setter
    def zero_copy(self, value: bool) -> None:
        if value and not wp.get_device(self.device).is_cpu:
            raise ValueError(f"zero_copy: expected False on {self.device} (ovstage columns live on the host), got True")
        self._zero_copy = bool(value)

    @property
    def core(self) -> StageCore:
        """Internal: the state every provider of this ``ovstage.Stage`` shares (lock, ordinals, path lists)."""
        return self._core

    @property
    def ovstage_stage(self) -> ovstage.Stage:
        """The ``ovstage.Stage`` this provider serves."""
        return self._core.stage

    @property
    def ordinal(self) -> int:
        """The last ordinal this provider wrote and sealed on the stage."""
        return self._core.ordinal

    def _path_list(self, paths: Sequence[str]) -> Any:
        return self._core.path_list(paths)

    # ---------------------------------------------------------------- FabricStage protocol

    def is_alive(self) -> bool:
        return self._core.alive()

    def missing_prims(self, paths: Sequence[str]) -> list[str]:
        with self.lock:
            self._core.check_alive()
            paths = [str(p) for p in paths]
            if not paths:
                return []
            missing = self._core.missing_mask(self._path_list(paths), len(paths), [WORLD_MATRIX, LOCAL_MATRIX])
            return [paths[i] for i in np.flatnonzero(missing)]

    def xform_parents(self, paths: Sequence[str]) -> list[str | None]:
        with self.lock:
            self._core.check_alive()
            paths = [str(p) for p in paths]
            if not paths:
                return []
            pos, flags = self._core.rows(self._path_list(paths), [RESET_XFORM_STACK], values=True)[RESET_XFORM_STACK]
            reset = np.zeros(len(paths), dtype=bool)
            if pos.size:
                reset[pos] = np.asarray(flags, dtype=bool).reshape(pos.size)
            return nearest_xform_ancestors(paths, reset, self.missing_prims)

    def set_uint_attribute(self, paths: Sequence[str], name: str, values: np.ndarray) -> None:
        with self.lock:
            self._core.check_alive()
            core = self._core
            paths = [str(p) for p in paths]
            values = np.ascontiguousarray(values, dtype=np.uint32)
            if values.shape != (len(paths),):
                raise ValueError(f"values: expected shape ({len(paths)},), got {values.shape}")
            if not paths:
                return
            core.release_pinned()
            tok = core.token(name)
            plist = self._path_list(paths)
            absent = self._core.missing_mask(plist, len(paths), [USD_PATH])
            if np.any(absent):
                bad = [paths[i] for i in np.flatnonzero(absent)[:3]]
                raise KeyError(
                    f"prims not on the ovstage stage: {bad} ({int(np.count_nonzero(absent))} of {len(paths)}); "
                    f"nothing was written (ovstage would create them)"
                )
            ordinal = core.next_ordinal([tok])
            core.generation += 1
            core.written = False  # the next matrix write changes the storage again (see StageCore.written)
            with core.stage.query_from_path_list(plist) as query:
                core.stage.write_attribute(query, tok, ordinal, values, is_array=False).wait()
            core.seal(ordinal, [tok])

    def remove_attribute(self, paths: Sequence[str], name: str) -> None:
        with self.lock:
            if not self._core.alive():
                return
            core = self._core
            paths = [str(p) for p in paths]
            if not paths:
                return
            core.release_pinned()
            tok = core.token(name)
            ordinal = core.next_ordinal([tok])
            core.generation += 1
            core.written = False  # the next matrix write changes the storage again (see StageCore.written)
            with core.stage.query_from_path_list(self._path_list(paths)) as query:
                core.stage.delete_attributes(query, [tok], ordinal).wait()
            core.seal(ordinal, [tok])

    def attribute_names(self, path: str) -> list[str]:
        with self.lock:
            self._core.check_alive()
            core = self._core
            with core.pd.create_path_list_from_strings([str(path)]) as plist:
                if self._core.statuses(plist)[0] != STATUS_OK:
                    raise KeyError(f"prim {path!r} is not on the ovstage stage")
                with core.stage.query_from_path_list(plist) as query:
                    tokens = query.result().attributes
            return sorted(core.pd.token_to_string(t) for t in tokens)

    def select(self, require: Sequence[str], *, write: bool = False) -> OvstageSelection:
        return OvstageSelection(self, require, write)

    def propagate_world(self, selection: Any, slots: wp.array) -> None:
        """Hand the local matrices staged at ``slots`` to Fabric and seal them; world matrices follow.

        A ``localMatrix`` write (``semantic=MATRIX``) makes ovstage update the world matrices of the written prims
        and of all their descendants by itself (its automatic, incremental hierarchy update), so neither the staged
        world matrices nor a stage-wide ``compute_hierarchy`` are needed: the cost is O(written prims + their
        descendants). The first write on a stage checks that the world matrices did follow; on a stage configured
        without automatic updates it switches to ``compute_hierarchy`` after every write (logged once).
        Every read group pinned on the stage is released first (a write fails while a read overlaps it).
        """
        if not isinstance(selection, OvstageSelection):
            raise TypeError(f"selection: expected an OvstageSelection, got {type(selection).__name__}")
        if LOCAL_MATRIX not in selection.require:
            raise ValueError(f"selection: expected a selection requiring {LOCAL_MATRIX!r}, got {selection.require}")
        with self.lock:
            self._core.check_alive()
            if not selection.staged or selection.query is None:
                raise RuntimeError(
                    "propagate_world: the selection was not prepared for writing; call selection.prepare_for_write() "
                    "before writing through its columns (ovstage read pointers are read-only)"
                )
            n = selection.count
            if n == 0 or slots.shape[0] == 0:
                return
            written = np.zeros(n + (-n % 64), dtype=bool)
            picked = to_numpy(slots).astype(np.int64, copy=False)
            if picked.min() < 0 or picked.max() >= n:
                raise IndexError(f"slots: expected values in [0, {n}), got [{picked.min()}, {picked.max()}]")
            written[picked] = True
            core = self._core
            core.release_pinned()
            kwargs: dict[str, Any] = {}
            if not written[:n].all():  # a 64-bit word per 64 slots, bit k of word w = slot 64 w + k
                words = np.packbits(written, bitorder="little").view(np.uint64)
                kwargs = {"mask": words.tolist(), "count": n}
            lm, wm = core.token(LOCAL_MATRIX), core.token(WORLD_MATRIX)
            placed = self._placement()
            if placed is not None:  # the staged CUDA column itself, after the view's kernels on its stream
                local: Any = selection.staged_column(LOCAL_MATRIX)
                kwargs.update(placement=placed, cuda_stream=placed.stream)
            else:
                local = selection.staged_matrices(LOCAL_MATRIX)

            def submit(ordinal: int) -> None:
                core.stage.write_attribute(
                    selection.query, lm, ordinal, local, is_array=False, semantic=AttributeSemantic.MATRIX, **kwargs
                ).wait()

            ordinal = core.write([lm, wm], submit)
            if core.explicit_hierarchy:
                core.stage.compute_hierarchy(ordinal, ordinal)
            core.seal(ordinal, [lm, wm])
            if not core.written:  # see StageCore.written
                core.generation += 1
            core.written = True
            if core.auto_update_checked or WORLD_MATRIX not in selection.require:
                return
            core.auto_update_checked = True
            if not selection.worlds_match(np.flatnonzero(written[:n])):
                core.explicit_hierarchy = True
                logger.info(
                    "ovstage stage %r does not update world matrices after local writes: frameview runs "
                    "compute_hierarchy after each write on it",
                    core.stage,
                )
                core.stage.compute_hierarchy(ordinal, ordinal)
                core.seal(ordinal, [lm, wm])

    # ---------------------------------------------------------------- visibility (host path)

    def visibility(self, paths: Sequence[str]) -> np.ndarray:
        """Computed visibility from the ``visibility`` tokens of the prims and their ancestors (one batched read)."""
        with self.lock:
            self._core.check_alive()
            return compute_visibility(OvstageVisibilityTree(self._core), [str(p) for p in paths])

    def set_visibility(self, paths: Sequence[str], visible: np.ndarray) -> None:
        """Not available on ovstage 0.3: raises ``NotImplementedError`` (reads work, see :meth:`visibility`).

        A visibility write must list prims' children: to hide the other children of an invisible ancestor it makes
        visible, and to bring ``_worldVisibility`` up to date under every prim whose opinion changed (ovstage does
        not derive it from the tokens). ovstage 0.3's ``get_hierarchy(CHILDREN / SIBLINGS)`` forgets the children
        of a prim once an attribute was written to it after population (frameview's own tags are such writes), so
        those lists would be silently incomplete; a stage-wide listing instead would make every write O(stage).
        """
        raise NotImplementedError(
            "set_visibility: the ovstage provider cannot write visibility (ovstage 0.3's hierarchy queries lose the "
            "children of prims written after population, and a write must list them); author visibility in USD "
            "before ovstage.population opens the stage, or use fabric_provider='memory' on the pxr stage (or the "
            "usd backend) to change visibility at run time"
        )

    # ---------------------------------------------------------------- PrimTree (pattern resolution)

    def has_prim(self, path: str) -> bool:
        """Whether a prim exists at ``path`` (O(1) in the stage size).

        Pattern resolution asks this for ``<child>/<rest>`` of every child that :meth:`child_names` just listed
        (``env_.*`` then ``Robot/Camera``): the first such question checks all the listed siblings' ``<rest>`` in
        one batched ``get_hierarchy`` call and answers the others from that batch, once each. The batch is dropped
        on the next listing, on any write through this stage's providers, and after a second; callers re-validate
        what they use (FabricFrameView calls :meth:`missing_prims`).
        """
        path = str(path)
        with self.lock:
            self._core.check_alive()
            core = self._core
            known = core.exists.pop(path, None)  # each batched answer is used once
            if known is not None and core.exists_valid():
                return known
            listing = core.listing if core.exists_valid() else None
            if listing is not None and path.startswith(listing[0]):
                head, sep, rest = path[len(listing[0]) :].partition("/")
                if sep and head in listing[1]:
                    batch = [f"{listing[0]}{name}/{rest}" for name in listing[1]]
                    with core.pd.create_path_list_from_strings(batch) as plist:
                        status = self._core.statuses(plist)
                    core.exists.update(zip(batch, (status == STATUS_OK).tolist(), strict=True))
                    return core.exists.pop(path)
            with core.pd.create_path_list_from_strings([path]) as plist:
                return bool(self._core.statuses(plist)[0] == STATUS_OK)

    def child_names(self, path: str) -> list[str]:
        """Names of the children of ``path`` (``"/"`` for the root), in authoring order."""
        with self.lock:
            self._core.check_alive()
            core = self._core
            with core.pd.create_path_list_from_strings([str(path)]) as plist:
                item = core.stage.get_hierarchy(plist, 0, HierarchyRelation.CHILDREN).items[0]
            if item.status != STATUS_OK:
                return []
            names = [child.rsplit("/", 1)[1] for child in item.paths]
            core.remember_listing("/" if path == "/" else f"{path}/", names)
            return names

    def release_all(self) -> None:
        """Release every read group still pinned on the stage (recovery after an interrupted access)."""
        with self.lock:
            if self._core.alive():
                self._core.release_pinned()


_CORES: weakref.WeakValueDictionary[int, StageCore] = weakref.WeakValueDictionary()
_PROVIDERS: weakref.WeakValueDictionary[tuple[int, str], OvstageFabricStage] = weakref.WeakValueDictionary()
_REGISTRY_LOCK = threading.Lock()


def _library_version() -> tuple[int, ...] | None:
    """``ovstage.library_version()`` as a tuple of ints, ``None`` when this ovstage does not report it."""
    try:
        return tuple(int(v) for v in ovstage.library_version())
    except (AttributeError, TypeError, ValueError):
        return None


def attach(stage: ovstage.Stage, device: str = "cpu") -> OvstageFabricStage:
    """The ovstage provider of ``stage`` on ``device``: the same object for the same (stage, device).

    Every provider of one stage shares one lock and one ordinal counter. The registry holds providers weakly: a
    provider lives as long as a view (or the caller) holds it, and holds its stage.

    Raises:
        ImportError: The installed ovstage is older than :data:`~frameview.fabric.providers.OVSTAGE_MIN_VERSION`.
        TypeError: ``stage`` is not an ``ovstage.Stage``.
        RuntimeError: The stage was destroyed.
    """
    problem = ovstage_version_problem(_library_version())
    if problem is not None:
        raise ImportError(f"fabric_provider='ovstage': {problem}", name="ovstage")
    if not isinstance(stage, ovstage.Stage):
        raise TypeError(f"stage: expected an ovstage.Stage, got {type(stage).__name__}")
    if not getattr(stage, "_inst", None):
        raise RuntimeError("stage: the ovstage.Stage was destroyed; open the scene on a live stage")
    device = str(wp.get_device(device))
    with _REGISTRY_LOCK:
        key = (id(stage), device)
        provider = _PROVIDERS.get(key)
        if provider is not None and provider._core.stage is stage:
            return provider
        core = _CORES.get(id(stage))
        if core is None or core.stage is not stage:
            core = StageCore(stage)
            _CORES[id(stage)] = core
        provider = OvstageFabricStage(core, device)
        _PROVIDERS[key] = provider
        logger.debug("ovstage provider attached to %r on %s", stage, device)
        return provider

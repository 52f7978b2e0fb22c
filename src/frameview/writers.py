# SPDX-License-Identifier: Apache-2.0
"""Writer scopes: Isaac Lab 3's ``xform_world_space_writer`` / ``xform_local_space_writer`` of every backend
(:class:`~frameview.BaseFrameView`).

A writer scope batches the writes of one space::

    with view.xform_world_space_writer() as w:
        w.set_poses(positions=p, orientations=q, indices=env_ids)
        w.set_scales(s, indices=env_ids)
    # every value written stands, solved against the parents as they are on exit

Each write is validated when it is made (shapes, dtypes, indices, non-finite values raise at once, as for the view's
setters) and its data copied. A Fabric view without nested prims writes it at once (as its setter does) and writes
the copy again on exit if the stage changed meanwhile; the other views hold it, combine writes to the same rows
into one backend write, and apply them when the scope flushes: on exit, before a writer getter, and before a write
to other rows. See :class:`XformSpaceWriter`.

The view opens the scopes and makes their writes (``BaseFrameView._write_now`` at the call; its ``_stager``,
:class:`~frameview._core.write_stager.WriteStager`, validates the held ones).
"""

from __future__ import annotations

import logging
import operator
import threading
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import numpy as np
import warp as wp

from ._core.argument_kernels import stash_write
from ._core.array_types import ArrayLike, IndicesLike, MaskLike
from ._core.launch import RecordedLaunch, block_dim_for, capture_stream, captured, replay
from ._core.rows import ALL, INDEXED, MASK, Rows
from ._core.write_stager import PendingWrite, write_call
from .kernels.scopes import accumulate_write, select_rows

if TYPE_CHECKING:
    from ._core.arguments import Arguments
    from ._core.device_errors import DeviceErrors
    from ._core.write_stager import WriteStager

__all__ = ["XformLocalSpaceWriter", "XformSpaceWriter", "XformWorldSpaceWriter", "check_no_writer"]

logger = logging.getLogger(__name__)

_WriterT = TypeVar("_WriterT", bound="XformSpaceWriter")


class ScopedView(Protocol):
    """What a writer scope uses of its view (a :class:`~frameview.BaseFrameView`, which imports this module): its
    prims, lock and parts, and the getters and the held-write hook behind the view's public methods."""

    _lock: Any
    _active_writer: XformSpaceWriter | None
    _args: Arguments
    _stager: WriteStager
    _errors: DeviceErrors
    _device: Any
    _device_rows: bool

    @property
    def count(self) -> int: ...

    @property
    def prim_paths(self) -> tuple[str, ...]: ...

    def _check_open(self) -> None: ...

    def _get_poses(self, space: str, indices: Any, mask: Any) -> tuple[wp.array, wp.array]: ...

    def _get_scales(self, space: str, indices: Any, mask: Any) -> wp.array: ...

    def _apply_write(self, space: str, write: PendingWrite) -> None: ...

    def _write_now(
        self, write: Any, call: str, indices: Any, mask: Any, values: tuple[tuple[Any, str, type], ...]
    ) -> bool | None: ...

    def _write(
        self, rows: Rows, *, in_world: bool, pos: Any, quat: Any, scale: Any, keep: tuple[tuple, list]
    ) -> None: ...

    def _scope_writes_at_call(self) -> bool: ...

    def _stage_marks(self) -> Any: ...


def _same_rows(a: tuple | None, b: tuple | None) -> bool:
    if a is None or b is None or a[0] != b[0]:
        return False
    return a[0] == ALL or (a[1].shape == b[1].shape and bool(np.array_equal(a[1], b[1])))


def check_no_writer(view: ScopedView) -> None:
    """Raise while ``view`` has an open writer scope, unless the call is the writer's own (the view's getters and
    setters call this)."""
    writer = view._active_writer
    if writer is not None and not writer._calling:
        raise RuntimeError(
            f"{view!r} has an open {type(writer).__name__}: its own pose and scale getters and setters are "
            "locked until the scope exits; inside it use the writer's get_poses / get_scales / set_poses / "
            "set_scales"
        )


class XformSpaceWriter:
    """A context manager that writes poses and scales of a view in one space (world or local).

    Returned by :meth:`~frameview.BaseFrameView.xform_world_space_writer` / ``xform_local_space_writer``; enter it with
    ``with``. One writer may be open per view: entering a second raises ``RuntimeError``, and while one is open the
    view's own pose and scale getters and setters raise ``RuntimeError`` (read through :meth:`get_poses` /
    :meth:`get_scales` inside the scope). A writer is entered once.

    **When writes happen.** Each write is validated at once (as the view's setters validate; on the CPU every input,
    device arrays included, is checked at the call, so a bad write raises there and nothing earlier is lost) and its
    data and indices are copied, so the caller may reuse its buffers.

    *Views that write at the call* (Fabric views where no view prim lies below another: the view's
    ``_scope_writes_at_call``): each write is made when it is called, as the view's setter makes it (same checks and
    errors), and the same launch copies its rows and data into the writer's buffers. At the flush (on exit, and
    before :meth:`get_poses` / :meth:`get_scales`) the copies are written again, in order, only if the stage changed
    since (another frameview view wrote to it, or the embedded Fabric model noticed a USD edit): every value written
    in the scope then stands, solved against the parents at that moment. Writers outside frameview (physics, Kit's
    USD-to-Fabric sync) are not seen: do not run them inside a scope (Isaac Lab asks the same of its scopes).

    *Other views* hold the writes until the scope flushes: on exit (also when the body raised: the writes made
    before the exception are applied), before :meth:`get_poses` / :meth:`get_scales` (which therefore see every
    write made so far), and before a write to other rows. At the flush the held writes are applied in the order they
    were made, so every world value written in the scope is solved against its parents' world matrices at that
    moment: a parent moved meanwhile by another view does not carry the prim away from the world pose written (as
    Isaac Lab's writers derive the other space on exit). Consecutive writes to the same rows (``indices=None``, or
    equal host indices or masks) whose inputs were all checked at the call are combined into one backend write (one
    solve, one commit, descendants moved once; every prim gets the last value written to each component). Writes
    whose inputs only the device can check (device data or indices on CUDA) are never combined: a rejected write
    writes nothing of its own and never takes an earlier accepted write down with it (on CUDA it is reported as
    described in :doc:`reliability`; as for any rejected device call, the writes after it in the same flush are not
    applied either).

    **Nested prims in a world-space writer.** When the view holds a prim and one of its ancestors, the held writes
    are not applied one after another (a later write of the ancestor, or of the prim's other component, would carry
    away what an earlier one placed): at the flush every prim ends at the world values last written to it in the
    scope, in whatever order and split the writes came (positions in one write, orientations in the next), solved
    against its ancestors' final poses; a component never written keeps its local value, as in the view's setters.
    This costs a few launches per flush (one per group of rows written with the same components, per level of
    nesting); a single write, or writes to the same rows, cost what a setter costs.

    Arrays returned by the getters are the view's output buffers (see :class:`~frameview.BaseFrameView`).
    """

    _space = "world"

    def __init__(self, view: ScopedView) -> None:
        self._view = view
        self._state = "new"  # "new" -> "open" -> "closed"
        self._calling = False
        self._calling_block = _Calling(self)
        self._pending: list[PendingWrite] = []
        self._at_call = False  # the view writes each write at its call (set on entering)
        self._kept: list[tuple[_StashPlan, bool]] = []  # the copies of the writes made at their calls (and `now`)
        self._made: _StashPlan | None = None  # the copy of the write being made at its call
        self._marks: Any = None  # the view's stage marks after the last write made at its call
        self._moved = False  # the marks changed between two writes made at their calls

    @property
    def space(self) -> str:
        """The space of every value this writer takes and returns, ``"world"`` or ``"local"``."""
        return self._space

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._view!r}, {self._state})"

    # ---------------------------------------------------------------- scope

    def __enter__(self: _WriterT) -> _WriterT:
        view = self._view
        with view._lock:
            view._check_open()
            if self._state != "new":
                raise RuntimeError(
                    f"{self!r} was already entered: a writer scope is entered once; open a new one with "
                    f"view.xform_{self._space}_space_writer()"
                )
            active = view._active_writer
            if active is not None:
                raise RuntimeError(
                    f"{view!r} already has an open writer scope ({type(active).__name__}); exit it before opening "
                    "another (one writer per view)"
                )
            view._active_writer = self
            self._state = "open"
            self._at_call = view._scope_writes_at_call()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        view = self._view
        with view._lock:
            try:
                self._flush()
            except Exception:
                if exc_type is None:
                    raise
                logger.warning(  # the body's exception propagates; do not hide it behind the flush's
                    "%r: the writes made before the exception were not applied", self, exc_info=True
                )
            finally:
                self._pending = []
                self._kept = []
                self._state = "closed"
                if view._active_writer is self:
                    view._active_writer = None

    # ---------------------------------------------------------------- writes

    def set_poses(
        self,
        positions: ArrayLike | None = None,
        orientations: ArrayLike | None = None,
        indices: IndicesLike = None,
        *,
        mask: MaskLike = None,
    ) -> None:
        """Set positions and/or orientations in this writer's space.

        Args:
            positions: (M, 3) positions (world frame for a world-space writer, parent frame for a local one), e.g. a
                ``wp.vec3f`` array, an (M, 3) float array or tensor; ``None`` keeps them.
            orientations: (M, 4) **xyzw** quaternions (``wp.vec4f`` / ``wp.quatf`` arrays, (M, 4) float arrays or
                tensors; normalised here), or ``None`` to keep them.
            indices: View indices to write (M of them, each at most once), ``None`` for all.
            mask: Boolean (N,) selection instead of ``indices``: the data has N rows, masked rows are written.
        """
        self._write(indices, mask, (positions, "positions", wp.vec3f), (orientations, "orientations", wp.quatf))

    def set_scales(self, scales: ArrayLike, indices: IndicesLike = None, *, mask: MaskLike = None) -> None:
        """Set scales in this writer's space (local scales, or world scales solved as
        :meth:`~frameview.BaseFrameView.set_world_scales` solves them); the prims' rotations and translations are kept.

        Args:
            scales: (M, 3) per-axis scales.
            indices: View indices to write (M of them, each at most once), ``None`` for all.
            mask: Boolean (N,) selection instead of ``indices``: the data has N rows, masked rows are written.
        """
        if scales is None:
            raise ValueError("scales: expected an (M, 3) array, got None")
        self._write(indices, mask, (None, "positions", wp.vec3f), (None, "orientations", wp.quatf),
                    (scales, "scales", wp.vec3f))  # fmt: skip

    # ---------------------------------------------------------------- reads

    def get_poses(self, indices: IndicesLike = None, *, mask: MaskLike = None) -> tuple[wp.array, wp.array]:
        """Positions and orientations in this writer's space, after every write made in the scope so far.

        Returns:
            Positions, (M,) ``wp.vec3f``; orientations, (M,) ``wp.quatf``, **xyzw**; the view's output buffers.
        """
        view = self._view
        with view._lock, self._inside():
            self._flush()
            return view._get_poses(self._space, indices, mask)

    def get_scales(self, indices: IndicesLike = None, *, mask: MaskLike = None) -> wp.array:
        """Scales in this writer's space (world: the world matrix axis lengths), after every write made so far.

        Returns:
            (M,) ``wp.vec3f``; the view's output buffer.
        """
        view = self._view
        with view._lock, self._inside():
            self._flush()
            return view._get_scales(self._space, indices, mask)

    # ---------------------------------------------------------------- internals

    def _check_entered(self) -> None:
        """Raise unless the writer is inside its ``with`` block."""
        if self._state != "open":
            what = "exited" if self._state == "closed" else "not entered"
            raise RuntimeError(
                f"{self!r} is {what}: use it as a context manager, "
                f"`with view.xform_{self._space}_space_writer() as w:`, and call it inside the block"
            )

    def _inside(self) -> _Calling:
        """Mark the view's calls as the writer's own for a ``with`` block (the caller holds the view's lock)."""
        return self._calling_block

    def _write(self, indices: Any, mask: Any, *values: tuple[Any, str, type]) -> None:
        view = self._view
        if self._at_call:  # (the view's setters are not called: no _inside(); _write_at_call checks the state)
            with view._lock:
                self._write_at_call(indices, mask, values)
            return
        with view._lock, self._inside():
            view._check_open()
            staged = view._stager.stage(indices, mask, values, now=True)
            if staged is None:
                return
            staged.key = view._stager.rows_key(staged.rows, indices, mask) if staged.from_host else None
            last = self._pending[-1] if self._pending else None
            if last is not None and last.from_host and staged.from_host and _same_rows(last.key, staged.key):
                self._combine(last, staged, len(self._pending) - 1)
                return
            self._pending.append(self._own(staged, len(self._pending)))

    def _write_at_call(self, indices: Any, mask: Any, values: tuple[tuple[Any, str, type], ...]) -> None:
        """Write now, as the view's setters write (same checks, same errors), the write's copy into the next held
        write's buffers made by the write's own launch (:meth:`_write_kept`); the copy is written again at the flush
        if the stage's marks changed since (another view's write or a USD edit may have moved the parents)."""
        view = self._view
        self._check_entered()
        view._check_open()
        if self._kept and view._stage_marks() != self._marks:
            self._moved = True
        self._made = None
        try:
            poses = values[0][0] is not None or values[1][0] is not None
            call = write_call(self._space, poses, len(values) == 3)
            now = view._write_now(self._write_kept, call, indices, mask, values)
        finally:
            self._marks = view._stage_marks()
        if self._made is not None:  # (a write that raised wrote nothing: no copy to keep)
            self._kept.append((self._made, bool(now)))

    def _write_kept(self, rows: Rows, pos: Any, quat: Any, scale: Any = None) -> None:
        """The backend write of :meth:`_write_at_call`, given its copy's buffers."""
        plan = self._made = self._plan(rows, pos, quat, scale, len(self._kept), copy_rows=True)
        self._view._write(rows, in_world=self._space == "world", pos=pos, quat=quat, scale=scale,
                          keep=(plan.key, plan.keep))  # fmt: skip

    def _combine(self, pending: PendingWrite, staged: PendingWrite, slot: int) -> None:
        """Fold ``staged`` (same rows) into ``pending``: the later value of each component wins."""
        _rows, pos, quat, scale = self._stash(staged, slot, rows=False)
        pending.pos = pos if pos is not None else pending.pos
        pending.quat = quat if quat is not None else pending.quat
        pending.scale = scale if scale is not None else pending.scale

    def _own(self, staged: PendingWrite, slot: int) -> PendingWrite:
        """``staged`` with its rows and data copied into the writer's buffers of held write ``slot`` (the caller's
        arrays and the view's index staging buffer may change before the flush)."""
        rows, pos, quat, scale = self._stash(staged, slot, rows=True)
        return PendingWrite(rows, pos, quat, scale, staged.from_host, staged.key)

    def _stash(self, staged: PendingWrite, slot: int, rows: bool) -> tuple[Rows, Any, Any, Any]:
        """Copy a write's rows (when ``rows``) and data into held write ``slot``'s buffers, in one launch
        (stream-ordered: work the caller queues later on its arrays does not reach the copy). The copy of a slot kept
        between scopes is remembered per thread and per source arrays (a reset loop passes the same ones): its rows,
        buffers and launch are made once, and on CUDA replayed as a graph (:meth:`_Stash.run`)."""
        plan = self._plan(staged.rows, staged.pos, staged.quat, staged.scale, slot, rows)
        _Stash.of(self._view).run(plan)
        return plan.rows, plan.outs[0], plan.outs[1], plan.outs[2]

    def _plan(self, src: Rows, pos: Any, quat: Any, scale: Any, slot: int, copy_rows: bool) -> _StashPlan:
        """The copy of :meth:`_stash` (of rows ``src``, when ``copy_rows``, and data), remembered or made, not
        launched."""
        kind = src.kind if copy_rows else ALL
        sources = (src.indices if kind == INDEXED else None, src.mask if kind == MASK else None, pos, quat, scale)
        stash = _Stash.of(self._view)
        if slot >= self._KEPT_SLOTS:  # buffers of this scope alone: nothing to remember
            plan = self._stash_plan(stash, src, kind, slot, sources)
        else:
            meta = (threading.get_ident(), slot, kind, src.count, src.checked)
            plan = stash.last.get(slot)  # the slot's last copy: a reset loop passes the same arrays every time
            if plan is not None and plan.meta == meta and all(map(operator.is_, plan.sources, sources)):
                return plan
            key = (*meta, *map(id, sources))
            plan = stash.plans.get(key)
            if plan is None or not all(map(operator.is_, plan.sources, sources)):  # (ids of freed arrays reused)
                if len(stash.plans) >= _Stash.KEPT_PLANS:
                    stash.plans.clear()
                plan = stash.plans[key] = self._stash_plan(stash, src, kind, slot, sources)
                plan.meta = meta
            stash.last[slot] = plan
        return plan

    def _stash_plan(self, stash: _Stash, src: Rows, kind: int, slot: int, sources: tuple) -> _StashPlan:
        """The copy of ``sources`` (indices, mask, positions, orientations, scales; None where absent) of ``src``'s
        rows into held write ``slot``'s buffers: the held rows, the buffers and the launch's arguments."""
        n = src.count
        out_rows = src
        idx_out, mask_out = stash.no_index, stash.no_mask
        if kind == INDEXED:
            idx_out = self._buffer(slot, "indices", wp.int32, n)
            out_rows = Rows(INDEXED, n, indices=idx_out, checked=src.checked, source=idx_out)
        elif kind == MASK:
            mask_out = self._buffer(slot, "mask", wp.bool, n)
            out_rows = Rows(MASK, n, mask=mask_out, checked=src.checked)
        outs: list[Any] = []
        params: list[Any] = [int(kind), sources[0] if kind == INDEXED else stash.no_index,
                             sources[1] if kind == MASK else stash.no_mask]  # fmt: skip
        for name, dtype, arr, none in (("pos", wp.vec3f, sources[2], stash.no_vec3),
                                       ("quat", wp.quatf, sources[3], stash.no_quat),
                                       ("scale", wp.vec3f, sources[4], stash.no_vec3)):  # fmt: skip
            if arr is None:
                params += [0, none]
                outs.append(None)
            else:
                params += [1, arr]
                outs.append(self._buffer(slot, name, dtype, n))
        nones = (stash.no_vec3, stash.no_quat, stash.no_vec3)
        params += [idx_out, mask_out, *(none if o is None else o for o, none in zip(outs, nones, strict=True))]
        return _StashPlan(sources, out_rows, tuple(outs), n, params)

    _KEPT_SLOTS = 4
    """Held writes whose buffers the view keeps between scopes; a scope holding more allocates the others."""

    def _buffer(self, slot: int, name: str, dtype: type, rows: int) -> wp.array:
        view = self._view
        if slot < self._KEPT_SLOTS:
            return view._args.outputs(f"writer:{slot}:{name}", dtype, rows)
        view._args.check_outside_capture("a writer scope's buffers")
        return wp.empty(rows, dtype=dtype, device=view._device)

    def _flush(self) -> None:
        """Apply the writes not yet applied, in order (the caller holds the view's lock); raise the first error once
        every write was tried (a rejected write writes nothing and takes no other write down with it)."""
        if self._at_call:
            self._flush_kept()
            return
        pending, self._pending = self._pending, []
        if not pending:
            return
        self._view._check_open()
        if len(pending) > 1 and self._space == "world" and self._view._stager.nested_prims():
            _NestedFlush.of(self._view).flush(pending)
            return
        self._apply_in_order(pending)

    def _flush_kept(self) -> None:
        """The writes made at their calls: written again from their copies, in order, only if the stage's marks
        changed since the first of them."""
        kept, self._kept = self._kept, []
        if not kept:
            return
        self._view._check_open()
        moved, self._moved = self._moved or self._view._stage_marks() != self._marks, False
        if moved:
            self._apply_in_order([PendingWrite(plan.rows, *plan.outs, from_host=now) for plan, now in kept])

    def _apply_in_order(self, pending: list[PendingWrite]) -> None:
        first: Exception | None = None
        for write in pending:
            try:
                self._view._apply_write(self._space, write)
            except Exception as exc:
                first = first or exc
        if first is not None:
            raise first


class _Calling:
    """The ``with`` block of a writer's own call (:meth:`XformSpaceWriter._inside`): the writer must be open; the
    view's getters and setters then let the writer's calls through (a plain class: a generator-based context manager
    costs a reset's write about a microsecond more)."""

    __slots__ = ("_writer",)

    def __init__(self, writer: XformSpaceWriter) -> None:
        self._writer = writer

    def __enter__(self) -> None:
        writer = self._writer
        writer._check_entered()
        writer._calling = True

    def __exit__(self, *exc: object) -> None:
        self._writer._calling = False


class _NestedFlush:
    """The flush of a world-space scope's held writes over a view that holds a prim and one of its ancestors.

    Applied one after another, world writes would not leave every prim where it was put: a later write of an
    ancestor, or of another component of the prim itself under a moved ancestor, carries it away. So the held writes
    are gathered into (N,) per-row buffers, each component's last written value with a per-row bit set of the
    components written (:func:`~frameview.kernels.scopes.accumulate_write`), and written back through the backend,
    one write per group of rows written with the same components, the levels of nesting in order, ancestors first
    (:func:`~frameview.kernels.scopes.select_rows`): every prim ends at the world values last written to it, solved
    against its ancestors' final poses; a component never written keeps its local value, as in the view's setters.
    Every step is a launch on the view's device: no host round trip.

    Writes whose inputs only the device can check (device data or indices on CUDA) are first applied through the
    backend on their own, which checks them: a rejected one writes nothing and, the status word being sticky, the
    writes after it are not gathered nor written (as for any rejected device call).
    """

    def __init__(self, view: ScopedView) -> None:
        self._view = view
        device = view._device
        n = view.count
        self._device = device
        self._pos = wp.zeros(n, dtype=wp.vec3f, device=device)
        self._quat = wp.zeros(n, dtype=wp.quatf, device=device)
        self._scale = wp.zeros(n, dtype=wp.vec3f, device=device)
        self._flags = wp.zeros(n, dtype=wp.int32, device=device)
        self._mask = wp.zeros(n, dtype=wp.bool, device=device)
        levels = _nesting_levels(view.prim_paths)
        self._levels = int(levels.max()) + 1 if n else 0
        self._level = wp.array(levels, dtype=wp.int32, device=device)
        self._flags_host = np.zeros(n, dtype=np.int32)
        stash = _Stash.of(view)
        self._no_index, self._no_mask = stash.no_index, stash.no_mask
        self._no_vec3, self._no_quat = stash.no_vec3, stash.no_quat

    @classmethod
    def of(cls, view: ScopedView) -> _NestedFlush:
        flush = view.__dict__.get("_scope_nested_flush")
        if flush is None:
            view._args.check_outside_capture("a writer scope's buffers")
            flush = view.__dict__["_scope_nested_flush"] = cls(view)
        return flush

    def flush(self, pending: list[PendingWrite]) -> None:
        """Gather ``pending`` (in order) and write the groups back; raise the first error once every write was
        tried."""
        view = self._view
        self._flags.zero_()
        host_flags: np.ndarray | None = self._flags_host
        host_flags[:] = 0
        first: Exception | None = None
        written: list[int] = []
        for write in pending:
            gated = not write.from_host
            if gated:  # checked by the backend, which applies it; gathered only if it was accepted
                try:
                    view._apply_write("world", write)
                except Exception as exc:
                    first = first or exc
                    continue
            bits = self._gather(write, gated)
            written.append(bits)
            if host_flags is not None:
                if write.key is None:
                    host_flags = None  # rows on the device: every reachable component set gets its write
                else:
                    self._mark(host_flags, write.key, bits)
        if written:
            try:
                self._write_groups(written, host_flags)
            except Exception as exc:
                first = first or exc
        if first is not None:
            raise first

    def _gather(self, write: PendingWrite, gated: bool) -> int:
        rows = write.rows
        bits = 0
        params: list[Any] = [
            int(rows.kind),
            rows.indices if rows.kind == INDEXED else self._no_index,
            rows.mask if rows.kind == MASK else self._no_mask,
        ]
        for bit, arr, none in ((1, write.pos, self._no_vec3), (2, write.quat, self._no_quat),
                               (4, write.scale, self._no_vec3)):  # fmt: skip
            params += [0 if arr is None else 1, none if arr is None else arr]
            bits |= 0 if arr is None else bit
        params += [int(gated), self._view._errors.status, self._pos, self._quat, self._scale, self._flags]
        wp.launch(accumulate_write, dim=rows.count, inputs=params, device=self._device)
        return bits

    @staticmethod
    def _mark(host_flags: np.ndarray, key: tuple, bits: int) -> None:
        kind, rows = key
        if kind == ALL:
            host_flags |= bits
        elif kind == MASK:
            host_flags[np.asarray(rows, dtype=bool)] |= bits
        else:
            host_flags[np.asarray(rows, dtype=np.int64)] |= bits

    def _write_groups(self, written: list[int], host_flags: np.ndarray | None) -> None:
        """One backend write per (component set, nesting level) group; a single group of rows spanning every level
        is written at once (the backend solves nested prims in one write)."""
        if host_flags is not None:
            sets = sorted({int(b) for b in np.unique(host_flags) if b})
        else:  # every union of the writes' component sets is reachable
            sets_found: set[int] = set()
            for bits in written:
                sets_found |= {bits} | {bits | other for other in sets_found}
            sets = sorted(sets_found)
        levels = [-1] if len(sets) == 1 else list(range(self._levels))
        view = self._view
        first: Exception | None = None
        for level in levels:
            for bits in sets:
                write = self._group(bits, level, host_flags, single=len(sets) == 1)
                if write is None:
                    continue
                try:
                    view._apply_write("world", write)
                except Exception as exc:
                    first = first or exc
        if first is not None:
            raise first

    def _group(self, bits: int, level: int, host_flags: np.ndarray | None, single: bool) -> PendingWrite | None:
        """The backend write of the rows written with component set ``bits`` (at nesting level ``level``; -1: all):
        all rows, a device mask over the (N,) buffers, or, for a host-bound backend, their indices and data."""
        view = self._view
        n = view.count
        data = [self._pos if bits & 1 else None, self._quat if bits & 2 else None, self._scale if bits & 4 else None]
        if host_flags is not None and single and bool(np.all(host_flags == bits)):
            return PendingWrite(Rows(ALL, n), *data, from_host=True)
        if view._device_rows:
            wp.launch(select_rows, dim=n, inputs=[self._flags, self._level, bits, level], outputs=[self._mask],
                      device=self._device)  # fmt: skip
            return PendingWrite(Rows(MASK, n, mask=self._mask), *data, from_host=True)
        # a host-bound backend (usd) takes indices and the data cut to them, as its setters give it
        flags = self._flags.numpy() if host_flags is None else host_flags
        chosen = flags == bits
        if level >= 0:
            chosen &= self._level.numpy() == level
        idx = np.flatnonzero(chosen).astype(np.int32)
        if idx.size == 0:
            return None
        cut = [None if a is None else wp.array(a.numpy()[idx], dtype=a.dtype, device=self._device) for a in data]
        rows = Rows(INDEXED, idx.size, indices=wp.array(idx, dtype=wp.int32, device=self._device))
        return PendingWrite(rows, *cut, from_host=True)


def _nesting_levels(paths: tuple[str, ...]) -> np.ndarray:
    """Per view prim, how many of its ancestors the view holds (0: none)."""
    index = {p: i for i, p in enumerate(paths)}
    levels = np.full(len(paths), -1, dtype=np.int32)

    def level(i: int) -> int:
        if levels[i] < 0:
            parent = paths[i].rsplit("/", 1)[0]
            while parent and parent not in index:
                parent = parent.rsplit("/", 1)[0]
            levels[i] = 0 if not parent else level(index[parent]) + 1
        return int(levels[i])

    for i in range(len(paths)):
        level(i)
    return levels


class _StashPlan:
    """One remembered copy of :meth:`XformSpaceWriter._stash`: its sources (held: their ids stay their own), the
    held rows and buffers, the launch's dimension and arguments, and on CUDA the graph of the launch once made.

    Attributes:
        keep: The buffers (indices, mask, positions, orientations, scales; empty where unused) for a backend that
            makes the copy in the write's own launch, for a write made at its call.
        key: What a graph writing ``keep`` depends on beyond the write's own arguments: their addresses.
    """

    __slots__ = ("dim", "graph", "keep", "key", "launched", "meta", "outs", "params", "rows", "sources")

    def __init__(self, sources: tuple, rows: Rows, outs: tuple, dim: int, params: list) -> None:
        self.sources, self.rows, self.outs, self.dim, self.params = sources, rows, outs, dim, params
        self.graph: Any = None
        self.launched = 0
        self.keep = params[-5:]
        self.key = tuple(a.ptr for a in self.keep)
        self.meta: tuple | None = None  # (thread, slot, row kind, count, checked) of a remembered copy


class _Stash:
    """A view's launch of :func:`stash_write`, the empty arrays that stand for absent arguments, and the remembered
    copies (:class:`_StashPlan`)."""

    KEPT_PLANS = 32
    """Copies remembered per view (sources, row counts, threads); more clears them."""

    def __init__(self, view: ScopedView) -> None:
        device = view._device
        self.device = device
        self.no_index = wp.empty(0, dtype=wp.int32, device=device)
        self.no_mask = wp.empty(0, dtype=wp.bool, device=device)
        self.no_vec3 = wp.empty(0, dtype=wp.vec3f, device=device)
        self.no_quat = wp.empty(0, dtype=wp.quatf, device=device)
        self.plans: dict[tuple, _StashPlan] = {}
        self.last: dict[int, _StashPlan] = {}  # per slot, the copy found last
        self._cmd: RecordedLaunch | None = None
        self._capturing = view._errors.is_capturing
        self._stream: wp.Stream | None = None

    @classmethod
    def of(cls, view: ScopedView) -> _Stash:
        stash = view.__dict__.get("_scope_stash")
        if stash is None:
            view._args.check_outside_capture("a writer scope's buffers")
            stash = view.__dict__["_scope_stash"] = cls(view)
        return stash

    def run(self, plan: _StashPlan) -> None:
        """Launch ``plan``'s copy on the device's current stream. On CUDA a copy made a second time is captured once
        into a graph (on the views' capture stream, :func:`capture_stream`) and replayed from then on: a graph launch
        costs the host less than a kernel launch. Inside the caller's own capture: a plain launch, captured there."""
        dim, params = plan.dim, plan.params
        if dim == 0:
            return
        if self._capturing():
            wp.launch(stash_write, dim=dim, inputs=params, device=self.device, block_dim=block_dim_for(self.device))
            return
        if plan.graph is not None:
            replay(plan.graph)
            return
        if self.device.is_cuda and plan.launched >= 1:
            stream = self._stream or capture_stream(self.device)
            if stream is not None:
                self._stream = stream
                plan.graph = captured(self.device, stream, lambda: wp.launch(
                    stash_write, dim=dim, inputs=params, device=self.device, stream=stream,
                    block_dim=block_dim_for(self.device)))  # fmt: skip
                replay(plan.graph)
                return
        plan.launched += 1
        if self._cmd is None:
            self._cmd = RecordedLaunch(stash_write, dim, params, self.device, block_dim_for(self.device))
        self._cmd.launch(dim, params)


class XformWorldSpaceWriter(XformSpaceWriter):
    """Writer scope whose values are world-frame: positions, orientations and world scales (axis lengths of the world
    matrix); the local matrices and the descendants are derived from them when the scope flushes."""

    _space = "world"


class XformLocalSpaceWriter(XformSpaceWriter):
    """Writer scope whose values are parent-frame: translations, orientations and local scales; the world matrices
    and the descendants are derived from them when the scope flushes."""

    _space = "local"

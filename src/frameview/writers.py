# SPDX-License-Identifier: Apache-2.0
"""Writer scopes: Isaac Lab 3's ``xform_world_space_writer`` / ``xform_local_space_writer`` of every backend
(:class:`~frameview.BaseFrameView`).

A writer scope batches the writes of one space::

    with view.xform_world_space_writer() as w:
        w.set_poses(positions=p, orientations=q, indices=env_ids)
        w.set_scales(s, indices=env_ids)
    # one solve of both writes: local matrices, world matrices and descendants derived once

Each write is validated when it is made (shapes, dtypes, indices, non-finite values raise at once, as for the view's
setters) and its data copied, then held; writes to the same rows are combined into one backend write, which runs
when the scope flushes: on exit, before a writer getter, and before a write to other rows. See
:class:`XformSpaceWriter` for what is combined and what goes through at once.

The view opens the scopes and applies their combined writes; its ``_stager``
(:class:`~frameview._core.write_stager.WriteStager`) validates the held writes.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import warp as wp

from ._core.launch import RecordedLaunch, block_dim_for
from ._core.rows import ALL, INDEXED, MASK, Rows
from .kernels.argument_checks import stash_write

if TYPE_CHECKING:
    from .base import BaseFrameView

__all__ = ["PendingWrite", "XformLocalSpaceWriter", "XformSpaceWriter", "XformWorldSpaceWriter", "check_no_writer"]

logger = logging.getLogger(__name__)

_WriterT = TypeVar("_WriterT", bound="XformSpaceWriter")


@dataclass
class PendingWrite:
    """One validated write: its rows and data on the view's device (``None``: keep that component)."""

    rows: Rows
    pos: wp.array | None
    quat: wp.array | None
    scale: wp.array | None
    from_host: bool
    """Rows and data were checked on the host: the write's device errors are raised by the write itself."""
    key: tuple | None = None
    """The rows as host data, to compare with a later write (``None``: device rows, not comparable for free)."""

    def call(self, space: str) -> str:
        """The name errors give this write (it selects the argument named in device-side value errors)."""
        poses = self.pos is not None or self.quat is not None
        if self.scale is None:
            return f"set_{space}"
        return f"set_{space}_poses_and_scales" if poses else f"set_{space}_scales"


def _same_rows(a: tuple | None, b: tuple | None) -> bool:
    if a is None or b is None or a[0] != b[0]:
        return False
    return a[0] == ALL or (a[1].shape == b[1].shape and bool(np.array_equal(a[1], b[1])))


def check_no_writer(view: BaseFrameView) -> None:
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
    data and indices are copied, so the caller may reuse its buffers. Writes are held until the scope flushes: on
    exit (also when the body raised: the writes made before the exception are applied), and before :meth:`get_poses`
    / :meth:`get_scales` (which therefore see every write made so far). At the flush the held writes are applied in
    the order they were made, so every world value written in the scope is solved against its parents' world
    matrices at that moment: a parent moved meanwhile by another view does not carry the prim away from the world
    pose written (as Isaac Lab's writers derive the other space on exit). Consecutive writes to the same rows
    (``indices=None``, or equal host indices or masks) whose inputs were all checked at the call are combined into
    one backend write (one solve, one commit, descendants moved once; every prim gets the last value written to each
    component). Writes whose inputs only the device can check (device data or indices on CUDA) are never combined:
    a rejected write writes nothing of its own and never takes an earlier accepted write down with it (on CUDA it is
    reported as described in ``docs/reliability.md``; as for any rejected device call, the writes after it in the
    same flush are not applied either). In a world-space writer, when the view holds a prim and one of its
    ancestors, each write goes through at once, in sequence (a later world write of an ancestor would otherwise move
    what an earlier one placed).

    Arrays returned by the getters are the view's output buffers (see :class:`~frameview.BaseFrameView`).
    """

    _space = "world"

    def __init__(self, view: BaseFrameView) -> None:
        self._view = view
        self._state = "new"  # "new" -> "open" -> "closed"
        self._calling = False
        self._pending: list[PendingWrite] = []

    @property
    def space(self) -> str:
        """``"world"`` or ``"local"``: the space of every value this writer takes and returns."""
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
                self._state = "closed"
                if view._active_writer is self:
                    view._active_writer = None

    # ---------------------------------------------------------------- writes

    def set_poses(
        self,
        positions: Any = None,
        orientations: Any = None,
        indices: Any = None,
        *,
        mask: Any = None,
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

    def set_scales(self, scales: Any, indices: Any = None, *, mask: Any = None) -> None:
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

    def get_poses(self, indices: Any = None, *, mask: Any = None) -> tuple[wp.array, wp.array]:
        """Positions and orientations in this writer's space, after every write made in the scope so far.

        Returns:
            Positions, (M,) ``wp.vec3f``; orientations, (M,) ``wp.quatf``, **xyzw**; the view's output buffers.
        """
        view = self._view
        with view._lock, self._inside():
            self._flush()
            return view._get_poses(self._space, indices, mask)

    def get_scales(self, indices: Any = None, *, mask: Any = None) -> wp.array:
        """Scales in this writer's space (world: the world matrix axis lengths), after every write made so far.

        Returns:
            (M,) ``wp.vec3f``; the view's output buffer.
        """
        view = self._view
        with view._lock, self._inside():
            self._flush()
            return view._get_scales(self._space, indices, mask)

    # ---------------------------------------------------------------- internals

    @contextmanager
    def _inside(self) -> Iterator[None]:
        """Mark the view's calls as the writer's own (the caller holds the view's lock)."""
        if self._state != "open":
            what = "exited" if self._state == "closed" else "not entered"
            raise RuntimeError(
                f"{self!r} is {what}: use it as a context manager, "
                f"`with view.xform_{self._space}_space_writer() as w:`, and call it inside the block"
            )
        self._calling = True
        try:
            yield
        finally:
            self._calling = False

    def _write(self, indices: Any, mask: Any, *values: tuple[Any, str, type]) -> None:
        view = self._view
        with view._lock, self._inside():
            view._check_open()
            staged = view._stager.stage(indices, mask, values, now=True)
            if staged is None:
                return
            if self._space == "world" and view._stager.nested_prims():  # in sequence, as the view's setters would
                self._flush()
                view._apply_write(self._space, staged)
                return
            staged.key = view._stager.rows_key(staged.rows, indices, mask) if staged.from_host else None
            last = self._pending[-1] if self._pending else None
            if last is not None and last.from_host and staged.from_host and _same_rows(last.key, staged.key):
                self._combine(last, staged, len(self._pending) - 1)
                return
            self._pending.append(self._own(staged, len(self._pending)))

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
        """Copy a write's rows (when ``rows``) and data into held write ``slot``'s buffers, in one recorded launch
        (stream-ordered: work the caller queues later on its arrays does not reach the copy)."""
        view = self._view
        src = staged.rows
        kind = src.kind if rows else ALL
        n = src.count
        stash = _Stash.of(view)
        out_rows = src
        idx_out, mask_out = stash.no_index, stash.no_mask
        if kind == INDEXED:
            idx_out = self._buffer(slot, "indices", wp.int32, n)
            out_rows = Rows(INDEXED, n, indices=idx_out, checked=src.checked, source=idx_out)
        elif kind == MASK:
            mask_out = self._buffer(slot, "mask", wp.bool, n)
            out_rows = Rows(MASK, n, mask=mask_out, checked=src.checked)
        outs: list[Any] = []
        params: list[Any] = [
            int(kind),
            src.indices if kind == INDEXED else stash.no_index,
            src.mask if kind == MASK else stash.no_mask,
        ]
        for name, dtype, arr, none in (("pos", wp.vec3f, staged.pos, stash.no_vec3),
                                       ("quat", wp.quatf, staged.quat, stash.no_quat),
                                       ("scale", wp.vec3f, staged.scale, stash.no_vec3)):  # fmt: skip
            if arr is None:
                params += [0, none]
                outs.append(None)
            else:
                params += [1, arr]
                outs.append(self._buffer(slot, name, dtype, n))
        nones = (stash.no_vec3, stash.no_quat, stash.no_vec3)
        params += [idx_out, mask_out, *(none if o is None else o for o, none in zip(outs, nones, strict=True))]
        stash.launch(n, params)
        return out_rows, outs[0], outs[1], outs[2]

    _KEPT_SLOTS = 4
    """Held writes whose buffers the view keeps between scopes; a scope holding more allocates the others."""

    def _buffer(self, slot: int, name: str, dtype: type, rows: int) -> wp.array:
        view = self._view
        if slot < self._KEPT_SLOTS:
            return view._args.outputs(f"writer:{slot}:{name}", dtype, rows)
        view._args.check_outside_capture("a writer scope's buffers")
        return wp.empty(rows, dtype=dtype, device=view._device)

    def _flush(self) -> None:
        """Apply the held writes in order (the caller holds the view's lock); raise the first error once every held
        write was tried (a rejected write writes nothing and takes no other write down with it)."""
        pending, self._pending = self._pending, []
        if not pending:
            return
        self._view._check_open()
        first: Exception | None = None
        for write in pending:
            try:
                self._view._apply_write(self._space, write)
            except Exception as exc:
                first = first or exc
        if first is not None:
            raise first


class _Stash:
    """A view's recorded launch of :func:`stash_write` and the empty arrays that stand for absent arguments."""

    def __init__(self, view: BaseFrameView) -> None:
        device = view._device
        self.device = device
        self.no_index = wp.empty(0, dtype=wp.int32, device=device)
        self.no_mask = wp.empty(0, dtype=wp.bool, device=device)
        self.no_vec3 = wp.empty(0, dtype=wp.vec3f, device=device)
        self.no_quat = wp.empty(0, dtype=wp.quatf, device=device)
        self._cmd: RecordedLaunch | None = None
        self._capturing = view._errors.is_capturing

    @classmethod
    def of(cls, view: BaseFrameView) -> _Stash:
        stash = view.__dict__.get("_scope_stash")
        if stash is None:
            view._args.check_outside_capture("a writer scope's buffers")
            stash = view.__dict__["_scope_stash"] = cls(view)
        return stash

    def launch(self, dim: int, params: list) -> None:
        if dim == 0:
            return
        if self._capturing():  # inside the caller's capture: a plain launch, captured there
            wp.launch(stash_write, dim=dim, inputs=params, device=self.device)
            return
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

# SPDX-License-Identifier: Apache-2.0
"""How :class:`~frameview.BaseFrameView`'s methods reach a backend's hooks: under the view's lock
(:func:`synchronized`), a read into the view's outputs (:func:`read_rows`; a mask read by index on a host-bound
backend, :func:`read_mask_by_index`), a write of any of the three components (:func:`write_components`).

Internal: plain functions over a view and its parts, so the view's method resolution order stays the view,
``BaseFrameView``, ``ABC``, ``object``. They take the view as a :class:`HookedView`: what they use of it, named
here, so that ``_core`` never imports the contract class that composes it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

import warp as wp

from .argument_kernels import scatter_quat, scatter_vec3
from .rows import INDEXED, MASK, Rows

if TYPE_CHECKING:
    from .arguments import Arguments

__all__ = ["POSE_BUFFERS", "HookedView", "read_mask_by_index", "read_rows", "synchronized", "write_components"]

_F = TypeVar("_F", bound=Callable[..., Any])

POSE_BUFFERS = {space: (f"{space}_pos", f"{space}_quat", f"{space}_pose") for space in ("world", "local")}
"""Output buffer names of the pose getters by space: positions, orientations, and the masked scratch's stem."""


class HookedView(Protocol):
    """What these functions use of a view (a :class:`~frameview.BaseFrameView`): its lock, its row resolver, how it
    settles a call's device rows, and the backend's write hooks (a combined ``_write``, when it has one, is looked
    up by name)."""

    _lock: Any
    _device_rows: bool
    _args: Arguments

    def _settle_rows(self, rows: Rows, call: str, now: bool = False) -> bool: ...

    def _write_world_poses(self, rows: Rows, pos: wp.array | None, quat: wp.array | None) -> None: ...

    def _write_local_poses(self, rows: Rows, pos: wp.array | None, quat: wp.array | None) -> None: ...

    def _write_local_scales(self, rows: Rows, scales: wp.array) -> None: ...


def synchronized(method: _F) -> _F:
    """Run a public method under the view's lock: calls from several threads are serialised, never interleaved."""

    @functools.wraps(method)
    def locked(self: HookedView, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            errors = getattr(self, "_errors", None)  # None while the view is being built
            if errors is None:
                return method(self, *args, **kwargs)
            errors.forget_capturing()  # asked once per call, fresh for every call
            try:
                return method(self, *args, **kwargs)
            finally:
                errors.forget_capturing()

    return cast(_F, locked)


def read_rows(view: HookedView, read: Callable, rows: Rows, name: str, outputs: tuple[wp.array, ...]) -> None:
    """Run the view's read hook ``read`` into ``outputs``. A host-bound backend (``_device_rows`` false) reads a
    mask's rows by index (:func:`read_mask_by_index`); only unchecked device indices can fail a read."""
    if rows.kind == MASK and not view._device_rows:
        read_mask_by_index(view._args, read, rows, name, outputs)
        return
    read(rows, *outputs)
    if not rows.checked:
        view._settle_rows(rows, "read")


def read_mask_by_index(args: Arguments, read: Callable, rows: Rows, name: str, outputs: tuple[wp.array, ...]) -> None:
    """Read a mask's rows with a host-bound backend's read hook ``read``: the masked view indices (one host round
    trip) are read by index into scratch buffers (``{name}_masked_{k}``), then scattered into the masked rows of
    ``outputs``; the other rows are left as they are."""
    idx = args.host_mask_indices(rows)
    count = idx.shape[0]
    if count:
        scratch = tuple(args.outputs(f"{name}_masked_{k}", out.dtype, count) for k, out in enumerate(outputs))
        read(Rows(INDEXED, count, indices=idx), *scratch)
        for tmp, out in zip(scratch, outputs, strict=True):
            kernel = scatter_quat if out.dtype == wp.quatf else scatter_vec3
            wp.launch(kernel, count, inputs=[tmp, idx], outputs=[out], device=idx.device)


def write_components(
    view: HookedView, rows: Rows, in_world: bool, pos: wp.array | None, quat: wp.array | None, scale: wp.array | None
) -> None:
    """Write any of the three components in one space: the backend's combined ``_write(rows, *, in_world, pos,
    quat, scale)`` when it has one (every built-in backend: writer scopes combine, world scales work); else its
    ``_write_*`` hooks one after another (and no world scales)."""
    combined = getattr(view, "_write", None)
    if combined is not None:
        combined(rows, in_world=in_world, pos=pos, quat=quat, scale=scale)
        return
    if in_world and scale is not None:
        raise NotImplementedError(f"{type(view).__name__} cannot write world scales")
    if pos is not None or quat is not None:
        (view._write_world_poses if in_world else view._write_local_poses)(rows, pos, quat)
    if scale is not None:
        view._write_local_scales(rows, scale)

# SPDX-License-Identifier: Apache-2.0
"""SceneDataProvider: a backend's transforms, gathered into a consumer's order in one Warp launch."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import warp as wp

from .._core.host import to_numpy
from .._core.rows import is_torch_tensor
from .._core.values import unwrap
from .checks import (
    Source,
    TransformSource,
    check_mapping,
    check_outputs,
    resolve_source,
    row_count,
)
from .gather import gather_matrix_transforms, gather_pose_transforms
from .mapping import as_path_sequence, map_paths, to_path_strings

__all__ = ["SceneDataProvider"]

logger = logging.getLogger(__name__)


class SceneDataProvider:
    """A physics backend's transforms and their paths, gathered into any consumer's path order.

    The source is the backend's data in the backend's order: Fabric-convention matrices (float64, row-vector,
    translation in ``m[3, 0:3]``), or positions and xyzw quaternions, or a zero-argument callable that returns
    either of them (or ``None`` when no data is available yet) each time it is read. A consumer builds a mapping
    from its own paths once (:meth:`create_mapping`) and then calls :meth:`get_transforms` with arrays it owns.

    A provider is meant to be used from one thread. It keeps references to the source arrays it was given
    (they are read at each :meth:`get_transforms`, not copied).

    Example:
        >>> import numpy as np, warp as wp
        >>> import frameview as fv
        >>> m = np.tile(np.eye(4), (2, 1, 1)); m[:, 3, :3] = [[1, 2, 3], [4, 5, 6]]
        >>> provider = fv.SceneDataProvider(["/World/a", "/World/b"], wp.array(m, dtype=wp.mat44d))
        >>> mapping = provider.create_mapping(["/World/b", "/World/a"])
        >>> pos, quat = wp.zeros(2, dtype=wp.vec3f), wp.zeros(2, dtype=wp.quatf)
        >>> provider.get_transforms(pos, quat, mapping)
        True
        >>> pos.numpy()
        array([[4., 5., 6.],
               [1., 2., 3.]], dtype=float32)

    Args:
        paths: The backend's paths, one per transform row, in the backend's order (``str`` or ``Sdf.Path``).
        transforms: The transform source: matrices ((N,) ``wp.mat44d`` or (N, 4, 4) float64, world frame, stage
            units); a tuple ``(positions, orientations)`` of (N,) ``wp.vec3f`` / (N, 3) float32 and (N,)
            ``wp.quatf`` / (N, 4) float32 **xyzw**; or a callable taking no arguments that returns one of those, or
            ``None`` for "no data yet". Warp arrays, torch tensors (viewed without a copy: float32 rows with unit
            column stride, column slices included) or ``ProxyArray``-likes.
        device: Warp device of the data. Defaults to the device of the source arrays; required when
            ``transforms`` is a callable.

    Raises:
        TypeError: If ``paths`` or ``transforms`` have the wrong type or dtype.
        ValueError: If the number of rows differs from the number of paths, a shape is wrong, the arrays are not
            on ``device``, or ``device`` is missing for a callable source.
    """

    def __init__(
        self,
        paths: Sequence[Any],
        transforms: TransformSource | Callable[[], TransformSource | None],
        *,
        device: wp.DeviceLike = None,
    ) -> None:
        self._paths: tuple[str, ...] = tuple(to_path_strings(paths, "paths", allow_none=False))
        self._callable: Callable[[], TransformSource | None] | None = None
        self._source: Source | None = None
        if callable(transforms) and not isinstance(transforms, (wp.array, tuple, list)):
            if device is None:
                raise ValueError(
                    "device: required when transforms is a callable; pass device= the device of the arrays it "
                    "returns, e.g. device='cuda:0'"
                )
            self._device = wp.get_device(device)
            self._callable = transforms
        else:
            first = transforms[0] if isinstance(transforms, (tuple, list)) and transforms else transforms
            first = unwrap(first)  # a ProxyArray-like: its Warp array
            if device is None and isinstance(first, wp.array):
                self._device = first.device
            elif device is None and is_torch_tensor(first):
                self._device = wp.get_device(wp.device_from_torch(first.device))
            else:
                self._device = wp.get_device(device)
            self._source = resolve_source(transforms, len(self._paths), self._device)
        self._held: Any = transforms  # torch sources are viewed without a copy: their tensors stay alive here
        # status_out of the gather kernels: [anything written, mapping value out of range]
        self._status = wp.zeros(2, dtype=wp.int32, device=self._device)
        logger.debug("%r created", self)

    @property
    def paths(self) -> tuple[str, ...]:
        """The backend's paths, in the backend's (source row) order."""
        return self._paths

    @property
    def count(self) -> int:
        """Number of transforms (and paths) the backend reports."""
        return len(self._paths)

    @property
    def device(self) -> wp.Device:
        """Warp device of the source data, the mappings and the output arrays."""
        return self._device

    def create_mapping(self, paths: Sequence[Any]) -> wp.array | None:
        """Map consumer ``paths`` onto the backend's rows (see :func:`frameview.create_mapping`).

        Args:
            paths: The consumer's paths (``str``, ``Sdf.Path`` or ``None``), length M, in the consumer's order.

        Returns:
            ``None`` when the consumer's order is the backend's order; otherwise a (M,) int32 Warp array on
            :attr:`device`: ``mapping[i]`` is the backend row of ``paths[i]``, ``-1`` when the backend lacks it.
        """
        return map_paths(as_path_sequence(paths, "paths"), self._paths, device=self._device, source_name="paths")

    def get_transforms(
        self,
        positions: wp.array | None,
        orientations: wp.array | None,
        mapping: wp.array | None = None,
        *,
        scales: wp.array | None = None,
        count: int | None = None,
    ) -> bool:
        """Gather the backend's transforms into the caller's arrays, in the caller's order, in one Warp launch.

        Row ``i`` of each output receives source row ``mapping[i]`` (source row ``i`` when ``mapping`` is
        ``None``). Rows whose mapping value is ``-1`` are left untouched, as are outputs passed as ``None``.
        Matrices are decomposed as the views decompose them (``frameview.kernels.transforms``): no shear assumed, a
        reflection shows as a negative x scale, quaternions have ``w >= 0``. When a mapping is
        given, the call reads two integers back from the device to report its result, which synchronises with
        the device.

        Args:
            positions: Output (M,) ``wp.vec3f`` or (M, 3) float32 (a Warp array, or a torch tensor with unit
                column stride, e.g. a column slice, written in place), world frame, stage units; or ``None``.
            orientations: Output (M,) ``wp.quatf`` or (M, 4) float32 (as ``positions``), **xyzw**, world frame; or
                ``None``.
            mapping: (M,) int32 array from :meth:`create_mapping` (Warp, or a torch tensor viewed without a copy),
                values in ``[-1, count)``, or ``None`` for the identity (M is then the number of source rows).
            scales: Output (M,) ``wp.vec3f`` or (M, 3) float32 (as ``positions``; row norms of the matrix); or
                ``None``. Only for a matrix source.
            count: Gather only the first ``count`` rows; the mapping and the outputs may then be longer. By
                default every row of the mapping (or of the source), and the outputs must have exactly that many.

        Returns:
            Whether any row was written: ``False`` when the source currently has no data (its callable returned
            ``None``), every mapped row is ``-1``, there are no rows, or every output is ``None``.

        Raises:
            TypeError: If an output or the mapping has the wrong type or dtype, or ``count`` is not an int.
            ValueError: If a shape or length does not match, an array is on another device, or ``scales`` is
                requested from a position/orientation source.
            IndexError: If a mapping value is out of range of the source. Rows with valid values have been
                written by then; out-of-range rows are never read or written.
        """
        source = self._current_source()
        if source is None:
            return False
        if mapping is not None:
            mapping = check_mapping(mapping, self._device)
        what = "the mapping's length" if mapping is not None else "the number of source rows"
        rows = row_count(count, source.count if mapping is None else mapping.shape[0], what)
        outputs = check_outputs((positions, orientations, scales), rows, count is None, what, self._device)
        if outputs[2] is not None and source.matrices is None:
            raise ValueError(
                "scales: this provider's source has positions and orientations but no scale; pass scales=None"
            )
        if rows == 0 or all(o is None for o in outputs):
            return False
        self._gather(source, mapping, rows, outputs)
        if mapping is None:
            return True  # identity: every row was written; no read-back needed
        return self._report(source, mapping, rows)

    def _gather(self, source: Source, mapping: wp.array | None, rows: int, outputs: tuple) -> None:
        """One launch: source rows ``mapping[i]`` (or ``i``) into row ``i`` of the outputs, for ``i < rows``."""
        positions_out, orientations_out, scales_out = outputs
        self._status.zero_()
        if source.matrices is not None:
            wp.launch(
                gather_matrix_transforms,
                dim=rows,
                inputs=[source.matrices, mapping, source.count],
                outputs=[positions_out, orientations_out, scales_out, self._status],
                device=self._device,
            )
        else:
            wp.launch(
                gather_pose_transforms,
                dim=rows,
                inputs=[source.positions, source.orientations, mapping, source.count],
                outputs=[positions_out, orientations_out, self._status],
                device=self._device,
            )

    def _report(self, source: Source, mapping: wp.array, rows: int) -> bool:
        """Read the gather's status back: whether a row was written; ``IndexError`` for an out-of-range mapping."""
        written, out_of_range = (int(v) for v in to_numpy(self._status))
        if out_of_range:
            values = mapping.numpy()[:rows]
            bad = np.flatnonzero((values < -1) | (values >= source.count))
            raise IndexError(
                f"mapping[{bad[0]}] = {values[bad[0]]} is out of range for a source of {source.count} transforms "
                f"({bad.size} such rows); expected -1 (skip) or 0..{source.count - 1}; build the mapping with this "
                "provider's create_mapping"
            )
        return bool(written)

    def _current_source(self) -> Source | None:
        """The validated source: the stored arrays, or what the callable returns now (``None``: no data)."""
        if self._callable is None:
            return self._source
        value = self._callable()
        if value is None:
            return None
        self._held = value  # until the next call: the gather reads it (torch tensors are viewed without a copy)
        return resolve_source(value, len(self._paths), self._device)

    def __repr__(self) -> str:
        kind = (
            "callable" if self._callable is not None else ("matrices" if self._source.matrices is not None else "poses")
        )
        return f"SceneDataProvider(count={self.count}, source={kind}, device={self._device})"

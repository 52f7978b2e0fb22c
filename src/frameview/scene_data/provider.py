# SPDX-License-Identifier: Apache-2.0
"""SceneDataProvider: a backend's transforms, gathered into a consumer's order in one Warp launch."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Union

import numpy as np
import warp as wp

from ..kernels.transforms import decompose_matrix
from .mapping import as_path_sequence, map_paths, to_path_strings

__all__ = ["SceneDataProvider"]

logger = logging.getLogger(__name__)

# ---------------------------------------------------------------------------------------------------------------------
# kernels


@wp.func
def _source_row(
    mapping: wp.array(dtype=wp.int32), source_count: wp.int32, i: int, status_out: wp.array(dtype=wp.int32)
):
    """Source row of output row ``i`` (``i`` when there is no mapping); -1 to skip it (unmapped, or out of range, which
    is flagged in ``status_out[1]``)."""
    if not mapping:
        return i
    j = int(mapping[i])
    if j != -1 and (j < 0 or j >= int(source_count)):
        status_out[1] = 1
        return -1
    return j


@wp.kernel
def gather_matrix_transforms(
    # inputs
    matrices: wp.array(dtype=wp.mat44d),
    mapping: wp.array(dtype=wp.int32),
    source_count: wp.int32,
    # outputs
    positions_out: wp.array(dtype=wp.vec3f),
    orientations_out: wp.array(dtype=wp.quatf),
    scales_out: wp.array(dtype=wp.vec3f),
    status_out: wp.array(dtype=wp.int32),
):
    """Decompose ``matrices[mapping[i]]`` into row ``i`` of the outputs; ``-1`` rows are left untouched.

    ``status_out[0]`` is set to 1 if a row was written, ``status_out[1]`` if a mapping value was out of range.
    Outputs passed as ``None`` are skipped; ``mapping`` ``None`` is the identity.
    """
    i = wp.tid()
    j = _source_row(mapping, source_count, i, status_out)
    if j < 0:
        return
    p, q, s = decompose_matrix(matrices[j])
    if positions_out:
        positions_out[i] = wp.vec3f(p)
    if orientations_out:
        orientations_out[i] = wp.quatf(q)
    if scales_out:
        scales_out[i] = wp.vec3f(s)
    status_out[0] = 1


@wp.kernel
def gather_pose_transforms(
    # inputs
    positions: wp.array(dtype=wp.vec3f),
    orientations: wp.array(dtype=wp.quatf),
    mapping: wp.array(dtype=wp.int32),
    source_count: wp.int32,
    # outputs
    positions_out: wp.array(dtype=wp.vec3f),
    orientations_out: wp.array(dtype=wp.quatf),
    status_out: wp.array(dtype=wp.int32),
):
    """Copy ``positions[mapping[i]]`` / ``orientations[mapping[i]]`` into row ``i``; ``-1`` rows are left untouched.

    ``status_out`` as in :func:`gather_matrix_transforms`.
    """
    i = wp.tid()
    j = _source_row(mapping, source_count, i, status_out)
    if j < 0:
        return
    if positions_out:
        positions_out[i] = positions[j]
    if orientations_out:
        orientations_out[i] = orientations[j]
    status_out[0] = 1


# ---------------------------------------------------------------------------------------------------------------------
# validation helpers

TransformSource = Union[wp.array, tuple[wp.array, wp.array]]
"""Matrices (N,) ``wp.mat44d`` / (N, 4, 4) float64, or (positions (N, 3) float32, orientations (N, 4) float32 xyzw)."""


class _Source(NamedTuple):
    """A validated transform source: either ``matrices`` or ``positions`` + ``orientations`` is set."""

    count: int
    matrices: wp.array | None = None
    positions: wp.array | None = None
    orientations: wp.array | None = None


def _as_vector_array(value: Any, name: str, vec_type: type, scalar: type, width: int, device: wp.Device) -> wp.array:
    """Check that ``value`` is a Warp array of ``vec_type`` (N,) or ``scalar`` (N, width) on ``device``.

    Returns it as a (N,) array of ``vec_type`` (a zero-copy view for the scalar form).
    """
    expected = f"wp.{vec_type.__name__} (N,) or {scalar.__name__} (N, {width})"
    if not isinstance(value, wp.array):
        raise TypeError(
            f"{name}: expected a Warp array of {expected}, got {type(value).__name__}; "
            "wrap NumPy/torch data with wp.from_numpy / wp.from_torch"
        )
    if value.dtype == vec_type:
        if value.ndim != 1:
            raise ValueError(f"{name}: expected shape (N,) for dtype wp.{vec_type.__name__}, got {value.shape}")
        result = value
    elif value.dtype == scalar:
        if value.ndim != 2 or value.shape[1] != width:
            raise ValueError(f"{name}: expected shape (N, {width}) for dtype {scalar.__name__}, got {value.shape}")
        if value.shape[0] > 0 and value.strides[1] != wp.types.type_size_in_bytes(scalar):
            raise ValueError(
                f"{name}: expected rows contiguous in their last dimension, got strides {value.strides}; "
                "pass a contiguous copy"
            )
        result = value.view(vec_type)
    else:
        raise TypeError(f"{name}: expected dtype {expected}, got {wp.types.type_repr(value.dtype)} {value.shape}")
    if value.device != device:
        raise ValueError(
            f"{name}: expected an array on {device} (the provider's device), got one on {value.device}; "
            f"move it with .to('{device}')"
        )
    return result


def _as_matrix_array(value: wp.array, name: str, device: wp.Device) -> wp.array:
    """Check that ``value`` is (N,) ``wp.mat44d`` or (N, 4, 4) float64 on ``device``; return it as (N,) mat44d."""
    if value.dtype == wp.mat44d and value.ndim == 1:
        result = value
    elif value.dtype == wp.float64 and value.ndim == 3 and value.shape[1:] == (4, 4):
        if value.shape[0] > 0 and value.strides[1:] != (32, 8):
            raise ValueError(
                f"{name}: expected each 4x4 matrix contiguous, got strides {value.strides}; pass a contiguous copy"
            )
        result = value.view(wp.mat44d)
    elif value.dtype in (wp.mat44d, wp.float64):
        raise ValueError(f"{name}: expected shape (N,) of wp.mat44d or (N, 4, 4) float64, got {value.shape}")
    else:
        raise TypeError(
            f"{name}: expected wp.mat44d (N,) or float64 (N, 4, 4) matrices, "
            f"got {wp.types.type_repr(value.dtype)} {value.shape}"
        )
    if value.device != device:
        raise ValueError(
            f"{name}: expected an array on {device} (the provider's device), got one on {value.device}; "
            "create the provider on the device of its data"
        )
    return result


def _resolve_source(value: Any, count: int, device: wp.Device) -> _Source:
    """Validate a transform source (see :data:`TransformSource`) against the provider's paths and device."""
    if isinstance(value, wp.array):
        matrices = _as_matrix_array(value, "transforms", device)
        source = _Source(count=matrices.shape[0], matrices=matrices)
    elif isinstance(value, (tuple, list)) and len(value) == 2:
        positions = _as_vector_array(value[0], "transforms positions", wp.vec3f, wp.float32, 3, device)
        orientations = _as_vector_array(value[1], "transforms orientations", wp.quatf, wp.float32, 4, device)
        if positions.shape[0] != orientations.shape[0]:
            raise ValueError(
                f"transforms: expected as many orientations as positions, got {positions.shape[0]} positions "
                f"and {orientations.shape[0]} orientations"
            )
        source = _Source(count=positions.shape[0], positions=positions, orientations=orientations)
    else:
        raise TypeError(
            "transforms: expected a Warp array of matrices ((N,) wp.mat44d or (N, 4, 4) float64), a tuple "
            f"(positions, orientations), or a callable returning one of them, got {type(value).__name__}"
        )
    if source.count != count:
        raise ValueError(
            f"transforms: expected {count} rows (one per path), got {source.count}; the source and its paths "
            "must have the same length and order"
        )
    return source


# ---------------------------------------------------------------------------------------------------------------------
# provider


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
        transforms: The transform source: a Warp array of matrices ((N,) ``wp.mat44d`` or (N, 4, 4) float64,
            world frame, stage units); a tuple ``(positions, orientations)`` of (N,) ``wp.vec3f`` / (N, 3) float32
            and (N,) ``wp.quatf`` / (N, 4) float32 xyzw; or a callable taking no arguments that returns one of
            those, or ``None`` for "no data yet".
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
        self._source: _Source | None = None
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
            if device is None and isinstance(first, wp.array):
                self._device = first.device
            else:
                self._device = wp.get_device(device)
            self._source = _resolve_source(transforms, len(self._paths), self._device)
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
        Matrices are decomposed by :func:`frameview.kernels.transforms.decompose_matrix`: no shear assumed, a
        reflection shows as a negative x scale, quaternions have ``w >= 0``. When a mapping is
        given, the call reads two integers back from the device to report its result, which synchronises with
        the device.

        Args:
            positions: Output (M,) ``wp.vec3f`` or (M, 3) float32, world frame, stage units; or ``None``.
            orientations: Output (M,) ``wp.quatf`` or (M, 4) float32, xyzw, world frame; or ``None``.
            mapping: (M,) int32 Warp array from :meth:`create_mapping`, values in ``[-1, count)``, or ``None``
                for the identity (M is then the number of source rows).
            scales: Output (M,) ``wp.vec3f`` or (M, 3) float32 (row norms of the matrix); or ``None``. Only for
                a matrix source.
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
        device = self._device
        if mapping is not None:
            if not isinstance(mapping, wp.array):
                raise TypeError(
                    f"mapping: expected a Warp int32 array (from create_mapping) or None, got {type(mapping).__name__}"
                )
            if mapping.dtype != wp.int32:
                raise TypeError(
                    f"mapping: expected dtype int32, got {wp.types.type_repr(mapping.dtype)}; build it with "
                    "create_mapping or wp.array(values, dtype=wp.int32)"
                )
            if mapping.ndim != 1:
                raise ValueError(f"mapping: expected shape (M,), got {mapping.shape}")
            if mapping.device != device:
                raise ValueError(
                    f"mapping: expected an array on {device} (the provider's device), got one on {mapping.device}"
                )
            available = mapping.shape[0]
        else:
            available = source.count
        what = "the mapping's length" if mapping is not None else "the number of source rows"
        if count is None:
            rows = available
        else:
            if isinstance(count, bool) or not isinstance(count, (int, np.integer)):
                raise TypeError(f"count: expected an int or None, got {type(count).__name__}")
            rows = int(count)
            if not 0 <= rows <= available:
                raise ValueError(f"count: expected 0 <= count <= {available} ({what}), got {rows}")

        outputs = []
        for value, name, vec_type, width in (
            (positions, "positions", wp.vec3f, 3),
            (orientations, "orientations", wp.quatf, 4),
            (scales, "scales", wp.vec3f, 3),
        ):
            if value is None:
                outputs.append(None)
                continue
            array = _as_vector_array(value, name, vec_type, wp.float32, width, device)
            n = array.shape[0]
            if (count is None and n != rows) or n < rows:
                expected = f"{rows} rows ({what})" if count is None else f"at least count={rows} rows"
                raise ValueError(f"{name}: expected {expected}, got {n}")
            outputs.append(array)
        positions_out, orientations_out, scales_out = outputs
        if scales_out is not None and source.matrices is None:
            raise ValueError(
                "scales: this provider's source has positions and orientations but no scale; pass scales=None"
            )
        if rows == 0 or all(o is None for o in outputs):
            return False

        self._status.zero_()
        if source.matrices is not None:
            wp.launch(
                gather_matrix_transforms,
                dim=rows,
                inputs=[source.matrices, mapping, source.count],
                outputs=[positions_out, orientations_out, scales_out, self._status],
                device=device,
            )
        else:
            wp.launch(
                gather_pose_transforms,
                dim=rows,
                inputs=[source.positions, source.orientations, mapping, source.count],
                outputs=[positions_out, orientations_out, self._status],
                device=device,
            )
        if mapping is None:
            return True  # identity: every row was written; no read-back needed
        written, out_of_range = (int(v) for v in self._status.numpy())
        if out_of_range:
            values = mapping.numpy()[:rows]
            bad = np.flatnonzero((values < -1) | (values >= source.count))
            raise IndexError(
                f"mapping[{bad[0]}] = {values[bad[0]]} is out of range for a source of {source.count} transforms "
                f"({bad.size} such rows); expected -1 (skip) or 0..{source.count - 1}; build the mapping with this "
                "provider's create_mapping"
            )
        return bool(written)

    def _current_source(self) -> _Source | None:
        """The validated source: the stored arrays, or what the callable returns now (``None``: no data)."""
        if self._callable is None:
            return self._source
        value = self._callable()
        if value is None:
            return None
        return _resolve_source(value, len(self._paths), self._device)

    def __repr__(self) -> str:
        kind = (
            "callable" if self._callable is not None else ("matrices" if self._source.matrices is not None else "poses")
        )
        return f"SceneDataProvider(count={self.count}, source={kind}, device={self._device})"

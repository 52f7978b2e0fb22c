# SPDX-License-Identifier: Apache-2.0
"""The types of the array arguments every view takes: data (:data:`ArrayLike`), rows (:data:`IndicesLike`,
:data:`MaskLike`) and flags (:data:`BoolsLike`). Public as ``frameview.ArrayLike`` and so on.

They are unions of what the views accept: Warp arrays, NumPy arrays, torch tensors (described by
:class:`TensorLike`, so that torch is never imported), Isaac Lab ``ProxyArray``-likes (:class:`ProxyArrayLike`) and
Python sequences. mypy checks a call against them; the views check the values (shape, dtype, device) at run time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, Union

import numpy as np
import warp as wp

__all__ = ["ArrayLike", "BoolsLike", "IndicesLike", "MaskLike", "ProxyArrayLike", "TensorLike"]


class TensorLike(Protocol):
    """A ``torch.Tensor``, as the views see one (torch is never imported by frameview): an array with a data pointer,
    a shape, a dtype and a device. Tensors on the view's device are read in place (zero-copy, strided column slices
    included); others are copied once."""

    @property
    def shape(self) -> Any: ...

    @property
    def dtype(self) -> Any: ...

    @property
    def device(self) -> Any: ...

    def data_ptr(self) -> int: ...

    def dim(self) -> int: ...


class ProxyArrayLike(Protocol):
    """An Isaac Lab ``ProxyArray``-like: an object whose ``warp`` attribute holds the Warp array it wraps (the views
    read that array)."""

    @property
    def warp(self) -> wp.array: ...


ArrayLike = Union[wp.array, np.ndarray, TensorLike, ProxyArrayLike, Sequence[Sequence[float]]]
"""Pose or scale data of M rows: an (M,) ``wp.vec3f`` / ``wp.quatf`` (or ``wp.vec4f``) Warp array, an (M, 3) or
(M, 4) float32 / float64 Warp array, NumPy array or torch tensor (float16 and bfloat16 too; strided column slices such
as ``root_state[:, 3:7]`` are read in place), an Isaac Lab ``ProxyArray``, or nested sequences of floats."""

IndicesLike = Union[None, wp.array, np.ndarray, TensorLike, ProxyArrayLike, Sequence[int]]
"""``None`` (every row), or M view indices of any signed or unsigned integer dtype: a Warp array (strided too), a
NumPy array, a torch tensor, an Isaac Lab ``ProxyArray``, a list, a tuple or a ``range``."""

MaskLike = Union[None, wp.array, np.ndarray, TensorLike, ProxyArrayLike, Sequence[bool]]
"""``None``, or a boolean (N,) selection of view rows (N = the view's count): a ``wp.bool`` Warp array, a NumPy or
torch bool array, or a sequence of bools."""

BoolsLike = Union[bool, wp.array, np.ndarray, TensorLike, Sequence[bool]]
"""One bool for every row, or M bools: a ``wp.bool`` Warp array, a NumPy or torch bool array, or a sequence."""

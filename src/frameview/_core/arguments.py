# SPDX-License-Identifier: Apache-2.0
"""The argument handling every view shares: rows (all / indices / mask) and data, checked once at the boundary.

:class:`Arguments` (a view's ``_args``) turns a call's ``indices`` / ``mask`` into :class:`~frameview._core.rows.Rows`
(host indices checked on the host and staged into a device buffer, device indices used as they are or narrowed to
int32 in one launch, masks kept as masks), hands out the view-owned output buffers, and coerces pose and scale data
to the kernels' dtype on the view's device (host data checked on the host, device data by the kernels or one check
launch).
"""

from __future__ import annotations

import contextlib
import sys
import threading
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
import warp as wp

from .argument_kernels import INDEX_DTYPES, check_values, narrow_kernel
from .array_types import ArrayLike, IndicesLike, MaskLike
from .device_errors import CODE_ZERO_QUATERNION, DeviceErrors, outside_capture, split_status
from .host import to_numpy
from .host_staging import HostStaging, call_bytes
from .interop import borrow_host_rows, borrow_indices, borrow_mask
from .launch import RecordedLaunch, block_dim_for
from .quat_order import QuatOrder
from .rows import ALL, INDEXED, MASK, Rows, is_torch_tensor
from .values import NO_KEY, check_host_rows, device_data, float32_rows, layout_key, unwrap, wait_for_producer, width_of

__all__ = ["Arguments", "ArrayLike", "IndicesLike", "MaskLike"]

_INDEX_KINDS = ("i", "u")
_FLOAT32 = np.dtype(np.float32)
_RECENT_WRITES = 4
"""Writes :meth:`Arguments.recent_write` keeps per call name (a loop alternating a few buffers hits each)."""
_MASK_KEY = "mask"
"""The keyword part of ``Arguments._last_rows``'s key for masks (indices: whether the backend narrows)."""


class Arguments:
    """The row resolver of a view (every backend): a call's ``indices`` / ``mask`` as :class:`Rows`, the view-owned
    output buffers, and the call's data coerced to the kernels' dtype on the view's device.

    Args:
        count: The view's prim count.
        device: The view's Warp device.
        errors: The view's status word (earlier device errors reported by :meth:`prepare`, capture state).
        device_rows: Whether the backend takes device indices and masks as they are (its kernels check them).
        folds_narrow: Whether the backend's indexed launches narrow index arrays of other dtypes themselves
            (:attr:`Rows.narrow`).
        owner: A weak reference to the view (its ``repr`` names it in error messages).

    Attributes:
        index_buffer: (N,) int32 on the device: host indices staged, device indices narrowed.
        index_host: Its NumPy view on the CPU (host indices are written into it), empty on CUDA (staged instead).
        heads: The cache of buffer heads (:meth:`head`).
    """

    def __init__(
        self,
        count: int,
        device: wp.context.Device,
        errors: DeviceErrors,
        *,
        device_rows: bool,
        folds_narrow: bool,
        owner: weakref.ReferenceType,
    ) -> None:
        self.count = count
        self._device = device
        self._errors = errors
        self._device_rows = device_rows
        self._folds_narrow = folds_narrow
        self._owner = owner
        self._thread_buffers = threading.local()  # per-thread output buffers: {name: wp.array}
        self.index_buffer = wp.empty(max(count, 1), dtype=wp.int32, device=device)
        # CPU: host indices are written into the index buffer itself; CUDA: staged (_staging)
        self.index_host = to_numpy(self.index_buffer) if device.is_cpu else np.empty(0, dtype=np.int32)
        self.heads: dict[tuple[int, int], wp.array] = {}
        self._all_rows = Rows(ALL, count)
        self._narrow_cmds: dict[Any, RecordedLaunch] = {}  # recorded index-narrowing launches, by index dtype
        self._casts: dict[Any, Any] = {}  # the last float32 cast of each kind of torch data (kept alive)
        self._host_staging: HostStaging | None = None  # CUDA: host inputs' staging buffers, made on first use
        self._last_rows: tuple[Any, Any, tuple, Rows] | None = None  # (device indices or mask, keyword, layout, Rows)
        self._narrowed: wp.array | None = None  # the index buffer head the last narrowing launch wrote
        self._recent: dict[str, list[tuple[tuple, tuple]]] = {}  # call -> [(layout key, (rows, data, now))]
        self.quat_order: QuatOrder | None = None  # quat_order="wxyz": orientations arrive wxyz (set by the view)

    def prepare(self, indices: IndicesLike, mask: MaskLike = None, write: bool = False, fold: bool = False) -> Rows:
        """Report errors of earlier device calls (the view checked it is open), and turn ``indices`` / ``mask`` into
        :class:`Rows`. Host indices are checked here (a write also needs each index once: two rows for one prim
        race on a GPU); device indices and masks are checked by the kernels, without a host round trip. ``fold``:
        the caller hands the rows straight to the backend's launches, which narrow other index dtypes themselves
        when the backend says so (``_folds_narrow``: one launch less, and part of the backend's own graph)."""
        self._errors.poll()
        if indices is None and mask is None:
            return self._all_rows
        if indices is not None and mask is not None:
            raise TypeError("indices and mask: pass one of them, not both")
        indices, mask = unwrap(indices), unwrap(mask)
        # The reset loop passes device arrays of one layout every call: reuse their Rows. The cache is keyed on
        # everything that gives them their meaning: the keyword, whether the backend narrows indices itself, and the
        # array's address, shape, strides, dtype (and identity for Warp arrays; a torch tensor's layout is its
        # meaning: the kept Rows hold the earlier tensor, so the address is still its memory).
        value, how = (indices, fold and self._folds_narrow) if mask is None else (mask, _MASK_KEY)
        layout = _layout(value)
        last = self._last_rows
        if last is not None and last[1] is how and last[2] == layout and (last[0] is value or len(layout) == 5):
            return last[3]
        if mask is not None:
            rows = Rows(MASK, self.count, mask=self.mask_to_device(mask))
            if rows.mask is mask or (len(layout) == 5 and rows.mask.ptr == layout[0]):  # not a copy
                self._last_rows = (mask, how, layout, rows)
            return rows
        if self._device_rows:  # device indices (on the CPU too: checked by the kernels, raised by the call)
            device_rows = self._device_indices(indices, how)
            if device_rows is not None:
                # the caller's memory used as is, or narrowed by the call's own launches (Rows.narrow): keep them
                if device_rows.indices is not self._narrowed or device_rows.narrow is not None:
                    self._last_rows = (indices, how, layout, device_rows)
                return device_rows
        host = self.indices_to_numpy(indices)
        self.check_host_indices(host, write)
        return self._stage_host_indices(host)

    def recent_write(
        self, call: str, indices: IndicesLike, mask: MaskLike, values: tuple[tuple[Any, str, type], ...]
    ) -> tuple[tuple | None, tuple | None]:
        """A write whose arguments are device memory of the layout of a recent ``call`` read in place: ``(key,
        (rows, data, now))``, what :meth:`prepare` and :meth:`write_values` made of them then (device errors of
        earlier calls reported, as :meth:`prepare` does). ``(key, None)``: not recent; :meth:`remember_write` keeps
        the call's result under ``key`` (``None``: host data, never kept).

        A reset loop passes buffers of one layout every step. Their Rows and arrays are views of the caller's memory
        (they own nothing: only the layout gives them their meaning) and everything else a write does with them
        (narrowing, checks) runs in its launches, so the same layout means the same result: this reads each
        argument's layout and skips the rest of the argument handling."""
        if not self._device_rows:  # other backends check device data with launches of the argument handling
            return None, None
        index_key = layout_key(indices)
        if index_key is NO_KEY:  # host indices (and, usually, host data)
            return None, None
        key = (index_key, layout_key(mask), *[layout_key(value) for value, _name, _dtype in values])
        if NO_KEY in key:
            return None, None
        for kept, result in self._recent.get(call, ()):
            if kept == key:
                self._errors.poll()
                return key, result
        return key, None

    def remember_write(
        self, call: str, key: tuple | None, rows: Rows, pairs: list[tuple[wp.array | None, bool]], now: bool
    ) -> None:
        """Keep a write's rows and data for :meth:`recent_write` when every one of them is the caller's memory read
        in place (its address): nothing copied, staged, cast or narrowed by a launch of the argument handling."""
        if key is None:
            return
        index_key, mask_key, *value_keys = key
        if rows.kind == INDEXED:
            source = rows.narrow[1] if rows.narrow is not None else rows.indices
            if index_key is None or source is None or source.ptr != index_key[0]:
                return
        elif rows.kind == MASK:
            if mask_key is None or rows.mask is None or rows.mask.ptr != mask_key[0]:
                return
        elif rows.kind != ALL:
            return
        for (array, _host), value_key in zip(pairs, value_keys, strict=True):
            if (array is None) != (value_key is None) or (array is not None and array.ptr != value_key[0]):
                return
        recent = self._recent.setdefault(call, [])
        if len(recent) >= _RECENT_WRITES:
            recent.pop()
        recent.insert(0, (key, (rows, [array for array, _host in pairs], now)))

    def host_write(
        self, indices: IndicesLike, mask: MaskLike, values: tuple[tuple[Any, str, type], ...]
    ) -> tuple[Rows, list[wp.array | None]] | None:
        """A CUDA write from NumPy (the common host kind): int indices and float32 (M, width) rows, or ``None``
        where the call passes another kind (the general path takes it). The indices are checked here and staged,
        the rows staged for the kernels, which check them (as :meth:`prepare` and :meth:`write_values` do with
        ``kernels_check``, without their dispatch on the argument kinds); call inside :meth:`host_inputs`."""
        if type(indices) is not np.ndarray or mask is not None or not self._device_rows or self._device.is_cpu:
            return None
        n = indices.shape[0] if indices.ndim == 1 and indices.dtype.kind in _INDEX_KINDS else 0
        if not n or self.quat_order is not None:
            return None
        for value, _name, dtype in values:
            if value is not None and (type(value) is not np.ndarray or value.dtype != _FLOAT32 or value.ndim != 2
                                      or value.shape[0] != n or value.shape[1] != width_of(dtype)):  # fmt: skip
                return None
        self._errors.poll()
        self.check_host_indices(indices, write=True)
        rows = self._stage_host_indices(indices)
        staging = self._staging()
        return rows, [None if value is None else staging.put(name, value, dtype) for value, name, dtype in values]

    def check_host_indices(self, host: np.ndarray, write: bool) -> None:
        """Bounds of host indices, and (a write) each index at most once."""
        if not host.size:
            return
        # sorted ids (the usual reset) are checked by one comparison: increasing, each index once, ends the bounds
        increasing = write and host.size > 1 and not np.count_nonzero(np.less_equal(host[1:], host[:-1]))
        low, high = (int(host[0]), int(host[-1])) if increasing else (int(host.min()), int(host.max()))
        if low < 0:
            raise IndexError(f"indices: index {low} is negative; expected 0 <= index < count={self.count}")
        if high >= self.count:
            raise IndexError(f"indices: index {high} is out of range for a view of count={self.count}")
        if write and host.size > 1 and not increasing:
            counts = np.bincount(host.astype(np.intp, copy=False))
            if counts.max() > 1:
                dup = int(np.argmax(counts))
                raise ValueError(
                    f"indices: index {dup} appears {int(counts[dup])} times in a write; expected each index at "
                    "most once (drop the duplicates and their rows); nothing was written"
                )

    def _stage_host_indices(self, host: np.ndarray) -> Rows:
        """Checked host indices as int32 :class:`Rows` on the device (CUDA: through the view's staging buffers)."""
        n = host.size
        if n > self.index_buffer.shape[0]:  # more indices than prims (repeated reads): a one-off array
            out = wp.array(np.ascontiguousarray(host, dtype=np.int32), dtype=wp.int32, device=self._device)
            return Rows(INDEXED, n, indices=out)
        if self._device.is_cuda:
            out = self._staging().put("indices", host, wp.int32) if n else None  # bounds checked: int32 is exact
            return Rows(INDEXED, n, indices=out if out is not None else self.head(self.index_buffer, 0))
        self.index_host[:n] = host  # bounds checked above: the int32 cast is exact
        return Rows(INDEXED, n, indices=self.head(self.index_buffer, n))

    def _staging(self) -> HostStaging:
        """The view's staging buffers for host inputs (CUDA), made on first use."""
        staging = self._host_staging
        if staging is None:  # no memory yet: the first put allocates it (and refuses a capture)
            staging = self._host_staging = HostStaging(self._device, self._errors.is_capturing, call_bytes(self.count))
        return staging

    def host_inputs(self, in_place: bool = False) -> Any:
        """A context for one call's argument handling: on CUDA, its host inputs reach the device in one copy when
        it ends, or (``in_place``: a context around the call's launches too) are read by its kernels from pinned
        memory (:meth:`HostStaging.batch`); the context's value is the staging (``None`` on the CPU)."""
        return self._staging().batch(in_place) if self._device.is_cuda else contextlib.nullcontext()

    def _device_indices(self, indices: IndicesLike, fold: bool = False) -> Rows | None:
        """Indices already on the view's device (Warp arrays, torch tensors: zero-copy), as int32 without a host
        round trip (None: take the host path). Contiguous int32 is used as is; other integer dtypes and strided
        arrays are narrowed into the view's index buffer by one recorded launch."""
        source = indices
        if is_torch_tensor(indices):
            indices = borrow_indices(indices)
            if indices is None:  # not an integer tensor: the host path names what is wrong
                return None
        elif not isinstance(indices, wp.array):
            return None
        if indices.device != self._device or indices.dtype not in INDEX_DTYPES:
            return None
        if indices.ndim != 1:
            raise ValueError(f"indices: expected a 1-D array of indices, got shape {tuple(indices.shape)}")
        n = indices.shape[0]
        if indices.dtype == wp.int32 and indices.is_contiguous:
            return Rows(INDEXED, n, indices=indices, checked=False, source=source)
        if n <= self.index_buffer.shape[0]:
            out = self.head(self.index_buffer, n)
        else:
            out = wp.empty(n, dtype=wp.int32, device=self._device)
        self._narrowed = out
        if n and fold:  # the backend's first launch of the call narrows them
            return Rows(INDEXED, n, indices=out, checked=False, source=source, narrow=(narrow_kernel(indices.dtype),
                                                                                     indices))  # fmt: skip
        if n:  # other dtypes and strided arrays: one launch into contiguous int32
            kernel, params = narrow_kernel(indices.dtype), [indices, self.count, out]
            if self._errors.is_capturing():  # inside the caller's capture: a plain launch, captured there
                wp.launch(kernel, dim=n, inputs=params, device=self._device)
            else:  # one recorded launch per dtype (one overload each)
                cmd = self._narrow_cmds.get(indices.dtype)
                if cmd is None:
                    cmd = self._narrow_cmds[indices.dtype] = RecordedLaunch(kernel, n, params, self._device,
                                                                           block_dim_for(self._device))  # fmt: skip
                cmd.launch(n, params)
        return Rows(INDEXED, n, indices=out, checked=False, source=source)

    def mask_to_device(self, mask: MaskLike, count: int | None = None) -> wp.array:
        """A boolean (``count``,) mask (default: the view's count) as a ``wp.bool`` array on the view's device
        (zero-copy for device inputs)."""
        count = self.count if count is None else count
        if is_torch_tensor(mask):
            if mask.dtype != sys.modules["torch"].bool:
                raise TypeError(f"mask: expected a boolean tensor, got dtype {mask.dtype}")
            if tuple(mask.shape) != (count,):
                raise ValueError(f"mask: expected shape ({count},), got {tuple(mask.shape)}")
            borrowed = borrow_mask(mask)  # zero-copy, strided or not
            if borrowed is not None and borrowed.device == self._device:
                return borrowed
            mask = mask.detach().cpu().numpy()
        if isinstance(mask, wp.array):
            if mask.dtype != wp.bool:
                raise TypeError(f"mask: expected a Warp array of dtype wp.bool, got {mask.dtype}")
            if mask.shape != (count,):
                raise ValueError(f"mask: expected shape ({count},), got {mask.shape}")
            if mask.device == self._device:
                return mask
            wait_for_producer(mask)
            return wp.clone(mask, device=self._device)
        host = np.asarray(mask)
        if host.dtype != np.bool_:
            raise TypeError(f"mask: expected booleans, got dtype {host.dtype} (for view indices pass indices=...)")
        if host.shape != (count,):
            raise ValueError(f"mask: expected shape ({count},), got {host.shape}")
        return wp.array(host, dtype=wp.bool, device=self._device)

    def host_mask_indices(self, rows: Rows) -> wp.array:
        """The masked view indices as int32 on the device (host-bound backends: one host round trip)."""
        idx = np.flatnonzero(to_numpy(rows.mask)).astype(np.int32)
        return wp.array(idx, dtype=wp.int32, device=self._device)

    def indices_to_numpy(self, indices: IndicesLike) -> np.ndarray:
        if isinstance(indices, wp.array):
            if indices.dtype not in INDEX_DTYPES:
                hint = " (for a boolean mask pass mask=...)" if indices.dtype == wp.bool else ""
                raise TypeError(f"indices: expected a Warp array of an integer dtype, got dtype {indices.dtype}{hint}")
            host = to_numpy(indices)
        elif isinstance(indices, np.ndarray):
            host = indices
        elif is_torch_tensor(indices):
            host = indices.detach().cpu().numpy()
        elif isinstance(indices, (list, tuple, range)):
            if any(isinstance(i, (bool, np.bool_)) for i in indices):
                raise TypeError("indices: expected integers, got booleans (for a mask pass mask=...)")
            try:
                host = np.asarray(indices) if len(indices) else np.empty(0, dtype=np.int64)
            except ValueError as exc:  # ragged nested lists
                raise ValueError("indices: expected a flat sequence of integers, got a ragged nested one") from exc
        else:
            raise TypeError(
                f"indices: expected None, a list, or an integer Warp/NumPy/torch array, got {type(indices).__name__}"
            )
        if host.dtype == np.bool_:
            raise TypeError("indices: boolean masks are not indices; pass mask=... (or np.flatnonzero(mask))")
        if host.dtype.kind not in _INDEX_KINDS:
            raise TypeError(f"indices: expected integer indices, got dtype {host.dtype}")
        if host.ndim != 1:
            raise ValueError(f"indices: expected a 1-D array of indices, got shape {tuple(host.shape)}")
        return host

    def outputs(self, name: str, dtype: type, rows: int) -> wp.array:
        """The view-owned output buffer ``name``, cut to ``rows`` rows."""
        buffers = getattr(self._thread_buffers, "buffers", None)
        if buffers is None:
            buffers = self._thread_buffers.buffers = {}
        buf = buffers.get(name)
        if buf is None or buf.shape[0] < rows:
            self.check_outside_capture("its output buffers")
            buf = wp.empty(max(rows, self.count), dtype=dtype, device=self._device)
            buffers[name] = buf
        return self.head(buf, rows)

    def pose_outputs(self, pos_name: str, quat_name: str, rows: int) -> tuple[wp.array, wp.array]:
        """The view-owned position and orientation buffers, cut to ``rows`` rows: one lookup for both (a pose read's
        host path), remembered per row count (a few counts per thread; the pairs hold the buffers they cut)."""
        pairs = getattr(self._thread_buffers, "pairs", None)
        if pairs is None:
            pairs = self._thread_buffers.pairs = {}
        key = (pos_name, rows)
        pair = pairs.get(key)
        if pair is None:
            if len(pairs) >= 16:  # many row counts (indexed reads of every size): forget the pairs, keep the buffers
                pairs.clear()
            pair = pairs[key] = (self.outputs(pos_name, wp.vec3f, rows), self.outputs(quat_name, wp.quatf, rows))
        return pair

    def check_outside_capture(self, what: str) -> None:
        """Raise if the device is capturing a CUDA graph: ``what`` is about to be allocated, and memory allocated in
        a capture belongs to the graph (invalid until it is replayed, freed with it)."""
        outside_capture(repr(self._owner()), self._device, self._errors, what)

    def head(self, buf: wp.array, rows: int) -> wp.array:
        """``buf[:rows]``, remembered: slicing a Warp array costs more host time than a small read's kernels."""
        if rows == buf.shape[0]:
            return buf
        key = (buf.ptr, rows)
        head = self.heads.get(key)
        if head is None:
            if len(self.heads) >= 256:
                self.heads.clear()
            head = self.heads[key] = buf[:rows]  # holds ``buf``: its address cannot be reused while cached
        return head

    def write_values(
        self, rows: Rows, values: tuple[tuple[Any, str, type], ...], kernels_check: bool = False
    ) -> tuple[Rows, list[tuple[wp.array | None, bool]]]:
        """A write's data (``(value, name, dtype)`` each) through :meth:`_coerce_rows`, and the rows to write: a
        host-bound backend's mask becomes the indices of its rows (the data cut to them). A masked write reads and
        checks only the masked rows of its data: the others may hold anything. ``kernels_check``: the write runs
        now and the call waits for its verdict on host data (a view's setters), so on a backend whose kernels check
        the values they read (``device_rows``) host data is checked there, not again on the host."""
        select = None
        masked = rows.kind == MASK
        if masked and not self._device_rows:
            select = self.host_mask_indices(rows)
        read: list[np.ndarray] = []

        def masked_rows() -> np.ndarray:  # a masked write's rows, read back once and only for host data
            if not read:
                read.append(np.flatnonzero(to_numpy(rows.mask)))
            return read[0]

        rows_of_mask = masked_rows if masked else None
        pairs = [
            self._coerce_rows(v, name, dtype, rows.count, select, rows_of_mask, kernels_check)
            for v, name, dtype in values
        ]
        if select is not None:
            rows = Rows(INDEXED, select.shape[0], indices=select)
        return rows, pairs

    def _coerce_rows(
        self,
        value: ArrayLike | None,
        name: str,
        dtype: type,
        rows: int,
        select: wp.array | None = None,
        masked_rows: Callable[[], np.ndarray] | None = None,
        kernels_check: bool = False,
    ) -> tuple[wp.array | None, bool]:
        """Check ``value`` is (rows, width) floating point; return it as ``dtype`` on the view's device, and whether
        it came from the host (``None`` counts as host data).

        Host data is checked for non-finite values (and zero quaternions) here, at once, before anything is written
        (with ``kernels_check`` on a ``_device_rows`` backend: by its kernels, whose verdict the call waits for);
        device data by the backend's kernels (``_device_rows``) or by one check launch. ``select``: keep only these
        rows (host-bound backends' masked writes; they are checked on the host, device data included, since it is
        copied there). ``masked_rows``: a masked write's rows (a callable: the mask is read back only when host data
        needs it); only those rows of the data are checked, the others may hold anything.
        """
        if value is None:
            return None, True
        value = unwrap(value)
        if self._device_rows and select is None:  # the reset path: device data the kernels read in place
            fast = device_data(value, dtype, self._device, self._casts)
            if fast is not None:
                if fast.shape[0] != rows:
                    width = width_of(dtype)
                    raise ValueError(f"{name}: expected shape ({rows}, {width}), got ({fast.shape[0]}, {width})")
                if rows and self.quat_order is not None and dtype is wp.quatf:
                    fast = self._xyzw_rows(fast, rows)
                return (fast if rows else None), False
            if kernels_check and rows and self._device.is_cpu and isinstance(value, np.ndarray):
                # NumPy float32 rows for a CPU view: read in place by the kernels, which check them
                fast = borrow_host_rows(value, dtype)
                if fast is not None and fast.shape[0] == rows:
                    if self.quat_order is not None and dtype is wp.quatf:
                        fast = self._xyzw_rows(fast, rows)
                    return fast, True
        width = width_of(dtype)
        # host data for a CUDA view stays NumPy
        arr, from_host = float32_rows(value, name, width, self._device, self._device_rows)
        if arr.shape[0] != rows:
            raise ValueError(f"{name}: expected shape ({rows}, {width}), got ({arr.shape[0]}, {width})")
        if rows == 0:
            return None, from_host
        check_norm = dtype is wp.quatf
        host = None
        if select is not None or from_host:
            host = arr if isinstance(arr, np.ndarray) else None  # (host data for a CUDA view)
            if select is not None or not (kernels_check and self._device_rows):
                host = to_numpy(arr) if host is None else host
                read = None  # the rows the write reads: all, or a mask's
                if select is not None:
                    read = to_numpy(select)
                elif masked_rows is not None:
                    read = masked_rows()
                check_host_rows(host, read, name, check_norm)
        if select is not None:
            arr = wp.array(host[read], dtype=wp.float32, device=self._device)
        elif host is not None and self._device.is_cuda:  # host data for a CUDA view: one staged copy
            if self.quat_order is not None and dtype is wp.quatf:  # wxyz host data: reordered on the host
                host = self.quat_order.host_input(host)
            return self._staged_rows(host, name, dtype), from_host
        elif arr.device != self._device:  # another device's
            wait_for_producer(arr)
            arr = wp.clone(arr, device=self._device)
        if not from_host and not self._device_rows and select is None:
            status = self._errors.status
            wp.launch(check_values, dim=arr.shape[0], inputs=[arr, int(check_norm)], outputs=[status],
                      device=self._device)  # fmt: skip
            self._errors.settle(self._value_error(name, arr), now=True)
        if self.quat_order is not None and dtype is wp.quatf:
            return self._xyzw_rows(arr.view(dtype), rows), from_host
        return arr.view(dtype), from_host

    def _xyzw_rows(self, quats: wp.array, rows: int) -> wp.array:
        """wxyz orientations (``quat_order="wxyz"``) on the view's device -> xyzw in the view's scratch buffer (one
        launch; the caller's array is not written). Read by this call's launches, or copied by a writer scope, before
        the next call reuses it."""
        assert self.quat_order is not None
        return self.quat_order.device_input(quats, self.outputs("quat_order_in", wp.quatf, rows))

    def _staged_rows(self, host: np.ndarray, name: str, dtype: Any) -> wp.array:
        """Host rows ((M, width) NumPy, checked here or by the kernels that read them) on the view's CUDA device as
        (M,) ``dtype``, through the view's staging buffers (:class:`~.host_staging.HostStaging`): no allocation, at
        most one copy per call (none in a setter: its kernels read the pinned rows); the device rows are read by this
        call's launches (or copied by a writer scope) before the next call writes the buffer."""
        return self._staging().put(name, host, dtype)

    def _value_error(self, name: str, arr: wp.array) -> Callable[[int], Exception]:
        def make(value: int) -> Exception:
            row, code = split_status(value)
            values = to_numpy(arr)[row].tolist()
            what = "a zero-norm quaternion" if code == int(CODE_ZERO_QUATERNION) else "a non-finite value"
            return ValueError(f"{name}: row {row} holds {what} {values}; nothing was written")

        return make


def _layout(value: Any) -> tuple:
    """What decides the meaning of an index or mask array besides its identity: address, shape, strides, dtype."""
    if isinstance(value, wp.array):
        return (value.ptr, value.shape, value.strides, value.dtype)
    if is_torch_tensor(value):
        return (value.data_ptr(), value.shape, value.stride(), value.dtype, value.device)
    return ()

# SPDX-License-Identifier: Apache-2.0
"""Poses across processes: one simulation per GPU, one process per GPU, joined by ``torch.distributed``.

Each rank builds its own views on its own device (:func:`rank_device`), reads and writes its own envs, and gathers
poses from every rank only where something needs them all (a logger, a global camera, an evaluation):
:func:`all_gather_poses`. Nothing here runs at ``import frameview``: this module (and torch) load when one of its
names is first touched. It runs on the CPU with the ``gloo`` backend and on GPUs with ``nccl``.

Example (launched with ``torchrun --nproc-per-node 2 script.py``)::

    import torch, torch.distributed as dist
    import frameview as fv

    device = fv.rank_device()                       # "cuda:<LOCAL_RANK>", or "cpu" without GPUs
    if device != "cpu":
        torch.cuda.set_device(device)               # before init_process_group: NCCL binds to it
        wp.set_device(device)                       # Warp's default device is cuda:0 otherwise
    dist.init_process_group("nccl" if device != "cpu" else "gloo")
    cams = fv.FabricFrameView("/World/envs/env_.*/Camera", stage=my_stage_slice, device=device)
    gathered = fv.all_gather_poses(cams)            # every rank's cameras, rank 0's rows first
    pos_of_rank_1, quat_of_rank_1 = gathered.per_rank()[1]
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import warp as wp

from ._core.interop import as_torch
from ._core.launch import RecordedLaunch
from ._core.torch_collectives import (
    all_gather_single,
    comm_device,
    current_torch_stream,
    exchange_counts,
    group_facts,
    remember,
    torch_device,
    torch_modules,
)

if TYPE_CHECKING:
    import torch

__all__ = ["GatheredPoses", "all_gather_poses", "rank_device"]

_WIDTH = 7
"""Floats per gathered row: ``px py pz qx qy qz qw``."""


_SEND: dict[tuple[int, int], tuple[Any, wp.array]] = {}
"""Send buffers of the CUDA path, by (rows, CUDA ordinal): a torch tensor and its Warp view. Reused: the next call's
pack runs on Warp's stream after that stream waited for torch's, which the collective ordered after itself."""

_SPLIT = (3, _WIDTH - 3)
"""Columns of a gathered row that are the position, and those that are the orientation."""


_PACKS: dict[tuple, RecordedLaunch] = {}
"""Recorded pack launches by (input addresses, count, send buffer, rows): a view's outputs are the same each call."""


@wp.kernel(enable_backward=False)
def _pack_rows(
    pos: wp.array(dtype=wp.vec3f), quat: wp.array(dtype=wp.quatf), count: int, send: wp.array2d(dtype=wp.float32)
):
    """``send[i] = (pos[i], quat[i])`` for ``i < count``, zeros below (padding to the largest rank's count)."""
    i = wp.tid()
    p = wp.vec3f(0.0, 0.0, 0.0)
    q = wp.quatf(0.0, 0.0, 0.0, 0.0)
    if i < count:
        p = pos[i]
        q = quat[i]
    for c in range(3):
        send[i, c] = p[c]
    for c in range(4):
        send[i, 3 + c] = q[c]


class GatheredPoses(NamedTuple):
    """Poses of every rank, concatenated in rank order (ranks of ``group``).

    Rows ``offsets[r] : offsets[r] + counts[r]`` are rank ``r``'s, in the order that rank passed them. With equal
    counts on every rank this is ``world_size * M`` rows, rank ``r``'s at ``r * M``.

    Attributes:
        positions (torch.Tensor): (sum(counts), 3) float32 torch tensor, world frame, stage units, on the device of
            the poses that were passed in. A view of the call's one new (sum(counts), 7) tensor (row stride 7, not
            contiguous: ``.contiguous()`` gives a packed copy).
        orientations (torch.Tensor): (sum(counts), 4) float32 torch tensor, **xyzw**, world frame, same device; a
            view of the same tensor.
        counts (tuple[int, ...]): Rows per rank, in rank order.

    Example:
        >>> gathered = fv.all_gather_poses(cams)  # doctest: +SKIP
        >>> pos_r1, quat_r1 = gathered.per_rank()[1]  # rank 1's rows: (counts[1], 3), (counts[1], 4)
    """

    positions: torch.Tensor
    orientations: torch.Tensor
    counts: tuple[int, ...]

    @property
    def offsets(self) -> tuple[int, ...]:
        """First row of each rank."""
        return tuple(itertools.accumulate(self.counts[:-1], initial=0))

    def per_rank(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """``(positions, orientations)`` of each rank, in rank order: views of the gathered tensors, no copy."""
        return list(zip(self.positions.split(list(self.counts)), self.orientations.split(list(self.counts)),
                        strict=True))  # fmt: skip


def rank_device(local_rank: int | None = None) -> str:
    """The Warp device for this rank's views: ``"cuda:<local rank>"`` when CUDA devices are visible, else ``"cpu"``.

    One process per GPU: local rank ``r`` takes CUDA device ``r``; a process that sees a single GPU (a launcher that
    hands each process its own through ``CUDA_VISIBLE_DEVICES``) takes ``"cuda:0"`` whatever its rank. Pass the same
    string to ``torch.cuda.set_device`` before ``torch.distributed.init_process_group``.

    Args:
        local_rank: This process's rank on its host; default ``$LOCAL_RANK`` (set by ``torchrun``), else 0.

    Raises:
        ValueError: A negative local rank, or one with no GPU of its own (more ranks on the host than visible GPUs:
            two ranks would share a GPU).
    """
    if local_rank is None:
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if local_rank < 0:
        raise ValueError(f"local_rank: expected >= 0, got {local_rank}")
    count = wp.get_cuda_device_count()
    if count == 0:
        return "cpu"
    if count == 1:
        return "cuda:0"
    if local_rank >= count:
        raise ValueError(
            f"local_rank: {local_rank} has no GPU of its own ({count} visible); start at most {count} processes per "
            "host, or give each process its GPU through CUDA_VISIBLE_DEVICES"
        )
    return f"cuda:{local_rank}"


def all_gather_poses(
    poses: Any,
    group: Any = None,
    dst: int | None = None,
    *,
    counts: Sequence[int] | None = None,
) -> GatheredPoses | None:
    """Gather every rank's poses to every rank (or to ``dst`` only) through ``torch.distributed``.

    A collective: every rank of ``group`` calls it, with its own poses. Each rank's positions and orientations are
    viewed as torch tensors without a copy (``wp.to_torch``), packed into one (M, 7) float32 send buffer, and
    exchanged in **one** collective (``all_gather`` or, with ``dst``, ``gather``). Ranks may hold different counts:
    each send buffer is padded to the largest count, and the padding is dropped from the result. The counts are
    exchanged first (one small ``all_gather`` and a host read of its result) unless ``counts`` is given. A group of
    one rank needs no collective: its gather is one copy of its own rows.

    The collective runs on the poses' device when the backend serves it (``nccl`` for CUDA, ``gloo`` for the CPU);
    otherwise the data goes through a CPU (gloo) or the current CUDA device (nccl) and the result comes back to the
    poses' device. Warp inputs on CUDA are ordered against Warp's stream on the device, without a host wait: the
    pack waits for the read that produced them, and the view's next call waits for the pack.

    Args:
        poses: A FrameView (its ``get_world_poses()``: all its prims), or a ``(positions, orientations)`` pair of
            Warp arrays (``(M,) vec3f`` / ``(M,) quatf``, or (M, 3) / (M, 4) float32), torch tensors or NumPy
            arrays of shape (M, 3) / (M, 4), float, **xyzw**, on one device.
        group: The process group (default: the default group).
        dst: Global rank that receives the poses; every other rank gets ``None``. ``None``: every rank receives.
        counts: Rows of every rank, in rank order, when known (skips their exchange); must be the same on every
            rank, and ``counts[rank]`` must be this rank's M.

    Returns:
        :class:`GatheredPoses` (new tensors, not aliased with any view's buffers) on every rank, or on ``dst`` only
        (``None`` elsewhere).

    Raises:
        ImportError: torch is not installed (``pip install 'frameview[torch]'``).
        RuntimeError: ``torch.distributed`` is not initialised.
        TypeError: ``poses`` is neither a view nor a pair of arrays, or an array is not floating point.
        ValueError: Wrong shapes, the two arrays on different devices or of different lengths, or ``counts`` that
            do not match this rank's count or the group's size.
    """
    torch, dist = torch_modules()
    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError(
            "all_gather_poses: torch.distributed is not initialised; call torch.distributed.init_process_group "
            "first (e.g. under torchrun)"
        )
    if hasattr(poses, "get_world_poses"):
        poses = poses.get_world_poses()
    group, world, rank, backend = group_facts(group)
    own = dst is None or (world == 1 and dst == (rank if group is None else dist.get_rank()))  # all rows here
    if own and backend != "gloo" and _cuda_warp_pair(poses):  # NCCL serves the poses' device
        pos_w, quat_w = poses
        m, device = pos_w.shape[0], torch_device(pos_w.device.ordinal)
        counts = _all_counts(counts, m, world, rank, group, device)
        if max(counts) > 0:
            return _all_gather_cuda(pos_w, quat_w, counts, max(counts), group)
        return _no_rows(device, counts)
    pos, quat, warp_device = _as_tensors(poses)
    device = pos.device
    m = int(pos.shape[0])
    comm = comm_device(backend, device)
    counts = _all_counts(counts, m, world, rank, group, comm)
    receives = dst is None or dst == (rank if group is None else dist.get_rank())
    rows = max(counts)
    if rows == 0:
        return _no_rows(device, counts) if receives else None

    send = _pack(pos, quat, rows, comm, warp_device)

    out = torch.empty((world * rows, _WIDTH), dtype=torch.float32, device=comm) if receives else None
    if world == 1 and receives:  # one rank: the gathered rows are its own (the send buffer is new: the result)
        out = send
    elif dst is None:
        all_gather_single(out, send, group)
    else:
        dist.gather(send, list(out.split(rows)) if out is not None else None, dst=dst, group=group)
    if out is None:
        return None
    positions, orientations = _unpacked(out, counts, rows)
    if comm != device:
        positions, orientations = positions.to(device), orientations.to(device)
    return GatheredPoses(positions, orientations, counts)


def _cuda_warp_pair(poses: Any) -> bool:
    """Whether ``poses`` are a view's outputs on a CUDA device: ``(M,) vec3f`` and ``(M,) quatf`` Warp arrays,
    contiguous, of one length on one device (anything else takes the general path, which checks and converts)."""
    if not isinstance(poses, (tuple, list)) or len(poses) != 2:
        return False
    pos, quat = poses
    return (isinstance(pos, wp.array) and isinstance(quat, wp.array) and pos.dtype == wp.vec3f
            and quat.dtype == wp.quatf and pos.is_contiguous and quat.is_contiguous and pos.device.is_cuda
            and pos.device == quat.device and pos.shape == quat.shape)  # fmt: skip


def _no_rows(device: Any, counts: tuple[int, ...]) -> GatheredPoses:
    """The result of a gather in which no rank has a row."""
    torch, _dist = torch_modules()
    empty = torch.empty((0, _WIDTH), dtype=torch.float32, device=device)
    return GatheredPoses(empty[:, :3], empty[:, 3:], counts)


def _all_gather_cuda(pos: wp.array, quat: wp.array, counts: tuple[int, ...], rows: int, group: Any) -> GatheredPoses:
    """The NCCL path for a view's Warp outputs: one recorded Warp launch packs them into a reused send buffer on
    Warp's stream, torch's stream waits for it, the collective gathers into a new tensor on torch's stream, and
    Warp's stream waits for torch's (the view's next call overwrites ``pos`` / ``quat``, the next gather the send
    buffer). Without the waits where both libraries use one stream."""
    device = pos.device
    send_tensor, send = remember(_SEND, (rows, device.ordinal), lambda: _send_buffer(rows, device))
    warp_stream = wp.get_stream(device)
    torch_stream = current_torch_stream(device)
    params = [pos, quat, pos.shape[0], send]
    pack = remember(_PACKS, (pos.ptr, quat.ptr, pos.shape[0], send.ptr, rows),
                     lambda: RecordedLaunch(_pack_rows, rows, params, device))  # fmt: skip
    pack.launch(rows, params, warp_stream)
    same = torch_stream.cuda_stream == warp_stream.cuda_stream
    if not same:
        torch_stream.wait_stream(warp_stream)
    if len(counts) == 1:  # one rank: no collective, a copy (the result is new, the send buffer is reused)
        out = send_tensor.clone()
    else:
        out = send_tensor.new_empty((len(counts) * rows, _WIDTH))  # new each call: the result views it
        all_gather_single(out, send_tensor, group)
    if not same:
        warp_stream.wait_stream(torch_stream)
    positions, orientations = _unpacked(out, counts, rows)
    return GatheredPoses(positions, orientations, counts)


def _unpacked(out: torch.Tensor, counts: tuple[int, ...], rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Positions and orientations of the gathered ``out`` (world * rows, 7), padding rows dropped: column views of
    ``out`` itself when no rank was padded, else of one new tensor of the ranks' rows.

    Views, not copies: on an H200 host two ``contiguous()`` copies cost ~18 us of host time per gather, a new
    receive tensor and one split ~6 us (``perf/RESULTS.md``)."""
    torch, _dist = torch_modules()
    flat = out if min(counts) == rows else torch.cat([out[r * rows : r * rows + c] for r, c in enumerate(counts)])
    return flat.split_with_sizes(_SPLIT, 1)


def _send_buffer(rows: int, device: Any) -> tuple[Any, wp.array]:
    """A (rows, 7) float32 torch tensor on ``device`` and its Warp view (the tensor owns the memory)."""
    torch, _dist = torch_modules()
    tensor = torch.empty((rows, _WIDTH), dtype=torch.float32, device=torch.device("cuda", device.ordinal))
    return tensor, wp.from_torch(tensor)


def _all_counts(
    counts: Sequence[int] | None, m: int, world: int, rank: int, group: Any, comm: torch.device
) -> tuple[int, ...]:
    """Every rank's row count: the caller's ``counts`` checked, or exchanged (collective on ``comm``; one rank knows
    its own)."""
    if counts is not None:
        return _checked_counts(counts, m, world, rank)
    return (m,) if world == 1 else exchange_counts(m, world, group, comm)


def _checked_counts(counts: Sequence[int], m: int, world: int, rank: int) -> tuple[int, ...]:
    """The caller's ``counts`` as ints, checked against the group's size and this rank's row count."""
    counts = tuple(int(c) for c in counts)
    if len(counts) != world:
        raise ValueError(f"counts: expected {world} counts (one per rank of the group), got {len(counts)}")
    if counts[rank] != m:
        raise ValueError(f"counts: counts[{rank}] is {counts[rank]}, but this rank passes {m} poses")
    return counts


def _pack(pos: torch.Tensor, quat: torch.Tensor, rows: int, comm: torch.device, warp_device: Any) -> torch.Tensor:
    """The (rows, 7) send buffer on ``comm``: positions and orientations side by side, zero padding below.

    Warp inputs on CUDA are ordered against Warp's stream without a host wait: torch's stream waits for the read that
    produced them, and Warp's stream waits for the pack (the view's next call overwrites its buffers)."""
    torch, _dist = torch_modules()
    m = int(pos.shape[0])
    send = torch.empty((rows, _WIDTH), dtype=torch.float32, device=comm)
    warp_stream = wp.get_stream(warp_device) if warp_device is not None and warp_device.is_cuda else None
    torch_stream = current_torch_stream(warp_device) if warp_stream is not None else None
    if torch_stream is not None and torch_stream.cuda_stream != warp_stream.cuda_stream:
        torch_stream.wait_stream(warp_stream)
    else:
        torch_stream = None
    if comm == pos.device:
        torch.cat((pos, quat), dim=1, out=send[:m])
    else:
        send[:m, :3].copy_(pos)
        send[:m, 3:].copy_(quat)
    if torch_stream is not None:
        warp_stream.wait_stream(torch_stream)
    if rows > m:
        send[m:].zero_()
    return send


def _as_tensors(poses: Any) -> tuple[torch.Tensor, torch.Tensor, Any]:
    """``(positions (M, 3), orientations (M, 4), Warp device or None)`` as float32 torch tensors, zero-copy where the
    input already is float32 (Warp arrays through ``wp.to_torch``)."""
    torch, _dist = torch_modules()
    if not isinstance(poses, (tuple, list)) or len(poses) != 2:
        raise TypeError(
            "poses: expected a FrameView or a (positions, orientations) pair, got "
            f"{type(poses).__name__}{'' if not isinstance(poses, (tuple, list)) else f' of length {len(poses)}'}"
        )
    warp_device = None
    tensors = []
    for value, name, width in ((poses[0], "positions", 3), (poses[1], "orientations", 4)):
        if isinstance(value, wp.array):
            warp_device = value.device
            tensor = as_torch(value)  # zero-copy: (M,) vec3f -> (M, 3), (M,) quatf -> (M, 4)
        elif isinstance(value, np.ndarray):
            tensor = torch.from_numpy(value)
        elif isinstance(value, torch.Tensor):
            tensor = value.detach()
        else:
            kind = type(value).__name__
            raise TypeError(f"{name}: expected a Warp array, a torch tensor or a NumPy array, got {kind}")
        if not tensor.is_floating_point():
            raise TypeError(f"{name}: expected floating-point data, got dtype {tensor.dtype}")
        if tensor.ndim != 2 or tensor.shape[1] != width:
            raise ValueError(f"{name}: expected shape (M, {width}), got {tuple(tensor.shape)}")
        tensors.append(tensor.to(torch.float32))
    pos, quat = tensors
    if pos.device != quat.device:
        raise ValueError(f"positions and orientations: expected one device, got {pos.device} and {quat.device}")
    if pos.shape[0] != quat.shape[0]:
        raise ValueError(f"positions and orientations: expected the same number of rows, got {pos.shape[0]} and "
                         f"{quat.shape[0]}")  # fmt: skip
    return pos, quat, warp_device

# SPDX-License-Identifier: Apache-2.0
"""Internal: the ``torch.distributed`` side of :func:`frameview.all_gather_poses`: torch imported on first use, the
process group's facts, the collective, the device the collective runs on, and torch's streams and devices as Warp
sees them, each remembered so that a gather asks torch as little host time as possible."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import warp as wp

if TYPE_CHECKING:
    import torch

__all__ = [
    "all_gather_single",
    "comm_device",
    "current_torch_stream",
    "exchange_counts",
    "group_facts",
    "remember",
    "torch_device",
    "torch_modules",
]


_TORCH_STREAMS: dict[tuple[int, int], wp.Stream] = {}
"""Warp wrappers of torch's streams, by (CUDA ordinal, stream handle): made once, not per call."""


_TORCH_DEVICES: dict[int, Any] = {}
"""``torch.device("cuda", ordinal)`` by ordinal: made once, not per call."""


_GROUPS: dict[int, tuple[Any, int, int, str]] = {}
"""``(group, world size, rank, backend)`` by ``id(group)`` (the default group's object for ``None``): asking
``torch.distributed`` costs more host time than the pack. The entry holds the group, so its id stays its own."""


def group_facts(group: Any) -> tuple[Any, int, int, str]:
    """``(group, world size, rank in it, backend)``, remembered per group object."""
    _torch_module, dist = torch_modules()
    key = group if group is not None else dist.group.WORLD
    facts = _GROUPS.get(id(key))
    if facts is None or facts[0] is not key:
        if len(_GROUPS) >= 64:
            _GROUPS.clear()
        facts = _GROUPS[id(key)] = (key, dist.get_world_size(group), dist.get_rank(group),
                                    str(dist.get_backend(group)).lower())  # fmt: skip
    return group, facts[1], facts[2], facts[3]


_MODULES: list[tuple[Any, Any]] = []
"""``(torch, torch.distributed)`` once imported: an import statement costs ~0.5 us even when the module is loaded,
and a gather asks for them several times."""


def torch_modules() -> tuple[Any, Any]:
    """``(torch, torch.distributed)``, imported on first use (``import frameview`` never imports torch)."""
    if _MODULES:
        return _MODULES[0]
    try:
        import torch
        import torch.distributed as dist
    except ImportError as exc:
        raise ImportError(
            "frameview.all_gather_poses needs torch: pip install 'frameview[torch]' (or any torch build with "
            "torch.distributed)",
            name="torch",
        ) from exc
    _MODULES.append((torch, dist))
    return torch, dist


def comm_device(backend: str, device: torch.device) -> torch.device:
    """Where the collective runs: the poses' device when ``backend`` serves it, else the CPU (gloo) or the current
    CUDA device (nccl). Mixed backends (``"cpu:gloo,cuda:nccl"``) serve both."""
    torch, _dist = torch_modules()
    backend = backend.lower()
    if device.type == "cuda" and backend == "gloo":
        return torch.device("cpu")
    if device.type == "cpu" and backend == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return device


def exchange_counts(m: int, world: int, group: Any, comm: torch.device) -> tuple[int, ...]:
    """Every rank's row count (one small all_gather; reading it back waits for the collective)."""
    torch, _dist = torch_modules()
    mine = torch.full((1,), m, dtype=torch.int64, device=comm)
    every = torch.empty(world, dtype=torch.int64, device=comm)
    all_gather_single(every, mine, group)
    return tuple(int(c) for c in every.tolist())


def all_gather_single(out: torch.Tensor, send: torch.Tensor, group: Any) -> None:
    """``out`` (world * rows, ...) <- every rank's ``send`` (rows, ...), in rank order, in one collective."""
    _torch_module, dist = torch_modules()
    gather = getattr(dist, "all_gather_single", None)  # torch >= 2.13; all_gather_into_tensor before
    if gather is None:
        gather = dist.all_gather_into_tensor
    gather(out, send, group=group)


def current_torch_stream(device: Any) -> wp.Stream:
    """Torch's current stream on a CUDA Warp device, as a Warp stream (wrappers are kept: no per-call event). The
    raw handle comes from torch's C binding where the build has it (~1 us less than ``torch.cuda.current_stream``)."""
    torch, _dist = torch_modules()
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    handle = int(raw(device.ordinal)) if raw is not None else int(torch.cuda.current_stream(device.ordinal).cuda_stream)
    return remember(_TORCH_STREAMS, (device.ordinal, handle), lambda: wp.Stream(device, cuda_stream=handle))


def torch_device(ordinal: int) -> Any:
    """``torch.device("cuda", ordinal)``, made once per ordinal."""
    torch, _dist = torch_modules()
    return remember(_TORCH_DEVICES, ordinal, lambda: torch.device("cuda", ordinal))


def remember(cache: dict, key: Any, make: Callable[[], Any], limit: int = 64) -> Any:
    """``cache[key]``, made by ``make()`` on a miss; the cache is emptied when it reaches ``limit`` entries."""
    value = cache.get(key)
    if value is None:
        if len(cache) >= limit:
            cache.clear()
        value = cache[key] = make()
    return value

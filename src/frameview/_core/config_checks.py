# SPDX-License-Identifier: Apache-2.0
"""Internal: what the config dataclasses share (:class:`~frameview.FrameViewCfg`,
:class:`~frameview.PhysicsViewCfg`): a config built from a mapping (their ``from_dict``) and the device string
check."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any, TypeVar

__all__ = ["DEVICE_FORMS", "QUAT_ORDERS", "check_device", "check_quat_order", "config_from_dict"]

_DEVICE = re.compile(r"cpu|cuda(:\d+)?")
DEVICE_FORMS = ["cpu", "cuda", "cuda:N"]
"""The device strings FrameViewCfg accepts (Warp's names; ``"cuda"`` is Warp's current CUDA device)."""

_CfgT = TypeVar("_CfgT")

QUAT_ORDERS: tuple[str, ...] = ("xyzw", "wxyz")
"""The accepted values of ``quat_order``: ``"xyzw"`` (the default) and ``"wxyz"``."""


def config_from_dict(cls: type[_CfgT], data: Mapping[str, Any]) -> _CfgT:
    """A config dataclass built from a mapping and validated; unknown keys raise ``ValueError`` listing the known
    ones (every ``*Cfg.from_dict``)."""
    name = cls.__name__
    if not isinstance(data, Mapping):
        raise TypeError(f"{name}.from_dict: expected a mapping, got {type(data).__name__}")
    known = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"{name}: unknown key(s) {unknown}; expected some of {sorted(known)}")
    cfg = cls(**dict(data))
    cfg.validate()  # type: ignore[attr-defined]
    return cfg


def check_device(device: object, what: str = "device") -> None:
    """Check that ``device`` names a Warp device that exists on this machine, without building anything.

    ``"cpu"`` is always accepted; a CUDA device must be visible to Warp (this initialises Warp once).

    Raises:
        TypeError: ``device`` is not a string.
        ValueError: An unknown device string, or a CUDA device this machine does not have.
    """
    if not isinstance(device, str):
        raise TypeError(f"{what}: expected a device string such as 'cpu' or 'cuda:0', got {type(device).__name__}")
    if not _DEVICE.fullmatch(device):
        raise ValueError(f"{what}: unknown device {device!r}; expected one of {DEVICE_FORMS} (Warp's device names)")
    if device == "cpu":
        return
    import warp as wp

    count = wp.get_cuda_device_count()
    if count == 0:
        raise ValueError(f"{what}={device!r}: no CUDA device is visible; use device='cpu'")
    ordinal = int(device.partition(":")[2] or 0)
    if ordinal >= count:
        visible = [f"cuda:{i}" for i in range(count)]
        raise ValueError(f"{what}={device!r}: no such CUDA device; visible: {visible} (or use device='cpu')")


def check_quat_order(value: object, name: str = "quat_order") -> str:
    """``value`` when it is ``"xyzw"`` or ``"wxyz"``; else ``TypeError`` / ``ValueError`` naming ``name``."""
    if not isinstance(value, str):
        raise TypeError(f"{name}: expected 'xyzw' or 'wxyz', got {type(value).__name__}")
    if value not in QUAT_ORDERS:
        hint = " (lower case)" if value.lower() in QUAT_ORDERS else ""
        raise ValueError(
            f"{name}: expected 'xyzw' (the default: Warp's, Newton's, ovphysx's and Isaac Lab 3's order) or 'wxyz' "
            f"(Isaac Lab 2.x's, and pxr Gf's constructors'), got {value!r}{hint}"
        )
    return value

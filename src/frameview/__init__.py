# SPDX-License-Identifier: Apache-2.0
"""frameview: prim world poses from NVIDIA Fabric at 8192-env scale.

Quaternions are xyzw everywhere. Fabric matrices are float64, row-vector, translation in ``m[3, 0:3]``.

Every public name is exported here once; submodules load lazily so that ``import frameview`` stays cheap and
never imports optional dependencies (ovstage, usdrt, newton, torch, matplotlib).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> module that defines it (relative to this package)
_LAZY_IMPORTS: dict[str, str] = {
    "BaseFrameView": ".base",
    "UsdFrameView": ".usd",
    "FabricFrameView": ".fabric.view",
    "NewtonFrameView": ".newton",
    "FrameViewCfg": ".config",
    "make_frame_view": ".config",
    "register_backend": ".config",
    "available_backends": ".config",
    "resolve_prim_paths": ".paths",
    "PrimTree": ".paths",
    "create_mapping": ".scene_data.mapping",
    "SceneDataProvider": ".scene_data.provider",
    "CameraPoses": ".camera",
    "convert_camera_orientations": ".camera",
    "XformSpaceWriter": ".writers",
    "XformWorldSpaceWriter": ".writers",
    "XformLocalSpaceWriter": ".writers",
    "all_gather_poses": ".distributed",
    "GatheredPoses": ".distributed",
    "rank_device": ".distributed",
    "to_numpy": "._core.host",
    "as_torch": "._core.interop",
    "RigidBodyView": ".physics",
    "ArticulationView": ".physics",
    "JointStateReader": ".physics",
    "JointState": ".physics",
    "StaleViewError": ".physics",
    "PhysicsViewCfg": ".physics",
    "make_rigid_body_view": ".physics",
    "make_articulation_view": ".physics",
    "make_joint_state_reader": ".physics",
    "NewtonRigidBodyView": ".newton",
    "NewtonArticulationView": ".newton",
    "OvPhysxRigidBodyView": ".ovphysx",
    "OvPhysxArticulationView": ".ovphysx",
    "ArrayLike": "._core.array_types",
    "IndicesLike": "._core.array_types",
    "MaskLike": "._core.array_types",
    "BoolsLike": "._core.array_types",
    "TensorLike": "._core.array_types",
    "ProxyArrayLike": "._core.array_types",
}

__all__ = ["__version__", *sorted(_LAZY_IMPORTS)]


def __getattr__(name: str) -> Any:
    module = _LAZY_IMPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'frameview' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:  # pragma: no cover - static analysers see the real names
    from ._core.array_types import ArrayLike, BoolsLike, IndicesLike, MaskLike, ProxyArrayLike, TensorLike
    from ._core.host import to_numpy
    from ._core.interop import as_torch
    from .base import BaseFrameView
    from .camera import CameraPoses, convert_camera_orientations
    from .config import FrameViewCfg, available_backends, make_frame_view, register_backend
    from .distributed import GatheredPoses, all_gather_poses, rank_device
    from .fabric.view import FabricFrameView
    from .newton import NewtonArticulationView, NewtonFrameView, NewtonRigidBodyView
    from .ovphysx import OvPhysxArticulationView, OvPhysxRigidBodyView
    from .paths import PrimTree, resolve_prim_paths
    from .physics import (
        ArticulationView,
        JointState,
        JointStateReader,
        PhysicsViewCfg,
        RigidBodyView,
        StaleViewError,
        make_articulation_view,
        make_joint_state_reader,
        make_rigid_body_view,
    )
    from .scene_data.mapping import create_mapping
    from .scene_data.provider import SceneDataProvider
    from .usd import UsdFrameView
    from .writers import XformLocalSpaceWriter, XformSpaceWriter, XformWorldSpaceWriter

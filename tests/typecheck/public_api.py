# SPDX-License-Identifier: Apache-2.0
"""Typed use of the public API, checked by mypy (``./scripts/test`` runs ``python -m mypy``; never executed).

mypy reports errors in this file only (``follow_imports = "silent"`` in pyproject.toml): it proves that what a user
writes against ``frameview`` type-checks and that the public names carry precise types, not ``Any``. A
``type: ignore[assert-type]`` marks a type that is still too loose; ``warn_unused_ignores`` fails the check once it
is fixed, so that the ignore is removed and the assertion starts to hold.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import warp as wp

import frameview as fv

if TYPE_CHECKING:
    import torch
    from typing_extensions import assert_type  # typeshed ships it; nothing is imported at run time


def build_from_config(stage: Any) -> fv.BaseFrameView:
    cfg = fv.FrameViewCfg.from_dict({"prim_path": "/World/envs/env_.*/Camera", "backend": "fabric", "device": "cpu"})
    assert_type(cfg, fv.FrameViewCfg)
    view = fv.make_frame_view(cfg, stage)
    assert_type(view, fv.BaseFrameView)
    assert_type(view.count, int)
    assert_type(view.prim_paths, tuple[str, ...])
    pos, _quat = view.get_world_poses(indices=[0, 2])
    assert_type(pos, wp.array)
    view.set_world_poses(positions=pos, orientations=None, indices=[0, 2])
    return view


def use_a_view(stage: Any) -> None:
    with fv.FabricFrameView("/World/envs/env_.*/Camera", stage=stage, device="cpu") as cams:
        assert_type(cams, fv.FabricFrameView)
        _pos, quat = cams.get_world_poses()
        assert_type(quat, wp.array)
    usd = fv.UsdFrameView(["/World/envs/env_0/Camera"], stage=stage, device="cpu")
    try:
        scales = usd.get_world_scales()
        assert_type(scales, wp.array)
    finally:
        usd.close()


def mapping_and_registry() -> None:
    mapping = fv.create_mapping(["/a", "/b"], ["/b", "/a"])
    if mapping is not None:
        assert_type(mapping, wp.array)
    names = fv.available_backends()
    assert_type(names, list[str])
    assert_type(fv.__version__, str)


def writer_scopes(view: fv.BaseFrameView, env_ids: wp.array) -> None:
    with view.xform_world_space_writer() as w:
        assert_type(w, fv.XformWorldSpaceWriter)
        w.set_poses(positions=None, orientations=None, indices=env_ids)
        w.set_scales(wp.zeros(2, dtype=wp.vec3f), indices=env_ids)
        pos, _quat = w.get_poses(indices=env_ids)
        assert_type(pos, wp.array)
        assert_type(w.get_scales(), wp.array)
    with view.xform_local_space_writer() as lw:
        assert_type(lw, fv.XformLocalSpaceWriter)
        assert_type(lw.space, str)
    view.set_world_scales(wp.zeros(2, dtype=wp.vec3f), indices=env_ids)
    view.set_scales(wp.zeros(2, dtype=wp.vec3f))
    assert_type(view.get_scales(), wp.array)


def visibility(view: fv.BaseFrameView, env_ids: wp.array) -> None:
    vis = view.get_visibility(indices=env_ids)
    assert_type(vis, wp.array)
    view.set_visibility(vis, indices=env_ids)
    view.set_visibility(False)


def gather_across_ranks(cams: fv.FabricFrameView) -> None:
    assert_type(fv.rank_device(), str)
    gathered = fv.all_gather_poses(cams)
    assert_type(gathered, fv.GatheredPoses | None)
    if gathered is not None:
        assert_type(gathered.counts, tuple[int, ...])
        assert_type(gathered.offsets, tuple[int, ...])
        for _pos, _quat in gathered.per_rank():
            pass


def newton_frames(stage: Any, model: Any, state: Any, fabric: fv.FabricFrameView) -> None:
    with fv.NewtonFrameView("/World/envs/env_.*/Camera", stage=stage, model=model, state=lambda: state) as cams:
        assert_type(cams, fv.NewtonFrameView)
        pos, _quat = cams.get_world_poses(indices=[0, 2])
        assert_type(pos, wp.array)
        assert_type(cams.backend, str)
        cams.mirror_to(fabric)
    cfg = fv.FrameViewCfg(prim_path="/World/envs/env_.*/Camera", backend="newton")
    assert_type(fv.make_frame_view(cfg, stage, model=model, state=state), fv.BaseFrameView)


def read_physics(model: Any, state: Any, control: Any) -> None:
    cfg = fv.PhysicsViewCfg.from_dict({"prim_path": "/World/envs/env_.*/Robot", "backend": "newton"})
    robots = fv.make_articulation_view(cfg, model=model, state=state, control=control)
    assert_type(robots, fv.ArticulationView)
    assert_type(robots.dof_names, tuple[str, ...])
    assert_type(robots.get_dof_positions([0, 1]), wp.array)
    reading = fv.make_joint_state_reader(cfg, model=model, state=state, control=control).read()
    assert_type(reading, fv.JointState)
    assert_type(reading.positions, wp.array)
    bodies = fv.make_rigid_body_view({"prim_path": "/World/envs/env_.*/Robot/base", "backend": "newton"}, model=model,
                                     state=state)  # fmt: skip
    assert_type(bodies, fv.RigidBodyView)
    lin, _ang = bodies.get_velocities()
    assert_type(lin, wp.array)


def ovphysx_views(physx: Any, stage: Any) -> None:
    robots = fv.OvPhysxArticulationView("/World/envs/env_.*/Robot", physx=physx, stage=stage)
    assert_type(robots.get_root_velocities()[0], wp.array)
    assert_type(fv.OvPhysxRigidBodyView("/World/Ball", physx=physx).get_masses(), wp.array)


def typed_arguments(view: fv.BaseFrameView, robot_state: torch.Tensor, env_ids: torch.Tensor) -> None:
    """Every kind of array a user passes type-checks; what is no array does not (the ignores fail once unused)."""
    view.set_world_poses(np.zeros((2, 3), np.float32), [[0.0, 0.0, 0.0, 1.0]] * 2, indices=range(2))
    view.set_world_poses(robot_state[:, :3], robot_state[:, 3:7], indices=env_ids)  # torch: a fv.TensorLike
    view.set_local_poses(translations=wp.zeros(2, dtype=wp.vec3f), indices=np.array([0, 1]))
    view.set_local_scales([[1.0, 1.0, 1.0]], indices=[0])
    view.get_world_poses(mask=[True, False])
    view.set_visibility([True, False])
    fv.CameraPoses(view).read(env_ids, convention="ros")
    view.set_world_poses(positions="0 0 1")  # type: ignore[arg-type]  # a string is no (M, 3) array
    view.get_world_poses(indices=0.5)  # type: ignore[arg-type]  # nor is a float indices
    view.get_world_poses(indices={0: 1})  # type: ignore[arg-type]  # nor a dict
    view.set_local_scales(scales=1.0)  # type: ignore[arg-type]  # one scale for all is no (M, 3) array


def typed_physics_arguments(robots: fv.ArticulationView, env_ids: torch.Tensor) -> None:
    """The physics views' rows are typed as the frame views' are."""
    robots.get_dof_positions(env_ids)
    robots.joint_state_reader().read(mask=np.ones(robots.count, dtype=bool))
    robots.get_root_poses(indices="all")  # type: ignore[arg-type]  # no string selects rows


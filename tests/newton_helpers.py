# SPDX-License-Identifier: Apache-2.0
"""Newton models for the tests: the contract suite's tiny model, and a stage of falling bodies with cameras.

Everything here skips the calling test (``pytest.skip``) when newton is not installed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from pxr import Gf, Usd, UsdGeom, UsdPhysics

import frameview as fv

NEWTON_SKIP_REASON = "newton is not installed (pip install 'frameview[newton]')"

_CONTRACT_MODELS: list[tuple[Usd.Stage, str, Any, Any]] = []
"""(stage, device, model, state) of recent contract stages: every view of one test shares one model."""


def newton_module() -> Any:
    """The newton package, or skip the test."""
    return pytest.importorskip("newton", reason=NEWTON_SKIP_REASON)


def rigid_pose(m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Position and xyzw quaternion of the rigid part of a row-vector matrix (scale divided out), float64."""
    from frameview.newton.frames import rigid_part

    r = rigid_part(m)
    q = Gf.Matrix4d(*r.ravel().tolist()).ExtractRotationQuat()
    return r[3, :3].copy(), np.array([*q.GetImaginary(), q.GetReal()], dtype=np.float64)


def contract_model(stage: Usd.Stage, device: str) -> tuple[Any, Any]:
    """A Newton model whose bodies are the contract stage's env prims (``/World/envs/env_i``), built once per stage.

    Each env prim gets ``UsdPhysics.RigidBodyAPI`` and a body at its USD pose (scale divided out, as Newton does), so
    that the contract's robots and cameras ride on bodies; stages without envs get a model without bodies (every
    frame fixed in the world). Returns ``(model, state)``; the state's ``body_q`` is the model's initial one.
    """
    newton = newton_module()
    import warp as wp

    for cached, cached_device, model, state in _CONTRACT_MODELS:
        if cached is stage and cached_device == device:
            return model, state
    builder = newton.ModelBuilder()
    envs = stage.GetPrimAtPath("/World/envs")
    cache = UsdGeom.XformCache(Usd.TimeCode.Default())
    for env in envs.GetChildren() if envs else []:
        UsdPhysics.RigidBodyAPI.Apply(env)
        p, q = rigid_pose(np.array(cache.GetLocalToWorldTransform(env)))
        builder.add_body(xform=wp.transform(wp.vec3(*p), wp.quat(*q)), label=str(env.GetPath()))
    model = builder.finalize(device=device)
    state = model.state()
    _CONTRACT_MODELS.append((stage, device, model, state))
    del _CONTRACT_MODELS[:-4]
    return model, state


def contract_newton_view(prim_path: str | Sequence[str], stage: Usd.Stage, device: str) -> fv.BaseFrameView:
    """A NewtonFrameView over the contract's stage (see :func:`contract_model`)."""
    model, state = contract_model(stage, device)
    return fv.NewtonFrameView(prim_path, stage=stage, model=model, state=state)


def falling_stage(
    num_envs: int, *, camera_offset: Sequence[float] = (0.2, 0.0, 0.5), camera_pitch_deg: float = 20.0
) -> Usd.Stage:
    """``/World/envs/env_i/Body`` (a free rigid body, yawed, 5 m up) with ``Body/Mount/Camera`` below it; metres,
    z up, gravity -9.81 m/s^2 along z, no colliders."""
    stage = Usd.Stage.CreateInMemory()
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.z)
    UsdGeom.SetStageMetersPerUnit(stage, 1.0)
    scene = UsdPhysics.Scene.Define(stage, "/physicsScene")
    scene.CreateGravityDirectionAttr(Gf.Vec3f(0.0, 0.0, -1.0))
    scene.CreateGravityMagnitudeAttr(9.81)
    UsdGeom.Xform.Define(stage, "/World")
    pitch = np.radians(camera_pitch_deg)
    for i in range(num_envs):
        env = f"/World/envs/env_{i}"
        UsdGeom.Xform.Define(stage, env).AddTranslateOp().Set(Gf.Vec3d(2.0 * i, 0.0, 0.0))
        body = UsdGeom.Xform.Define(stage, f"{env}/Body")
        body.AddTranslateOp().Set(Gf.Vec3d(0.0, 0.5 * i, 5.0))
        yaw = 0.3 * (i + 1)
        body.AddOrientOp().Set(Gf.Quatf(float(np.cos(yaw / 2)), 0.0, 0.0, float(np.sin(yaw / 2))))
        UsdPhysics.RigidBodyAPI.Apply(body.GetPrim())
        mass = UsdPhysics.MassAPI.Apply(body.GetPrim())
        mass.CreateMassAttr(1.0)
        mass.CreateDiagonalInertiaAttr(Gf.Vec3f(0.1, 0.1, 0.1))
        mount = UsdGeom.Xform.Define(stage, f"{env}/Body/Mount")
        mount.AddTranslateOp().Set(Gf.Vec3d(*camera_offset))
        camera = UsdGeom.Camera.Define(stage, f"{env}/Body/Mount/Camera")
        camera.AddOrientOp().Set(Gf.Quatf(float(np.cos(pitch / 2)), 0.0, float(np.sin(pitch / 2)), 0.0))
    return stage


def falling_model(stage: Usd.Stage, device: str = "cpu") -> Any:
    """The Newton model of :func:`falling_stage` (``ModelBuilder.add_usd``: one free body per env)."""
    newton = newton_module()
    builder = newton.ModelBuilder()
    builder.add_usd(stage)
    return builder.finalize(device=device)

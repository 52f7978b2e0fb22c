# SPDX-License-Identifier: Apache-2.0
"""The ovphysx typed physics views (CPU): rigid bodies, articulations and the joint-state reader.

Truth is ovphysx's own session read API (``PhysX.read_sync``), read directly here and matched to the views' rows by
prim path, with units and signs converted from what this file authored (degrees for rotational DOFs, the body order
of each joint) -- never the views against themselves; and analytic cases: bodies in free fall (v = v0 + g t), a
pendulum released from rest (potential energy lost = kinetic energy gained), a prismatic joint driven at constant
velocity (q = v t), and the parent-to-child DOF convention against the links' relative poses.

The simulation runs in a fresh Python process (ovphysx's USD schemas must be registered before the first ovstage
population of a process); it returns a JSON summary of the errors and facts, which the tests below check.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ENVS = 4
DT = 1.0 / 240.0
STEPS = 60
G = 9.81
PENDULUM_MASS, PENDULUM_LENGTH, PENDULUM_IYY = 2.0, 1.0, 0.02
RAIL_SPEED = 0.5
# the robot's DOF joints as authored: kind, body order (+1: body0 is the parent, -1: body0 is the child), axis, the
# joint's anchor on the parent and on the child (link frames, which the joint frames share: no localRot authored)
JOINTS = {
    "Shoulder": ("rotation", +1, "Y", "Base", "Link1"),
    "Slider": ("translation", +1, "X", "Link1", "Link2"),
    "Elbow": ("rotation", -1, "Z", "Link2", "Link3"),
    "Wrist": ("translation", -1, "Y", "Link3", "Link4"),
}
ANCHOR_PARENT, ANCHOR_CHILD = (0.25, 0.0, 0.0), (-0.25, 0.0, 0.0)

_MISSING = [m for m in ("ovstage", "ovphysx") if importlib.util.find_spec(m) is None]
pytestmark = pytest.mark.skipif(
    bool(_MISSING),
    reason=f"{' and '.join(_MISSING)} not importable; install with: pip install ovstage && "
    f"pip install --no-deps ovphysx physx-usd-schemas",
)


# ------------------------------------------------------------------------------------------------ the scene


def _link(name: str, pos: tuple[float, ...], mass: float = 1.0, inertia: tuple[float, ...] = (0.01,) * 3) -> str:
    return f"""
        def Xform "{name}" (prepend apiSchemas = ["PhysicsRigidBodyAPI", "PhysicsMassAPI", "PhysxRigidBodyAPI"])
        {{
            double3 xformOp:translate = {tuple(pos)}
            uniform token[] xformOpOrder = ["xformOp:translate"]
            float physics:mass = {mass}
            float3 physics:diagonalInertia = {tuple(inertia)}
            float physxRigidBody:linearDamping = 0
            float physxRigidBody:angularDamping = 0
        }}"""


def _joint(name: str, i: int) -> str:
    kind, order, axis, parent, child = JOINTS[name]
    schema, api = ("PhysicsRevoluteJoint", "angular") if kind == "rotation" else ("PhysicsPrismaticJoint", "linear")
    body0, body1 = (parent, child) if order > 0 else (child, parent)
    pos0, pos1 = (ANCHOR_PARENT, ANCHOR_CHILD) if order > 0 else (ANCHOR_CHILD, ANCHOR_PARENT)
    q0 = {"Shoulder": 5.0, "Slider": 0.02, "Elbow": -7.0, "Wrist": 0.03}[name] * (i + 1)  # authored: deg / m
    qd0 = {"Shoulder": 10.0, "Slider": 0.1, "Elbow": 20.0, "Wrist": -0.05}[name] * (i + 1)
    return f"""
        def {schema} "{name}" (prepend apiSchemas = ["PhysicsJointStateAPI:{api}"])
        {{
            rel physics:body0 = <../{body0}>
            rel physics:body1 = <../{body1}>
            uniform token physics:axis = "{axis}"
            point3f physics:localPos0 = {pos0}
            point3f physics:localPos1 = {pos1}
            float state:{api}:physics:position = {q0}
            float state:{api}:physics:velocity = {qd0}
        }}"""


def _env(i: int) -> str:
    links = "".join(_link(n, (0.5 * k, 0.0, 2.0)) for k, n in enumerate(["Base", "Link1", "Link2", "Link3", "Link4"]))
    return f"""
    def Xform "env_{i}"
    {{
        double3 xformOp:translate = ({3.0 * i}, 0, 0)
        uniform token[] xformOpOrder = ["xformOp:translate"]
        def Xform "Robot" (prepend apiSchemas = ["PhysicsArticulationRootAPI", "PhysxArticulationAPI"])
        {{
            bool physxArticulation:enabledSelfCollisions = false
            {links}
            def PhysicsFixedJoint "RootJoint"
            {{
                rel physics:body1 = <../Base>
            }}
            {"".join(_joint(n, i) for n in JOINTS)}
        }}
        def Xform "Ball" (prepend apiSchemas = ["PhysicsRigidBodyAPI", "PhysicsMassAPI", "PhysxRigidBodyAPI"])
        {{
            double3 xformOp:translate = (0, 2, {5 + i})
            uniform token[] xformOpOrder = ["xformOp:translate"]
            float physics:mass = {1.0 + i}
            float3 physics:diagonalInertia = (0.1, 0.1, 0.1)
            point3f physics:centerOfMass = (0, 0, {0.01 * i})
            vector3f physics:velocity = {_ball_v0(i)}
            vector3f physics:angularVelocity = {_ball_w0_deg(i)}
            float physxRigidBody:linearDamping = 0
            float physxRigidBody:angularDamping = 0
        }}
    }}"""


def _ball_v0(i: int) -> tuple[float, float, float]:
    return (0.5 * i, 1.0, 2.0 - i)


def _ball_w0_deg(i: int) -> tuple[float, float, float]:
    return (30.0 * (i + 1), 0.0, 45.0)


def scene_usda() -> str:
    """Four envs, each a fixed-base robot (revolute, prismatic, revolute and prismatic joints, the last two authored
    with body0 the child) and a free ball; a pendulum; a prismatic rail driven at constant velocity. No colliders."""
    L = PENDULUM_LENGTH
    return f"""#usda 1.0
(
    defaultPrim = "World"
    metersPerUnit = 1
    kilogramsPerUnit = 1
    upAxis = "Z"
)
def Xform "World"
{{
    def PhysicsScene "PhysicsScene" (prepend apiSchemas = ["PhysxSceneAPI"])
    {{
        vector3f physics:gravityDirection = (0, 0, -1)
        float physics:gravityMagnitude = {G}
        bool physxScene:enableGPUDynamics = false
        uniform token physxScene:broadphaseType = "MBP"
    }}
    def Xform "Pendulum" (prepend apiSchemas = ["PhysicsArticulationRootAPI"])
    {{
        {_link("Base", (0.0, -5.0, 3.0))}
        {_link("Bob", (L, -5.0, 3.0), PENDULUM_MASS, (0.02, PENDULUM_IYY, 0.02))}
        def PhysicsFixedJoint "RootJoint"
        {{
            rel physics:body1 = <../Base>
        }}
        def PhysicsRevoluteJoint "Hinge"
        {{
            rel physics:body0 = <../Base>
            rel physics:body1 = <../Bob>
            uniform token physics:axis = "Y"
            point3f physics:localPos0 = (0, 0, 0)
            point3f physics:localPos1 = ({-L}, 0, 0)
        }}
    }}
    def Xform "Rail" (prepend apiSchemas = ["PhysicsArticulationRootAPI"])
    {{
        {_link("Base", (0.0, 5.0, 3.0))}
        {_link("Cart", (0.5, 5.0, 3.0))}
        def PhysicsFixedJoint "RootJoint"
        {{
            rel physics:body1 = <../Base>
        }}
        def PhysicsPrismaticJoint "Track" (prepend apiSchemas = ["PhysicsDriveAPI:linear"])
        {{
            rel physics:body0 = <../Base>
            rel physics:body1 = <../Cart>
            uniform token physics:axis = "X"
            point3f physics:localPos0 = (0.25, 0, 0)
            point3f physics:localPos1 = (-0.25, 0, 0)
            float drive:linear:physics:targetVelocity = {RAIL_SPEED}
            float drive:linear:physics:damping = 100000
            float drive:linear:physics:stiffness = 0
        }}
    }}
    def Xform "envs"
    {{
        {"".join(_env(i) for i in range(ENVS))}
    }}
}}
"""


# ------------------------------------------------------------------------------------------------ truth helpers


def _rot(q: np.ndarray) -> np.ndarray:
    """xyzw -> 3x3 column-vector rotation matrix (float64)."""
    x, y, z, w = np.asarray(q, dtype=np.float64) / np.linalg.norm(q)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])  # fmt: skip


def _quat_err(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, np.float64).reshape(-1, 4), np.asarray(b, np.float64).reshape(-1, 4)
    return float(np.minimum(np.abs(a - b).max(1), np.abs(a + b).max(1)).max())


class _Truth:
    """ovphysx's session reads, keyed by attribute and prim path (host copies, no array kept alive)."""

    def __init__(self, physx: Any) -> None:
        self.physx = physx

    def read(self, object_type: Any, attributes: list[str]) -> dict[tuple[str, str], np.ndarray]:
        from ovphysx.types import ObjectScope

        out: dict[tuple[str, str], np.ndarray] = {}
        with self.physx.read_sync(object_type, attributes, scope=ObjectScope.ALL) as res:
            pd = res.dictionary
            for g in res.groups:
                name = pd.token_to_string(g.attribute)
                for i, path in enumerate(pd.get_path_strings(g.prim_list)[: g.prim_count]):
                    v = g.tensors[i].numpy() if g.is_array else g.tensors[0].numpy()[i]
                    out[(name, path)] = np.array(v, dtype=np.float64)
            g = None
        return out


# ------------------------------------------------------------------------------------------------ the simulation


def simulate(workdir: Path) -> dict[str, Any]:
    import ovstage
    import warp as wp
    from ovphysx.types import SimObjectType
    from ovphysx_helpers import open_physx_scene

    import frameview as fv

    wp.config.quiet = True
    physx, stage = open_physx_scene(workdir / "physics.usda", scene_usda(), "physics")
    truth = _Truth(physx)
    out: dict[str, Any] = {}
    JT, LK, AR, RB = (SimObjectType.ARTICULATION_JOINT, SimObjectType.ARTICULATION_LINK, SimObjectType.ARTICULATION,
                      SimObjectType.RIGID_BODY)  # fmt: skip

    robots = fv.OvPhysxArticulationView("/World/envs/env_.*/Robot", physx=physx, stage=stage)
    balls = fv.make_rigid_body_view({"prim_path": "/World/envs/env_.*/Ball", "backend": "ovphysx"}, physx=physx)
    pendulum = fv.make_articulation_view({"prim_path": "/World/Pendulum", "backend": "ovphysx"}, physx=physx,
                                         stage=stage)  # fmt: skip
    rail = fv.OvPhysxArticulationView(["/World/Rail"], physx=physx, stage=stage)
    bob = fv.OvPhysxRigidBodyView("/World/Pendulum/Bob", physx=physx)
    reader = robots.joint_state_reader()
    refused = {}
    for name, make in [
        ("no_stage", lambda: fv.OvPhysxArticulationView("/World/envs/env_.*/Robot", physx=physx, stage=None)),
        ("no_match", lambda: fv.OvPhysxRigidBodyView("/World/envs/env_.*/Nothing", physx=physx)),
        ("not_articulation", lambda: fv.OvPhysxArticulationView("/World/envs/env_0/Ball", physx=physx, stage=stage)),
    ]:
        try:
            make()
            refused[name] = None
        except (TypeError, ValueError) as exc:
            refused[name] = f"{type(exc).__name__}: {exc}"
    out["refused"] = refused
    out["robot_paths"] = list(robots.prim_paths)
    out["ball_paths"] = list(balls.prim_paths)
    out["dof_names"], out["dof_types"] = list(robots.dof_names), list(robots.dof_types)
    out["link_names"], out["fixed_base"] = list(robots.link_names), robots.is_fixed_base
    out["pendulum"] = [list(pendulum.dof_names), list(pendulum.dof_types)]
    out["effort_source"] = robots.effort_source
    out["repr"] = repr(robots)
    meta = truth.read(AR, ["dofJointPath"])
    pd = ovstage.PathDictionary(stage)
    out["engine_dof_joints"] = [pd.path_to_string(int(h)).rsplit("/", 1)[-1]
                                for h in meta[("dofJointPath", "/World/envs/env_0/Robot")]]  # fmt: skip

    # ---- efforts: written through ovphysx's session write, read back with the body-order sign undone
    written = {}
    with physx.write_sync(JT, "jointActuationForce", prim_paths=[pd.intern_path(f"{r}/{j}") for r in robots.prim_paths
                                                                    for j in JOINTS]) as session:  # fmt: skip
        for group in session.groups:
            for k, path in enumerate(pd.get_path_strings(group.prim_list)[: group.prim_count]):
                value = 1.0 + 10 * int(path.split("env_")[1].split("/")[0]) + list(JOINTS).index(path.rsplit("/", 1)[1])
                group.tensors[k].fill_(value)
                written[path] = value
            session.commit_sync(group)
        group = None
    effort_truth = truth.read(JT, ["jointActuationForce"])
    eff = robots.get_dof_efforts().numpy()
    out["effort_written_err"] = max(
        abs(eff[r, c] - JOINTS[name][1] * written[f"{path}/{name}"])
        for r, path in enumerate(robots.prim_paths) for c, name in enumerate(robots.dof_names)
    )  # fmt: skip
    out["effort_session_matches_written"] = all(
        abs(effort_truth[("jointActuationForce", p)][0] - v) < 1e-6 for p, v in written.items()
    )
    with physx.write_sync(JT, "jointActuationForce", prim_paths=[pd.intern_path(p) for p in written]) as session:
        for group in session.groups:
            for t in group.tensors:
                t.zero_()
            session.commit_sync(group)
        group = None

    # ---- step, checking the pendulum's energy and the rail's position along the way
    z0 = 3.0
    energy_errs, drops, thetas = [], [], []
    rail_err = rail_vel_err = 0.0
    for step in range(1, STEPS + 1):
        physx.step_sync(DT)
        theta = float(pendulum.get_dof_positions().numpy()[0, 0])
        omega = float(pendulum.get_dof_velocities().numpy()[0, 0])
        bob_z = float(truth.read(LK, ["position"])[("position", "/World/Pendulum/Bob")][2])
        lost = PENDULUM_MASS * G * (z0 - bob_z)
        gained = 0.5 * (PENDULUM_IYY + PENDULUM_MASS * PENDULUM_LENGTH**2) * omega**2
        if step % 10 == 0:
            energy_errs.append(abs(gained - lost) / lost)
            drops.append(abs((z0 - bob_z) - PENDULUM_LENGTH * math.sin(theta)))
            thetas.append(theta)
        rail_err = max(rail_err, abs(float(rail.get_dof_positions().numpy()[0, 0]) - RAIL_SPEED * step * DT))
        rail_vel_err = max(rail_vel_err, abs(float(rail.get_dof_velocities().numpy()[0, 0]) - RAIL_SPEED))
    out["pendulum_energy_err"], out["pendulum_drop_err"], out["pendulum_theta"] = max(energy_errs), max(drops), thetas
    out["pendulum_mass"] = float(bob.get_masses().numpy()[0])
    out["rail_err"], out["rail_vel_err"] = rail_err, rail_vel_err
    out["rail_effort"] = float(np.abs(rail.get_dof_efforts().numpy()).max())
    out["rail_dof_types"] = list(rail.dof_types)
    t = STEPS * DT

    # ---- the robots against ovphysx's session reads, by prim path; units and signs from what was authored
    joints = truth.read(JT, ["jointPosition", "jointVelocity", "jointActuationForce"])
    links = truth.read(LK, ["position", "orientation", "linearVelocity", "angularVelocity"])
    roots = truth.read(AR, ["rootPosition", "rootOrientation", "rootLinearVelocity", "rootAngularVelocity"])
    state = reader.read()
    pos, vel, eff = robots.get_dof_positions().numpy(), robots.get_dof_velocities().numpy(), robots.get_dof_efforts()
    errs = {"pos": 0.0, "vel": 0.0, "eff": 0.0, "state": 0.0, "geom": 0.0}
    for r, path in enumerate(robots.prim_paths):
        for c, name in enumerate(robots.dof_names):
            kind, order, axis, parent, child = JOINTS[name]
            unit = math.pi / 180.0 if kind == "rotation" else 1.0
            jp = f"{path}/{name}"
            want_q = order * unit * joints[("jointPosition", jp)][0]
            want_qd = order * unit * joints[("jointVelocity", jp)][0]
            want_f = order * joints[("jointActuationForce", jp)][0]
            errs["pos"] = max(errs["pos"], abs(pos[r, c] - want_q))
            errs["vel"] = max(errs["vel"], abs(vel[r, c] - want_qd))
            errs["eff"] = max(errs["eff"], abs(eff.numpy()[r, c] - want_f))
            errs["state"] = max(errs["state"], abs(state.positions.numpy()[r, c] - pos[r, c]),
                                abs(state.velocities.numpy()[r, c] - vel[r, c]))  # fmt: skip
            # the parent-to-child convention, from the links' poses alone
            pp, pq = links[("position", f"{path}/{parent}")], links[("orientation", f"{path}/{parent}")]
            cp, cq = links[("position", f"{path}/{child}")], links[("orientation", f"{path}/{child}")]
            a = np.eye(3)["XYZ".index(axis)]
            rp = _rot(pq)
            if kind == "rotation":
                rel = rp.T @ _rot(cq)
                twice_sin = np.array([rel[2, 1] - rel[1, 2], rel[0, 2] - rel[2, 0], rel[1, 0] - rel[0, 1]])
                geom = math.atan2(float(a @ twice_sin), float(np.trace(rel) - 1.0))
            else:
                geom = float(a @ (rp.T @ (cp - pp) - (np.array(ANCHOR_PARENT) - np.array(ANCHOR_CHILD))))
            errs["geom"] = max(errs["geom"], abs(pos[r, c] - geom))
    out["robot_errs"] = errs
    lp, lq = robots.get_link_poses()
    lv, lw = robots.get_link_velocities()
    rp_, rq_ = robots.get_root_poses()
    rv_, rw_ = robots.get_root_velocities()
    lerr = {"pos": 0.0, "quat": 0.0, "lin": 0.0, "ang": 0.0, "root": 0.0, "w_negative": False}
    for r, path in enumerate(robots.prim_paths):
        for c, name in enumerate(robots.link_names):
            lpath = f"{path}/{name}"
            lerr["pos"] = max(lerr["pos"], float(np.abs(lp.numpy()[r, c] - links[("position", lpath)]).max()))
            lerr["quat"] = max(lerr["quat"], _quat_err(lq.numpy()[r, c], links[("orientation", lpath)]))
            lerr["lin"] = max(lerr["lin"], float(np.abs(lv.numpy()[r, c] - links[("linearVelocity", lpath)]).max()))
            lerr["ang"] = max(lerr["ang"], float(np.abs(lw.numpy()[r, c] - links[("angularVelocity", lpath)]).max()))
        lerr["root"] = max(
            lerr["root"],
            float(np.abs(rp_.numpy()[r] - roots[("rootPosition", path)]).max()),
            _quat_err(rq_.numpy()[r], roots[("rootOrientation", path)]),
            float(np.abs(rv_.numpy()[r] - roots[("rootLinearVelocity", path)]).max()),
            float(np.abs(rw_.numpy()[r] - roots[("rootAngularVelocity", path)]).max()),
        )
    lerr["w_negative"] = bool((lq.numpy()[..., 3] < 0).any() or (rq_.numpy()[:, 3] < 0).any())
    out["link_errs"] = lerr

    # ---- rows: int64 indices (torch and NumPy), a bool mask leaving other rows untouched, bad indices
    try:  # torch is optional: without it the int64 indices are NumPy's
        import torch

        def int64(rows: list[int]) -> Any:
            return torch.tensor(rows, dtype=torch.int64)
    except ImportError:

        def int64(rows: list[int]) -> Any:
            return np.array(rows, dtype=np.int64)

    sel = reader.read(indices=int64([3, 0]))
    out["indexed_err"] = float(np.abs(sel.positions.numpy() - pos[[3, 0]]).max())
    sel_np = robots.get_dof_velocities(indices=np.array([2], dtype=np.int64)).numpy()
    out["indexed_np_err"] = float(np.abs(sel_np - vel[[2]]).max())
    before = robots.get_dof_positions().numpy().copy()
    physx.step_sync(DT)
    after = robots.get_dof_positions(mask=np.array([True, False, True, False])).numpy()
    fresh = truth.read(JT, ["jointPosition"])
    want = np.array([[JOINTS[n][1] * (math.pi / 180.0 if JOINTS[n][0] == "rotation" else 1.0)
                      * fresh[("jointPosition", f"{p}/{n}")][0] for n in robots.dof_names]
                     for p in robots.prim_paths])  # fmt: skip
    out["mask_true_err"] = float(np.abs(after[[0, 2]] - want[[0, 2]]).max())
    out["mask_false_untouched"] = bool(np.array_equal(after[[1, 3]], before[[1, 3]]))
    out["mask_rows_moved"] = float(np.abs(want - before).max())
    try:
        robots.get_dof_positions(indices=[0, ENVS])
        out["bad_index"] = None
    except IndexError as exc:
        out["bad_index"] = str(exc)
    wide = []  # 64-bit device indices beyond int32 (the low 32 bits a valid row): IndexError, never another row
    for value in (2**32, 2**32 + 3, -(2**32)):
        try:
            robots.get_dof_positions(indices=wp.array(np.array([1, value], dtype=np.int64), dtype=wp.int64,
                                                      device=robots.device))  # fmt: skip
            robots.check()
            wide.append(None)
        except IndexError as exc:
            wide.append(str(exc))
    out["wide_index"] = wide

    # ---- free fall: v = v0 + g t, angular velocity as authored (deg/s -> rad/s), a = g; mass properties
    t = (STEPS + 1) * DT
    bp, bq = balls.get_world_poses()
    bv, bw = balls.get_velocities()
    ba, bal = balls.get_accelerations()
    body = truth.read(RB, ["position", "orientation", "linearVelocity", "angularVelocity", "linearAcceleration",
                           "angularAcceleration", "mass", "inverseMass", "inertia",
                           "centerOfMassPosition"])  # fmt: skip
    berr = {"v": 0.0, "w": 0.0, "a": 0.0, "p": 0.0, "truth": 0.0, "mass": 0.0}
    masses, inv, inertia, coms = balls.get_masses(), balls.get_inv_masses(), balls.get_inertias(), balls.get_coms()
    for r, path in enumerate(balls.prim_paths):
        i = int(path.split("env_")[1].split("/")[0])
        v0, w0 = np.array(_ball_v0(i)), np.radians(np.array(_ball_w0_deg(i)))
        g = np.array([0.0, 0.0, -G])
        p0 = np.array([3.0 * i, 2.0, 5.0 + i]) + np.array([0.0, 0.0, 0.01 * i])  # the centre of mass
        berr["v"] = max(berr["v"], float(np.abs(bv.numpy()[r] - (v0 + g * t)).max()))
        berr["w"] = max(berr["w"], float(np.abs(bw.numpy()[r] - w0).max()))
        berr["a"] = max(berr["a"], float(np.abs(ba.numpy()[r] - g).max()), float(np.abs(bal.numpy()[r]).max()))
        com_world = bp.numpy()[r] + _rot(bq.numpy()[r]) @ coms.numpy()[r]
        berr["p"] = max(berr["p"], float(np.abs(com_world - (p0 + v0 * t + 0.5 * g * t * t)).max()))
        for mine, (name, width) in [(bp, ("position", 3)), (bv, ("linearVelocity", 3)), (bw, ("angularVelocity", 3)),
                                    (ba, ("linearAcceleration", 3)), (bal, ("angularAcceleration", 3)),
                                    (masses, ("mass", 1)), (inv, ("inverseMass", 1)), (inertia, ("inertia", 9)),
                                    (coms, ("centerOfMassPosition", 3))]:  # fmt: skip
            got = np.asarray(mine.numpy()[r], dtype=np.float64).reshape(width)
            berr["truth"] = max(berr["truth"], float(np.abs(got - body[(name, path)].reshape(width)).max()))
        berr["truth"] = max(berr["truth"], _quat_err(bq.numpy()[r], body[("orientation", path)]))
        berr["mass"] = max(
            berr["mass"],
            abs(float(masses.numpy()[r]) - (1.0 + i)),
            abs(float(inv.numpy()[r]) - 1.0 / (1.0 + i)),
            float(np.abs(np.asarray(inertia.numpy()[r]) - 0.1 * np.eye(3)).max()),
            float(np.abs(coms.numpy()[r] - np.array([0.0, 0.0, 0.01 * i])).max()),
        )
    out["ball_errs"] = berr
    out["ball_rows_torch"] = float(np.abs(balls.get_velocities(indices=int64([1]))[0].numpy() - bv.numpy()[[1]]).max())
    try:
        balls.get_masses(indices=np.array([-1], dtype=np.int64))
        out["ball_bad_index"] = None
    except IndexError as exc:
        out["ball_bad_index"] = str(exc)

    # ---- lifetime: a reload makes every view stale; a view made after it reads; a destroyed PhysX too
    closed = fv.OvPhysxRigidBodyView("/World/envs/env_0/Ball", physx=physx)
    closed.close()
    try:
        closed.get_world_poses()
        out["closed"] = None
    except RuntimeError as exc:
        out["closed"] = f"{type(exc).__name__}: {exc}"
    physx.wait_task(physx.detach_ovstage())
    physx.wait_task(physx.attach_ovstage(stage, read_ordinal=1))
    stale = {}
    for name, call in [("articulation", robots.get_dof_positions), ("reader", reader.read),
                       ("rigid", balls.get_velocities)]:  # fmt: skip
        try:
            call()
            stale[name] = None
        except fv.StaleViewError as exc:
            stale[name] = str(exc)
    out["stale"] = stale
    again = fv.OvPhysxArticulationView("/World/envs/env_.*/Robot", physx=physx, stage=stage)
    authored = again.get_dof_positions().numpy()
    out["reloaded_q0"] = [float(authored[r, list(again.dof_names).index("Shoulder")]) for r in range(ENVS)]
    physx.destroy()
    try:
        again.get_dof_positions()
        out["destroyed"] = None
    except fv.StaleViewError as exc:
        out["destroyed"] = str(exc)
    stage.destroy()
    return out


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from ovphysx_helpers import run_in_subprocess

    return run_in_subprocess(Path(__file__).resolve(), tmp_path_factory.mktemp("ovphysx_physics"))


# ------------------------------------------------------------------------------------------------ the tests


def test_rows_names_and_types(run: dict[str, Any]) -> None:
    """Rows in env order; DOFs in ovphysx's articulation order, named after their joints, typed as authored; links
    root first; a fixed base."""
    assert run["robot_paths"] == [f"/World/envs/env_{i}/Robot" for i in range(ENVS)]
    assert run["ball_paths"] == [f"/World/envs/env_{i}/Ball" for i in range(ENVS)]
    assert run["dof_names"] == run["engine_dof_joints"] and sorted(run["dof_names"]) == sorted(JOINTS)
    assert run["dof_types"] == [JOINTS[n][0] for n in run["dof_names"]]
    assert run["link_names"][0] == "Base" and sorted(run["link_names"]) == ["Base", "Link1", "Link2", "Link3", "Link4"]
    assert run["fixed_base"] is True
    assert run["pendulum"] == [["Hinge"], ["rotation"]] and run["rail_dof_types"] == ["translation"]
    assert "jointActuationForce" in run["effort_source"] and "backend='ovphysx'" in run["repr"]


def test_dofs_match_ovphysx_in_si_units_parent_to_child(run: dict[str, Any]) -> None:
    """DOF positions / velocities / efforts equal ovphysx's session reads (degrees -> radians for rotations, the
    body-order sign undone), and the positions equal the child link's pose relative to its parent (the convention)."""
    errs = run["robot_errs"]
    assert errs["pos"] < 1e-5 and errs["vel"] < 1e-4 and errs["eff"] < 1e-5, errs
    assert errs["state"] == 0.0, errs  # the reader's one launch reads what the three getters read
    assert errs["geom"] < 2e-4, errs


def test_links_and_root_match_ovphysx(run: dict[str, Any]) -> None:
    errs = run["link_errs"]
    assert errs["pos"] < 1e-6 and errs["quat"] < 1e-6 and errs["lin"] < 1e-6 and errs["ang"] < 1e-6, errs
    assert errs["root"] < 1e-6 and not errs["w_negative"], errs


def test_efforts_are_the_applied_actuation_force(run: dict[str, Any]) -> None:
    """Efforts written through ovphysx read back (negated for joints authored child first); a velocity drive's
    force is not among them."""
    assert run["effort_session_matches_written"]
    assert run["effort_written_err"] < 1e-6
    assert run["rail_effort"] == 0.0


def test_pendulum_released_from_rest_conserves_energy(run: dict[str, Any]) -> None:
    """Potential energy lost = kinetic energy gained (angle in radians: degrees would break it), and the bob's drop
    is L sin(theta) with theta positive about the authored axis."""
    assert run["pendulum_mass"] == pytest.approx(PENDULUM_MASS)
    thetas = run["pendulum_theta"]  # every 10 steps: falling, about +Y (x towards -z), by more than 0.2 rad
    assert thetas[0] > 0 and all(b > a for a, b in itertools.pairwise(thetas)) and thetas[-1] > 0.2, thetas
    assert run["pendulum_energy_err"] < 0.02, run["pendulum_energy_err"]
    assert run["pendulum_drop_err"] < 1e-3, run["pendulum_drop_err"]


def test_prismatic_driven_at_constant_velocity(run: dict[str, Any]) -> None:
    assert run["rail_err"] < 1e-3 and run["rail_vel_err"] < 1e-3, (run["rail_err"], run["rail_vel_err"])


def test_free_fall(run: dict[str, Any]) -> None:
    """v = v0 + g t, constant angular velocity (authored in deg/s, read in rad/s), a = g, mass properties as
    authored; everything equal to ovphysx's own reads."""
    errs = run["ball_errs"]
    # float32 state; the accelerations are ovphysx's finite differences of float32 velocities over one step
    assert errs["v"] < 1e-3 and errs["w"] < 1e-4 and errs["a"] < 5e-3, errs
    assert errs["p"] < G * DT * (STEPS + 1) * DT, errs  # semi-implicit Euler: within g dt t / 2 of the parabola
    assert errs["truth"] < 1e-6 and errs["mass"] < 1e-6, errs


def test_indices_mask_and_bad_input(run: dict[str, Any]) -> None:
    assert run["indexed_err"] == 0.0 and run["indexed_np_err"] == 0.0 and run["ball_rows_torch"] == 0.0
    assert run["mask_rows_moved"] > 1e-4  # the step moved every row, so untouched rows are visible
    assert run["mask_true_err"] < 1e-5 and run["mask_false_untouched"]
    assert run["bad_index"] is not None and "indices" in run["bad_index"] and str(ENVS) in run["bad_index"]
    assert run["ball_bad_index"] is not None and "indices" in run["ball_bad_index"]
    for value, message in zip((2**32, 2**32 + 3, -(2**32)), run["wide_index"], strict=True):
        assert message is not None and str(value) in message, (value, message)


def test_lifetime(run: dict[str, Any]) -> None:
    """close() ends a view; a reload (detach + attach) makes every older view stale; a new one reads the reloaded
    scene (authored positions); a destroyed PhysX makes it stale too."""
    assert run["closed"] is not None and run["closed"].startswith("RuntimeError") and "closed" in run["closed"]
    for name, message in run["stale"].items():
        assert message is not None and "detached or reloaded" in message, (name, message)
    assert run["reloaded_q0"] == pytest.approx([math.radians(5.0 * (i + 1)) for i in range(ENVS)], abs=1e-5)
    assert run["destroyed"] is not None and "PhysX instance was destroyed" in run["destroyed"]


def test_bad_arguments_are_refused(run: dict[str, Any]) -> None:
    """Argument errors name the argument or the prims; a wrong engine object is refused before any engine work."""
    import frameview as fv

    with pytest.raises(TypeError, match="physx"):
        fv.OvPhysxRigidBodyView("/World/Body", physx=object())
    with pytest.raises(TypeError, match="physx"):
        fv.make_articulation_view({"prim_path": "/World/Robot", "backend": "ovphysx"}, physx=None, stage=None)
    refused = run["refused"]
    assert refused["no_stage"] is not None and refused["no_stage"].startswith("TypeError: stage"), refused
    assert refused["no_match"] is not None and "Nothing" in refused["no_match"], refused
    assert refused["not_articulation"] is not None and "Ball" in refused["not_articulation"], refused


def test_stale_on_a_change_of_the_views_own_prims() -> None:
    """The notifications a view listens to: its own prims created or destroyed, or everything destroyed; a change
    elsewhere leaves it current. (ovphysx emits per-prim notifications for stage edits, which this file's scene
    cannot drive: the mechanism is checked with the callbacks called directly.)"""
    from frameview.ovphysx.engine import _Lifetime

    class Engine:
        def subscribe_object_changes(self, **callbacks: Any) -> int:
            self.callbacks = callbacks
            return 7

    engine = Engine()
    life = _Lifetime(engine, ["/World/envs/env_0/Robot", "/World/envs/env_0/Robot/Link1"])
    assert life.subscription == 7 and life.reason is None
    engine.callbacks["on_destroyed"]("/World/envs/env_1/Robot", 0)
    engine.callbacks["on_created"]("/World/Other", 0)
    assert life.reason is None
    engine.callbacks["on_destroyed"]("/World/envs/env_0/Robot/Link1", 0)
    assert life.reason is not None and "Link1" in life.reason
    life = _Lifetime(engine, ["/World/envs/env_0/Robot"])
    engine.callbacks["on_created"]("/World/envs/env_0/Robot", 0)
    assert life.reason is not None and "topology" in life.reason
    life = _Lifetime(engine, ["/World/envs/env_0/Robot"])
    engine.callbacks["on_all_destroyed"]()
    assert life.reason is not None and "reloaded" in life.reason


if __name__ == "__main__":
    print("RESULT " + json.dumps(simulate(Path(sys.argv[1])), default=float))

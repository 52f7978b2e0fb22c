# SPDX-License-Identifier: Apache-2.0
"""The same articulation on Newton and on ovphysx: frameview's readings agree, in SI units, with each other and
with float64 truth computed here from the USD authoring.

One USD scene: three envs, each holding the same robot three times -- on a fixed base, and on a floating base with
the articulation root on the base link (Rover) or on the Xform above the links (Drone). The robot has a branch,
revolute and prismatic joints (two authored child first, i.e. ``physics:body0`` = the articulation child), rotated
joint frames and offset centres of mass; its links are placed by forward kinematics at the authored joint state
(``PhysicsJointStateAPI``) and carry the matching velocities; gravity off, no drives, no colliders. Truth (float64
NumPy, independent of both engines and of frameview): the DOF values as authored (turned parent to child, radians),
the links' poses by forward kinematics of the authored joint frames and axes, the links' centre-of-mass velocities by
differentiating it along the authored joint velocities; after stepping, the same kinematics of what was read, and
conservation of momentum.

ovphysx runs in a fresh Python process (its USD schemas must be registered before the first ovstage population of a
process), Newton here (``ModelBuilder.add_usd``, Featherstone). The engines' differences are asserted as such and
listed in docs/physics.md: Newton refuses joints authored child first (it gets them re-authored parent first -- the
same joints); it reads ``PhysicsJointStateAPI`` only through its PhysX schema resolver, and authored body velocities
in the body's frame (ovphysx: the world's; the floating bases get theirs through Newton's state); the articulation
order is each engine's; and for the Drone ovphysx picks another root link, which turns one DOF's sign.
"""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

_MISSING = [m for m in ("newton", "pxr", "ovstage", "ovphysx") if importlib.util.find_spec(m) is None]
pytestmark = pytest.mark.skipif(
    bool(_MISSING),
    reason=f"{' and '.join(_MISSING)} not importable; install with: pip install 'frameview[newton]' usd-core ovstage "
    "&& pip install --no-deps ovphysx physx-usd-schemas",
)

ENVS = 3
DT = 1.0 / 240.0
STEPS = 12
# per env, the same robot three times: on a fixed base (the articulation root on its Xform), and on a floating base
# with the articulation root on the base link (Rover) or on the Xform above the links (Drone); the view's prim
ROBOTS = {"Robot": "Robot", "Rover": "Rover/Base", "Drone": "Drone"}
LINKS = ("Base", "Link1", "Link2", "Link3", "Link4")
# joint: kind, axis, parent, child, authored child first, then the parent-side and child-side joint frames in the
# links' frames: position, rotation as (axis, degrees)
JOINTS: dict[str, tuple[str, str, str, str, bool, tuple, tuple, tuple, tuple]] = {
    "Shoulder": ("rotation", "Z", "Base", "Link1", False,
                 (0.1, 0.0, 0.3), ((1.0, 1.0, 0.0), 30.0), (0.0, 0.0, -0.2), ((0.0, 0.0, 1.0), 0.0)),
    "Slider": ("translation", "X", "Link1", "Link2", False,
               (0.0, 0.05, 0.25), ((0.0, 1.0, 0.0), 45.0), (-0.1, 0.0, 0.0), ((0.0, 0.0, 1.0), 20.0)),
    "Elbow": ("rotation", "Y", "Link2", "Link3", True,
              (0.2, 0.0, 0.0), ((0.0, 0.0, 1.0), 0.0), (0.0, 0.03, -0.15), ((1.0, 0.0, 0.0), 60.0)),
    "Side": ("translation", "Z", "Base", "Link4", True,
             (0.0, -0.2, 0.1), ((1.0, 0.0, 0.0), -35.0), (0.05, 0.0, 0.0), ((0.0, 1.0, 1.0), 25.0)),
}  # fmt: skip


def q0(name: str, env: int, robot: str) -> float:
    """The authored DOF position, parent to child: radians / metres."""
    return {"Shoulder": 0.3, "Slider": 0.05, "Elbow": -0.4, "Side": 0.08}[name] + 0.1 * env + 0.05 * (robot != "Robot")


def qd0(name: str, env: int, robot: str) -> float:
    """The authored DOF velocity, parent to child: rad/s / m/s."""
    scale = (1.0 + 0.25 * env) * (1.0 if robot == "Robot" else 1.2)
    return {"Shoulder": 0.5, "Slider": -0.2, "Elbow": 0.8, "Side": 0.1}[name] * scale


def link_mass(k: int) -> tuple[float, tuple[float, ...], tuple[float, ...]]:
    """Mass, diagonal inertia and centre of mass (link frame) of link ``k``."""
    return 1.0 + 0.3 * k, (0.02 + 0.005 * k, 0.03, 0.025), (0.04, -0.03 * (k % 2), 0.02 * k)


# ------------------------------------------------------------------------------------------------ float64 kinematics


def _axis_rot(axis: tuple[float, ...], angle: float) -> np.ndarray:
    a = np.asarray(axis, dtype=np.float64)
    a = a / np.linalg.norm(a)
    k = np.array([[0.0, -a[2], a[1]], [a[2], 0.0, -a[0]], [-a[1], a[0], 0.0]])
    return np.eye(3) + math.sin(angle) * k + (1.0 - math.cos(angle)) * (k @ k)


def _tf(rot: np.ndarray, pos: Any) -> np.ndarray:
    """A 4x4 column-vector transform (float64)."""
    m = np.eye(4)
    m[:3, :3], m[:3, 3] = rot, np.asarray(pos, dtype=np.float64)
    return m


def _frame(pos: tuple, rot: tuple) -> np.ndarray:
    return _tf(_axis_rot(rot[0], math.radians(rot[1])), pos)


def _motion(kind: str, axis: str, q: float) -> np.ndarray:
    a = np.eye(3)["XYZ".index(axis)]
    return _tf(_axis_rot(tuple(a), q), np.zeros(3)) if kind == "rotation" else _tf(np.eye(3), a * q)


def base_pose(env: int, robot: str) -> np.ndarray:
    """The base's authored world pose: env ``env`` at x = 2.5 env, turned about two axes."""
    if robot == "Robot":
        rot = _axis_rot((0, 0, 1), math.radians(30.0 + 10.0 * env)) @ _axis_rot((1, 0, 0), math.radians(15.0))
        return _tf(rot, (2.5 * env, 0.1 * env, 1.0))
    rot = _axis_rot((0, 0, 1), math.radians(-20.0 + 15.0 * env)) @ _axis_rot((0, 1, 0), math.radians(10.0))
    return _tf(rot, (2.5 * env, 1.5 if robot == "Rover" else 3.0, 1.2))


def base_twist(env: int, robot: str) -> tuple[np.ndarray, np.ndarray]:
    """The base's authored centre-of-mass linear velocity and angular velocity (world; rad/s): zero when fixed."""
    if robot == "Robot":
        return np.zeros(3), np.zeros(3)
    return np.array([0.3, -0.1 + 0.05 * env, 0.2]), np.array([0.2, -0.3, 0.4 + 0.1 * env])


def fk(base: np.ndarray, q: dict[str, float]) -> dict[str, np.ndarray]:
    """World transforms of every link for a base at ``base`` and DOF positions ``q`` (parent to child): the child's
    joint frame is the parent's joint frame moved by the DOF about / along the authored axis."""
    x = {"Base": base}
    for name in ("Shoulder", "Slider", "Elbow", "Side"):  # parents before children
        kind, axis, parent, child, _first, pp, pr, cp, cr = JOINTS[name]
        x[child] = x[parent] @ _frame(pp, pr) @ _motion(kind, axis, q[name]) @ np.linalg.inv(_frame(cp, cr))
    return x


def quat_xyzw(rot: np.ndarray) -> np.ndarray:
    """Rotation matrix -> xyzw quaternion with w >= 0 (float64)."""
    w = math.sqrt(max(0.0, 1.0 + np.trace(rot))) / 2.0
    if w > 1e-3:
        x, y, z = (
            (rot[2, 1] - rot[1, 2]) / (4 * w),
            (rot[0, 2] - rot[2, 0]) / (4 * w),
            (rot[1, 0] - rot[0, 1]) / (4 * w),
        )
    else:  # not reached by this scene's poses; kept exact for any
        i = int(np.argmax(np.diag(rot)))
        j, k = (i + 1) % 3, (i + 2) % 3
        s = math.sqrt(1.0 + rot[i, i] - rot[j, j] - rot[k, k]) * 2.0
        v = np.zeros(3)
        v[i], v[j], v[k] = s / 4.0, (rot[j, i] + rot[i, j]) / s, (rot[k, i] + rot[i, k]) / s
        x, y, z, w = *v, (rot[k, j] - rot[j, k]) / s
    q = np.array([x, y, z, w])
    q /= np.linalg.norm(q)
    return -q if q[3] < 0 else q


def quat_matrix(q: Any) -> np.ndarray:
    """xyzw quaternion -> rotation matrix (float64)."""
    x, y, z, w = np.asarray(q, dtype=np.float64) / np.linalg.norm(q)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])  # fmt: skip


def truth(
    base: np.ndarray, q: dict[str, float], qd: dict[str, float], lin: np.ndarray, ang: np.ndarray
) -> dict[str, dict[str, np.ndarray]]:
    """Per link: world position and xyzw quaternion of its frame, linear velocity of its centre of mass and angular
    velocity (world), for a base at ``base`` whose centre of mass moves at ``lin`` turning at ``ang``, by float64
    forward kinematics and a central difference along ``qd`` (error ~1e-9)."""
    h = 1e-6
    x0 = fk(base, q)
    xp, xm = fk(base, {n: q[n] + h * qd[n] for n in q}), fk(base, {n: q[n] - h * qd[n] for n in q})
    base_com = (x0["Base"] @ np.append(link_mass(0)[2], 1.0))[:3]
    out: dict[str, dict[str, np.ndarray]] = {"pos": {}, "quat": {}, "lin": {}, "ang": {}}
    for k, link in enumerate(LINKS):
        com = np.append(np.asarray(link_mass(k)[2]), 1.0)
        out["pos"][link], out["quat"][link] = x0[link][:3, 3], quat_xyzw(x0[link][:3, :3])
        relative = ((xp[link] @ com) - (xm[link] @ com))[:3] / (2 * h)
        out["lin"][link] = lin + np.cross(ang, (x0[link] @ com)[:3] - base_com) + relative
        w = (xp[link][:3, :3] - xm[link][:3, :3]) / (2 * h) @ x0[link][:3, :3].T
        out["ang"][link] = ang + np.array([w[2, 1], w[0, 2], w[1, 0]])
    return out


def authored(env: int, robot: str) -> dict[str, dict[str, np.ndarray]]:
    """:func:`truth` at the authored state."""
    q = {n: q0(n, env, robot) for n in JOINTS}
    return truth(base_pose(env, robot), q, {n: qd0(n, env, robot) for n in JOINTS}, *base_twist(env, robot))


# ------------------------------------------------------------------------------------------------ the scene


def _vec(v: Any) -> str:
    return "(" + ", ".join(repr(float(x)) for x in v) + ")"


def _quat_wxyz(rot: np.ndarray) -> str:
    x, y, z, w = quat_xyzw(rot)
    return _vec((w, x, y, z))


def _link(env: int, k: int, name: str, pose: np.ndarray, lin: np.ndarray, ang: np.ndarray, root: bool) -> str:
    mass, inertia, com = link_mass(k)
    apis = '"PhysicsRigidBodyAPI", "PhysicsMassAPI", "PhysxRigidBodyAPI"'
    apis += ', "PhysicsArticulationRootAPI", "PhysxArticulationAPI"' if root else ""
    local = np.linalg.inv(_tf(np.eye(3), (2.5 * env, 0.0, 0.0))) @ pose  # below env_i (a translation)
    return f"""
            def Xform "{name}" (prepend apiSchemas = [{apis}])
            {{
                double3 xformOp:translate = {_vec(local[:3, 3])}
                quatd xformOp:orient = {_quat_wxyz(local[:3, :3])}
                uniform token[] xformOpOrder = ["xformOp:translate", "xformOp:orient"]
                float physics:mass = {mass}
                float3 physics:diagonalInertia = {inertia}
                point3f physics:centerOfMass = {com}
                vector3f physics:velocity = {_vec(lin)}
                vector3f physics:angularVelocity = {_vec(np.degrees(ang))}
                float physxRigidBody:linearDamping = 0
                float physxRigidBody:angularDamping = 0
            }}"""


def _joint(env: int, robot: str, name: str) -> str:
    kind, axis, parent, child, child_first, pp, pr, cp, cr = JOINTS[name]
    schema, api = ("PhysicsRevoluteJoint", "angular") if kind == "rotation" else ("PhysicsPrismaticJoint", "linear")
    sides = [(parent, pp, pr), (child, cp, cr)]
    if child_first:
        sides.reverse()
    unit = 180.0 / math.pi if kind == "rotation" else 1.0  # USD: degrees
    sign = -1.0 if child_first else 1.0  # a joint's authored position is body1's frame relative to body0's
    (b0, p0, r0), (b1, p1, r1) = sides
    return f"""
            def {schema} "{name}" (prepend apiSchemas = ["PhysicsJointStateAPI:{api}"])
            {{
                rel physics:body0 = <../{b0}>
                rel physics:body1 = <../{b1}>
                uniform token physics:axis = "{axis}"
                point3f physics:localPos0 = {_vec(p0)}
                quatf physics:localRot0 = {_quat_wxyz(_axis_rot(r0[0], math.radians(r0[1])))}
                point3f physics:localPos1 = {_vec(p1)}
                quatf physics:localRot1 = {_quat_wxyz(_axis_rot(r1[0], math.radians(r1[1])))}
                float state:{api}:physics:position = {sign * unit * q0(name, env, robot)!r}
                float state:{api}:physics:velocity = {sign * unit * qd0(name, env, robot)!r}
            }}"""


def _robot(i: int, robot: str) -> str:
    """The robot at its authored state: links placed by :func:`fk`, every link's authored velocity :func:`truth`'s
    (a consistent initial state), and a fixed joint to the world for the fixed base."""
    base = base_pose(i, robot)
    poses, want = fk(base, {n: q0(n, i, robot) for n in JOINTS}), authored(i, robot)
    on_base = ROBOTS[robot].endswith("/Base")
    links = "".join(_link(i, k, n, poses[n], want["lin"][n], want["ang"][n], on_base and k == 0)
                    for k, n in enumerate(LINKS))  # fmt: skip
    root = f"""
            def PhysicsFixedJoint "RootJoint"
            {{
                rel physics:body1 = <../Base>
                point3f physics:localPos0 = {_vec(base[:3, 3])}
                quatf physics:localRot0 = {_quat_wxyz(base[:3, :3])}
            }}"""
    return f"""
        def Xform "{robot}" {"" if on_base else '(prepend apiSchemas = ["PhysicsArticulationRootAPI"])'}
        {{
            {links}
            {root if robot == "Robot" else ""}
            {"".join(_joint(i, robot, n) for n in JOINTS)}
        }}"""


def _env(i: int) -> str:
    return f"""
    def Xform "env_{i}"
    {{
        double3 xformOp:translate = ({2.5 * i}, 0, 0)
        uniform token[] xformOpOrder = ["xformOp:translate"]
        {"".join(_robot(i, robot) for robot in ROBOTS)}
    }}"""


def scene_usda() -> str:
    """Three envs of the robot at its authored joint state, fixed and floating; metres, z up, gravity off."""
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
        float physics:gravityMagnitude = 0
        bool physxScene:enableGPUDynamics = false
        uniform token physxScene:broadphaseType = "MBP"
    }}
    def Xform "envs"
    {{
        {"".join(_env(i) for i in range(ENVS))}
    }}
}}
"""


def parent_first(stage: Any) -> list[str]:
    """Re-author every joint of ``stage`` whose ``body0`` is the articulation child (as :data:`JOINTS` says) parent
    first: bodies and local frames swapped, the joint state negated -- the same joint. Returns the joints changed."""
    changed = []
    for prim in stage.Traverse():
        spec = JOINTS.get(prim.GetName())
        if spec is None or not spec[4]:
            continue
        rel0, rel1 = prim.GetRelationship("physics:body0"), prim.GetRelationship("physics:body1")
        t0, t1 = rel0.GetTargets(), rel1.GetTargets()
        rel0.SetTargets(t1)
        rel1.SetTargets(t0)
        for a, b in (("physics:localPos0", "physics:localPos1"), ("physics:localRot0", "physics:localRot1")):
            va, vb = prim.GetAttribute(a).Get(), prim.GetAttribute(b).Get()
            prim.GetAttribute(a).Set(vb)
            prim.GetAttribute(b).Set(va)
        api = "angular" if spec[0] == "rotation" else "linear"
        for what in ("position", "velocity"):
            attr = prim.GetAttribute(f"state:{api}:physics:{what}")
            attr.Set(-attr.Get())
        changed.append(str(prim.GetPath()))
    return changed


# ------------------------------------------------------------------------------------------------ the readings


def readings(view: Any) -> dict[str, Any]:
    """Everything an articulation view reads, as plain lists."""
    rp, rq = view.get_root_poses()
    rv, rw = view.get_root_velocities()
    lp, lq = view.get_link_poses()
    lv, lw = view.get_link_velocities()
    state = view.joint_state_reader().read()
    out = {
        "paths": list(view.prim_paths), "dof_names": list(view.dof_names), "dof_types": list(view.dof_types),
        "link_names": list(view.link_names), "fixed_base": bool(view.is_fixed_base),
        "dof_pos": view.get_dof_positions().numpy(), "dof_vel": view.get_dof_velocities().numpy(),
        "reader_pos": state.positions.numpy(), "reader_vel": state.velocities.numpy(),
        "root_pos": rp.numpy(), "root_quat": rq.numpy(), "root_lin": rv.numpy(), "root_ang": rw.numpy(),
        "link_pos": lp.numpy(), "link_quat": lq.numpy(), "link_lin": lv.numpy(), "link_ang": lw.numpy(),
    }  # fmt: skip
    return {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in out.items()}


def simulate_ovphysx(workdir: Path) -> dict[str, Any]:
    """The scene in ovphysx (CPU): the view's readings at the authored state and after :data:`STEPS` steps."""
    import warp as wp
    from ovphysx_helpers import open_physx_scene

    import frameview as fv

    wp.config.quiet = True
    physx, stage = open_physx_scene(workdir / "cross_engine.usda", scene_usda(), "cross_engine")
    views = {
        r: fv.OvPhysxArticulationView(f"/World/envs/env_.*/{p}", physx=physx, stage=stage) for r, p in ROBOTS.items()
    }
    out = {"t0": {r: readings(v) for r, v in views.items()}}
    for _ in range(STEPS):
        physx.step_sync(DT)
    out["t1"] = {r: readings(v) for r, v in views.items()}
    for view in views.values():
        view.close()
    physx.destroy()
    stage.destroy()
    return out


def simulate_newton(stage: Any) -> dict[str, Any]:
    """The scene in Newton (CPU, Featherstone): the same readings, after ``eval_fk`` of the imported joint state."""
    import newton

    import frameview as fv

    builder = newton.ModelBuilder()
    # PhysicsJointStateAPI's state:*:physics:* attributes are read by Newton's PhysX resolver only
    builder.add_usd(stage, schema_resolvers=[newton.usd.SchemaResolverNewton(), newton.usd.SchemaResolverPhysx()])
    model = builder.finalize(device="cpu")
    state, nxt, control = model.state(), model.state(), model.control()
    # Newton's add_usd reads physics:velocity / angularVelocity in the body's frame, PhysX in the world's: the
    # floating bases get the authored world-frame velocities through Newton's own state (free joint: COM linear
    # velocity and angular velocity, world frame), after recording what add_usd made of them
    labels, children = [str(x) for x in model.body_label], model.joint_child.numpy()
    free = {int(j) for j in np.flatnonzero(model.joint_type.numpy() == int(newton.JointType.FREE))}
    qd, starts, imported = state.joint_qd.numpy(), model.joint_qd_start.numpy(), {}
    for j in sorted(free):
        path = labels[children[j]]
        robot, env = path.split("/")[-2], int(path.split("env_")[1].split("/")[0])
        imported[path] = qd[starts[j] : starts[j] + 6].tolist()
        qd[starts[j] : starts[j] + 6] = np.concatenate(base_twist(env, robot))
    state.joint_qd.assign(qd)
    newton.eval_fk(model, state.joint_q, state.joint_qd, state)
    holder = {"state": state}
    engine = {"model": model, "state": lambda: holder["state"], "control": control}
    views = {r: fv.NewtonArticulationView(f"/World/envs/env_.*/{p}", **engine) for r, p in ROBOTS.items()}
    out = {"t0": {r: readings(v) for r, v in views.items()}, "gravity": model.gravity.numpy().ravel().tolist()}
    solver = newton.solvers.SolverFeatherstone(model)
    for _ in range(STEPS):
        holder["state"].clear_forces()
        solver.step(holder["state"], nxt, control, None, DT)
        holder["state"], nxt = nxt, holder["state"]
    out["t1"] = {r: readings(v) for r, v in views.items()}
    out["imported_base_velocities"] = imported
    return out


# ------------------------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def ovphysx_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from ovphysx_helpers import run_in_subprocess

    return run_in_subprocess(Path(__file__).resolve(), tmp_path_factory.mktemp("cross_engine"))


def _stage() -> Any:
    from pxr import Sdf, Usd

    layer = Sdf.Layer.CreateAnonymous(".usda")
    layer.ImportFromString(scene_usda())
    return Usd.Stage.Open(layer)


@pytest.fixture(scope="module")
def newton_run() -> dict[str, Any]:
    stage = _stage()
    changed = parent_first(stage)
    out = simulate_newton(stage)
    out["changed"] = changed
    return out


# ------------------------------------------------------------------------------------------------ the tests

# The engines' articulation orders (docs/physics.md, "What each engine gives"): Newton depth first from the base;
# ovphysx breadth first, and for a floating base whose articulation root is the Xform above the links (Drone) ovphysx
# roots the tree at the link that keeps it shallowest (Link1), so Shoulder's articulation child is Base there and the
# view reports it Link1 -> Base: the authored value negated.
NEWTON_ORDER = ("Shoulder", "Slider", "Elbow", "Side"), ("Base", "Link1", "Link2", "Link3", "Link4")
OVPHYSX_ORDER = {
    "Robot": (("Shoulder", "Side", "Slider", "Elbow"), ("Base", "Link1", "Link4", "Link2", "Link3")),
    "Rover": (("Shoulder", "Side", "Slider", "Elbow"), ("Base", "Link1", "Link4", "Link2", "Link3")),
    "Drone": (("Shoulder", "Slider", "Side", "Elbow"), ("Link1", "Base", "Link2", "Link4", "Link3")),
}
T0_TOL = 2e-6  # float32 state and the engines' own float32 kinematics, at the authored state
T1_TOL = 5e-5  # after STEPS steps: two solvers' integration of the same (Coriolis-coupled) motion
# a floating base after STEPS steps: Newton's Featherstone integrates the free base less tightly than PhysX (its total
# momentum drifts ~1e-4 relative, PhysX's ~1e-6: test_floating_bases_keep_their_momentum), so links' poses and
# velocities agree to these
T1_FLOATING_TOL = {"link_pos": 2e-4, "link_quat": 2e-4, "link_lin": 1e-3, "link_ang": 1e-3}


def sign(engine: str, robot: str, dof: str) -> float:
    """How the engine's view reports ``dof`` relative to the authored parent-to-child value (see above)."""
    return -1.0 if (engine, robot, dof) == ("ovphysx", "Drone", "Shoulder") else 1.0


def _run(engine: str, newton_run: dict[str, Any], ovphysx_run: dict[str, Any]) -> dict[str, Any]:
    return newton_run if engine == "newton" else ovphysx_run


def _by_name(reading: dict[str, Any], key: str, order: tuple[str, ...], names: str) -> np.ndarray:
    """``reading[key]`` with its DOF or link columns put in ``order`` (by name, independently of the views)."""
    columns = [reading[names].index(n) for n in order]
    return np.asarray(reading[key], dtype=np.float64)[:, columns]


def _link_errors(reading: dict[str, Any], want: list[dict[str, dict[str, np.ndarray]]]) -> dict[str, float]:
    """Largest error of every link's pose and velocities against float64 truth, per env."""
    errs = {"pos": 0.0, "quat": 0.0, "lin": 0.0, "ang": 0.0}
    for env in range(ENVS):
        for c, link in enumerate(reading["link_names"]):
            for key in errs:
                got = np.asarray(reading[f"link_{key}"][env][c], dtype=np.float64)
                errs[key] = max(errs[key], float(np.abs(got - want[env][key][link]).max()))
    return errs


def _kinematics_of(reading: dict[str, Any], engine: str, robot: str) -> list[dict[str, dict[str, np.ndarray]]]:
    """float64 truth for what a reading says: the base's pose and velocities (the link named Base), the DOFs (turned
    back to the authored sense)."""
    out = []
    names, base = reading["dof_names"], reading["link_names"].index("Base")
    for env in range(ENVS):
        s = [sign(engine, robot, n) for n in names]
        q = {n: v * k for n, v, k in zip(names, reading["dof_pos"][env], s, strict=True)}
        qd = {n: v * k for n, v, k in zip(names, reading["dof_vel"][env], s, strict=True)}
        pose = _tf(quat_matrix(reading["link_quat"][env][base]), reading["link_pos"][env][base])
        lin, ang = (np.asarray(reading[f"link_{k}"][env][base], dtype=np.float64) for k in ("lin", "ang"))
        out.append(truth(pose, q, qd, lin, ang))
    return out


def test_newton_refuses_joints_authored_child_first() -> None:
    """Newton's ``add_usd`` refuses a joint whose ``body0`` is the articulation child (ovphysx loads it); the scene
    Newton gets has exactly those joints re-authored parent first."""
    import newton

    with pytest.raises(ValueError, match=r"Reversed joints are not supported: .*(Elbow|Side)"):
        newton.ModelBuilder().add_usd(_stage())
    stage = _stage()
    changed = parent_first(stage)
    want = [f"/World/envs/env_{i}/{r}/{n}" for i in range(ENVS) for r in ROBOTS for n in JOINTS if JOINTS[n][4]]
    assert sorted(changed) == sorted(want) and len(want) == 2 * ENVS * len(ROBOTS)


def test_authored_body_velocities_newton_body_frame_ovphysx_world(
    newton_run: dict[str, Any], ovphysx_run: dict[str, Any]
) -> None:
    """An engine difference in reading USD: Newton's ``add_usd`` takes ``physics:velocity`` / ``angularVelocity``
    in the body's frame (rotating them by the body's orientation), ovphysx in the world's (the parent's space, here
    unrotated). The test gives Newton's floating bases the world-frame values through its state (see
    :func:`simulate_newton`)."""
    imported = newton_run["imported_base_velocities"]
    assert sorted(imported) == sorted(f"/World/envs/env_{i}/{r}/Base" for i in range(ENVS) for r in ("Rover", "Drone"))
    for path, got in imported.items():
        robot, env = path.split("/")[-2], int(path.split("env_")[1].split("/")[0])
        rot, (lin, ang) = base_pose(env, robot)[:3, :3], base_twist(env, robot)
        assert np.abs(np.asarray(got) - np.concatenate([rot @ lin, rot @ ang])).max() < 1e-6, path
        assert np.abs(np.asarray(got) - np.concatenate([lin, ang])).max() > 1e-2, path  # a difference that shows
    rover = ovphysx_run["t0"]["Rover"]
    for env in range(ENVS):
        lin, ang = base_twist(env, "Rover")
        assert np.abs(np.asarray(rover["root_lin"][env]) - lin).max() < T0_TOL
        assert np.abs(np.asarray(rover["root_ang"][env]) - ang).max() < T0_TOL


@pytest.mark.parametrize("robot", list(ROBOTS))
def test_metadata(robot: str, newton_run: dict[str, Any], ovphysx_run: dict[str, Any]) -> None:
    """Rows, DOF names and types, link names and fixed base agree; the articulation order is each engine's own."""
    a, b = newton_run["t0"][robot], ovphysx_run["t0"][robot]
    assert a["paths"] == b["paths"] == [f"/World/envs/env_{i}/{ROBOTS[robot]}" for i in range(ENVS)]
    assert a["fixed_base"] is b["fixed_base"] is (robot == "Robot")
    for r in (a, b):
        assert sorted(r["dof_names"]) == sorted(JOINTS) and sorted(r["link_names"]) == sorted(LINKS)
        assert r["dof_types"] == [JOINTS[n][0] for n in r["dof_names"]]  # as authored: rotation / translation
    assert (tuple(a["dof_names"]), tuple(a["link_names"])) == NEWTON_ORDER
    assert (tuple(b["dof_names"]), tuple(b["link_names"])) == OVPHYSX_ORDER[robot]


def test_newton_breadth_first_gives_ovphysx_order_here(ovphysx_run: dict[str, Any]) -> None:
    """``add_usd(joint_ordering="bfs")`` orders this robot's DOFs and links as ovphysx does (not a general promise:
    the order of siblings is each engine's)."""
    import newton
    import warp as wp

    import frameview as fv

    stage = _stage()
    parent_first(stage)
    builder = newton.ModelBuilder()
    builder.add_usd(stage, joint_ordering="bfs")
    model = builder.finalize(device="cpu")
    for robot in ("Robot", "Rover"):
        view = fv.NewtonArticulationView(f"/World/envs/env_.*/{ROBOTS[robot]}", model=model, state=model.state())
        assert (view.dof_names, view.link_names) == OVPHYSX_ORDER[robot]
        ov = ovphysx_run["t0"][robot]
        assert (tuple(ov["dof_names"]), tuple(ov["link_names"])) == OVPHYSX_ORDER[robot]
    assert wp.get_device(model.device).is_cpu


@pytest.mark.parametrize("robot", list(ROBOTS))
@pytest.mark.parametrize("engine", ["newton", "ovphysx"])
def test_authored_state_in_si_units(
    engine: str, robot: str, newton_run: dict[str, Any], ovphysx_run: dict[str, Any]
) -> None:
    """At the authored state each engine reads the float64 truth: DOF positions / velocities parent to child in
    radians / metres (ovphysx: authored in degrees, two joints child first), link poses by forward kinematics (xyzw,
    w >= 0), link centre-of-mass velocities by its derivative, the root as the engine's root link."""
    r = _run(engine, newton_run, ovphysx_run)["t0"][robot]
    names = r["dof_names"]
    want_q = np.array([[sign(engine, robot, n) * q0(n, i, robot) for n in names] for i in range(ENVS)])
    want_qd = np.array([[sign(engine, robot, n) * qd0(n, i, robot) for n in names] for i in range(ENVS)])
    assert np.abs(np.asarray(r["dof_pos"]) - want_q).max() < T0_TOL
    assert np.abs(np.asarray(r["dof_vel"]) - want_qd).max() < T0_TOL
    assert r["reader_pos"] == r["dof_pos"] and r["reader_vel"] == r["dof_vel"]
    want = [authored(i, robot) for i in range(ENVS)]
    errs = _link_errors(r, want)
    assert max(errs.values()) < T0_TOL, errs
    assert min(np.asarray(r["link_quat"])[..., 3].min(), np.asarray(r["root_quat"])[:, 3].min()) >= 0.0
    root = r["link_names"][0]
    for i in range(ENVS):
        for key in ("pos", "quat", "lin", "ang"):
            assert np.abs(np.asarray(r[f"root_{key}"][i]) - want[i][key][root]).max() < T0_TOL, (key, i)


@pytest.mark.parametrize(("moment", "tol"), [("t0", T0_TOL), ("t1", T1_TOL)])
@pytest.mark.parametrize("robot", list(ROBOTS))
def test_engines_read_the_same(
    robot: str, moment: str, tol: float, newton_run: dict[str, Any], ovphysx_run: dict[str, Any]
) -> None:
    """Newton's and ovphysx's readings of the same articulation agree, DOFs and links matched by name: at the
    authored state, and after both engines stepped it (no gravity, no drives) for STEPS steps."""
    a, b = newton_run[moment][robot], ovphysx_run[moment][robot]
    dofs, links = NEWTON_ORDER
    flip = np.array([sign("ovphysx", robot, n) for n in dofs])
    for key in ("dof_pos", "dof_vel", "reader_pos", "reader_vel"):
        diff = np.abs(_by_name(a, key, dofs, "dof_names") - flip * _by_name(b, key, dofs, "dof_names")).max()
        assert diff < tol, (key, diff)
    floating = moment == "t1" and robot != "Robot"
    for key in ("link_pos", "link_quat", "link_lin", "link_ang"):
        diff = np.abs(_by_name(a, key, links, "link_names") - _by_name(b, key, links, "link_names")).max()
        assert diff < (T1_FLOATING_TOL[key] if floating else tol), (key, diff)
    for key in ("pos", "quat", "lin", "ang"):  # each root against the other engine's link of that name
        limit = T1_FLOATING_TOL[f"link_{key}"] if floating else tol
        mine = np.asarray(a[f"root_{key}"])
        other = _by_name(b, f"link_{key}", (a["link_names"][0],), "link_names")[:, 0]
        assert np.abs(mine - other).max() < limit, key
        if robot != "Drone":
            assert np.abs(mine - np.asarray(b[f"root_{key}"])).max() < limit, key


@pytest.mark.parametrize("robot", list(ROBOTS))
@pytest.mark.parametrize("engine", ["newton", "ovphysx"])
def test_after_steps_links_follow_the_dofs(
    engine: str, robot: str, newton_run: dict[str, Any], ovphysx_run: dict[str, Any]
) -> None:
    """After the steps every DOF moved (q ~ q0 + v t), and the links read are the float64 kinematics of the base and
    DOFs read: the views' DOF order, names and signs hold in motion too."""
    run = _run(engine, newton_run, ovphysx_run)
    t0, t1 = run["t0"][robot], run["t1"][robot]
    moved = np.asarray(t1["dof_pos"]) - np.asarray(t0["dof_pos"])
    expected = np.asarray(t0["dof_vel"]) * STEPS * DT
    assert np.abs(moved).min() > 1e-3  # not a check of a still robot
    assert np.abs(moved - expected).max() < 0.1 * np.abs(expected).max()  # Coriolis coupling bends it a little
    errs = _link_errors(t1, _kinematics_of(t1, engine, robot))
    assert max(errs.values()) < T1_TOL, errs


def momentum(reading: dict[str, Any], env: int) -> tuple[np.ndarray, np.ndarray]:
    """Total linear momentum and angular momentum about the centre of mass (float64, from the authored masses and
    inertias and the links' poses and centre-of-mass velocities read)."""
    parts, total, centre = [], 0.0, np.zeros(3)
    for c, link in enumerate(reading["link_names"]):
        mass, inertia, com = link_mass(LINKS.index(link))
        rot = quat_matrix(reading["link_quat"][env][c])
        x = np.asarray(reading["link_pos"][env][c]) + rot @ np.asarray(com)
        v, w = np.asarray(reading["link_lin"][env][c]), np.asarray(reading["link_ang"][env][c])
        parts.append((mass, x, v, rot @ np.diag(inertia) @ rot.T @ w))
        total, centre = total + mass, centre + mass * x
    centre /= total
    lin = sum((m * v for m, _x, v, _l in parts), np.zeros(3))
    ang = sum((spin + m * np.cross(x - centre, v) for m, x, v, spin in parts), np.zeros(3))
    return lin, ang


@pytest.mark.parametrize("robot", ["Rover", "Drone"])
@pytest.mark.parametrize("engine", ["newton", "ovphysx"])
def test_floating_bases_keep_their_momentum(
    engine: str, robot: str, newton_run: dict[str, Any], ovphysx_run: dict[str, Any]
) -> None:
    """No gravity, no drives: a floating robot's total momentum stays as it was (within the solver's integration),
    read from the links' centre-of-mass velocities (world frame) and angular velocities."""
    run = _run(engine, newton_run, ovphysx_run)
    for env in range(ENVS):
        (p0, l0), (p1, l1) = momentum(run["t0"][robot], env), momentum(run["t1"][robot], env)
        assert np.linalg.norm(p1 - p0) < 5e-4 * np.linalg.norm(p0), (env, p0, p1)
        assert np.linalg.norm(l1 - l0) < 1e-3 * np.linalg.norm(l0), (env, l0, l1)


if __name__ == "__main__":
    print("RESULT " + json.dumps(simulate_ovphysx(Path(sys.argv[1]))))

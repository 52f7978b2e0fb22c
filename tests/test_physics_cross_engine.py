# SPDX-License-Identifier: Apache-2.0
"""The same articulation on Newton and on ovphysx: frameview's readings agree, in SI units, with each other and
with float64 truth computed here from the USD authoring.

One USD scene: three envs, each a fixed-base robot with a branch (revolute and prismatic joints, two of them authored
child first, i.e. ``physics:body0`` = the articulation child), rotated joint frames, offset centres of mass, links
placed by forward kinematics at the authored joint state (``PhysicsJointStateAPI``), gravity off, no drives, no
colliders. Truth (float64 NumPy, independent of both engines and of frameview): the DOF values as authored (turned
parent to child and into radians), the links' poses by forward kinematics of the authored joint frames and axes, the
links' centre-of-mass velocities by differentiating that kinematics along the authored joint velocities.

ovphysx runs in a fresh Python process (its USD schemas must be registered before the first ovstage population of a
process), Newton here (``ModelBuilder.add_usd``). Newton refuses joints authored child first (``add_usd`` raises), so
it loads the scene with those joints re-authored parent first -- the same joint, its body order, local frames and
state swapped / negated -- which the test checks is what Newton refuses and what it accepts.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import os
import subprocess
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
ROBOTS = "/World/envs/env_.*/Robot"
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


def q0(name: str, env: int) -> float:
    """The authored DOF position, parent to child: radians / metres."""
    return {"Shoulder": 0.3, "Slider": 0.05, "Elbow": -0.4, "Side": 0.08}[name] + 0.1 * env


def qd0(name: str, env: int) -> float:
    """The authored DOF velocity, parent to child: rad/s / m/s."""
    return {"Shoulder": 0.5, "Slider": -0.2, "Elbow": 0.8, "Side": 0.1}[name] * (1.0 + 0.25 * env)


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


def base_pose(env: int) -> np.ndarray:
    """The fixed base's world pose: env ``env`` at x = 2.5 env, yawed and rolled."""
    rot = _axis_rot((0.0, 0.0, 1.0), math.radians(30.0 + 10.0 * env)) @ _axis_rot((1.0, 0.0, 0.0), math.radians(15.0))
    return _tf(rot, (2.5 * env, 0.1 * env, 1.0))


def fk(env: int, q: dict[str, float]) -> dict[str, np.ndarray]:
    """World transforms of every link at DOF positions ``q`` (parent to child): the child's joint frame is the
    parent's joint frame moved by the DOF about / along the authored axis."""
    x = {"Base": base_pose(env)}
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


def truth(env: int, q: dict[str, float], qd: dict[str, float]) -> dict[str, dict[str, np.ndarray]]:
    """Per link: world position and xyzw quaternion of its frame, linear velocity of its centre of mass and angular
    velocity (world), by float64 forward kinematics and a central difference along ``qd`` (error ~1e-9)."""
    h = 1e-6
    x0, xp, xm = fk(env, q), fk(env, {n: q[n] + h * qd[n] for n in q}), fk(env, {n: q[n] - h * qd[n] for n in q})
    out: dict[str, dict[str, np.ndarray]] = {"pos": {}, "quat": {}, "lin": {}, "ang": {}}
    for k, link in enumerate(LINKS):
        com = np.append(np.asarray(link_mass(k)[2]), 1.0)
        out["pos"][link], out["quat"][link] = x0[link][:3, 3], quat_xyzw(x0[link][:3, :3])
        out["lin"][link] = ((xp[link] @ com) - (xm[link] @ com))[:3] / (2 * h)
        w = (xp[link][:3, :3] - xm[link][:3, :3]) / (2 * h) @ x0[link][:3, :3].T
        out["ang"][link] = np.array([w[2, 1], w[0, 2], w[1, 0]])
    return out


# ------------------------------------------------------------------------------------------------ the scene


def _quat_wxyz(rot: tuple) -> tuple[float, ...]:
    x, y, z, w = quat_xyzw(_axis_rot(rot[0], math.radians(rot[1])))
    return (float(w), float(x), float(y), float(z))


def _link(env: int, k: int, name: str, pose: np.ndarray) -> str:
    mass, inertia, com = link_mass(k)
    local = np.linalg.inv(_tf(np.eye(3), (2.5 * env, 0.0, 0.0))) @ pose  # below env_i (a translation)
    x, y, z, w = (float(v) for v in quat_xyzw(pose[:3, :3]))
    return f"""
            def Xform "{name}" (prepend apiSchemas = ["PhysicsRigidBodyAPI", "PhysicsMassAPI", "PhysxRigidBodyAPI"])
            {{
                double3 xformOp:translate = {tuple(float(v) for v in local[:3, 3])}
                quatd xformOp:orient = ({w!r}, {x!r}, {y!r}, {z!r})
                uniform token[] xformOpOrder = ["xformOp:translate", "xformOp:orient"]
                float physics:mass = {mass}
                float3 physics:diagonalInertia = {inertia}
                point3f physics:centerOfMass = {com}
                float physxRigidBody:linearDamping = 0
                float physxRigidBody:angularDamping = 0
            }}"""


def _joint(env: int, name: str) -> str:
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
                point3f physics:localPos0 = {p0}
                quatf physics:localRot0 = {_quat_wxyz(r0)}
                point3f physics:localPos1 = {p1}
                quatf physics:localRot1 = {_quat_wxyz(r1)}
                float state:{api}:physics:position = {sign * unit * q0(name, env)!r}
                float state:{api}:physics:velocity = {sign * unit * qd0(name, env)!r}
            }}"""


def _env(i: int) -> str:
    poses = fk(i, {n: q0(n, i) for n in JOINTS})
    bx, by, bz, bw = (float(v) for v in quat_xyzw(poses["Base"][:3, :3]))
    links = "".join(_link(i, k, name, poses[name]) for k, name in enumerate(LINKS))
    return f"""
    def Xform "env_{i}"
    {{
        double3 xformOp:translate = ({2.5 * i}, 0, 0)
        uniform token[] xformOpOrder = ["xformOp:translate"]
        def Xform "Robot" (prepend apiSchemas = ["PhysicsArticulationRootAPI", "PhysxArticulationAPI"])
        {{
            bool physxArticulation:enabledSelfCollisions = false
            {links}
            def PhysicsFixedJoint "RootJoint"
            {{
                rel physics:body1 = <../Base>
                point3f physics:localPos0 = {tuple(float(v) for v in poses["Base"][:3, 3])}
                quatf physics:localRot0 = ({bw!r}, {bx!r}, {by!r}, {bz!r})
            }}
            {"".join(_joint(i, n) for n in JOINTS)}
        }}
    }}"""


def scene_usda() -> str:
    """Three envs of the robot at its authored joint state; metres, z up, gravity off."""
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
    import ovphysx
    import ovstage
    import warp as wp
    from ovphysx.samples.python_samples.schema_support import physx_schema_paths

    import frameview as fv

    wp.config.quiet = True
    schemas = [str(p) for p in physx_schema_paths()]
    with contextlib.suppress(Exception):  # newton-usd-schemas is optional; ovphysx warns at attach without it
        schemas.append(str(ovphysx.newton_schema_root()))
    ovstage.population.register_usd_schemas(schemas)
    usda = workdir / "cross_engine.usda"
    usda.write_text(scene_usda())
    physx = ovphysx.PhysX()
    stage = ovstage.Stage("cross_engine")
    ovstage.population.open_usd(stage, str(usda.resolve()), ordinal=1, domains=ovstage.PopulationDomain.ALL)
    stage.advance_write_floor(ordinal=1).wait()
    physx.wait_task(physx.attach_ovstage(stage, read_ordinal=1))
    physx.warmup()
    view = fv.OvPhysxArticulationView(ROBOTS, physx=physx, stage=stage)
    out = {"t0": readings(view)}
    for _ in range(STEPS):
        physx.step_sync(DT)
    out["t1"] = readings(view)
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
    newton.eval_fk(model, state.joint_q, state.joint_qd, state)
    holder = {"state": state}
    view = fv.NewtonArticulationView(ROBOTS, model=model, state=lambda: holder["state"], control=control)
    out = {"t0": readings(view), "gravity": np.asarray(model.gravity.numpy()).ravel().tolist()}
    solver = newton.solvers.SolverFeatherstone(model)
    for _ in range(STEPS):
        holder["state"].clear_forces()
        solver.step(holder["state"], nxt, control, None, DT)
        holder["state"], nxt = nxt, holder["state"]
    out["t1"] = readings(view)
    out["armature"] = float(np.abs(model.joint_armature.numpy()).max())
    return out


# ------------------------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def ovphysx_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    env = dict(os.environ)
    here = Path(__file__).resolve().parent
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(here), env.get("PYTHONPATH", "")]))
    workdir = tmp_path_factory.mktemp("cross_engine")
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), str(workdir)],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"ovphysx simulation failed (exit {proc.returncode}):\n{output[-4000:]}"
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])


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

NEWTON_DFS = ("Shoulder", "Slider", "Elbow", "Side"), ("Base", "Link1", "Link2", "Link3", "Link4")
OVPHYSX_BFS = ("Shoulder", "Side", "Slider", "Elbow"), ("Base", "Link1", "Link4", "Link2", "Link3")
T0_TOL = 2e-6  # float32 state and the engines' own float32 kinematics, at the authored state
T1_TOL = 5e-5  # after STEPS steps: two solvers' integration of the same (Coriolis-coupled) motion


def _by_name(reading: dict[str, Any], key: str, order: tuple[str, ...], names: str) -> np.ndarray:
    """``reading[key]`` with its DOF or link columns put in ``order`` (by name, independently of the views)."""
    columns = [reading[names].index(n) for n in order]
    return np.asarray(reading[key], dtype=np.float64)[:, columns]


def _truth_errors(reading: dict[str, Any], q: list[dict[str, float]], qd: list[dict[str, float]]) -> dict[str, float]:
    """Largest error of every link's pose and velocities against float64 kinematics at joint state ``q, qd``."""
    errs = {"pos": 0.0, "quat": 0.0, "lin": 0.0, "ang": 0.0}
    for env in range(ENVS):
        want = truth(env, q[env], qd[env])
        for c, link in enumerate(reading["link_names"]):
            for key in errs:
                got = np.asarray(reading[f"link_{key}"][env][c], dtype=np.float64)
                errs[key] = max(errs[key], float(np.abs(got - want[key][link]).max()))
    return errs


def _state(reading: dict[str, Any]) -> tuple[list[dict[str, float]], list[dict[str, float]]]:
    names = reading["dof_names"]
    return ([dict(zip(names, row, strict=True)) for row in reading["dof_pos"]],
            [dict(zip(names, row, strict=True)) for row in reading["dof_vel"]])  # fmt: skip


def test_newton_refuses_joints_authored_child_first() -> None:
    """Newton's ``add_usd`` refuses a joint whose ``body0`` is the articulation child (ovphysx loads it); the scene
    Newton gets has exactly those joints re-authored parent first."""
    import newton

    with pytest.raises(ValueError, match=r"Reversed joints are not supported: .*Elbow"):
        newton.ModelBuilder().add_usd(_stage())
    stage = _stage()
    changed = parent_first(stage)
    want = [f"/World/envs/env_{i}/Robot/{n}" for i in range(ENVS) for n in JOINTS if JOINTS[n][4]]
    assert sorted(changed) == sorted(want) and len(want) == 2 * ENVS


def test_metadata_agree(newton_run: dict[str, Any], ovphysx_run: dict[str, Any]) -> None:
    """Rows, DOF names and types, link names and fixed base agree; the articulation *order* is each engine's own
    (Newton depth first, ovphysx breadth first: docs/physics.md), so readings are compared by name."""
    a, b = newton_run["t0"], ovphysx_run["t0"]
    assert a["paths"] == b["paths"] == [f"/World/envs/env_{i}/Robot" for i in range(ENVS)]
    assert a["fixed_base"] is True and b["fixed_base"] is True
    for r in (a, b):
        assert sorted(r["dof_names"]) == sorted(JOINTS) and sorted(r["link_names"]) == sorted(LINKS)
        assert r["link_names"][0] == "Base"
        assert r["dof_types"] == [JOINTS[n][0] for n in r["dof_names"]]  # as authored: rotation / translation
    # a documented difference, not an agreement: both are parent-before-child orders of the same tree
    assert (tuple(a["dof_names"]), tuple(a["link_names"])) == NEWTON_DFS
    assert (tuple(b["dof_names"]), tuple(b["link_names"])) == OVPHYSX_BFS


@pytest.mark.parametrize("engine", ["newton", "ovphysx"])
def test_authored_state_in_si_units(engine: str, newton_run: dict[str, Any], ovphysx_run: dict[str, Any]) -> None:
    """At the authored joint state each engine reads the float64 truth: DOF positions / velocities parent to child
    in radians / metres (ovphysx: authored in degrees, two joints child first), link poses by forward kinematics
    (xyzw, w >= 0), link centre-of-mass velocities by its derivative; the fixed root at rest."""
    r = (newton_run if engine == "newton" else ovphysx_run)["t0"]
    want_q = np.array([[q0(n, i) for n in r["dof_names"]] for i in range(ENVS)])
    want_qd = np.array([[qd0(n, i) for n in r["dof_names"]] for i in range(ENVS)])
    assert np.abs(np.asarray(r["dof_pos"]) - want_q).max() < T0_TOL
    assert np.abs(np.asarray(r["dof_vel"]) - want_qd).max() < T0_TOL
    assert np.asarray(r["reader_pos"]).tolist() == r["dof_pos"] and r["reader_vel"] == r["dof_vel"]
    q, qd = [{n: q0(n, i) for n in JOINTS} for i in range(ENVS)], [{n: qd0(n, i) for n in JOINTS} for i in range(ENVS)]
    errs = _truth_errors(r, q, qd)
    assert max(errs.values()) < T0_TOL, errs
    assert min(np.asarray(r["link_quat"])[..., 3].min(), np.asarray(r["root_quat"])[:, 3].min()) >= 0.0
    for i in range(ENVS):
        assert np.abs(np.asarray(r["root_pos"][i]) - base_pose(i)[:3, 3]).max() < T0_TOL
        assert np.abs(np.asarray(r["root_quat"][i]) - quat_xyzw(base_pose(i)[:3, :3])).max() < T0_TOL
    assert np.abs(np.asarray(r["root_lin"])).max() == 0.0 and np.abs(np.asarray(r["root_ang"])).max() == 0.0


@pytest.mark.parametrize(("moment", "tol"), [("t0", T0_TOL), ("t1", T1_TOL)])
def test_engines_read_the_same(moment: str, tol: float, newton_run: dict[str, Any],
                               ovphysx_run: dict[str, Any]) -> None:  # fmt: skip
    """Newton's and ovphysx's readings of the same articulation agree, DOFs and links matched by name: at the
    authored state, and after both engines stepped it (no gravity, no drives) for STEPS steps."""
    a, b = newton_run[moment], ovphysx_run[moment]
    dofs, links = NEWTON_DFS
    for key in ("dof_pos", "dof_vel", "reader_pos", "reader_vel"):
        diff = np.abs(_by_name(a, key, dofs, "dof_names") - _by_name(b, key, dofs, "dof_names")).max()
        assert diff < tol, (key, diff)
    for key in ("link_pos", "link_quat", "link_lin", "link_ang"):
        diff = np.abs(_by_name(a, key, links, "link_names") - _by_name(b, key, links, "link_names")).max()
        assert diff < tol, (key, diff)
    for key in ("root_pos", "root_quat", "root_lin", "root_ang"):
        assert np.abs(np.asarray(a[key]) - np.asarray(b[key])).max() < tol, key


@pytest.mark.parametrize("engine", ["newton", "ovphysx"])
def test_after_steps_links_follow_the_dofs(engine: str, newton_run: dict[str, Any],
                                           ovphysx_run: dict[str, Any]) -> None:  # fmt: skip
    """After the steps every DOF moved (q ~ q0 + v t), and the links read are the float64 kinematics of the DOFs
    read: the views' DOF order, names and parent-to-child signs hold in motion too."""
    run = newton_run if engine == "newton" else ovphysx_run
    t0, t1 = run["t0"], run["t1"]
    moved = np.asarray(t1["dof_pos"]) - np.asarray(t0["dof_pos"])
    expected = np.asarray(t0["dof_vel"]) * STEPS * DT
    assert np.abs(moved).min() > 1e-3  # not a check of a still robot
    assert np.abs(moved - expected).max() < 0.05 * np.abs(expected).max()  # Coriolis coupling bends it a little
    errs = _truth_errors(t1, *_state(t1))
    assert max(errs.values()) < T1_TOL, errs


if __name__ == "__main__":
    print("RESULT " + json.dumps(simulate_ovphysx(Path(sys.argv[1]))))

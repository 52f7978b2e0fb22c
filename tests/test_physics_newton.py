# SPDX-License-Identifier: Apache-2.0
"""Typed physics views on Newton: rigid bodies, articulations and the joint-state reader.

Truth is Newton's own arrays (``body_q``, ``body_qd``, ``joint_q``, ``joint_qd``, ``control.joint_f``, the model's
mass properties) read with NumPy and reordered here by label, independently of the views' tables, and analytic
motion: a body in free fall (v = g t), a pendulum released from rest (energy), a prismatic joint moving at constant
velocity (q = v t).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import warp as wp

import frameview as fv

newton = pytest.importorskip("newton")

ENVS = 5
DOFS = 4  # revolute, prismatic, revolute, prismatic
G = 9.81
DT = 1.0 / 120.0


def robot_paths(env: int) -> str:
    return f"/World/envs/env_{env}/Robot"


def add_robot(b, env: int, floating: bool, dofs: int = DOFS) -> None:
    """A chain of ``dofs`` links on a base, alternating revolute (y) and prismatic (z) joints; env-dependent
    placement and masses, so that a wrong row shows."""
    root = robot_paths(env)
    base = b.add_link(
        xform=wp.transform((float(env), 0.0, 1.0), wp.quat_identity()), mass=1.0 + env, label=f"{root}/base"
    )
    b.add_shape_box(base, hx=0.1, hy=0.1, hz=0.1)
    if floating:
        joints = [b.add_joint_free(base, label=f"{root}/root_joint")]
    else:
        joints = [b.add_joint_fixed(-1, base, parent_xform=wp.transform((float(env), 0.0, 1.0), wp.quat_identity()),
                                    label=f"{root}/root_joint")]  # fmt: skip
    parent = base
    for k in range(dofs):
        link = b.add_link(mass=0.5 + 0.1 * k, label=f"{root}/link{k}")
        b.add_shape_capsule(link, radius=0.04, half_height=0.08)
        xform = wp.transform((0.0, 0.0, 0.2), wp.quat_identity())
        if k % 2 == 0:
            j = b.add_joint_revolute(parent, link, parent_xform=xform, axis=(0.0, 1.0, 0.0), label=f"{root}/joint{k}")
        else:
            j = b.add_joint_prismatic(parent, link, parent_xform=xform, axis=(0.0, 0.0, 1.0), label=f"{root}/joint{k}")
        joints.append(j)
        parent = link
    b.add_articulation(joints, label=root)


def build(device: str, floating: bool = True, envs: int = ENVS):
    b = newton.ModelBuilder()
    for e in range(envs):
        add_robot(b, e, floating)
    free = b.add_body(xform=wp.transform((0.0, 5.0, 3.0), wp.quat_identity()), mass=2.0, label="/World/Ball")
    b.add_shape_sphere(free, radius=0.1)
    model = b.finalize(device=device)
    np.testing.assert_allclose(np.asarray(model.gravity.numpy()).ravel()[-3:], [0.0, 0.0, -G], rtol=1e-6)  # z up
    return model


class Sim:
    """A model stepped by Featherstone with random joint motion, and the views' engine handles."""

    def __init__(self, device: str, floating: bool = True, envs: int = ENVS, still: bool = False) -> None:
        self.model = build(device, floating, envs)
        self.state, self.next = self.model.state(), self.model.state()
        self.control = self.model.control()
        rng = np.random.default_rng(4)
        qd = self.state.joint_qd.numpy()
        qd[:] = 0.0 if still else rng.uniform(-1.0, 1.0, qd.shape)
        self.state.joint_qd.assign(qd)
        effort = rng.uniform(-0.5, 0.5, self.control.joint_f.shape).astype(np.float32)
        self.control.joint_f.assign(effort * (not still))
        newton.eval_fk(self.model, self.state.joint_q, self.state.joint_qd, self.state)
        self.solver = newton.solvers.SolverFeatherstone(self.model)

    def step(self, n: int = 1) -> None:
        for _ in range(n):
            self.state.clear_forces()
            self.solver.step(self.state, self.next, self.control, None, DT)
            self.state, self.next = self.next, self.state

    def engine(self) -> dict:
        return {"model": self.model, "state": lambda: self.state, "control": self.control}


@pytest.fixture(scope="module")
def sims() -> dict:
    return {}


def sim_for(sims: dict, device: str) -> Sim:
    if device not in sims:
        sim = Sim(device)
        sim.step(7)
        sims[device] = sim
    return sims[device]


# ---------------------------------------------------------------- truth, by label


def labels(model, kind: str) -> list[str]:
    return [str(x) for x in getattr(model, f"{kind}_label")]


def body_index(model, path: str) -> int:
    return labels(model, "body").index(path)


def dof_index(model, joint_path: str) -> tuple[int, int]:
    """(coordinate, DOF) index of a one-DOF joint, from the joint's label."""
    j = labels(model, "joint").index(joint_path)
    return int(model.joint_q_start.numpy()[j]), int(model.joint_qd_start.numpy()[j])


def canonical(q: np.ndarray) -> np.ndarray:
    return np.where(q[..., 3:4] < 0, -q, q)


# ---------------------------------------------------------------- articulations


def test_articulation_metadata(device: str, sims: dict) -> None:
    sim = sim_for(sims, device)
    arts = fv.NewtonArticulationView("/World/envs/env_.*/Robot", **sim.engine())
    assert arts.prim_paths == tuple(robot_paths(e) for e in range(ENVS))
    assert arts.dof_names == ("joint0", "joint1", "joint2", "joint3")
    assert arts.dof_types == ("rotation", "translation", "rotation", "translation")
    assert arts.link_names == ("base", "link0", "link1", "link2", "link3")
    assert (arts.dof_count, arts.link_count, arts.is_fixed_base, arts.backend) == (DOFS, DOFS + 1, False, "newton")
    assert "joint_f" in arts.effort_source


def test_joint_state_matches_newton_arrays(device: str, sims: dict) -> None:
    sim = sim_for(sims, device)
    reader = fv.make_joint_state_reader({"prim_path": "/World/envs/env_.*/Robot", "backend": "newton"}, **sim.engine())
    reading = reader.read()
    q, qd, f = sim.state.joint_q.numpy(), sim.state.joint_qd.numpy(), sim.control.joint_f.numpy()
    want_pos = np.zeros((ENVS, DOFS))
    want_vel, want_eff = np.zeros_like(want_pos), np.zeros_like(want_pos)
    for e in range(ENVS):
        for k in range(DOFS):
            qi, di = dof_index(sim.model, f"{robot_paths(e)}/joint{k}")
            want_pos[e, k], want_vel[e, k], want_eff[e, k] = q[qi], qd[di], f[di]
    assert reading.names == reader.names == ("joint0", "joint1", "joint2", "joint3")
    assert reading.positions.shape == (ENVS, DOFS) and reading.positions.device == wp.get_device(device)
    np.testing.assert_array_equal(reading.positions.numpy(), want_pos)
    np.testing.assert_array_equal(reading.velocities.numpy(), want_vel)
    np.testing.assert_array_equal(reading.efforts.numpy(), want_eff)
    assert np.abs(want_pos).max() > 1e-3  # the joints moved: not a check of zeros
    arts = reader.view
    np.testing.assert_array_equal(arts.get_dof_positions().numpy(), want_pos)
    np.testing.assert_array_equal(arts.get_dof_velocities().numpy(), want_vel)
    np.testing.assert_array_equal(arts.get_dof_efforts().numpy(), want_eff)
    # rows by indices of every kind users pass, and by mask
    torch = pytest.importorskip("torch")
    ids = [3, 0, 4]
    for indices in (ids, np.array(ids, dtype=np.int64), torch.tensor(ids, dtype=torch.int64),
                    wp.array(ids, dtype=wp.int32, device=device)):  # fmt: skip
        part = reader.read(indices)
        np.testing.assert_array_equal(part.positions.numpy(), want_pos[ids])
        np.testing.assert_array_equal(part.efforts.numpy(), want_eff[ids])
    # device indices of other dtypes and strides are read by the gather itself: a strided int64 column, uint8
    col = torch.tensor([[3, 9], [0, 9], [4, 9]], dtype=torch.int64, device="cuda" if device != "cpu" else "cpu")[:, 0]
    np.testing.assert_array_equal(reader.read(col).positions.numpy(), want_pos[ids])
    small = wp.array(np.array(ids, dtype=np.uint8), dtype=wp.uint8, device=device)
    np.testing.assert_array_equal(reader.read(small).velocities.numpy(), want_vel[ids])
    mask = np.array([True, False, True, False, True])
    before = np.full((ENVS, DOFS), 7.0, dtype=np.float32)
    out = reader.read(mask=mask)  # all rows' buffer: the unmasked rows keep what the buffer held
    out.velocities.assign(before)
    out = reader.read(mask=torch.tensor(mask))
    np.testing.assert_array_equal(out.velocities.numpy()[mask], want_vel[mask])
    np.testing.assert_array_equal(out.velocities.numpy()[~mask], before[~mask])
    with reader:  # the reader closes the view it made
        assert repr(reader).startswith("JointStateReader(")
    assert arts.is_closed and not arts.is_current


def test_root_and_link_poses_and_velocities(device: str, sims: dict) -> None:
    sim = sim_for(sims, device)
    arts = fv.NewtonArticulationView(["/World/envs/env_3/Robot", "/World/envs/env_1/Robot"], **sim.engine())
    body_q, body_qd = sim.state.body_q.numpy(), sim.state.body_qd.numpy()
    names = ["base"] + [f"link{k}" for k in range(DOFS)]
    idx = np.array([[body_index(sim.model, f"{robot_paths(e)}/{n}") for n in names] for e in (3, 1)])
    pos, quat = arts.get_link_poses()
    assert pos.shape == (2, DOFS + 1)
    np.testing.assert_array_equal(pos.numpy(), body_q[idx][..., :3])
    np.testing.assert_allclose(quat.numpy(), canonical(body_q[idx][..., 3:]), atol=0)
    lin, ang = arts.get_link_velocities()
    np.testing.assert_array_equal(lin.numpy(), body_qd[idx][..., :3])
    np.testing.assert_array_equal(ang.numpy(), body_qd[idx][..., 3:])
    rpos, rquat = arts.get_root_poses()
    np.testing.assert_array_equal(rpos.numpy(), body_q[idx[:, 0], :3])
    np.testing.assert_array_equal(rquat.numpy(), canonical(body_q[idx[:, 0], 3:]))
    rlin, rang = arts.get_root_velocities([1])
    np.testing.assert_array_equal(rlin.numpy(), body_qd[idx[1:, 0], :3])
    np.testing.assert_array_equal(rang.numpy(), body_qd[idx[1:, 0], 3:])
    assert np.abs(body_qd[idx]).max() > 1e-3


# ---------------------------------------------------------------- rigid bodies


def test_rigid_bodies_match_newton_arrays(device: str, sims: dict) -> None:
    sim = sim_for(sims, device)
    paths = ["/World/Ball", "/World/envs/env_2/Robot/link1", "/World/envs/env_0/Robot/base"]
    bodies = fv.make_rigid_body_view(fv.PhysicsViewCfg(prim_path=paths, backend="newton"), **sim.engine())
    assert bodies.prim_paths == tuple(paths)
    idx = [body_index(sim.model, p) for p in paths]
    body_q, body_qd = sim.state.body_q.numpy(), sim.state.body_qd.numpy()
    pos, quat = bodies.get_world_poses()
    np.testing.assert_array_equal(pos.numpy(), body_q[idx, :3])
    np.testing.assert_array_equal(quat.numpy(), canonical(body_q[idx, 3:]))
    lin, ang = bodies.get_velocities()
    np.testing.assert_array_equal(lin.numpy(), body_qd[idx, :3])
    np.testing.assert_array_equal(ang.numpy(), body_qd[idx, 3:])
    model = sim.model
    np.testing.assert_array_equal(bodies.get_masses().numpy(), model.body_mass.numpy()[idx])
    np.testing.assert_array_equal(bodies.get_inv_masses().numpy(), model.body_inv_mass.numpy()[idx])
    np.testing.assert_array_equal(bodies.get_inertias().numpy(), model.body_inertia.numpy()[idx])
    np.testing.assert_array_equal(bodies.get_coms().numpy(), model.body_com.numpy()[idx])
    with pytest.raises(NotImplementedError, match="body_qdd"):
        bodies.get_accelerations()


def test_accelerations_are_body_qdd(device: str) -> None:
    sim = Sim(device, envs=2)
    qdd = np.random.default_rng(1).normal(size=(sim.model.body_count, 6)).astype(np.float32)
    sim.state.body_qdd = wp.array(qdd, dtype=wp.spatial_vectorf, device=device)
    bodies = fv.NewtonRigidBodyView("/World/envs/env_.*/Robot/link2", **sim.engine())
    lin, ang = bodies.get_accelerations()
    idx = [body_index(sim.model, f"{robot_paths(e)}/link2") for e in range(2)]
    np.testing.assert_array_equal(lin.numpy(), qdd[idx, :3])
    np.testing.assert_array_equal(ang.numpy(), qdd[idx, 3:])


# ---------------------------------------------------------------- analytic motion


def test_free_fall_velocity_is_g_t(device: str) -> None:
    sim = Sim(device, envs=1, still=True)
    bodies = fv.NewtonRigidBodyView("/World/Ball", **sim.engine())
    steps = 30
    sim.step(steps)
    lin, ang = bodies.get_velocities()
    np.testing.assert_allclose(lin.numpy()[0], [0.0, 0.0, -G * steps * DT], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ang.numpy()[0], 0.0, atol=1e-3)  # the solver spins it a little on CUDA
    pos, _ = bodies.get_world_poses()
    assert pos.numpy()[0, 2] < 3.0 - 0.5 * G * (steps * DT) ** 2 * 0.9


def pendulum(device: str, mass: float, length: float, theta0: float):
    """A point-like bob on a massless rod, hinged at the origin about y, released from rest at ``theta0``."""
    b = newton.ModelBuilder()
    link = b.add_link(mass=mass, com=wp.vec3(0.0, 0.0, -length), inertia=wp.mat33(np.eye(3) * 1e-6),
                      label="/World/Pendulum/bob")  # fmt: skip
    j = b.add_joint_revolute(-1, link, axis=(0.0, 1.0, 0.0), label="/World/Pendulum/hinge")
    b.add_articulation([j], label="/World/Pendulum")
    model = b.finalize(device=device)
    state = model.state()
    q = state.joint_q.numpy()
    q[0] = theta0
    state.joint_q.assign(q)
    newton.eval_fk(model, state.joint_q, state.joint_qd, state)
    return model, state


def test_pendulum_released_from_rest_keeps_its_energy(device: str) -> None:
    mass, length, theta0 = 1.5, 0.8, 1.0
    model, state = pendulum(device, mass, length, theta0)
    holder = {"state": state}
    nxt, control = model.state(), model.control()
    arts = fv.NewtonArticulationView("/World/Pendulum", model=model, state=lambda: holder["state"], control=control)
    bob = fv.NewtonRigidBodyView("/World/Pendulum/bob", model=model, state=lambda: holder["state"])
    assert arts.is_fixed_base and arts.dof_types == ("rotation",)
    solver = newton.solvers.SolverFeatherstone(model)
    energies, swing = [], []
    for _ in range(60):
        holder["state"].clear_forces()
        solver.step(holder["state"], nxt, control, None, 1.0 / 600.0)
        holder["state"], nxt = nxt, holder["state"]
        js = arts.joint_state_reader().read()
        theta, omega = float(js.positions.numpy()[0, 0]), float(js.velocities.numpy()[0, 0])
        height = -length * math.cos(theta)  # the bob's height below the hinge
        energies.append(mass * G * height + 0.5 * (mass * length**2 + 1e-6) * omega**2)
        swing.append(theta)
        lin, _ = bob.get_velocities()  # the bob's COM speed is |omega| * length
        assert abs(float(np.linalg.norm(lin.numpy()[0])) - abs(omega) * length) < 1e-3 + 1e-3 * abs(omega)
    e0 = -mass * G * length * math.cos(theta0)
    assert swing[-1] < theta0 - 0.05  # it swung
    assert max(abs(e - e0) for e in energies) < 1e-2 * abs(e0)


def test_prismatic_joint_at_constant_velocity(device: str) -> None:
    b = newton.ModelBuilder()
    link = b.add_link(mass=1.0, inertia=wp.mat33(np.eye(3) * 0.01), label="/World/Slider/carriage")
    j = b.add_joint_prismatic(-1, link, axis=(1.0, 0.0, 0.0), label="/World/Slider/rail")  # horizontal: no gravity
    b.add_articulation([j], label="/World/Slider")
    model = b.finalize(device=device)
    state, nxt, control = model.state(), model.state(), model.control()
    state.joint_qd.assign(np.array([0.75], dtype=np.float32))
    holder = {"state": state}
    reader = fv.NewtonArticulationView("/World/Slider", model=model, state=lambda: holder["state"],
                                       control=control).joint_state_reader()  # fmt: skip
    solver = newton.solvers.SolverFeatherstone(model)
    steps, dt = 40, 1.0 / 100.0
    for _ in range(steps):
        solver.step(holder["state"], nxt, control, None, dt)
        holder["state"], nxt = nxt, holder["state"]
    js = reader.read()
    assert js.names == ("rail",)
    np.testing.assert_allclose(js.positions.numpy()[0, 0], 0.75 * steps * dt, rtol=1e-4)
    np.testing.assert_allclose(js.velocities.numpy()[0, 0], 0.75, rtol=1e-5)


# ---------------------------------------------------------------- errors and lifetime


def test_bad_input_raises_clearly(device: str, sims: dict) -> None:
    sim = sim_for(sims, device)
    arts = fv.NewtonArticulationView("/World/envs/env_.*/Robot", **sim.engine())
    with pytest.raises(IndexError, match="index 9"):
        arts.get_dof_positions([0, 9])
    with pytest.raises(IndexError, match="index -1"):
        arts.get_root_poses(np.array([-1]))
    for dtype in (wp.int32, wp.int64):  # device indices: found by the kernel
        bad = wp.array([0, 12], dtype=dtype, device=device)
        with pytest.raises(IndexError, match="index 12"):
            arts.get_dof_positions(bad)  # the CPU raises here
            arts.check()  # CUDA: the next call or check() raises
    with pytest.raises(TypeError, match="indices and mask"):
        arts.get_dof_positions([0], mask=np.ones(ENVS, dtype=bool))
    with pytest.raises(ValueError, match=r"no prim|matches no"):
        fv.NewtonArticulationView("/World/envs/env_.*/Robt", **sim.engine())
    with pytest.raises(ValueError, match="not one of the Newton articulations"):
        fv.NewtonArticulationView("/World/envs", **sim.engine())
    with pytest.raises(ValueError, match="differs from"):
        b = newton.ModelBuilder()
        add_robot(b, 0, True)
        add_robot(b, 1, True, dofs=2)
        m = b.finalize(device=device)
        fv.NewtonArticulationView("/World/envs/env_.*/Robot", model=m, state=m.state())
    with pytest.raises(NotImplementedError, match="control"):
        fv.NewtonArticulationView("/World/envs/env_0/Robot", model=sim.model, state=sim.state).get_dof_efforts()
    with pytest.raises(ValueError, match="unknown engine"):
        fv.make_articulation_view({"prim_path": "/World/envs/env_0/Robot", "backend": "bullet"})
    with pytest.raises(ValueError, match="device"):
        fv.NewtonArticulationView("/World/envs/env_0/Robot", model=sim.model, state=sim.state,
                                  device="cuda:0" if device == "cpu" else "cpu")  # fmt: skip


def test_ball_joint_is_refused(device: str) -> None:
    b = newton.ModelBuilder()
    a = b.add_link(mass=1.0, inertia=wp.mat33(np.eye(3) * 0.01), label="/World/Doll/torso")  # a valid inertia: no
    c = b.add_link(mass=1.0, inertia=wp.mat33(np.eye(3) * 0.01), label="/World/Doll/head")  # NewtonWarning
    j0 = b.add_joint_free(a, label="/World/Doll/root")
    j1 = b.add_joint_ball(a, c, label="/World/Doll/neck")
    b.add_articulation([j0, j1], label="/World/Doll")
    m = b.finalize(device=device)
    with pytest.raises(ValueError, match=r"neck.*BALL"):
        fv.NewtonArticulationView("/World/Doll", model=m, state=m.state())


def test_rebuilt_model_makes_the_view_stale(device: str) -> None:
    holder = {"sim": Sim(device, envs=2)}
    sim = holder["sim"]
    arts = fv.NewtonArticulationView(
        "/World/envs/env_.*/Robot", model=lambda: holder["sim"].model, state=lambda: holder["sim"].state
    )
    arts.get_dof_positions()
    assert arts.is_current
    holder["sim"] = Sim(device, envs=2)  # the model finalised again (a reset of the simulation)
    assert not arts.is_current
    with pytest.raises(fv.StaleViewError, match="rebuilt"):
        arts.get_dof_positions()
    other = Sim(device, envs=3)
    bodies = fv.NewtonRigidBodyView("/World/Ball", model=sim.model, state=lambda: other.state)
    with pytest.raises(fv.StaleViewError, match="another"):
        bodies.get_velocities()
    arts.close()
    with pytest.raises(RuntimeError, match="closed"):
        arts.get_dof_positions()


@pytest.mark.cuda
def test_captured_joint_state_read_replays_fresh_data() -> None:
    if wp.get_cuda_device_count() == 0:
        pytest.skip("no CUDA device")
    sim = Sim("cuda:0", envs=3)
    reader = fv.NewtonArticulationView("/World/envs/env_.*/Robot", model=sim.model, state=sim.state,
                                       control=sim.control).joint_state_reader()  # fmt: skip
    reader.read()  # outside the capture: buffers and launches made
    with wp.ScopedCapture(device="cuda:0") as capture:
        out = reader.read()
    new_q = np.random.default_rng(3).normal(size=sim.state.joint_q.shape).astype(np.float32)
    sim.state.joint_q.assign(new_q)
    wp.capture_launch(capture.graph)
    wp.synchronize_device("cuda:0")
    qi = [dof_index(sim.model, f"{robot_paths(e)}/joint{k}")[0] for e in range(3) for k in range(DOFS)]
    np.testing.assert_array_equal(out.positions.numpy().ravel(), new_q[qi])

# SPDX-License-Identifier: Apache-2.0
"""The Newton views' engine handles: fresh reads after a reset, accelerations, efforts, and lifetime.

An Isaac Lab-style manager stands in for Isaac Lab 3's ``NewtonManager`` (same module name, same getters, a
``forward()`` that runs ``newton.eval_fk`` over the articulations a reset marked dirty, as Isaac Lab's does); the real
one is exercised by ``scripts/isaaclab-check``. Truth is Newton's own arrays after ``eval_fk`` on a copy of the state
(re-ordered by label), float64 composition of a camera's offset on its link, and analytic free fall.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import warp as wp
from pxr import Gf, Usd, UsdGeom, UsdPhysics

import frameview as fv

newton = pytest.importorskip("newton")

from newton_manager_fake import FakeNewtonManager  # noqa: E402
from test_physics_newton import Sim, body_index, canonical, robot_paths  # noqa: E402

ENVS = 4
RESET = [1, 3]
CAM_OFFSET = (0.0, 0.05, 0.1)


def getters(m: type[FakeNewtonManager]) -> dict[str, Any]:
    return {"model": m.get_model, "state": m.get_state_0, "control": m.get_control}


def objects(m: type[FakeNewtonManager]) -> dict[str, Any]:
    return {"model": m.sim.model, "state": m.sim.state, "control": m.sim.control}


def fk_truth(sim: Sim) -> tuple[np.ndarray, np.ndarray]:
    """body_q, body_qd after eval_fk of every articulation, on a copy of the state."""
    copy = sim.model.state()
    copy.joint_q.assign(sim.state.joint_q)
    copy.joint_qd.assign(sim.state.joint_qd)
    newton.eval_fk(sim.model, copy.joint_q, copy.joint_qd, copy)
    return copy.body_q.numpy().astype(np.float64), copy.body_qd.numpy().astype(np.float64)


def camera_stage(envs: int) -> Usd.Stage:
    """USD prims for the Newton links (labelled by path), a camera under each env's link2, offset CAM_OFFSET."""
    stage = Usd.Stage.CreateInMemory()
    for e in range(envs):
        link = UsdGeom.Xform.Define(stage, f"{robot_paths(e)}/link2")
        UsdPhysics.RigidBodyAPI.Apply(link.GetPrim())
        UsdGeom.Camera.Define(stage, f"{robot_paths(e)}/link2/Cam").AddTranslateOp().Set(Gf.Vec3d(*CAM_OFFSET))
    return stage


def _rotate(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    x, y, z, w = q
    u = np.array([x, y, z])
    return v + 2.0 * np.cross(u, np.cross(u, v) + w * v)


# ---------------------------------------------------------------- fresh on the reset step


@pytest.mark.parametrize("handles", ["getters", "objects"])
def test_reads_after_a_reset_are_fresh(newton_manager: type[FakeNewtonManager], device: str, handles: str) -> None:
    """After a reset wrote joint coordinates and marked kinematics pending, every Newton view (articulations, rigid
    bodies, the joint-state reader, a camera on a link) reads the poses forward kinematics gives, on exactly the
    reset rows too, without an argument: Isaac Lab's manager is recognised behind its getters or its model."""
    manager = newton_manager
    engine = getters(manager) if handles == "getters" else objects(manager)
    arts = fv.NewtonArticulationView("/World/envs/env_.*/Robot", **engine)
    links = fv.NewtonRigidBodyView("/World/envs/env_.*/Robot/link2", **engine)
    reader = arts.joint_state_reader()
    cams = fv.NewtonFrameView("/World/envs/env_.*/Robot/link2/Cam", stage=camera_stage(ENVS),
                              model=engine["model"], state=engine["state"])  # fmt: skip
    assert cams.forward_hook
    sim = manager.sim
    link_rows = [[body_index(sim.model, f"{robot_paths(e)}/{name}") for name in arts.link_names] for e in range(ENVS)]
    link2 = [body_index(sim.model, f"{robot_paths(e)}/link2") for e in range(ENVS)]
    for step in range(3):
        manager.reset_envs(RESET, seed=step)
        stale = sim.state.body_q.numpy().astype(np.float64)
        body_q, body_qd = fk_truth(sim)
        assert np.abs(stale[link2] - body_q[link2]).max() > 1e-3  # the reset left body_q stale: a real test
        pos, quat = arts.get_link_poses()
        np.testing.assert_allclose(pos.numpy(), body_q[link_rows][..., :3], atol=1e-5)
        np.testing.assert_allclose(canonical(quat.numpy()), canonical(body_q[link_rows][..., 3:]), atol=1e-5)
        lin, ang = links.get_velocities()
        np.testing.assert_allclose(lin.numpy(), body_qd[link2][:, :3], atol=1e-4)
        np.testing.assert_allclose(ang.numpy(), body_qd[link2][:, 3:], atol=1e-4)
        manager.reset_envs(RESET, seed=10 + step)
        cam_pos, _cam_quat = cams.get_world_poses()
        body_q, _ = fk_truth(sim)
        want = np.array([body_q[b, :3] + _rotate(body_q[b, 3:], np.array(CAM_OFFSET)) for b in link2])
        np.testing.assert_allclose(cam_pos.numpy(), want, atol=1e-5)
        manager.reset_envs(RESET, seed=20 + step)
        state = reader.read()
        np.testing.assert_array_equal(state.positions.numpy()[RESET], arts.get_dof_positions().numpy()[RESET])
        pos, _ = links.get_world_poses()
        body_q, _ = fk_truth(sim)
        np.testing.assert_allclose(pos.numpy(), body_q[link2][:, :3], atol=1e-5)
    assert manager.forward_calls >= 12


def test_a_forward_callable_runs_before_each_read(device: str) -> None:
    """Outside Isaac Lab, ``forward=`` is run before every read (here: eval_fk of the whole model)."""
    sim = Sim(device, envs=2)
    calls = []

    def forward() -> None:
        calls.append(1)
        newton.eval_fk(sim.model, sim.state.joint_q, sim.state.joint_qd, sim.state)

    arts = fv.NewtonArticulationView("/World/envs/env_.*/Robot", model=sim.model, state=lambda: sim.state,
                                     forward=forward)  # fmt: skip
    q = sim.state.joint_q.numpy()
    q[7 + 0] += 0.5  # env 0's first revolute joint (after the free joint's 7 coordinates)
    sim.state.joint_q.assign(q)
    pos, _ = arts.get_link_poses()
    body_q, _ = fk_truth(sim)
    link = body_index(sim.model, f"{robot_paths(0)}/link3")
    np.testing.assert_allclose(pos.numpy()[0, -1], body_q[link, :3], atol=1e-5)
    assert len(calls) == 1
    with pytest.raises(TypeError, match="forward"):
        fv.NewtonArticulationView("/World/envs/env_.*/Robot", model=sim.model, state=sim.state, forward=3)


def test_plain_objects_without_a_manager_read_the_arrays_as_they_are(device: str) -> None:
    """Without Isaac Lab and without ``forward=``, a view reads ``body_q`` as it is (documented): the hook is absent."""
    sim = Sim(device, envs=2)
    view = fv.NewtonRigidBodyView("/World/envs/env_.*/Robot/link1", model=sim.model, state=sim.state)
    idx = [body_index(sim.model, f"{robot_paths(e)}/link1") for e in range(2)]
    np.testing.assert_array_equal(view.get_world_poses()[0].numpy(), sim.state.body_q.numpy()[idx, :3])


# ---------------------------------------------------------------- lifetime


def test_hard_reset_makes_every_view_stale(newton_manager: type[FakeNewtonManager], device: str) -> None:
    """A new model behind the manager (a hard sim.reset()) makes views built from its getters and from its objects
    raise StaleViewError; is_current says so first."""
    manager = newton_manager
    by_getters = fv.NewtonArticulationView("/World/envs/env_.*/Robot", **getters(manager))
    by_objects = fv.NewtonArticulationView("/World/envs/env_.*/Robot", **objects(manager))
    frames = fv.NewtonFrameView("/World/envs/env_.*/Robot/link2/Cam", stage=camera_stage(ENVS),
                                **{k: v for k, v in objects(manager).items() if k != "control"})  # fmt: skip
    for view in (by_getters, by_objects):
        view.get_dof_positions()
        assert view.is_current
    frames.get_world_poses()
    manager.sim = Sim(device, envs=ENVS)  # re-finalised
    for view in (by_getters, by_objects):
        assert not view.is_current
        with pytest.raises(fv.StaleViewError, match=r"rebuilt|another newton\.Model"):
            view.get_dof_positions()
    with pytest.raises(fv.StaleViewError, match=r"another newton\.Model"):
        frames.get_world_poses()


def test_closed_simulation_and_physics_not_ready(newton_manager: type[FakeNewtonManager], device: str) -> None:
    """Getters returning None: a view built then says physics is not ready; a view whose simulation closed raises
    StaleViewError saying the getter returned None (not AttributeError, not 'another model')."""
    manager = newton_manager
    view = fv.NewtonArticulationView("/World/envs/env_.*/Robot", **getters(manager))
    mixed = fv.NewtonRigidBodyView("/World/envs/env_.*/Robot/link1", model=manager.sim.model,
                                   state=manager.get_state_0)  # fmt: skip
    manager.sim = None  # env.close()
    with pytest.raises(fv.StaleViewError, match="returned None"):
        view.get_dof_positions()
    with pytest.raises(fv.StaleViewError, match=r"no model|returned None"):
        mixed.get_world_poses()
    with pytest.raises(RuntimeError, match="physics is ready"):
        fv.NewtonArticulationView("/World/envs/env_.*/Robot", **getters(manager))
    with pytest.raises(RuntimeError, match="physics is ready"):
        fv.NewtonFrameView("/World/envs/env_.*/Robot/link2/Cam", stage=camera_stage(ENVS), model=manager.get_model,
                           state=manager.get_state_0)  # fmt: skip


# ---------------------------------------------------------------- efforts


def test_reader_without_control_reads_positions_and_velocities(device: str) -> None:
    """A JointStateReader made without control= reads positions and velocities (efforts None); asking the view for
    efforts raises and says how to get them."""
    sim = Sim(device, envs=3)
    sim.step(2)
    arts = fv.NewtonArticulationView("/World/envs/env_.*/Robot", model=sim.model, state=sim.state)
    assert not arts.has_efforts
    state = arts.joint_state_reader().read()
    assert state.efforts is None
    np.testing.assert_array_equal(state.positions.numpy(), arts.get_dof_positions().numpy())
    np.testing.assert_array_equal(state.velocities.numpy(), arts.get_dof_velocities().numpy())
    with pytest.raises(NotImplementedError, match="control="):
        arts.get_dof_efforts()
    with_control = fv.NewtonArticulationView("/World/envs/env_.*/Robot", **sim.engine())
    assert with_control.has_efforts and with_control.joint_state_reader().read().efforts is not None


# ---------------------------------------------------------------- accelerations


def _observables_supported() -> bool:
    return hasattr(getattr(newton.solvers, "SolverBase", object), "observables") and hasattr(
        newton.solvers, "SolverKamino"
    )


@pytest.mark.slow
def test_accelerations_from_the_solver_observable(device: str) -> None:
    """newton >= 1.7: the solver's BODY_QDD observable, handed to the view (the container or a callable), gives a
    free-falling ball g and every body the observable's row."""
    if not _observables_supported():
        pytest.skip(f"newton {newton.__version__} has no solver observables (newton < 1.7: state.body_qdd)")
    sim = Sim(device, envs=2, still=True)
    solver = newton.solvers.SolverKamino(sim.model)
    obs = solver.observables({"body_qdd"})
    for _ in range(3):
        sim.state.clear_forces()
        solver.step(sim.state, sim.next, sim.control, None, 1.0 / 120.0, observables=obs)
        sim.state, sim.next = sim.next, sim.state
    ball = fv.NewtonRigidBodyView("/World/Ball", **sim.engine(), accelerations=obs)
    lin, ang = ball.get_accelerations()
    np.testing.assert_allclose(lin.numpy()[0], [0.0, 0.0, -9.81], atol=1e-4)
    np.testing.assert_allclose(ang.numpy()[0], 0.0, atol=1e-4)
    links = fv.NewtonRigidBodyView("/World/envs/env_.*/Robot/link2", **sim.engine(), accelerations=lambda: obs)
    idx = [body_index(sim.model, f"{robot_paths(e)}/link2") for e in range(2)]
    lin, ang = links.get_accelerations()
    qdd = obs.body_qdd.numpy()
    np.testing.assert_array_equal(lin.numpy(), qdd[idx, :3])
    np.testing.assert_array_equal(ang.numpy(), qdd[idx, 3:])
    plain = fv.NewtonRigidBodyView("/World/Ball", **sim.engine())
    with pytest.raises(NotImplementedError, match=r"solver\.observables"):
        plain.get_accelerations()


def test_accelerations_from_an_array_or_the_state(device: str) -> None:
    """A (body_count,) spatial_vectorf array (or state.body_qdd, newton < 1.7's place) is read row by row; a wrong
    array is refused naming the argument."""
    sim = Sim(device, envs=2)
    qdd = np.random.default_rng(1).normal(size=(sim.model.body_count, 6)).astype(np.float32)
    arr = wp.array(qdd, dtype=wp.spatial_vectorf, device=device)
    idx = [body_index(sim.model, f"{robot_paths(e)}/link2") for e in range(2)]
    for accelerations in (arr, lambda: arr):
        view = fv.NewtonRigidBodyView("/World/envs/env_.*/Robot/link2", **sim.engine(), accelerations=accelerations)
        lin, ang = view.get_accelerations()
        np.testing.assert_array_equal(lin.numpy(), qdd[idx, :3])
        np.testing.assert_array_equal(ang.numpy(), qdd[idx, 3:])
    sim.state.body_qdd = arr
    view = fv.NewtonRigidBodyView("/World/envs/env_.*/Robot/link2", **sim.engine())
    np.testing.assert_array_equal(view.get_accelerations()[0].numpy(), qdd[idx, :3])
    bad = fv.NewtonRigidBodyView("/World/Ball", **sim.engine(), accelerations=wp.zeros(3, dtype=wp.vec3f,
                                                                                        device=device))  # fmt: skip
    with pytest.raises(TypeError, match="accelerations"):
        bad.get_accelerations()


@pytest.mark.slow
def test_accelerations_from_the_state_on_older_newton(device: str) -> None:
    """newton < 1.7 (Isaac Lab 3.0's pin): ``model.request_state_attributes("body_qdd")`` and MuJoCo Warp fill
    ``state.body_qdd``, which the view reads without an argument: a free-falling ball accelerates at g."""
    if _observables_supported():
        pytest.skip(f"newton {newton.__version__} computes accelerations as a solver observable (tested above)")
    pytest.importorskip("mujoco_warp", reason="MuJoCo Warp fills state.body_qdd on newton < 1.7")
    builder = newton.ModelBuilder()
    ball = builder.add_body(xform=wp.transform((0.0, 0.0, 3.0), wp.quat_identity()), mass=1.0, label="/World/Ball")
    builder.add_shape_sphere(ball, radius=0.1)
    model = builder.finalize(device=device)
    model.request_state_attributes("body_qdd")
    state, next_state, control = model.state(), model.state(), model.control()
    solver = newton.solvers.SolverMuJoCo(model)
    for _ in range(3):
        solver.step(state, next_state, control, None, 1.0 / 120.0)
        state, next_state = next_state, state
    view = fv.NewtonRigidBodyView("/World/Ball", model=model, state=lambda: state)
    lin, _ang = view.get_accelerations()
    np.testing.assert_allclose(lin.numpy()[0], [0.0, 0.0, -9.81], atol=1e-3)

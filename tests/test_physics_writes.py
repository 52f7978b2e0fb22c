# SPDX-License-Identifier: Apache-2.0
"""Reset writes of the Newton articulation view: DOF positions and velocities, root poses and velocities, for
indices or a mask, followed by forward kinematics of exactly the articulations written.

Truth is Newton's own ``eval_fk`` on a copy of the state (the joint coordinates written, set independently with
NumPy from the engine's joint layout), and the written values read back from the engine's arrays by label.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import warp as wp

import frameview as fv

newton = pytest.importorskip("newton")

from newton_manager_fake import FakeNewtonManager  # noqa: E402
from test_physics_newton import Sim, body_index, canonical, dof_index, robot_paths  # noqa: E402

ENVS = 6
ROWS = [4, 1]


def _fk_copy(sim: Sim) -> Any:
    copy = sim.model.state()
    copy.joint_q.assign(sim.state.joint_q)
    copy.joint_qd.assign(sim.state.joint_qd)
    newton.eval_fk(sim.model, copy.joint_q, copy.joint_qd, copy)
    return copy


def _link_rows(sim: Sim, arts: fv.ArticulationView) -> list[list[int]]:
    return [[body_index(sim.model, f"{robot_paths(e)}/{n}") for n in arts.link_names] for e in range(arts.count)]


def _inputs(kind: str, values: np.ndarray, rows: list[int], device: str) -> tuple[Any, dict]:
    """(data, rows keyword) in a user's input kind."""
    if kind == "numpy":
        return values, {"indices": np.array(rows, dtype=np.int64)}
    if kind == "list":
        return values.tolist(), {"indices": list(rows)}
    if kind == "warp":
        return wp.array(values, dtype=wp.float32, device=device), {"indices": wp.array(rows, dtype=wp.int32,
                                                                                        device=device)}  # fmt: skip
    if kind == "mask":
        full = np.zeros((ENVS, values.shape[1]), np.float32)
        full[rows] = values
        mask = np.zeros(ENVS, dtype=bool)
        mask[rows] = True
        return wp.array(full, dtype=wp.float32, device=device), {"mask": wp.array(mask, dtype=wp.bool, device=device)}
    torch = pytest.importorskip("torch")
    tdev = "cpu" if device == "cpu" else "cuda:0"
    wide = torch.zeros((values.shape[0], values.shape[1] + 2), dtype=torch.float32, device=tdev)
    wide[:, 1:-1] = torch.as_tensor(values, device=tdev)
    return wide[:, 1:-1], {"indices": torch.tensor(rows, dtype=torch.int64, device=tdev)}  # a column slice


@pytest.mark.parametrize("kind", ["numpy", "list", "warp", "torch", "mask"])
def test_dof_and_root_writes_then_forward_kinematics(device: str, kind: str) -> None:
    """Every reset write lands in the engine's joint arrays of exactly the rows written, and the links of those
    articulations are where eval_fk puts them; the other rows are untouched."""
    sim = Sim(device, envs=ENVS)
    sim.step(4)
    arts = fv.NewtonArticulationView("/World/envs/env_.*/Robot", **sim.engine())
    rng = np.random.default_rng(3)
    before_q = sim.state.joint_q.numpy().copy()
    before_body = sim.state.body_q.numpy().copy()
    q = rng.uniform(-0.8, 0.8, (2, arts.dof_count)).astype(np.float32)
    qd = rng.uniform(-1.0, 1.0, (2, arts.dof_count)).astype(np.float32)
    pos = rng.uniform(-2.0, 2.0, (2, 3)).astype(np.float32)
    quat = rng.normal(size=(2, 4)).astype(np.float32)
    lin = rng.normal(size=(2, 3)).astype(np.float32)
    ang = rng.normal(size=(2, 3)).astype(np.float32)
    for values, call in ((q, arts.set_dof_positions), (qd, arts.set_dof_velocities)):
        data, rows = _inputs(kind, values, ROWS, device)
        call(data, **rows)
    data, rows = _inputs(kind, pos, ROWS, device)
    data_q, _ = _inputs(kind, quat, ROWS, device)
    arts.set_root_poses(data, data_q, **rows)
    data, rows = _inputs(kind, lin, ROWS, device)
    data_a, _ = _inputs(kind, ang, ROWS, device)
    arts.set_root_velocities(data, data_a, **rows)
    arts.check()
    # the joint arrays, by label
    joint_q, joint_qd = sim.state.joint_q.numpy(), sim.state.joint_qd.numpy()
    for k, env in enumerate(ROWS):
        for c, name in enumerate(arts.dof_names):
            qi, di = dof_index(sim.model, f"{robot_paths(env)}/{name}")
            assert joint_q[qi] == pytest.approx(q[k, c], abs=1e-7)
            assert joint_qd[di] == pytest.approx(qd[k, c], abs=1e-7)
    untouched = [e for e in range(ENVS) if e not in ROWS]
    starts = sim.model.articulation_start.numpy()
    q_start = sim.model.joint_q_start.numpy()
    for env in untouched:
        span = slice(q_start[starts[env]], q_start[starts[env + 1]])
        np.testing.assert_array_equal(joint_q[span], before_q[span])
    # forward kinematics of exactly those articulations: the links where eval_fk puts them
    truth = _fk_copy(sim)
    links = _link_rows(sim, arts)
    got = sim.state.body_q.numpy()
    for env in range(ENVS):
        want = truth.body_q.numpy()[links[env]] if env in ROWS else before_body[links[env]]
        np.testing.assert_allclose(got[links[env]], want, atol=1e-6, err_msg=f"env {env}")
    root_pos, root_quat = arts.get_root_poses(ROWS)
    np.testing.assert_allclose(root_pos.numpy(), pos, atol=1e-5)
    np.testing.assert_allclose(canonical(root_quat.numpy()),
                               canonical(quat / np.linalg.norm(quat, axis=1, keepdims=True)), atol=1e-5)  # fmt: skip
    root_lin, root_ang = arts.get_root_velocities(ROWS)
    np.testing.assert_allclose(root_lin.numpy(), lin, atol=1e-5)
    np.testing.assert_allclose(root_ang.numpy(), ang, atol=1e-5)


def test_none_keeps_a_root_component(device: str) -> None:
    """set_root_poses(positions, None) keeps each root's world orientation; (None, orientations) its position."""
    sim = Sim(device, envs=3)
    sim.step(3)
    arts = fv.NewtonArticulationView("/World/envs/env_.*/Robot", **sim.engine())
    _p0, q0 = (a.numpy().copy() for a in arts.get_root_poses())
    arts.set_root_poses(np.full((3, 3), 0.5, np.float32))
    p1, q1 = (a.numpy().copy() for a in arts.get_root_poses())
    np.testing.assert_allclose(p1, 0.5, atol=1e-6)
    np.testing.assert_allclose(canonical(q1), canonical(q0), atol=1e-6)
    arts.set_root_poses(None, np.array([[0.0, 0.0, 0.6, 0.8]] * 3, np.float32))
    p2, q2 = arts.get_root_poses()
    np.testing.assert_allclose(p2.numpy(), p1, atol=1e-6)
    np.testing.assert_allclose(canonical(q2.numpy()), [[0.0, 0.0, 0.6, 0.8]] * 3, atol=1e-6)


def test_bad_writes_raise_and_write_nothing(device: str) -> None:
    """Out-of-range, 64-bit aliasing and repeated indices, non-finite values, zero quaternions, wrong shapes and a
    fixed base: a clear error and not one value written."""
    sim = Sim(device, envs=4)
    sim.step(2)
    arts = fv.NewtonArticulationView("/World/envs/env_.*/Robot", **sim.engine())
    q = np.zeros((2, arts.dof_count), np.float32)
    before = (sim.state.joint_q.numpy().copy(), sim.state.joint_qd.numpy().copy())
    cases = [
        (IndexError, "index 4", lambda: arts.set_dof_positions(q, indices=[0, 4])),
        (IndexError, "4294967297", lambda: arts.set_dof_positions(
            q, indices=wp.array([0, 2**32 + 1], dtype=wp.int64, device=device))),
        (ValueError, "appears", lambda: arts.set_dof_positions(
            q, indices=wp.array([1, 1], dtype=wp.int32, device=device))),
        (ValueError, "appears", lambda: arts.set_dof_velocities(q, indices=[2, 2])),
        (ValueError, "non-finite", lambda: arts.set_dof_positions(
            wp.array(np.full((2, arts.dof_count), np.inf, np.float32), dtype=wp.float32, device=device),
            indices=[0, 1])),
        (ValueError, "zero", lambda: arts.set_root_poses(None, np.zeros((2, 4), np.float32), indices=[0, 1])),
        (ValueError, "zero", lambda: arts.set_root_poses(
            None, wp.zeros((2, 4), dtype=wp.float32, device=device), indices=[0, 1])),
        (ValueError, "shape", lambda: arts.set_dof_positions(np.zeros((2, 3), np.float32), indices=[0, 1])),
    ]  # fmt: skip
    for exc, match, call in cases:
        with pytest.raises(exc, match=match):
            call()
            arts.check()
        np.testing.assert_array_equal(sim.state.joint_q.numpy(), before[0])
        np.testing.assert_array_equal(sim.state.joint_qd.numpy(), before[1])
    fixed = Sim(device, floating=False, envs=2)
    fixed_arts = fv.NewtonArticulationView("/World/envs/env_.*/Robot", **fixed.engine())
    with pytest.raises(ValueError, match="fixed base"):
        fixed_arts.set_root_poses(np.zeros((2, 3), np.float32))


def test_under_isaaclab_the_reset_is_left_to_its_manager(newton_manager: type[FakeNewtonManager], device: str) -> None:
    """With Isaac Lab's manager behind the handles, a write marks the articulations (and worlds) in its reset masks
    and kinematics pending, as Isaac Lab's own writes do; the next read of any view runs its forward()."""
    manager = newton_manager
    sim = manager.sim
    arts = fv.NewtonArticulationView("/World/envs/env_.*/Robot", model=manager.get_model, state=manager.get_state_0,
                                     control=manager.get_control)  # fmt: skip
    q = np.full((1, arts.dof_count), 0.3, np.float32)
    before = sim.state.body_q.numpy().copy()
    arts.set_dof_positions(q, indices=[2])
    assert manager.kinematics_dirty
    assert manager._fk_reset_mask.numpy().tolist() == [False, False, True, False, False]
    np.testing.assert_array_equal(sim.state.body_q.numpy(), before)  # left to the manager
    pos, _ = arts.get_link_poses([2])
    assert not manager.kinematics_dirty
    truth = _fk_copy(sim)
    np.testing.assert_allclose(pos.numpy()[0], truth.body_q.numpy()[_link_rows(sim, arts)[2]][:, :3], atol=1e-6)


def test_dof_state_writes_both_with_one_forward_kinematics(device: str) -> None:
    """set_dof_state(positions, velocities) lands both, the links where eval_fk puts them."""
    sim = Sim(device, envs=4)
    sim.step(2)
    arts = fv.NewtonArticulationView("/World/envs/env_.*/Robot", **sim.engine())
    rng = np.random.default_rng(9)
    q = rng.uniform(-0.5, 0.5, (2, arts.dof_count)).astype(np.float32)
    qd = rng.uniform(-1.0, 1.0, (2, arts.dof_count)).astype(np.float32)
    ids = wp.array([3, 0], dtype=wp.int64, device=device)
    arts.set_dof_state(q, qd, indices=ids)
    arts.check()
    np.testing.assert_array_equal(arts.get_dof_positions([3, 0]).numpy(), q)
    np.testing.assert_array_equal(arts.get_dof_velocities([3, 0]).numpy(), qd)
    truth = _fk_copy(sim)
    links = _link_rows(sim, arts)
    np.testing.assert_allclose(sim.state.body_q.numpy()[links[3]], truth.body_q.numpy()[links[3]], atol=1e-6)
    np.testing.assert_allclose(sim.state.body_qd.numpy()[links[0]], truth.body_qd.numpy()[links[0]], atol=1e-5)

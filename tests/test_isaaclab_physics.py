# SPDX-License-Identifier: Apache-2.0
"""frameview.isaaclab's physics views (Isaac Lab's terms) over the Isaac Lab NewtonManager stand-in.

Truth: Newton's own arrays re-ordered by label (the engine's quaternion sign kept), the stand-in's simulation replaced
for a hard reset. The real Isaac Lab runs through scripts/isaaclab-check.
"""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest
import warp as wp

pytest.importorskip("newton")

from newton_manager_fake import FakeNewtonManager
from test_physics_newton import Sim, body_index, robot_paths

import frameview.isaaclab as fvi


class _ProxyArray:
    def __init__(self, array: wp.array) -> None:
        self.warp = array


@pytest.fixture
def isaaclab(monkeypatch: pytest.MonkeyPatch, newton_manager: type[FakeNewtonManager]) -> type[FakeNewtonManager]:
    module = types.ModuleType("isaaclab.utils.warp")
    module.ProxyArray = _ProxyArray  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "isaaclab.utils.warp", module)
    return newton_manager


def test_names_patterns_outputs_and_sign(isaaclab: type[FakeNewtonManager], device: str) -> None:
    """{ENV_REGEX_NS} patterns, Isaac Lab's names, ProxyArray outputs made once per buffer, and quaternions with the
    sign the engine holds (frameview's own views: w >= 0)."""
    sim = isaaclab.sim
    q = sim.state.body_q.numpy()
    q[:, 3:] *= -1.0  # the same rotations, every w negated: the engine's sign must come through
    sim.state.body_q.assign(q)
    robots = fvi.ArticulationView("{ENV_REGEX_NS}/Robot")
    plain = robots.view
    assert robots.joint_names == list(plain.dof_names) and robots.body_names == list(plain.link_names)
    assert robots.num_joints == plain.dof_count and robots.num_bodies == plain.link_count
    assert robots.num_instances == 4 and robots.quat_sign == "engine"
    pos, quat = robots.get_link_poses()
    assert isinstance(pos, _ProxyArray) and isinstance(quat, _ProxyArray)
    again = robots.get_link_poses()
    assert again[0] is pos and again[1] is quat  # one proxy per buffer: no per-call wrapping
    links = [[body_index(sim.model, f"{robot_paths(e)}/{n}") for n in robots.body_names] for e in range(4)]
    np.testing.assert_array_equal(quat.warp.numpy(), q[links][..., 3:])
    np.testing.assert_array_equal(pos.warp.numpy(), q[links][..., :3])
    positive = fvi.ArticulationView("{ENV_REGEX_NS}/Robot", quat_sign="positive_w")
    np.testing.assert_array_equal(positive.get_link_poses()[1].warp.numpy(), -q[links][..., 3:])
    state = robots.joint_state_reader().read()
    assert isinstance(state.positions, _ProxyArray) and state.names == plain.dof_names
    bodies = fvi.RigidBodyView("{ENV_REGEX_NS}/Robot/link2")
    assert bodies.body_names == ["link2"] * 4


def test_rebuilt_after_a_hard_reset(isaaclab: type[FakeNewtonManager], device: str) -> None:
    """A new model behind the manager (a hard sim.reset()) is read by the next call, through a view built again."""
    robots = fvi.ArticulationView("{ENV_REGEX_NS}/Robot")
    first = robots.view
    robots.get_dof_positions()
    isaaclab.sim = new = Sim(device, envs=4)
    qd = np.random.default_rng(5).normal(size=new.state.joint_qd.shape).astype(np.float32)
    new.state.joint_qd.assign(qd)
    got = robots.get_dof_velocities().warp.numpy()
    assert robots.view is not first and first.is_closed
    q0 = [int(new.model.joint_qd_start.numpy()[list(new.model.joint_label).index(f"{robot_paths(e)}/joint0")])
          for e in range(4)]  # fmt: skip
    np.testing.assert_array_equal(got[:, 0], qd[q0])


def test_not_ready_and_unmatched(isaaclab: type[FakeNewtonManager], device: str) -> None:
    """Before physics is ready: a RuntimeError saying when to build; a pattern matching no Newton label: a ValueError
    that speaks of Newton's labels and the env config."""
    with pytest.raises(ValueError, match="env config"):
        fvi.ArticulationView("{ENV_REGEX_NS}/Robt")
    isaaclab.sim = None
    with pytest.raises(RuntimeError, match="physics is ready"):
        fvi.ArticulationView("{ENV_REGEX_NS}/Robot")


def test_expand_env_ns() -> None:
    """{ENV_REGEX_NS} in a path or a list of paths."""
    from frameview.isaaclab.physics import expand_env_ns

    assert expand_env_ns("{ENV_REGEX_NS}/Robot") == "/World/envs/env_.*/Robot"
    assert expand_env_ns(["{ENV_REGEX_NS}/A", "/B"], "/Envs/e_.*") == ["/Envs/e_.*/A", "/B"]

# SPDX-License-Identifier: Apache-2.0
"""A stand-in for Isaac Lab 3's ``NewtonManager`` as the Newton views see it (same module name, class-level getters,
reset masks and ``forward()`` running ``newton.eval_fk`` over the articulations marked dirty, as Isaac Lab's does);
the ``newton_manager`` fixture (tests/conftest.py) installs it over a small simulation."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np


class FakeNewtonManager:
    """Isaac Lab 3's ``NewtonManager`` as the views see it: class-level getters and ``forward()``."""

    sim: ClassVar[Any] = None
    kinematics_dirty: ClassVar[bool] = False
    _fk_reset_mask: ClassVar[Any] = None  # per articulation, as Isaac Lab's
    _world_reset_mask: ClassVar[Any] = None  # per world, plus one slot for the global world
    forward_calls: ClassVar[int] = 0

    @classmethod
    def get_model(cls) -> Any:
        return None if cls.sim is None else cls.sim.model

    @classmethod
    def get_state_0(cls) -> Any:
        return None if cls.sim is None else cls.sim.state

    @classmethod
    def get_control(cls) -> Any:
        return None if cls.sim is None else cls.sim.control

    @classmethod
    def forward(cls) -> None:
        cls.forward_calls += 1
        if not cls.kinematics_dirty:
            return
        state = cls.sim.state
        import newton

        newton.eval_fk(cls.sim.model, state.joint_q, state.joint_qd, state, cls._fk_reset_mask)
        cls._fk_reset_mask.zero_()
        cls._world_reset_mask.zero_()
        cls.kinematics_dirty = False

    @classmethod
    def reset_envs(cls, envs: list[int], seed: int = 0) -> None:
        """Isaac Lab's reset: new joint coordinates for ``envs``, kinematics marked pending (body_q left stale)."""
        sim = cls.sim
        rng = np.random.default_rng(seed)
        q, qd = sim.state.joint_q.numpy(), sim.state.joint_qd.numpy()
        starts = sim.model.articulation_start.numpy()
        q_start, qd_start = sim.model.joint_q_start.numpy(), sim.model.joint_qd_start.numpy()
        mask = cls._fk_reset_mask.numpy()
        for env in envs:
            j0, j1 = starts[env] + 1, starts[env + 1]  # the joints below the root (a free joint's quaternion stays)
            q[q_start[j0] : q_start[j1]] += rng.uniform(-0.6, 0.6, q_start[j1] - q_start[j0])
            qd[qd_start[j0] : qd_start[j1]] = rng.uniform(-1.0, 1.0, qd_start[j1] - qd_start[j0])
            mask[env] = True
        sim.state.joint_q.assign(q)
        sim.state.joint_qd.assign(qd)
        cls._fk_reset_mask.assign(mask)
        cls.kinematics_dirty = True


FakeNewtonManager.__module__ = "isaaclab_newton.physics.newton_manager"

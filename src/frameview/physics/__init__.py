# SPDX-License-Identifier: Apache-2.0
"""Typed physics views: rigid bodies, articulations and the joint-state reader, on Newton and ovphysx.

Users import every public name from ``frameview``. The contract is :mod:`frameview.physics.base`; the engines'
views live in their backend packages (:mod:`frameview.newton.bodies`, :mod:`frameview.ovphysx`).
"""

from __future__ import annotations

from .base import ArticulationView, JointState, JointStateReader, PhysicsView, RigidBodyView, StaleViewError
from .config import PhysicsViewCfg, make_articulation_view, make_joint_state_reader, make_rigid_body_view

__all__ = [
    "ArticulationView",
    "JointState",
    "JointStateReader",
    "PhysicsView",
    "PhysicsViewCfg",
    "RigidBodyView",
    "StaleViewError",
    "make_articulation_view",
    "make_joint_state_reader",
    "make_rigid_body_view",
]

# SPDX-License-Identifier: Apache-2.0
"""Errors that point the right way: unexpanded placeholders, glob-style patterns, integer data, engine handles
given to the wrong engine, an articulation view aimed at a link, and the same bad-value message on every backend."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import warp as wp
from pxr import Usd, UsdGeom

import frameview as fv

ROBOTS = "/World/envs/env_.*/Robot"


@pytest.fixture
def stage() -> Usd.Stage:
    """Four envs, a robot each."""
    stage = Usd.Stage.CreateInMemory()
    for i in range(4):
        UsdGeom.Xform.Define(stage, f"/World/envs/env_{i}/Robot").AddTranslateOp().Set((float(i), 0.0, 0.0))
    return stage


def test_unexpanded_placeholder_is_named(stage: Usd.Stage) -> None:
    """``{ENV_REGEX_NS}`` is reported as a placeholder to expand (with the expansion), never as a missing '/'."""
    with pytest.raises(ValueError, match=r"unexpanded placeholder \{ENV_REGEX_NS\}") as err:
        fv.resolve_prim_paths("{ENV_REGEX_NS}/Robot", stage)
    assert "'/World/envs/env_.*/Robot'" in str(err.value) and "starting with '/'" not in str(err.value)
    with pytest.raises(ValueError, match=r"placeholder \{ASSET\}.*expand it"):
        fv.UsdFrameView("/World/{ASSET}/Robot", stage=stage)
    assert len(fv.resolve_prim_paths(r"/World/envs/env_\d{1}/Robot", stage)) == 4  # a quantifier is no placeholder


def test_glob_components_get_the_regex(stage: Usd.Stage) -> None:
    """A glob ``env_*`` (matches nothing) and a bare ``*`` (not a regex) are told the regular expression to write."""
    with pytest.raises(ValueError, match=r"'env_\*' reads as a glob.*write 'env_\.\*'"):
        fv.FabricFrameView("/World/envs/env_*/Robot", stage=stage)
    with pytest.raises(ValueError, match=r"'\*' reads as a glob.*write '\.\*'"):
        fv.resolve_prim_paths("/World/envs/*/Robot", stage)
    assert len(fv.resolve_prim_paths("/World/envs/env_[0-9]*/Robot", stage)) == 4  # a class repeated: no hint needed


@pytest.mark.parametrize("kind", ["numpy", "torch", "warp"])
def test_integer_data_is_refused_with_the_fix(stage: Usd.Stage, kind: str) -> None:
    """int64 positions are a TypeError that says floating-point data is expected and how to convert; float16 passes
    (the message lists it)."""
    view = fv.FabricFrameView(ROBOTS, stage=stage)
    data = np.zeros((4, 3), dtype=np.int64)
    if kind == "torch":
        torch = pytest.importorskip("torch")
        data = torch.zeros((4, 3), dtype=torch.int64)
    elif kind == "warp":
        data = wp.zeros((4, 3), dtype=wp.int32)
    with pytest.raises(TypeError, match=r"positions: expected \(M, 3\) floating-point data.*pass floats"):
        view.set_world_poses(positions=data)
    view.set_world_poses(positions=np.ones((4, 3), dtype=np.float16))
    np.testing.assert_allclose(view.get_world_poses()[0].numpy(), 1.0)
    view.close()


@pytest.mark.parametrize("kind", ["list", "numpy", "warp", "torch"])
@pytest.mark.parametrize("bad", ["zero", "nan"])
def test_bad_values_read_the_same_on_every_backend(stage: Usd.Stage, kind: str, bad: str) -> None:
    """A zero quaternion or a NaN position gets one message, values included, from usd and fabric alike (CPU)."""
    rows = np.tile([0.0, 0.0, 0.0, 1.0], (4, 1)) if bad == "zero" else np.zeros((4, 3))
    rows[2] = 0.0 if bad == "zero" else [0.0, np.nan, 0.0]
    if kind == "list":
        data = rows.tolist()
    elif kind == "numpy":
        data = rows.astype(np.float32)
    elif kind == "warp":
        data = wp.array(rows.astype(np.float32), dtype=wp.float32)
    else:
        torch = pytest.importorskip("torch")
        data = torch.tensor(rows, dtype=torch.float32)
    name = "orientations" if bad == "zero" else "positions"
    messages = []
    for make in (fv.UsdFrameView, fv.FabricFrameView):
        with make(ROBOTS, stage=stage) as view, pytest.raises(ValueError) as err:
            view.set_world_poses(**{name: data})
        messages.append(str(err.value))
    what = "a zero-norm quaternion [0.0, 0.0, 0.0, 0.0]" if bad == "zero" else "a non-finite value [0.0, nan, 0.0]"
    assert messages == [f"{name}: row 2 holds {what}; nothing was written"] * 2


def _newton_robot():
    newton = pytest.importorskip("newton")
    builder = newton.ModelBuilder()
    root = "/World/envs/env_0/Robot"
    base = builder.add_link(mass=1.0, inertia=wp.mat33(np.eye(3) * 0.01), label=f"{root}/base")
    builder.add_shape_box(base, hx=0.1, hy=0.1, hz=0.1)
    arm = builder.add_link(mass=1.0, inertia=wp.mat33(np.eye(3) * 0.01), label=f"{root}/arm")
    builder.add_shape_box(arm, hx=0.1, hy=0.1, hz=0.1)
    joints = [builder.add_joint_free(base, label=f"{root}/root_joint"),
              builder.add_joint_revolute(base, arm, axis=(0.0, 1.0, 0.0), label=f"{root}/hinge")]  # fmt: skip
    builder.add_articulation(joints, label=root)
    model = builder.finalize(device="cpu")
    return model, model.state()


def test_engine_handles_are_checked_by_the_factories() -> None:
    """A missing state= and another engine's handle are TypeErrors naming what the engine's view needs (and which
    backend takes the handle given), not Python's raw ``__init__`` errors."""
    model, state = _newton_robot()
    cfg = fv.PhysicsViewCfg(prim_path=ROBOTS, backend="newton")
    with pytest.raises(TypeError, match=r"'newton' builds NewtonArticulationView, which needs model= and state=.*"
                                        r"state= missing"):  # fmt: skip
        fv.make_articulation_view(cfg, model=model)
    with pytest.raises(TypeError, match=r"it takes no physx= \(ovphysx's engine handle: set backend='ovphysx'\)"):
        fv.make_rigid_body_view({"prim_path": f"{ROBOTS}/base", "backend": "newton"}, physx=object())
    if importlib.util.find_spec("ovphysx") is None or importlib.util.find_spec("ovstage") is None:
        return  # the ovphysx views cannot load here: their ImportError comes first
    with pytest.raises(TypeError, match=r"'ovphysx' builds OvPhysxArticulationView.*takes no model=, state= "
                                        r"\(newton's engine handles: set backend='newton'\)"):  # fmt: skip
        fv.make_articulation_view({"prim_path": ROBOTS, "backend": "ovphysx"}, model=model, state=state)


def test_articulation_view_aimed_at_a_link_is_told_to_use_a_rigid_body_view() -> None:
    """An articulation pattern that names links says so and points to the rigid-body view."""
    model, state = _newton_robot()
    with pytest.raises(ValueError, match=r"'/World/envs/env_0/Robot/base' is a rigid body \(a link\), not an "
                                         r"articulation root: read links with a rigid-body view"):  # fmt: skip
        fv.make_articulation_view({"prim_path": f"{ROBOTS}/base"}, model=model, state=state)
    with fv.make_rigid_body_view({"prim_path": f"{ROBOTS}/base"}, model=model, state=state) as links:
        assert links.count == 1

# SPDX-License-Identifier: Apache-2.0
"""NewtonFrameView over envs cloned in Newton only: the stage holds env_0, the model a body per env.

The model is built as Isaac Lab's Newton cloner builds it kit-less: one prototype builder with relative body labels,
``ModelBuilder.replicate`` with a label prefix per env (``/World/envs/env_i``), so the bodies are labelled
``/World/envs/env_i/Robot`` and ``/World/envs/env_i/Robot/Arm`` while only env_0's prims are on the stage. Truth:
each frame's offset from its body, read from env_0's prims with pxr's ``XformCache``, composed in float64 NumPy with
that env's ``body_q``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import warp as wp
from helpers import assert_quats_close, quat_to_rotation
from hypothesis import given, settings
from hypothesis import strategies as st
from newton_helpers import newton_module, rigid_pose
from pxr import Gf, Usd, UsdGeom, UsdPhysics

import frameview as fv

ENVS = 12  # env_10 and env_11 come after env_9, not after env_1
SPACING = 2.0
FRAMES = {  # frame below env_i -> its body below env_i
    "Robot/Camera": "Robot",
    "Robot/Mount/Sensor": "Robot",
    "Robot/Arm/Tool/Tip": "Robot/Arm",
}


def _body(stage: Usd.Stage, path: str) -> UsdGeom.Xform:
    xf = UsdGeom.Xform.Define(stage, path)
    UsdPhysics.RigidBodyAPI.Apply(xf.GetPrim())
    mass = UsdPhysics.MassAPI.Apply(xf.GetPrim())
    mass.CreateMassAttr(1.0)
    mass.CreateDiagonalInertiaAttr(Gf.Vec3f(0.1, 0.1, 0.1))
    return xf


def env0_stage(env_xforms: bool) -> Usd.Stage:
    """env_0 (a body, a nested body, three frames on them, one static marker); with ``env_xforms``, empty
    ``/World/envs/env_i`` Xforms for the other envs too (as Isaac Lab's scene makes them)."""
    stage = Usd.Stage.CreateInMemory()
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.z)
    UsdGeom.Xform.Define(stage, "/World")
    UsdGeom.Xform.Define(stage, "/World/envs")
    for i in range(ENVS if env_xforms else 1):
        UsdGeom.Xform.Define(stage, f"/World/envs/env_{i}").AddTranslateOp().Set(Gf.Vec3d(SPACING * i, 0.0, 0.0))
    env = "/World/envs/env_0"
    robot = _body(stage, f"{env}/Robot")
    robot.AddTranslateOp().Set(Gf.Vec3d(0.0, 0.0, 1.0))
    robot.AddRotateZOp().Set(30.0)
    arm = _body(stage, f"{env}/Robot/Arm")
    arm.AddTranslateOp().Set(Gf.Vec3d(0.3, 0.0, 0.2))
    arm.AddRotateXOp().Set(20.0)
    cam = UsdGeom.Camera.Define(stage, f"{env}/Robot/Camera")
    cam.AddTranslateOp().Set(Gf.Vec3d(0.1, -0.05, 0.4))
    cam.AddRotateXYZOp().Set(Gf.Vec3f(10.0, -35.0, 80.0))
    mount = UsdGeom.Xform.Define(stage, f"{env}/Robot/Mount")
    mount.AddTranslateOp().Set(Gf.Vec3d(-0.2, 0.1, 0.0))
    mount.AddScaleOp().Set(Gf.Vec3f(2.0, 2.0, 2.0))
    sensor = UsdGeom.Xform.Define(stage, f"{env}/Robot/Mount/Sensor")
    sensor.AddTranslateOp().Set(Gf.Vec3d(0.05, 0.0, 0.1))
    sensor.AddRotateYOp().Set(-60.0)
    tool = UsdGeom.Xform.Define(stage, f"{env}/Robot/Arm/Tool")
    tool.AddTranslateOp().Set(Gf.Vec3d(0.0, 0.25, 0.0))
    tip = UsdGeom.Xform.Define(stage, f"{env}/Robot/Arm/Tool/Tip")
    tip.AddTranslateOp().Set(Gf.Vec3d(0.0, 0.0, 0.07))
    tip.AddRotateZOp().Set(135.0)
    UsdGeom.Xform.Define(stage, f"{env}/Marker").AddTranslateOp().Set(Gf.Vec3d(0.5, 0.5, 0.0))
    return stage


def env_xform(i: int, turn_deg: float = 0.0) -> np.ndarray:
    """The placement of env i in :func:`replicated_model` as a row-vector matrix: turned about z, then moved."""
    a = np.radians(turn_deg * i)
    m = np.eye(4)
    m[:2, :2] = [[np.cos(a), np.sin(a)], [-np.sin(a), np.cos(a)]]
    m[3, :3] = (SPACING * i, 0.0, 0.0)
    return m


def replicated_model(stage: Usd.Stage, device: str = "cpu", turn_deg: float = 0.0):
    """The model of ``ENVS`` copies of env_0's bodies, labelled as Isaac Lab's cloner labels them; env i placed by
    :func:`env_xform` (env_0 not moved)."""
    newton = newton_module()
    cache = UsdGeom.XformCache(Usd.TimeCode.Default())
    proto = newton.ModelBuilder()
    for rel in ("Robot", "Robot/Arm"):
        p, q = rigid_pose(np.array(cache.GetLocalToWorldTransform(stage.GetPrimAtPath(f"/World/envs/env_0/{rel}"))))
        proto.add_body(xform=wp.transform(wp.vec3(*p), wp.quat(*q)), label=rel)
    builder = newton.ModelBuilder()
    xforms = [
        wp.transform(
            (SPACING * i, 0.0, 0.0), wp.quat_from_axis_angle(wp.vec3(0.0, 0.0, 1.0), float(np.radians(turn_deg * i)))
        )
        for i in range(ENVS)
    ]
    builder.replicate(proto, ENVS, xforms=xforms, label_prefixes=[f"/World/envs/env_{i}" for i in range(ENVS)])
    return builder.finalize(device=device)


def pose_matrix(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    m = np.eye(4)
    m[:3, :3] = quat_to_rotation(q)
    m[3, :3] = p
    return m


def random_body_q(model, seed: int = 3) -> np.ndarray:
    """Independent random poses for every body (float32, as Newton keeps them)."""
    rng = np.random.default_rng(seed)
    n = model.body_count
    q = rng.normal(size=(n, 4))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    return np.concatenate([rng.uniform(-5.0, 5.0, size=(n, 3)), q], axis=1).astype(np.float32)


def expected_worlds(stage: Usd.Stage, model, body_q: np.ndarray, frame: str, envs, body: str = "") -> np.ndarray:
    """World matrices of ``frame`` in each of ``envs``: env_0's offset from the body (``FRAMES[frame]`` unless given;
    pxr, float64), then the env's ``body_q`` (float64)."""
    cache = UsdGeom.XformCache(Usd.TimeCode.Default())
    body = body or FRAMES[frame]
    src = np.array(cache.GetLocalToWorldTransform(stage.GetPrimAtPath(f"/World/envs/env_0/{frame}")))
    body_usd = np.array(cache.GetLocalToWorldTransform(stage.GetPrimAtPath(f"/World/envs/env_0/{body}")))
    offset = src @ np.linalg.inv(pose_matrix(*rigid_pose(body_usd)))
    labels = list(model.body_label)
    out = []
    for i in envs:
        x = body_q[labels.index(f"/World/envs/env_{i}/{body}")].astype(np.float64)
        out.append(offset @ pose_matrix(x[:3], x[3:]))
    return np.array(out)


def assert_poses(view: fv.NewtonFrameView, worlds: np.ndarray) -> None:
    pos, quat = view.get_world_poses()
    np.testing.assert_allclose(pos.numpy(), worlds[:, 3, :3], atol=2e-5)
    rot = worlds[:, :3, :3] / np.linalg.norm(worlds[:, :3, :3], axis=2, keepdims=True)  # scale divided out
    expected_q = []
    for r in rot:
        gq = Gf.Matrix3d(*r.ravel().tolist()).ExtractRotation().GetQuat()
        expected_q.append([*gq.GetImaginary(), gq.GetReal()])
    assert_quats_close(quat.numpy(), np.array(expected_q), atol=2e-5)


@pytest.fixture(params=[False, True], ids=["env0-only", "empty-env-xforms"])
def cloned(request) -> dict:
    stage = env0_stage(env_xforms=request.param)
    model = replicated_model(stage)
    state = model.state()
    body_q = random_body_q(model)
    state.body_q.assign(body_q)
    return {"stage": stage, "model": model, "state": state, "body_q": body_q}


@pytest.mark.parametrize("frame", sorted(FRAMES))
def test_every_env_found_in_env_order_at_its_body(cloned: dict, frame: str) -> None:
    stage, model = cloned["stage"], cloned["model"]
    assert not stage.GetPrimAtPath(f"/World/envs/env_1/{frame}").IsValid()  # only env_0's frames are authored
    view = fv.NewtonFrameView(f"/World/envs/env_.*/{frame}", stage=stage, model=model, state=cloned["state"])
    assert view.prim_paths == tuple(f"/World/envs/env_{i}/{frame}" for i in range(ENVS))
    labels = list(model.body_label)
    bodies = [labels.index(f"/World/envs/env_{i}/{FRAMES[frame]}") for i in range(ENVS)]
    np.testing.assert_array_equal(view.body_indices, bodies)
    assert_poses(view, expected_worlds(stage, model, cloned["body_q"], frame, range(ENVS)))
    if frame == "Robot/Mount/Sensor":  # the mount's scale 2 rides along, as in env_0
        np.testing.assert_allclose(view.get_world_scales().numpy(), 2.0, rtol=1e-6)


def test_one_cloned_env_by_a_literal_path_and_a_list(cloned: dict) -> None:
    stage, model, state = cloned["stage"], cloned["model"], cloned["state"]
    view = fv.NewtonFrameView("/World/envs/env_7/Robot/Camera", stage=stage, model=model, state=state)
    assert view.prim_paths == ("/World/envs/env_7/Robot/Camera",)
    assert_poses(view, expected_worlds(stage, model, cloned["body_q"], "Robot/Camera", [7]))
    paths = ["/World/envs/env_10/Robot/Arm/Tool/Tip", "/World/envs/env_0/Robot/Arm/Tool/Tip"]
    view = fv.NewtonFrameView(paths, stage=stage, model=model, state=state)
    assert view.prim_paths == tuple(paths)
    assert_poses(view, expected_worlds(stage, model, cloned["body_q"], "Robot/Arm/Tool/Tip", [10, 0]))


def test_a_later_view_reads_the_stage_as_edited_since_the_first(cloned: dict) -> None:
    """The views of one model share the stage's listing until the stage changes: a frame authored in env_0 after the
    first view is found in every env by the next view, and a prim removed since is no longer found."""
    stage, model, state = cloned["stage"], cloned["model"], cloned["state"]
    first = fv.NewtonFrameView("/World/envs/env_.*/Robot/Camera", stage=stage, model=model, state=state)
    store = first._store
    listing = store.listing()
    fv.NewtonFrameView("/World/envs/env_.*/Robot/Mount/Sensor", stage=stage, model=model, state=state)
    assert store.listing() is listing  # the stage unchanged: listed once
    probe = UsdGeom.Xform.Define(stage, "/World/envs/env_0/Robot/Probe")
    probe.AddTranslateOp().Set(Gf.Vec3d(0.0, 0.3, -0.1))
    probe.AddRotateYOp().Set(25.0)
    assert store.listing() is not listing
    view = fv.NewtonFrameView("/World/envs/env_.*/Robot/Probe", stage=stage, model=model, state=state)
    assert view.prim_paths == tuple(f"/World/envs/env_{i}/Robot/Probe" for i in range(ENVS))
    assert_poses(view, expected_worlds(stage, model, cloned["body_q"], "Robot/Probe", range(ENVS), body="Robot"))
    fv.NewtonFrameView("/World/envs/env_.*/Marker", stage=stage, model=model, state=state)  # listed again
    stage.RemovePrim("/World/envs/env_0/Marker")
    with pytest.raises(ValueError, match="matched no prim"):
        fv.NewtonFrameView("/World/envs/env_.*/Marker", stage=stage, model=model, state=state)


def test_nested_cloned_frames_in_one_view_and_across_views(cloned: dict) -> None:
    """Mount and its Sensor cloned in every env, in one view and in two views of one model: each sensor rides on its
    own env's mount (a write to env_3's mount carries env_3's sensor only), at float64 truth from env_0's prims."""
    stage, model, state, body_q = cloned["stage"], cloned["model"], cloned["state"], cloned["body_q"]
    mounts = expected_worlds(stage, model, body_q, "Robot/Mount", range(ENVS), body="Robot")
    sensors = expected_worlds(stage, model, body_q, "Robot/Mount/Sensor", range(ENVS))
    both = fv.NewtonFrameView(["/World/envs/env_.*/Robot/Mount/Sensor", "/World/envs/env_.*/Robot/Mount"],
                              stage=stage, model=model, state=state)  # fmt: skip
    assert_poses(both, np.concatenate([sensors, mounts]))
    later = fv.NewtonFrameView("/World/envs/env_.*/Robot/Mount/Sensor", stage=stage, model=model, state=state)
    assert_poses(later, sensors)
    cache = UsdGeom.XformCache(Usd.TimeCode.Default())
    sensor_local = np.array(
        cache.GetLocalTransformation(stage.GetPrimAtPath("/World/envs/env_0/Robot/Mount/Sensor"))[0]
    )
    p, q = np.array([0.4, -1.0, 2.5]), np.array([0.3, -0.1, 0.2, 0.9]) / np.linalg.norm([0.3, -0.1, 0.2, 0.9])
    both.set_world_poses(np.array([p], dtype=np.float32), np.array([q], dtype=np.float32), indices=[ENVS + 3])
    mount3 = np.diag([2.0, 2.0, 2.0, 1.0]) @ pose_matrix(p, q)  # the mount's scale 2 kept
    sensors[3] = sensor_local @ mount3
    assert_poses(later, sensors)
    mounts[3] = mount3
    assert_poses(both, np.concatenate([sensors, mounts]))


def test_writes_to_a_cloned_frame_move_that_env_only(cloned: dict) -> None:
    stage, model, state = cloned["stage"], cloned["model"], cloned["state"]
    view = fv.NewtonFrameView("/World/envs/env_.*/Robot/Camera", stage=stage, model=model, state=state)
    target_p, target_q = np.array([1.0, 2.0, 3.0]), np.array([0.0, 0.0, np.sin(0.4), np.cos(0.4)])
    view.set_world_poses(
        np.array([target_p], dtype=np.float32), np.array([target_q], dtype=np.float32), indices=np.array([5])
    )
    worlds = expected_worlds(stage, model, cloned["body_q"], "Robot/Camera", range(ENVS))
    worlds[5] = pose_matrix(target_p, target_q)
    assert_poses(view, worlds)
    # the body moves: the written frame keeps its new offset from env_5's body, the others their USD one
    body_q = random_body_q(model, seed=11)
    state.body_q.assign(body_q)
    labels = list(model.body_label)
    x = cloned["body_q"][labels.index("/World/envs/env_5/Robot")].astype(np.float64)
    offset5 = pose_matrix(target_p, target_q) @ np.linalg.inv(pose_matrix(x[:3], x[3:]))
    worlds = expected_worlds(stage, model, body_q, "Robot/Camera", range(ENVS))
    y = body_q[labels.index("/World/envs/env_5/Robot")].astype(np.float64)
    worlds[5] = offset5 @ pose_matrix(y[:3], y[3:])
    assert_poses(view, worlds)


def test_cloned_frames_on_no_body_are_placed_with_their_env(cloned: dict) -> None:
    """env_i mirrors env_0, Marker included: a frame fixed in its env, at env_0's marker relative to env_0, in
    env_i: relative to env_i's Xform where the stage has it (2 i along x), else moved by env_i's placement in the
    model (the replicate xform, 2 i along x)."""
    stage, model, state = cloned["stage"], cloned["model"], cloned["state"]
    view = fv.NewtonFrameView("/World/envs/env_.*/Marker", stage=stage, model=model, state=state)
    assert view.prim_paths == tuple(f"/World/envs/env_{i}/Marker" for i in range(ENVS))
    np.testing.assert_array_equal(view.body_indices, -1)
    expected = np.array([[0.5 + SPACING * i, 0.5, 0.0] for i in range(ENVS)])
    np.testing.assert_allclose(view.get_world_poses()[0].numpy(), expected, atol=1e-6)
    assert_quats_close(view.get_world_poses()[1].numpy(), np.tile([0.0, 0.0, 0.0, 1.0], (ENVS, 1)), atol=1e-7)


def test_a_cloned_frame_on_no_body_in_a_turned_env() -> None:
    """No env Xforms; the model turns env i by 15 i degrees about z: the fixed marker of env i is env_0's marker
    moved by that placement (float64 NumPy)."""
    stage = env0_stage(env_xforms=False)
    model = replicated_model(stage, turn_deg=15.0)
    view = fv.NewtonFrameView("/World/envs/env_.*/Marker", stage=stage, model=model, state=model.state())
    cache = UsdGeom.XformCache(Usd.TimeCode.Default())
    marker0 = np.array(cache.GetLocalToWorldTransform(stage.GetPrimAtPath("/World/envs/env_0/Marker")))
    assert_poses(view, np.array([marker0 @ env_xform(i, 15.0) for i in range(ENVS)]))


def test_a_cloned_frame_on_no_body_follows_its_env_xform() -> None:
    """With env Xforms on the stage, a fixed frame of env_i is placed by env_i's Xform (here moved off the grid
    and turned), not by the model."""
    stage = env0_stage(env_xforms=True)
    model = replicated_model(stage)
    env5 = UsdGeom.Xformable(stage.GetPrimAtPath("/World/envs/env_5"))
    env5.AddRotateZOp().Set(90.0)
    view = fv.NewtonFrameView("/World/envs/env_5/Marker", stage=stage, model=model, state=model.state())
    cache = UsdGeom.XformCache(Usd.TimeCode.Default())
    marker0 = np.array(cache.GetLocalToWorldTransform(stage.GetPrimAtPath("/World/envs/env_0/Marker")))
    env0 = np.array(cache.GetLocalToWorldTransform(stage.GetPrimAtPath("/World/envs/env_0")))
    world5 = np.array(cache.GetLocalToWorldTransform(env5.GetPrim()))
    assert_poses(view, (marker0 @ np.linalg.inv(env0) @ world5)[None])


def test_a_clone_that_is_not_a_rigid_copy_places_no_static_frame() -> None:
    """env_3's bodies start displaced by different transforms (the arm moved): its fixed frames are refused."""
    stage = env0_stage(env_xforms=False)
    model = replicated_model(stage)
    body_q = model.body_q.numpy()
    body_q[list(model.body_label).index("/World/envs/env_3/Robot/Arm"), 0] += 0.5
    model.body_q.assign(body_q)
    with pytest.raises(ValueError, match=r"env_3/Marker.*do not place that env as a rigid copy"):
        fv.NewtonFrameView("/World/envs/env_.*/Marker", stage=stage, model=model, state=model.state())
    # frames on bodies do not need the placement
    view = fv.NewtonFrameView("/World/envs/env_.*/Robot/Camera", stage=stage, model=model, state=model.state())
    assert view.count == ENVS


def test_a_cloned_body_is_refused_as_a_frame(cloned: dict) -> None:
    with pytest.raises(ValueError, match=r"env_3/Robot/Arm' is a rigid body"):
        fv.NewtonFrameView(
            "/World/envs/env_3/Robot/Arm", stage=cloned["stage"], model=cloned["model"], state=cloned["state"]
        )


def test_a_clone_with_two_candidate_sources_is_refused() -> None:
    """env_0 and env_1 on the stage, env_2 in Newton only: which one env_2 copies is unknown."""
    stage = env0_stage(env_xforms=False)
    UsdGeom.Xform.Define(stage, "/World/envs/env_1").AddTranslateOp().Set(Gf.Vec3d(SPACING, 0.0, 0.0))
    stage.GetPrimAtPath("/World/envs/env_1").GetReferences().AddInternalReference("/World/envs/env_0")
    model = replicated_model(stage)
    env2 = "/World/envs/env_2/Robot/Camera"
    with pytest.raises(ValueError, match=r"env_2.*could be a clone of any of"):
        fv.NewtonFrameView("/World/envs/env_.*/Robot/Camera", stage=stage, model=model, state=model.state())
    with pytest.raises(ValueError, match=r"env_2.*could be a clone of any of"):
        fv.NewtonFrameView(env2, stage=stage, model=model, state=model.state())
    # the envs on the stage are read as always
    view = fv.NewtonFrameView("/World/envs/env_[01]/Robot/Camera", stage=stage, model=model, state=model.state())
    assert view.count == 2


def test_a_stage_with_every_env_is_read_from_the_stage() -> None:
    """Every env authored (Isaac Lab under Kit): no clone, each frame from its own prim."""
    stage = env0_stage(env_xforms=True)
    for i in range(1, ENVS):
        stage.GetPrimAtPath(f"/World/envs/env_{i}").GetReferences().AddInternalReference("/World/envs/env_0")
    model = replicated_model(stage)
    stage.GetPrimAtPath("/World/envs/env_4/Robot/Camera").GetAttribute("xformOp:translate").Set(Gf.Vec3d(9, 9, 9))
    view = fv.NewtonFrameView("/World/envs/env_.*/Robot/Camera", stage=stage, model=model, state=model.state())
    assert view.count == ENVS
    body_q = model.state().body_q.numpy()
    pos = view.get_world_poses()[0].numpy()
    cache = UsdGeom.XformCache(Usd.TimeCode.Default())
    cam = np.array(cache.GetLocalToWorldTransform(stage.GetPrimAtPath("/World/envs/env_4/Robot/Camera")))
    robot = np.array(cache.GetLocalToWorldTransform(stage.GetPrimAtPath("/World/envs/env_4/Robot")))
    offset = cam @ np.linalg.inv(pose_matrix(*rigid_pose(robot)))
    x = body_q[list(model.body_label).index("/World/envs/env_4/Robot")].astype(np.float64)
    np.testing.assert_allclose(pos[4], (offset @ pose_matrix(x[:3], x[3:]))[3, :3], atol=2e-5)


# ---------------------------------------------------------------- the clone search against a brute-force reference

_NAMES = ("a", "b", "c")


def _clone_reference(stage: Usd.Stage, labels: list[str]) -> tuple[dict, dict, dict, list[str]]:
    """The module docstring's rule by brute force: a label that is not a visible prim is a clone of each stage body
    of its depth that differs from it in exactly one component (components from the root, bodies in label order)."""
    paths = [label for label in dict.fromkeys(labels) if label.startswith("/") and "//" not in label[1:]]

    def visible(path: str) -> bool:
        prim = stage.GetPrimAtPath(path)
        return bool(prim) and Usd.PrimDefaultPredicate(prim) and not prim.IsInstanceProxy()

    stage_bodies = [p for p in paths if visible(p)]
    found: dict[str, list[str]] = {}
    pairs: dict[str, list[tuple[str, str]]] = {}
    for label in paths:
        if label in stage_bodies:
            continue
        parts = label.split("/")
        hits = []
        for body in stage_bodies:
            other = body.split("/")
            differ = [i for i in range(len(parts)) if len(other) == len(parts) and parts[i] != other[i]]
            if len(other) == len(parts) and len(differ) == 1:
                hits.append((differ[0], body))
        for i, body in sorted(hits, key=lambda hit: hit[0]):  # stable: bodies in label order
            clone, root = "/".join(parts[: i + 1]), "/".join(body.split("/")[: i + 1])
            roots = found.setdefault(clone, [])
            if root not in roots:
                roots.append(root)
            pairs.setdefault(clone, []).append((label, body))
    prefixes = {clone: roots[0] for clone, roots in found.items() if len(roots) == 1}
    ambiguous = {clone: roots for clone, roots in found.items() if len(roots) > 1}
    return prefixes, ambiguous, pairs, list(found)


def _check_tree(stage: Usd.Stage, labels: list[str], paths: list[str], listing: Any = None) -> Any:
    """CloneTree over ``stage`` and ``labels`` against :func:`_clone_reference`: clone roots, their sources, body
    pairs, the clone roots listed as children of their parent (after its stage children), and ``has_prim`` of the
    stage's prims, the labels and their mirrors. Returns the tree."""
    from frameview.newton.clones import CloneTree, StageListing
    from frameview.paths import _as_prim_tree

    listing = StageListing(stage) if listing is None else listing
    visible = _as_prim_tree(stage)
    tree = CloneTree(listing, labels)
    prefixes, ambiguous, pairs, order = _clone_reference(stage, labels)
    assert tree.prefixes == prefixes
    assert tree.ambiguous == ambiguous
    for clone in prefixes:
        assert tree.pairs_of(clone) == pairs[clone], clone

    # a path is on the tree when it is a visible prim, or mirrors one below the shallowest clone root above it
    def reference_has(path: str) -> bool:
        if visible.has_prim(path):
            return True
        parts = path.split("/")
        for depth in range(2, len(parts) + 1):
            root = "/".join(parts[:depth])
            if root in ambiguous:
                return False  # (CloneTree raises unless the path is visible: checked below)
            if root in prefixes:
                return visible.has_prim(prefixes[root] + path[len(root) :])
        return False

    asked = {*paths, *(label for label in labels if label.startswith("/") and "//" not in label[1:])}
    asked |= {
        clone + p[len(source) :] for clone, source in prefixes.items() for p in paths if p.startswith(source + "/")
    }
    for path in sorted(asked):
        parts = path.split("/")
        roots = ["/".join(parts[:d]) for d in range(2, len(parts) + 1)]
        first = next((root for root in roots if root in prefixes or root in ambiguous), None)
        if first in ambiguous and not visible.has_prim(path):
            with pytest.raises(ValueError, match="could be a clone of any of"):
                tree.has_prim(path)
        else:
            assert tree.has_prim(path) == reference_has(path), path
    below_clones = [*prefixes, *ambiguous]
    for parent in {root.rpartition("/")[0] or "/" for root in order}:
        if any(parent == root or parent.startswith(root + "/") for root in below_clones):
            continue  # (its children mirror a source's too)
        extra = [root.rpartition("/")[2] for root in order if (root.rpartition("/")[0] or "/") == parent]
        stage_names = visible.child_names(parent) if parent == "/" or visible.has_prim(parent) else []
        assert tree.child_names(parent) == stage_names + [n for n in extra if n not in stage_names], parent
    return tree


@st.composite
def _stages_and_labels(draw: st.DrawFn) -> tuple[Usd.Stage, list[str], list[str]]:
    paths = sorted({"/" + "/".join(draw(st.lists(st.sampled_from(_NAMES), min_size=1, max_size=4)))
                    for _ in range(draw(st.integers(4, 24)))})  # fmt: skip
    stage = Usd.Stage.CreateInMemory()
    kinds = [draw(st.sampled_from(["def", "def", "def", "over", "inactive", "class"])) for _ in paths]
    for path, kind in zip(paths, kinds, strict=True):
        if kind == "over":
            stage.OverridePrim(path)
        elif kind == "class" and path.count("/") == 1:  # a class prim is a root prim
            stage.CreateClassPrim(path)
        else:
            stage.DefinePrim(path, "Xform")
    for path, kind in zip(paths, kinds, strict=True):  # after every prim is defined (none below an inactive one)
        if kind == "inactive" and stage.GetPrimAtPath(path):
            stage.GetPrimAtPath(path).SetActive(False)
    labels = draw(st.lists(st.sampled_from([*paths, "a", "a/b", "/a//b"]), max_size=30))
    labels += ["/" + "/".join(draw(st.lists(st.sampled_from(_NAMES), min_size=1, max_size=4))) for _ in range(8)]
    return stage, labels, paths


@settings(max_examples=80, deadline=None)
@given(_stages_and_labels())
def test_the_clone_search_matches_a_brute_force_reference(case: tuple[Usd.Stage, list[str], list[str]]) -> None:
    """CloneTree (matches found once per parent of the labels) against the rule applied label by label; the stage
    listing against pxr's own answers."""
    from frameview.newton.clones import StageListing
    from frameview.paths import _as_prim_tree

    stage, labels, paths = case
    listing = StageListing(stage)
    visible = _as_prim_tree(stage)
    for path in {*paths, *(p.rpartition("/")[0] for p in paths if p.count("/") > 1), "/x", "/a/x/a"}:
        assert listing.valid(path) == stage.GetPrimAtPath(path).IsValid(), path
        assert listing.has_prim(path) == visible.has_prim(path), path
        if visible.has_prim(path):
            assert listing.child_names(path) == visible.child_names(path), path
    assert listing.child_names("/") == visible.child_names("/")
    _check_tree(stage, labels, paths, listing)


@st.composite
def _replicated(draw: st.DrawFn) -> tuple[Usd.Stage, list[str], list[str], bool]:
    """Labels of a model replicated per env (``head + env + suffix``, Isaac Lab's cloner's layout) over a stage that
    holds one source env, and the other envs absent, as empty Xforms, partly or fully authored; and whether the stage
    is the cloner's (two envs or more, the source env whole, every other env bare or absent)."""
    head = draw(st.sampled_from(["/", "/World/envs/", "/a/b/"]))
    envs = draw(st.lists(st.sampled_from(["env_0", "env_1", "env_2", "env_10", "a", "b"]), min_size=1, max_size=5,
                         unique=True))  # fmt: skip
    suffixes = draw(st.lists(st.sampled_from(["/Robot", "/Robot/arm", "/Robot/arm/tip", "/base", "/b/c", "/a"]),
                             min_size=1, max_size=4, unique=True))  # fmt: skip
    source = draw(st.sampled_from(envs))
    stage = Usd.Stage.CreateInMemory()
    whole = draw(st.booleans()) or len(suffixes) == 1
    for suffix in suffixes if whole else suffixes[:-1]:
        stage.DefinePrim(head + source + suffix, "Xform")
    clean = whole
    for env in envs:
        if env == source:
            continue
        kind = draw(st.sampled_from(["absent", "xform", "xform", "inactive child", "partial", "whole"]))
        if kind != "absent":
            stage.DefinePrim(head + env, "Xform")
        if kind == "inactive child":
            stage.DefinePrim(head + env + "/Hidden", "Xform").SetActive(False)
        elif kind == "partial":
            stage.DefinePrim(head + env + suffixes[0], "Xform")
        elif kind == "whole":
            for suffix in suffixes:
                stage.DefinePrim(head + env + suffix, "Xform")
        clean = clean and kind in ("absent", "xform")
    labels = [head + env + suffix for env in envs for suffix in suffixes]
    paths = [str(prim.GetPath()) for prim in stage.TraverseAll()]
    return stage, labels, paths, clean and len(envs) > 1


@settings(max_examples=120, deadline=None)
@given(_replicated())
def test_replicated_envs_are_found_as_the_brute_force_reference_finds_them(
    case: tuple[Usd.Stage, list[str], list[str], bool],
) -> None:
    """Labels in replicated blocks (one per env) take a search of their own, one listing per env: the same clone
    roots, sources, pairs, children and prims as the rule applied label by label, whatever the other envs hold on
    the stage (the cloner's stage takes that search; any other falls back to the general one)."""
    stage, labels, paths, clean = case
    tree = _check_tree(stage, labels, paths)
    if clean:
        assert tree._blocks is not None  # the cloner's stage: the replicated search ran

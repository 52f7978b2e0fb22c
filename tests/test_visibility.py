# SPDX-License-Identifier: Apache-2.0
"""get_visibility / set_visibility on every backend, against pxr's ``UsdGeomImageable.ComputeVisibility`` (reads)
and pxr's own ``MakeVisible`` / ``MakeInvisible`` applied to an identical stage (writes)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import warp as wp
from pxr import Gf, Tf, Usd, UsdGeom

import frameview as fv

ENVS = 6
LINKS = "/World/envs/env_.*/Robot/Link"
BACKENDS = ["usd", "memory", "ovstage", "usdrt"]
WRITERS = ["usd", "memory", "usdrt"]
"""Backends that write visibility (ovstage reads only: see test_ovstage_refuses_writes_by_name)."""


def build_stage(hidden: tuple[str, ...] = ()) -> Usd.Stage:
    """``/World/envs/env_i`` holding ``Robot/Link/Camera`` (Xforms and a Camera), ``Props`` (a Scope, Imageable
    but not Xformable) with a ``Box`` (Cube), and ``Extra`` (a typeless prim) with an Xform ``Extra/Marker``;
    ``hidden`` prims get the opinion ``invisible``. Deterministic: two calls build identical stages."""
    stage = Usd.Stage.CreateInMemory()
    UsdGeom.Xform.Define(stage, "/World")
    UsdGeom.Xform.Define(stage, "/World/envs")
    for i in range(ENVS):
        env = f"/World/envs/env_{i}"
        UsdGeom.Xform.Define(stage, env).AddTranslateOp().Set(Gf.Vec3d(2.0 * i, 0.0, 0.0))
        UsdGeom.Xform.Define(stage, f"{env}/Robot")
        UsdGeom.Xform.Define(stage, f"{env}/Robot/Link").AddTranslateOp().Set(Gf.Vec3d(0.0, 0.5, 0.0))
        UsdGeom.Camera.Define(stage, f"{env}/Robot/Link/Camera")
        UsdGeom.Xform.Define(stage, f"{env}/Robot/Base")
        UsdGeom.Scope.Define(stage, f"{env}/Props")
        UsdGeom.Cube.Define(stage, f"{env}/Props/Box")
        stage.DefinePrim(f"{env}/Extra")
        UsdGeom.Xform.Define(stage, f"{env}/Extra/Marker")
    for path in hidden:
        UsdGeom.Imageable(stage.GetPrimAtPath(path)).MakeInvisible()
    return stage


def link_paths() -> list[str]:
    return [f"/World/envs/env_{i}/Robot/Link" for i in range(ENVS)]


def imageable_paths(stage: Usd.Stage) -> list[str]:
    return [str(p.GetPath()) for p in stage.Traverse() if p.IsA(UsdGeom.Imageable)]


def split_markers(paths: list[str]) -> tuple[list[str], list[str]]:
    """(prims not under a typeless prim, the Markers under the typeless ``Extra``): pxr's MakeVisible lets a hidden
    Marker show (it skips non-Imageable siblings), frameview keeps it as it was (see
    ``test_typeless_sibling_keeps_its_hidden_descendants``)."""
    markers = [p for p in paths if "/Extra/" in p]
    return [p for p in paths if "/Extra/" not in p], markers


def truth(stage: Usd.Stage, paths: list[str]) -> np.ndarray:
    """pxr's computed visibility (the independent truth)."""
    invisible = UsdGeom.Tokens.invisible
    return np.array([UsdGeom.Imageable(stage.GetPrimAtPath(p)).ComputeVisibility() != invisible for p in paths])


def pxr_apply(stage: Usd.Stage, paths: list[str], visible: np.ndarray) -> None:
    """pxr's own MakeVisible / MakeInvisible, one prim at a time."""
    for path, v in zip(paths, visible.tolist(), strict=True):
        imageable = UsdGeom.Imageable(stage.GetPrimAtPath(path))
        imageable.MakeVisible() if v else imageable.MakeInvisible()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def make_view(backend: str, device: str) -> Iterator[Any]:
    """``make_view(prim_path, stage)`` -> a view of the backend under test (closed at teardown)."""
    views: list[fv.BaseFrameView] = []
    context = None
    if backend == "usdrt":
        from fakes.usdrt_standin import installed

        context = installed(device, shuffle_seed=0)
        context.__enter__()

    def factory(prim_path: Any, stage: Usd.Stage) -> fv.BaseFrameView:
        if backend == "usd":
            view: fv.BaseFrameView = fv.UsdFrameView(prim_path, stage=stage, device=device)
        elif backend == "memory":
            view = fv.FabricFrameView(prim_path, stage=stage, device=device, fabric_provider="memory")
        elif backend == "ovstage":
            from ovstage_helpers import OVSTAGE_SKIP_REASON, ovstage_for

            if OVSTAGE_SKIP_REASON:
                pytest.skip(OVSTAGE_SKIP_REASON)
            if device != "cpu":
                pytest.skip("the ovstage provider's CUDA path copies columns; visibility is host-only anyway")
            view = fv.FabricFrameView(prim_path, stage=ovstage_for(stage), device=device)
        else:
            view = fv.FabricFrameView(prim_path, stage=stage, device=device, fabric_provider="usdrt")
        views.append(view)
        return view

    yield factory
    for view in views:
        view.close()
    if context is not None:
        context.__exit__(None, None, None)


def computed(view: fv.BaseFrameView, stage: Usd.Stage, paths: list[str]) -> np.ndarray:
    """Computed visibility of any prims as the view's backend holds it (pxr for usd, the provider for Fabric)."""
    if view.backend == "usd":
        return truth(stage, paths)
    return np.asarray(view.fabric_stage.visibility(paths), dtype=bool)


# ---------------------------------------------------------------- reads


def test_reads_match_compute_visibility(make_view: Any, device: str) -> None:
    """get_visibility equals pxr's ComputeVisibility, with invisible opinions on the prims, on Xform ancestors, on a
    Scope and above the view; indexed reads return the indexed rows; the output is wp.bool on the view's device."""
    hidden = ("/World/envs/env_1", "/World/envs/env_2/Robot/Link", "/World/envs/env_3/Robot", "/World/envs/env_4/Props")
    stage = build_stage(hidden)
    view = make_view(LINKS, stage)
    vis = view.get_visibility()
    assert vis.dtype == wp.bool and vis.shape == (ENVS,) and str(vis.device) == device
    np.testing.assert_array_equal(vis.numpy(), truth(stage, link_paths()))
    assert vis.numpy().tolist() == [True, False, False, False, True, True]
    np.testing.assert_array_equal(view.get_visibility(indices=[3, 0, 2]).numpy(), [False, True, False])
    rows = wp.array([5, 1], dtype=wp.int64, device=device)
    np.testing.assert_array_equal(view.get_visibility(indices=rows).numpy(), [True, False])
    assert view.get_visibility(indices=[]).shape == (0,)
    cameras = make_view("/World/envs/env_.*/Robot/Link/Camera", stage)
    cams = [p + "/Camera" for p in link_paths()]
    np.testing.assert_array_equal(cameras.get_visibility().numpy(), truth(stage, cams))
    everything = imageable_paths(stage)
    np.testing.assert_array_equal(computed(view, stage, everything), truth(stage, everything))


def test_everything_hidden_above_the_view(make_view: Any) -> None:
    """An invisible /World hides every row."""
    stage = build_stage(("/World",))
    assert not make_view(LINKS, stage).get_visibility().numpy().any()


# ---------------------------------------------------------------- writes against pxr's MakeVisible / MakeInvisible


@pytest.mark.parametrize("backend", WRITERS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_writes_match_pxr_make_visible(make_view: Any, seed: int) -> None:
    """A random request over hidden ancestors gives every Imageable prim of the stage the computed visibility that
    pxr's MakeVisible / MakeInvisible give an identical stage; the rows read back as requested."""
    rng = np.random.default_rng(seed)
    candidates = ["/World/envs", *[f"/World/envs/env_{i}" for i in range(ENVS)], *link_paths(),
                  *[f"/World/envs/env_{i}/Robot" for i in range(ENVS)]]  # fmt: skip
    hidden = tuple(p for p in candidates if rng.random() < 0.35)
    stage, reference = build_stage(hidden), build_stage(hidden)
    view = make_view(LINKS, stage)
    rows = rng.permutation(ENVS)[:4]
    visible = rng.random(4) < 0.5
    view.set_visibility(visible, indices=rows)
    pxr_apply(reference, [link_paths()[i] for i in rows], visible)
    np.testing.assert_array_equal(view.get_visibility(indices=rows).numpy(), visible)
    np.testing.assert_array_equal(view.get_visibility().numpy(), truth(reference, link_paths()))
    everything, markers = split_markers(imageable_paths(reference))
    np.testing.assert_array_equal(computed(view, stage, everything), truth(reference, everything))
    np.testing.assert_array_equal(computed(view, stage, markers), truth(build_stage(hidden), markers))


@pytest.mark.parametrize("backend", WRITERS)
def test_round_trip_all_rows_and_scalar(make_view: Any) -> None:
    """set(pattern) then get gives the pattern; a Python bool sets every row; writes are idempotent."""
    stage = build_stage()
    view = make_view(LINKS, stage)
    pattern = np.array([True, False, False, True, False, True])
    view.set_visibility(pattern)
    np.testing.assert_array_equal(view.get_visibility().numpy(), pattern)
    view.set_visibility(pattern)
    np.testing.assert_array_equal(view.get_visibility().numpy(), pattern)
    view.set_visibility(False)
    assert not view.get_visibility().numpy().any()
    view.set_visibility(np.bool_(True))
    assert view.get_visibility().numpy().all()
    everything = imageable_paths(stage)
    np.testing.assert_array_equal(computed(view, stage, everything), truth(build_stage(), everything))


@pytest.mark.parametrize("backend", WRITERS)
def test_indexed_write_leaves_other_rows(make_view: Any, device: str) -> None:
    """A write of some rows (host and device indices) changes those rows only."""
    stage = build_stage(("/World/envs/env_4/Robot/Link",))
    view = make_view(LINKS, stage)
    before = view.get_visibility().numpy().copy()
    view.set_visibility([False, True], indices=[3, 4])
    expected = before.copy()
    expected[[3, 4]] = [False, True]
    np.testing.assert_array_equal(view.get_visibility().numpy(), expected)
    view.set_visibility(wp.array([False], dtype=wp.bool, device=device), indices=wp.array([0], dtype=wp.int32,
                        device=device))  # fmt: skip
    expected[0] = False
    np.testing.assert_array_equal(view.get_visibility().numpy(), expected)
    everything = [p for p in imageable_paths(stage) if not p.startswith(("/World/envs/env_0/Robot/Link",
                  "/World/envs/env_3/Robot/Link", "/World/envs/env_4/Robot/Link"))]  # fmt: skip
    np.testing.assert_array_equal(computed(view, stage, everything), truth(build_stage(), everything))


# ---------------------------------------------------------------- inherited invisibility


@pytest.mark.parametrize("backend", WRITERS)
def test_visible_under_an_invisible_ancestor(make_view: Any) -> None:
    """set_visibility(True) under an invisible env makes the row visible (the env becomes 'inherited'), and keeps the
    env's other prims (Base, the Scope's Box, the typeless prim's Marker) and the other envs invisible."""
    stage = build_stage(("/World/envs/env_1", "/World/envs/env_2"))
    view = make_view(LINKS, stage)
    assert view.get_visibility().numpy().tolist() == [True, False, False, True, True, True]
    view.set_visibility(True, indices=[1])
    assert view.get_visibility().numpy().tolist() == [True, True, False, True, True, True]
    env = "/World/envs/env_1"
    others = [f"{env}/Robot/Base", f"{env}/Props", f"{env}/Props/Box", f"{env}/Extra/Marker", "/World/envs/env_2"]
    assert computed(view, stage, [env, f"{env}/Robot", f"{env}/Robot/Link/Camera"]).all()
    assert not computed(view, stage, others).any()


@pytest.mark.parametrize("backend", WRITERS)
def test_children_follow_their_prim(make_view: Any) -> None:
    """Hiding a Link hides its Camera (inherited); showing it again shows the Camera."""
    stage = build_stage()
    view = make_view(LINKS, stage)
    cameras = [p + "/Camera" for p in link_paths()]
    view.set_visibility(False, indices=[2])
    assert computed(view, stage, cameras).tolist() == [True, True, False, True, True, True]
    view.set_visibility(True, indices=[2])
    assert computed(view, stage, cameras).all()


def test_typeless_sibling_keeps_its_hidden_descendants() -> None:
    """Through a typeless sibling, its Imageable descendants are hidden too (pxr's MakeVisible skips non-Imageable
    siblings, which lets their children show): only the requested prim and its ancestors change."""
    stage = build_stage(("/World/envs/env_0",))
    with fv.UsdFrameView("/World/envs/env_0/Robot/Link", stage=stage) as view:
        everything = imageable_paths(stage)
        before = truth(stage, everything)
        view.set_visibility(True)
        changed = {p for p, b, a in zip(everything, before, truth(stage, everything), strict=True) if b != a}
    assert changed == {"/World/envs/env_0", "/World/envs/env_0/Robot", "/World/envs/env_0/Robot/Link",
                       "/World/envs/env_0/Robot/Link/Camera"}  # fmt: skip
    reference = build_stage(("/World/envs/env_0",))
    pxr_apply(reference, ["/World/envs/env_0/Robot/Link"], np.array([True]))
    assert truth(reference, ["/World/envs/env_0/Extra/Marker"]).all()  # pxr: the Marker shows


# ---------------------------------------------------------------- Fabric and USD stay apart


@pytest.mark.parametrize("backend", ["memory", "usdrt"])
def test_fabric_writes_do_not_touch_usd(make_view: Any) -> None:
    """A Fabric view's set_visibility changes Fabric only: the USD layer and pxr's computed visibility stay as they
    were."""
    stage = build_stage(("/World/envs/env_1",))
    layer = stage.GetRootLayer().ExportToString()
    view = make_view(LINKS, stage)
    view.set_visibility([False, True, True, False, True, False])
    assert view.get_visibility().numpy().tolist() == [False, True, True, False, True, False]
    assert stage.GetRootLayer().ExportToString() == layer
    assert truth(stage, link_paths()).tolist() == [True, False, True, True, True, True]


@pytest.mark.parametrize("backend", ["memory"])
def test_usd_edits_reach_fabric(make_view: Any) -> None:
    """On the embedded model, USD visibility edits reach Fabric: on prims Fabric never wrote, on ancestors, and on a
    prim Fabric wrote (USD's later opinion replaces it); a visibility edit leaves Fabric's poses alone."""
    stage = build_stage()
    view = make_view(LINKS, stage)
    view.set_visibility([False, True, True, True, True, True])
    view.set_world_poses(positions=np.full((ENVS, 3), 7.0, dtype=np.float32))
    UsdGeom.Imageable(stage.GetPrimAtPath(link_paths()[1])).MakeInvisible()
    UsdGeom.Imageable(stage.GetPrimAtPath("/World/envs/env_2")).MakeInvisible()
    assert view.get_visibility().numpy().tolist() == [False, False, False, True, True, True]
    UsdGeom.Imageable(stage.GetPrimAtPath(link_paths()[0])).CreateVisibilityAttr().Set(UsdGeom.Tokens.inherited)
    assert view.get_visibility().numpy().tolist() == [True, False, False, True, True, True]
    np.testing.assert_allclose(view.get_world_poses()[0].numpy(), 7.0)  # not re-read from USD
    np.testing.assert_array_equal(view.get_visibility().numpy(), truth(stage, link_paths()))


@pytest.mark.parametrize("backend", ["memory"])
def test_structural_usd_change_drops_fabric_opinions(make_view: Any) -> None:
    """A prim removed and defined again in USD starts from USD's opinion, not the one Fabric wrote for the old one."""
    stage = build_stage()
    view = make_view(LINKS, stage)
    fabric = view.fabric_stage
    box = "/World/envs/env_0/Props/Box"
    fabric.set_visibility([box], np.array([False]))
    assert not fabric.visibility([box])[0]
    stage.RemovePrim(box)
    UsdGeom.Cube.Define(stage, box)
    assert fabric.visibility([box])[0]


@pytest.mark.parametrize("backend", ["usdrt"])
def test_world_visibility_column_follows(make_view: Any) -> None:
    """Fabric's computed _worldVisibility (what Kit's renderer reads) is brought up to date under every prim whose
    opinion changed, Scope and Cube included."""
    stage, reference = build_stage(("/World/envs/env_1",)), build_stage(("/World/envs/env_1",))
    view = make_view(LINKS, stage)
    visible = np.array([False, True, True, False, True, True])
    view.set_visibility(visible)
    pxr_apply(reference, link_paths(), visible)
    everything, markers = split_markers(imageable_paths(reference))
    held = _world_visibility(view, everything + markers)
    assert held.keys() == set(everything + markers)
    assert [held[p] for p in everything] == truth(reference, everything).tolist()
    assert [held[p] for p in markers] == truth(build_stage(("/World/envs/env_1",)), markers).tolist()


def _world_visibility(view: Any, paths: list[str]) -> dict[str, bool]:
    fabric = view.fabric_stage
    return {p: bool(fabric._prim(p).GetAttribute("_worldVisibility").Get()) for p in paths}


@pytest.mark.parametrize("backend", ["ovstage"])
def test_ovstage_refuses_writes_by_name(make_view: Any) -> None:
    """ovstage reads visibility but refuses to write it, naming the provider and what to use instead; nothing is
    written."""
    stage = build_stage(("/World/envs/env_1",))
    view = make_view(LINKS, stage)
    with pytest.raises(NotImplementedError, match=r"the ovstage provider cannot write visibility.*provider='memory'"):
        view.set_visibility(False)
    assert view.get_visibility().numpy().tolist() == [True, False, True, True, True, True]


@pytest.mark.parametrize("backend", ["usd"])
def test_usd_write_is_one_change_block(make_view: Any) -> None:
    """The USD backend authors every opinion of a request (ancestors and siblings included) in one change block:
    one ObjectsChanged notice."""
    stage = build_stage(("/World/envs",))
    view = make_view(LINKS, stage)
    notices: list[Any] = []
    listener = Tf.Notice.Register(Usd.Notice.ObjectsChanged, lambda notice, sender: notices.append(notice), stage)
    try:
        view.set_visibility(True)
    finally:
        listener.Revoke()
    assert len(notices) == 1
    assert view.get_visibility().numpy().all()


# ---------------------------------------------------------------- arguments


@pytest.mark.parametrize(
    ("visible", "error", "message"),
    [
        (None, ValueError, "visible: expected a bool or a boolean array of shape (6,), got None"),
        ([1, 0, 1, 0, 1, 0], TypeError, "visible: expected booleans, got dtype int64"),
        (np.ones(5, dtype=bool), ValueError, "visible: expected shape (6,), got (5,)"),
        (np.ones((6, 1), dtype=bool), ValueError, "visible: expected shape (6,), got (6, 1)"),
        ("yes", TypeError, "visible: expected a bool or a boolean array of shape (6,), got str"),
        (1, TypeError, "visible: expected a bool or a boolean array of shape (6,), got int"),
        (wp.ones(6, dtype=wp.float32), TypeError, "visible: expected a Warp array of dtype wp.bool"),
    ],
)
def test_bad_visible_raises_and_writes_nothing(make_view: Any, visible: Any, error: type, message: str) -> None:
    """A bad ``visible`` raises a clear error naming the argument; nothing is written."""
    stage = build_stage(("/World/envs/env_1",))
    view = make_view(LINKS, stage)
    with pytest.raises(error, match=re.escape(message)):
        view.set_visibility(visible)
    assert view.get_visibility().numpy().tolist() == [True, False, True, True, True, True]


@pytest.mark.parametrize("backend", ["usd", "memory"])
def test_bad_indices_raise_like_the_pose_calls(make_view: Any, device: str) -> None:
    """Indices are checked as the pose setters check them: range, duplicates in a write, booleans, dtype."""
    stage = build_stage()
    view = make_view(LINKS, stage)
    with pytest.raises(IndexError, match="index 6 is out of range"):
        view.get_visibility(indices=[6])
    with pytest.raises(IndexError, match="index -1 is negative"):
        view.set_visibility([True], indices=[-1])
    with pytest.raises(IndexError, match="out of range"):
        view.set_visibility([True], indices=wp.array([9], dtype=wp.int32, device=device))
    with pytest.raises(ValueError, match="index 2 appears 2 times in a write"):
        view.set_visibility([False, False], indices=[2, 2])
    with pytest.raises(TypeError, match="indices: boolean masks are not indices"):
        view.get_visibility(indices=np.ones(6, dtype=bool))
    with pytest.raises(TypeError, match="indices: expected integer indices"):
        view.get_visibility(indices=np.zeros(2, dtype=np.float32))
    with pytest.raises(ValueError, match=re.escape("visible: expected shape (2,), got (3,)")):
        view.set_visibility([True, True, True], indices=[0, 1])
    assert view.get_visibility().numpy().all()


@pytest.mark.parametrize("backend", ["usd", "memory"])
def test_prim_visible_under_ancestor_hidden_in_the_same_call_raises(make_view: Any) -> None:
    """A request asking a prim visible and its ancestor invisible cannot hold (visibility prunes): ValueError naming
    both, nothing written."""
    stage = build_stage()
    view = make_view(["/World/envs/env_0/Robot", "/World/envs/env_0/Robot/Link"], stage)
    with pytest.raises(ValueError, match=re.escape("'/World/envs/env_0/Robot/Link' is asked visible and its ancestor "
                                                   "'/World/envs/env_0/Robot' invisible")):  # fmt: skip
        view.set_visibility([False, True])
    assert view.get_visibility().numpy().all()
    view.set_visibility([True, False])  # the other way round is fine
    assert view.get_visibility().numpy().tolist() == [True, False]


@pytest.mark.parametrize("backend", ["usd", "memory"])
def test_torch_inputs(make_view: Any) -> None:
    """torch bool tensors for ``visible`` and integer tensors for ``indices``; a torch float tensor is refused."""
    torch = pytest.importorskip("torch")
    stage = build_stage()
    view = make_view(LINKS, stage)
    view.set_visibility(torch.tensor([False, True]), indices=torch.tensor([1, 2]))
    assert view.get_visibility().numpy().tolist() == [True, False, True, True, True, True]
    with pytest.raises(TypeError, match=re.escape("visible: expected a boolean tensor, got dtype torch.float32")):
        view.set_visibility(torch.ones(6))
    assert wp.to_torch(view.get_visibility()).dtype == torch.bool


@pytest.mark.parametrize("backend", ["usd", "memory"])
def test_closed_view_raises(make_view: Any) -> None:
    """A closed view refuses visibility calls like every other call."""
    view = make_view(LINKS, build_stage())
    view.close()
    with pytest.raises(RuntimeError, match="is closed"):
        view.get_visibility()
    with pytest.raises(RuntimeError, match="is closed"):
        view.set_visibility(True)


@pytest.mark.parametrize("backend", ["usd", "memory"])
def test_removed_prim_raises(make_view: Any) -> None:
    """A viewed prim removed from the stage makes visibility calls raise RuntimeError naming it (recreate the view)."""
    stage = build_stage()
    view = make_view(LINKS, stage)
    stage.RemovePrim(link_paths()[3])
    with pytest.raises(RuntimeError, match=re.escape(link_paths()[3])):
        view.get_visibility()
    with pytest.raises(RuntimeError, match=re.escape(link_paths()[3])):
        view.set_visibility(True)

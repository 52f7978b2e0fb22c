# SPDX-License-Identifier: Apache-2.0
"""Tests for prim path patterns (frameview.paths), checked against a whole-stage brute-force truth."""

from __future__ import annotations

import random
import re

import numpy as np
import pytest
from helpers import decompose_all, xform_cache_world
from hypothesis import given, settings
from hypothesis import strategies as st
from pxr import Gf, Sdf, Usd, UsdGeom

import frameview
import frameview as fv
from frameview.fabric.providers.memory import attach as attach_memory
from frameview.paths import PrimTree, resolve_prim_paths

_NAMES = ["World", "env_0", "env_1", "env_2", "env_10", "env_x", "Robot", "Camera", "a", "a_1", "_b", "B2", "c0d"]
_REGEXES = ["env_.*", r"env_\d+", ".*", "[A-Z].*", "a|_b", "a.*", r"\w+_\d", "(env|a)_.+", "c[0-9]d"]
# Regexes whose character classes hold '/' (Isaac Lab's style): the '/' must not split the component.
_REGEXES += ["env_[^/]+", "[^/]*", "[^/]", r"[]/a-z]+", r"[^]/]+_[0-9]+", r"[\]/\w]+", r"[/\[A-Z][^/]*"]


def _is_regex(component: str) -> bool:
    return any(ch in ".^$*+?{}[]\\|()" for ch in component)


def _brute_force(stage: Usd.Stage, pattern: str, components: list[str] | None = None) -> list[str]:
    """Truth: visit every prim of the stage and full-match each path component (independent of the resolver).

    ``components`` defaults to ``pattern`` split at every ``/``: pass them for a pattern with ``/`` in a class.
    """
    components = pattern[1:].split("/") if components is None else components
    matchers = [re.compile(c if _is_regex(c) else re.escape(c)) for c in components]
    out = []
    for prim in stage.Traverse():
        names = prim.GetPath().pathString[1:].split("/")
        if len(names) == len(matchers) and all(m.fullmatch(n) for m, n in zip(matchers, names, strict=True)):
            out.append(prim.GetPath().pathString)
    return out


def _random_layer(rng: random.Random) -> Sdf.Layer:
    """A small random layer: def/over/class specifiers, inactive prims, children in random authoring order."""
    layer = Sdf.Layer.CreateAnonymous()

    def add_children(parent, depth: int) -> None:
        if depth == 4:
            return
        for name in rng.sample(_NAMES, rng.randint(0 if depth else 1, 4 if depth else 3)):
            roll = rng.random()
            specifier = Sdf.SpecifierOver if roll < 0.07 else Sdf.SpecifierClass if roll < 0.14 else Sdf.SpecifierDef
            spec = Sdf.PrimSpec(parent, name, specifier, "Xform" if rng.random() < 0.5 else "")
            if rng.random() < 0.07:
                spec.active = False
            add_children(spec, depth + 1)

    add_children(layer.pseudoRoot, 0)
    return layer


def _random_pattern(rng: random.Random, known_paths: list[str]) -> tuple[str, list[str]]:
    """A random pattern and its components (as generated, never re-split); most start from a known path (visible
    or not) with some components swapped for regexes."""
    if known_paths and rng.random() < 0.8:
        components = rng.choice(known_paths)[1:].split("/")
        for i, component in enumerate(components):
            if rng.random() < 0.5:
                matching = [rx for rx in _REGEXES if re.fullmatch(rx, component)]
                components[i] = rng.choice(matching if matching and rng.random() < 0.8 else _REGEXES)
    else:
        components = [
            rng.choice(_NAMES) if rng.random() < 0.5 else rng.choice(_REGEXES) for _ in range(rng.randint(1, 4))
        ]
    return "/" + "/".join(components), components


def _env_stage(envs: int = 4, *, with_camera=lambda i: True) -> Usd.Stage:
    stage = Usd.Stage.CreateInMemory()
    for i in range(envs):
        stage.DefinePrim(f"/World/envs/env_{i}/Robot", "Xform")
        if with_camera(i):
            stage.DefinePrim(f"/World/envs/env_{i}/Robot/Camera", "Camera")
    return stage


class _DictTree:
    """A PrimTree over nested dicts (insertion order = authoring order) that counts the calls it gets."""

    def __init__(self, root: dict) -> None:
        self.root = root
        self.listed: list[str] = []
        self.lookups = 0

    def _node(self, path: str) -> dict | None:
        node = self.root
        for name in path[1:].split("/") if path != "/" else []:
            node = node.get(name)
            if node is None:
                return None
        return node

    def child_names(self, path: str) -> list[str]:
        self.listed.append(path)
        return list(self._node(path))

    def has_prim(self, path: str) -> bool:
        self.lookups += 1
        return self._node(path) is not None

    def all_paths(self) -> list[str]:
        out = []

        def visit(node: dict, prefix: str) -> None:
            for name, child in node.items():
                out.append(prefix + "/" + name)
                visit(child, prefix + "/" + name)

        visit(self.root, "")
        return out


@settings(max_examples=120, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**32 - 1))
def test_patterns_match_brute_force_on_random_stages(seed: int) -> None:
    """On random stages, every pattern resolves to exactly the brute-force traversal matches, in traversal order."""
    rng = random.Random(seed)
    stage = Usd.Stage.Open(_random_layer(rng))
    known_paths = [prim.GetPath().pathString for prim in stage.TraverseAll()]
    for _ in range(25):
        pattern, components = _random_pattern(rng, known_paths)
        truth = _brute_force(stage, pattern, components)
        if truth:
            assert resolve_prim_paths(pattern, stage) == truth, pattern
        else:
            with pytest.raises(ValueError, match=re.escape(repr(pattern))):
                resolve_prim_paths(pattern, stage)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**32 - 1))
def test_prim_tree_protocol_matches_brute_force(seed: int) -> None:
    """Any PrimTree implementation resolves to the brute-force depth-first matches over its own tree."""
    rng = random.Random(seed)

    def random_tree(depth: int) -> dict:
        if depth == 4:
            return {}
        return {
            name: random_tree(depth + 1)
            for name in rng.sample(_NAMES, rng.randint(0 if depth else 1, 4 if depth else 3))
        }

    tree = _DictTree(random_tree(0))
    assert isinstance(tree, PrimTree)
    known_paths = tree.all_paths()
    for _ in range(25):
        pattern, components = _random_pattern(rng, known_paths)
        matchers = [re.compile(c if _is_regex(c) else re.escape(c)) for c in components]
        truth = [
            p
            for p in tree.all_paths()
            if len(p[1:].split("/")) == len(matchers)
            and all(m.fullmatch(n) for m, n in zip(matchers, p[1:].split("/"), strict=True))
        ]
        if truth:
            assert resolve_prim_paths(pattern, tree) == truth, pattern
        else:
            with pytest.raises(ValueError, match=re.escape(repr(pattern))):
                resolve_prim_paths(pattern, tree)


def test_resolution_lists_only_the_parents_of_regex_levels() -> None:
    """Resolution is level by level: only regex levels list children, literal levels are one lookup per match."""
    envs = {f"env_{i}": {"Robot": {"Camera": {}}, **{f"f{j}": {} for j in range(50)}} for i in range(20)}
    tree = _DictTree({"World": {"envs": envs, "Filler": {f"g{j}": {"h": {}} for j in range(500)}}})
    paths = resolve_prim_paths("/World/envs/env_.*/Robot/Camera", tree)
    assert paths == [f"/World/envs/env_{i}/Robot/Camera" for i in range(20)]
    assert tree.listed == ["/World/envs"]
    assert tree.lookups == 1 + 20  # "/World/envs" once, then "Robot/Camera" once per env

    tree.listed.clear()
    tree.lookups = 0
    assert resolve_prim_paths("/World/envs/env_3/Robot/Camera", tree) == ["/World/envs/env_3/Robot/Camera"]
    assert tree.listed == [] and tree.lookups == 1


def test_pattern_order_is_authoring_order_not_sorted() -> None:
    """A pattern returns prims in the stage's depth-first authoring order, honouring reorder metadata."""
    stage = Usd.Stage.CreateInMemory()
    for name in ["env_10", "env_2", "env_1"]:
        stage.DefinePrim(f"/World/{name}/Camera")
    expected = ["/World/env_10/Camera", "/World/env_2/Camera", "/World/env_1/Camera"]
    assert resolve_prim_paths("/World/env_.*/Camera", stage) == expected == _brute_force(stage, "/World/env_.*/Camera")

    stage.GetRootLayer().GetPrimAtPath("/World").nameChildrenOrder = ["env_1", "env_10", "env_2"]
    expected = ["/World/env_1/Camera", "/World/env_10/Camera", "/World/env_2/Camera"]
    assert resolve_prim_paths("/World/env_.*/Camera", stage) == expected == _brute_force(stage, "/World/env_.*/Camera")


def test_list_keeps_given_order() -> None:
    """A list resolves each entry in turn and concatenates the results in the given order."""
    stage = _env_stage(4)
    paths = resolve_prim_paths(
        ["/World/envs/env_3/Robot/Camera", "/World/envs/env_[01]/Robot/Camera", "/World/envs/env_2/Robot"], stage
    )
    assert paths == [
        "/World/envs/env_3/Robot/Camera",
        "/World/envs/env_0/Robot/Camera",
        "/World/envs/env_1/Robot/Camera",
        "/World/envs/env_2/Robot",
    ]
    reversed_paths = [f"/World/envs/env_{i}/Robot/Camera" for i in reversed(range(4))]
    assert resolve_prim_paths(tuple(reversed_paths), stage) == reversed_paths


def test_sdf_path_entries_are_accepted() -> None:
    """Sdf.Path works as a single path and as list entries, mixed with strings."""
    stage = _env_stage(2)
    assert resolve_prim_paths(Sdf.Path("/World/envs/env_1/Robot"), stage) == ["/World/envs/env_1/Robot"]
    paths = resolve_prim_paths([Sdf.Path("/World/envs/env_1/Robot"), "/World/envs/env_0/Robot"], stage)
    assert paths == ["/World/envs/env_1/Robot", "/World/envs/env_0/Robot"]


@pytest.mark.parametrize(
    "entries, duplicate",
    [
        (["/World/envs/env_1/Robot", "/World/envs/env_1/Robot"], "/World/envs/env_1/Robot"),
        (["/World/envs/env_.*/Robot", "/World/envs/env_2/Robot"], "/World/envs/env_2/Robot"),
        (["/World/envs/env_[01]", "/World/envs/env_[12]"], "/World/envs/env_1"),
    ],
)
def test_duplicates_across_entries_raise(entries: list[str], duplicate: str) -> None:
    """A prim matched by two list entries is a ValueError naming the duplicated path."""
    with pytest.raises(ValueError, match=re.escape(repr(duplicate))):
        resolve_prim_paths(entries, _env_stage(3))


def test_no_match_names_pattern_and_deepest_matched_level() -> None:
    """An empty result is a ValueError naming the pattern, how many prims matched, and where it stopped."""
    stage = _env_stage(5)
    with pytest.raises(ValueError, match=r"matched 5 prims up to '/World/envs/env_\.\*/Robot', none has a child named"):
        resolve_prim_paths("/World/envs/env_.*/Robot/Lidar", stage)
    with pytest.raises(ValueError, match=r"'/World/envs/env_\.\*/Robot/Lidar/Sub' matched no prim.*'Lidar'"):
        resolve_prim_paths("/World/envs/env_.*/Robot/Lidar/Sub", stage)
    with pytest.raises(ValueError, match=r"'/World/envs' has no child whose name matches 'robot_.\*'"):
        resolve_prim_paths("/World/envs/robot_.*/Camera", stage)
    with pytest.raises(ValueError, match=r"the stage root has no child named 'Scene'"):
        resolve_prim_paths("/Scene/envs/env_.*", stage)
    with pytest.raises(ValueError, match=r"prim_path\[1\] '/World/envs/env_9/Robot' matched no prim"):
        resolve_prim_paths(["/World/envs/env_0/Robot", "/World/envs/env_9/Robot"], stage)


def test_partial_matches_are_kept() -> None:
    """Envs that lack the prim are skipped; the others still match, in order."""
    stage = _env_stage(6, with_camera=lambda i: i % 2 == 0)
    expected = [f"/World/envs/env_{i}/Robot/Camera" for i in (0, 2, 4)]
    assert resolve_prim_paths("/World/envs/env_.*/Robot/Camera", stage) == expected


def test_literal_only_paths() -> None:
    """A path without regex components resolves to itself when the prim is visible."""
    stage = _env_stage(3)
    assert resolve_prim_paths("/World/envs/env_2/Robot/Camera", stage) == ["/World/envs/env_2/Robot/Camera"]
    assert resolve_prim_paths("/World", stage) == ["/World"]


def test_regex_at_the_last_level() -> None:
    """A regex as the last component matches the children of the literal prefix."""
    stage = _env_stage(3)
    for name in ["Lidar", "Imu", "CameraLeft"]:
        stage.DefinePrim(f"/World/envs/env_1/Robot/{name}")
    assert resolve_prim_paths("/World/envs/env_1/Robot/Camera.*", stage) == [
        "/World/envs/env_1/Robot/Camera",
        "/World/envs/env_1/Robot/CameraLeft",
    ]
    assert resolve_prim_paths("/World/envs/env_1/Robot/.*", stage) == _brute_force(stage, "/World/envs/env_1/Robot/.*")


def test_legal_special_characters_in_names() -> None:
    """Underscores, digits and non-ASCII letters in names resolve literally and by regex."""
    stage = Usd.Stage.CreateInMemory()
    names = ["_0", "a__b", "Env_007", "x9_", "cámara_1"]
    for name in names:
        stage.DefinePrim(f"/World/{name}/Sensor_2")
    for name in names:
        assert resolve_prim_paths(f"/World/{name}/Sensor_2", stage) == [f"/World/{name}/Sensor_2"]
    assert resolve_prim_paths(r"/World/\w+/Sensor_\d", stage) == [f"/World/{n}/Sensor_2" for n in names]
    assert resolve_prim_paths("/World/_.*", stage) == ["/World/_0"]


def test_env_prefix_does_not_match_partially() -> None:
    """Regex components are full-matched: 'env_1' (literal) and 'env_1.' do not match 'env_10'."""
    stage = _env_stage(12)
    assert resolve_prim_paths("/World/envs/env_1", stage) == ["/World/envs/env_1"]
    assert resolve_prim_paths("/World/envs/env_1.", stage) == [f"/World/envs/env_{i}" for i in (10, 11)]


@pytest.mark.parametrize("kind", ["inactive", "over", "class", "missing", "instance_proxy"])
def test_invisible_prims_are_not_matched(kind: str) -> None:
    """Inactive, undefined, abstract, missing and instance-proxy prims are errors as literals, skipped by regexes."""
    layer = Sdf.Layer.CreateAnonymous()
    world = Sdf.PrimSpec(layer, "World", Sdf.SpecifierDef, "Xform")
    Sdf.PrimSpec(world, "Visible", Sdf.SpecifierDef, "Xform")
    if kind == "instance_proxy":
        proto = Sdf.PrimSpec(layer, "Proto", Sdf.SpecifierDef, "Xform")
        Sdf.PrimSpec(proto, "Sub", Sdf.SpecifierDef, "Xform")
        target = Sdf.PrimSpec(world, "Target", Sdf.SpecifierDef, "Xform")
        target.referenceList.Prepend(Sdf.Reference(primPath="/Proto"))
        target.instanceable = True
        path = "/World/Target/Sub"
    else:
        specifier = {"over": Sdf.SpecifierOver, "class": Sdf.SpecifierClass}.get(kind, Sdf.SpecifierDef)
        if kind != "missing":
            target = Sdf.PrimSpec(world, "Target", specifier, "Xform")
            target.active = kind != "inactive"
            Sdf.PrimSpec(target, "Sub", Sdf.SpecifierDef, "Xform")
        path = "/World/Target/Sub"
    stage = Usd.Stage.Open(layer)
    assert _brute_force(stage, path) == []
    parent = "/World/Target" if kind == "instance_proxy" else "/World"  # the instance itself is visible
    with pytest.raises(ValueError, match=re.escape(f"{path!r} matched no prim: {parent!r} has no child named")):
        resolve_prim_paths(path, stage)
    assert resolve_prim_paths("/World/.*", stage) == _brute_force(stage, "/World/.*")
    with pytest.raises(ValueError, match="matched no prim"):
        resolve_prim_paths("/World/.*/Sub", stage)


def _parents_stage(count: int = 4) -> Usd.Stage:
    """Isaac Lab's fixture: /World/Parent_i at (0, 0, 1), each with a Child at (0.1, 0, 0.05) relative to it."""
    stage = Usd.Stage.CreateInMemory()
    UsdGeom.Xform.Define(stage, "/World")
    for i in range(count):
        UsdGeom.Xform.Define(stage, f"/World/Parent_{i}").AddTranslateOp().Set(Gf.Vec3d(0.0, 0.0, 1.0))
        UsdGeom.Xform.Define(stage, f"/World/Parent_{i}/Child").AddTranslateOp().Set(Gf.Vec3d(0.1, 0.0, 0.05))
    UsdGeom.Xform.Define(stage, "/World/Other/Child")
    return stage


_CHILDREN = [f"/World/Parent_{i}/Child" for i in range(4)]


@pytest.mark.parametrize(
    "pattern, components",
    [
        ("/World/Parent_[^/]*/Child", ["World", "Parent_[^/]*", "Child"]),
        ("/World/Parent_[^/]+/Child", ["World", "Parent_[^/]+", "Child"]),
        (r"/World/[]/P]arent_[0-9]/Child", ["World", r"[]/P]arent_[0-9]", "Child"]),  # leading ']' is a member
        (r"/World/[^]/O][^/]*/Child", ["World", r"[^]/O][^/]*", "Child"]),  # leading ']' after '^'
        (r"/World/[\]/\w]+_\d/Child", ["World", r"[\]/\w]+_\d", "Child"]),  # escaped ']' keeps the class open
        ("/[^/]+/Parent_[/0-9]/[C/]hild", ["[^/]+", "Parent_[/0-9]", "[C/]hild"]),
    ],
)
def test_slash_inside_a_character_class_does_not_split(pattern: str, components: list[str]) -> None:
    """A '/' inside '[...]' (also after a leading ']' or '^]', or an escaped ']') belongs to its component."""
    stage = _parents_stage()
    assert _brute_force(stage, pattern, components) == _CHILDREN
    assert resolve_prim_paths(pattern, stage) == _CHILDREN
    assert resolve_prim_paths(pattern, attach_memory(stage, "cpu")) == _CHILDREN


def test_slash_class_patterns_resolve_level_by_level() -> None:
    """A component with '/' in a class is still one level: it lists the children of its parent only."""
    parents = {f"Parent_{i}": {"Child": {}, **{f"f{j}": {"g": {}} for j in range(30)}} for i in range(10)}
    tree = _DictTree({"World": {**parents, "Filler": {f"x{j}": {"Child": {}} for j in range(300)}}})
    paths = resolve_prim_paths("/World/Parent_[^/]*/Child", tree)
    assert paths == [f"/World/Parent_{i}/Child" for i in range(10)]
    assert tree.listed == ["/World"]
    assert tree.lookups == 1 + 10  # "/World" once, then "Child" once per parent


def test_isaac_lab_parent_child_fixture_on_both_backends(device: str) -> None:
    """Isaac Lab's "/World/Parent_[^/]*/Child" builds a UsdFrameView and a FabricFrameView whose world poses equal
    UsdGeom.XformCache: (0.1, 0, 1.05), identity rotation."""
    stage = _parents_stage()
    pattern = "/World/Parent_[^/]*/Child"
    assert resolve_prim_paths(pattern, attach_memory(stage, device)) == _CHILDREN
    t, q, _ = decompose_all(xform_cache_world(stage, _CHILDREN))
    np.testing.assert_allclose(t, np.tile([0.1, 0.0, 1.05], (4, 1)), atol=1e-12)
    for make in (fv.UsdFrameView, fv.FabricFrameView):
        with make(pattern, stage=stage, device=device) as view:
            assert list(view.prim_paths) == _CHILDREN
            pos, quat = view.get_world_poses()
            np.testing.assert_allclose(pos.numpy(), t, atol=1e-6)
            np.testing.assert_allclose(np.abs(quat.numpy()), np.abs(q), atol=1e-6)


def test_no_match_error_keeps_slash_class_components_whole() -> None:
    """The no-match error quotes the pattern and its components unsplit (an escaped '/' does not split either)."""
    stage = _parents_stage()
    with pytest.raises(
        ValueError, match=re.escape("matched 4 prims up to '/World/Parent_[^/]*', none has a child named 'Lidar'")
    ):
        resolve_prim_paths("/World/Parent_[^/]*/Lidar", stage)
    with pytest.raises(ValueError, match=re.escape("'/World' has no child whose name matches 'Robot_[^/]+'")):
        resolve_prim_paths("/World/Robot_[^/]+/Child", stage)
    with pytest.raises(ValueError, match=re.escape("'/World' has no child whose name matches 'Parent_0\\\\/Child'")):
        resolve_prim_paths(r"/World/Parent_0\/Child", stage)  # an escaped '/' does not split, and never matches


@pytest.mark.parametrize(
    "pattern, message",
    [
        ("World/envs", r"expected an absolute prim path starting with '/', got 'World/envs'"),
        ("", r"expected an absolute prim path"),
        ("/", r"no empty components .* got '/'"),
        ("/World//envs", r"no empty components .* got '/World//envs'"),
        ("/World/envs/", r"no empty components .* got '/World/envs/'"),
        ("/World/env_[0-9", r"component 1 'env_\[0-9' of '/World/env_\[0-9' is not a valid regular expression"),
        ("/World/(env", r"component 1 '\(env' .* not a valid regular expression"),
        ("/World/env_[^/]+(/Robot", r"component 1 'env_\[\^/\]\+\(' of '/World/env_\[\^/\]\+\(/Robot' is not a valid"),
        ("/World/env_[0-9/Robot", r"component 1 'env_\[0-9' of '/World/env_\[0-9/Robot' is not a valid regular"),
        ("/World/bad name", r"component 1 'bad name' .* neither a valid prim name .* nor a regular expression"),
        ("/World/0env", r"component 1 '0env' .* neither a valid prim name"),
    ],
)
def test_invalid_patterns_raise_value_error(pattern: str, message: str) -> None:
    """Malformed patterns are a ValueError that names the pattern (and the component at fault)."""
    with pytest.raises(ValueError, match=message):
        resolve_prim_paths(pattern, _env_stage(1))


def test_invalid_pattern_in_a_list_names_the_entry() -> None:
    """In a list, the error names the index of the bad entry."""
    with pytest.raises(ValueError, match=r"prim_path\[1\]: expected an absolute prim path"):
        resolve_prim_paths(["/World", "World"], _env_stage(1))


def test_empty_list_raises_value_error() -> None:
    """An empty list is a ValueError, not an empty result."""
    with pytest.raises(ValueError, match="expected at least one prim path or pattern"):
        resolve_prim_paths([], _env_stage(1))


@pytest.mark.parametrize("prim_path", [3, None, b"/World", ["/World", 3]])
def test_bad_prim_path_types_raise_type_error(prim_path) -> None:
    """Non-path prim_path values and list entries are a TypeError."""
    with pytest.raises(TypeError, match=r"prim_path(\[1\])?: expected a str"):
        resolve_prim_paths(prim_path, _env_stage(1))


def test_bad_stage_type_raises_type_error() -> None:
    """A stage that is neither a Usd.Stage nor a PrimTree is a TypeError naming the protocol."""
    with pytest.raises(TypeError, match=r"stage: expected a pxr Usd\.Stage or an object implementing"):
        resolve_prim_paths("/World", object())


def test_public_name_is_the_paths_function() -> None:
    """frameview.resolve_prim_paths is exported from frameview.paths."""
    assert frameview.resolve_prim_paths is resolve_prim_paths

# SPDX-License-Identifier: Apache-2.0
"""Random prim hierarchies (hypothesis strategies), their pxr stages, and an independent float64 truth.

Nothing here calls frameview's kernels: matrices are composed with pxr ``Gf`` (through ``helpers``) and NumPy, in
Fabric's row-vector convention (``p' = p @ M``, translation in ``M[3, :3]``, ``world = local @ parent_world``).

Scene values are drawn from small discrete sets (translations in steps of 0.5, quaternions with integer components,
Euler angles in steps of 15 degrees, scale magnitudes in {0.5, 0.75, 1, 1.25, 1.5, 2}), so that whether a matrix has
shear, is a similarity or is singular is never a matter of rounding: each such test below has a wide gap between
the two answers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import warp as wp
from helpers import compose, quat_to_rotation
from hypothesis import strategies as st
from pxr import Gf, Usd, UsdGeom

from frameview.fabric.stage import LOCAL_MATRIX, WORLD_MATRIX

# ---------------------------------------------------------------- tolerances of the classifications

SHEAR_TOL = 1.0e-5
"""Relative off-diagonal of ``A @ A.T`` above which a 3x3 counts as sheared (scene shears are >= 1e-2)."""

SIMILARITY_TOL = 1.0e-5
"""Relative spread of ``A @ A.T`` around ``c^2 I`` below which a 3x3 counts as a similarity (uniform scale)."""

SINGULAR_TOL = 1.0e-9
"""``|det| / prod(row lengths)`` below which a 3x3 counts as singular (scene values give 0 or >= 0.1)."""


def shear_of(m: np.ndarray) -> float:
    """Relative shear of the upper 3x3 of ``m``: off-diagonal of the Gram matrix over its largest entry."""
    a = np.asarray(m, dtype=np.float64)[:3, :3]
    gram = a @ a.T
    off = np.abs(gram - np.diag(np.diag(gram))).max()
    return float(off / max(np.abs(gram).max(), 1e-300))


def is_sheared(m: np.ndarray) -> bool:
    """True when the upper 3x3 of ``m`` is not (per-axis scale) x (rotation), row-vector."""
    return shear_of(m) > SHEAR_TOL


def is_singular(m: np.ndarray) -> bool:
    """True when the upper 3x3 of ``m`` cannot be inverted (a zero scale somewhere above or on the prim)."""
    a = np.asarray(m, dtype=np.float64)[:3, :3]
    lengths = np.linalg.norm(a, axis=1)
    if lengths.min() < 1e-12:
        return True
    return abs(float(np.linalg.det(a))) <= SINGULAR_TOL * float(np.prod(lengths))


def is_similarity(m: np.ndarray) -> bool:
    """True when the upper 3x3 of ``m`` is ``c * Q`` with ``Q`` orthogonal (uniform scale, mirrors allowed)."""
    a = np.asarray(m, dtype=np.float64)[:3, :3]
    gram = a @ a.T
    c2 = np.trace(gram) / 3.0
    if c2 < 1e-300:
        return False
    return float(np.abs(gram - c2 * np.eye(3)).max() / c2) < SIMILARITY_TOL


def split_upper(m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unsheared upper 3x3 -> (scale with a mirror on x, row-vector rotation): ``upper = diag(s) @ r``."""
    a = np.asarray(m, dtype=np.float64)[:3, :3]
    s = np.linalg.norm(a, axis=1)
    if np.linalg.det(a) < 0:
        s[0] = -s[0]
    return s, a / s[:, None]


# ---------------------------------------------------------------- scene description

SCALE_MAGNITUDES = (1.0, 0.5, 2.0, 0.75, 1.25, 1.5)
STACKS = ("trs", "t", "tr", "none", "euler_xyz", "euler_zyx", "pivot", "matrix", "matrix_shear")
"""Op stacks: translate+orient+scale, translate only, translate+orient, no op, translate+rotateXYZ/ZYX+scale,
translate+pivot+rotateXYZ+scale+inverse pivot, one ``xformOp:transform`` without / with shear."""

PRIM_KINDS = ("xform", "xform", "xform", "xform", "camera", "scope", "typeless")
XFORMABLE_KINDS = ("xform", "camera")


@dataclasses.dataclass(frozen=True)
class NodeSpec:
    """One prim of a random scene (values are exact binary fractions or small integers)."""

    parent: int  # index of the parent node; -1: the root /World itself
    kind: str  # "xform" | "camera" | "scope" | "typeless"
    stack: str = "none"
    reset: bool = False  # !resetXformStack!
    double: bool = True  # op precision (double3 / quatd vs float3 / quatf)
    t: tuple[float, float, float] = (0.0, 0.0, 0.0)
    q: tuple[int, int, int, int] = (0, 0, 0, 1)  # xyzw, integer components, normalised when authored
    euler: tuple[float, float, float] = (0.0, 0.0, 0.0)  # degrees
    s: tuple[float, float, float] = (1.0, 1.0, 1.0)
    pivot: tuple[float, float, float] = (0.0, 0.0, 0.0)
    shear: tuple[int, int, float] = (0, 1, 0.5)  # (row, column, value) added to the upper 3x3

    @property
    def xformable(self) -> bool:
        return self.kind in XFORMABLE_KINDS

    def __repr__(self) -> str:  # compact: hypothesis prints every drawn scene
        return f"<parent {self.parent}: {self.describe()}>"

    def describe(self) -> str:
        if not self.xformable:
            return self.kind
        parts = [self.kind, self.stack, f"t={self.t}"]
        if self.stack in ("trs", "tr", "matrix", "matrix_shear"):
            parts.append(f"q={self.q}")
        if self.stack in ("euler_xyz", "euler_zyx", "pivot"):
            parts.append(f"euler={self.euler}")
        if self.stack in ("trs", "euler_xyz", "euler_zyx", "pivot", "matrix", "matrix_shear"):
            parts.append(f"s={self.s}")
        if self.stack == "pivot":
            parts.append(f"pivot={self.pivot}")
        if self.stack == "matrix_shear":
            parts.append(f"shear={self.shear}")
        if self.reset:
            parts.append("!resetXformStack!")
        if not self.double:
            parts.append("float ops")
        return " ".join(parts)


_HALF_STEPS = st.integers(-10, 10).map(lambda v: v / 2.0)
TRANSLATIONS = st.tuples(_HALF_STEPS, _HALF_STEPS, _HALF_STEPS)
QUATERNIONS = st.tuples(*[st.integers(-2, 2)] * 4).map(lambda q: q if any(q) else (0, 0, 0, 1))
_ANGLES = st.integers(-12, 12).map(lambda v: 15.0 * v)
EULERS = st.tuples(_ANGLES, _ANGLES, _ANGLES)


@st.composite
def scales(draw: st.DrawFn, deep: bool = False) -> tuple[float, float, float]:
    """Uniform, non-uniform, mirrored ((-1, -1, -1), (1, -1, 1)) or, rarely, with one zero component.

    Deep-chain nodes keep magnitude 1 (30 levels of 2x would leave float range of the tolerances)."""
    if not deep and draw(st.integers(0, 40)) == 40:
        return (0.0, 1.0, 1.0)  # singular: nothing below it has an invertible parent world
    kind = draw(st.sampled_from(("one", "mirror_all", "mirror_y") if deep else
                                ("one", "uniform", "nonuniform", "mirror_all", "mirror_y")))  # fmt: skip
    mag = st.sampled_from(SCALE_MAGNITUDES)
    if kind == "one":
        return (1.0, 1.0, 1.0)
    if kind == "uniform":
        m = draw(mag)
        return (m, m, m)
    if kind == "nonuniform":
        return (draw(mag), draw(mag), draw(mag))
    m = 1.0 if deep else draw(mag)
    return (-m, -m, -m) if kind == "mirror_all" else (m, -m, m)


@st.composite
def node_specs(draw: st.DrawFn, parent: int, deep: bool = False, root: bool = False) -> NodeSpec:
    """A prim under node ``parent``: an Xform (or Camera) with a random op stack, a Scope or a typeless prim."""
    kind = "xform" if root else draw(st.sampled_from(PRIM_KINDS))
    if kind not in XFORMABLE_KINDS:
        return NodeSpec(parent=parent, kind=kind)
    s = draw(scales(deep=deep))
    if root and s[0] == 0.0:
        s = (1.0, 1.0, 1.0)
    return NodeSpec(
        parent=parent,
        kind=kind,
        stack=draw(st.sampled_from(STACKS)),
        reset=(not root) and draw(st.integers(0, 9)) == 9,
        double=draw(st.booleans()),
        t=draw(TRANSLATIONS),
        q=draw(QUATERNIONS),
        euler=draw(EULERS),
        s=s,
        pivot=draw(TRANSLATIONS),
        shear=(draw(st.integers(0, 2)), draw(st.integers(0, 2)), draw(st.sampled_from((0.5, -0.5, 0.25)))),
    )


@st.composite
def scene_specs(draw: st.DrawFn, max_nodes: int = 14) -> tuple[NodeSpec, ...]:
    """/World plus a random shallow tree (one time in five with a prim of zero scale in it) and, one time in four, a
    deep chain (total depth up to 30)."""
    nodes = [draw(node_specs(parent=-1, root=True))]
    depth = [1]
    for _ in range(draw(st.integers(1, max_nodes))):
        parent = draw(st.integers(0, len(nodes) - 1))
        nodes.append(draw(node_specs(parent=parent)))
        depth.append(depth[parent] + 1)
    if len(nodes) > 1 and draw(st.integers(0, 4)) == 4:  # a singular prim with a subtree: world writes must raise
        k = draw(st.integers(1, len(nodes) - 1))
        if nodes[k].xformable:
            nodes[k] = dataclasses.replace(nodes[k], stack="trs", s=(0.0, 1.0, 1.0))
    if draw(st.integers(0, 3)) == 3:
        parent = draw(st.integers(0, len(nodes) - 1))
        length = min(draw(st.integers(8, 29)), 30 - depth[parent])
        for _ in range(length):
            nodes.append(draw(node_specs(parent=parent, deep=True)))
            depth.append(depth[parent] + 1)
            parent = len(nodes) - 1
    return tuple(nodes)


def node_paths(nodes: Sequence[NodeSpec]) -> list[str]:
    """Path of each node: /World, then /World/.../n<i>."""
    paths: list[str] = []
    for i, node in enumerate(nodes):
        paths.append("/World" if node.parent < 0 else f"{paths[node.parent]}/n{i}")
    return paths


def describe_scene(nodes: Sequence[NodeSpec]) -> str:
    return "\n".join(f"  {p}: {n.describe()}" for p, n in zip(node_paths(nodes), nodes, strict=True))


def unit_quat(q: Sequence[float]) -> np.ndarray:
    v = np.asarray(q, dtype=np.float64)
    return v / np.linalg.norm(v)


def _gf_quat(q: Sequence[float], double: bool):
    x, y, z, w = unit_quat(q).tolist()
    return Gf.Quatd(w, Gf.Vec3d(x, y, z)) if double else Gf.Quatf(w, Gf.Vec3f(x, y, z))


def _gf_vec(v: Sequence[float], double: bool):
    return Gf.Vec3d(*(float(x) for x in v)) if double else Gf.Vec3f(*(float(x) for x in v))


def _matrix_value(node: NodeSpec) -> Gf.Matrix4d:
    m = compose(node.t, unit_quat(node.q), node.s)
    if node.stack == "matrix_shear":
        row, col, value = node.shear
        if row == col:
            col = (row + 1) % 3
        m[row, col] += value
    return Gf.Matrix4d(*m.ravel().tolist())


def author_ops(xf: UsdGeom.Xformable, node: NodeSpec) -> None:
    """Author ``node``'s op stack on ``xf`` (scale last, so that the local 3x3 has no shear unless a matrix op says
    so)."""
    prec = UsdGeom.XformOp.PrecisionDouble if node.double else UsdGeom.XformOp.PrecisionFloat
    stack = node.stack
    if stack in ("trs", "t", "tr", "euler_xyz", "euler_zyx", "pivot"):
        xf.AddTranslateOp(prec).Set(_gf_vec(node.t, node.double))
    if stack == "pivot":
        xf.AddTranslateOp(prec, "pivot").Set(_gf_vec(node.pivot, node.double))
    if stack in ("trs", "tr"):
        xf.AddOrientOp(prec).Set(_gf_quat(node.q, node.double))
    if stack in ("euler_xyz", "pivot"):
        xf.AddRotateXYZOp(prec).Set(_gf_vec(node.euler, node.double))
    if stack == "euler_zyx":
        xf.AddRotateZYXOp(prec).Set(_gf_vec(node.euler, node.double))
    if stack in ("trs", "euler_xyz", "euler_zyx", "pivot"):
        xf.AddScaleOp(prec).Set(_gf_vec(node.s, node.double))
    if stack == "pivot":
        xf.AddTranslateOp(prec, "pivot", True)
    if stack in ("matrix", "matrix_shear"):
        xf.AddTransformOp().Set(_matrix_value(node))
    if node.reset:
        xf.SetResetXformStack(True)


@dataclasses.dataclass
class Scene:
    stage: Usd.Stage
    nodes: tuple[NodeSpec, ...]
    paths: list[str]  # every prim, parents first
    xformables: list[str]  # xformable prims, parents first
    viewable: list[str]  # xformables a view may hold (their own local matrix is invertible)


def build_scene(nodes: Sequence[NodeSpec]) -> Scene:
    """A fresh in-memory stage holding ``nodes``."""
    stage = Usd.Stage.CreateInMemory()
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.z)
    paths = node_paths(nodes)
    for path, node in zip(paths, nodes, strict=True):
        if node.kind == "xform":
            author_ops(UsdGeom.Xform.Define(stage, path), node)
        elif node.kind == "camera":
            author_ops(UsdGeom.Camera.Define(stage, path), node)
        elif node.kind == "scope":
            UsdGeom.Scope.Define(stage, path)
        else:
            stage.DefinePrim(path)
    xformables = [p for p, n in zip(paths, nodes, strict=True) if n.xformable]
    # a singular local (a zero scale, or a shear that cancels an axis) has no pose to write: such prims stay out of
    # views (their descendants may be viewed: world writes under them must raise)
    viewable = [p for p in xformables if not is_singular(pxr_local(stage, p)[0])]
    return Scene(stage, tuple(nodes), paths, xformables, viewable)


# ---------------------------------------------------------------- truth


def pxr_local(stage: Usd.Stage, path: str) -> tuple[np.ndarray, bool]:
    """(local matrix, resetXformStack) from a fresh ``UsdGeom.XformCache``."""
    cache = UsdGeom.XformCache(Usd.TimeCode.Default())
    m, reset = cache.GetLocalTransformation(stage.GetPrimAtPath(path))
    return np.array(m, dtype=np.float64), bool(reset)


def pxr_matrices(stage: Usd.Stage, paths: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(N, 4, 4) local and world matrices from one fresh ``UsdGeom.XformCache``."""
    cache = UsdGeom.XformCache(Usd.TimeCode.Default())
    prims = [stage.GetPrimAtPath(p) for p in paths]
    local = np.array([np.array(cache.GetLocalTransformation(p)[0]) for p in prims], dtype=np.float64)
    world = np.array([np.array(cache.GetLocalToWorldTransform(p)) for p in prims], dtype=np.float64)
    return local.reshape(-1, 4, 4), world.reshape(-1, 4, 4)


class Truth:
    """Float64 local matrices of every xformable prim; worlds composed in NumPy (never read back from frameview).

    A prim's parent is its nearest xformable ancestor (Scopes and typeless prims contribute identity), none with
    ``!resetXformStack!``.
    """

    def __init__(self, stage: Usd.Stage, xformables: Sequence[str]) -> None:
        self.paths = list(xformables)
        known = set(self.paths)
        self.parent: dict[str, str | None] = {}
        for path in self.paths:
            ancestor = path.rsplit("/", 1)[0]
            while ancestor and ancestor not in known:
                ancestor = ancestor.rsplit("/", 1)[0]
            self.parent[path] = ancestor or None
        self.depth = {p: p.count("/") for p in self.paths}
        self.local: dict[str, np.ndarray] = {}
        self.reset: dict[str, bool] = {}
        for path in self.paths:
            self.refresh(stage, path)

    def refresh(self, stage: Usd.Stage, path: str) -> None:
        """Take ``path``'s local matrix and resetXformStack flag from pxr (after a USD edit of its transform)."""
        self.local[path], self.reset[path] = pxr_local(stage, path)

    def parent_world(self, path: str) -> np.ndarray:
        parent = self.parent[path]
        if self.reset[path] or parent is None:
            return np.eye(4)
        return self.world(parent)

    def world(self, path: str) -> np.ndarray:
        return self.local[path] @ self.parent_world(path)

    def worlds(self) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        for path in self.paths:  # parents first
            parent = self.parent[path]
            pw = np.eye(4) if self.reset[path] or parent is None else out[parent]
            out[path] = self.local[path] @ pw

        return out

    def descendants(self, path: str) -> list[str]:
        prefix = path + "/"
        return [p for p in self.paths if p.startswith(prefix)]


def expected_world_rotation_local(local: np.ndarray, parent_world: np.ndarray, quat: np.ndarray) -> np.ndarray:
    """Upper 3x3 of the local matrix that keeps the local scale (``split_upper(local)``) and gives the prim the world
    orientation ``quat`` under the similarity ``parent_world`` (exact: the world matrix has no shear)."""
    s, _ = split_upper(local)
    p3 = np.asarray(parent_world, dtype=np.float64)[:3, :3]
    det_p = float(np.linalg.det(p3))
    c = abs(det_p) ** (1.0 / 3.0)
    s_world = c * np.abs(s)
    s_world[0] *= np.sign(np.prod(s)) * np.sign(det_p)  # the world's mirror (if any) goes on x, as decomposition does
    return np.diag(s_world) @ quat_to_rotation(quat) @ np.linalg.inv(p3)


# ---------------------------------------------------------------- Fabric matrices through the provider protocol


@wp.kernel
def _gather_tagged(
    tags: wp.fabricarray(dtype=wp.uint32),
    local: wp.fabricarray(dtype=wp.mat44d),
    world: wp.fabricarray(dtype=wp.mat44d),
    local_out: wp.array(dtype=wp.mat44d),
    world_out: wp.array(dtype=wp.mat44d),
    seen_out: wp.array(dtype=wp.int32),
):
    slot = wp.tid()
    i = int(tags[slot])
    local_out[i] = local[slot]
    world_out[i] = world[slot]
    wp.atomic_add(seen_out, i, 1)


def fabric_matrices(observer) -> tuple[np.ndarray, np.ndarray]:
    """Full float64 local and world matrices Fabric holds for the observer view's prims, in its order.

    Read through the provider protocol (``FabricStage.select`` + ``wp.fabricarray``), with the observer's own index
    tag: the exact matrices (shear included), not their decomposition.
    """
    fabric = observer.fabric_stage
    tag = observer.tag_names[0]
    n = observer.count
    with fabric.lock:
        sel = fabric.select([tag, LOCAL_MATRIX, WORLD_MATRIX], write=False)
        try:
            sel.prepare_for_reuse()
            assert sel.count == n, f"observer: Fabric holds {sel.count} of its {n} tagged prims"
            local = wp.zeros(n, dtype=wp.mat44d, device=fabric.device)
            world = wp.zeros(n, dtype=wp.mat44d, device=fabric.device)
            seen = wp.zeros(n, dtype=wp.int32, device=fabric.device)
            wp.launch(
                _gather_tagged,
                dim=n,
                inputs=[wp.fabricarray(sel, tag), wp.fabricarray(sel, LOCAL_MATRIX), wp.fabricarray(sel, WORLD_MATRIX)],
                outputs=[local, world, seen],
                device=fabric.device,
            )
        finally:
            sel.release()
    assert np.all(seen.numpy() == 1), "observer: its tag column is not a permutation"
    return local.numpy().reshape(-1, 4, 4).astype(np.float64), world.numpy().reshape(-1, 4, 4).astype(np.float64)

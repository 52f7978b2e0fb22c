# SPDX-License-Identifier: Apache-2.0
"""Scene builders for the scaling harness: the embedded Fabric model and a pxr stage with the same layout.

Layout (depth-first order, every prim xformable)::

    /World                              identity
    /World/envs                         identity
    /World/envs/env_i                   grid translation                        (Xform)
    /World/envs/env_i/Robot             translation, rotation, uniform scale    (Xform)   <- the view's parents
    /World/envs/env_i/Robot/Camera      translation, rotation                   (Camera)  <- the view
    /World/envs/env_i/f_j               translation                             (Xform)   <- filler

``filler`` prims are spread evenly over the envs (the first ``filler % envs`` envs get one more). They carry Fabric
world and local matrices but belong to no view: they are "the rest of the scene" that a stage-wide selection sees.
The robot scale is uniform, so no world matrix holds shear and world poses decompose exactly.

Fabric providers are pluggable: :data:`PROVIDERS` maps a name to a :class:`ProviderSpec` whose ``build`` returns a
:class:`Scene`. Only ``memory`` (the embedded model, built straight from arrays without USD) exists today; an
``ovstage`` spec adds a builder and a ``selection_paths`` (the paths of a selection in slot order, what usdrt's
``GetPaths()`` returns) and nothing else in the harness changes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .console import note

PATTERN = "/World/envs/env_.*/Robot/Camera"
"""The view's prim path pattern."""

ENV_SPACING = 2.5


@dataclass
class SceneArrays:
    """A scene as flat arrays, parents before children."""

    envs: int
    filler: int
    paths: list[str]
    parents: np.ndarray  # (N,) int64, -1 for the root
    local: np.ndarray  # (N, 4, 4) float64 row-vector
    type_names: list[str]
    env_rows: np.ndarray  # (envs,) row of each env Xform
    robot_rows: np.ndarray
    camera_rows: np.ndarray

    @property
    def prim_count(self) -> int:
        return len(self.paths)

    def camera_world(self) -> np.ndarray:
        """(envs, 4, 4) float64 world matrices of the cameras (World and envs are identity)."""
        return self.local[self.camera_rows] @ self.local[self.robot_rows] @ self.local[self.env_rows]


def _quats_to_row_rotations(q: np.ndarray) -> np.ndarray:
    """(n, 4) xyzw unit quaternions -> (n, 3, 3) row-vector rotations (rows are the rotated basis axes)."""
    x, y, z, w = q[:, 0], q[:, 1], q[:, 2], q[:, 3]
    r = np.empty((q.shape[0], 3, 3), dtype=np.float64)
    # column-vector rotation R, then transposed: row-vector form is R^T
    r[:, 0, 0] = 1 - 2 * (y * y + z * z)
    r[:, 1, 0] = 2 * (x * y - z * w)
    r[:, 2, 0] = 2 * (x * z + y * w)
    r[:, 0, 1] = 2 * (x * y + z * w)
    r[:, 1, 1] = 1 - 2 * (x * x + z * z)
    r[:, 2, 1] = 2 * (y * z - x * w)
    r[:, 0, 2] = 2 * (x * z - y * w)
    r[:, 1, 2] = 2 * (y * z + x * w)
    r[:, 2, 2] = 1 - 2 * (x * x + y * y)
    return r


def _random_quats(rng: np.random.Generator, n: int) -> np.ndarray:
    q = rng.normal(size=(n, 4))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    q[q[:, 3] < 0] *= -1.0
    return q


def scene_arrays(envs: int, filler: int, seed: int = 0) -> SceneArrays:
    """Build the scene's paths, parents and local matrices; vectorised except for the path strings.

    Args:
        envs: Number of envs (each adds an env Xform, a Robot and a Camera).
        filler: Number of filler Xforms, spread evenly over the envs.
        seed: Seed of the random transforms.
    """
    if envs < 1:
        raise ValueError(f"envs: expected >= 1, got {envs}")
    if filler < 0:
        raise ValueError(f"filler: expected >= 0, got {filler}")
    rng = np.random.default_rng(seed)
    per_env, extra = divmod(filler, envs)
    fill = np.full(envs, per_env, dtype=np.int64)
    fill[:extra] += 1
    sizes = 3 + fill
    starts = 2 + np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    n = int(2 + sizes.sum())

    paths: list[str] = ["/World", "/World/envs"]
    for i in range(envs):
        env = f"/World/envs/env_{i}"
        paths += [env, env + "/Robot", env + "/Robot/Camera"]
        paths += [f"{env}/f_{j}" for j in range(int(fill[i]))]

    parents = np.empty(n, dtype=np.int64)
    parents[0], parents[1] = -1, 0
    parents[starts] = 1
    parents[starts + 1] = starts
    parents[starts + 2] = starts + 1
    fill_start = np.concatenate([[0], np.cumsum(fill)[:-1]])
    filler_rows = np.repeat(starts + 3, fill) + (np.arange(filler) - np.repeat(fill_start, fill))
    parents[filler_rows] = np.repeat(starts, fill)

    local = np.zeros((n, 4, 4), dtype=np.float64)
    local[:, [0, 1, 2, 3], [0, 1, 2, 3]] = 1.0
    side = int(np.ceil(np.sqrt(envs)))
    ids = np.arange(envs)
    local[starts, 3, 0] = ENV_SPACING * (ids % side)
    local[starts, 3, 1] = ENV_SPACING * (ids // side)
    robot_scale = rng.uniform(0.5, 2.0, size=envs)
    local[starts + 1, :3, :3] = robot_scale[:, None, None] * _quats_to_row_rotations(_random_quats(rng, envs))
    local[starts + 1, 3, :3] = rng.uniform(-0.5, 0.5, size=(envs, 3))
    local[starts + 2, :3, :3] = _quats_to_row_rotations(_random_quats(rng, envs))
    local[starts + 2, 3, :3] = rng.uniform(-0.2, 0.2, size=(envs, 3))
    local[filler_rows, 3, :3] = rng.uniform(-1.0, 1.0, size=(filler, 3))

    type_names = ["Xform"] * n
    for r in (starts + 2).tolist():
        type_names[r] = "Camera"
    return SceneArrays(envs, filler, paths, parents, local, type_names, starts, starts + 1, starts + 2)


@dataclass
class Scene:
    """A built scene: what a view is handed (``stage``) and the Fabric stage behind it (``fabric``)."""

    provider: str
    device: str
    arrays: SceneArrays
    stage: Any  # handed to FabricFrameView(stage=...)
    fabric: Any  # a frameview FabricStage
    build_s: float
    selection_paths: Callable[[Any], list[str]]  # paths of a prepared selection, in slot order
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def prim_count(self) -> int:
        return self.arrays.prim_count


@dataclass(frozen=True)
class ProviderSpec:
    """How to build a scene on one Fabric provider."""

    name: str
    build: Callable[[SceneArrays, str], Scene]
    description: str


def _build_memory(arrays: SceneArrays, device: str) -> Scene:
    from frameview.fabric.providers.memory import MemoryFabricStage

    t0 = time.perf_counter()
    model = MemoryFabricStage.from_arrays(
        arrays.paths, arrays.parents, arrays.local, type_names=arrays.type_names, device=device
    )
    build_s = time.perf_counter() - t0

    def selection_paths(sel: Any) -> list[str]:
        # usdrt's selection.GetPaths(): every path of the selection, in slot order, as Python objects
        return sel.paths()

    return Scene("memory", device, arrays, model, model, build_s, selection_paths)


PROVIDERS: dict[str, ProviderSpec] = {
    "memory": ProviderSpec("memory", _build_memory, "embedded Fabric model, populated from arrays (no USD)"),
    # "ovstage": ProviderSpec("ovstage", _build_ovstage, "real Fabric without Kit"),  # added with the provider
}


def build_usd_stage(arrays: SceneArrays, progress: Callable[[int], None] | None = None) -> tuple[Any, float, float]:
    """Author the same scene on a pxr stage with Sdf batch edits inside one ``Sdf.ChangeBlock``, then open it.

    Env, Robot and Camera get ``[xformOp:translate, xformOp:orient, xformOp:scale]`` (double precision, the stack
    UsdFrameView writes in place); filler prims get ``xformOp:translate``.

    Args:
        arrays: The scene.
        progress: Called with the number of prims authored since the last call.

    Returns:
        ``(stage, author_s, open_s)``.
    """
    from pxr import Gf, Sdf, Usd, Vt

    t0 = time.perf_counter()
    local = arrays.local
    double3, quatd = Sdf.ValueTypeNames.Double3, Sdf.ValueTypeNames.Quatd
    tokens = Sdf.ValueTypeNames.TokenArray
    trs = Vt.TokenArray(["xformOp:translate", "xformOp:orient", "xformOp:scale"])
    t_only = Vt.TokenArray(["xformOp:translate"])
    # per-prim components, vectorised: translation rows, scale = row lengths, rotation quaternion (wxyz for Gf)
    scale = np.linalg.norm(local[:, :3, :3], axis=2)
    rot = local[:, :3, :3] / scale[:, :, None]
    quat = _row_rotations_to_quats(rot)
    trans = local[:, 3, :3]

    def author(spec: Any, row: int, full: bool) -> None:
        a = Sdf.AttributeSpec(spec, "xformOp:translate", double3)
        a.default = Gf.Vec3d(*trans[row].tolist())
        if full:
            x, y, z, w = quat[row].tolist()
            Sdf.AttributeSpec(spec, "xformOp:orient", quatd).default = Gf.Quatd(w, x, y, z)
            Sdf.AttributeSpec(spec, "xformOp:scale", double3).default = Gf.Vec3d(*scale[row].tolist())
        Sdf.AttributeSpec(spec, "xformOpOrder", tokens, variability=Sdf.VariabilityUniform).default = (
            trs if full else t_only
        )

    layer = Sdf.Layer.CreateAnonymous("frameview_scaling")
    parent_of = arrays.parents
    specs: list[Any] = [None] * arrays.prim_count
    pending = 0
    with Sdf.ChangeBlock():
        specs[0] = Sdf.PrimSpec(layer, "World", Sdf.SpecifierDef, "Xform")
        specs[1] = Sdf.PrimSpec(specs[0], "envs", Sdf.SpecifierDef, "Xform")
        env_rows = set(arrays.env_rows.tolist())
        robot_rows = set(arrays.robot_rows.tolist())
        for row in range(2, arrays.prim_count):
            name = arrays.paths[row].rsplit("/", 1)[1]
            spec = Sdf.PrimSpec(specs[parent_of[row]], name, Sdf.SpecifierDef, arrays.type_names[row])
            full = arrays.type_names[row] == "Camera" or row in robot_rows or row in env_rows
            author(spec, row, full)
            if full and arrays.type_names[row] != "Camera":
                specs[row] = spec  # only envs and robots have children
            pending += 1
            if progress is not None and pending >= 4096:
                progress(pending)
                pending = 0
    if progress is not None and pending:
        progress(pending)
    del specs
    t1 = time.perf_counter()
    stage = Usd.Stage.Open(layer)
    t2 = time.perf_counter()
    return stage, t1 - t0, t2 - t1


def _row_rotations_to_quats(r: np.ndarray) -> np.ndarray:
    """(n, 3, 3) row-vector rotations -> (n, 4) xyzw quaternions (w >= 0); Shepperd's method, vectorised."""
    m = np.swapaxes(r, 1, 2)  # column-vector form
    n = m.shape[0]
    q = np.empty((n, 4), dtype=np.float64)
    tr = m[:, 0, 0] + m[:, 1, 1] + m[:, 2, 2]
    diag = np.stack([m[:, 0, 0], m[:, 1, 1], m[:, 2, 2]], axis=1)
    case = np.where(tr > diag.max(axis=1), 3, diag.argmax(axis=1))
    for c in range(4):
        k = np.flatnonzero(case == c)
        if not k.size:
            continue
        mk = m[k]
        if c == 3:
            s = np.sqrt(1.0 + tr[k]) * 2
            q[k] = np.stack(
                [
                    (mk[:, 2, 1] - mk[:, 1, 2]) / s,
                    (mk[:, 0, 2] - mk[:, 2, 0]) / s,
                    (mk[:, 1, 0] - mk[:, 0, 1]) / s,
                    0.25 * s,
                ],
                axis=1,
            )
        else:
            i, j, h = c, (c + 1) % 3, (c + 2) % 3
            s = np.sqrt(1.0 + mk[:, i, i] - mk[:, j, j] - mk[:, h, h]) * 2
            out = np.empty((k.size, 4))
            out[:, i] = 0.25 * s
            out[:, j] = (mk[:, j, i] + mk[:, i, j]) / s
            out[:, h] = (mk[:, h, i] + mk[:, i, h]) / s
            out[:, 3] = (mk[:, h, j] - mk[:, j, h]) / s
            q[k] = out
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    q[q[:, 3] < 0] *= -1.0
    return q


def check_poses(arrays: SceneArrays, pos: np.ndarray, quat: np.ndarray, what: str) -> dict:
    """Compare camera world poses to the float64 truth of the scene arrays."""
    world = arrays.camera_world()
    rot = world[:, :3, :3] / np.linalg.norm(world[:, :3, :3], axis=2)[:, :, None]
    q_ref = _row_rotations_to_quats(rot)
    pos_err = float(np.abs(pos - world[:, 3, :3]).max())
    quat_err = float((1.0 - np.abs(np.sum(quat * q_ref, axis=1))).max())
    ok = pos_err < 1e-3 and quat_err < 1e-5
    if not ok:
        note(f"{what}: world poses differ from the float64 truth (pos {pos_err:.2e}, quat {quat_err:.2e})")
    return {"what": what, "max_pos_err": pos_err, "max_quat_err": quat_err, "ok": ok}

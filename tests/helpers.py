# SPDX-License-Identifier: Apache-2.0
"""Shared test helpers: small stage builders and a float64 pose model independent of frameview.

The truth here never calls frameview: matrices are composed and decomposed with NumPy (float64) and pxr ``Gf``
(row-vector like Fabric: a point transforms as ``p @ M``, translation in ``M[3, :3]``).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence

import numpy as np
from pxr import Gf, Usd, UsdGeom

# ---------------------------------------------------------------- random values


def random_quats(rng: np.random.Generator, n: int) -> np.ndarray:
    """(n, 4) float64 unit quaternions, xyzw, uniformly distributed, either sign of w."""
    q = rng.normal(size=(n, 4))
    return q / np.linalg.norm(q, axis=1, keepdims=True)


def right_angle_quats() -> np.ndarray:
    """(24, 4) float64 xyzw: the 24 rotations mapping coordinate axes onto coordinate axes (w >= 0)."""
    out = []
    for perm in itertools.permutations(range(3)):
        for signs in itertools.product((1.0, -1.0), repeat=3):
            m = np.zeros((3, 3))
            for row, (col, sign) in enumerate(zip(perm, signs, strict=True)):
                m[row, col] = sign
            if np.linalg.det(m) > 0:
                out.append(rotation_to_quat(m))
    return np.array(out)


# ---------------------------------------------------------------- matrices (row-vector, float64)


def quat_to_rotation(q: Sequence[float]) -> np.ndarray:
    """xyzw quaternion (any norm > 0) -> (3, 3) row-vector rotation (rows are the rotated basis axes), via Gf."""
    x, y, z, w = (float(v) for v in q)
    gq = Gf.Quatd(w, Gf.Vec3d(x, y, z)).GetNormalized()
    return np.array(Gf.Matrix3d(gq), dtype=np.float64)


def rotation_to_quat(r: np.ndarray) -> np.ndarray:
    """(3, 3) row-vector rotation -> xyzw quaternion with w >= 0, via Gf."""
    gq = Gf.Matrix3d(*np.asarray(r, dtype=np.float64).ravel().tolist()).ExtractRotation().GetQuat()
    q = np.array([*gq.GetImaginary(), gq.GetReal()], dtype=np.float64)
    q /= np.linalg.norm(q)
    return -q if q[3] < 0 else q


def quat_xyzw_to_rotation(q: np.ndarray) -> np.ndarray:
    """(N, 4) xyzw unit quaternions -> (N, 3, 3) column-vector rotation matrices, float64."""
    x, y, z, w = q.T
    return np.stack(
        [
            np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)], axis=-1),
            np.stack([2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)], axis=-1),
            np.stack([2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)], axis=-1),
        ],
        axis=1,
    )


def compose(t: Sequence[float], q: Sequence[float], s: Sequence[float]) -> np.ndarray:
    """Row-vector matrix ``scale @ rotate @ translate`` built with Gf (independent of frameview's kernels)."""
    x, y, z, w = (float(v) for v in q)
    m = (
        Gf.Matrix4d().SetScale(Gf.Vec3d(*(float(v) for v in s)))
        * Gf.Matrix4d().SetRotate(Gf.Quatd(w, Gf.Vec3d(x, y, z)).GetNormalized())
        * Gf.Matrix4d().SetTranslate(Gf.Vec3d(*(float(v) for v in t)))
    )
    return np.array(m, dtype=np.float64)


def decompose(m: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row-vector matrix without shear -> (translation, xyzw quaternion with w >= 0, scale); a mirror goes on x."""
    m = np.asarray(m, dtype=np.float64)
    upper = m[:3, :3]
    s = np.linalg.norm(upper, axis=1)
    if np.linalg.det(upper) < 0:
        s[0] = -s[0]
    return m[3, :3].copy(), rotation_to_quat(upper / s[:, None]), s


def decompose_all(mats: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(N, 4, 4) -> (N, 3), (N, 4), (N, 3) as :func:`decompose`."""
    parts = [decompose(m) for m in mats]
    if not parts:
        return np.zeros((0, 3)), np.zeros((0, 4)), np.zeros((0, 3))
    return tuple(np.array(p) for p in zip(*parts, strict=True))  # type: ignore[return-value]


def has_shear(m: np.ndarray, tol: float = 1e-9) -> bool:
    """True when the upper 3x3 of ``m`` is not (per-axis scale) x (rotation)."""
    upper = np.asarray(m, dtype=np.float64)[:3, :3]
    gram = upper @ upper.T
    off = gram - np.diag(np.diag(gram))
    return bool(np.max(np.abs(off)) > tol * max(1.0, float(np.max(np.abs(gram)))))


# ---------------------------------------------------------------- comparisons


def canonical(q: np.ndarray) -> np.ndarray:
    """Quaternions (N, 4) xyzw with the sign chosen so that w >= 0."""
    q = np.asarray(q, dtype=np.float64).reshape(-1, 4)
    return np.where(q[:, 3:4] < 0, -q, q)


def assert_quats_close(actual: np.ndarray, expected: np.ndarray, atol: float = 2e-5) -> None:
    """Same rotations (q and -q are equal); ``actual`` must be unit length."""
    a = np.asarray(actual, dtype=np.float64).reshape(-1, 4)
    e = canonical(expected)
    e = e / np.linalg.norm(e, axis=1, keepdims=True)
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1.0, atol=atol)
    err = np.minimum(np.abs(a - e).max(axis=1), np.abs(a + e).max(axis=1))
    assert np.all(err <= atol), f"quaternions differ by up to {err.max():.3g} (rows {np.flatnonzero(err > atol)})"


def assert_w_nonnegative(q: np.ndarray) -> None:
    """Quaternions are returned with w >= 0."""
    assert np.all(np.asarray(q)[:, 3] >= 0.0), f"w < 0 in rows {np.flatnonzero(np.asarray(q)[:, 3] < 0)}"


# ---------------------------------------------------------------- stages


def set_trs(xf: UsdGeom.Xformable, t: Sequence[float], q: Sequence[float] | None, s: Sequence[float] | None) -> None:
    """Author ``translate``, then ``orient`` (``q`` xyzw, normalised) and ``scale`` where given, in double precision."""
    xf.AddTranslateOp().Set(Gf.Vec3d(*(float(v) for v in t)))
    if q is not None:
        x, y, z, w = (float(v) for v in q)
        xf.AddOrientOp(UsdGeom.XformOp.PrecisionDouble).Set(Gf.Quatd(w, Gf.Vec3d(x, y, z)).GetNormalized())
    if s is not None:
        xf.AddScaleOp(UsdGeom.XformOp.PrecisionDouble).Set(Gf.Vec3d(*(float(v) for v in s)))


def env_paths(num_envs: int, leaf: str = "") -> list[str]:
    """``/World/envs/env_i`` + ``leaf`` for i in range(num_envs), in creation order."""
    return [f"/World/envs/env_{i}{leaf}" for i in range(num_envs)]


def build_env_stage(
    num_envs: int,
    seed: int,
    *,
    filler: int = 0,
    robot_scale: str = "nonuniform",
    camera_rotation: str = "right_angle",
    camera_scale: bool = True,
) -> Usd.Stage:
    """An in-memory stage of ``num_envs`` environments, every level transformed, no shear anywhere.

    Layout (all Xformable, xformOps [translate, orient, scale]):

    - ``/World`` translated and rotated 90 degrees about x; ``/World/envs`` uniform scale 1.5;
    - ``/World/envs/env_i``: grid translation and a yaw of ``(i % 4) * 90`` degrees;
    - ``.../Robot``: random translation, random orientation, scale non-uniform in [0.5, 2] (``robot_scale=
      "nonuniform"``) or uniform (``"uniform"``);
    - ``.../Robot/Camera`` (a ``UsdGeom.Camera``): random offset, a rotation from the 24 right-angle rotations
      (``camera_rotation="right_angle"``, which keeps its world matrix free of shear under the non-uniform robot
      scale) or a random one (``"random"``; use with ``robot_scale="uniform"``), and a non-uniform scale when
      ``camera_scale``;
    - ``filler`` extra Xforms under ``/World/filler`` (in groups of 1000), matched by no env pattern.

    Args:
        num_envs: Number of environments.
        seed: Seed of the random values.
        filler: Number of extra Xform prims.
        robot_scale: ``"nonuniform"`` or ``"uniform"``.
        camera_rotation: ``"right_angle"`` or ``"random"``.
        camera_scale: Give the cameras a non-uniform scale.

    Returns:
        The stage.
    """
    rng = np.random.default_rng(seed)
    stage = Usd.Stage.CreateInMemory()
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.z)
    half = np.sqrt(0.5)
    set_trs(UsdGeom.Xform.Define(stage, "/World"), (0.5, -1.0, 2.0), (half, 0.0, 0.0, half), None)
    set_trs(UsdGeom.Xform.Define(stage, "/World/envs"), (0.0, 0.0, 0.0), None, (1.5, 1.5, 1.5))
    yaws = np.array([[0.0, 0.0, 0.0, 1.0], [0.0, 0.0, half, half], [0.0, 0.0, 1.0, 0.0], [0.0, 0.0, half, -half]])
    right = right_angle_quats()
    side = max(1, int(np.ceil(np.sqrt(num_envs))))
    for i, env in enumerate(env_paths(num_envs)):
        set_trs(UsdGeom.Xform.Define(stage, env), (2.0 * (i % side), 2.0 * (i // side), 0.0), yaws[i % 4], None)
        robot = UsdGeom.Xform.Define(stage, f"{env}/Robot")
        if robot_scale == "nonuniform":
            scale = rng.uniform(0.5, 2.0, size=3)
        elif robot_scale == "uniform":
            scale = np.full(3, rng.uniform(0.5, 2.0))
        else:
            raise ValueError(f"robot_scale: expected 'nonuniform' or 'uniform', got {robot_scale!r}")
        set_trs(robot, rng.uniform(-1.0, 1.0, size=3), random_quats(rng, 1)[0], scale)
        camera = UsdGeom.Camera.Define(stage, f"{env}/Robot/Camera")
        if camera_rotation == "right_angle":
            cam_q = right[rng.integers(len(right))]
        elif camera_rotation == "random":
            cam_q = random_quats(rng, 1)[0]
        else:
            raise ValueError(f"camera_rotation: expected 'right_angle' or 'random', got {camera_rotation!r}")
        cam_s = rng.uniform(0.5, 2.0, size=3) if camera_scale else None
        set_trs(camera, rng.uniform(-0.5, 0.5, size=3), cam_q, cam_s)
    for k in range(filler):
        group = f"/World/filler/group_{k // 1000}"
        if k % 1000 == 0:
            UsdGeom.Xform.Define(stage, group)
        UsdGeom.Xform.Define(stage, f"{group}/x_{k % 1000}").AddTranslateOp().Set(Gf.Vec3d(float(k), 0.0, 0.0))
    return stage


def xform_cache_world(stage: Usd.Stage, paths: Iterable[str]) -> np.ndarray:
    """(N, 4, 4) float64 world matrices from a fresh ``UsdGeom.XformCache``."""
    cache = UsdGeom.XformCache(Usd.TimeCode.Default())
    return np.array([np.array(cache.GetLocalToWorldTransform(stage.GetPrimAtPath(p))) for p in paths]).reshape(-1, 4, 4)


def xform_cache_local(stage: Usd.Stage, paths: Iterable[str]) -> np.ndarray:
    """(N, 4, 4) float64 local matrices (``GetLocalTransformation``) from a fresh ``UsdGeom.XformCache``."""
    cache = UsdGeom.XformCache(Usd.TimeCode.Default())
    return np.array([np.array(cache.GetLocalTransformation(stage.GetPrimAtPath(p))[0]) for p in paths]).reshape(
        -1, 4, 4
    )


# ---------------------------------------------------------------- pose model


class PoseModel:
    """What the poses should be after a sequence of writes: float64 local matrices, composed in NumPy.

    Built from the stage's initial state (``UsdGeom.XformCache``); afterwards it never looks at the stage again, so
    it is the truth for backends that do not write USD (Fabric). Tracked prims are those given; a tracked prim whose
    parent is tracked composes with the parent's modelled world, otherwise with the parent's initial world.

    Semantics modelled (the contract): a pose write in either space keeps the prim's **local** scale; a world write
    solves the local translation exactly and the local rotation as ``R_world @ R_parent^T`` (exact whenever the
    parent world has no shear and the relative rotation maps the parent's scale axes onto each other).
    """

    def __init__(self, stage: Usd.Stage, paths: Iterable[str]) -> None:
        self.paths = list(dict.fromkeys(paths))
        self.local = dict(zip(self.paths, xform_cache_local(stage, self.paths), strict=True))
        parents = [str(stage.GetPrimAtPath(p).GetParent().GetPath()) for p in self.paths]
        self.parent = dict(zip(self.paths, parents, strict=True))
        self.fixed_parent_world = dict(zip(parents, xform_cache_world(stage, parents), strict=True))

    def parent_world(self, path: str) -> np.ndarray:
        """Modelled world matrix of the parent of ``path``."""
        parent = self.parent[path]
        return self.world(parent) if parent in self.local else self.fixed_parent_world[parent]

    def world(self, path: str) -> np.ndarray:
        """Modelled world matrix of ``path`` (row-vector: local @ parent world)."""
        return self.local[path] @ self.parent_world(path)

    def worlds(self, paths: Sequence[str]) -> np.ndarray:
        """(N, 4, 4) modelled world matrices."""
        return np.array([self.world(p) for p in paths]).reshape(-1, 4, 4)

    def locals(self, paths: Sequence[str]) -> np.ndarray:
        """(N, 4, 4) modelled local matrices."""
        return np.array([self.local[p] for p in paths]).reshape(-1, 4, 4)

    def set_local(self, paths: Sequence[str], t: np.ndarray | None = None, q: np.ndarray | None = None) -> None:
        """Model ``set_local_poses``: replace translation and/or rotation, keep the local scale."""
        for k, path in enumerate(paths):
            t0, q0, s0 = decompose(self.local[path])
            self.local[path] = compose(t0 if t is None else t[k], q0 if q is None else q[k], s0)

    def set_world(self, paths: Sequence[str], p: np.ndarray | None = None, q: np.ndarray | None = None) -> None:
        """Model ``set_world_poses``: solve the local translation / rotation under the parent, keep the local scale."""
        for k, path in enumerate(paths):
            parent = self.parent_world(path)
            t0, q0, s0 = decompose(self.local[path])
            if p is not None:
                t0 = (np.append(np.asarray(p[k], dtype=np.float64), 1.0) @ np.linalg.inv(parent))[:3]
            if q is not None:
                _, parent_q, _ = decompose(parent)
                rel = quat_to_rotation(q[k]) @ quat_to_rotation(parent_q).T
                q0 = rotation_to_quat(rel)
            self.local[path] = compose(t0, q0, s0)

    def set_local_scales(self, paths: Sequence[str], s: np.ndarray) -> None:
        """Model ``set_local_scales``: replace the scale, keep translation and rotation."""
        for k, path in enumerate(paths):
            t0, q0, _ = decompose(self.local[path])
            self.local[path] = compose(t0, q0, s[k])

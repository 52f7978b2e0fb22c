# SPDX-License-Identifier: Apache-2.0
"""Writer scopes split by component, over nested frames on mirrored and scaled parents, on every frame backend.

The scene is the one that placed cameras metres away from the pose written: ``env_i/Body`` (uniform scale 2 on even
envs, non-uniform on odd ones) / ``Mount`` (mirrored on odd envs, scaled 1.5 on even ones, rotateXYZ) / ``Camera``
(translate + rotateX), and a world frame ``/World/Fixed``, viewed as ``[cameras, mounts, Fixed]``: every camera's
parent is in the view. A scope holds a random sequence of writes (positions only, orientations only, both, scales;
all rows, host or device indices, masks; the same rows twice), and the result is checked against what the scope
promises, from the written values and the matrices before the scope, in float64:

- world scope: each prim's world position is the last position written to it, its world orientation the last one
  written (where its parent's world matrix is a similarity); a component never written keeps its local value (local
  translation, local rotation, local scale); world scales: axis lengths of the world matrix (similarity parents);
- local scope: each component is the last local value written, the others are kept;
- prims never written keep their local matrix.

What the backend holds is read independently of the views' read kernels where it can be: ``UsdGeom.XformCache`` for
the usd backend, Fabric's matrices through the provider protocol for the fabric backend. The newton backend holds
frame offsets only: its world and local poses are read through the view, body poses from Newton's ``body_q``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
import warp as wp
from helpers import decompose, quat_to_rotation
from property._hierarchy import fabric_matrices, is_similarity
from pxr import Gf, Usd, UsdGeom, UsdPhysics

import frameview as fv

ENVS = 4
PATHS = ["/World/envs/env_.*/Body/Mount/Camera", "/World/envs/env_.*/Body/Mount", "/World/Fixed"]
BACKENDS = ("usd", "fabric", "newton")
SEQUENCES = 12  # random sequences per backend, space and device (plus the fixed cases)


def build_stage() -> Usd.Stage:
    stage = Usd.Stage.CreateInMemory()
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.z)
    UsdGeom.Xform.Define(stage, "/World")
    for i in range(ENVS):
        env = f"/World/envs/env_{i}"
        UsdGeom.Xform.Define(stage, env).AddTranslateOp().Set(Gf.Vec3d(2.0 * i, 0.0, 0.0))
        body = UsdGeom.Xform.Define(stage, f"{env}/Body")
        body.AddTranslateOp().Set(Gf.Vec3d(0.0, 0.5 * i, 1.0))
        body.AddOrientOp().Set(Gf.Quatf(float(np.cos(0.2 * i)), 0.0, 0.0, float(np.sin(0.2 * i))))
        body.AddScaleOp().Set(Gf.Vec3f(2.0, 2.0, 2.0) if i % 2 == 0 else Gf.Vec3f(1.0, 1.5, 0.75))
        UsdPhysics.RigidBodyAPI.Apply(body.GetPrim())
        mass = UsdPhysics.MassAPI.Apply(body.GetPrim())
        mass.CreateMassAttr(1.0)
        mass.CreateDiagonalInertiaAttr(Gf.Vec3f(0.1, 0.1, 0.1))
        mount = UsdGeom.Xform.Define(stage, f"{env}/Body/Mount")
        mount.AddTranslateOp().Set(Gf.Vec3d(0.2, 0.1, 0.3))
        mount.AddRotateXYZOp().Set(Gf.Vec3f(10.0, 20.0, 30.0))
        mount.AddScaleOp().Set(Gf.Vec3f(-1.0, 1.0, 1.0) if i % 2 else Gf.Vec3f(1.5, 1.5, 1.5))
        cam = UsdGeom.Camera.Define(stage, f"{env}/Body/Mount/Camera")
        cam.AddTranslateOp().Set(Gf.Vec3d(0.0, 0.2, 0.4))
        cam.AddRotateXOp().Set(25.0)
    UsdGeom.Xform.Define(stage, "/World/Fixed").AddTranslateOp().Set(Gf.Vec3d(1.0, 2.0, 3.0))
    return stage


class Setup:
    """A backend's view over the scene and an independent reader of its local and world matrices."""

    def __init__(self, backend: str, device: str) -> None:
        self.stage = build_stage()
        self.backend = backend
        self.observer: Any = None
        if backend == "newton":
            newton = pytest.importorskip("newton")
            builder = newton.ModelBuilder()
            builder.add_usd(self.stage)
            self.model = builder.finalize(device=device)
            self.state = self.model.state()
            body_q = self.state.body_q.numpy()
            body_q[:, :3] += np.random.default_rng(0).normal(size=(body_q.shape[0], 3))  # bodies moved since built
            self.state.body_q.assign(body_q)
            self.view = fv.NewtonFrameView(PATHS, stage=self.stage, model=self.model, state=self.state)
        elif backend == "fabric":
            self.view = fv.FabricFrameView(PATHS, stage=self.stage, device=device)
            self.observer = fv.FabricFrameView(list(self.view.prim_paths), stage=self.stage, device=device)
        else:
            self.view = fv.UsdFrameView(PATHS, stage=self.stage, device=device)
        self.paths = list(self.view.prim_paths)

    def matrices(self) -> tuple[np.ndarray, np.ndarray]:
        """(N, 4, 4) local and world matrices, float64, row-vector."""
        if self.backend == "usd":
            cache = UsdGeom.XformCache(Usd.TimeCode.Default())
            prims = [self.stage.GetPrimAtPath(p) for p in self.paths]
            local = np.array([np.array(cache.GetLocalTransformation(p)[0]) for p in prims])
            world = np.array([np.array(cache.GetLocalToWorldTransform(p)) for p in prims])
            return local, world
        if self.backend == "fabric":
            return fabric_matrices(self.observer)
        mats = []
        for space in ("local", "world"):
            get = self.view.get_local_poses if space == "local" else self.view.get_world_poses
            scales = self.view.get_local_scales if space == "local" else self.view.get_world_scales
            pos, quat = (a.numpy().astype(np.float64) for a in get())
            s = scales().numpy().astype(np.float64)
            m = np.zeros((len(self.paths), 4, 4))
            for k in range(len(self.paths)):
                m[k, :3, :3] = np.diag(s[k]) @ quat_to_rotation(quat[k])
                m[k, 3, :3], m[k, 3, 3] = pos[k], 1.0
            mats.append(m)
        return mats[0], mats[1]

    def close(self) -> None:
        self.view.close()
        if self.observer is not None:
            self.observer.close()


@dataclasses.dataclass
class Write:
    rows: np.ndarray  # view indices written, in data order
    pos: np.ndarray | None = None
    quat: np.ndarray | None = None
    scale: np.ndarray | None = None
    how: str = "all"  # "all", "list", "numpy", "warp", "torch", "mask"


def _unit(q: np.ndarray) -> np.ndarray:
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def random_write(rng: np.random.Generator, n: int, scales: bool) -> Write:
    how = str(rng.choice(["all", "list", "numpy", "warp", "torch", "mask"]))
    rows = np.arange(n) if how == "all" else np.sort(rng.choice(n, size=int(rng.integers(1, n + 1)), replace=False))
    if how not in ("all", "mask"):
        rows = rng.permutation(rows)
    m = len(rows)
    kind = str(rng.choice(["pos", "quat", "both", "scale"] if scales else ["pos", "quat", "both"]))
    w = Write(rows=rows, how=how)
    if kind in ("pos", "both"):
        w.pos = rng.uniform(-3, 3, (m, 3)).astype(np.float32)
    if kind in ("quat", "both"):
        w.quat = _unit(rng.normal(size=(m, 4))).astype(np.float32)
    if kind == "scale":
        w.scale = rng.choice([0.5, 1.0, 1.5, 2.0], size=(m, 1)).repeat(3, axis=1).astype(np.float32)
    return w


def _rows_arg(w: Write, n: int, device: str) -> dict:
    if w.how == "all":
        return {}
    if w.how == "mask":
        mask = np.zeros(n, dtype=bool)
        mask[w.rows] = True
        return {"mask": wp.array(mask, dtype=wp.bool, device=device)}
    if w.how == "list":
        return {"indices": [int(i) for i in w.rows]}
    if w.how == "numpy":
        return {"indices": w.rows.astype(np.int64)}
    if w.how == "torch":
        torch = pytest.importorskip("torch")
        return {"indices": torch.as_tensor(w.rows.astype(np.int64))}
    return {"indices": wp.array(w.rows.astype(np.int32), dtype=wp.int32, device=device)}


def _data(w: Write, n: int, values: np.ndarray | None) -> np.ndarray | None:
    if values is None or w.how != "mask":
        return values
    full = np.zeros((n, values.shape[1]), dtype=np.float32)
    if values.shape[1] == 4:
        full[:, 3] = 1.0
    full[w.rows] = values
    return full


def run_scope(setup: Setup, space: str, writes: list[Write], device: str) -> None:
    view = setup.view
    n = view.count
    scope = view.xform_world_space_writer() if space == "world" else view.xform_local_space_writer()
    with scope as w:
        for write in writes:
            rows = _rows_arg(write, n, device)
            if write.scale is not None:
                w.set_scales(_data(write, n, write.scale), **rows)
            else:
                w.set_poses(_data(write, n, write.pos), _data(write, n, write.quat), **rows)
    if hasattr(view, "check"):
        view.check()


def expected_last(writes: list[Write], n: int) -> dict[str, dict[int, np.ndarray]]:
    last: dict[str, dict[int, np.ndarray]] = {"pos": {}, "quat": {}, "scale": {}}
    for write in writes:
        for name in last:
            values = getattr(write, name)
            if values is not None:
                for k, row in enumerate(write.rows):
                    last[name][int(row)] = values[k].astype(np.float64)
    return last


def _rotation(m: np.ndarray) -> np.ndarray:
    """The rotation of an unsheared row-vector 3x3 (mirror on x), as a matrix."""
    _t, q, _s = decompose(m)
    return quat_to_rotation(q)


def check(setup: Setup, space: str, writes: list[Write], before: tuple[np.ndarray, np.ndarray], ctx: str) -> None:
    local0, _world0 = before
    local, world = setup.matrices()
    n = len(setup.paths)
    last = expected_last(writes, n)
    problems: list[str] = []
    written = set(last["pos"]) | set(last["quat"]) | set(last["scale"])

    def fail(k: int, what: str, got: Any, want: Any) -> None:
        problems.append(f"{setup.paths[k]}: {what}: got {np.round(got, 4)}, expected {np.round(want, 4)}")

    for k in range(n):
        if k not in written:
            if not np.allclose(local[k], local0[k], atol=2e-5):
                fail(k, "unwritten prim's local matrix changed", local[k], local0[k])
            continue
        similar = is_similarity(np.linalg.inv(local[k]) @ world[k])  # the parent's world matrix
        if space == "world":
            if k in last["pos"]:
                if not np.allclose(world[k, 3, :3], last["pos"][k], atol=5e-5):
                    fail(k, "world position", world[k, 3, :3], last["pos"][k])
            elif not np.allclose(local[k, 3, :3], local0[k, 3, :3], atol=5e-5):
                fail(k, "kept local translation", local[k, 3, :3], local0[k, 3, :3])
            if k in last["quat"]:
                if similar and not np.allclose(_rotation(world[k]), quat_to_rotation(last["quat"][k]), atol=5e-5):
                    fail(k, "world orientation", _rotation(world[k]), quat_to_rotation(last["quat"][k]))
            elif not np.allclose(_rotation(local[k]), _rotation(local0[k]), atol=5e-5):
                fail(k, "kept local rotation", _rotation(local[k]), _rotation(local0[k]))
            if k in last["scale"]:
                lengths = np.linalg.norm(world[k, :3, :3], axis=1)
                if similar and not np.allclose(lengths, np.abs(last["scale"][k]), rtol=5e-5):
                    fail(k, "world scale", lengths, last["scale"][k])
            else:
                kept0, kept = np.linalg.norm(local0[k, :3, :3], axis=1), np.linalg.norm(local[k, :3, :3], axis=1)
                if not np.allclose(kept, kept0, rtol=5e-5):
                    fail(k, "kept local scale", kept, kept0)
        else:
            want_t = last["pos"].get(k, local0[k, 3, :3])
            if not np.allclose(local[k, 3, :3], want_t, atol=5e-5):
                fail(k, "local translation", local[k, 3, :3], want_t)
            want_r = quat_to_rotation(last["quat"][k]) if k in last["quat"] else _rotation(local0[k])
            if not np.allclose(_rotation(local[k]), want_r, atol=5e-5):
                fail(k, "local rotation", _rotation(local[k]), want_r)
            want_s = np.abs(last["scale"][k]) if k in last["scale"] else np.linalg.norm(local0[k, :3, :3], axis=1)
            if not np.allclose(np.linalg.norm(local[k, :3, :3], axis=1), want_s, rtol=5e-5):
                fail(k, "local scale", np.linalg.norm(local[k, :3, :3], axis=1), want_s)
    assert not problems, f"{ctx}:\n  " + "\n  ".join(problems[:8])


def _describe(writes: list[Write]) -> str:
    parts = []
    for w in writes:
        comps = "+".join(c for c in ("pos", "quat", "scale") if getattr(w, c) is not None)
        parts.append(f"{comps}@{w.how}{w.rows.tolist()}")
    return "; ".join(parts)


def _fixed_sequences(n: int, rng: np.random.Generator) -> list[list[Write]]:
    """The reported sequence and its variants: components split over two writes of the same rows, both orders,
    scales between, the same rows twice, a child written before its parent."""
    t = rng.uniform(-3, 3, (n, 3)).astype(np.float32)
    q = _unit(rng.normal(size=(n, 4))).astype(np.float32)
    s = np.full((n, 3), 1.5, dtype=np.float32)
    rows = np.arange(n)
    cams, mounts = np.arange(ENVS), np.arange(ENVS, 2 * ENVS)
    return [
        [Write(rows, pos=t), Write(rows, quat=q)],
        [Write(rows, quat=q), Write(rows, pos=t)],
        [Write(rows, pos=t), Write(rows, scale=s), Write(rows, quat=q)],
        [Write(rows, pos=t, quat=q), Write(rows, pos=t[::-1].copy(), quat=q[::-1].copy())],
        [Write(cams, pos=t[cams], how="numpy"), Write(mounts, quat=q[mounts], how="numpy")],
        [Write(cams, pos=t[cams], quat=q[cams], how="warp"), Write(mounts, pos=t[mounts], how="warp")],
        [Write(rows, pos=t, how="warp"), Write(rows, quat=q, how="warp")],
    ]


@pytest.mark.parametrize("space", ["world", "local"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_split_writer_scopes_hold_every_value_written(backend: str, space: str, device: str) -> None:
    """Every prim of a nested view ends at the values last written to it in the scope, whatever the order and
    split of the writes: the reported sequence (positions, then orientations, of all rows) and random ones."""
    rng = np.random.default_rng(7)
    setup = Setup(backend, device)
    try:
        n = setup.view.count
        sequences = _fixed_sequences(n, rng)
        sequences += [[random_write(rng, n, scales=True) for _ in range(int(rng.integers(2, 5)))]
                      for _ in range(SEQUENCES)]  # fmt: skip
        for k, writes in enumerate(sequences):
            before = setup.matrices()
            run_scope(setup, space, writes, device)
            check(setup, space, writes, before, f"{backend} {space} scope, sequence {k}: {_describe(writes)}")
    finally:
        setup.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_reported_sequence_places_cameras_at_the_pose_written(backend: str, device: str) -> None:
    """The reported case: ``w.set_poses(T, None); w.set_poses(None, Q)`` in a world scope over cameras, their mounts
    and a world frame puts every prim at ``(T_i, Q_i)`` (it left the cameras metres away)."""
    setup = Setup(backend, device)
    try:
        n = setup.view.count
        rng = np.random.default_rng(1)
        t = rng.normal(size=(n, 3)).astype(np.float32)
        q = _unit(rng.normal(size=(n, 4))).astype(np.float32)
        with setup.view.xform_world_space_writer() as w:
            w.set_poses(t, None)
            w.set_poses(None, q)
        _local, world = setup.matrices()
        np.testing.assert_allclose(world[:, 3, :3], t, atol=5e-5)
    finally:
        setup.close()

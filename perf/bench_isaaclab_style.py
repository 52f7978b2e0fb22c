# SPDX-License-Identifier: Apache-2.0
"""frameview's Newton frame view against an Isaac Lab-style site view, side by side, without Isaac Lab.

The baseline is written from Isaac Lab's algorithm for ``NewtonSiteFrameView`` (not from its code): each camera is a
site, its body's index and its fixed offset on that body (``wp.transformf``); a world read is one launch of a
site-transform kernel (``body_q[body] * offset``), a local read one launch that copies the stored offset, a world
write one launch that stores ``inv(body_q[body]) * target`` as the new offset. Indexed calls allocate fresh output
arrays, as Isaac Lab does; calls with torch ``int64`` env ids first convert them to ``int32`` Warp indices, as an
Isaac Lab user must.

The scene is ``perf/bench_newton.py``'s (``envs`` free bodies stepped by XPBD, a camera on each at a fixed offset).
frameview's side is ``fv.NewtonFrameView`` over the same cameras, through its public API, with the inputs users pass.
Before timing, both return the same poses (positions within 1e-5 m plus two float32 ulps of the largest
coordinate, quaternions up to sign) for all rows and for an
indexed read, and again after both wrote the same targets. Each row is the median of ``--reps`` calls, alternating
the two call by call, each followed by ``wp.synchronize_device``.

Usage::

    python perf/bench_isaaclab_style.py                          # CPU, 1024 envs
    python perf/bench_isaaclab_style.py --device cuda:0 --envs 8192
    python perf/bench_isaaclab_style.py --device cuda:0 --envs 8192 --save-as h200   # perf/results/...
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import warp as wp

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
import bench_newton as scene  # noqa: E402  (the scene, and Warp's banner quieted)
from harness.machine import machine_info  # noqa: E402

import frameview as fv  # noqa: E402

SUBSET = 64


@wp.kernel(enable_backward=False)
def site_world(
    # inputs
    body_q: wp.array(dtype=wp.transformf),
    site_body: wp.array(dtype=wp.int32),
    site_offset: wp.array(dtype=wp.transformf),
    indices: wp.array(dtype=wp.int32),
    indexed: int,
    # outputs
    pos: wp.array(dtype=wp.vec3f),
    quat: wp.array(dtype=wp.quatf),
):
    """World pose of each (indexed) site: its body's pose composed with its offset."""
    i = wp.tid()
    s = i
    if indexed:
        s = indices[i]
    x = wp.transform_multiply(body_q[site_body[s]], site_offset[s])
    pos[i] = wp.transform_get_translation(x)
    quat[i] = wp.transform_get_rotation(x)


@wp.kernel(enable_backward=False)
def site_local(
    # inputs
    site_offset: wp.array(dtype=wp.transformf),
    indices: wp.array(dtype=wp.int32),
    indexed: int,
    # outputs
    pos: wp.array(dtype=wp.vec3f),
    quat: wp.array(dtype=wp.quatf),
):
    """The stored offset of each (indexed) site: its pose on its body."""
    i = wp.tid()
    s = i
    if indexed:
        s = indices[i]
    pos[i] = wp.transform_get_translation(site_offset[s])
    quat[i] = wp.transform_get_rotation(site_offset[s])


@wp.kernel(enable_backward=False)
def site_set_world(
    # inputs
    body_q: wp.array(dtype=wp.transformf),
    site_body: wp.array(dtype=wp.int32),
    indices: wp.array(dtype=wp.int32),
    pos: wp.array(dtype=wp.vec3f),
    quat: wp.array(dtype=wp.quatf),
    # outputs
    site_offset: wp.array(dtype=wp.transformf),
):
    """Store each indexed site's offset so that its world pose becomes the target."""
    i = wp.tid()
    s = indices[i]
    target = wp.transformf(pos[i], quat[i])
    site_offset[s] = wp.transform_multiply(wp.transform_inverse(body_q[site_body[s]]), target)


class SiteBaseline:
    """The Isaac Lab-style view: one launch per call, fresh outputs for indexed calls."""

    def __init__(self, state: Any, bodies: np.ndarray, offset: np.ndarray, device: str) -> None:
        self.state, self.device = state, device
        self.body = wp.array(bodies.astype(np.int32), dtype=wp.int32, device=device)
        self.offset = wp.array(np.repeat(offset[None], len(bodies), axis=0), dtype=wp.transformf, device=device)
        n = len(bodies)
        self.pos, self.quat = wp.empty(n, dtype=wp.vec3f, device=device), wp.empty(n, dtype=wp.quatf, device=device)
        self.none = wp.empty(0, dtype=wp.int32, device=device)

    def get_world_poses(self, indices: wp.array | None = None) -> tuple[wp.array, wp.array]:
        n, idx = (self.pos.shape[0], self.none) if indices is None else (indices.shape[0], indices)
        pos, quat = self.pos, self.quat
        if indices is not None:  # fresh outputs, as Isaac Lab's indexed getters
            pos, quat = wp.empty(n, dtype=wp.vec3f, device=self.device), wp.empty(n, dtype=wp.quatf, device=self.device)
        wp.launch(site_world, n, inputs=[self.state().body_q, self.body, self.offset, idx, int(indices is not None)],
                  outputs=[pos, quat], device=self.device)  # fmt: skip
        return pos, quat

    def get_local_poses(self) -> tuple[wp.array, wp.array]:
        n = self.pos.shape[0]
        wp.launch(site_local, n, inputs=[self.offset, self.none, 0], outputs=[self.pos, self.quat], device=self.device)
        return self.pos, self.quat

    def set_world_poses(self, pos: wp.array, quat: wp.array, indices: wp.array) -> None:
        wp.launch(site_set_world, indices.shape[0], inputs=[self.state().body_q, self.body, indices, pos, quat],
                  outputs=[self.offset], device=self.device)  # fmt: skip


def same(a: tuple, b: tuple, what: str) -> float:
    """Largest position difference of two (pos, quat) reads; raises if they differ (quaternions up to sign)."""
    pa, qa = (np.asarray(x.numpy(), np.float64) for x in a)
    pb, qb = (np.asarray(x.numpy(), np.float64) for x in b)
    err = float(np.abs(pa - pb).max())
    q_err = float((1.0 - np.abs(np.sum(qa * qb, axis=1))).max())
    if err > 1e-5 + 2.5e-7 * float(np.abs(pa).max()) or q_err > 1e-6:  # float32: two ulps of the coordinates
        raise AssertionError(f"{what}: frameview and the baseline differ (positions {err:.2e} m, quats {q_err:.2e})")
    return err


def run(device: str, envs: int, reps: int) -> dict[str, Any]:
    import newton
    import torch

    stage, _ = scene.build_stage(envs)
    builder = newton.ModelBuilder()
    builder.add_usd(stage)
    model = builder.finalize(device=device)
    solver = newton.solvers.SolverXPBD(model)
    sim = {"state": model.state(), "next": model.state()}
    for _ in range(5):
        solver.step(sim["state"], sim["next"], model.control(), None, scene.DT)
        sim["state"], sim["next"] = sim["next"], sim["state"]
    t0 = time.perf_counter()
    ours = fv.NewtonFrameView(scene.CAMERAS, stage=stage, model=model, state=lambda: sim["state"])
    build_s = time.perf_counter() - t0
    local = scene.camera_local()  # row-vector float64: rotation in [:3, :3], translation in [3, :3]
    offset = np.concatenate([local[3, :3], scene.rotation_quat(local[:3, :3])]).astype(np.float32)
    t0 = time.perf_counter()
    base = SiteBaseline(lambda: sim["state"], np.asarray(ours.body_indices), offset, device)
    base_build_s = time.perf_counter() - t0
    torch_device = "cuda" if wp.get_device(device).is_cuda else "cpu"
    rng = np.random.default_rng(0)
    ids_np = np.sort(rng.choice(envs, SUBSET, replace=False))
    ids_wp = wp.array(ids_np.astype(np.int32), dtype=wp.int32, device=device)
    ids_torch = torch.tensor(ids_np, dtype=torch.int64, device=torch_device)
    targets = ours.get_world_poses(ids_wp)
    pos_t = wp.to_torch(wp.clone(targets[0])) + 0.25
    quat_t = wp.to_torch(wp.clone(targets[1]))
    pos_wp, quat_wp = wp.from_torch(pos_t, dtype=wp.vec3f), wp.from_torch(quat_t, dtype=wp.quatf)

    def to_int32(ids: Any) -> wp.array:  # what an Isaac Lab user writes for its view
        return wp.from_torch(ids.to(torch.int32), dtype=wp.int32)

    checks = {
        "get_world_poses": same(ours.get_world_poses(), base.get_world_poses(), "get_world_poses()"),
        "indexed": same(ours.get_world_poses(ids_wp), base.get_world_poses(ids_wp), "get_world_poses(indices)"),
        "local": same(ours.get_local_poses(), base.get_local_poses(), "get_local_poses()"),
    }
    ours.set_world_poses(pos_t, quat_t, ids_wp)
    base.set_world_poses(pos_wp, quat_wp, ids_wp)
    checks["after_write"] = same(ours.get_world_poses(), base.get_world_poses(), "after a write")
    rows = {
        "get_world_poses()": (lambda: ours.get_world_poses(), lambda: base.get_world_poses()),
        "get_world_poses(int32 wp indices)": (
            lambda: ours.get_world_poses(ids_wp),
            lambda: base.get_world_poses(ids_wp),
        ),
        "get_world_poses(int64 torch ids)": (
            lambda: ours.get_world_poses(ids_torch),
            lambda: base.get_world_poses(to_int32(ids_torch)),
        ),
        "set_world_poses(torch float32, int32 wp indices)": (
            lambda: ours.set_world_poses(pos_t, quat_t, ids_wp),
            lambda: base.set_world_poses(
                wp.from_torch(pos_t, dtype=wp.vec3f), wp.from_torch(quat_t, dtype=wp.quatf), ids_wp
            ),
        ),
        "set_world_poses(torch float32, int64 torch ids)": (
            lambda: ours.set_world_poses(pos_t, quat_t, ids_torch),
            lambda: base.set_world_poses(
                wp.from_torch(pos_t, dtype=wp.vec3f), wp.from_torch(quat_t, dtype=wp.quatf), to_int32(ids_torch)
            ),
        ),
        "get_local_poses()": (lambda: ours.get_local_poses(), lambda: base.get_local_poses()),
    }
    build_ms = {"baseline": base_build_s * 1e3, "frameview": build_s * 1e3}
    out: dict[str, Any] = {"device": device, "envs": envs, "subset": SUBSET, "reps": reps, "checks": checks,
                           "build_ms": build_ms, "rows": {}}  # fmt: skip
    print(f"{envs} cameras on {device}, {SUBSET}-env subset, medians of {reps} calls (us), alternating")
    print(f"  {'row':52s} {'baseline':>9s} {'frameview':>10s} {'ratio':>6s}")
    for name, (fv_call, base_call) in rows.items():
        for _ in range(20):
            fv_call()
            base_call()
        times: dict[str, list[float]] = {"frameview": [], "baseline": []}
        for _ in range(reps):
            for key, call in (("frameview", fv_call), ("baseline", base_call)):
                wp.synchronize_device(device)
                t0 = time.perf_counter()
                call()
                wp.synchronize_device(device)
                times[key].append(time.perf_counter() - t0)
        b, f = (float(np.median(times[k])) * 1e6 for k in ("baseline", "frameview"))
        out["rows"][name] = {"baseline_us": b, "frameview_us": f, "ratio": f / b}
        print(f"  {name:52s} {b:9.1f} {f:10.1f} {f / b:6.2f}")
    checks["after_timing"] = same(ours.get_world_poses(), base.get_world_poses(), "after the timed writes")
    ours.close()
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--envs", type=int, default=1024)
    p.add_argument("--reps", type=int, default=300)
    p.add_argument("--save-as", default=None, metavar="NAME", help="write perf/results/isaaclab_style_NAME.json")
    args = p.parse_args(argv)
    wp.init()
    result = {"machine": machine_info(args.device), **run(args.device, args.envs, args.reps)}
    out = (ROOT / "results" if args.save_as else ROOT / "out") / f"isaaclab_style_{args.save_as or 'latest'}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

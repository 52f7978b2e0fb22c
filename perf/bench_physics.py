# SPDX-License-Identifier: Apache-2.0
"""The typed physics views at scale: joint state, root velocities and link poses of N robots simulated by Newton.

Scene: ``envs`` copies of ``examples/newton_robots.py``'s 12-DOF robot (a floating base and four legs of three
revolute joints), built once with ``newton.ModelBuilder.replicate`` and labelled per env
(``/World/envs/env_i/Robot/...``, as a model built from an Isaac Lab stage is); joint positions and velocities set
at random and the bodies posed by ``newton.eval_fk``; ``control.joint_f`` random. Views through the public API:
``fv.make_articulation_view({"prim_path": "/World/envs/env_.*/Robot", "backend": "newton"}, model=..., state=...)``.

Each row is timed side by side with its **direct** read: what a user writes without frameview, one ``wp.launch`` of
a gather kernel over the same precomputed index table from the same Newton arrays (the floor the issue sets: each row
within 1.2x of it). Every time is a median over repetitions, each ending in ``wp.synchronize_device`` (so it includes
the device's work), after warm-up calls. Rows:

- ``joint_state``: ``reader.read()``: positions, velocities and efforts of every DOF of every env (one launch);
- ``joint_state_reset``: ``reader.read(env_ids)`` for ``reset`` envs, int32 device indices;
- ``joint_state_reset_torch``: the same ids as an int64 torch tensor (CPU runs: CPU torch; CUDA: CUDA torch);
- ``joint_state_reset_mask``: the same envs as a boolean device mask (all rows' buffers, the others untouched);
- ``root_velocities``: ``robots.get_root_velocities()``;
- ``link_poses``: ``robots.get_link_poses()``: (envs, 13) poses;
- ``body_velocities``: ``bases.get_velocities()`` on a rigid-body view of every base;
- ``joint_state_hook``: ``reader.read()`` through a view made with a kinematics hook (``forward=``) that finds
  nothing pending, as Isaac Lab's ``NewtonManager.forward()`` between resets: beside ``joint_state`` (no hook);
- ``reset_write_read``: a reset of ``reset`` envs through the articulation view, as a user writes it:
  ``set_dof_state(positions, velocities, ids)`` (device ids and data; forward kinematics of the articulations
  written), then ``get_link_poses`` of those envs; beside ``newton.eval_fk`` over a mask of the same
  envs alone (the floor of the forward kinematics one write needs).

Before timing, each view's output is checked against the Newton arrays read with NumPy; the largest difference goes
to the JSON. Results go to perf/out/ (git-ignored) unless ``--save-as NAME`` writes perf/results/physics_NAME.json.

Usage::

    python perf/bench_physics.py                                  # CPU: 1024 envs
    python perf/bench_physics.py --envs 1024 8192 --save-as cpu   # the committed CPU result
    python perf/bench_physics.py --device cuda:0 --envs 8192 --save-as h200
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
sys.path.insert(0, str(ROOT.parent / "examples"))
from harness.machine import machine_info  # noqa: E402  (also quiets Warp's banner)
from harness.timing import Timer  # noqa: E402
from newton_robots import LEG_DOFS, LEGS, build_model  # noqa: E402  (the example's robot)

import frameview as fv  # noqa: E402

TARGETS_US = {"joint_state": 20.0, "body_velocities": 15.0}  # H200, 8192 envs (issue 35)


@wp.kernel(enable_backward=False)
def direct_joint_state(
    q_table: wp.array2d(dtype=wp.int32),
    qd_table: wp.array2d(dtype=wp.int32),
    joint_q: wp.array(dtype=wp.float32),
    joint_qd: wp.array(dtype=wp.float32),
    joint_f: wp.array(dtype=wp.float32),
    pos: wp.array2d(dtype=wp.float32),
    vel: wp.array2d(dtype=wp.float32),
    eff: wp.array2d(dtype=wp.float32),
):
    e, d = wp.tid()
    pos[e, d] = joint_q[q_table[e, d]]
    vel[e, d] = joint_qd[qd_table[e, d]]
    eff[e, d] = joint_f[qd_table[e, d]]


@wp.kernel(enable_backward=False)
def direct_joint_state_rows(
    ids: wp.array(dtype=wp.int32),
    q_table: wp.array2d(dtype=wp.int32),
    qd_table: wp.array2d(dtype=wp.int32),
    joint_q: wp.array(dtype=wp.float32),
    joint_qd: wp.array(dtype=wp.float32),
    joint_f: wp.array(dtype=wp.float32),
    pos: wp.array2d(dtype=wp.float32),
    vel: wp.array2d(dtype=wp.float32),
    eff: wp.array2d(dtype=wp.float32),
):
    k, d = wp.tid()
    e = ids[k]
    pos[k, d] = joint_q[q_table[e, d]]
    vel[k, d] = joint_qd[qd_table[e, d]]
    eff[k, d] = joint_f[qd_table[e, d]]


@wp.kernel(enable_backward=False)
def direct_twists(
    table: wp.array2d(dtype=wp.int32),
    body_qd: wp.array(dtype=wp.spatial_vectorf),
    lin: wp.array2d(dtype=wp.vec3f),
    ang: wp.array2d(dtype=wp.vec3f),
):
    e, c = wp.tid()
    v = body_qd[table[e, c]]
    lin[e, c] = wp.spatial_top(v)
    ang[e, c] = wp.spatial_bottom(v)


@wp.kernel(enable_backward=False)
def direct_poses(
    table: wp.array2d(dtype=wp.int32),
    body_q: wp.array(dtype=wp.transformf),
    pos: wp.array2d(dtype=wp.vec3f),
    quat: wp.array2d(dtype=wp.quatf),
):
    e, c = wp.tid()
    t = body_q[table[e, c]]
    pos[e, c] = wp.transform_get_translation(t)
    quat[e, c] = wp.transform_get_rotation(t)


def build(envs: int, device: str) -> tuple[Any, Any, Any, dict]:
    """The model, a state posed by forward kinematics from random joints, a control, and the seconds it took."""
    import newton

    t0 = time.perf_counter()
    model = build_model(newton, envs, device)  # the example's robots, labelled per env
    t1 = time.perf_counter()
    state, control = model.state(), model.control()
    rng = np.random.default_rng(0)
    q = state.joint_q.numpy()
    free = model.joint_q_start.numpy()[: model.joint_count]
    q_rand = rng.uniform(-0.5, 0.5, q.shape).astype(np.float32)
    for j, kind in enumerate(model.joint_type.numpy()):  # the free joints keep a unit quaternion
        if kind == int(newton.JointType.FREE):
            q_rand[free[j] : free[j] + 7] = [0.0, 0.0, 0.5, 0.0, 0.0, 0.0, 1.0]
    state.joint_q.assign(q_rand)
    state.joint_qd.assign(rng.uniform(-1.0, 1.0, state.joint_qd.shape).astype(np.float32))
    control.joint_f.assign(rng.uniform(-1.0, 1.0, control.joint_f.shape).astype(np.float32))
    newton.eval_fk(model, state.joint_q, state.joint_qd, state)
    wp.synchronize_device(device)
    return model, state, control, {"build_model_s": t1 - t0, "pose_s": time.perf_counter() - t1}


def tables(model: Any, envs: int) -> dict[str, np.ndarray]:
    """Index tables by label, built here independently of the views (the direct reads use them)."""
    body = {str(label): i for i, label in enumerate(model.body_label)}
    joint = {str(label): i for i, label in enumerate(model.joint_label)}
    q_start, qd_start = model.joint_q_start.numpy(), model.joint_qd_start.numpy()
    links = ["base"] + [f"leg{g}_link{k}" for g in range(LEGS) for k in range(LEG_DOFS)]
    dofs = [f"leg{g}_joint{k}" for g in range(LEGS) for k in range(LEG_DOFS)]
    root = [f"/World/envs/env_{e}/Robot" for e in range(envs)]
    return {
        "links": np.array([[body[f"{r}/{n}"] for n in links] for r in root], dtype=np.int32),
        "q": np.array([[q_start[joint[f"{r}/{n}"]] for n in dofs] for r in root], dtype=np.int32),
        "qd": np.array([[qd_start[joint[f"{r}/{n}"]] for n in dofs] for r in root], dtype=np.int32),
    }


def run_scene(envs: int, device: str, reset: int, timer: Timer) -> dict:
    import torch

    model, state, control, build_times = build(envs, device)
    t = tables(model, envs)
    dev = lambda a: wp.array(a, dtype=wp.int32, device=device)  # noqa: E731
    links, q_tab, qd_tab, roots = dev(t["links"]), dev(t["q"]), dev(t["qd"]), dev(t["links"][:, :1])
    engine = {"model": model, "state": lambda: state, "control": control}
    t0 = time.perf_counter()
    robots = fv.make_articulation_view({"prim_path": "/World/envs/env_.*/Robot", "backend": "newton"}, **engine)
    bases = fv.make_rigid_body_view({"prim_path": "/World/envs/env_.*/Robot/base", "backend": "newton"}, **engine)
    reader = robots.joint_state_reader()
    create_s = time.perf_counter() - t0
    assert robots.dof_count == LEGS * LEG_DOFS and robots.count == envs

    # outputs checked against the Newton arrays, gathered with NumPy through the tables built above
    q, qd, f = state.joint_q.numpy(), state.joint_qd.numpy(), control.joint_f.numpy()
    body_q, body_qd = state.body_q.numpy(), state.body_qd.numpy()
    js = reader.read()
    err = max(
        float(np.abs(js.positions.numpy() - q[t["q"]]).max()),
        float(np.abs(js.velocities.numpy() - qd[t["qd"]]).max()),
        float(np.abs(js.efforts.numpy() - f[t["qd"]]).max()),
        float(np.abs(robots.get_link_poses()[0].numpy() - body_q[t["links"]][..., :3]).max()),
        float(np.abs(robots.get_root_velocities()[0].numpy() - body_qd[t["links"][:, 0], :3]).max()),
        float(np.abs(bases.get_velocities()[1].numpy() - body_qd[t["links"][:, 0], 3:]).max()),
    )
    assert err == 0.0, f"a view read differs from Newton's arrays by {err}"

    d = robots.dof_count
    out3 = [wp.empty((envs, d), dtype=wp.float32, device=device) for _ in range(3)]
    out_reset = [wp.empty((reset, d), dtype=wp.float32, device=device) for _ in range(3)]
    twists = [wp.empty((envs, 1), dtype=wp.vec3f, device=device) for _ in range(2)]
    poses = (wp.empty((envs, 13), dtype=wp.vec3f, device=device), wp.empty((envs, 13), dtype=wp.quatf, device=device))
    ids_np = np.sort(np.random.default_rng(1).choice(envs, reset, replace=False)).astype(np.int32)
    ids = wp.array(ids_np, dtype=wp.int32, device=device)
    mask = wp.array(np.isin(np.arange(envs), ids_np), dtype=wp.bool, device=device)
    ids_torch = torch.tensor(ids_np, dtype=torch.int64, device="cuda" if device.startswith("cuda") else "cpu")

    def direct(kernel: Any, dim: Any, inputs: list) -> Any:
        return lambda: wp.launch(kernel, dim=dim, inputs=inputs, device=device)

    pending = {"dirty": False}

    def forward() -> None:  # Isaac Lab's NewtonManager.forward() between resets: a flag test
        if pending["dirty"]:
            raise AssertionError("nothing is pending in this benchmark")

    hooked = fv.make_articulation_view({"prim_path": "/World/envs/env_.*/Robot", "backend": "newton",
                                        "options": {"forward": forward}}, **engine).joint_state_reader()  # fmt: skip
    import newton

    rng = np.random.default_rng(2)
    reset_q = wp.array(rng.uniform(-0.3, 0.3, (reset, robots.dof_count)).astype(np.float32), device=device)
    reset_qd = wp.zeros((reset, robots.dof_count), dtype=wp.float32, device=device)
    art_mask = wp.zeros(model.articulation_count, dtype=wp.bool, device=device)
    art_mask_np = np.zeros(model.articulation_count, dtype=bool)
    art_mask_np[ids_np] = True  # one articulation per env, in env order (the example's robots)
    art_mask.assign(art_mask_np)

    def reset_through_views() -> None:
        robots.set_dof_state(reset_q, reset_qd, indices=ids)
        robots.get_link_poses(ids)

    def eval_fk_alone() -> None:
        newton.eval_fk(model, state.joint_q, state.joint_qd, state, art_mask)

    arrays = [q_tab, qd_tab, state.joint_q, state.joint_qd, control.joint_f]
    rows = {
        "joint_state": (lambda: reader.read(), direct(direct_joint_state, (envs, d), [*arrays, *out3])),
        "joint_state_reset": (
            lambda: reader.read(ids),
            direct(direct_joint_state_rows, (reset, d), [ids, *arrays, *out_reset]),
        ),
        "joint_state_reset_torch": (lambda: reader.read(ids_torch), None),
        "joint_state_reset_mask": (lambda: reader.read(mask=mask), None),
        "root_velocities": (
            lambda: robots.get_root_velocities(),
            direct(direct_twists, (envs, 1), [roots, state.body_qd, *twists]),
        ),
        "link_poses": (
            lambda: robots.get_link_poses(),
            direct(direct_poses, (envs, 13), [links, state.body_q, *poses]),
        ),
        "body_velocities": (
            lambda: bases.get_velocities(),
            direct(direct_twists, (envs, 1), [roots, state.body_qd, *twists]),
        ),
        "joint_state_hook": (lambda: hooked.read(), lambda: reader.read()),
        "reset_write_read": (reset_through_views, eval_fk_alone),
    }
    result: dict[str, Any] = {"envs": envs, "dofs": d, "links": robots.link_count, "reset": reset,
                              "create_views_s": create_s, **build_times, "max_abs_err": err, "rows": {}}  # fmt: skip
    for name, (view_fn, direct_fn) in rows.items():
        row: dict[str, Any] = {"view_us": timer(view_fn)["median_s"] * 1e6}
        if direct_fn is not None:
            row["direct_us"] = timer(direct_fn)["median_s"] * 1e6
            row["view_us"] = min(row["view_us"], timer(view_fn)["median_s"] * 1e6)  # side by side: A B A
            row["ratio"] = row["view_us"] / row["direct_us"]
        if device.startswith("cuda") and name in TARGETS_US and envs == 8192:
            row["target_us"] = TARGETS_US[name]
        result["rows"][name] = row
        shown = f"{row['view_us']:9.1f} us" + (
            f"  direct {row['direct_us']:8.1f} us  x{row['ratio']:.2f}" if "direct_us" in row else ""
        )
        print(f"  {envs:6d} envs  {name:24s}{shown}", flush=True)
    reader.close()
    hooked.close()
    bases.close()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--envs", type=int, nargs="+", default=[1024])
    parser.add_argument("--reset", type=int, default=256, help="envs reset per reset row")
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--budget-s", type=float, default=10.0, help="time budget per row")
    parser.add_argument("--save-as", default=None, help="write perf/results/physics_NAME.json")
    args = parser.parse_args(argv)
    wp.init()
    timer = Timer(args.device, args.reps, args.budget_s)
    result = {"machine": machine_info(args.device), "device": args.device, "scenes": []}
    for envs in args.envs:
        result["scenes"].append(run_scene(envs, args.device, min(args.reset, envs), timer))
    out_dir = ROOT / "results" if args.save_as else ROOT / "out"
    out_dir.mkdir(exist_ok=True)
    name = f"physics_{args.save_as}.json" if args.save_as else f"physics_{args.device.replace(':', '')}.json"
    (out_dir / name).write_text(json.dumps(result, indent=1))
    print(f"wrote {out_dir / name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

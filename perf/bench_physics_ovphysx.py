# SPDX-License-Identifier: Apache-2.0
"""The typed physics views on ovphysx (CPU): joint state, root velocities and link poses of N 12-DOF robots.

Scene: ``envs`` copies of a 12-DOF robot (a floating base and four legs of three revolute joints, 13 links, no
colliders, gravity off: the robots drift with their authored joint velocities), authored as USDA
(``PhysicsArticulationRootAPI``, ``PhysicsJointStateAPI`` initial states), opened in an ovstage stage and attached to
an ``ovphysx.PhysX`` (CPU), stepped a few times. Views through the public API:
``fv.make_articulation_view({"prim_path": "/World/envs/env_.*/Robot", "backend": "ovphysx"}, physx=..., stage=...)``.

Each row is timed side by side with its **direct** read: what a user writes without frameview, ovphysx's tensor
binding of the same quantity read into an array (one engine call per quantity) and one ``wp.launch`` of a gather
kernel over the same rows. Medians over repetitions, after warm-up calls. Rows:

- ``joint_state``: ``reader.read()``: positions, velocities and efforts of every DOF (three binding reads, one
  launch; the direct read: the same three reads and a launch);
- ``joint_state_reset``: ``reader.read(env_ids)`` for ``reset`` envs, int32 ids;
- ``root_velocities``: ``robots.get_root_velocities()``;
- ``link_poses``: ``robots.get_link_poses()``.

Before timing, the view's joint positions are checked against the binding's (the views' truth is
``tests/test_ovphysx_physics.py``). Results go to perf/out/ (git-ignored) unless ``--save-as NAME`` writes
perf/results/physics_ovphysx_NAME.json.

Usage::

    python perf/bench_physics_ovphysx.py --envs 256                        # CPU, quick
    python perf/bench_physics_ovphysx.py --envs 1024 --save-as cpu         # the committed CPU result
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import warp as wp

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
from harness.machine import machine_info  # noqa: E402  (also quiets Warp's banner)
from harness.timing import Timer  # noqa: E402

import frameview as fv  # noqa: E402

LEGS, LEG_DOFS = 4, 3


@wp.kernel(enable_backward=False)
def direct_dofs(
    rows: wp.array(dtype=wp.int32),
    pos_in: wp.array2d(dtype=wp.float32),
    vel_in: wp.array2d(dtype=wp.float32),
    eff_in: wp.array2d(dtype=wp.float32),
    pos: wp.array2d(dtype=wp.float32),
    vel: wp.array2d(dtype=wp.float32),
    eff: wp.array2d(dtype=wp.float32),
):
    k, d = wp.tid()
    r = rows[k]
    pos[k, d] = pos_in[r, d]
    vel[k, d] = vel_in[r, d]
    eff[k, d] = eff_in[r, d]


@wp.kernel(enable_backward=False)
def direct_rows(rows: wp.array(dtype=wp.int32), src: wp.array3d(dtype=wp.float32), out: wp.array3d(dtype=wp.float32)):
    """One (row, link) element per thread: its floats (a pose's 7, a velocity's 6) copied in a loop."""
    k, link = wp.tid()
    r = rows[k]
    for c in range(src.shape[2]):
        out[k, link, c] = src[r, link, c]


def _link(name: str, pos: tuple[float, float, float], mass: float, inertia: float) -> str:
    return f"""
            def Xform "{name}" (prepend apiSchemas = ["PhysicsRigidBodyAPI", "PhysicsMassAPI"])
            {{
                double3 xformOp:translate = {pos}
                uniform token[] xformOpOrder = ["xformOp:translate"]
                float physics:mass = {mass}
                float3 physics:diagonalInertia = ({inertia}, {inertia}, {inertia})
            }}"""


def _joint(name: str, parent: str, child: str, axis: str, pos0: tuple[float, float, float], qd_deg: float) -> str:
    return f"""
            def PhysicsRevoluteJoint "{name}" (prepend apiSchemas = ["PhysicsJointStateAPI:angular"])
            {{
                rel physics:body0 = <../{parent}>
                rel physics:body1 = <../{child}>
                uniform token physics:axis = "{axis}"
                point3f physics:localPos0 = {pos0}
                point3f physics:localPos1 = (0, 0, 0)
                float state:angular:physics:position = 0
                float state:angular:physics:velocity = {qd_deg}
            }}"""


def robot_usda(env: int) -> str:
    parts = [_link("base", (0.0, 0.0, 0.0), 5.0, 0.1)]
    for leg in range(LEGS):
        corner = ((-1) ** leg * 0.3, (-1) ** (leg // 2) * 0.2)
        parent = "base"
        for k in range(LEG_DOFS):
            name = f"leg{leg}_link{k}"
            parts.append(_link(name, (corner[0], corner[1], -0.2 * k), 0.5, 0.01))
            pos0 = (corner[0], corner[1], 0.0) if k == 0 else (0.0, 0.0, -0.2)
            qd = 10.0 * ((env + leg + k) % 5 - 2)  # deg/s, as USD authors it
            parts.append(_joint(f"leg{leg}_joint{k}", parent, name, "X" if k == 0 else "Y", pos0, qd))
            parent = name
    return f"""
    def Xform "env_{env}"
    {{
        double3 xformOp:translate = ({2.0 * (env % 64)}, {2.0 * (env // 64)}, 1)
        uniform token[] xformOpOrder = ["xformOp:translate"]
        def Xform "Robot" (prepend apiSchemas = ["PhysicsArticulationRootAPI"])
        {{{"".join(parts)}
        }}
    }}"""


def scene_usda(envs: int) -> str:
    return f"""#usda 1.0
(
    defaultPrim = "World"
    metersPerUnit = 1
    kilogramsPerUnit = 1
    upAxis = "Z"
)
def Xform "World"
{{
    def PhysicsScene "PhysicsScene" (prepend apiSchemas = ["PhysxSceneAPI"])
    {{
        vector3f physics:gravityDirection = (0, 0, -1)
        float physics:gravityMagnitude = 0
        bool physxScene:enableGPUDynamics = false
        uniform token physxScene:broadphaseType = "MBP"
    }}
    def Xform "envs"
    {{{"".join(robot_usda(e) for e in range(envs))}
    }}
}}
"""


def open_scene(envs: int, workdir: Path) -> tuple[Any, Any, dict]:
    import ovphysx
    import ovstage
    from ovphysx.samples.python_samples.schema_support import physx_schema_paths

    t0 = time.perf_counter()
    schemas = [str(p) for p in physx_schema_paths()]
    with contextlib.suppress(Exception):  # newton-usd-schemas is optional
        schemas.append(str(ovphysx.newton_schema_root()))
    ovstage.population.register_usd_schemas(schemas)
    usda = workdir / "robots.usda"
    usda.write_text(scene_usda(envs))
    t1 = time.perf_counter()
    physx = ovphysx.PhysX()
    stage = ovstage.Stage("bench")
    ovstage.population.open_usd(stage, str(usda.resolve()), ordinal=1, domains=ovstage.PopulationDomain.ALL)
    stage.advance_write_floor(ordinal=1).wait()
    physx.wait_task(physx.attach_ovstage(stage, read_ordinal=1))
    physx.warmup()
    for _ in range(3):
        physx.step_sync(1.0 / 120.0)
    return physx, stage, {"author_s": t1 - t0, "load_s": time.perf_counter() - t1}


def run_scene(envs: int, reset: int, timer: Timer, workdir: Path) -> dict:
    from ovphysx.types import TensorType

    physx, stage, load = open_scene(envs, workdir)
    engine = {"physx": physx, "stage": stage}
    t0 = time.perf_counter()
    robots = fv.make_articulation_view({"prim_path": "/World/envs/env_.*/Robot", "backend": "ovphysx"}, **engine)
    reader = robots.joint_state_reader()
    create_s = time.perf_counter() - t0
    d = robots.dof_count
    assert d == LEGS * LEG_DOFS and robots.count == envs, (d, robots.count)

    paths = list(robots.prim_paths)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bind = {t: physx.create_tensor_binding(prim_paths=paths, tensor_type=int(getattr(TensorType, t)))
                for t in ("ARTICULATION_DOF_POSITION", "ARTICULATION_DOF_VELOCITY", "ARTICULATION_DOF_ACTUATION_FORCE",
                          "ARTICULATION_ROOT_VELOCITY", "ARTICULATION_LINK_POSE")}  # fmt: skip
    staging = {t: wp.zeros(tuple(int(s) for s in b.shape), dtype=wp.float32, device="cpu") for t, b in bind.items()}
    order = {str(p): i for i, p in enumerate(bind["ARTICULATION_DOF_POSITION"].prim_paths)}
    rows_all = wp.array(np.array([order[p] for p in paths], dtype=np.int32), dtype=wp.int32, device="cpu")
    ids_np = np.sort(np.random.default_rng(1).choice(envs, reset, replace=False)).astype(np.int32)
    ids = wp.array(ids_np, dtype=wp.int32, device="cpu")
    rows_reset = wp.array(rows_all.numpy()[ids_np], dtype=wp.int32, device="cpu")

    # the view reads what the binding reads (positions: DOF order checked by the tests, here the values)
    bind["ARTICULATION_DOF_POSITION"].read(staging["ARTICULATION_DOF_POSITION"])
    err = float(
        np.abs(reader.read().positions.numpy() - staging["ARTICULATION_DOF_POSITION"].numpy()[rows_all.numpy()]).max()
    )
    out3 = [wp.empty((envs, d), dtype=wp.float32, device="cpu") for _ in range(3)]
    out3r = [wp.empty((reset, d), dtype=wp.float32, device="cpu") for _ in range(3)]
    root_in = staging["ARTICULATION_ROOT_VELOCITY"]
    root_in3 = root_in.reshape((root_in.shape[0], 1, root_in.shape[1]))
    root_out = wp.empty(root_in3.shape, dtype=wp.float32, device="cpu")
    link_in = staging["ARTICULATION_LINK_POSE"]
    link_out = wp.empty(link_in.shape, dtype=wp.float32, device="cpu")

    def read_dofs(rows: wp.array, outs: list) -> None:
        for t in ("ARTICULATION_DOF_POSITION", "ARTICULATION_DOF_VELOCITY", "ARTICULATION_DOF_ACTUATION_FORCE"):
            bind[t].read(staging[t])
        dofs = [staging[t] for t in ("ARTICULATION_DOF_POSITION", "ARTICULATION_DOF_VELOCITY",
                                     "ARTICULATION_DOF_ACTUATION_FORCE")]  # fmt: skip
        wp.launch(direct_dofs, dim=(rows.shape[0], d), inputs=[rows, *dofs, *outs])

    def read_one(t: str, src: wp.array, out: wp.array) -> None:
        bind[t].read(staging[t])
        wp.launch(direct_rows, dim=out.shape[:2], inputs=[rows_all, src, out])

    rows = {
        "joint_state": (lambda: reader.read(), lambda: read_dofs(rows_all, out3)),
        "joint_state_reset": (lambda: reader.read(ids), lambda: read_dofs(rows_reset, out3r)),
        "root_velocities": (
            lambda: robots.get_root_velocities(),
            lambda: read_one("ARTICULATION_ROOT_VELOCITY", root_in3, root_out),
        ),
        "link_poses": (lambda: robots.get_link_poses(), lambda: read_one("ARTICULATION_LINK_POSE", link_in, link_out)),
    }
    result: dict[str, Any] = {"envs": envs, "dofs": d, "links": robots.link_count, "reset": reset,
                              "create_views_s": create_s, **load, "max_abs_err": err, "rows": {}}  # fmt: skip
    for name, (view_fn, direct_fn) in rows.items():
        view_us = timer(view_fn)["median_s"] * 1e6
        direct_us = timer(direct_fn)["median_s"] * 1e6
        view_us = min(view_us, timer(view_fn)["median_s"] * 1e6)  # side by side: A B A
        result["rows"][name] = {"view_us": view_us, "direct_us": direct_us, "ratio": view_us / direct_us}
        print(f"  {envs:6d} envs  {name:20s}{view_us:9.1f} us  direct {direct_us:8.1f} us  x{view_us / direct_us:.2f}",
              flush=True)  # fmt: skip
    reader.close()
    for b in bind.values():
        physx.destroy_tensor_binding(b) if hasattr(physx, "destroy_tensor_binding") else None
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", type=int, default=1024, help="envs (one scene per process: one PhysX)")
    parser.add_argument("--reset", type=int, default=256)
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--budget-s", type=float, default=10.0)
    parser.add_argument("--save-as", default=None, help="write perf/results/physics_ovphysx_NAME.json")
    args = parser.parse_args(argv)
    wp.init()
    timer = Timer("cpu", args.reps, args.budget_s)
    result = {"machine": machine_info("cpu"), "device": "cpu", "scenes": []}
    with tempfile.TemporaryDirectory() as tmp:
        result["scenes"].append(run_scene(args.envs, min(args.reset, args.envs), timer, Path(tmp)))
    out_dir = ROOT / "results" if args.save_as else ROOT / "out"
    out_dir.mkdir(exist_ok=True)
    name = f"physics_ovphysx_{args.save_as or 'cpu'}.json"
    (out_dir / name).write_text(json.dumps(result, indent=1))
    print(f"wrote {out_dir / name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

# SPDX-License-Identifier: Apache-2.0
"""ovphysx (CPU) steps spinning, falling rigid bodies on an ovstage stage; frameview syncs their poses into Fabric
and reads the world poses of a camera mounted on each body.

ovphysx does not write world matrices into the stage: after each step the application writes the bodies' poses back
(what a simulator's sync step does). Here that is ``FabricFrameView.set_world_poses`` over the bodies. A second view
over the child cameras must then read body pose composed with the camera's local offset (float64 NumPy truth),
after every step.

The simulation runs in a fresh Python process: ovphysx's USD schemas must be registered before the first ovstage
population of the process, which other tests of the session have done already.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

BODIES = 12
STEPS = 60
DT = 1.0 / 60.0

_MISSING = [m for m in ("ovstage", "ovphysx") if importlib.util.find_spec(m) is None]
pytestmark = pytest.mark.skipif(
    bool(_MISSING),
    reason=f"{' and '.join(_MISSING)} not importable; install with: pip install ovstage && "
    f"pip install --no-deps ovphysx physx-usd-schemas",
)


def scene_usda(bodies: int) -> str:
    """Rigid cubes at different heights with initial spin, each carrying an offset, rotated ``Camera`` Xform."""
    parts = []
    for i in range(bodies):
        parts.append(f"""
    def Xform "Body_{i}" (prepend apiSchemas = ["PhysicsRigidBodyAPI", "PhysicsMassAPI"])
    {{
        double3 xformOp:translate = ({3.0 * (i % 4)}, {5.0 + i}, {2.0 * (i // 4)})
        uniform token[] xformOpOrder = ["xformOp:translate"]
        float physics:mass = 1
        vector3f physics:angularVelocity = ({20.0 + 10 * i}, {45.0 - 5 * i}, 90)
        vector3f physics:velocity = (0.5, {i * 0.25}, -0.5)
        def Cube "Geom" (prepend apiSchemas = ["PhysicsCollisionAPI"])
        {{
            double size = 1
        }}
        def Xform "Camera"
        {{
            double3 xformOp:translate = (0.25, 0.75, {-0.1 * i})
            float3 xformOp:rotateXYZ = ({-15.0 + i}, 30, {5.0 * i})
            uniform token[] xformOpOrder = ["xformOp:translate", "xformOp:rotateXYZ"]
        }}
    }}""")
    return f"""#usda 1.0
(
    defaultPrim = "World"
    metersPerUnit = 1
    upAxis = "Y"
)
def Xform "World"
{{
    def PhysicsScene "PhysicsScene" (prepend apiSchemas = ["PhysxSceneAPI"])
    {{
        vector3f physics:gravityDirection = (0, -1, 0)
        float physics:gravityMagnitude = 9.81
        bool physxScene:enableGPUDynamics = false
        uniform token physxScene:broadphaseType = "MBP"
    }}
{"".join(parts)}
}}
"""


def quat_rows(q: np.ndarray) -> np.ndarray:
    """(N, 4) xyzw -> (N, 3, 3) row-vector rotations (rows are the rotated axes), float64."""
    from helpers import quat_xyzw_to_rotation  # here: the simulation subprocess imports ovphysx before pxr

    q = np.asarray(q, dtype=np.float64)
    return np.transpose(quat_xyzw_to_rotation(q / np.linalg.norm(q, axis=1, keepdims=True)), (0, 2, 1))


def rows_quat(r: np.ndarray) -> np.ndarray:
    """(N, 3, 3) row-vector rotations -> (N, 4) xyzw, w >= 0 (float64)."""
    out = []
    for m in np.transpose(np.asarray(r, dtype=np.float64), (0, 2, 1)):  # column-vector matrices
        w = np.sqrt(max(0.0, 1.0 + m[0, 0] + m[1, 1] + m[2, 2])) / 2
        x = np.copysign(np.sqrt(max(0.0, 1.0 + m[0, 0] - m[1, 1] - m[2, 2])) / 2, m[2, 1] - m[1, 2])
        y = np.copysign(np.sqrt(max(0.0, 1.0 - m[0, 0] + m[1, 1] - m[2, 2])) / 2, m[0, 2] - m[2, 0])
        z = np.copysign(np.sqrt(max(0.0, 1.0 - m[0, 0] - m[1, 1] + m[2, 2])) / 2, m[1, 0] - m[0, 1])
        q = np.array([x, y, z, w])
        out.append(q / np.linalg.norm(q))
    return np.array(out)


def rows_from_pose(pos: np.ndarray, quat: np.ndarray) -> np.ndarray:
    """(N, 4, 4) float64 row-vector matrices from positions and xyzw quaternions (unit scale)."""
    m = np.tile(np.eye(4), (len(pos), 1, 1))
    m[:, :3, :3] = quat_rows(quat)
    m[:, 3, :3] = pos
    return m


def simulate(workdir: Path, device: str) -> dict:
    """Run the scene for ``STEPS`` steps, syncing poses through frameview and checking the cameras after each."""
    import ovphysx
    import ovstage
    import warp as wp
    from ovphysx.samples.python_samples.schema_support import physx_schema_paths
    from ovphysx.types import ObjectScope, SimObjectType
    from pxr import Usd, UsdGeom

    import frameview as fv

    wp.config.quiet = True
    ovstage.population.register_usd_schemas([str(p) for p in physx_schema_paths()])
    usda = workdir / "bodies.usda"
    usda.write_text(scene_usda(BODIES))
    physx = ovphysx.PhysX()
    stage = ovstage.Stage("physics")
    ovstage.population.open_usd(stage, str(usda.resolve()), ordinal=1, domains=ovstage.PopulationDomain.ALL)
    stage.advance_write_floor(ordinal=1).wait()
    physx.wait_task(physx.attach_ovstage(stage, read_ordinal=1))
    pd = ovstage.PathDictionary(stage)
    body_paths = [f"/World/Body_{i}" for i in range(BODIES)]
    bodies = fv.FabricFrameView("/World/Body_.*", stage=stage, device=device)
    cameras = fv.FabricFrameView("/World/Body_.*/Camera", stage=stage, device=device)
    assert sorted(bodies.prim_paths) == sorted(body_paths) and cameras.count == BODIES
    row_of = {p: i for i, p in enumerate(bodies.prim_paths)}
    # the cameras' local offsets as authored, from pxr (truth for the composition below)
    authored = Usd.Stage.Open(str(usda))
    cache = UsdGeom.XformCache()
    cam_local = np.array(
        [np.array(cache.GetLocalTransformation(authored.GetPrimAtPath(p))[0]) for p in cameras.prim_paths]
    )
    cam_body = np.array([row_of[p.rsplit("/", 1)[0]] for p in cameras.prim_paths])
    first_pos = None
    worst_pos = worst_quat = 0.0
    try:
        for step in range(STEPS):
            physx.step_sync(DT)
            pos = np.zeros((BODIES, 3))
            quat = np.zeros((BODIES, 4))
            with physx.read_sync(SimObjectType.RIGID_BODY, ["position", "orientation"], scope=ObjectScope.ALL) as res:
                for g in res.groups:
                    name = pd.token_to_string(g.attribute)
                    rows = [row_of[p] for p in pd.get_path_strings(g.prim_list)[: g.prim_count]]
                    values = g.tensors[0].numpy()[: g.prim_count].astype(np.float64)
                    (pos if name == "position" else quat)[rows] = values
                del g
            del res
            physx.wait_all()
            if first_pos is None:
                first_pos = pos.copy()
            # the sync step: physics poses -> Fabric (world space, children follow)
            bodies.set_world_poses(positions=pos.astype(np.float32), orientations=quat.astype(np.float32))
            # truth: body pose (as written, float32) composed with each camera's local offset, in float64
            body_world = rows_from_pose(pos.astype(np.float32), quat.astype(np.float32))
            expected = np.einsum("nij,njk->nik", cam_local, body_world[cam_body])
            cam_pos, cam_quat = (a.numpy().astype(np.float64) for a in cameras.get_world_poses())
            pos_err = float(np.abs(cam_pos - expected[:, 3, :3]).max())
            q_true = rows_quat(expected[:, :3, :3])
            quat_err = float(np.minimum(np.abs(cam_quat - q_true).max(1), np.abs(cam_quat + q_true).max(1)).max())
            worst_pos, worst_quat = max(worst_pos, pos_err), max(worst_quat, quat_err)
            assert pos_err < 1e-4, f"step {step}: camera world positions off by {pos_err:.3g}"
            assert quat_err < 1e-4, f"step {step}: camera world orientations off by {quat_err:.3g}"
        spin = float(np.degrees(2 * np.arccos(np.clip(np.abs(quat[:, 3]), 0, 1))).min())
        drop = float((first_pos[:, 1] - pos[:, 1]).min())
        return {"steps": STEPS, "max_pos_err": worst_pos, "max_quat_err": worst_quat, "min_spin_deg": spin,
                "min_drop": drop}  # fmt: skip
    finally:
        bodies.close()
        cameras.close()
        physx.wait_all()
        physx.wait_task(physx.detach_ovstage())
        physx.destroy()
        stage.destroy()


def test_camera_follows_simulated_bodies(tmp_path: Path, device: str) -> None:
    """After every one of 60 physics steps, camera world poses equal synced body pose x camera local offset."""
    env = dict(os.environ)
    here = Path(__file__).resolve().parent
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(here), env.get("PYTHONPATH", "")]))
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), str(tmp_path), device],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"simulation failed (exit {proc.returncode}):\n{output[-4000:]}"
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT "))
    result = json.loads(line[len("RESULT ") :])
    assert result["steps"] == STEPS
    assert result["max_pos_err"] < 1e-4 and result["max_quat_err"] < 1e-4, result
    # the bodies really moved: every body fell and turned (the check above is not about a static scene)
    assert result["min_drop"] > 0.5, result
    assert result["min_spin_deg"] > 10.0, result


if __name__ == "__main__":
    print("RESULT " + json.dumps(simulate(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "cpu")))

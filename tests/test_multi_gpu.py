# SPDX-License-Identifier: Apache-2.0
"""Views on two GPUs in one process: each device its own embedded Fabric model of its own pxr stage, reads and
writes interleaved across the devices (indexed, masked, full; device indices and masks on the view's device),
against float64 truth (pxr XformCache of the initial stage, the written values composed in NumPy)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import warp as wp
from distributed_rank import check_after, check_dst, check_initial, check_known, run_ranks
from helpers import PoseModel, assert_quats_close, build_env_stage, decompose_all, env_paths, random_quats

import frameview as fv

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(wp.get_cuda_device_count() < 2, reason="needs 2 CUDA devices (wp.get_cuda_device_count() < 2)"),
]

TESTS = Path(__file__).resolve().parent
DEVICES = ("cuda:0", "cuda:1")
N = 24
"""Envs per stage."""
K = 6
"""Rows of every indexed call."""


@dataclass
class Sim:
    """One device's stage, views, float64 model, and the input buffers it reuses (same addresses every call, new
    contents: repeated calls go through the views' captured CUDA graphs)."""

    device: str
    stage: Any
    robots: fv.FabricFrameView
    cams: fv.FabricFrameView
    model: PoseModel
    buffers: dict[str, wp.array] = field(default_factory=dict)
    pending: list[tuple[str, wp.array, wp.array, np.ndarray]] = field(default_factory=list)

    def buffer(self, name: str, dtype: Any, rows: int) -> wp.array:
        buf = self.buffers.get(name)
        if buf is None:
            buf = self.buffers[name] = wp.zeros(rows, dtype=dtype, device=self.device)
        return buf

    def fill(self, name: str, dtype: Any, values: np.ndarray) -> wp.array:
        """The reused buffer ``name`` holding ``values`` (an asynchronous upload on the view's device)."""
        buf = self.buffer(name, dtype, values.shape[0])
        buf.assign(wp.array(values, dtype=dtype, device="cpu"))
        return buf


def _make_sim(device: str, seed: int) -> Sim:
    stage = build_env_stage(N, seed, robot_scale="uniform", camera_rotation="random")
    robots = fv.FabricFrameView(env_paths(N, "/Robot"), stage=stage, device=device)
    cams = fv.FabricFrameView("/World/envs/env_.*/Robot/Camera", stage=stage, device=device)
    assert robots.device == device and cams.device == device and cams.fabric_stage.device == device
    return Sim(device, stage, robots, cams, PoseModel(stage, [*robots.prim_paths, *cams.prim_paths]))


@pytest.fixture
def sims() -> list[Sim]:
    """One simulation per device, different stages (seeds), closed afterwards."""
    made = [_make_sim(device, seed=40 + k) for k, device in enumerate(DEVICES)]
    yield made
    for sim in made:
        sim.cams.close()
        sim.robots.close()


def _read(sim: Sim, what: str, view: fv.FabricFrameView, rows: np.ndarray, **kwargs: Any) -> None:
    """Read world poses and keep an on-device copy (no host wait) to compare once both devices have run."""
    pos, quat = view.get_world_poses(**kwargs)
    sim.pending.append((what, wp.clone(pos), wp.clone(quat), rows))


def _check(sim: Sim) -> None:
    """Compare every read kept since the last check against the model (float64)."""
    for what, pos, quat, rows in sim.pending:
        paths = [sim.robots.prim_paths[i] for i in rows] if what.startswith("robots") else [
            sim.cams.prim_paths[i] for i in rows]  # fmt: skip
        p_true, q_true, _ = decompose_all(sim.model.worlds(paths))
        got_pos, got_quat = pos.numpy(), quat.numpy()
        if what.endswith("mask"):  # N-row outputs: only the masked rows were filled
            got_pos, got_quat = got_pos[rows], got_quat[rows]
        np.testing.assert_allclose(got_pos, p_true, atol=2e-4, err_msg=f"{sim.device} {what}")
        assert_quats_close(got_quat, q_true, atol=2e-4)
    sim.pending.clear()


def _step(sim: Sim, rng: np.random.Generator, step: int) -> None:
    """One round of writes then reads on one device, all with device inputs, no host wait."""
    robot_paths, cam_paths = sim.robots.prim_paths, sim.cams.prim_paths
    # indexed robot write (device int32 indices); every third step positions only
    ids = rng.choice(N, K, replace=False).astype(np.int32)
    pos = rng.uniform(-3.0, 3.0, (K, 3)).astype(np.float32)
    quat = random_quats(rng, K).astype(np.float32)
    idx = sim.fill("ids", wp.int32, ids)
    if step % 3 == 2:
        sim.robots.set_world_poses(sim.fill("pos_k", wp.vec3f, pos), None, indices=idx)
        sim.model.set_world([robot_paths[i] for i in ids], pos.astype(np.float64), None)
    else:
        sim.robots.set_world_poses(sim.fill("pos_k", wp.vec3f, pos), sim.fill("quat_k", wp.quatf, quat), indices=idx)
        sim.model.set_world([robot_paths[i] for i in ids], pos.astype(np.float64), quat.astype(np.float64))
    # masked robot write (device bool mask, N-row data)
    mask = rng.random(N) < 0.4
    pos_n = rng.uniform(-3.0, 3.0, (N, 3)).astype(np.float32)
    quat_n = random_quats(rng, N).astype(np.float32)
    sim.robots.set_world_poses(sim.fill("pos_n", wp.vec3f, pos_n), sim.fill("quat_n", wp.quatf, quat_n),
                               mask=sim.fill("mask", wp.bool, mask))  # fmt: skip
    rows = np.flatnonzero(mask)
    sim.model.set_world([robot_paths[i] for i in rows], pos_n[rows].astype(np.float64),
                        quat_n[rows].astype(np.float64))  # fmt: skip
    # full camera write (leaves under the moved robots) every other step
    if step % 2 == 1:
        cam_pos = rng.uniform(-3.0, 3.0, (N, 3)).astype(np.float32)
        cam_quat = random_quats(rng, N).astype(np.float32)
        sim.cams.set_world_poses(sim.fill("cam_pos", wp.vec3f, cam_pos), sim.fill("cam_quat", wp.quatf, cam_quat))
        sim.model.set_world(list(cam_paths), cam_pos.astype(np.float64), cam_quat.astype(np.float64))
    # reads: indexed (the same device indices: replayed graphs), masked, full; cameras and robots
    read_ids = rng.choice(N, K, replace=False).astype(np.int32)
    read_idx = sim.fill("read_ids", wp.int32, read_ids)
    _read(sim, "cams", sim.cams, read_ids, indices=read_idx)
    _read(sim, "robots", sim.robots, read_ids, indices=read_idx)
    _read(sim, "cams mask", sim.cams, np.flatnonzero(mask), mask=sim.buffers["mask"])
    _read(sim, "cams", sim.cams, np.arange(N))


def test_views_on_two_devices_interleaved(sims: list[Sim]) -> None:
    """Writes and reads alternate between cuda:0 and cuda:1 (each device's calls queued without a host wait in
    between), and every read matches the float64 model of its own stage; no device reports an error."""
    rng = np.random.default_rng(7)
    for step in range(9):
        order = sims if step % 2 == 0 else sims[::-1]
        for sim in order:
            _step(sim, rng, step)
        for sim in order:
            _check(sim)
    for sim in sims:
        sim.robots.check()
        sim.cams.check()


def test_torch_inputs_on_each_device(sims: list[Sim]) -> None:
    """torch int64 indices and float tensors on cuda:1 (and cuda:0) go to that device's view without a host copy and
    write the right prims."""
    torch = pytest.importorskip("torch")
    if torch.cuda.device_count() < 2:
        pytest.skip("this torch build sees fewer than 2 CUDA devices")
    rng = np.random.default_rng(8)
    for sim in sims[::-1]:
        ids = rng.choice(N, K, replace=False)
        pos = rng.uniform(-3.0, 3.0, (K, 3)).astype(np.float32)
        quat = random_quats(rng, K).astype(np.float32)
        dev = torch.device(sim.device)
        sim.robots.set_world_poses(torch.as_tensor(pos, device=dev), torch.as_tensor(quat, device=dev),
                                   indices=torch.as_tensor(ids, device=dev))  # fmt: skip
        sim.model.set_world([sim.robots.prim_paths[i] for i in ids], pos.astype(np.float64), quat.astype(np.float64))
        mask = torch.zeros(N, dtype=torch.bool, device=dev)
        mask[torch.as_tensor(ids, device=dev)] = True
        _read(sim, "cams mask", sim.cams, np.sort(ids), mask=mask)
    for sim in sims:
        _check(sim)
        sim.robots.check()


def test_inputs_from_the_other_device_are_copied(sims: list[Sim]) -> None:
    """Data, indices and masks on cuda:0 handed to the cuda:1 view are moved to cuda:1 and write the right prims."""
    sim = sims[1]
    rng = np.random.default_rng(9)
    ids = rng.choice(N, K, replace=False).astype(np.int32)
    pos = rng.uniform(-3.0, 3.0, (K, 3)).astype(np.float32)
    quat = random_quats(rng, K).astype(np.float32)
    on_0 = (wp.array(pos, dtype=wp.vec3f, device="cuda:0"), wp.array(quat, dtype=wp.quatf, device="cuda:0"))
    ids_0 = wp.array(ids, dtype=wp.int32, device="cuda:0")
    mask = np.zeros(N, dtype=bool)
    mask[ids] = True
    mask_0 = wp.array(mask, dtype=wp.bool, device="cuda:0")
    wp.synchronize_device("cuda:0")  # this test is about the copy; the next one about waiting for the producer
    sim.robots.set_world_poses(*on_0, indices=ids_0)
    sim.model.set_world([sim.robots.prim_paths[i] for i in ids], pos.astype(np.float64), quat.astype(np.float64))
    _read(sim, "cams mask", sim.cams, np.sort(ids), mask=mask_0)
    _check(sim)
    sim.robots.check()


@wp.kernel(enable_backward=False)
def _slow_fill(
    # inputs
    value: wp.vec3f,
    spins: int,
    # outputs
    out: wp.array(dtype=wp.vec3f),
):
    """One thread spins ``spins`` dependent steps, then fills ``out`` with ``value`` (a producer that takes a while)."""
    x = float(1.0)
    for _ in range(spins):
        x = x * 0.9999999 + 0.0000001
    result = value
    if x < -1.0:  # never: keeps the spin live
        result = wp.vec3f(0.0, 0.0, 0.0)
    for i in range(out.shape[0]):
        out[i] = result


def test_inputs_from_the_other_device_wait_for_their_producer(sims: list[Sim]) -> None:
    """Positions still being written by a kernel on cuda:0 are read by the cuda:1 view only once that kernel ends."""
    sim = sims[1]
    ids = np.arange(K, dtype=np.int32)
    produced = wp.zeros(K, dtype=wp.vec3f, device="cuda:0")
    wp.launch(_slow_fill, dim=1, inputs=[wp.vec3f(1.0, 2.0, 3.0), 1 << 24], outputs=[produced], device="cuda:0")
    sim.robots.set_world_poses(produced, None, indices=wp.array(ids, dtype=wp.int32, device="cuda:1"))
    sim.model.set_world([sim.robots.prim_paths[i] for i in ids], np.tile([1.0, 2.0, 3.0], (K, 1)), None)
    _read(sim, "robots", sim.robots, ids, indices=ids)
    _check(sim)


def test_two_nccl_ranks_gather_from_their_own_gpus(tmp_path: Path) -> None:
    """Two ranks over NCCL, rank r with its stage and views on cuda:r: fv.all_gather_poses of a view, of torch
    tensors (to rank 0 only) and of host arrays (through the GPU) gives every rank's float64 truth."""
    torch = pytest.importorskip("torch")
    if torch.cuda.device_count() < 2 or not torch.distributed.is_nccl_available():
        pytest.skip("this torch build sees fewer than 2 CUDA devices or has no NCCL")
    gathered = run_ranks(tmp_path, world=2, kind="cuda", timeout_s=240.0)
    check_initial(gathered)
    check_after(gathered)
    check_dst(gathered)
    check_known(gathered)


def test_a_process_on_cuda1_leaves_cuda0_alone() -> None:
    """Views on cuda:1 only (reads, writes, captured graphs, check) create no CUDA context on cuda:0."""
    code = textwrap.dedent(
        """
        import ctypes
        import numpy as np
        import warp as wp
        import frameview as fv
        from helpers import build_env_stage, env_paths

        lib = ctypes.CDLL("libcuda.so.1")

        def active(ordinal):
            dev, flags, state = ctypes.c_int(), ctypes.c_uint(), ctypes.c_int()
            assert lib.cuDeviceGet(ctypes.byref(dev), ordinal) == 0
            assert lib.cuDevicePrimaryCtxGetState(dev, ctypes.byref(flags), ctypes.byref(state)) == 0
            return state.value

        wp.config.quiet = True
        wp.init()
        wp.zeros(1, dtype=wp.float32, device="cuda:1")
        print("WARP", active(0), active(1))
        stage = build_env_stage(8, 3, robot_scale="uniform", camera_rotation="random")
        with fv.FabricFrameView(env_paths(8, "/Robot"), stage=stage, device="cuda:1") as robots, \\
                fv.FabricFrameView(env_paths(8, "/Robot/Camera"), stage=stage, device="cuda:1") as cams:
            idx = wp.array([1, 5], dtype=wp.int32, device="cuda:1")
            mask = wp.array(np.arange(8) % 2 == 0, dtype=wp.bool, device="cuda:1")
            pos = wp.zeros(2, dtype=wp.vec3f, device="cuda:1")
            quat = wp.array([[0.0, 0.0, 0.0, 1.0]] * 2, dtype=wp.quatf, device="cuda:1")
            for _ in range(4):
                robots.set_world_poses(pos, quat, indices=idx)
                cams.get_world_poses(idx)
                cams.get_world_poses(mask=mask)
                cams.get_world_poses()
            robots.check()
            cams.check()
            wp.synchronize_device("cuda:1")
        print("VIEWS", active(0), active(1))
        """
    )
    src = str(Path(fv.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(TESTS), src, os.environ.get("PYTHONPATH")) if p)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    states = dict(line.split(" ", 1) for line in out.stdout.splitlines() if line.startswith(("WARP", "VIEWS")))
    if states["WARP"].split()[0] != "0":
        pytest.skip(f"Warp itself made a context on cuda:0 before any view (states {states})")
    assert states["VIEWS"].split() == ["0", "1"], f"primary contexts (cuda:0, cuda:1): {states}"

# SPDX-License-Identifier: Apache-2.0
"""Ranks for the distributed tests: the program each rank runs, the launcher, and every rank's float64 truth.

Each rank is a process of its own, joined to the others on loopback (gloo on the CPU, NCCL on ``cuda:<rank>``). It
builds its own small stage (:func:`rank_stage`: ``3 + 2 * rank`` envs, so ranks hold different counts), views its
robots and cameras on its device, gathers the camera poses with ``fv.all_gather_poses`` in four ways and saves what
it received to ``<out_dir>/rank<r>.npz``; the tests compare that against :func:`truth` of every rank.

Rank usage: ``python tests/distributed_rank.py OUT_DIR {cpu,cuda}`` with ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``,
``MASTER_PORT`` set (torch.distributed's ``env://``); :func:`run_ranks` does that.
"""

from __future__ import annotations

import datetime
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from helpers import (
    PoseModel,
    assert_quats_close,
    build_env_stage,
    decompose_all,
    env_paths,
    random_quats,
    xform_cache_world,
)

TESTS = Path(__file__).resolve().parent


def rank_envs(rank: int) -> int:
    """Envs on ``rank``'s stage (ranks differ: gathers pad and unpad)."""
    return 3 + 2 * rank


def rank_stage(rank: int):  # -> Usd.Stage
    """The stage of ``rank``: its own envs and seed; similarity transforms only (world writes solve exactly)."""
    return build_env_stage(rank_envs(rank), seed=100 + rank, robot_scale="uniform", camera_rotation="random")


def rank_writes(rank: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(indices, positions, orientations)`` of the robot world write each rank makes: its first and last env."""
    rng = np.random.default_rng(200 + rank)
    indices = np.array([0, rank_envs(rank) - 1], dtype=np.int32)
    return indices, rng.uniform(-3.0, 3.0, (2, 3)), random_quats(rng, 2)


def truth(rank: int, written: bool) -> tuple[np.ndarray, np.ndarray]:
    """Camera world poses of ``rank``'s stage, float64: pxr XformCache, then (``written``) the rank's robot write
    composed in NumPy (the cameras follow their robots). Never calls frameview."""
    stage = rank_stage(rank)
    n = rank_envs(rank)
    robots, cams = env_paths(n, "/Robot"), env_paths(n, "/Robot/Camera")
    if not written:
        pos, quat, _ = decompose_all(xform_cache_world(stage, cams))
        return pos, quat
    model = PoseModel(stage, robots + cams)
    indices, positions, orientations = rank_writes(rank)
    model.set_world([robots[i] for i in indices], positions, orientations)
    pos, quat, _ = decompose_all(model.worlds(cams))
    return pos, quat


def _assert_poses(pos: np.ndarray, quat: np.ndarray, expected: list[tuple[np.ndarray, np.ndarray]]) -> None:
    np.testing.assert_allclose(pos, np.concatenate([t[0] for t in expected]), atol=1e-4)
    assert_quats_close(quat, np.concatenate([t[1] for t in expected]), atol=1e-4)


def check_initial(gathered: list[dict[str, np.ndarray]]) -> None:
    """Every rank received every rank's cameras before the writes, in rank order, unequal counts unpadded."""
    expected = [truth(rank, written=False) for rank in range(len(gathered))]
    for rank, got in enumerate(gathered):
        assert got["initial_counts"].tolist() == [rank_envs(r) for r in range(len(gathered))], rank
        _assert_poses(got["initial_pos"], got["initial_quat"], expected)


def check_after(gathered: list[dict[str, np.ndarray]]) -> None:
    """Every rank received every rank's moved cameras after the writes; each rank's own rows are its view's read."""
    expected = [truth(rank, written=True) for rank in range(len(gathered))]
    for got in gathered:
        _assert_poses(got["after_pos"], got["after_quat"], expected)
        assert bool(got["own_rows_equal"])


def check_dst(gathered: list[dict[str, np.ndarray]]) -> None:
    """Rank 0 received every rank's last camera (dst=0); the others got None."""
    expected = [truth(rank, written=True) for rank in range(len(gathered))]
    assert not bool(gathered[0]["dst_is_none"]) and all(bool(got["dst_is_none"]) for got in gathered[1:])
    _assert_poses(gathered[0]["dst_pos"], gathered[0]["dst_quat"], [(p[-1:], q[-1:]) for p, q in expected])


def check_known(gathered: list[dict[str, np.ndarray]]) -> None:
    """float64 NumPy pairs with known counts came back as float32 rows of every rank."""
    expected = [truth(rank, written=True) for rank in range(len(gathered))]
    for got in gathered:
        assert got["known_pos"].dtype == np.float32
        _assert_poses(got["known_pos"], got["known_quat"], expected)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_ranks(out_dir: Path, world: int, kind: str, timeout_s: float) -> list[dict[str, np.ndarray]]:
    """Start ``world`` ranks on loopback and return what each saved; raise AssertionError (with the ranks' output)
    on a non-zero exit or when a rank still runs after ``timeout_s`` (a hang).

    Args:
        out_dir: Where the ranks write their ``.npz`` files and logs.
        world: Number of ranks.
        kind: ``"cpu"`` (gloo; the ranks see no GPU) or ``"cuda"`` (NCCL, rank ``r`` on ``cuda:r``).
        timeout_s: Seconds for all ranks together.
    """
    import frameview as fv

    src = str(Path(fv.__file__).resolve().parents[1])
    env = {
        **os.environ,
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(_free_port()),
        "WORLD_SIZE": str(world),
        "NCCL_NVLS_ENABLE": "0",  # NVLink multicast off
        "PYTHONPATH": os.pathsep.join(p for p in (str(TESTS), src, os.environ.get("PYTHONPATH", "")) if p),
    }
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")  # gloo's own connections on loopback too
    if kind == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""  # CPU ranks leave any GPU alone
    procs, logs = [], []
    for rank in range(world):
        log = open(out_dir / f"rank{rank}.log", "w+")  # noqa: SIM115 - closed below
        logs.append(log)
        procs.append(subprocess.Popen(
            [sys.executable, str(TESTS / "distributed_rank.py"), str(out_dir), kind],
            env={**env, "RANK": str(rank), "LOCAL_RANK": str(rank)}, stdout=log, stderr=subprocess.STDOUT,
        ))  # fmt: skip
    deadline = time.monotonic() + timeout_s
    try:
        for proc in procs:
            proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        pass
    finally:
        hung = [rank for rank, proc in enumerate(procs) if proc.poll() is None]
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        text = []
        for rank, log in enumerate(logs):
            log.seek(0)
            text.append(f"--- rank {rank} (exit {procs[rank].returncode}):\n{log.read()[-4000:]}")
            log.close()
    assert not hung, f"ranks {hung} still running after {timeout_s:.0f} s (a hang):\n" + "\n".join(text)
    assert all(proc.returncode == 0 for proc in procs), "a rank failed:\n" + "\n".join(text)
    return [dict(np.load(out_dir / f"rank{rank}.npz")) for rank in range(world)]


def main(out_dir: str, kind: str) -> int:
    import torch
    import torch.distributed as dist
    import warp as wp

    import frameview as fv

    wp.config.quiet = True
    wp.init()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    timeout = datetime.timedelta(seconds=60)
    if kind == "cuda":
        device = f"cuda:{rank}"
        torch.cuda.set_device(rank)
        dist.init_process_group("nccl", rank=rank, world_size=world, timeout=timeout, device_id=torch.device(device))
    else:
        device = "cpu"
        dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timeout)

    def host(t: torch.Tensor) -> np.ndarray:
        return t.cpu().numpy()

    try:
        stage = rank_stage(rank)
        n = rank_envs(rank)
        saved: dict[str, np.ndarray] = {}
        with (
            fv.FabricFrameView(env_paths(n, "/Robot"), stage=stage, device=device) as robots,
            fv.FabricFrameView("/World/envs/env_.*/Robot/Camera", stage=stage, device=device) as cams,
        ):
            # 1. a view, before any write: counts exchanged, padded to the largest rank
            g = fv.all_gather_poses(cams)
            assert g.positions.device == torch.device(device), g.positions.device
            saved.update(initial_pos=host(g.positions), initial_quat=host(g.orientations),
                         initial_counts=np.array(g.counts))  # fmt: skip
            # 2. after a robot write with device indices (the cameras follow): the gather sees the new poses
            indices, positions, orientations = rank_writes(rank)
            robots.set_world_poses(positions, orientations, indices=wp.array(indices, dtype=wp.int32, device=device))
            g = fv.all_gather_poses(cams)
            saved.update(after_pos=host(g.positions), after_quat=host(g.orientations))
            own = g.per_rank()[rank][0]
            saved["own_rows_equal"] = np.array(torch.equal(own, wp.to_torch(cams.get_world_poses()[0])))
            # 3. a pair of torch tensors (the last camera only: equal counts), to rank 0 only
            pos, quat = cams.get_world_poses(indices=[n - 1])
            g0 = fv.all_gather_poses((wp.to_torch(pos).clone(), wp.to_torch(quat).clone()), dst=0)
            saved["dst_is_none"] = np.array(g0 is None)
            if g0 is not None:
                saved.update(dst_pos=host(g0.positions), dst_quat=host(g0.orientations))
            # 4. a float64 NumPy pair (host data, whatever the backend) with the counts given: no count exchange
            pos, quat = (a.numpy().astype(np.float64) for a in cams.get_world_poses())
            g = fv.all_gather_poses((pos, quat), counts=[rank_envs(r) for r in range(world)])
            assert g.positions.device == torch.device("cpu"), g.positions.device
            saved.update(known_pos=host(g.positions), known_quat=host(g.orientations))
        np.savez(os.path.join(out_dir, f"rank{rank}.npz"), **saved)
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1], sys.argv[2])
    # The rank's work is saved and its process group destroyed: leave without the interpreter's teardown, where
    # torch's gloo threads now and then abort the process ("terminate called without an active exception", about one
    # run in ten on the 2-core VM, after destroy_process_group returned in both ranks).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)

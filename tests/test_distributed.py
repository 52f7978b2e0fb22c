# SPDX-License-Identifier: Apache-2.0
"""fv.all_gather_poses: two CPU ranks over gloo (each in its own process, with its own stage), and the argument checks
in a one-rank group inside this process."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import warp as wp
from distributed_rank import check_after, check_dst, check_initial, check_known, rank_stage, run_ranks
from helpers import env_paths

import frameview as fv

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available():
    pytest.skip("this torch build has no torch.distributed", allow_module_level=True)

TIMEOUT_S = 90.0
"""A hang (a rank that never joins, a collective that never completes) fails the test after this long."""


def _warm_kernels() -> None:
    """Compile the view's CPU kernels here once, so that the ranks load them from Warp's cache instead of both
    compiling them at the same time."""
    stage = rank_stage(0)
    with (
        fv.FabricFrameView(env_paths(2, "/Robot"), stage=stage, device="cpu") as robots,
        fv.FabricFrameView(env_paths(2, "/Robot/Camera"), stage=stage, device="cpu") as cams,
    ):
        robots.set_world_poses(np.zeros((1, 3)), np.array([[0.0, 0.0, 0.0, 1.0]]), wp.array([1], dtype=wp.int32))
        cams.get_world_poses()
        cams.get_world_poses([0])


@pytest.fixture(scope="module")
def gathered(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, np.ndarray]]:
    """What each of two gloo ranks received (one run of both ranks for the module)."""
    _warm_kernels()
    out_dir: Path = tmp_path_factory.mktemp("ranks")
    return run_ranks(out_dir, world=2, kind="cpu", timeout_s=TIMEOUT_S)


def test_two_ranks_gather_each_others_cameras(gathered: list[dict[str, np.ndarray]]) -> None:
    """Both ranks receive every rank's camera poses in rank order, unequal counts unpadded, against float64 truth."""
    check_initial(gathered)


def test_gather_after_a_write_sees_the_new_poses(gathered: list[dict[str, np.ndarray]]) -> None:
    """After each rank writes its robots with device indices, both see every rank's moved cameras, and each rank's
    own rows are exactly what its view reads."""
    check_after(gathered)


def test_gather_to_one_rank_from_torch_tensors(gathered: list[dict[str, np.ndarray]]) -> None:
    """dst=0: rank 0 receives every rank's (torch) rows, the other ranks get None."""
    check_dst(gathered)


def test_gather_with_known_counts_from_numpy(gathered: list[dict[str, np.ndarray]]) -> None:
    """float64 NumPy pairs with the counts given (no count exchange) gather to float32 rows in rank order."""
    check_known(gathered)


# ---------------------------------------------------------------- one rank, in this process


@pytest.fixture
def one_rank_group():
    """A one-rank gloo group in this process (no network: a HashStore), destroyed afterwards."""
    if dist.is_initialized():
        pytest.skip("torch.distributed is already initialised in this process")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def test_not_initialised_raises() -> None:
    """Without init_process_group the gather says what to call."""
    if dist.is_initialized():
        pytest.skip("torch.distributed is already initialised in this process")
    with pytest.raises(RuntimeError, match="init_process_group"):
        fv.all_gather_poses((np.zeros((1, 3)), np.zeros((1, 4))))


def test_one_rank_returns_its_own_poses_as_tensors(one_rank_group: None) -> None:
    """World size 1: the result is the rank's own poses, as float32 column views of one new (rows, 7) tensor per
    call (not the view's buffers, not an earlier call's result); a Warp pair, a view, and dst=0 agree."""
    stage = rank_stage(0)
    with fv.FabricFrameView("/World/envs/env_.*/Robot/Camera", stage=stage, device="cpu") as cams:
        pos, quat = cams.get_world_poses()
        for g in (fv.all_gather_poses(cams), fv.all_gather_poses((pos, quat)), fv.all_gather_poses(cams, dst=0)):
            assert isinstance(g, fv.GatheredPoses) and g.counts == (cams.count,) and g.offsets == (0,)
            assert g.positions.dtype == torch.float32 and g.positions.shape == (cams.count, 3)
            assert g.orientations.shape == (cams.count, 4) and g.positions.stride() == g.orientations.stride() == (7, 1)
            assert g.orientations.data_ptr() == g.positions.data_ptr() + 3 * 4  # one packed row per pose
            assert torch.equal(g.positions, wp.to_torch(pos)) and torch.equal(g.orientations, wp.to_torch(quat))
            assert g.positions.data_ptr() != wp.to_torch(pos).data_ptr()
        again = fv.all_gather_poses((pos, quat))
        assert again.positions.data_ptr() != g.positions.data_ptr()  # g is still alive: a new tensor, not reused
        assert torch.equal(again.positions, g.positions) and torch.equal(again.orientations, g.orientations)
        ((p0, q0),) = g.per_rank()
        assert torch.equal(p0, g.positions) and torch.equal(q0, g.orientations)


def test_empty_rows(one_rank_group: None) -> None:
    """Zero rows on every rank gather to empty (0, 3) / (0, 4) tensors."""
    g = fv.all_gather_poses((np.zeros((0, 3), np.float32), np.zeros((0, 4), np.float32)))
    assert g is not None and g.positions.shape == (0, 3) and g.orientations.shape == (0, 4) and g.counts == (0,)


@pytest.mark.parametrize(
    ("poses", "error", "match"),
    [
        ("not poses", TypeError, "FrameView or a"),
        ((np.zeros((2, 3)),), TypeError, "length 1"),
        ((np.zeros((2, 3)), [[0.0, 0.0, 0.0, 1.0]] * 2), TypeError, "orientations: expected a Warp array"),
        ((np.zeros((2, 3), np.int32), np.zeros((2, 4))), TypeError, "positions: expected floating-point"),
        ((np.zeros((2, 4)), np.zeros((2, 4))), ValueError, r"positions: expected shape \(M, 3\)"),
        ((np.zeros((2, 3)), np.zeros((3, 4))), ValueError, "same number of rows"),
    ],
)
def test_bad_arguments_raise(one_rank_group: None, poses: object, error: type, match: str) -> None:
    """Wrong kinds, dtypes and shapes are rejected before any collective, naming the argument."""
    with pytest.raises(error, match=match):
        fv.all_gather_poses(poses)


def test_counts_must_match_the_group_and_this_rank(one_rank_group: None) -> None:
    """``counts`` of the wrong length, or disagreeing with this rank's rows, raise ValueError."""
    pair = (np.zeros((2, 3)), np.zeros((2, 4)))
    with pytest.raises(ValueError, match="one per rank"):
        fv.all_gather_poses(pair, counts=[2, 2])
    with pytest.raises(ValueError, match=r"counts\[0\] is 3"):
        fv.all_gather_poses(pair, counts=[3])


def test_rank_device(monkeypatch: pytest.MonkeyPatch) -> None:
    """rank_device: cuda:<LOCAL_RANK>, cuda:0 for a process that sees one GPU, cpu without GPUs; a negative rank,
    or a rank without a GPU of its own, is an error."""
    gpus = wp.get_cuda_device_count()
    monkeypatch.setenv("LOCAL_RANK", "1")
    if gpus == 0:
        assert fv.rank_device() == "cpu" and fv.rank_device(5) == "cpu"
    elif gpus == 1:
        assert fv.rank_device() == "cuda:0" and fv.rank_device(5) == "cuda:0"
    else:
        assert fv.rank_device() == "cuda:1" and fv.rank_device(0) == "cuda:0"
        with pytest.raises(ValueError, match="no GPU of its own"):
            fv.rank_device(gpus)
    with pytest.raises(ValueError, match="local_rank"):
        fv.rank_device(-1)


@pytest.mark.cuda
def test_one_nccl_rank_gathers_its_own_poses_after_each_write() -> None:
    """A one-rank NCCL group on cuda:0 (the path multi-GPU code takes on one GPU: no collective, one copy): after
    each write, the gather holds the poses written (float64 truth of the write: the robots' world positions), in a
    new tensor per call, for a view and a Warp pair, with dst=0 too."""
    if not torch.cuda.is_available() or not dist.is_nccl_available():
        pytest.skip("needs CUDA and NCCL")
    if dist.is_initialized():
        pytest.skip("torch.distributed is already initialised in this process")
    dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1, device_id=torch.device("cuda:0"))
    try:
        stage = rank_stage(0)
        with fv.FabricFrameView(env_paths(2, "/Robot"), stage=stage, device="cuda:0") as robots:
            rng = np.random.default_rng(11)
            previous = None
            for _ in range(3):
                pos = rng.uniform(-3, 3, (robots.count, 3))
                robots.set_world_poses(pos)
                for g in (fv.all_gather_poses(robots), fv.all_gather_poses(robots.get_world_poses(), dst=0)):
                    assert g.counts == (robots.count,) and g.positions.device.type == "cuda"
                    np.testing.assert_allclose(g.positions.cpu().numpy(), pos, atol=1e-5)
                    if previous is not None:
                        assert g.positions.data_ptr() != previous.positions.data_ptr()
                    previous = g
    finally:
        dist.destroy_process_group()

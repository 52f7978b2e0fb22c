# SPDX-License-Identifier: Apache-2.0
"""How the ovstage provider reaches Fabric on each access: the ``HAS`` query kept across accesses, reads that gather
only the columns they use (CUDA devices), and writes placed on the view's GPU or written from the host. Every read
is checked against float64 truth (pxr ``UsdGeom.XformCache`` and NumPy composition of the same scene)."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp
from helpers import (
    PoseModel,
    assert_quats_close,
    build_env_stage,
    decompose_all,
    env_paths,
    random_quats,
    xform_cache_local,
    xform_cache_world,
)
from ovstage_helpers import (
    add_float_attribute,
    delete_prims,
    read_matrices,
    requires_ovstage,
    write_local_matrices,
)

import frameview as fv

pytestmark = requires_ovstage

N = 8
ROBOTS = "/World/envs/env_.*/Robot"
CAMERAS = "/World/envs/env_.*/Robot/Camera"
ROBOT_PATHS = env_paths(N, "/Robot")
CAMERA_PATHS = env_paths(N, "/Robot/Camera")
ATOL = 2e-5


@pytest.fixture
def scene():
    """(pxr stage, its ovstage copy): 8 envs with rotated, scaled levels and 300 filler prims."""
    from ovstage_helpers import ovstage_from_pxr

    stage = build_env_stage(N, seed=5, filler=300)
    ovs = ovstage_from_pxr(stage)
    yield stage, ovs
    ovs.destroy()


@pytest.fixture(params=["zero-copy", "gathered"])
def columns(request: pytest.FixtureRequest, device: str) -> str:
    """How a read reaches the columns: in place (the CPU's default) or gathered (a CUDA device, or the CPU switch)."""
    if request.param == "zero-copy" and device != "cpu":
        pytest.skip("a CUDA view always gathers")
    return request.param


def open_view(pattern: str, ovs, device: str, columns: str = "gathered") -> fv.FabricFrameView:
    view = fv.FabricFrameView(pattern, stage=ovs, device=device)
    if device == "cpu":
        view.fabric_stage.zero_copy = columns == "zero-copy"
    return view


def assert_world(view: fv.FabricFrameView, world: np.ndarray, indices: np.ndarray | None = None) -> None:
    rows = slice(None) if indices is None else indices
    pos, quat = view.get_world_poses(None if indices is None else wp.array(indices, dtype=wp.int32,
                                                                            device=view.device))  # fmt: skip
    t, q, _ = decompose_all(world[rows])
    np.testing.assert_allclose(pos.numpy(), t, atol=ATOL, err_msg="world positions")
    assert_quats_close(quat.numpy(), q, atol=ATOL)


def assert_local(view: fv.FabricFrameView, local: np.ndarray) -> None:
    pos, quat = view.get_local_poses()
    t, q, s = decompose_all(local)
    np.testing.assert_allclose(pos.numpy(), t, atol=ATOL, err_msg="local positions")
    assert_quats_close(quat.numpy(), q, atol=ATOL)
    np.testing.assert_allclose(view.get_local_scales().numpy(), s, rtol=2e-6, err_msg="local scales")


# ---------------------------------------------------------------- the kept query


def test_kept_query_follows_bucket_moves(scene, device: str, columns: str) -> None:
    """Cameras that move to another bucket (a new attribute) between reads are read at their new rows."""
    stage, ovs = scene
    with open_view(CAMERAS, ovs, device, columns) as view:
        world = xform_cache_world(stage, CAMERA_PATHS)
        assert_world(view, world)
        ordinal = view.fabric_stage.ordinal + 10
        add_float_attribute(ovs, CAMERA_PATHS[1:6:2], "test:moved", ordinal)  # rows 1, 3, 5 move
        assert_world(view, world)
        assert_world(view, world, np.array([5, 0, 3, 7], np.int32))
        add_float_attribute(ovs, CAMERA_PATHS[:2], "test:moved_again", ordinal + 1)
        assert_local(view, xform_cache_local(stage, CAMERA_PATHS))
        assert_world(view, world)


def test_kept_query_reports_a_deleted_prim(scene, device: str, columns: str) -> None:
    """A camera deleted after the query was issued makes the next read raise (never a read of another prim)."""
    _, ovs = scene
    with open_view(CAMERAS, ovs, device, columns) as view:
        view.get_world_poses()
        delete_prims(ovs, [CAMERA_PATHS[2]], view.fabric_stage.ordinal + 10)
        with pytest.raises(RuntimeError, match="recreate the view"):
            view.get_world_poses()


def test_query_issued_once_while_the_layout_holds(scene, monkeypatch: pytest.MonkeyPatch, device: str) -> None:
    """Reads reuse one query; tagging prims on the stage (another view) makes the next access issue it again;
    close() releases it."""
    _, ovs = scene
    issued: list[object] = []
    query = ovs.query

    def counting(*args, **kwargs):
        issued.append(args)
        return query(*args, **kwargs)

    monkeypatch.setattr(ovs, "query", counting)
    with open_view(CAMERAS, ovs, device) as view:
        view.get_world_poses()
        before = len(issued)
        for _ in range(3):
            view.get_world_poses()
            view.get_local_poses()
        assert len(issued) == before
        with open_view(ROBOTS, ovs, device) as other:
            other.get_world_poses()
        view.get_world_poses()
        assert len(issued) > before
        selection = view._data.sel
    assert selection.query is None


# ---------------------------------------------------------------- reads of some columns


def test_gathered_reads_never_see_a_column_they_skipped(scene, device: str, placement: str) -> None:
    """World and local reads of a gathering provider interleaved with foreign writes of the robots' local matrices:
    every read sees the latest values, whichever columns the previous reads gathered."""
    stage, ovs = scene
    model = PoseModel(stage, ROBOT_PATHS + CAMERA_PATHS)
    rng = np.random.default_rng(2)
    with open_view(ROBOTS, ovs, device) as robots, open_view(CAMERAS, ovs, device) as cameras:
        place(robots, placement)
        ordinal = robots.fabric_stage.ordinal + 10
        for step in range(4):
            model.set_local(ROBOT_PATHS, rng.uniform(-2, 2, (N, 3)), random_quats(rng, N))  # scales kept
            write_local_matrices(ovs, ROBOT_PATHS, model.locals(ROBOT_PATHS), ordinal + step)
            if step % 2:
                assert_local(robots, model.locals(ROBOT_PATHS))
                assert_world(cameras, model.worlds(CAMERA_PATHS))
            else:
                assert_world(robots, model.worlds(ROBOT_PATHS))
                assert_world(cameras, model.worlds(CAMERA_PATHS))
                np.testing.assert_allclose(robots.get_world_scales().numpy(),
                                           decompose_all(model.worlds(ROBOT_PATHS))[2], rtol=2e-6)  # fmt: skip
            assert_local(robots, model.locals(ROBOT_PATHS))


def test_prepare_for_read_rejects_unknown_columns(scene) -> None:
    _, ovs = scene
    with open_view(CAMERAS, ovs, "cpu") as view, pytest.raises(ValueError, match="not:a:column"):
        view._data.sel.prepare_for_read(["not:a:column"])


# ---------------------------------------------------------------- placed and host writes


@pytest.fixture(params=["host", "device", "device+reads"])
def placement(request: pytest.FixtureRequest, device: str) -> str:
    """Where a write hands its local matrices to ovstage, and (``device+reads``) where reads ask for the columns
    (a CPU view always reads and writes on the host)."""
    if request.param != "host" and device == "cpu":
        pytest.skip("device placements need a CUDA view")
    return request.param


def place(view: fv.FabricFrameView, placement: str) -> None:
    provider = view.fabric_stage
    provider.write_placement = placement.split("+")[0]
    provider.read_placement = "device" if placement.endswith("+reads") else "host"


@pytest.mark.parametrize("space", ["world", "local"])
def test_writes_in_every_placement(scene, device: str, placement: str, space: str) -> None:
    """Full, indexed (int32 and int64, unordered), masked writes of the robots: robots and cameras equal float64
    truth, and Fabric itself holds the cameras' new world matrices; rows not written keep theirs."""
    stage, ovs = scene
    model = PoseModel(stage, ROBOT_PATHS + CAMERA_PATHS)
    rng = np.random.default_rng(7)
    with open_view(ROBOTS, ovs, device) as robots, open_view(CAMERAS, ovs, device) as cameras:
        place(robots, placement)
        selections = [None, np.array([6, 1, 3], np.int32), np.array([0, 7], np.int64), "mask"]
        for pick in selections:
            if isinstance(pick, str):
                mask = rng.random(N) < 0.5
                mask[2] = True
                rows, arg = np.flatnonzero(mask), {"mask": wp.array(mask, dtype=wp.bool, device=device)}
            elif pick is None:
                rows, arg = np.arange(N), {}
            else:
                rows, arg = pick, {"indices": wp.array(pick, device=device)}
            size = N if "mask" in arg else rows.size  # a masked write takes full-size data (Isaac Lab's convention)
            p = np.asarray(rng.uniform(-3, 3, (size, 3)), np.float32)
            q = np.asarray(random_quats(rng, size), np.float32)
            paths = [ROBOT_PATHS[i] for i in rows]
            if space == "world":
                robots.set_world_poses(positions=wp.array(p, dtype=wp.vec3f, device=device),
                                       orientations=wp.array(q, dtype=wp.quatf, device=device), **arg)  # fmt: skip
                model.set_world(paths, *(v[rows] if "mask" in arg else v for v in (p.astype(float), q.astype(float))))
            else:
                robots.set_local_poses(translations=wp.array(p, dtype=wp.vec3f, device=device),
                                       orientations=wp.array(q, dtype=wp.quatf, device=device), **arg)  # fmt: skip
                model.set_local(paths, *(v[rows] if "mask" in arg else v for v in (p.astype(float), q.astype(float))))
            assert_world(robots, model.worlds(ROBOT_PATHS))
            assert_world(cameras, model.worlds(CAMERA_PATHS))
            np.testing.assert_allclose(read_matrices(ovs, CAMERA_PATHS), model.worlds(CAMERA_PATHS), atol=1e-5)


@pytest.mark.parametrize("what", ["write_placement", "read_placement"])
def test_placement_argument_errors(scene, what: str) -> None:
    _, ovs = scene
    with open_view(ROBOTS, ovs, "cpu") as view:
        provider = view.fabric_stage
        assert getattr(provider, what) == "host"
        with pytest.raises(ValueError, match=f"{what}: 'device' needs a CUDA provider"):
            setattr(provider, what, "device")
        with pytest.raises(ValueError, match="'device' or 'host'"):
            setattr(provider, what, "gpu")


def test_hierarchy_model_is_reported(scene) -> None:
    """A stage created without a StageConfig uses ovstage's process default, the CPU model."""
    _, ovs = scene
    with open_view(ROBOTS, ovs, "cpu") as view:
        assert view.fabric_stage.hierarchy_model in ("cpu-incremental", "gpu-incremental", "gpu-global")
        if ovs.config.runtime_default_hierarchy_computation_model is None:
            assert view.fabric_stage.hierarchy_model == "cpu-incremental"


def test_write_after_a_foreign_writer_sealed_a_later_ordinal(scene, device: str) -> None:
    """The provider writes without asking ovstage for the write floors; when someone else sealed a later ordinal,
    ovstage rejects the write's ordinal and the write is made again above the floors: it lands, and reads back."""
    stage, ovs = scene
    model = PoseModel(stage, ROBOT_PATHS + CAMERA_PATHS)
    with open_view(ROBOTS, ovs, device) as robots, open_view(CAMERAS, ovs, device) as cameras:
        robots.set_world_poses(positions=np.zeros((N, 3), np.float32))
        model.set_world(ROBOT_PATHS, np.zeros((N, 3)), None)
        foreign = robots.fabric_stage.ordinal + 50
        write_local_matrices(ovs, ROBOT_PATHS[:1], model.locals(ROBOT_PATHS[:1]), foreign)  # same values, sealed
        p = np.asarray(np.random.default_rng(3).uniform(-2, 2, (N, 3)), np.float32)
        robots.set_world_poses(positions=p)
        model.set_world(ROBOT_PATHS, p.astype(np.float64), None)
        assert robots.fabric_stage.ordinal > foreign
        assert_world(cameras, model.worlds(CAMERA_PATHS))
        np.testing.assert_allclose(read_matrices(ovs, CAMERA_PATHS), model.worlds(CAMERA_PATHS), atol=1e-5)


def test_an_ovstage_without_placements(scene, monkeypatch: pytest.MonkeyPatch, device: str) -> None:
    """What ovstage 0.2.1 lacks (``ovstage.Placement``, ``Stage.config``): the host paths still read and write right,
    asking for device placements raises ``ValueError`` naming the version, the model is reported as unknown."""
    import frameview.fabric.providers.ovstage.fabric_stage as provider_module

    stage, ovs = scene
    monkeypatch.setattr(provider_module, "Placement", None)
    model = PoseModel(stage, ROBOT_PATHS + CAMERA_PATHS)
    with open_view(ROBOTS, ovs, device) as robots, open_view(CAMERAS, ovs, device) as cameras:
        provider = robots.fabric_stage
        for what in ("write_placement", "read_placement"):
            with pytest.raises(ValueError, match=r"'device' needs a CUDA provider and ovstage >= 0\.3"):
                setattr(provider, what, "device")
        p = np.asarray(np.random.default_rng(4).uniform(-2, 2, (N // 2, 3)), np.float32)
        robots.set_world_poses(positions=p, indices=np.arange(0, N, 2, dtype=np.int32))
        model.set_world(ROBOT_PATHS[0::2], p.astype(np.float64), None)
        assert_world(cameras, model.worlds(CAMERA_PATHS))
    monkeypatch.setattr(type(ovs), "config", property(lambda self: (_ for _ in ()).throw(AttributeError("config"))))
    assert provider_module.hierarchy_model_name(ovs) == "unknown"

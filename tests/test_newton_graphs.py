# SPDX-License-Identifier: Apache-2.0
"""The Newton view's cached launches and CUDA graphs never read a stale state (``_core/launch_caches.py`` LaunchCache).

A graph holds the pointers it was captured with, so the view replays one only for the addresses it was captured for
(``body_q``, the caller's indices, mask and data, its outputs, the frame store's arrays). On the CPU, Warp has no
graphs: :class:`FrozenLaunches` stands in for them with launches recorded once with the call's arguments and never
re-packed, which is what a graph is to the arguments; so the keys are checked on every machine. On CUDA the real
graphs are checked as well.

Truth: float64 NumPy from the stage (``UsdGeom.XformCache``) and the ``body_q`` values the tests write.
"""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp
from helpers import assert_quats_close, compose, decompose_all, quat_to_rotation, rotation_to_quat
from newton_helpers import falling_model, falling_stage, newton_module
from pxr import Usd, UsdGeom

import frameview as fv

N = 10  # cameras and mounts: 20 frames, past the frame store's first capacity (16)
CAMERAS = "/World/envs/env_.*/Body/Mount/Camera"
HAS_CUDA = wp.get_cuda_device_count() > 0
POS_ATOL = 1e-5


def frozen_launches():
    """A LaunchCache whose "graphs" are launches frozen with the arguments of the call that made them."""
    from frameview._core.launch_caches import LaunchCache

    class FrozenLaunches(LaunchCache):
        @property
        def keyed(self) -> bool:  # the view makes its keys, as on CUDA
            return True

        def _graphs_enabled(self) -> bool:
            return True

        def _capture(self, name, steps, publish):
            return [wp.launch(k, dim=d, inputs=p, device=self._device, record_cmd=True) for k, d, p in steps]

        def _replay(self, graph) -> None:
            for cmd in graph:
                cmd.launch()

    return FrozenLaunches


CUDA_MARKS = [pytest.mark.cuda, pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device")]


@pytest.fixture(params=[pytest.param("cpu", id="cpu-frozen"), pytest.param("cuda:0", id="cuda", marks=CUDA_MARKS)])
def graphs(request, monkeypatch) -> str:
    """The device, with the graphs it replays: frozen launches on the CPU, CUDA graphs on a GPU."""
    newton_module()
    if request.param != "cpu":
        return request.param
    import frameview.newton.view as newton_view

    monkeypatch.setattr(newton_view, "LaunchCache", frozen_launches())
    return "cpu"


def pose_matrix(x: np.ndarray) -> np.ndarray:
    """Row-vector rigid matrix of a ``body_q`` row (p xyz, q xyzw), float64."""
    m = np.eye(4)
    m[:3, :3] = quat_to_rotation(x[3:].astype(np.float64))
    m[3, :3] = x[:3].astype(np.float64)
    return m


def offsets(stage: Usd.Stage, paths) -> np.ndarray:
    """Each camera's world matrix relative to its body (``Body/Mount/Camera``; the bodies carry no scale)."""
    cache = UsdGeom.XformCache(Usd.TimeCode.Default())
    out = []
    for p in paths:
        prim = stage.GetPrimAtPath(p)
        body = prim.GetParent().GetParent()
        cam_w = np.array(cache.GetLocalToWorldTransform(prim), dtype=np.float64)
        body_w = np.array(cache.GetLocalToWorldTransform(body), dtype=np.float64)
        out.append(cam_w @ np.linalg.inv(body_w))
    return np.array(out)


def truth(offset: np.ndarray, body_q: np.ndarray, rows) -> tuple[np.ndarray, np.ndarray]:
    worlds = np.array([offset[i] @ pose_matrix(body_q[i]) for i in rows])
    p, q, _s = decompose_all(worlds)
    return p, q


def check(pos, quat, offset: np.ndarray, body_q: np.ndarray, rows) -> None:
    """Read poses (Warp or NumPy) against the truth of ``rows``."""
    p, q = truth(offset, body_q, rows)
    np.testing.assert_allclose(np.asarray(pos.numpy() if isinstance(pos, wp.array) else pos), p, atol=POS_ATOL)
    assert_quats_close(np.asarray(quat.numpy() if isinstance(quat, wp.array) else quat), q, atol=1e-5)


def moved(rng: np.random.Generator, body_q: np.ndarray) -> np.ndarray:
    """New body poses: random positions and orientations."""
    out = body_q.copy()
    out[:, :3] = rng.uniform(-3.0, 3.0, (len(out), 3))
    q = rng.normal(size=(len(out), 4))
    out[:, 3:] = q / np.linalg.norm(q, axis=1, keepdims=True)
    return out


@pytest.fixture
def scene(graphs: str) -> dict:
    stage = falling_stage(N)
    model = falling_model(stage, graphs)
    sim = {"state": model.state(), "next": model.state()}
    view = fv.NewtonFrameView(CAMERAS, stage=stage, model=model, state=lambda: sim["state"])
    return {"device": graphs, "stage": stage, "model": model, "sim": sim, "view": view,
            "offset": offsets(stage, view.prim_paths)}  # fmt: skip


def test_swapped_states_replay_their_own_graphs(scene: dict) -> None:
    """Two states swapped every step, their poses changed in place: every read (all, indices, mask) is the current
    state's, replayed or not, and graphs are replayed."""
    view, sim, offset, device = scene["view"], scene["sim"], scene["offset"], scene["device"]
    rng = np.random.default_rng(3)
    ids_host = np.array([4, 1, 3], dtype=np.int32)
    ids = wp.array(ids_host, dtype=wp.int32, device=device)
    mask_host = np.arange(N) % 2 == 1
    mask = wp.array(mask_host, dtype=wp.bool, device=device)
    for _step in range(6):
        sim["state"], sim["next"] = sim["next"], sim["state"]
        body_q = moved(rng, sim["state"].body_q.numpy())
        sim["state"].body_q.assign(body_q)
        for _repeat in range(2):
            check(*view.get_world_poses(), offset, body_q, range(N))
            check(*view.get_world_poses(ids), offset, body_q, ids_host)
            pos, quat = view.get_world_poses(mask=mask)
            rows = np.flatnonzero(mask_host)
            check(pos.numpy()[rows], quat.numpy()[rows], offset, body_q, rows)
    view.check()
    assert view._launches.graph_count >= 6  # all / indices / mask, one per state


def test_a_replaced_body_q_array_is_read(scene: dict) -> None:
    """``state.body_q`` replaced by a new array (another address) after graphs were made: the new one is read."""
    view, sim, offset, device = scene["view"], scene["sim"], scene["offset"], scene["device"]
    state = sim["state"]
    for _ in range(3):
        view.get_world_poses()
    body_q = moved(np.random.default_rng(5), state.body_q.numpy())
    state.body_q = wp.array(body_q, dtype=wp.transformf, device=device)
    for _ in range(3):
        check(*view.get_world_poses(), offset, body_q, range(N))


def test_new_indices_and_a_grown_store_are_read(scene: dict) -> None:
    """Other index and mask arrays, and a later view that grows the shared frame store (its arrays are replaced):
    replays never read the old ones."""
    view, sim, offset, device = scene["view"], scene["sim"], scene["offset"], scene["device"]
    body_q = sim["state"].body_q.numpy()
    for ids_host in ([0, 5], [2, 3], [0, 5]):
        ids = wp.array(np.array(ids_host, dtype=np.int32), dtype=wp.int32, device=device)
        for _ in range(3):
            check(*view.get_world_poses(ids), offset, body_q, ids_host)
    masks = [np.arange(N) % 3 == r for r in range(3)]
    outputs = []
    for mask_host in masks * 2:
        mask = wp.array(mask_host, dtype=wp.bool, device=device)
        outputs.append(mask)  # kept alive: each mask array has its own address
        for _ in range(3):
            pos, quat = view.get_world_poses(mask=mask)
            rows = np.flatnonzero(mask_host)
            check(pos.numpy()[rows], quat.numpy()[rows], offset, body_q, rows)
    for _ in range(3):
        check(*view.get_world_poses(), offset, body_q, range(N))
    # enough new frames to outgrow the store's capacity: its device arrays are replaced
    more = fv.NewtonFrameView(
        [f"/World/envs/env_{i}/Body/Mount" for i in range(N)] + [f"/World/envs/env_{i}/Body" + "/Mount/Camera"
                                                                for i in range(N)],
        stage=scene["stage"], model=scene["model"], state=lambda: sim["state"],
    )  # fmt: skip
    mounts = more.get_world_poses(list(range(N)))[0].numpy().copy()
    target = mounts + np.array([0.0, 0.0, 1.0], dtype=np.float32)
    more.set_world_poses(target, indices=list(range(N)))  # the cameras below the mounts follow
    shift = np.eye(4)
    shift[3, 2] = 1.0
    follow = np.array([offset[i] @ pose_matrix(body_q[i]) @ shift for i in range(N)])
    for _ in range(3):
        pos, quat = view.get_world_poses()
        p, q, _s = decompose_all(follow)
        np.testing.assert_allclose(pos.numpy(), p, atol=POS_ATOL)
        assert_quats_close(quat.numpy(), q, atol=1e-5)


def test_repeated_device_writes_commit_each_time(scene: dict) -> None:
    """A world write with the same device arrays, their contents changed between calls, and the body moved: each
    call (replayed after the first two) puts the frames where asked."""
    view, sim, device = scene["view"], scene["sim"], scene["device"]
    rng = np.random.default_rng(9)
    ids_host = np.array([5, 0, 2], dtype=np.int32)
    ids = wp.array(ids_host, dtype=wp.int32, device=device)
    pos = wp.zeros(3, dtype=wp.vec3f, device=device)
    quat = wp.zeros(3, dtype=wp.quatf, device=device)
    for _ in range(4):
        sim["state"], sim["next"] = sim["next"], sim["state"]
        sim["state"].body_q.assign(moved(rng, sim["state"].body_q.numpy()))
        want_p = rng.uniform(-2.0, 2.0, (3, 3)).astype(np.float32)
        q = rng.normal(size=(3, 4))
        want_q = (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32)
        pos.assign(want_p)
        quat.assign(want_q)
        view.set_world_poses(pos, quat, indices=ids)
        got_p, got_q = view.get_world_poses(ids)
        np.testing.assert_allclose(got_p.numpy(), want_p, atol=POS_ATOL)
        assert_quats_close(got_q.numpy(), want_q.astype(np.float64), atol=1e-5)
    view.check()


def test_camera_reads_follow_the_state(scene: dict) -> None:
    """``CameraPoses.read(ids, "ros")`` (the rotated read) replayed across state swaps: ROS axes of the current pose
    (x right, y down, z forward: the USD camera's +X, -Y, -Z)."""
    view, sim, offset, device = scene["view"], scene["sim"], scene["offset"], scene["device"]
    cams = fv.CameraPoses(view)
    ids_host = np.array([3, 0], dtype=np.int32)
    ids = wp.array(ids_host, dtype=wp.int32, device=device)
    rng = np.random.default_rng(11)
    for _ in range(4):
        sim["state"], sim["next"] = sim["next"], sim["state"]
        body_q = moved(rng, sim["state"].body_q.numpy())
        sim["state"].body_q.assign(body_q)
        for _repeat in range(2):
            pos, quat = cams.read(ids, "ros")
            worlds = np.array([offset[i] @ pose_matrix(body_q[i]) for i in ids_host])
            np.testing.assert_allclose(pos.numpy(), worlds[:, 3, :3], atol=POS_ATOL)
            want = [rotation_to_quat(np.stack([w[0, :3], -w[1, :3], -w[2, :3]])) for w in worlds]
            assert_quats_close(quat.numpy(), np.array(want), atol=1e-5)


def test_frames_added_within_capacity_follow_replayed_writes(graphs: str) -> None:
    """A view made after another view's write was replayed, of frames below the written ones, in the store's spare
    capacity (its arrays are not replaced): the next writes, same arrays, put those frames where their mounts go.
    The write's refresh of the cached offsets must cover the frames added since its graph was made."""
    device = graphs
    stage = falling_stage(4)
    model = falling_model(stage, device)
    state = model.state()
    mount_paths = [f"/World/envs/env_{i}/Body/Mount" for i in range(4)]
    mounts = fv.NewtonFrameView(mount_paths, stage=stage, model=model, state=state)
    rng = np.random.default_rng(17)
    pos = wp.zeros(4, dtype=wp.vec3f, device=device)
    quat = wp.zeros(4, dtype=wp.quatf, device=device)

    def write() -> tuple[np.ndarray, np.ndarray]:
        p = rng.uniform(-2.0, 2.0, (4, 3)).astype(np.float32)
        q = rng.normal(size=(4, 4))
        q = (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32)
        pos.assign(p)
        quat.assign(q)
        mounts.set_world_poses(pos, quat)
        return p, q

    for _ in range(3):  # seen, captured, replayed
        write()
    cameras = fv.NewtonFrameView(CAMERAS, stage=stage, model=model, state=state)
    assert cameras._store is mounts._store and cameras._store.local.ptr == mounts._store.local.ptr  # not grown
    cache = UsdGeom.XformCache(Usd.TimeCode.Default())
    relative = [
        np.array(cache.GetLocalToWorldTransform(stage.GetPrimAtPath(c)), dtype=np.float64)
        @ np.linalg.inv(np.array(cache.GetLocalToWorldTransform(stage.GetPrimAtPath(m)), dtype=np.float64))
        for c, m in zip(cameras.prim_paths, mount_paths, strict=True)
    ]
    for _ in range(3):
        p, q = write()
        want = np.array([relative[i] @ compose(p[i], q[i], (1.0, 1.0, 1.0)) for i in range(4)])
        got_p, got_q = cameras.get_world_poses()
        want_p, want_q, _s = decompose_all(want)
        np.testing.assert_allclose(got_p.numpy(), want_p, atol=POS_ATOL)
        assert_quats_close(got_q.numpy(), want_q, atol=1e-5)
    mounts.check()
    cameras.check()

# SPDX-License-Identifier: Apache-2.0
"""Isaac Lab's own Newton frame view against frameview's behind ``install()``, side by side, inside Isaac Lab 3.

Isaac-Cartpole-Direct on Newton, kit-less on the CPU, ``ENVS`` envs, a camera Xform mounted under the pole. Two views
of ``/World/envs/env_.*/Robot/pole/Cam`` from Isaac Lab's ``FrameView`` factory in one process: Isaac Lab's
``NewtonSiteFrameView`` (built before ``install()``) and frameview's (after). Both must return the same poses (within
4e-6 m, quaternions equal with their sign) before anything is timed. Each row is the median of ``REPS`` calls,
alternating the two views call by call, each call followed by ``wp.synchronize()``.

Usage (``scripts/isaaclab-check`` runs it)::

    python scripts/isaaclab_views_bench.py [ENVS] [REPS] [OUT.json]
"""

from __future__ import annotations

import importlib
import json
import sys
import time
from pathlib import Path

import numpy as np

SUBSET = 64
BUILDS = 9


def main(envs: str = "1024", reps: str = "300", out: str = "") -> int:
    import torch
    import warp as wp

    import frameview.isaaclab as fvi

    n_envs, n_reps = int(envs), int(reps)
    sys.path.insert(0, str(Path(__file__).parent))
    from isaaclab.sim.views import FrameView
    from isaaclab_camera_task import stand_in_path
    from isaaclab_physics_task import stand_in_cartpole
    from isaaclab_tasks.core.cartpole.cartpole_direct_env import CartpoleEnv
    from isaaclab_tasks.core.cartpole.cartpole_direct_env_cfg import CartpoleEnvCfg
    from isaaclab_tasks.utils.hydra import resolve_presets

    asset = stand_in_path()
    stand_in_cartpole(asset, floating=False)
    cfg = resolve_presets(CartpoleEnvCfg(), {"newton_mjwarp"})
    cfg.scene.num_envs = n_envs
    cfg.scene.ground = None
    cfg.scene.cartpole.spawn.usd_path = str(asset)
    cfg.sim.device = "cpu"
    env = CartpoleEnv(cfg)
    for _ in range(3):
        env.step(torch.zeros((n_envs, 1)))
    pattern = "/World/envs/env_.*/Robot/pole/Cam"

    def build() -> tuple[object, float, float]:  # the view, its construction and its first read (s)
        t0 = time.perf_counter()
        view = FrameView(pattern, device="cpu")
        t1 = time.perf_counter()
        view.get_world_poses()  # type: ignore[attr-defined]
        wp.synchronize()
        return view, t1 - t0, time.perf_counter() - t1

    # both views' modules imported before the first builds: those compare view construction, not imports
    importlib.import_module("isaaclab_newton.sim.views.newton_site_frame_view")
    importlib.import_module("frameview.newton.view")
    stock, stock_build, stock_first = build()
    fvi.install()
    ours, ours_build, ours_first = build()
    assert isinstance(ours, fvi.IsaacLabFrameView) and not isinstance(stock, fvi.IsaacLabFrameView)

    ids_np = np.sort(np.random.default_rng(0).choice(n_envs, SUBSET, replace=False))
    ids_wp = wp.array(ids_np.astype(np.int32), dtype=wp.int32)
    ids_torch = torch.tensor(ids_np, dtype=torch.int64)
    pos_t = torch.rand((SUBSET, 3), dtype=torch.float32)
    quat_t = torch.nn.functional.normalize(torch.randn((SUBSET, 4), dtype=torch.float32), dim=1)

    def same(a: tuple, b: tuple, what: str) -> None:
        np.testing.assert_allclose(a[0].torch.numpy(), b[0].torch.numpy(), atol=4e-6, err_msg=what)
        np.testing.assert_allclose(a[1].torch.numpy(), b[1].torch.numpy(), atol=4e-6, err_msg=what)

    same(ours.get_world_poses(), stock.get_world_poses(), "get_world_poses()")
    same(ours.get_world_poses(ids_wp), stock.get_world_poses(ids_wp), "get_world_poses(indices)")
    same(ours.get_local_poses(), stock.get_local_poses(), "get_local_poses()")

    def write(view: object, ids: object) -> None:
        with view.xform_world_space_writer() as w:  # type: ignore[attr-defined]
            w.set_poses(positions=pos_t, orientations=quat_t, indices=ids)

    def isaaclab_ids() -> wp.array:  # Isaac Lab's view takes int32 Warp indices: the user converts
        return wp.from_torch(ids_torch.to(torch.int32))

    rows = {
        "get_world_poses()": (lambda: ours.get_world_poses(), lambda: stock.get_world_poses()),
        "get_world_poses(int32 wp indices) + .torch": (
            lambda: ours.get_world_poses(ids_wp)[0].torch,
            lambda: stock.get_world_poses(ids_wp)[0].torch,
        ),
        "get_world_poses(int64 torch env_ids) + .torch": (
            lambda: ours.get_world_poses(ids_torch)[0].torch,
            lambda: stock.get_world_poses(isaaclab_ids())[0].torch,
        ),
        "set_world_poses(torch float32, int32 wp indices)": (lambda: write(ours, ids_wp), lambda: write(stock, ids_wp)),
        "set_world_poses(torch float32, int64 torch env_ids)": (
            lambda: write(ours, ids_torch),
            lambda: write(stock, isaaclab_ids()),
        ),
        "get_local_poses()": (lambda: ours.get_local_poses(), lambda: stock.get_local_poses()),
    }
    write(ours, ids_wp)
    write(stock, ids_wp)
    same(ours.get_world_poses(), stock.get_world_poses(), "after a write")
    result = {"envs": n_envs, "subset": SUBSET, "reps": n_reps, "rows": {},
              "build_s": {"isaaclab": stock_build, "frameview": ours_build},
              "first_read_s": {"isaaclab": stock_first, "frameview": ours_first}}  # fmt: skip
    print(f"{n_envs} cameras, {SUBSET}-env subset, medians of {n_reps} calls (us), alternating")
    print(f"  {'row':52s} {'Isaac Lab':>10s} {'frameview':>10s} {'ratio':>6s}")
    for name, (fv_call, il_call) in rows.items():
        for _ in range(20):
            fv_call()
            il_call()
        times: dict[str, list[float]] = {"frameview": [], "isaaclab": []}
        for _ in range(n_reps):
            for key, call in (("frameview", fv_call), ("isaaclab", il_call)):
                t0 = time.perf_counter()
                call()
                wp.synchronize()
                times[key].append(time.perf_counter() - t0)
        il, fv = (float(np.median(times[k])) * 1e6 for k in ("isaaclab", "frameview"))
        result["rows"][name] = {"isaaclab_us": il, "frameview_us": fv, "ratio": fv / il}
        print(f"  {name:52s} {il:10.1f} {fv:10.1f} {fv / il:6.2f}")
    print(f"  {'first view construction (ms)':52s} {stock_build * 1e3:10.1f} {ours_build * 1e3:10.1f} "
          f"{ours_build / stock_build:6.2f}")  # fmt: skip
    # construction again, BUILDS times alternating (one sample above is at the mercy of the machine), each library as
    # a process that builds the view again finds it: Isaac Lab's with what it keeps between builds, frameview's with
    # the model's frame store kept (its stage listing and clone tree kept while the stage is unchanged, the frames
    # already nodes); and frameview's from no frame store (the model's store dropped), as the first build did
    from frameview.newton import frames as fv_frames

    builds: dict[str, list[float]] = {"isaaclab": [], "frameview": [], "frameview_cold": []}
    for _ in range(BUILDS):
        for key, cls in (("frameview", type(ours)), ("frameview_cold", type(ours)), ("isaaclab", type(stock))):
            if key == "frameview_cold":
                fv_frames._STORES.clear()
            t0 = time.perf_counter()
            view = cls(pattern, device="cpu")
            builds[key].append(time.perf_counter() - t0)
            if key != "isaaclab":
                view.close()
    il_b, fv_b, cold_b = (float(np.median(builds[k])) for k in ("isaaclab", "frameview", "frameview_cold"))
    result["build_median_s"] = {"isaaclab": il_b, "frameview": fv_b, "frameview_store_dropped": cold_b,
                                "builds": BUILDS}  # fmt: skip
    print(f"  {f'view construction again, median of {BUILDS} (ms)':52s} {il_b * 1e3:10.1f} {fv_b * 1e3:10.1f} "
          f"{fv_b / il_b:6.2f}")  # fmt: skip
    print(f"  {'  the same, frameview from no frame store (ms)':52s} {il_b * 1e3:10.1f} {cold_b * 1e3:10.1f} "
          f"{cold_b / il_b:6.2f}")  # fmt: skip
    stock_total, ours_total = stock_build + stock_first, ours_build + ours_first
    print(f"  {'view construction + first read (ms)':52s} {stock_total * 1e3:10.1f} {ours_total * 1e3:10.1f} "
          f"{ours_total / stock_total:6.2f}")  # fmt: skip
    env.close()
    if out:
        Path(out).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))

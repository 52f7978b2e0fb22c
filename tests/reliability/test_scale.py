# SPDX-License-Identifier: Apache-2.0
"""Scale, in CI sizes: the embedded Fabric model's column memory per prim, and a small run of ``perf/soak.py``
(its reset loop checks every read against float64 truth; here memory must stay flat). No timing assertions."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np

import frameview as fv
from frameview.fabric.providers.memory import MemoryFabricStage

SOAK = Path(__file__).resolve().parents[2] / "perf" / "soak.py"


def _load_soak():
    spec = importlib.util.spec_from_file_location("frameview_perf_soak", SOAK)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_bulk_built_model_holds_two_matrices_per_prim() -> None:
    """A model built from arrays stores 256 bytes of columns per prim (two float64 4x4 matrices), with no
    power-of-two capacity slack; a view's tags add their own column on the view's prims only."""
    n = 50_001
    paths = ["/World"] + [f"/World/x_{i}" for i in range(n - 1)]
    parents = np.r_[-1, np.zeros(n - 1, dtype=np.int64)]
    model = MemoryFabricStage.from_arrays(paths, parents, np.tile(np.eye(4), (n, 1, 1)))
    assert model.nbytes() == 256 * n
    with fv.FabricFrameView(paths[1:101], stage=model) as view:
        view.get_world_poses()
        assert model.nbytes() <= 256 * n + 2 * (256 + 4) * 128  # the 100 tagged prims' bucket (and its parent's)
    assert model.nbytes() <= 256 * n + 2 * 256 * 16  # emptied buckets give their storage back


def test_soak_smoke_run_keeps_memory_flat() -> None:
    """perf/soak.py at 64 envs / 5000 prims / 300 resets: every read matches float64 truth and RSS stays flat."""
    soak = _load_soak()
    result = soak.run(envs=64, prims=5000, resets=300, sample=50)
    assert result["memory"]["prims"] == 5000
    assert result["memory"]["columns_per_prim_bytes"] == 256
    assert result["soak"]["max_pose_error"] < 1e-4
    assert result["soak"]["rss_growth_mib"] < 4.0, result["soak"]["rss_samples_mib"]

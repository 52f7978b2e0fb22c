# SPDX-License-Identifier: Apache-2.0
"""The embedded model's documented seams for diagnostics and the perf harness: selection paths, host bytes."""

from __future__ import annotations

import sys

import numpy as np

from frameview.fabric.providers.memory import MemoryFabricStage
from frameview.fabric.stage import LOCAL_MATRIX, WORLD_MATRIX

PATHS = ["/World", "/World/a", "/World/a/cam", "/World/b", "/World/b/cam"]
PARENTS = np.array([-1, 0, 1, 0, 3])


def _model() -> MemoryFabricStage:
    return MemoryFabricStage.from_arrays(PATHS, PARENTS, np.tile(np.eye(4), (len(PATHS), 1, 1)), device="cpu")


def test_selection_paths_follow_slot_order() -> None:
    """MemorySelection.paths() lists the prims of its slots in slot order, also after a bucket move."""
    model = _model()
    model.set_uint_attribute(["/World/b/cam", "/World/a/cam"], "test:tag", np.array([0, 1], dtype=np.uint32))
    sel = model.select(["test:tag", WORLD_MATRIX, LOCAL_MATRIX])
    sel.prepare_for_reuse()
    assert sorted(sel.paths()) == ["/World/a/cam", "/World/b/cam"]
    assert sel.paths() == model.paths_of(sel.pids())
    model.remove_attribute(["/World/a/cam"], "test:tag")
    sel.prepare_for_reuse()
    assert sel.paths() == ["/World/b/cam"]


def test_host_nbytes_counts_the_path_tables() -> None:
    """host_nbytes() reports the path strings, list and dict, and grows with the NumPy tables."""
    model = _model()
    sizes = model.host_nbytes()
    assert set(sizes) == {"path_strings", "path_list", "path_dict", "numpy_tables"}
    assert sizes["path_strings"] == sum(sys.getsizeof(p) for p in PATHS)
    assert sizes["numpy_tables"] >= 4 * len(PATHS) * 8
    model.child_names("/World")  # builds the CSR child table
    assert model.host_nbytes()["numpy_tables"] > sizes["numpy_tables"]

# SPDX-License-Identifier: Apache-2.0
"""A Fabric provider whose columns have another dtype is refused before any kernel launch, and the other Fabric
views of the process keep working (a failed kernel build must not poison Warp's module for every backend).

The scenario runs in a fresh interpreter: had the guard failed, Warp's module would be broken for the rest of that
process only.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

_SCENARIO = """
import json

import numpy as np
from pxr import Usd, UsdGeom

import frameview as fv
from frameview.fabric.providers.memory.storage import MemorySelection

stage = Usd.Stage.CreateInMemory()
for i in range(3):
    UsdGeom.Xform.Define(stage, f"/World/Parent_{i}").AddTranslateOp().Set((float(i), 0.0, 1.0))
    UsdGeom.Xform.Define(stage, f"/World/Parent_{i}/Child").AddTranslateOp().Set((0.1, 0.0, 0.05))
paths = [f"/World/Parent_{i}/Child" for i in range(3)]
cache = UsdGeom.XformCache()
truth = np.array([list(cache.GetLocalToWorldTransform(stage.GetPrimAtPath(p)).ExtractTranslation()) for p in paths])

stock = MemorySelection.__fabric_arrays_interface__

def doubles(self):  # ovstage 0.2's matrices as an older frameview read them: one float64 per prim
    iface = stock.fget(self)
    attribs = {name: dict(a) for name, a in iface["attribs"].items()}
    for name, a in attribs.items():
        if name == "omni:fabric:worldMatrix":
            a["type"] = (True, "f8", 1, 0, "")
    return {**iface, "attribs": attribs}

result = {}
MemorySelection.__fabric_arrays_interface__ = property(doubles)
try:
    view = fv.FabricFrameView("/World/Parent_.*/Child", stage=stage, device="cpu")
    view.get_world_poses()
    result["refused"] = None
except TypeError as exc:
    result["refused"] = str(exc)
finally:
    MemorySelection.__fabric_arrays_interface__ = stock

with fv.FabricFrameView("/World/Parent_.*/Child", stage=stage, device="cpu") as view:
    pos, _ = view.get_world_poses()
    result["error"] = float(np.abs(pos.numpy().astype(np.float64) - truth).max())
print("RESULT " + json.dumps(result))
"""


def test_wrong_column_dtype_is_refused_and_other_views_still_build() -> None:
    """A float64 matrix column raises TypeError naming it; a later Fabric view still reads the truth."""
    pytest.importorskip("pxr")
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_SCENARIO)], capture_output=True, text=True, timeout=600, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))
    result = json.loads(line[len("RESULT ") :])
    assert result["refused"] is not None, "a float64 matrix column was accepted"
    assert "'omni:fabric:worldMatrix' has dtype float64, expected mat44d" in result["refused"]
    assert "'memory'" in result["refused"]
    assert result["error"] < 1e-6

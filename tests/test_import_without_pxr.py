# SPDX-License-Identifier: Apache-2.0
"""frameview without pxr (usd-core is the extra ``frameview[usd]``): what works, and the errors for what does not.

Each test runs a fresh interpreter in which pxr cannot be imported, blocked either by a meta-path finder (as when
usd-core is not installed) or by ``sys.modules["pxr"] = None``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from ovstage_helpers import OVSTAGE_SKIP_REASON

USD_EXTRA_MESSAGE = "UsdFrameView needs pxr: install frameview[usd] (or run inside Kit / Isaac Sim, which ships pxr)"

_BLOCKERS = {
    "meta_path": """
        class _BlockPxr:
            def find_spec(self, name, path=None, target=None):
                if name == "pxr" or name.startswith("pxr."):
                    raise ModuleNotFoundError(f"No module named {name!r} (blocked by the test)", name=name)
                return None

        sys.meta_path.insert(0, _BlockPxr())
    """,
    "sys_modules_none": """
        sys.modules["pxr"] = None
    """,
}

_BLOCKER_PARAMS = [pytest.param(name, id=name) for name in _BLOCKERS]

_PARENT_USDA = """
    def Xform "Parent_{i}"
    {{
        double3 xformOp:translate = (0, 0, 1)
        uniform token[] xformOpOrder = ["xformOp:translate"]

        def Xform "Child"
        {{
            double3 xformOp:translate = (0.1, 0, 0.05)
            uniform token[] xformOpOrder = ["xformOp:translate"]
        }}
    }}
"""
_PARENTS_USDA = '#usda 1.0\n\ndef Xform "World"\n{\n' + "".join(_PARENT_USDA.format(i=i) for i in range(2)) + "}\n"
"""Isaac Lab's fixture as USDA: /World/Parent_i at (0, 0, 1), each with a Child at (0.1, 0, 0.05)."""


def _run_without_pxr(blocker: str, body: str) -> dict:
    """Run ``body`` in a fresh interpreter with pxr blocked; it fills the dict ``result``, returned from JSON."""
    code = "\n".join(
        [
            "import json, sys",
            textwrap.dedent(_BLOCKERS[blocker]),
            "import warp as wp",
            "wp.config.quiet = True",
            "result = {}",
            textwrap.dedent(body),
            "result['pxr_loaded'] = sorted(m for m, mod in sys.modules.items() if m.split('.')[0] == 'pxr' and mod)",
            "print('RESULT=' + json.dumps(result))",
        ]
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-4000:]
    line = next(line for line in reversed(out.stdout.splitlines()) if line.startswith("RESULT="))
    return json.loads(line[len("RESULT=") :])


@pytest.mark.parametrize("blocker", _BLOCKER_PARAMS)
def test_import_config_and_mapping_need_no_pxr(blocker: str) -> None:
    """`import frameview`, FrameViewCfg, make_frame_view's registry, create_mapping and resolve_prim_paths over a
    PrimTree work, and nothing imports pxr."""
    result = _run_without_pxr(
        blocker,
        """
        import frameview as fv
        cfg = fv.FrameViewCfg(prim_path="/World/envs/env_.*/Camera", backend="fabric", device="cpu")
        result["cfg"] = [cfg.prim_path, cfg.backend]
        result["backends"] = sorted(fv.available_backends())
        result["mapping"] = fv.create_mapping(["/a", "/b", "/c"], ["/c", "/a"]).numpy().tolist()

        class Tree:
            def child_names(self, path):
                return {"/": ["World"], "/World": ["P_0", "P_1"]}.get(path, [])

            def has_prim(self, path):
                return path in ("/World", "/World/P_0", "/World/P_1")

        result["paths"] = fv.resolve_prim_paths("/World/P_[^/]+", Tree())
        try:
            fv.resolve_prim_paths("/World", object())
        except TypeError as exc:
            result["bad_stage"] = str(exc)
        """,
    )
    assert result["cfg"] == ["/World/envs/env_.*/Camera", "fabric"]
    assert {"usd", "fabric"} <= set(result["backends"])
    assert result["mapping"] == [1, -1, 0]
    assert result["paths"] == ["/World/P_0", "/World/P_1"]
    assert "expected a pxr Usd.Stage or an object implementing" in result["bad_stage"]
    assert result["pxr_loaded"] == []


@pytest.mark.parametrize("blocker", _BLOCKER_PARAMS)
def test_usd_backend_raises_import_error_naming_the_extra(blocker: str) -> None:
    """fv.UsdFrameView, and make_frame_view with backend="usd", raise an ImportError that names frameview[usd]."""
    result = _run_without_pxr(
        blocker,
        """
        import frameview as fv
        errors = []
        for attempt in range(2):  # a second access raises again (no half-imported module is left behind)
            try:
                fv.UsdFrameView
            except ImportError as exc:
                errors.append([type(exc).__name__, str(exc), exc.name])
        try:
            fv.make_frame_view(fv.FrameViewCfg(prim_path="/World", backend="usd"), object())
        except ImportError as exc:
            errors.append([type(exc).__name__, str(exc), exc.name])
        result["errors"] = errors
        """,
    )
    assert result["errors"] == [["ImportError", USD_EXTRA_MESSAGE, "pxr"]] * 3


@pytest.mark.parametrize("blocker", _BLOCKER_PARAMS)
@pytest.mark.parametrize("provider", ["auto", "memory"])
def test_embedded_model_from_a_pxr_stage_raises_import_error_naming_the_extra(blocker: str, provider: str) -> None:
    """Populating the embedded Fabric model from a pxr stage without pxr is an ImportError naming frameview[usd]."""
    result = _run_without_pxr(
        blocker,
        f"""
        import frameview as fv

        class Stage:  # looks like a pxr Usd.Stage to the provider choice (an object of a pxr-less process)
            __module__ = "pxr.Usd"

            def GetPseudoRoot(self):
                raise AssertionError("the model must not be populated")

        try:
            fv.FabricFrameView("/World", stage=Stage(), device="cpu", fabric_provider={provider!r})
        except ImportError as exc:
            result["error"] = [type(exc).__name__, str(exc), exc.name]
        """,
    )
    name, message, module = result["error"]
    assert (name, module) == ("ImportError", "pxr")
    assert message.startswith("populating the embedded Fabric model (fabric_provider='memory') from a pxr stage")
    assert "needs pxr: install frameview[usd] (or run inside Kit / Isaac Sim, which ships pxr)" in message


@pytest.mark.skipif(bool(OVSTAGE_SKIP_REASON), reason=OVSTAGE_SKIP_REASON or "ovstage is usable")
@pytest.mark.parametrize("blocker", _BLOCKER_PARAMS)
def test_fabric_view_on_an_ovstage_stage_needs_no_pxr(blocker: str) -> None:
    """FabricFrameView and make_frame_view on an ovstage stage read Isaac Lab's parent/child fixture without pxr."""
    result = _run_without_pxr(
        blocker,
        f"""
        import ovstage
        from ovstage import population
        import frameview as fv

        stage = ovstage.Stage("no_pxr")
        population.open_usd_from_string(stage, {_PARENTS_USDA!r}, ordinal=1)
        with fv.FabricFrameView("/World/Parent_[^/]*/Child", stage=stage, device="cpu") as view:
            pos, quat = view.get_world_poses()
            result["view"] = [view.backend, list(view.prim_paths), pos.numpy().tolist(), quat.numpy().tolist()]
        cfg = fv.FrameViewCfg(prim_path="/World/Parent_1", backend="fabric", device="cpu")
        with fv.make_frame_view(cfg, stage) as view:
            result["cfg_view"] = view.get_world_poses()[0].numpy().tolist()
        """,
    )
    backend, paths, pos, quat = result["view"]
    assert backend == "fabric:ovstage"
    assert paths == ["/World/Parent_0/Child", "/World/Parent_1/Child"]
    np.testing.assert_allclose(pos, [[0.1, 0.0, 1.05]] * 2, atol=1e-6)
    np.testing.assert_allclose(quat, [[0.0, 0.0, 0.0, 1.0]] * 2, atol=1e-6)
    np.testing.assert_allclose(result["cfg_view"], [[0.0, 0.0, 1.0]], atol=1e-6)
    assert result["pxr_loaded"] == []

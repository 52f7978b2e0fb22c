# SPDX-License-Identifier: Apache-2.0
"""Opening a USDA scene in ovphysx (CPU) for the tests' simulation subprocesses.

ovphysx's USD schemas must be registered before the first ovstage population of a process, so each caller runs in a
fresh process; import this module there, not at a test module's top level (it imports ovphysx and ovstage).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any


def open_physx_scene(usda: Path, text: str, name: str) -> tuple[Any, Any]:
    """Write ``text`` to ``usda``, open it in a new ovstage ``Stage`` ``name`` and attach a new ``ovphysx.PhysX``
    (warmed up: its first-read warm-up does not advance the simulation time). Returns ``(physx, stage)``."""
    import ovphysx
    import ovstage
    from ovphysx.samples.python_samples.schema_support import physx_schema_paths

    schemas = [str(p) for p in physx_schema_paths()]
    with contextlib.suppress(Exception):  # newton-usd-schemas is optional; ovphysx warns at attach without it
        schemas.append(str(ovphysx.newton_schema_root()))
    ovstage.population.register_usd_schemas(schemas)
    usda.write_text(text)
    physx = ovphysx.PhysX()
    stage = ovstage.Stage(name)
    ovstage.population.open_usd(stage, str(usda.resolve()), ordinal=1, domains=ovstage.PopulationDomain.ALL)
    stage.advance_write_floor(ordinal=1).wait()
    physx.wait_task(physx.attach_ovstage(stage, read_ordinal=1))
    physx.warmup()
    return physx, stage


def run_in_subprocess(script: Path, workdir: Path) -> dict[str, Any]:
    """Run ``python script workdir`` (a test module whose ``__main__`` simulates and prints ``RESULT <json>``) in a
    fresh process with the tests' directory on its path; its parsed result, or an assertion with its output."""
    import json
    import os
    import subprocess
    import sys

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).resolve().parent), env.get("PYTHONPATH", "")]))
    proc = subprocess.run(
        [sys.executable, str(script), str(workdir)], capture_output=True, text=True, env=env, timeout=600
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"simulation in {script.name} failed (exit {proc.returncode}):\n{output[-4000:]}"
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])

# SPDX-License-Identifier: Apache-2.0
"""``--profile``: py-spy the hot loops of the largest scene in a child process, and summarise the profiles.

Protocol: the child (``perf/scaling.py --_profile-child``) builds the scene, prints ``READY <phase>``, waits for
``go`` on stdin, runs the phase's loop for ``--profile-seconds`` and prints ``DONE <phase>``; the parent attaches
py-spy between ``READY`` and ``go`` and stops it at ``DONE``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import warp as wp

from frameview.fabric.stage import LOCAL_MATRIX, WORLD_MATRIX

from .baselines import ScopedRebuild, StageWideRebuild
from .console import log, note
from .scenes import PATTERN, PROVIDERS, scene_arrays

ENTRY = Path(__file__).resolve().parents[1] / "scaling.py"  # the script the child runs


def _profile_child(args: argparse.Namespace) -> int:
    """Child of ``--profile``: build the scene, then run each hot loop when the parent says "go" on stdin."""
    from frameview import FabricFrameView

    envs, filler = args.envs[-1], args.filler[-1]
    scene = PROVIDERS[args.provider].build(scene_arrays(envs, filler), args.device)
    device = scene.device
    v = FabricFrameView(PATTERN, stage=scene.stage, device=device, fabric_provider=scene.provider)
    p0, q0 = (wp.clone(x) for x in v.get_world_poses())
    child = ScopedRebuild(v, parents=False)
    wide = StageWideRebuild(scene, (WORLD_MATRIX, LOCAL_MATRIX), v.prim_paths, write=True)

    def scoped_loop() -> None:
        for _ in range(20):
            v.get_world_poses()
            wp.synchronize_device(device)
        for _ in range(20):
            child()
            wp.synchronize_device(device)
        for _ in range(5):
            v.set_world_poses(p0, q0)
            wp.synchronize_device(device)
        w = FabricFrameView(PATTERN, stage=scene.stage, device=device, fabric_provider=scene.provider)
        w.get_world_poses()
        wp.synchronize_device(device)
        w.close()

    def wide_loop() -> None:
        wide()
        wp.synchronize_device(device)

    for phase, loop in (("scoped", scoped_loop), ("stage_wide", wide_loop)):
        print(f"READY {phase}", flush=True)
        if sys.stdin.readline().strip() != "go":
            return 1
        end = time.perf_counter() + args.profile_seconds
        while time.perf_counter() < end:
            loop()
        print(f"DONE {phase}", flush=True)
    v.close()
    return 0


def _next_protocol_line(child: subprocess.Popen) -> str:
    """The child's next READY/DONE line (anything else it prints is skipped); '' at end of output."""
    for line in child.stdout:
        if line.startswith(("READY ", "DONE ")):
            return line.strip()
    return ""


def run_profile(args: argparse.Namespace, out_dir: Path) -> list[Path]:
    """Profile the hot loops of the largest scene with py-spy, attached once the scene is built."""
    pyspy = shutil.which("py-spy")
    if pyspy is None:
        note("--profile: py-spy is not installed (pip install py-spy); no profile written")
        return []
    cmd = [
        sys.executable,
        str(ENTRY),
        "--_profile-child",
        "--envs",
        str(args.envs[-1]),
        "--filler",
        str(args.filler[-1]),
        "--device",
        args.device,
        "--provider",
        args.provider,
        "--profile-seconds",
        str(args.profile_seconds),
    ]
    log(f"profiling envs={args.envs[-1]} filler={args.filler[-1]:,} with py-spy ({args.profile_seconds:.0f} s/phase)")
    child = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    written: list[Path] = []
    try:
        for phase in ("scoped", "stage_wide"):
            line = _next_protocol_line(child)
            if line != f"READY {phase}":
                note(f"--profile: child said {line!r}, expected 'READY {phase}'")
                break
            path = out_dir / f"{args.name}-profile-{phase}.speedscope.json"
            spy = subprocess.Popen(
                [
                    pyspy,
                    "record",
                    "--pid",
                    str(child.pid),
                    "-o",
                    str(path),
                    "--format",
                    "speedscope",
                    "--rate",
                    "200",
                    "--nonblocking",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            time.sleep(1.5)  # let py-spy attach
            child.stdin.write("go\n")
            child.stdin.flush()
            line = _next_protocol_line(child)
            spy.send_signal(signal.SIGINT)
            try:
                _, err = spy.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                spy.kill()
                _, err = spy.communicate()
            if path.exists():
                written.append(path)
                log(f"profile written: {path}")
            else:
                note(f"--profile: py-spy wrote no file for {phase}: {err.strip()[-300:]}")
    finally:
        if child.poll() is None:
            with contextlib.suppress(OSError):
                child.stdin.close()
            try:
                child.wait(timeout=30)
            except subprocess.TimeoutExpired:
                child.kill()
    return written


def summarize_speedscope(path: Path, top: int = 15, within: str | None = None) -> str:
    """Top frames of a py-spy speedscope profile by inclusive and self samples, as Markdown.

    Args:
        path: A speedscope JSON file written by ``py-spy record --format speedscope``.
        top: Rows per table.
        within: Keep only the samples whose stack holds a frame of this function name (e.g. the hot loop).
    """
    data = json.loads(Path(path).read_text())
    frames = data["shared"]["frames"]
    keep = None if within is None else {i for i, f in enumerate(frames) if f.get("name") == within}
    inclusive: dict[int, float] = {}
    self_: dict[int, float] = {}
    total = 0.0
    count = 0
    for prof in data["profiles"]:
        samples, weights = prof.get("samples", []), prof.get("weights", [])
        for stack, w in zip(samples, weights or [1] * len(samples), strict=False):
            if keep is not None and keep.isdisjoint(stack):
                continue
            total += w
            count += 1
            if stack:
                self_[stack[-1]] = self_.get(stack[-1], 0.0) + w
            for f in set(stack):
                inclusive[f] = inclusive.get(f, 0.0) + w
    if not total:
        return "(no samples)"

    def name(i: int) -> str:
        f = frames[i]
        file = str(f.get("file", "")).split("/site-packages/")[-1].split("/src/")[-1]
        return f"{f.get('name', '?')} ({file}:{f.get('line', '?')})"

    unit = data["profiles"][0].get("unit", "") if data["profiles"] else ""
    lines = [f"{count} samples ({total:.2f} {unit})", "", "| inclusive | self | frame |", "|---:|---:|---|"]
    for i, w in sorted(inclusive.items(), key=lambda kv: -kv[1])[:top]:
        lines.append(f"| {100 * w / total:.1f}% | {100 * self_.get(i, 0.0) / total:.1f}% | `{name(i)}` |")
    lines += ["", "| self | frame |", "|---:|---|"]
    for i, w in sorted(self_.items(), key=lambda kv: -kv[1])[:top]:
        lines.append(f"| {100 * w / total:.1f}% | `{name(i)}` |")
    return "\n".join(lines)

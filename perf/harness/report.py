# SPDX-License-Identifier: Apache-2.0
"""Tables, Markdown reports and result files of the scaling harness (plots: :mod:`plots`; targets: :mod:`targets`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .fmt import (
    METHOD_LABELS,
    SLOT_REBUILD_LABELS,
    SLOT_REBUILD_LEGEND,
    Rows,
    _fmt_s,
    _int,
    _ratio,
    format_count,
    format_time,
)
from .targets import targets_table

# The PR's figures (L40, cuda:0, 1024-prim view), shown beside ours.
PR_L40 = {
    "slot_rebuild_children_ms": 0.137,
    "slot_rebuild_parents_ms": 0.191,
    "stage_wide_full_rebuild_100k_ms": 556.41,
    "stage_wide_children_100k_ms": 274.21,
    "stage_wide_parents_100k_ms": 270.47,
    "first_access_100k_develop_ms": 1824.0,
    "first_access_100k_pr_ms": 383.0,
    "close_us_per_prim": 4.7,
}


def _spread(row: dict | None, unit: str) -> str:
    if row is None:
        return "—"
    if "value" in row:
        return f"{row['value']:,}"
    med, lo, hi = (_fmt_s(row[k], unit) for k in ("median_s", "min_s", "max_s"))
    return f"{med} ({lo}-{hi}, n={row['reps']})"


def summary_table(rows: Sequence[dict]) -> str:
    """One line per (envs, filler): selection sizes, slot rebuilds (scoped vs stage-wide), first access, reads."""
    idx = Rows(rows)
    head = (
        "| envs | filler | stage prims | selection size (prims): scoped / stage-wide "
        "| view-prim table rebuild (ms): scoped / stage-wide (ratio) "
        "| parent table rebuild (ms): scoped / stage-wide (ratio) | first access (ms): scoped / stage-wide / usd "
        "| get_world_poses, fabric (us) | get_world_poses, usd (ms) | set_world_poses, fabric (ms) "
        "| close, per prim (us) |"
    )
    lines = [head, "|" + "---:|" * 11]
    for envs in idx.envs():
        for filler in idx.fillers(envs):

            def m(method: str, metric: str, e: int = envs, f: int = filler) -> float | None:
                return idx.median(e, f, method, metric)

            any_row = next(r for r in rows if r["envs"] == envs and r["filler"] == filler)
            sc, sw = m("scoped", "slot_rebuild_children"), m("stage_wide", "slot_rebuild_children")
            pc, pw = m("scoped", "slot_rebuild_parents"), m("stage_wide", "slot_rebuild_parents")
            sel_s, sel_w = m("scoped", "selection_size"), m("stage_wide", "selection_size")
            lines.append(
                f"| {envs:,} | {filler:,} | {any_row['stage_prims']:,} "
                f"| {_int(sel_s)} / {_int(sel_w)} "
                f"| {_fmt_s(sc)} / {_fmt_s(sw)} ({_ratio(sw, sc)}) "
                f"| {_fmt_s(pc)} / {_fmt_s(pw)} ({_ratio(pw, pc)}) "
                f"| {_fmt_s(m('scoped', 'first_access'))} / {_fmt_s(m('stage_wide', 'first_access'))} "
                f"/ {_fmt_s(m('usd', 'first_access'))} "
                f"| {_fmt_s(m('scoped', 'get_world_poses'), 'us')} | {_fmt_s(m('usd', 'get_world_poses'))} "
                f"| {_fmt_s(m('scoped', 'set_world_poses'))} "
                f"| {_fmt_s(m('scoped', 'close_per_prim'), 'us')} |"
            )
    return "\n".join(lines)


_UNITS = {
    "build_stage": "s",
    "get_world_poses": "us",
    "get_world_poses_indexed": "us",
    "get_local_poses": "us",
    "close_per_prim": "us",
}


def full_table(rows: Sequence[dict]) -> str:
    """Every row: median (min-max, reps)."""
    lines = [
        "| envs | filler | method | metric | median (min-max, n) | unit |",
        "|---:|---:|---|---|---|---|",
    ]
    for r in sorted(rows, key=lambda r: (r["envs"], r["filler"], r["method"], r["metric"])):
        unit = "count" if "value" in r else _UNITS.get(r["metric"], "ms")
        lines.append(
            f"| {r['envs']:,} | {r['filler']:,} | {r['method']} | {r['metric']} | {_spread(r, unit)} | {unit} |"
        )
    return "\n".join(lines)


def pr_table(rows: Sequence[dict]) -> str:
    """The PR's slot-rebuild table, our numbers, for each view size."""
    idx = Rows(rows)
    lines = [
        "| view prims | filler | stage-wide selection (prims) | scoped selection (prims) "
        "| stage-wide: view-prim table (ms) | stage-wide: parent table (ms) | stage-wide: both tables (ms) "
        "| scoped: view-prim table (ms) | scoped: parent table (ms) | scoped: both tables (ms) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for envs in idx.envs():
        for filler in idx.fillers(envs):

            def m(method: str, metric: str, e: int = envs, f: int = filler) -> float | None:
                return idx.median(e, f, method, metric)

            if m("scoped", "slot_rebuild_children") is None:
                continue
            lines.append(
                f"| {envs:,} | {filler:,} | {_int(m('stage_wide', 'selection_size'))} "
                f"| {_int(m('scoped', 'selection_size'))} "
                f"| {_fmt_s(m('stage_wide', 'slot_rebuild_children'))} "
                f"| {_fmt_s(m('stage_wide', 'slot_rebuild_parents'))} "
                f"| {_fmt_s(m('stage_wide', 'slot_rebuild_full'))} | {_fmt_s(m('scoped', 'slot_rebuild_children'))} "
                f"| {_fmt_s(m('scoped', 'slot_rebuild_parents'))} | {_fmt_s(m('scoped', 'slot_rebuild_full'))} |"
            )
    return "\n".join(lines)


def short_table(rows: Sequence[dict], envs: int | None = None) -> str:
    """The one table a person reads after a run: frameview vs the stage-wide baseline vs USD, with ratios.

    One line per (metric, filler) at ``envs`` (default: the largest of the run); fillers are the smallest, 100k
    and the largest of the run.
    """
    idx = Rows(rows)
    if envs is None:
        envs = max(idx.envs(), default=0)
    fillers = idx.fillers(envs)
    if not fillers:
        return "(no rows)"
    shown = sorted({min(fillers), max(fillers)} | ({100_000} & set(fillers)))
    metrics = (
        ("slot_rebuild_full", SLOT_REBUILD_LABELS["slot_rebuild_full"]),
        ("first_access", "first access (build view + 1 read)"),
        ("get_world_poses", "get_world_poses, all prims"),
        ("set_world_poses", "set_world_poses, all prims"),
        ("close_per_prim", "close(), per tagged prim"),
    )
    head = (
        f"| {envs:,} envs: metric (median) | stage prims (filler) | {METHOD_LABELS['scoped']} "
        f"| {METHOD_LABELS['stage_wide']} | {METHOD_LABELS['usd']} | baseline / frameview | USD / frameview |"
    )
    lines = [head, "|---|---:|---:|---:|---:|---:|---:|"]
    for metric, label in metrics:
        for f in shown:
            s, w, u = (idx.median(envs, f, m, metric) for m in ("scoped", "stage_wide", "usd"))
            if s is None:
                continue
            any_row = idx.get(envs, f, "scoped", metric)
            prims = any_row["stage_prims"] if any_row else 0
            lines.append(
                f"| {label} | {prims:,} ({format_count(f)}) | {format_time(s)} | {format_time(w)} | {format_time(u)} "
                f"| {_ratio(w, s)} | {_ratio(u, s)} |"
            )
    return "\n".join(lines)


def markdown_report(rows: Sequence[dict], name: str, header: str) -> str:
    """Every table of a run, as Markdown (written beside the JSON)."""
    return (
        "\n\n".join(
            [
                f"# {name}\n\n{header}",
                "## Summary\n\n" + short_table(rows),
                "## Targets\n\n" + targets_table({name: rows}, envs=max((r["envs"] for r in rows), default=None)),
                "## Every scene\n\n" + summary_table(rows),
                "## Slot-table rebuild (the PR's table)\n\n" + pr_table(rows),
                "## Names\n\n" + SLOT_REBUILD_LEGEND + ".",
                "## All rows\n\n" + full_table(rows),
            ]
        )
        + "\n"
    )


def write_json(path: Path, machine: dict, version: str, rows: Sequence[dict], **extra: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"machine": machine, "frameview_version": version, "rows": list(rows), **extra}
    path.write_text(json.dumps(payload, indent=1, sort_keys=False) + "\n")


def read_json(path: Path) -> dict:
    return json.loads(Path(path).read_text())

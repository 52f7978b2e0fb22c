# SPDX-License-Identifier: Apache-2.0
"""The Fabric view's performance targets, evaluated from a run's rows."""

from __future__ import annotations

from collections.abc import Sequence

from .fmt import Rows, _fmt_s, format_count, slot_rebuild_label


def _flat_targets(idx: Rows, envs: int, fillers: list[int]) -> list[dict]:
    """Target 1 of :func:`targets`: the slot-table rebuild flat in stage size (medians and per-filler minima)."""
    out: list[dict] = []

    def med(f: int, method: str, metric: str) -> float | None:
        return idx.median(envs, f, method, metric)

    # 1. slot-table rebuild flat in stage size (the interleaved measurement when the run has it)
    for metric in (
        "slot_rebuild_children_interleaved",
        "slot_rebuild_parents_interleaved",
        "slot_rebuild_children",
        "slot_rebuild_parents",
    ):
        vals = {f: med(f, "scoped", metric) for f in fillers}
        vals = {f: v for f, v in vals.items() if v is not None}
        if len(vals) >= 2:
            ratio = max(vals.values()) / min(vals.values())
            out.append(
                {
                    "target": f"{metric} ({envs}-prim view) flat in stage size: max/min <= 1.3",
                    "label": f"{slot_rebuild_label(metric)}: flat in stage size, max/min ≤ 1.3",
                    "measured": f"max/min = {ratio:.2f} over filler {min(vals):,}..{max(vals):,} "
                    f"({_fmt_s(min(vals.values()), 'us')}-{_fmt_s(max(vals.values()), 'us')} us)",
                    "met": ratio <= 1.3,
                    "value": ratio,
                }
            )
        mins = {f: r["min_s"] for f in fillers if (r := idx.get(envs, f, "scoped", metric)) is not None}
        if len(mins) >= 2:
            ratio = max(mins.values()) / min(mins.values())
            out.append(
                {
                    "target": f"{metric} ({envs}-prim view) flat in stage size, per-filler minimum (robust to host "
                    "contention): max/min <= 1.3",
                    "measured": f"max/min = {ratio:.2f} ({_fmt_s(min(mins.values()), 'us')}-"
                    f"{_fmt_s(max(mins.values()), 'us')} us)",
                    "met": ratio <= 1.3,
                    "value": ratio,
                }
            )
    return out


def _baseline_targets(idx: Rows, envs: int) -> list[dict]:
    """Target 2 of :func:`targets`: the slot-table rebuild >= 1000x faster than the stage-wide baseline."""
    out: list[dict] = []
    # 2. >= 1000x faster than the stage-wide baseline at 100k and 1M filler
    for f in (100_000, 1_000_000):
        for metric in ("slot_rebuild_children", "slot_rebuild_parents"):
            s, w = idx.median(envs, f, "scoped", metric), idx.median(envs, f, "stage_wide", metric)
            if s is None or w is None:
                continue
            out.append(
                {
                    "target": f"{metric} vs stage-wide at {f:,} filler: >= 1000x",
                    "label": f"{slot_rebuild_label(metric)}: ≥ 1000x faster than the baseline at "
                    f"{format_count(f)} filler",
                    "measured": f"{w / s:,.0f}x ({_fmt_s(w)} ms vs {_fmt_s(s, 'us')} us)",
                    "met": w / s >= 1000,
                    "value": w / s,
                }
            )
    return out


def targets(rows: Sequence[dict], envs: int = 8192) -> list[dict]:
    """Evaluate the Fabric view's performance targets from one run's rows.

    Returns:
        One dict per target: ``target``, ``measured`` (text), ``met`` (True / False / None when not measurable in
        this run) and ``detail``.
    """
    idx = Rows(rows)
    out: list[dict] = []
    fillers = idx.fillers(envs)
    if not fillers:
        return out
    big = max(fillers)

    def med(f: int, method: str, metric: str) -> float | None:
        return idx.median(envs, f, method, metric)

    out += _flat_targets(idx, envs, fillers)
    out += _baseline_targets(idx, envs)
    # 3. get_world_poses at 8192 (GPU target <= 25 us)
    g = med(big, "scoped", "get_world_poses")
    if g is not None:
        device = next((r["device"] for r in rows if r["envs"] == envs), "cpu")
        on_gpu = device.startswith("cuda")
        out.append(
            {
                "target": f"get_world_poses, {envs} prims, {big:,} filler: GPU <= 25 us (CPU: report)",
                "label": f"get_world_poses ≤ 25 us on a GPU ({envs} prims; reported only on a CPU)",
                "measured": f"{g * 1e6:,.0f} us on {device}",
                "met": (g <= 25e-6) if on_gpu else None,
                "value": g,
            }
        )
    # 4. >= 200x faster than UsdFrameView
    usd_f = [f for f in fillers if med(f, "usd", "get_world_poses") is not None]
    if usd_f and g is not None:
        f = max(usd_f)
        u, s = med(f, "usd", "get_world_poses"), med(f, "scoped", "get_world_poses")
        out.append(
            {
                "target": f"get_world_poses vs UsdFrameView at {envs} prims: >= 200x",
                "label": f"get_world_poses ≥ 200x faster than USD ({envs} prims)",
                "measured": f"{u / s:,.0f}x at {f:,} filler ({_fmt_s(u)} ms vs {_fmt_s(s, 'us')} us)",
                "met": u / s >= 200,
                "value": u / s,
            }
        )
    # 5. close <= 1 us per tagged prim
    c = med(big, "scoped", "close_per_prim")
    if c is not None:
        out.append(
            {
                "target": f"close() <= 1 us per tagged prim ({envs} envs, {big:,} filler)",
                "label": f"close() ≤ 1 us per tagged prim ({format_count(big)} filler)",
                "measured": f"{c * 1e6:.2f} us per prim",
                "met": c <= 1e-6,
                "value": c,
            }
        )
    # 6. first access at 8192 envs on a ~1.1M-prim stage <= 100 ms
    fa = med(1_000_000, "scoped", "first_access")
    if fa is not None:
        prims = idx.get(envs, 1_000_000, "scoped", "first_access")["stage_prims"]
        out.append(
            {
                "target": f"first access, {envs} envs, {prims:,}-prim stage: <= 100 ms",
                "label": f"first access ≤ 100 ms ({envs} envs, {prims:,} prims)",
                "measured": f"{fa * 1e3:.0f} ms",
                "met": fa <= 0.1,
                "value": fa,
            }
        )
    return out


def targets_table(runs: dict[str, Sequence[dict]], envs: int | None = None) -> str:
    """Targets, one column per run (e.g. ``{"cpu": rows, "h200": rows}``), at ``envs`` (default: the largest)."""
    if envs is None:
        envs = max((r["envs"] for rows in runs.values() for r in rows), default=8192)
    evaluated = {name: {t["target"].split(":")[0]: t for t in targets(rows, envs)} for name, rows in runs.items()}
    keys: list[str] = []
    for ev in evaluated.values():
        for k in ev:
            if k not in keys:
                keys.append(k)
    names = list(runs)
    lines = ["| target | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    full_names = {}
    for ev in evaluated.values():
        for k, t in ev.items():
            full_names.setdefault(k, t["target"])
    for k in keys:
        cells = []
        for name in names:
            t = evaluated[name].get(k)
            if t is None:
                cells.append("—")
            else:
                mark = {True: "met", False: "**missed**", None: "reported"}[t["met"]]
                cells.append(f"{t['measured']} — {mark}")
        lines.append(f"| {full_names[k]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def short_targets(rows: Sequence[dict], envs: int | None = None) -> str:
    """The targets of :func:`targets` at ``envs``, one line each; the flatness check once (interleaved if run)."""
    if envs is None:
        envs = max((r["envs"] for r in rows), default=8192)
    evaluated = targets(rows, envs)
    interleaved = any("interleaved" in t["target"] for t in evaluated)
    lines = []
    for t in evaluated:
        if "per-filler minimum" in t["target"]:
            continue
        if interleaved and "flat in stage size" in t["target"] and "interleaved" not in t["target"]:
            continue
        mark = {True: "met     ", False: "MISSED  ", None: "reported"}[t["met"]]
        lines.append(f"- {mark} {t.get('label', t['target'])}: {t['measured']}")
    return "\n".join(lines) if lines else "(no target can be evaluated from this run)"

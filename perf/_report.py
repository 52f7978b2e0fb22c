# SPDX-License-Identifier: Apache-2.0
"""Tables, JSON, plots and target checks for the scaling harness."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

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

PLOT_METRICS = (
    "slot_rebuild_children",
    "slot_rebuild_parents",
    "first_access",
    "get_world_poses",
    "set_world_poses",
    "resolve_pattern",
    "close_per_prim",
)


# ---------------------------------------------------------------------------------------------------- lookup


class Rows:
    """Index over result rows by (envs, filler, method, metric)."""

    def __init__(self, rows: Iterable[dict]) -> None:
        self.rows = list(rows)
        self._by: dict[tuple, dict] = {}
        for r in self.rows:
            self._by[(r["envs"], r["filler"], r["method"], r["metric"])] = r

    def get(self, envs: int, filler: int, method: str, metric: str) -> dict | None:
        return self._by.get((envs, filler, method, metric))

    def median(self, envs: int, filler: int, method: str, metric: str) -> float | None:
        r = self.get(envs, filler, method, metric)
        if r is None:
            return None
        return r["median_s"] if "median_s" in r else r.get("value")

    def envs(self) -> list[int]:
        return sorted({r["envs"] for r in self.rows})

    def fillers(self, envs: int | None = None) -> list[int]:
        return sorted({r["filler"] for r in self.rows if envs is None or r["envs"] == envs})


def _fmt_s(value: float | None, unit: str = "ms") -> str:
    if value is None:
        return "—"
    scale = {"s": 1.0, "ms": 1e3, "us": 1e6}[unit]
    v = value * scale
    if v >= 100:
        return f"{v:,.0f}"
    if v >= 10:
        return f"{v:.1f}"
    if v >= 1:
        return f"{v:.2f}"
    return f"{v:.3f}"


def _ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b <= 0:
        return "—"
    r = a / b
    return f"{r:,.0f}x" if r >= 10 else f"{r:.1f}x"


def _spread(row: dict | None, unit: str) -> str:
    if row is None:
        return "—"
    if "value" in row:
        return f"{row['value']:,}"
    med, lo, hi = (_fmt_s(row[k], unit) for k in ("median_s", "min_s", "max_s"))
    return f"{med} ({lo}-{hi}, n={row['reps']})"


# ---------------------------------------------------------------------------------------------------- tables


def summary_table(rows: Sequence[dict]) -> str:
    """One line per (envs, filler): selection sizes, slot rebuilds (scoped vs stage-wide), first access, reads."""
    idx = Rows(rows)
    head = (
        "| envs | filler | stage prims | selection scoped / stage-wide | rebuild children ms: scoped / stage-wide "
        "(x) | rebuild parents ms: scoped / stage-wide (x) | first access ms: scoped / stage-wide / usd "
        "| get_world_poses us: fabric / usd ms | set_world_poses ms | close us/prim |"
    )
    lines = [head, "|" + "---:|" * 10]
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
                f"| {_fmt_s(m('scoped', 'get_world_poses'), 'us')} / {_fmt_s(m('usd', 'get_world_poses'))} "
                f"| {_fmt_s(m('scoped', 'set_world_poses'))} "
                f"| {_fmt_s(m('scoped', 'close_per_prim'), 'us')} |"
            )
    return "\n".join(lines)


def _int(v: float | None) -> str:
    return "—" if v is None else f"{int(v):,}"


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
        "| view prims | filler | stage-wide selection | scoped selection | stage-wide child ms | stage-wide parent ms "
        "| stage-wide full ms | scoped child ms | scoped parent ms | scoped full ms |",
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


# ---------------------------------------------------------------------------------------------------- targets


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
                    "label": f"slot-table rebuild ({_which(metric)}) flat in stage size, max/min ≤ 1.3",
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
    # 2. >= 1000x faster than the stage-wide baseline at 100k and 1M filler
    for f in (100_000, 1_000_000):
        for metric in ("slot_rebuild_children", "slot_rebuild_parents"):
            s, w = med(f, "scoped", metric), med(f, "stage_wide", metric)
            if s is None or w is None:
                continue
            out.append(
                {
                    "target": f"{metric} vs stage-wide at {f:,} filler: >= 1000x",
                    "label": f"slot-table rebuild ({_which(metric)}) ≥ 1000x faster than the baseline at "
                    f"{format_count(f)} filler",
                    "measured": f"{w / s:,.0f}x ({_fmt_s(w)} ms vs {_fmt_s(s, 'us')} us)",
                    "met": w / s >= 1000,
                    "value": w / s,
                }
            )
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


def _which(metric: str) -> str:
    what = "parents" if "parents" in metric else "prims"
    return f"{what}, interleaved" if "interleaved" in metric else what


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


# ---------------------------------------------------------------------------------------------------- files


def write_json(path: Path, machine: dict, version: str, rows: Sequence[dict], **extra: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"machine": machine, "frameview_version": version, "rows": list(rows), **extra}
    path.write_text(json.dumps(payload, indent=1, sort_keys=False) + "\n")


def read_json(path: Path) -> dict:
    return json.loads(Path(path).read_text())


# What a reader of a plot or of the short table sees for each method of the rows.
METHOD_LABELS = {
    "scoped": "frameview (scoped selection)",
    "stage_wide": "stage-wide selection (baseline)",
    "usd": "USD (pxr)",
}

PLOT_TITLES = {
    "slot_rebuild_children": "Slot-table rebuild on every access: viewed prims",
    "slot_rebuild_parents": "Slot-table rebuild on every access: their parents",
    "first_access": "First access: build the view + one read",
    "get_world_poses": "get_world_poses, every viewed prim",
    "set_world_poses": "set_world_poses, every viewed prim",
    "resolve_pattern": "Resolve the prim-path pattern",
    "close_per_prim": "close(): time per tagged prim",
}

# Horizontal target lines: metric -> (seconds, label). Only targets that are a fixed time are drawn.
PLOT_TARGETS = {
    "slot_rebuild_children": (25e-6, "target on a GPU: ≤ 25 us (8192-prim view)"),
    "slot_rebuild_parents": (25e-6, "target on a GPU: ≤ 25 us (8192-prim view)"),
    "first_access": (0.1, "target: ≤ 100 ms (8192 envs, 1M filler)"),
    "get_world_poses": (25e-6, "target on a GPU: ≤ 25 us (8192 prims)"),
    "close_per_prim": (1e-6, "target: ≤ 1 us per tagged prim"),
}


def format_time(seconds: float | None) -> str:
    """``0.41 us``, ``14.2 us``, ``3.30 ms``, ``1.25 s``: three significant figures, in the unit that fits (us at
    least, as the targets are written)."""
    if seconds is None:
        return "—"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale or unit == "us":
            v = seconds / scale
            break
    if v >= 100:
        return f"{v:,.0f} {unit}"
    return f"{v:.1f} {unit}" if v >= 10 else f"{v:.2f} {unit}" if v >= 0.1 else f"{v:.3f} {unit}"


def format_count(n: float) -> str:
    """``0``, ``950``, ``25k``, ``125k``, ``1M``, ``1.02M``: prim counts for tick labels and tables."""
    n = float(n)
    if n >= 1e6:
        return f"{n / 1e6:.3g}M"
    if n >= 1e3:
        return f"{n / 1e3:.3g}k"
    return f"{n:.0f}"


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
        ("slot_rebuild_full", "slot tables rebuilt (prims + parents)"),
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
                "## All rows\n\n" + full_table(rows),
            ]
        )
        + "\n"
    )


def plot(rows: Sequence[dict], out_dir: Path, name: str) -> list[Path]:
    """One PNG per metric: time per call vs prims on the stage (log-log), one line per (method, envs).

    Legends name the methods in words (:data:`METHOD_LABELS`), tick labels carry their unit (us / ms / s) and fixed
    time targets are drawn as dashed lines. Needs matplotlib.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter, NullLocator

    idx = Rows(rows)
    device = rows[0]["device"] if rows else "?"
    written: list[Path] = []
    styles = {"scoped": ("C0", "o"), "stage_wide": ("C3", "s"), "usd": ("C2", "^")}
    dashes = {e: ls for e, ls in zip(sorted(idx.envs(), reverse=True), ["-", "--", ":", "-."], strict=False)}
    order = {"scoped": 0, "stage_wide": 1, "usd": 2}
    for metric in PLOT_METRICS:
        series: dict[tuple[str, int], list[dict]] = {}
        for r in rows:
            if r["metric"] == metric and "median_s" in r:
                series.setdefault((r["method"], r["envs"]), []).append(r)
        if not series:
            continue
        fig, ax = plt.subplots(figsize=(7.2, 5.0))
        for (method, envs), pts in sorted(series.items(), key=lambda kv: (order.get(kv[0][0], 9), -kv[0][1])):
            pts = sorted(pts, key=lambda r: r["stage_prims"])
            x = [p["stage_prims"] for p in pts]
            y = [p["median_s"] for p in pts]
            lo = [p["median_s"] - p["min_s"] for p in pts]
            hi = [p["max_s"] - p["median_s"] for p in pts]
            color, marker = styles.get(method, ("C7", "x"))
            ax.errorbar(
                x,
                y,
                yerr=[lo, hi],
                color=color,
                marker=marker,
                linestyle=dashes.get(envs, "-"),
                capsize=3,
                label=f"{METHOD_LABELS.get(method, method)}, {envs:,} envs",
            )
        target = PLOT_TARGETS.get(metric)
        if target is not None:
            ax.axhline(target[0], color="0.35", linestyle=(0, (6, 3)), linewidth=1.2, label=target[1])
        ax.set_xscale("log")
        ax.set_yscale("log")
        # labelled ticks: 1..9 within a decade, 1-2-5 steps over a few decades, the decades over more
        for axis, lim, fmt in (
            (ax.xaxis, ax.get_xlim(), format_count),
            (ax.yaxis, ax.get_ylim(), _tick_time),
        ):
            decades = math.log10(max(lim) / max(min(lim), 1e-12))
            subs = tuple(range(1, 10)) if decades < 1.0 else (1.0, 2.0, 5.0) if decades < 2.5 else (1.0,)
            axis.set_major_locator(LogLocator(base=10, subs=subs))
            axis.set_major_formatter(FuncFormatter(lambda v, _pos, fmt=fmt: fmt(v)))
            axis.set_minor_locator(LogLocator(base=10, subs=tuple(range(2, 10))))
            axis.set_minor_formatter(NullFormatter())
        xs = sorted({r["stage_prims"] for pts in series.values() for r in pts})
        if len(xs) <= 4:  # a few stage sizes (a quick run): tick exactly those
            ax.xaxis.set_major_locator(FixedLocator(xs))
            ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlabel("prims on the stage (viewed prims, their parents and filler prims)")
        per = "per tagged prim" if metric == "close_per_prim" else "per call"
        ax.set_ylabel(f"time {per} (median; bars: min to max)")
        ax.set_title(f"{PLOT_TITLES.get(metric, metric)}\n{name}, device {device}", fontsize=11)
        ax.grid(True, which="major", alpha=0.35)
        ax.grid(True, which="minor", alpha=0.1)
        handles, labels = ax.get_legend_handles_labels()
        order_ = sorted(range(len(labels)), key=lambda i: labels[i].startswith("target"))  # the target line last
        ax.legend(
            [handles[i] for i in order_],
            [labels[i] for i in order_],
            fontsize=8,
            loc="upper center",
            bbox_to_anchor=(0.5, -0.14),
            ncol=2,
            frameon=False,
        )
        fig.tight_layout()
        path = out_dir / f"{name}_{metric}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


def _tick_time(seconds: float) -> str:
    """Tick labels on a log time axis: ``10 us``, ``1 ms``, ``100 ms``, ``1 s``."""
    if seconds <= 0:
        return ""
    text = format_time(seconds)
    value, unit = text.split(" ")
    value = value.rstrip("0").rstrip(".") if "." in value else value
    return f"{value} {unit}"


# ---------------------------------------------------------------------------------------------------- profiles


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

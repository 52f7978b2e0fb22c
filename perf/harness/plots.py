# SPDX-License-Identifier: Apache-2.0
"""Log-log plots of a run: one PNG per metric, time against stage prims, a line per (method, envs): each line its
own colour, each env count its own marker, and the labelled ticks enclose every point."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from .fmt import METHOD_LABELS, Rows, format_count, format_time

PLOT_METRICS = (
    "slot_rebuild_children",
    "slot_rebuild_parents",
    "first_access",
    "get_world_poses",
    "set_world_poses",
    "resolve_pattern",
    "close_per_prim",
)


PLOT_TITLES = {
    "slot_rebuild_children": "Per-access lookup of the view's prims in Fabric (slot table rebuilt every access)",
    "slot_rebuild_parents": "Per-access lookup of their parents in Fabric (slot table rebuilt every access)",
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
    # each (method, envs) line its own colour, each env count its own marker and dash: a method's shades share a hue
    shades = {
        "scoped": ("#1f5fa8", "#5fb4e8", "#0b2f5a", "#9fd3f2"),
        "stage_wide": ("#c0392b", "#f39c12", "#7b241c", "#f5c07a"),
        "usd": ("#1e8449", "#a4c639", "#0b4f2a", "#cfe08f"),
    }
    by_size = sorted(idx.envs(), reverse=True)
    markers = {e: m for e, m in zip(by_size, ["o", "s", "^", "D", "v", "P"], strict=False)}
    dashes = {e: ls for e, ls in zip(by_size, ["-", "--", ":", "-."], strict=False)}
    rank = {e: i for i, e in enumerate(by_size)}
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
            palette = shades.get(method, ("0.3", "0.5", "0.1", "0.7"))
            color, marker = palette[rank[envs] % len(palette)], markers.get(envs, "x")
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
        # what must lie between two labelled ticks: every point with its bar, and the target line
        ys = [p["min_s"] for pts in series.values() for p in pts] + [p["max_s"] for pts in series.values() for p in pts]
        ys += [target[0]] if target is not None else []
        xs_all = [p["stage_prims"] for pts in series.values() for p in pts]
        # labelled ticks: 1..9 within a decade, 1-2-5 steps over a few decades, the decades over more
        for axis, values, fmt, set_lim in (
            (ax.xaxis, xs_all, format_count, ax.set_xlim),
            (ax.yaxis, ys, _tick_time, ax.set_ylim),
        ):
            lo, hi = max(min(values), 1e-12), max(max(values), 1e-12)
            decades = math.log10(hi / lo)
            wide = 4.0 if axis is ax.xaxis else 2.5  # prim counts read well in 1-2-5 steps over more decades
            subs = tuple(range(1, 10)) if decades < 1.0 else (1.0, 2.0, 5.0) if decades < wide else (1.0,)
            axis.set_major_locator(LogLocator(base=10, subs=subs))
            axis.set_major_formatter(FuncFormatter(lambda v, _pos, fmt=fmt: fmt(v)))
            axis.set_minor_locator(LogLocator(base=10, subs=tuple(range(2, 10))))
            axis.set_minor_formatter(NullFormatter())
            first, last = _covering_ticks(lo, hi, subs)
            set_lim(first / 1.12, last * 1.12)  # the outermost labelled ticks enclose every point
        xs = sorted(set(xs_all))
        if len(xs) <= 4:  # a few stage sizes (a quick run): tick exactly those
            ax.xaxis.set_major_locator(FixedLocator(xs))
            ax.xaxis.set_minor_locator(NullLocator())
            ax.set_xlim(xs[0] / 1.5, xs[-1] * 1.5)
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


def _covering_ticks(lo: float, hi: float, subs: tuple[float, ...]) -> tuple[float, float]:
    """The largest tick ``s * 10**k`` (``s`` in ``subs``) at or below ``lo`` and the smallest at or above ``hi``."""
    ticks = sorted(
        s * 10.0**k for k in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 2) for s in subs
    )
    first = max((t for t in ticks if t <= lo * (1 + 1e-9)), default=ticks[0])
    last = min((t for t in ticks if t >= hi * (1 - 1e-9)), default=ticks[-1])
    return first, last


def _tick_time(seconds: float) -> str:
    """Tick labels on a log time axis: ``10 us``, ``1 ms``, ``100 ms``, ``1 s``."""
    if seconds <= 0:
        return ""
    text = format_time(seconds)
    value, unit = text.split(" ")
    value = value.rstrip("0").rstrip(".") if "." in value else value
    return f"{value} {unit}"

# SPDX-License-Identifier: Apache-2.0
"""Formatting and lookup shared by the tables, the targets and the plots."""

from __future__ import annotations

from collections.abc import Iterable


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


def _int(v: float | None) -> str:
    return "—" if v is None else f"{int(v):,}"


# What a reader of a plot or of the short table sees for each method of the rows.
METHOD_LABELS = {
    "scoped": "frameview (scoped selection)",
    "stage_wide": "stage-wide selection (baseline)",
    "usd": "USD (pxr)",
}


# One name per slot-rebuild figure, everywhere a run prints or writes one: what the user gets (finding the view's prims
# in Fabric before every read and write), with the metric key (slot_rebuild_*) left for the result files.
SLOT_REBUILD_LABELS = {
    "slot_rebuild_full": "per-access lookup: finding the view's prims and their parents in Fabric",
    "slot_rebuild_children": "per-access lookup of the view's prims",
    "slot_rebuild_parents": "per-access lookup of their parents",
}
SLOT_REBUILD_LEGEND = (
    "per-access lookup: before every read or write a Fabric view finds where its prims (and their parents) sit in "
    "Fabric now, since Fabric moves prims between buckets; frameview rebuilds that slot table from a private tag "
    "the view's prims carry, so it costs O(view), the stage-wide baseline searches every prim of the stage. The "
    "'prims and their parents' figure is what every access pays (both tables, one after the other); 'view's prims' "
    "and 'parents' time one table alone; 'scenes interleaved' alternates the scenes of every filler size held at "
    "once (the flatness check). Metric keys in the result files: slot_rebuild_full / _children / _parents"
)


def slot_rebuild_label(metric: str) -> str:
    """The name of a slot-rebuild metric (``slot_rebuild_children_interleaved`` -> '..., scenes interleaved')."""
    base = metric.removesuffix("_interleaved")
    label = SLOT_REBUILD_LABELS.get(base, metric)
    return f"{label}, scenes interleaved" if metric.endswith("_interleaved") else label


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

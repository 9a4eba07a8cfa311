"""The benchmark's charts: PNG images next to results.md, embedded in it.

Each chart is a function of the results that draws one figure, or returns
``None`` when its part of the benchmark did not run; :data:`CHARTS` names the
file each one writes. A new benchmark adds its chart by appending one entry.
matplotlib runs headless (the Agg backend): no display is needed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

Chart = Callable[[dict[str, Any]], Figure | None]

OURS, FLOOR, GOAL, SECOND = "#1f77b4", "#7f7f7f", "#d62728", "#aec7e8"


def cold_start(results: dict[str, Any]) -> Figure | None:
    """Import + first request per function against the floor and the 1.5x goal:
    in instructions where they were counted (what the goal is checked on), else
    in milliseconds (import and first request stacked)."""
    cold = results.get("cold")
    if not cold:
        return None
    rows = {**cold["functions"], **cold.get("traced", {}), cold["floor_name"]: cold["floor"]}
    names = list(rows)[::-1]
    colors = [FLOOR if name == cold["floor_name"] else OURS for name in names]
    figure, axes = plt.subplots(figsize=(10, 0.45 * len(names) + 1.6))
    if cold.get("ratio_basis") == "instructions":
        counts = [rows[name]["instructions_m"] for name in names]
        floor, unit = cold["floor"]["instructions_m"], "M instructions"
        axes.barh(names, counts, color=colors)
        ends, totals = counts, counts
        axes.set_xlabel("M instructions, import + first request (callgrind, one run each)")
        axes.set_title("Cold start as shipped (read-only build output), instructions executed")
    else:
        imports = [rows[name]["import_ms"]["median"] for name in names]
        first = [rows[name]["first_request_ms"]["median"] for name in names]
        floor, unit = cold["floor"]["init_plus_first_ms"]["median"], "ms"
        axes.barh(names, imports, color=colors, label="import")
        axes.barh(names, first, left=imports, color=colors, alpha=0.45, label="first request")
        ends = [i + f for i, f in zip(imports, first, strict=True)]
        # The label is the table's figure: the median of the sums (the bars stack the parts' medians).
        totals = [rows[name]["init_plus_first_ms"]["median"] for name in names]
        axes.set_xlabel("ms, median of fresh processes (import, then first request)")
        axes.set_title(f"Cold start as shipped (read-only build output), median of {cold['runs']} runs")
    axes.axvline(floor, color=FLOOR, linestyle=":", label=f"floor {floor:.0f} {unit}")
    axes.axvline(1.5 * floor, color=GOAL, linestyle="--", label=f"goal: 1.5x floor = {1.5 * floor:.0f} {unit}")
    for index, total in enumerate(totals):
        axes.text(ends[index], index, f" {total:.0f} {unit} ({total / floor:.2f}x)", va="center", fontsize=8)
    axes.set_xlim(0, max(*ends, 1.5 * floor) * 1.25)
    axes.legend(loc="lower right", fontsize=8)
    figure.tight_layout()
    return figure


def warm_latency(results: dict[str, Any]) -> Figure | None:
    """Warm p50 and p95 per route (ours), with the table size they were measured at."""
    warm = results.get("warm")
    if not warm:
        return None
    names = [route["route"] for route in warm][::-1]
    by_name = {route["route"]: route["ours"]["latency_ms"] for route in warm}
    p50 = [by_name[name]["median"] for name in names]
    p95 = [by_name[name]["p95"] for name in names]
    figure, axes = plt.subplots(figsize=(10, 0.45 * len(names) + 1.6))
    axes.barh(names, p95, color=SECOND, label="p95")
    axes.barh(names, p50, color=OURS, label="p50")
    for index, value in enumerate(p50):
        axes.text(p95[index], index, f" p50 {value:.1f} / p95 {p95[index]:.1f} ms", va="center", fontsize=8)
    tickets = results.get("table", {}).get("tickets")
    size = f", {tickets:,} tickets in the table" if tickets else ""
    axes.set_xlabel("ms per request against the local emulator (quote ratios, not milliseconds)")
    axes.set_title(f"Warm requests per route{size}")
    axes.set_xlim(0, max(p95) * 1.45)
    axes.legend(loc="lower right", fontsize=8)
    figure.tight_layout()
    return figure


def partition_heat(results: dict[str, Any]) -> Figure | None:
    """The busiest table and GSI1 partition key per GSI1 shard count (bench/heat.py), against the limit."""
    heat = results.get("heat")
    if not heat:
        return None
    rows = heat["rows"]
    labels = [f"{row['shards']} shard(s)" for row in rows]
    positions = range(len(rows))
    figure, axes = plt.subplots(figsize=(8, 4.2))
    width = 0.38
    table = [row["table"]["wcu_per_second"] for row in rows]
    gsi1 = [row["gsi1"]["wcu_per_second"] for row in rows]
    axes.bar([x - width / 2 for x in positions], table, width, color=SECOND, label="busiest table key")
    axes.bar([x + width / 2 for x in positions], gsi1, width, color=OURS, label="busiest GSI1 key")
    limit = heat["partition_limit_wcu_per_second"]
    axes.axhline(limit, color=GOAL, linestyle="--", label=f"partition limit {limit:,} WCU/s")
    axes.set_xticks(list(positions), labels)
    axes.set_ylabel("WCU/s on one partition key")
    axes.set_title("Partition heat of one hot tenant, by GSI1 shard count")
    axes.legend(fontsize=8)
    figure.tight_layout()
    return figure


# The alt text results.md gives each image.
CHART_TITLES = {
    "cold_start.png": "Cold start as shipped, per function, against the floor and the 1.5x goal",
    "warm_latency.png": "Warm latency per route, ours against the naive design",
    "partition_heat.png": "Partition heat of one hot tenant by GSI1 shard count",
}

CHARTS: dict[str, Chart] = {
    "cold_start.png": cold_start,
    "warm_latency.png": warm_latency,
    "partition_heat.png": partition_heat,
}


def write_charts(results: dict[str, Any], out: Path) -> list[Path]:
    """Every chart whose part of the benchmark ran, as ``out/<file>``."""
    written = []
    for file_name, chart in CHARTS.items():
        figure = chart(results)
        if figure is None:
            continue
        path = out / file_name
        figure.savefig(path, dpi=110)
        plt.close(figure)
        written.append(path)
    return written

"""Benchmark pictures as SVG: throughput against latency per server, and LLM latency distributions.

matplotlib is an optional extra (`pip install -e '.[plot]'`); it is imported only here, only when
a picture is asked for. Text stays text in the SVG (searchable, and what the tests read), and the
files carry no date, so a rerun on the same figures writes the same bytes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class PlotError(RuntimeError):
    """No picture can be drawn (matplotlib missing, nothing to draw)."""


@dataclass(frozen=True)
class Point:
    """One measured level: its concurrency, throughput (infer/s) and latency percentiles (ms)."""

    concurrency: float
    throughput: float
    p50_ms: float
    p99_ms: float


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise PlotError("drawing needs matplotlib: pip install -e '.[plot]' (or pip install matplotlib)") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "openinfer", "font.size": 9})
    return plt


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _save(fig: Any, path: str | Path) -> Path:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(target, format="svg", bbox_inches="tight", metadata={"Date": None})
    fig.canvas.figure.clear()
    return target


def throughput_latency(panels: Mapping[str, Mapping[str, Sequence[Point]]], path: str | Path,
                       title: str = "Throughput against latency") -> Path:
    """One panel per workload (e.g. "HTTP JSON [1,16]"), one line per server through its
    concurrency levels: x the p50 latency, y the throughput; up and to the left is better."""
    plt = _pyplot()
    panels = {name: series for name, series in panels.items() if any(series.values())}
    if not panels:
        raise PlotError("no measured levels to draw")
    columns = min(2, len(panels))
    rows = (len(panels) + columns - 1) // columns
    fig, axes = plt.subplots(rows, columns, figsize=(6.2 * columns, 4.4 * rows), squeeze=False, layout="constrained")
    labels = sorted({label for series in panels.values() for label in series})
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    colors = {label: palette[i % len(palette)] for i, label in enumerate(labels)}  # a server keeps its colour
    for ax, (panel, series) in zip(axes.flat, panels.items()):
        for label, points in series.items():
            points = sorted(points, key=lambda p: p.concurrency)
            if not points:
                continue
            (line,) = ax.plot([p.p50_ms for p in points], [p.throughput for p in points], marker="o", label=label,
                              color=colors[label])
            line.set_gid(f"series-{slug(panel)}-{slug(label)}")
            for p in points:
                ax.annotate(f"c={p.concurrency:g}", (p.p50_ms, p.throughput), textcoords="offset points",
                            xytext=(4, 4), fontsize=7, color=line.get_color())
        ax.set_title(panel)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("p50 latency (ms)")
        ax.set_ylabel("throughput (infer/s)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    fig.suptitle(title)
    return _save(fig, path)


def latency_distributions(runs: Mapping[str, Mapping[str, Sequence[float]]], path: str | Path,
                          title: str = "LLM latency distributions") -> Path:
    """Empirical CDFs of time to first token and inter-token latency, one line per run
    (e.g. "served c=1", "served c=8")."""
    plt = _pyplot()
    metrics = (("time_to_first_token", "Time to first token (ms)"), ("inter_token_latency", "Inter-token latency (ms)"))
    if not any(samples.get(key) for samples in runs.values() for key, _ in metrics):
        raise PlotError("no TTFT or ITL samples to draw")
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), layout="constrained")
    for ax, (key, label) in zip(axes, metrics):
        for run, samples in runs.items():
            values = sorted(samples.get(key) or [])
            if not values:
                continue
            fractions = [(i + 1) / len(values) for i in range(len(values))]
            (line,) = ax.step(values, fractions, where="post", label=f"{run} (n={len(values)})")
            line.set_gid(f"series-{slug(key)}-{slug(run)}")
        ax.set_title(label)
        ax.set_xscale("log")  # tails under load span orders of magnitude
        ax.set_xlabel("ms")
        ax.set_ylabel("fraction of requests")
        ax.set_ylim(0, 1.02)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title)
    return _save(fig, path)


def points_of_levels(levels: Sequence[Mapping[str, Any]]) -> list[Point]:
    """`openinfer bench --json` levels -> points."""
    return [Point(level["value"], level["throughput"], level["latency_us"]["p50"] / 1000,
                  level["latency_us"]["p99"] / 1000) for level in levels if level.get("throughput")]

"""Latency summaries and perf_analyzer's stability rule."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

PERCENTILES = (50, 90, 95, 99)


def summarize_ns(lat_ns: np.ndarray) -> dict[str, float]:
    """avg/min/max/p50/p90/p95/p99 in microseconds (zeros for an empty sample)."""
    if lat_ns.size == 0:
        return {k: 0.0 for k in ("avg", "min", "max", *(f"p{p}" for p in PERCENTILES))}
    us = lat_ns.astype(np.float64) / 1000.0
    out = {"avg": float(us.mean()), "min": float(us.min()), "max": float(us.max())}
    for p, v in zip(PERCENTILES, np.percentile(us, PERCENTILES)):
        out[f"p{p}"] = float(v)
    return out


def describe(values: Sequence[float] | np.ndarray) -> dict[str, float]:
    """genai-perf's columns: avg, min, max, p99, p90, p75 (and p50, p25)."""
    a = np.asarray(values, dtype=np.float64)
    if a.size == 0:
        return {k: 0.0 for k in ("avg", "min", "max", "p99", "p90", "p75", "p50", "p25")}
    out = {"avg": float(a.mean()), "min": float(a.min()), "max": float(a.max())}
    for p in (99, 90, 75, 50, 25):
        out[f"p{p}"] = float(np.percentile(a, p))
    return out


def is_stable(values: list[float], percentage: float) -> bool:
    """True when every value lies within ``percentage`` % of their mean (3 windows)."""
    if len(values) < 3:
        return False
    last = values[-3:]
    mean = sum(last) / 3
    if mean == 0:
        return all(v == 0 for v in last)
    return all(abs(v - mean) <= mean * percentage / 100.0 for v in last)

"""Results as a readable table, perf_analyzer's CSV, or JSON."""

from __future__ import annotations

import csv
import io
from typing import Any

from .runner import LevelResult

CSV_COLUMNS = [
    "Client Send", "Network+Server Send/Recv", "Server Queue", "Server Compute Pre",
    "Server Compute Infer", "Server Compute Post", "Client Recv", "p50 latency", "p90 latency",
    "p95 latency", "p99 latency", "Avg latency", "request/response", "response wait",
]


def table(results: list[LevelResult], header: dict[str, Any]) -> str:
    """The end-of-run summary: one row per level, server split when the server reports it."""
    server = any(r.server for r in results)
    mode = "Concurrency" if results and results[0].mode == "concurrency" else "Rate"
    cols = [mode, "Infer/s", "Avg ms", "p50 ms", "p90 ms", "p95 ms", "p99 ms"]
    if server:
        cols += ["Queue us", "In us", "Infer us", "Out us", "Srv n"]
    cols += ["Client CPU/procs"]
    rows = []
    for r in results:
        lat = r.latency_us
        row = [f"{r.value:g}", f"{r.throughput:,.1f}"] + [
            f"{lat.get(k, 0) / 1000:.3f}" for k in ("avg", "p50", "p90", "p95", "p99")
        ]
        if server:
            s = r.server or {}
            row += [f"{s.get(k, 0):.0f}" for k in
                    ("queue_us", "compute_input_us", "compute_infer_us", "compute_output_us")]
            row.append(str(s.get("success_count", "-")))
        row.append(f"{r.client.get('cpu_percent', 0):.0f}%/{r.client.get('workers', 1)}p")
        rows.append(row)
    widths = [max(len(c), *(len(r[i]) for r in rows)) if rows else len(c)
              for i, c in enumerate(cols)]
    lines = [
        f"{header.get('model')} via {header.get('protocol')} at {header.get('url')}"
        f" ({header.get('server') or 'unknown server'}), batch {header.get('batch_size')}"
        + (f", {header['mode_note']}" if header.get("mode_note") else ""),
        "  ".join(c.rjust(w) for c, w in zip(cols, widths)),
        "  ".join("-" * w for w in widths),
    ]
    lines += ["  ".join(v.rjust(w) for v, w in zip(row, widths)) for row in rows]
    notes = [f"level {r.value:g}: {r.errors} errors, first: {r.client.get('first_error', '')}"
             for r in results if r.errors]
    notes += [f"level {r.value:g}: not stable after {r.windows} windows" for r in results
              if not r.stable]
    busy = [r for r in results if r.client.get("cpu_percent", 0) > 85 * r.client.get("workers", 1)]
    if busy:
        notes.append("the generator ran near a full core per worker: raise --workers")
    return "\n".join(lines + notes)


def to_csv(results: list[LevelResult]) -> str:
    """perf_analyzer's ``-f`` layout (latencies in microseconds)."""
    buf = io.StringIO()
    w = csv.writer(buf)
    first = "Concurrency" if results and results[0].mode == "concurrency" else "Request Rate"
    w.writerow([first, "Inferences/Second", *CSV_COLUMNS])
    for r in results:
        lat, s = r.latency_us, r.server or {}
        server_part = sum(s.get(k, 0.0) for k in
                          ("queue_us", "compute_input_us", "compute_infer_us", "compute_output_us"))
        w.writerow([
            f"{r.value:g}", f"{r.throughput:.2f}", 0,
            int(max(lat.get("avg", 0.0) - server_part, 0)),
            int(s.get("queue_us", 0)), int(s.get("compute_input_us", 0)),
            int(s.get("compute_infer_us", 0)), int(s.get("compute_output_us", 0)), 0,
            int(lat.get("p50", 0)), int(lat.get("p90", 0)), int(lat.get("p95", 0)),
            int(lat.get("p99", 0)), int(lat.get("avg", 0)), 0, 0,
        ])
    return buf.getvalue()

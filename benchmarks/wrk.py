"""HTTP JSON load with wrk (C, about 20 µs of CPU per request) as a cross-check of our driver."""

from __future__ import annotations

import json
import resource
import subprocess
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def run(wrk: str, url: str, model: str, body_file: Path, concurrency: int,
        seconds: float, warmup_s: float = 1.0) -> dict[str, Any]:
    """Throughput and latency (µs) of one wrk run, after a discarded warm-up run."""
    target = f"http://{url}/v2/models/{model}/infer"
    script = str(HERE / "wrk_v2.lua")

    def once(duration: float) -> tuple[dict[str, Any], float]:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        out = subprocess.run(
            [wrk, "-t1", f"-c{concurrency}", f"-d{max(duration, 1):.0f}s", "--timeout", "30s",
             "-s", script, target, "--", str(body_file), '"OUTPUT0"'],
            capture_output=True, text=True, check=False)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        line = next((ln for ln in out.stdout.splitlines() if ln.startswith("WRKJSON ")), None)
        if line is None:
            raise RuntimeError(f"wrk gave no summary: {out.stdout[-300:]} {out.stderr[-300:]}")
        return json.loads(line[8:]), cpu

    if warmup_s > 0:
        once(warmup_s)
    s, cpu = once(seconds)
    secs = s["duration_us"] / 1e6
    return {
        "throughput": s["requests"] / secs if secs else 0.0,
        "latency_us": {"avg": s["avg"], "p50": s["p50"], "p90": s["p90"], "p99": s["p99"]},
        "completed": s["requests"],
        "errors": s["errors"] + s["invalid"],
        "client": {"cpu_percent": 100 * cpu / secs if secs else 0.0,
                   "cpu_us_per_request": 1e6 * cpu / max(s["requests"], 1), "driver": "wrk"},
    }

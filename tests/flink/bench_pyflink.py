"""Rows per second through PyFlink, async mode vs pandas mode, against one openinfer server.

    .venv/bin/python -m tests.flink.bench_pyflink --rows 5000

Starts `openinfer serve` with the batching `flink_scorer` model (max_batch_size 8, dynamic
batching), runs the end-to-end job's query over `--rows` rows in each mode with the PyFlink
interpreter found by `test_pyflink_e2e.flink_python`, into a blackhole sink, and prints one
JSON object. Query time excludes the JVM start and environment setup, but includes Flink's
per-job planning and start-up (a few seconds), so use enough rows.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from tests.flink.models import write_models
from tests.flink.test_pyflink_e2e import PYTHON, SCORER, run_job
from tests.helpers import Server


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--modes", default="async,pandas")
    parser.add_argument("--arrow-batch-size", type=int, default=1000)
    args = parser.parse_args()
    if PYTHON is None:
        print("pyflink is not importable: run `make flink-venv`", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        write_models(repo, SCORER)
        with Server(repo) as server:
            result = run_job(
                server, Path(tmp) / "out.json", "--rows", str(args.rows), "--modes", args.modes,
                "--arrow-batch-size", str(args.arrow_batch_size), "--blackhole", timeout=1800,
            )  # fmt: skip
    report = {
        "rows": args.rows,
        "arrow_batch_size": args.arrow_batch_size,
        "setup_s": round(result["setup_s"], 1),
    }
    for mode, run in result["modes"].items():
        report[mode] = {
            "seconds": round(run["seconds"], 2),
            "rows_per_s": round(args.rows / run["seconds"], 1),
        }
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Rows per second of ML_PREDICT-shaped queries through Flink, against one openinfer server.

    .venv/bin/python -m tests.flink.bench_pyflink --rows 5000 [--provider-jars DIR]

Starts `openinfer serve` with the batching `flink_scorer` model (`--max-batch-size`, 8 by
default, dynamic batching) and, `--repeat` times in turn on that one server, runs: Flink's Java `triton`
provider (`ML_PREDICT`, one JSON request per row, async, `--provider-concurrency` rows in
flight), when its jars are given (`--provider-jars` or `OPENINFER_FLINK_PROVIDER_JARS`; see
docs/flink.md); then this package's PyFlink functions in each `--modes` mode. Every query reads
`--rows` rows into a blackhole sink. Prints one JSON object. Query time excludes the JVM start
and environment setup but includes Flink's per-job planning and start-up (a few seconds), so use
enough rows.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.flink.models import write_models
from tests.flink.test_pyflink_e2e import PYTHON, SCORER, run_job
from tests.helpers import ROOT, Server


def provider_jars(given: str | None) -> tuple[Path | None, str]:
    """The provider's jar folder, or None and why it is not used."""
    if not given:
        return None, "no provider jars: pass --provider-jars or set OPENINFER_FLINK_PROVIDER_JARS"
    folder = Path(given)
    if not any(folder.glob("flink-model-triton*.jar")):
        return None, f"no flink-model-triton*.jar in {folder}"
    return folder, ""


def run_provider(
    server: Server, jars: Path, rows: int, concurrency: int, work: Path
) -> float:
    """Seconds of one provider `ML_PREDICT` query over `rows` rows."""
    assert PYTHON is not None
    ddl = (
        "CREATE TEMPORARY MODEL m INPUT (features ARRAY<FLOAT>) OUTPUT (score FLOAT) WITH ("
        f"'provider' = 'triton', 'endpoint' = 'http://127.0.0.1:{server.http_port}', "
        "'model-name' = 'flink_scorer', 'model-version' = '1')"
    )
    (work / "ddls.json").write_text(json.dumps([ddl]), encoding="utf-8")
    config = f", MAP['async', 'true', 'max-concurrent-operations', '{concurrency}']"
    command = [
        PYTHON, "-m", "tests.flink.provider_job", "--jars", str(jars), "--bench",
        str(work / "ddls.json"), "--rows", str(rows), "--config", config,
        "--out", str(work / "provider.json"),
    ]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"provider job failed:\n{done.stderr[-6000:]}")
    return float(json.loads((work / "provider.json").read_text())["0"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--modes", default="async,pandas")
    parser.add_argument("--arrow-batch-size", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--provider-jars", default=os.environ.get("OPENINFER_FLINK_PROVIDER_JARS"))
    parser.add_argument("--provider-concurrency", type=int, default=16)
    parser.add_argument("--max-batch-size", type=int, default=8,
                        help="the model's max_batch_size: the most rows one pandas-mode request carries")
    args = parser.parse_args()
    if PYTHON is None:
        print("pyflink is not importable: run `make flink-venv`", file=sys.stderr)
        return 2
    jars, why = provider_jars(args.provider_jars)
    runs: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        config = SCORER["flink_scorer"]["config"].replace("max_batch_size: 8", f"max_batch_size: {args.max_batch_size}")
        write_models(work / "repo", {"flink_scorer": {**SCORER["flink_scorer"], "config": config}})
        with Server(work / "repo") as server:
            for _ in range(args.repeat):
                if jars is not None:
                    seconds = run_provider(
                        server, jars, args.rows, args.provider_concurrency, work
                    )
                    runs.setdefault("provider", []).append(seconds)
                result = run_job(
                    server, work / "out.json", "--rows", str(args.rows), "--modes", args.modes,
                    "--arrow-batch-size", str(args.arrow_batch_size), "--blackhole",
                    timeout=1800,
                )  # fmt: skip
                for mode, run in result["modes"].items():
                    runs.setdefault(mode, []).append(run["seconds"])
    report: dict[str, Any] = {"rows": args.rows, "arrow_batch_size": args.arrow_batch_size,
                              "max_batch_size": args.max_batch_size}
    if jars is None:
        report["provider"] = f"skipped: {why}"
    for name, seconds in runs.items():
        rates = [round(args.rows / s, 1) for s in seconds]
        report[name] = {"rows_per_s": rates, "median": round(statistics.median(rates), 1)}
    if "provider" in runs:
        base = report["provider"]["median"]
        for mode in args.modes.split(","):
            report[mode]["vs_provider"] = round(report[mode]["median"] / base, 2)
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())

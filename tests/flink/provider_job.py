"""Runs `ML_PREDICT` through Flink's Java `triton` provider, one query per case step.

Run by `provider_acceptance.py` with the PyFlink interpreter:

    python -m tests.flink.provider_job --cases cases.json --jars DIR --out result.json

`cases.json` is a list of `{"name", "steps": [{"ddl", "source", "label"}]}` where `ddl` creates
model `m` and `source` is a `SELECT` giving one column; before each step the job asks the
capture proxy (`--control`) to file the following requests under the step's label. Every step
records the rows it got or the error that ended it. With `--rows N` the job instead times one
`INSERT INTO blackhole SELECT ... ML_PREDICT` over N generated rows per `--bench` DDL.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any


def environment(jars: Path, parallelism: int = 1) -> Any:
    from pyflink.table import EnvironmentSettings, TableEnvironment

    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    config = t_env.get_config()
    config.set("parallelism.default", str(parallelism))
    config.set("pipeline.jars", ";".join(p.resolve().as_uri() for p in sorted(jars.glob("*.jar"))))
    config.set("restart-strategy.type", "none")
    return t_env


def _error_text(error: BaseException) -> str:
    """The provider's own message (HTTP status and body) out of a long Java stack trace."""
    text = str(error)
    for pattern in (
        r"Triton inference failed with HTTP \d+: [^\n]*",
        r"Failed to connect to Triton server[^\n]*",
        r"Unsupported options[^\n]*(?:\n[^\n]+){0,3}",
        r"(?:Caused by: )?[\w.]*(?:Exception|Error): [^\n]*",
    ):
        found = re.findall(pattern, text)
        if found:
            return found[-1 if pattern.startswith("(?:Caused") else 0][:600]
    return text[:600]


def run_cases(t_env: Any, cases: list[dict[str, Any]], control: str) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for case in cases:
        for step in case["steps"]:
            urllib.request.urlopen(
                urllib.request.Request(control + step["label"], method="POST"), timeout=10
            ).read()
            t_env.execute_sql("DROP TEMPORARY MODEL IF EXISTS m")
            t_env.execute_sql("DROP TEMPORARY VIEW IF EXISTS src")
            began = time.monotonic()
            outcome: dict[str, Any] = {}
            try:
                t_env.execute_sql(step["ddl"])
                t_env.execute_sql(f"CREATE TEMPORARY VIEW src AS {step['source']}")
                query = (
                    "SELECT * FROM ML_PREDICT(TABLE src, MODEL m, DESCRIPTOR("
                    f"`{step['column']}`){step.get('config', '')})"
                )
                with t_env.execute_sql(query).collect() as rows:
                    outcome["rows"] = [[_plain(v) for v in row] for row in rows]
            except Exception as error:  # noqa: BLE001 - the error is the case's result
                outcome["error"] = _error_text(error)
            outcome["seconds"] = round(time.monotonic() - began, 2)
            results[step["label"]] = outcome
    return results


def _plain(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def run_bench(t_env: Any, ddls: list[str], rows: int, config: str) -> dict[str, float]:
    """Seconds per DDL for `rows` rows of ARRAY<FLOAT>[3] through ML_PREDICT into a blackhole."""
    t_env.execute_sql(
        "CREATE TEMPORARY TABLE gen (id BIGINT) WITH ('connector' = 'datagen', "
        f"'number-of-rows' = '{rows}', 'fields.id.kind' = 'sequence', 'fields.id.start' = '1', "
        f"'fields.id.end' = '{rows}')"
    )
    t_env.execute_sql(
        "CREATE TEMPORARY VIEW src AS SELECT id, ARRAY[CAST(id % 97 AS FLOAT), "
        "CAST(0.5 AS FLOAT), CAST(1.0 AS FLOAT)] AS features FROM gen"
    )
    t_env.execute_sql(
        "CREATE TEMPORARY TABLE sink (id BIGINT, features ARRAY<FLOAT>, score FLOAT) "
        "WITH ('connector' = 'blackhole')"
    )
    seconds: dict[str, float] = {}
    for number, ddl in enumerate(ddls):
        t_env.execute_sql("DROP TEMPORARY MODEL IF EXISTS m")
        t_env.execute_sql(ddl)
        began = time.monotonic()
        t_env.execute_sql(
            "INSERT INTO sink SELECT * FROM ML_PREDICT(TABLE src, MODEL m, "
            f"DESCRIPTOR(features){config})"
        ).wait()
        seconds[str(number)] = time.monotonic() - began
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jars", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--cases", type=Path)
    parser.add_argument("--control", default="")
    parser.add_argument("--bench", type=Path, help="a JSON list of DDLs to time")
    parser.add_argument("--rows", type=int, default=0)
    parser.add_argument("--config", default="", help="ML_PREDICT's config MAP, e.g. ', MAP[...]'")
    args = parser.parse_args()
    t_env = environment(args.jars)
    if args.bench:
        ddls = json.loads(args.bench.read_text(encoding="utf-8"))
        result: Any = run_bench(t_env, ddls, args.rows, args.config)
    else:
        cases = json.loads(args.cases.read_text(encoding="utf-8"))
        result = run_cases(t_env, cases, args.control)
    args.out.write_text(json.dumps(result), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

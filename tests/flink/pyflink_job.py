"""A PyFlink job that runs one `SELECT t.*, m(col)` query per mode and writes what came out.

Run by `test_pyflink_e2e.py` with an interpreter that has `apache-flink` installed:

    python -m tests.flink.pyflink_job --endpoint http://127.0.0.1:8000 --out result.json

The model is registered with PyFlink's Model API; only `register_triton_models(t_env,
mode=...)` differs between the modes. Local mini-cluster, parallelism 1, a `from_elements`
source (a literal VALUES list of constant arrays trips a PyFlink pandas-UDF bug).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

ROWS: list[tuple[int, list[float] | None, str]] = [
    (i, None if i == 7 else [float(i), 0.5 * i, 1.0], f"row-{i}") for i in range(1, 13)
]

#: The scorer model's options, registered through PyFlink's Model API (`ModelDescriptor`).
OPTIONS = {
    "timeout": "10s",
    "compression": "gzip",
    "custom-headers": "X-Trace-Id:pyflink-e2e",
    "max-retries": "2",
    "retry-initial-backoff": "50ms",
    "default-value": "-1",
}

QUERY = "SELECT t.id, t.name, scorer(t.features) AS score FROM src AS t"


def run(
    endpoint: str, modes: list[str], rows: int, arrow_batch: int = 5, blackhole: bool = False
) -> dict[str, Any]:
    """Run the query once per mode; with `blackhole` the rows go to a blackhole sink instead of
    being collected through py4j (which would be the bottleneck of a throughput run)."""
    from pyflink.table import DataTypes, EnvironmentSettings, TableEnvironment

    from openinfer.integrations.flink import (
        TritonConfigError,
        create_triton_model,
        ml_predict,
        register_triton_models,
    )

    started = time.monotonic()
    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    config = t_env.get_config()
    config.set("parallelism.default", "1")
    config.set("python.executable", sys.executable)
    config.set("python.fn-execution.arrow.batch.size", str(arrow_batch))
    config.set("table.exec.async-scalar.max-concurrent-operations", "16")
    data = ROWS if rows <= len(ROWS) else [
        (i, [float(i % 97), 0.5, 1.0], f"row-{i}") for i in range(1, rows + 1)
    ]  # fmt: skip
    source = t_env.from_elements(
        data,
        DataTypes.ROW(
            [
                DataTypes.FIELD("id", DataTypes.INT()),
                DataTypes.FIELD("features", DataTypes.ARRAY(DataTypes.FLOAT())),
                DataTypes.FIELD("name", DataTypes.STRING()),
            ]
        ),
    )
    t_env.create_temporary_view("src", source)
    create_triton_model(
        t_env, "scorer", ("features", "ARRAY<FLOAT>"), ("score", "FLOAT"),
        {"endpoint": endpoint, "model-name": "flink_scorer", **OPTIONS},
    )  # fmt: skip
    t_env.execute_sql(
        "CREATE TEMPORARY TABLE sink (id INT, name STRING, score FLOAT) "
        "WITH ('connector' = 'blackhole')"
    )
    result: dict[str, Any] = {"setup_s": time.monotonic() - started, "modes": {}}
    for mode in modes:
        register_triton_models(t_env, mode=mode)
        began = time.monotonic()
        if blackhole:
            t_env.execute_sql("INSERT INTO sink " + QUERY).wait()
            got = []
        else:
            with t_env.execute_sql(QUERY).collect() as rows_out:
                got = [[r[0], r[1], r[2]] for r in rows_out]
        result["modes"][mode] = {"rows": got, "seconds": time.monotonic() - began}
    if rows <= len(ROWS) and not blackhole:
        began = time.monotonic()
        table = ml_predict(t_env, t_env.from_path("src"), "scorer")
        with table.execute().collect() as rows_out:
            got = [[r[0], r[2], r[3]] for r in rows_out]
        result["ml_predict"] = {"rows": got, "columns": table.get_schema().get_field_names()}
        result["ml_predict"]["seconds"] = time.monotonic() - began
    # The Model API path checks options before the catalog holds the model.
    try:
        create_triton_model(
            t_env, "typo", ("x", "INT"), ("y", "INT"),
            {"endpoint": endpoint, "model-name": "x", "max-retry": "2"},
        )  # fmt: skip
    except TritonConfigError as error:
        result["descriptor_error"] = str(error)
    result["typo_registered"] = "typo" in t_env.list_temporary_models()
    # Other providers are left alone; a bad triton model is refused before anything runs.
    t_env.execute_sql(
        "CREATE TEMPORARY MODEL other INPUT (x STRING) OUTPUT (y STRING) "
        "WITH ('provider' = 'openai', 'endpoint' = 'http://x', 'model' = 'm')"
    )
    t_env.execute_sql(
        "CREATE TEMPORARY MODEL bad INPUT (d DECIMAL(10, 2)) OUTPUT (o STRING) "
        f"WITH ('provider' = 'triton', 'endpoint' = '{endpoint}', 'model-name' = 'x')"
    )
    try:
        register_triton_models(t_env)
    except TritonConfigError as error:
        result["bad_model_error"] = str(error)
    result["total_s"] = time.monotonic() - started
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--modes", default="async,pandas")
    parser.add_argument("--rows", type=int, default=len(ROWS))
    parser.add_argument("--arrow-batch-size", type=int, default=5)
    parser.add_argument("--blackhole", action="store_true", help="sink rows, do not collect")
    args = parser.parse_args()
    modes = args.modes.split(",")
    result = run(args.endpoint, modes, args.rows, args.arrow_batch_size, args.blackhole)
    with open(args.out, "w", encoding="utf-8") as out:
        json.dump(result, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

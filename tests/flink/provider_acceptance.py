"""Acceptance run of Flink's Java `triton` provider against openinfer and against Triton.

    .venv/bin/python -m tests.flink.provider_acceptance --jars DIR [--triton-python PY]
        [--write-golden] [--only NAME,...]

`DIR` holds the provider jar built from Flink's `flink-models/flink-model-triton` and its
runtime dependencies (OkHttp, Okio, Kotlin stdlib, Jackson); see docs/flink.md. Needs Java and
the PyFlink interpreter of `test_pyflink_e2e.flink_python`. For each server kind and each set of
server flags, it starts the server on free loopback ports behind `capture_proxy.CaptureProxy`,
runs every case of `provider_cases` through `provider_job` (one `ML_PREDICT` query per step),
and prints a pass table. `--write-golden` writes the requests captured against openinfer to
`tests/testdata/flink/` (which CI replays without Java or Flink).
"""

from __future__ import annotations

import argparse
import base64
import gzip
import json
import math
import os
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.flink.capture_proxy import CONTROL, CaptureProxy, Exchange
from tests.flink.models import write_models
from tests.flink.provider_cases import CASES, Case, Step, ddl, models_for, source
from tests.flink.test_pyflink_e2e import PYTHON
from tests.helpers import ROOT, Server, free_ports, http_status, stop_process

GOLDEN = ROOT / "tests" / "testdata" / "flink"


@contextmanager
def triton_server(python: Path, repo: Path, args: tuple[str, ...]) -> Iterator[int]:
    """Triton 2.51 from the bench's peer venv (`benchmarks/triton.py`), on free loopback ports."""
    from benchmarks import triton

    layout, why = triton.prepare(python)
    if layout is None:
        raise RuntimeError(why)
    http, grpc, metrics = free_ports(3)
    log = open(Path(tempfile.gettempdir()) / f"triton-flink-{http}.log", "wb")
    process = subprocess.Popen(
        [*triton.argv(layout, repo, http, grpc, metrics), *args],
        stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, **triton.env(layout)),
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 180
        while http_status(f"http://127.0.0.1:{http}/v2/health/ready") != 200:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"tritonserver did not start: see {log.name}")
            time.sleep(0.5)
        yield http
    finally:
        stop_process(process)
        log.close()


@contextmanager
def openinfer_server(repo: Path, args: tuple[str, ...]) -> Iterator[int]:
    with Server(repo, args=list(args)).start(wait_for="ready") as server:
        yield server.http_port


def run_job(cases: list[Case], proxy: CaptureProxy, jars: Path, work: Path) -> dict[str, Any]:
    base = f"http://127.0.0.1:{proxy.port}"
    spec = [
        {
            "name": case.name,
            "steps": [
                {
                    "label": f"{case.name}/{step.label}",
                    "ddl": ddl(case, step, base),
                    "source": source(case, step),
                    "column": case.column,
                    "config": case.config,
                }
                for step in case.steps
            ],
        }
        for case in cases
    ]
    (work / "cases.json").write_text(json.dumps(spec), encoding="utf-8")
    assert PYTHON is not None, "pyflink is not importable: run `make flink-venv`"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    command = [PYTHON, "-m", "tests.flink.provider_job", "--jars", str(jars), "--out",
               str(work / "out.json"), "--cases", str(work / "cases.json"),
               "--control", f"{base}{CONTROL}"]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"provider job failed:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}")
    return json.loads((work / "out.json").read_text(encoding="utf-8"))


def _f32(value: float) -> float:
    return struct.unpack("<f", struct.pack("<f", value))[0]


def _same(got: Any, want: Any) -> bool:
    if isinstance(want, list):
        return isinstance(got, list) and len(got) == len(want) and all(map(_same, got, want))
    if isinstance(want, float) and isinstance(got, float):
        return math.isclose(got, want, rel_tol=1e-6) or math.isclose(got, _f32(want))
    return bool(got == want and type(got) is type(want))


def judge(step: Step, outcome: dict[str, Any]) -> tuple[bool, str]:
    """Pass or fail, and what happened, in a few words."""
    if step.error is not None:
        if "error" not in outcome:
            return False, f"no error: rows {outcome['rows']}"
        said = outcome["error"]
        found = step.error in said and all(n.lower() in said.lower() for n in step.error_contains)
        return found, said[:300]
    if "error" in outcome:
        return False, outcome["error"][:300]
    rows = outcome["rows"]
    got = [row[-1] for row in rows] if step.many_rows else (rows[0][-1] if len(rows) == 1 else rows)
    return _same(got, step.expect), f"output {got!r}"


def golden_case(case: Case, exchanges: list[Exchange]) -> dict[str, Any] | None:
    """The fixture for one case from the requests captured against openinfer."""
    if any(s.error and not s.error.startswith("HTTP") for s in case.steps):
        return None  # failed on the client's side (a timeout): the server's answer proves nothing
    steps = []
    for step in case.steps:
        mine = [e for e in exchanges if e.label == f"{case.name}/{step.label}"]
        if len(mine) != 1:
            return None  # refused before any request, or retried: nothing to replay
        steps.append({"request": _request(mine[0]), "expect": _expect(step, mine[0])})
    first = case.steps[0]
    fixture: dict[str, Any] = {
        "description": case.description,
        "ddl": ddl(case, first, "http://{host}"),
        "models": models_for(case),
    }
    if case.server_args:
        fixture["server_args"] = list(case.server_args)
    fixture["steps"] = steps
    return fixture


def _request(exchange: Exchange) -> dict[str, Any]:
    headers = []
    for name, value in exchange.headers:
        if name.lower() == "host":
            value = "{host}"
        elif name.lower() == "content-length":
            value = "{content_length}"
        headers.append([name, value])
    gzipped = any(n.lower() == "content-encoding" and v == "gzip" for n, v in exchange.headers)
    body = gzip.decompress(exchange.body) if gzipped else exchange.body
    request: dict[str, Any] = {
        "method": exchange.method, "path": exchange.path, "headers": headers,
        "body": body.decode("utf-8"),
    }  # fmt: skip
    if gzipped:
        request["body_gzip_base64"] = base64.b64encode(exchange.body).decode("ascii")
    return request


def _expect(step: Step, exchange: Exchange) -> dict[str, Any]:
    payload = exchange.response
    if payload[:2] == b"\x1f\x8b":
        payload = gzip.decompress(payload)
    reply = json.loads(payload)
    if exchange.status >= 400:
        expect: dict[str, Any] = {"status": exchange.status}
        if step.error_contains:
            expect["error_contains"] = list(step.error_contains)
        return expect
    expect = {"status": exchange.status}
    if "model_version" in reply and reply["model_version"] not in ("", "1"):
        expect["model_version"] = reply["model_version"]
    expect["outputs"] = [
        {"name": o["name"], "shape": o["shape"], "data": o["data"]} for o in reply["outputs"]
    ]
    return expect


def run_kind(
    kind: str, cases: list[Case], jars: Path, triton_python: Path | None
) -> tuple[dict[str, Any], list[Exchange]]:
    outcomes: dict[str, Any] = {}
    exchanges: list[Exchange] = []
    for args in sorted({c.server_args for c in cases}):
        group = [c for c in cases if c.server_args == args]
        with tempfile.TemporaryDirectory() as tmp:
            repo = Path(tmp) / "repo"
            models: dict[str, Any] = {}
            for case in group:
                models.update(models_for(case))
            write_models(repo, models)
            if kind == "triton":
                assert triton_python is not None
                server = triton_server(triton_python, repo, args)
            else:
                server = openinfer_server(repo, args)
            with server as port, CaptureProxy(port) as proxy:
                outcomes.update(run_job(group, proxy, jars, Path(tmp)))
                exchanges += proxy.exchanges
    return outcomes, exchanges


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jars", type=Path, required=True)
    parser.add_argument("--triton-python", type=Path)
    parser.add_argument("--only", default="", help="comma-separated case names")
    parser.add_argument("--write-golden", action="store_true")
    parser.add_argument("--out", type=Path, help="write outcomes and captures as JSON")
    args = parser.parse_args()
    only = set(filter(None, args.only.split(",")))
    cases = [c for c in CASES if not only or c.name in only]
    kinds = ["openinfer"] + (["triton"] if args.triton_python else [])
    table: dict[str, dict[str, tuple[bool, str]]] = {}
    captured: dict[str, list[Exchange]] = {}
    for kind in kinds:
        outcomes, captured[kind] = run_kind(kind, cases, args.jars, args.triton_python)
        for case in cases:
            for step in case.steps:
                label = f"{case.name}/{step.label}"
                table.setdefault(label, {})[kind] = judge(step, outcomes[label])
    print("| case | " + " | ".join(kinds) + " |")
    print("|---|" + "---|" * len(kinds))
    for label, results in table.items():
        cells = [("pass" if ok else "FAIL: " + what.replace("|", "/")) for ok, what in
                 (results[k] for k in kinds)]  # fmt: skip
        print(f"| {label} | " + " | ".join(cells) + " |")
    for kind in kinds:
        passed = sum(results[kind][0] for results in table.values())
        print(f"{kind}: {passed}/{len(table)} pass", file=sys.stderr)
    if args.out:
        args.out.write_text(json.dumps({
            "table": table,
            "captures": {k: [e.__dict__ | {"body": e.body.decode("latin-1"),
                                           "response": e.response.decode("latin-1")}
                             for e in v] for k, v in captured.items()},
        }, indent=1), encoding="utf-8")  # fmt: skip
    if args.write_golden:
        for case in cases:
            fixture = golden_case(case, captured["openinfer"])
            if fixture is not None:
                path = GOLDEN / f"{case.name}.json"
                path.write_text(json.dumps(fixture, indent=2, ensure_ascii=False) + "\n",
                                encoding="utf-8")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

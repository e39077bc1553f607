"""Replays the requests of Flink's Java `triton` model provider against the real server.

Each `tests/testdata/flink/*.json` holds what `flink-model-triton` put on the wire for one
acceptance case, captured from the real provider in a PyFlink `ML_PREDICT` job (its exact body
bytes and headers, in the order sent), the models it needs and what the server must answer.
SQL-only users run that jar unchanged, so the server has to accept `/versions/latest`,
upper-cased tensor names, the sequence id in the top-level `id`, gzip bodies, tokens and custom
headers, and has to return only the requested output and 4xx errors that say what was wrong.
"""

from __future__ import annotations

import base64
import gzip
import http.client
import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.flink import provider_cases
from tests.flink.golden import CASES
from tests.flink.models import write_models
from tests.helpers import Server


def _group(case: dict[str, Any]) -> tuple[str, ...]:
    return tuple(case.get("server_args", ()))


def _models_for(args: tuple[str, ...]) -> dict[str, dict]:
    models: dict[str, dict] = {}
    for name, case in CASES.items():
        if _group(case) != args:
            continue
        for model_name, model in case["models"].items():
            if model_name in models and models[model_name] != model:
                raise AssertionError(f"{name}: model '{model_name}' differs between fixtures")
            models[model_name] = model
    return models


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[tuple[str, ...], Server]]:
    """One server per distinct `server_args`, each serving the models its fixtures name."""
    started: dict[tuple[str, ...], Server] = {}
    try:
        for args in sorted({_group(case) for case in CASES.values()}):
            repo = tmp_path_factory.mktemp("flink-golden")
            write_models(repo, _models_for(args))
            started[args] = Server(repo, args=list(args)).start(wait_for="ready")
        yield started
    finally:
        for server in started.values():
            server.stop()


def replay(port: int, request: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
    """Send the recorded request byte for byte: same header order, no extra headers."""
    if "body_gzip_base64" in request:
        body = base64.b64decode(request["body_gzip_base64"])
        assert gzip.decompress(body).decode("utf-8") == request["body"]
    else:
        body = request["body"].encode("utf-8")
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.putrequest(
            request["method"], request["path"], skip_host=True, skip_accept_encoding=True
        )
        for name, value in request["headers"]:
            value = value.replace("{host}", f"127.0.0.1:{port}")
            connection.putheader(name, value.replace("{content_length}", str(len(body))))
        connection.endheaders(body)
        response = connection.getresponse()
        payload = response.read()
        headers = {k.lower(): v for k, v in response.getheaders()}
    finally:
        connection.close()
    if headers.get("content-encoding", "").lower() == "gzip":  # OkHttp decompresses silently
        payload = gzip.decompress(payload)
    return response.status, headers, payload


def check(expect: dict[str, Any], status: int, payload: bytes, where: str) -> None:
    text = payload.decode("utf-8", errors="replace")
    if "status" in expect:
        assert status == expect["status"], f"{where}: HTTP {status}: {text}"
    else:
        low, high = expect["status_range"]
        assert low <= status <= high, f"{where}: HTTP {status} not in [{low}, {high}]: {text}"
    reply = json.loads(payload)
    if status >= 400:
        assert isinstance(reply.get("error"), str) and reply["error"], f"{where}: {text}"
        for needle in expect.get("error_contains", ()):
            assert needle.lower() in reply["error"].lower(), f"{where}: '{needle}' not in {text}"
        return
    if "model_version" in expect:
        assert reply["model_version"] == expect["model_version"], f"{where}: {text}"
    outputs = reply["outputs"]
    # The provider turns every returned output into its own row: only the requested one may come.
    assert len(outputs) == len(expect["outputs"]), f"{where}: extra outputs in {text}"
    for got, want in zip(outputs, expect["outputs"]):
        if want.get("name_exact"):
            assert got["name"] == want["name"], f"{where}: {text}"
        else:
            assert got["name"].lower() == want["name"].lower(), f"{where}: {text}"
        assert got["shape"] == want["shape"], f"{where}: {text}"
        assert got["data"] == want["data"], f"{where}: {text}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_provider_request(name: str, servers: dict[tuple[str, ...], Server]) -> None:
    case = CASES[name]
    server = servers[_group(case)]
    for number, step in enumerate(case["steps"], start=1):
        status, _, payload = replay(server.http_port, step["request"])
        check(step["expect"], status, payload, f"{name} step {number}")


def test_fixtures_are_what_the_provider_sends() -> None:
    """Guards the fixtures themselves: compact JSON, upper-cased names, OkHttp's headers."""
    for name, case in CASES.items():
        for step in case["steps"]:
            request = step["request"]
            body = json.loads(request["body"])
            compact = json.dumps(body, separators=(",", ":"), ensure_ascii=False)
            assert request["body"] == compact, name
            assert list(body)[-2:] == ["inputs", "outputs"], name
            assert len(body["inputs"]) == 1 and len(body["outputs"]) == 1, name
            for tensor in (body["inputs"][0], body["outputs"][0]):
                assert tensor["name"] == tensor["name"].upper(), name
            assert "sequence_id" not in body.get("parameters", {}), name
            assert "/versions/" in request["path"], name
            names = [h[0] for h in request["headers"]]
            assert names[-6:] == [
                "Content-Type", "Content-Length", "Host", "Connection", "Accept-Encoding",
                "User-Agent",
            ], name  # fmt: skip


def test_fixtures_are_the_acceptance_cases() -> None:
    """Every fixture was captured from a case of `provider_cases` as it stands now."""
    cases = {case.name: case for case in provider_cases.CASES}
    for name, fixture in CASES.items():
        case = cases[name]
        assert fixture["ddl"] == provider_cases.ddl(case, case.steps[0], "http://{host}"), name
        assert fixture["models"] == provider_cases.models_for(case), name
        assert len(fixture["steps"]) == len(case.steps), name

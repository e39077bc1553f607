"""The recording proxy that captures the Java provider's requests keeps them byte for byte.

The golden files are only as good as this proxy: it must keep header order and spelling and the
exact (gzip) body, relay the server's answer unchanged, and file requests under the label the
job set.
"""

from __future__ import annotations

import gzip
import http.client
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.flink.capture_proxy import CONTROL, CaptureProxy
from tests.flink.models import write_models
from tests.flink.provider_cases import MODELS
from tests.helpers import Server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    repo: Path = tmp_path_factory.mktemp("capture-proxy")
    write_models(repo, {"flink_int32": MODELS["flink_int32"]})
    started = Server(repo).start(wait_for="ready")
    yield started
    started.stop()


def test_requests_are_kept_as_sent_and_answers_relayed(server: Server) -> None:
    body = b'{"inputs":[{"name":"INPUT","datatype":"INT32","shape":[1],"data":[7]}]}'
    packed = gzip.compress(body)
    with CaptureProxy(server.http_port) as proxy:
        connection = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=30)
        connection.request("POST", CONTROL + "case/step")
        assert connection.getresponse().read() == b""
        connection.putrequest(
            "POST", "/v2/models/flink_int32/versions/1/infer", skip_host=True,
            skip_accept_encoding=True,
        )  # fmt: skip
        sent = [
            ("Content-Encoding", "gzip"), ("x-Trace-ID", "abc"),
            ("Content-Type", "application/json; charset=utf-8"),
            ("Content-Length", str(len(packed))), ("Host", "example:1"),
        ]  # fmt: skip
        for name, value in sent:
            connection.putheader(name, value)
        connection.endheaders(packed)
        response = connection.getresponse()
        answer = json.loads(response.read())
        connection.close()
        (exchange,) = proxy.exchanges
    assert response.status == 200 and answer["outputs"][0]["data"] == [7]
    assert exchange.label == "case/step"
    assert (exchange.method, exchange.path) == ("POST", "/v2/models/flink_int32/versions/1/infer")
    assert exchange.headers == sent
    assert exchange.body == packed
    assert exchange.status == 200 and json.loads(exchange.response) == answer

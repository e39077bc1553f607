"""The model client against the real server: rows, batches, retries, fallbacks, breaker."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from openinfer.integrations.flink import (
    TritonCircuitBreakerOpenError,
    TritonClientError,
    TritonNetworkError,
    TritonServerError,
    build_spec,
)
from openinfer.integrations.flink.client import TritonModelClient
from openinfer.integrations.flink.spec import TritonModelSpec
from tests.flink.models import write_models
from tests.helpers import Server, free_port

MODELS = {
    "double_fp32": {
        "config": """
            name: "double_fp32"
            backend: "python"
            max_batch_size: 8
            dynamic_batching { }
            input [ { name: "features" data_type: TYPE_FP32 dims: [ -1 ] } ]
            output [ { name: "scaled" data_type: TYPE_FP32 dims: [ -1 ] } ]
        """,
        "model_py": "double",
    },
    "double_int": {
        "config": """
            name: "double_int"
            backend: "python"
            max_batch_size: 0
            input [ { name: "x" data_type: TYPE_INT32 dims: [ -1 ] } ]
            output [ { name: "y" data_type: TYPE_INT32 dims: [ -1 ] } ]
        """,
        "model_py": "double",
    },
    "flaky": {
        "config": """
            name: "flaky"
            backend: "python"
            max_batch_size: 0
            input [ { name: "key" data_type: TYPE_STRING dims: [ 1 ] } ]
            output [ { name: "value" data_type: TYPE_STRING dims: [ 1 ] } ]
        """,
        "model_py": "flaky",
    },
    "versioned": {
        "config": """
            name: "versioned"
            backend: "python"
            max_batch_size: 0
            version_policy: { all { } }
            input [ { name: "x" data_type: TYPE_INT32 dims: [ 1 ] } ]
            output [ { name: "y" data_type: TYPE_INT32 dims: [ 1 ] } ]
        """,
        "model_py": "versioned",
        "versions": [1, 2],
    },
}
TOKEN_ARGS = ["--http-restricted-api=inference:Authorization=Bearer s3cret"]


def _serve(repo: Path, args: list[str] | None = None) -> Server:
    write_models(repo, MODELS)
    return Server(repo, args=args or []).start(wait_for="ready")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    started = _serve(tmp_path_factory.mktemp("flink-client"))
    yield started
    started.stop()


@pytest.fixture(scope="module")
def token_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    started = _serve(tmp_path_factory.mktemp("flink-client-token"), TOKEN_ARGS)
    yield started
    started.stop()


COLUMNS = {
    "double_fp32": (("features", "ARRAY<FLOAT>"), ("scaled", "ARRAY<FLOAT>")),
    "double_int": (("x", "INT"), ("y", "INT")),
    "flaky": (("key", "STRING"), ("value", "STRING")),
    "versioned": (("x", "INT"), ("y", "INT")),
}


def model(endpoint: str, name: str, like: str | None = None, **options: str) -> TritonModelClient:
    """A client for model `name`, with the columns of model `like` (default: its own)."""
    column_in, column_out = COLUMNS[like or name]
    raw = {"provider": "triton", "endpoint": endpoint, "model-name": name}
    raw.update({k.replace("_", "-"): v for k, v in options.items()})
    spec: TritonModelSpec = build_spec(name, [column_in], [column_out], raw)
    return TritonModelClient(spec)


def url(server: Server) -> str:
    return f"http://127.0.0.1:{server.http_port}"


async def test_model_version_defaults_to_latest_the_newest_ready(server: Server) -> None:
    """As in the provider, no `model-version` means `latest`; it reaches Triton and openinfer
    as the unversioned URL, answered by the newest ready version (here 2: 42 + 2000)."""
    assert model(url(server), "versioned").spec.options.model_version == "latest"
    assert await model(url(server), "versioned").predict(42) == 2042
    assert await model(url(server), "versioned", model_version="latest").predict(42) == 2042
    assert await model(url(server), "versioned", model_version="1").predict(42) == 1042


async def test_one_row_per_request(server: Server) -> None:
    client = model(url(server), "double_fp32")
    assert await client.predict([1.0, 2.5]) == [2.0, 5.0]
    assert await client.predict([]) is None  # the provider's answer to an empty output
    scalar = model(url(server), "double_int", model_version="1", priority="5")
    assert await scalar.predict(21) == 42
    client.close()


async def test_gzip_token_and_custom_headers(server: Server, token_server: Server) -> None:
    plain = model(url(server), "double_int", compression="gzip", custom_headers="X-Trace-Id:t1")
    assert await plain.predict(4) == 8
    with_token = model(url(token_server), "double_int", auth_token="s3cret", compression="gzip")
    assert await with_token.predict(5) == 10
    without = model(url(token_server), "double_int", max_retries="3", retry_initial_backoff="5s")
    started = time.monotonic()
    with pytest.raises(TritonClientError) as info:
        await without.predict(5)
    assert info.value.status == 403 and "auth-token" in str(info.value)
    assert time.monotonic() - started < 2, "a 4xx must not be retried"


async def test_batches_are_stacked_and_split_back(server: Server) -> None:
    client = model(url(server), "double_fp32")
    rows = [[float(i), 1.0] for i in range(20)]  # more rows than max_batch_size 8
    assert await client.predict_batch(rows) == [[2.0 * i, 2.0] for i in range(20)]
    assert client._max_batch_size == 8


async def test_batches_with_nulls_and_ragged_rows_answer_row_by_row(server: Server) -> None:
    client = model(url(server), "double_fp32", default_value="[-1.0]")
    rows = [[1.0], None, [1.0, 2.0], [3.0], [None, 1.0], [4.0, 5.0]]
    assert await client.predict_batch(rows) == [
        [2.0], [-1.0], [2.0, 4.0], [6.0], [-1.0], [8.0, 10.0],
    ]  # fmt: skip


async def test_scalar_batches_with_an_explicit_batch_size(server: Server) -> None:
    client = model(url(server), "double_int", batch_size="3")
    assert await client.predict_batch(list(range(7))) == [2 * i for i in range(7)]


async def test_5xx_is_retried_until_it_succeeds(server: Server) -> None:
    client = model(url(server), "flaky", max_retries="2", retry_initial_backoff="10ms")
    assert await client.predict("retry-a:2") == "RETRY-A:2"
    assert await client.predict("busy-a:1") == "BUSY-A:1"  # 503


async def test_exhausted_retries_fail_with_the_servers_message(server: Server) -> None:
    client = model(url(server), "flaky", max_retries="1", retry_initial_backoff="10ms")
    with pytest.raises(TritonServerError) as info:
        await client.predict("retry-b:5")
    assert info.value.status == 500 and "flaky failure for retry-b:5" in str(info.value)
    fallback = model(url(server), "flaky", max_retries="1", default_value="FAILED")
    assert await fallback.predict("retry-c:5") == "FAILED"


async def test_4xx_fails_fast_or_falls_back(server: Server) -> None:
    client = model(url(server), "nope", "flaky", max_retries="3", retry_initial_backoff="5s")
    started = time.monotonic()
    with pytest.raises(TritonClientError) as info:
        await client.predict("x")
    assert info.value.status in (400, 404) and time.monotonic() - started < 2
    wrong_shape = model(url(server), "double_fp32", flatten_batch_dim="true", default_value="null")
    assert await wrong_shape.predict([1.0, 2.0]) is None


async def test_network_errors_are_retried_then_fail_or_fall_back() -> None:
    endpoint = f"http://127.0.0.1:{free_port()}"
    client = model(endpoint, "flaky", max_retries="2", retry_initial_backoff="10ms")
    with pytest.raises(TritonNetworkError, match="Failed to connect"):
        await client.predict("x")
    fallback = model(endpoint, "flaky", default_value="offline")
    assert await fallback.predict("x") == "offline"


async def test_timeouts_are_network_errors(server: Server) -> None:
    client = model(url(server), "flaky", timeout="300ms")
    with pytest.raises(TritonNetworkError, match="timed out"):
        await client.predict("slow:2")


async def test_circuit_breaker_opens_and_fails_fast() -> None:
    endpoint = f"http://127.0.0.1:{free_port()}"
    client = model(endpoint, "flaky", circuit_breaker_enabled="true", circuit_breaker_timeout="1h")
    for _ in range(10):
        with pytest.raises(TritonNetworkError):
            await client.predict("x")
    with pytest.raises(TritonCircuitBreakerOpenError, match="OPEN"):
        await client.predict("x")
    fallback = model(endpoint, "flaky", circuit_breaker_enabled="true", default_value="open")
    fallback.breaker = client.breaker
    assert await fallback.predict("x") == "open"


def test_health_checker(server: Server) -> None:
    healthy = model(url(server), "flaky", health_check_enabled="true")
    assert healthy.health is not None and healthy.health.check_now()
    healthy.open()
    healthy.close()
    down = model(f"http://127.0.0.1:{free_port()}/v2", "flaky", health_check_enabled="true")
    assert down.health is not None and not down.health.check_now()

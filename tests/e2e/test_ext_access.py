"""Restricted API groups over HTTP and gRPC, and Prometheus metrics, against the real server."""

from __future__ import annotations

import queue
import re
import urllib.request

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from openinfer._proto import health_pb2
from tests.e2e import ext_models
from tests.helpers import Server

#: group -> (header key, value); HTTP health stays open so the test harness can poll readiness.
GROUPS = {
    "health": ("infer-key", "i-value"),
    "metadata": ("infer-key", "i-value"),
    "inference": ("infer-key", "i-value"),
    "shared-memory": ("admin-key", "a-value"),
    "model-config": ("admin-key", "a-value"),
    "model-repository": ("admin-key", "a-value"),
    "statistics": ("ops-key", "o-value"),
    "trace": ("ops-key", "o-value"),
    "logging": ("ops-key", "o-value"),
}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = tmp_path_factory.mktemp("access_repo")
    ext_models.add_sub(repo)
    args = [
        "--http-restricted-api=metadata,inference:infer-key=i-value",
        "--grpc-restricted-protocol=health,metadata,inference:infer-key=i-value",
        "--metrics-config=summary_latencies=true",
        "--metrics-config=histogram_latencies=true",
    ]
    for flag in ("--http-restricted-api", "--grpc-restricted-protocol"):
        args += [
            f"{flag}=shared-memory,model-config,model-repository:admin-key=a-value",
            f"{flag}=statistics,trace,logging:ops-key=o-value",
        ]
    srv = Server(repo, args).start(wait_for="ready")
    yield srv
    assert srv.stop() == 0, srv.log()


def _add_sub_inputs(module):
    inputs = [module.InferInput("INPUT0", [4], "FP32"), module.InferInput("INPUT1", [4], "FP32")]
    inputs[0].set_data_from_numpy(np.arange(4, dtype=np.float32))
    inputs[1].set_data_from_numpy(np.ones(4, dtype=np.float32))
    return inputs


def _calls(client, module, headers):
    """One representative call per group."""
    return {
        "health": lambda: client.is_model_ready("add_sub", headers=headers),
        "metadata": lambda: client.get_model_metadata("add_sub", headers=headers),
        "inference": lambda: client.infer("add_sub", _add_sub_inputs(module), headers=headers),
        "shared-memory": lambda: client.get_system_shared_memory_status(headers=headers),
        "model-config": lambda: client.get_model_config("add_sub", headers=headers),
        "model-repository": lambda: client.get_model_repository_index(headers=headers),
        "statistics": lambda: client.get_inference_statistics("add_sub", headers=headers),
        "trace": lambda: client.get_trace_settings(headers=headers),
        "logging": lambda: client.get_log_settings(headers=headers),
    }


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_http_restricted_groups(server, group):
    client = httpclient.InferenceServerClient(server.http_url)
    key, value = GROUPS[group]
    if group == "health":  # not restricted over HTTP in this server: open to all
        assert _calls(client, httpclient, None)["health"]()
        return
    for headers in (None, {key: "wrong"}, {"unrelated": value}):
        with pytest.raises(InferenceServerException) as info:
            _calls(client, httpclient, headers)[group]()
        assert (info.value.status(), info.value.message()) == (
            "403",
            f"This API is restricted, expecting header '{key}'",
        )
    assert (
        _calls(client, httpclient, {key.upper(): value})[group]() is not None
    )  # header names fold case


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_grpc_restricted_groups(server, group):
    client = grpcclient.InferenceServerClient(server.grpc_url)
    key, value = GROUPS[group]
    expected = f"This protocol is restricted, expecting header 'triton-grpc-protocol-{key}'"
    for headers in (None, {f"triton-grpc-protocol-{key}": "wrong"}, {key: value}):
        with pytest.raises(InferenceServerException) as info:
            _calls(client, grpcclient, headers)[group]()
        assert (info.value.status(), info.value.message()) == ("StatusCode.UNAVAILABLE", expected)
    assert _calls(client, grpcclient, {f"triton-grpc-protocol-{key}": value})[group]() is not None


def test_grpc_stream_and_health_check_are_restricted(server):
    client = grpcclient.InferenceServerClient(server.grpc_url)
    results: queue.Queue = queue.Queue()
    client.start_stream(callback=lambda result, error: results.put((result, error)))
    try:  # the check runs when the stream opens, so the stream may already be closed here
        client.async_stream_infer("add_sub", _add_sub_inputs(grpcclient))
    except InferenceServerException:
        pass
    _, error = results.get(timeout=30)
    assert "This protocol is restricted, expecting header 'triton-grpc-protocol-infer-key'" in str(
        error
    )
    client.stop_stream()
    client.start_stream(
        callback=lambda result, error: results.put((result, error)),
        headers={"triton-grpc-protocol-infer-key": "i-value"},
    )
    client.async_stream_infer("add_sub", _add_sub_inputs(grpcclient))
    result, error = results.get(timeout=30)
    assert error is None and result.as_numpy("OUTPUT0").tolist() == [1, 2, 3, 4]
    client.stop_stream()

    with grpc.insecure_channel(server.grpc_url) as channel:
        check = channel.unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
            response_deserializer=health_pb2.HealthCheckResponse.FromString,
        )
        with pytest.raises(grpc.RpcError) as info:
            check(health_pb2.HealthCheckRequest())
        assert info.value.code() == grpc.StatusCode.UNAVAILABLE
        reply = check(
            health_pb2.HealthCheckRequest(),
            metadata=[("triton-grpc-protocol-infer-key", "i-value")],
        )
        assert reply.status == health_pb2.HealthCheckResponse.SERVING


def _metrics(server) -> str:
    return urllib.request.urlopen(server.metrics_url, timeout=10).read().decode()


def _value(text: str, name: str, **labels: str) -> float:
    want = ",".join(
        f'{k}="{v}"' for k, v in sorted({"model": "add_sub", "version": "1", **labels}.items())
    )
    match = re.search(rf"^{re.escape(name)}{{{re.escape(want)}}} (\S+)$", text, re.MULTILINE)
    assert match, f"{name}{{{want}}} missing"
    return float(match.group(1))


def test_prometheus_metrics(server):
    before = _metrics(server)
    base = _value(before, "nv_inference_request_success")
    client = httpclient.InferenceServerClient(server.http_url)
    for _ in range(3):
        client.infer("add_sub", _add_sub_inputs(httpclient), headers={"infer-key": "i-value"})
    text = _metrics(server)  # the metrics port is never restricted
    assert "# TYPE nv_inference_request_success counter" in text
    assert _value(text, "nv_inference_request_success") == base + 3
    assert (
        _value(text, "nv_inference_count") == base + 3
        and _value(text, "nv_inference_exec_count") == base + 3
    )
    for reason in ("REJECTED", "CANCELED", "BACKEND", "OTHER"):
        assert _value(text, "nv_inference_request_failure", reason=reason) == 0
    assert _value(text, "nv_inference_pending_request_count") == 0
    for name in ("request", "queue", "compute_input", "compute_infer", "compute_output"):
        assert _value(text, f"nv_inference_{name}_duration_us") >= _value(
            before, f"nv_inference_{name}_duration_us"
        )
    assert _value(text, "nv_inference_request_duration_us") > 0
    assert _value(text, "nv_inference_request_summary_us_count") == base + 3
    assert _value(text, "nv_inference_request_summary_us", quantile="0.5") > 0
    assert _value(text, "nv_inference_first_response_histogram_ms_count") == base + 3
    assert _value(text, "nv_inference_first_response_histogram_ms_bucket", le="+Inf") == base + 3
    assert "_total" not in text.replace("_total_bytes", "")
    assert re.search(r"^nv_cpu_memory_total_bytes \d+$", text, re.MULTILINE)

    post = urllib.request.Request(server.metrics_url, data=b"", method="POST")
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(post, timeout=10)
    assert info.value.code == 405
    other = server.metrics_url.replace("/metrics", "/elsewhere")
    with urllib.request.urlopen(other, timeout=10) as reply:
        assert reply.status == 200 and reply.read() == b""

"""URLs, request and response JSON, headers and error classification (no server needed)."""

from __future__ import annotations

import gzip
import json
import re
from typing import Any

import pytest

from openinfer.integrations.flink import (
    TritonClientError,
    TritonSchemaError,
    TritonServerError,
    build_spec,
)
from openinfer.integrations.flink.errors import is_retryable
from openinfer.integrations.flink.spec import TritonModelSpec
from openinfer.integrations.flink.wire import (
    MISSING,
    batch_request,
    config_url,
    encode_body,
    error_for_status,
    health_urls,
    infer_url,
    models_base,
    parse_batch_response,
    parse_row_response,
    request_headers,
    row_request,
    sanitize_url,
)
from tests.flink.golden import CASES


def spec(input_type: str = "INT", output_type: str = "INT", **options: str) -> TritonModelSpec:
    raw = {"provider": "triton", "endpoint": "http://triton:8000", "model-name": "clf"}
    raw.update({k.replace("_", "-"): v for k, v in options.items()})
    return build_spec("clf", [("input", input_type)], [("output", output_type)], raw)


@pytest.mark.parametrize(
    "endpoint", ["http://h:8000", "http://h:8000/", "http://h:8000/v2", "http://h:8000/v2/models/"]
)
def test_endpoint_forms(endpoint: str) -> None:
    assert models_base(endpoint) == "http://h:8000/v2/models"


def test_urls() -> None:
    assert infer_url(spec()) == "http://triton:8000/v2/models/clf/infer"
    assert infer_url(spec(model_version="latest")) == "http://triton:8000/v2/models/clf/infer"
    assert infer_url(spec(model_version="3")) == "http://triton:8000/v2/models/clf/versions/3/infer"
    assert config_url(spec(model_version="3")).endswith("/clf/versions/3/config")
    assert health_urls("http://h:1/v2/models") == (
        "http://h:1/v2/health/live",
        "http://h:1/v2/health/ready",
    )
    assert sanitize_url("http://u:p@h:1/v2") == "http://h:1/v2"


def test_row_request_body() -> None:
    body = row_request(spec("ARRAY<FLOAT>", "FLOAT", priority="9"), [0.5, 1.0])
    assert body == {
        "parameters": {"priority": 9},
        "inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 2], "data": [0.5, 1.0]}],
        "outputs": [{"name": "output"}],
    }


def test_sequence_ids_go_to_id_and_to_the_standard_parameter() -> None:
    s = spec(sequence_id="1001", sequence_start="true", sequence_end="true")
    body = row_request(s, 1, "1001")
    assert body["id"] == "1001"
    assert body["parameters"] == {"sequence_id": 1001, "sequence_start": True, "sequence_end": True}
    assert row_request(s, 1, "user-7")["parameters"]["sequence_id"] == "user-7"


def test_batch_request_stacks_rows() -> None:
    scalar = batch_request(spec("STRING", "STRING"), ["a", "b", "c"])
    assert scalar["inputs"][0] == {
        "name": "input", "datatype": "BYTES", "shape": [3], "data": ["a", "b", "c"],
    }  # fmt: skip
    array = batch_request(spec("ARRAY<INT>", "INT"), [[1, 2], [3, 4]])
    assert array["inputs"][0]["shape"] == [2, 2] and array["inputs"][0]["data"] == [1, 2, 3, 4]


def test_headers_and_gzip() -> None:
    s = spec(compression="gzip", auth_token="tok", custom_headers="X-A:1,X-B:2")
    headers = request_headers(s)
    assert ("Content-Encoding", "gzip") in headers and ("Authorization", "Bearer tok") in headers
    assert headers.index(("X-A", "1")) < headers.index(("X-B", "2"))
    body = encode_body(s, {"x": "é"})
    assert json.loads(gzip.decompress(body)) == {"x": "é"}
    assert encode_body(spec(), {"x": "é"}) == '{"x":"é"}'.encode()


def test_row_response_picks_the_requested_output() -> None:
    s = spec("INT", "ARRAY<INT>")
    body = json.dumps(
        {"outputs": [{"name": "other", "data": [9]}, {"name": "OUTPUT", "data": [1, 2]}]}
    ).encode()
    assert parse_row_response(s, body) == [1, 2]
    only_other = json.dumps({"outputs": [{"name": "x", "shape": [1], "data": [9]}]}).encode()
    assert parse_row_response(s, only_other) == [9]
    assert parse_row_response(s, b'{"outputs": [{"name": "output", "data": []}]}') is MISSING
    assert parse_row_response(s, b"{}") is MISSING
    with pytest.raises(TritonClientError, match="Failed to parse Triton response JSON"):
        parse_row_response(s, b"<html>")


def test_batch_response_is_split_by_rows() -> None:
    s = spec("ARRAY<FLOAT>", "ARRAY<FLOAT>")
    body = json.dumps({"outputs": [{"name": "output", "shape": [2, 2], "data": [1, 2, 3, 4]}]})
    assert parse_batch_response(s, body.encode(), 2) == [[1.0, 2.0], [3.0, 4.0]]
    scalar = spec("ARRAY<FLOAT>", "FLOAT")
    body = json.dumps({"outputs": [{"name": "output", "shape": [3, 1], "data": [1, 2, 3]}]})
    assert parse_batch_response(scalar, body.encode(), 3) == [1.0, 2.0, 3.0]
    with pytest.raises(TritonClientError, match="leading batch dimension of 4"):
        parse_batch_response(scalar, body.encode(), 4)


@pytest.mark.parametrize(
    ("status", "body", "kind", "retryable"),
    [
        (400, b'{"error":"unexpected shape for input"}', TritonSchemaError, False),
        (400, b'{"error":"bad dimension"}', TritonSchemaError, False),
        (400, b'{"error":"data-type mismatch"}', TritonClientError, False),
        (401, b"", TritonClientError, False),
        (404, b'{"error":"unknown model"}', TritonClientError, False),
        (500, b'{"error":"boom"}', TritonServerError, True),
        (503, b"overloaded", TritonServerError, True),
        (302, b"", TritonClientError, True),
    ],
)
def test_error_classification(status: int, body: bytes, kind: type, retryable: bool) -> None:
    error = error_for_status(spec(), status, body)
    assert type(error) is kind and error.status == status
    assert is_retryable(error) is retryable
    assert f"HTTP {status}" in str(error) and "Model: clf" in str(error)


def test_error_message_carries_the_server_message_and_hints() -> None:
    text = str(error_for_status(spec(), 400, b'{"error":"unexpected shape for input"}'))
    assert "unexpected shape for input" in text and "flatten-batch-dim=true" in text
    assert "Verify model-name: clf" in str(error_for_status(spec(), 404, b"{}"))


def _ddl_spec(ddl: str) -> tuple[TritonModelSpec, str, str]:
    match = re.search(r"INPUT \(`(\w+)` ([^)]+?)\) OUTPUT \(`(\w+)` ([^)]+?)\) WITH \((.*)\)$", ddl)
    assert match, ddl
    options = dict(re.findall(r"'([^']*)' = '([^']*)'", match.group(5)))
    options["endpoint"] = options["endpoint"].replace("{host}", "127.0.0.1:1")
    options["tensor-name-case"] = "upper"
    built = build_spec(
        "m", [(match.group(1), match.group(2))], [(match.group(3), match.group(4))], options
    )
    return built, match.group(2), options.get("model-version", "latest")


def _value(tensor: dict[str, Any], is_array: bool) -> Any:
    if not is_array:
        return tensor["data"][0]
    return None if 0 in tensor["shape"] else tensor["data"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_python_requests_match_the_java_providers(name: str) -> None:
    """With `tensor-name-case='upper'` our body is the provider's, plus the standard
    `parameters.sequence_id`; the URL only drops `/versions/latest` (Triton rejects it)."""
    case = CASES[name]
    built, _, version = _ddl_spec(case["ddl"])
    for step in case["steps"][:1]:
        java = json.loads(step["request"]["body"])
        value = _value(java["inputs"][0], built.input_type.is_array)
        ours = row_request(built, value, built.options.sequence_id)
        ours.get("parameters", {}).pop("sequence_id", None)
        if ours.get("parameters") == {}:
            del ours["parameters"]
        assert ours == java
        java_path = step["request"]["path"]
        assert infer_url(built).endswith(java_path.replace("/versions/latest", ""))
        java_headers = {k.lower(): v for k, v in step["request"]["headers"]}
        for key, value in request_headers(built):
            if key.lower() in ("content-encoding", "authorization", "x-trace-id", "x-api-key"):
                assert java_headers[key.lower()] == value
        assert version in java_path

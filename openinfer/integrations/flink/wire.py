"""KServe v2 JSON requests and responses for a `TritonModelSpec`: URLs, bodies, headers, parsing.

Pure functions, no I/O. The row request is the provider's format (one tensor, shape `[1]`,
`[1, N]` or `[N]`, the sequence id in the top-level `id`) plus the standard
`parameters.sequence_id`, so it works on Triton as well as on openinfer. A batch request stacks
rows along a leading dimension: `[B]` or `[B, N]`.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from openinfer.integrations.flink.errors import (
    TritonClientError,
    TritonError,
    TritonSchemaError,
    TritonServerError,
)
from openinfer.integrations.flink.spec import TritonModelSpec
from openinfer.integrations.flink.types import decode_value, encode_value, row_shape

USER_AGENT = "openinfer-flink/0.1"


def models_base(endpoint: str) -> str:
    """`http://h:8000`, `.../v2` and `.../v2/models` all become `http://h:8000/v2/models`."""
    base = endpoint.rstrip("/")
    if base.endswith("/v2/models"):
        return base
    return base + ("/models" if base.endswith("/v2") else "/v2/models")


def infer_url(spec: TritonModelSpec) -> str:
    """The inference URL; for `latest` it has no version, so the server picks its newest."""
    return _model_url(spec) + "/infer"


def config_url(spec: TritonModelSpec) -> str:
    return _model_url(spec) + "/config"


def _model_url(spec: TritonModelSpec) -> str:
    options = spec.options
    url = models_base(options.endpoint) + "/" + quote(options.model_name, safe="")
    if options.model_version != "latest":
        url += f"/versions/{options.model_version}"
    return url


def health_urls(endpoint: str) -> tuple[str, str]:
    """Liveness then readiness URLs, at the server root whatever path the endpoint has."""
    base = endpoint.rstrip("/")
    if "/v2" in base:
        base = base[: base.index("/v2")]
    return base + "/v2/health/live", base + "/v2/health/ready"


def sanitize_url(url: str) -> str:
    """The URL without `user:password@`, for messages and logs."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def request_headers(spec: TritonModelSpec) -> list[tuple[str, str]]:
    """Headers of every inference request: content type, compression, token, custom headers."""
    options = spec.options
    headers = [("Content-Type", "application/json; charset=utf-8"), ("Accept-Encoding", "gzip")]
    if options.compression == "gzip":
        headers.append(("Content-Encoding", "gzip"))
    if options.auth_token is not None:
        headers.append(("Authorization", "Bearer " + options.auth_token))
    headers.extend(options.custom_headers)
    headers.append(("User-Agent", USER_AGENT))
    return headers


def encode_body(spec: TritonModelSpec, payload: dict[str, Any]) -> bytes:
    """Compact UTF-8 JSON, gzip-compressed when `compression` is `gzip`."""
    body = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    if spec.options.compression == "gzip":
        return gzip.compress(body, compresslevel=6, mtime=0)
    return body


def _envelope(spec: TritonModelSpec, sequence_id: str | None) -> dict[str, Any]:
    options = spec.options
    payload: dict[str, Any] = {}
    parameters: dict[str, Any] = {}
    if sequence_id is not None:
        payload["id"] = sequence_id
        parameters["sequence_id"] = int(sequence_id) if _is_uint64(sequence_id) else sequence_id
    if options.priority is not None:
        parameters["priority"] = options.priority
    if options.sequence_start:
        parameters["sequence_start"] = True
    if options.sequence_end:
        parameters["sequence_end"] = True
    if parameters:
        payload["parameters"] = parameters
    return payload


def _is_uint64(text: str) -> bool:
    return bool(re.fullmatch(r"[1-9]\d*", text)) and int(text) < 2**64


def row_request(
    spec: TritonModelSpec, value: Any, sequence_id: str | None = None
) -> dict[str, Any]:
    """The request for one row (the provider's shape and data rules)."""
    payload = _envelope(spec, sequence_id)
    payload["inputs"] = [
        {
            "name": spec.input_tensor,
            "datatype": spec.input_type.datatype,
            "shape": row_shape(value, spec.input_type, spec.options.flatten_batch_dim),
            "data": encode_value(value, spec.input_type),
        }
    ]
    payload["outputs"] = [{"name": spec.output_tensor}]
    return payload


def batch_request(
    spec: TritonModelSpec, values: Sequence[Any], sequence_id: str | None = None
) -> dict[str, Any]:
    """One request for B rows: shape `[B]` for scalars, `[B, N]` for arrays of equal length N.

    Callers send rows that are NULL, hold NULL elements or differ in length on their own.
    """
    payload = _envelope(spec, sequence_id)
    ftype = spec.input_type
    if ftype.is_array:
        width = len(values[0]) if values else 0
        shape = [len(values), width]
        data = [x for v in values for x in encode_value(v, ftype)]
    else:
        shape = [len(values)]
        data = [encode_value(v, ftype)[0] for v in values]
    payload["inputs"] = [
        {"name": spec.input_tensor, "datatype": ftype.datatype, "shape": shape, "data": data}
    ]
    payload["outputs"] = [{"name": spec.output_tensor}]
    return payload


def parse_row_response(spec: TritonModelSpec, body: bytes) -> Any:
    """The output column's value; `MISSING` when the response carries no output data."""
    output = _pick_output(spec, _load(body))
    if output is None:
        return MISSING
    return decode_value(output["data"], spec.output_type)


def parse_batch_response(spec: TritonModelSpec, body: bytes, rows: int) -> list[Any]:
    """One value per row from an output of shape `[B, ...]`; `MISSING` for every row when the
    response has no output data."""
    output = _pick_output(spec, _load(body))
    if output is None:
        return [MISSING] * rows
    data = output["data"]
    shape = output.get("shape")
    if not isinstance(shape, list) or not shape or shape[0] != rows or len(data) % rows:
        raise TritonClientError(
            f"output '{output.get('name')}' has shape {shape} and {len(data)} values; expected a "
            f"leading batch dimension of {rows}"
        )
    width = len(data) // rows
    return [decode_value(data[i * width : (i + 1) * width], spec.output_type) for i in range(rows)]


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


#: Marker for "the server returned no output data" (the provider then emits its empty value).
MISSING: Any = _Missing()


def _load(body: bytes) -> dict[str, Any]:
    try:
        parsed = json.loads(body)
    except ValueError as exc:
        raise TritonClientError(
            f"Failed to parse Triton response JSON: {exc}. This may indicate an incompatible "
            "response format."
        ) from exc
    if not isinstance(parsed, dict):
        raise TritonClientError("Failed to parse Triton response JSON: not an object")
    return parsed


def _pick_output(spec: TritonModelSpec, response: dict[str, Any]) -> dict[str, Any] | None:
    """The requested output, matched by name (exactly, then ignoring case); failing that, the
    first output with data, which is what the provider reads when names differ."""
    outputs = [
        o
        for o in response.get("outputs") or []
        if isinstance(o, dict) and isinstance(o.get("data"), list) and o["data"]
    ]
    wanted = spec.output_tensor
    for match in (lambda n: n == wanted, lambda n: str(n).lower() == wanted.lower()):
        for output in outputs:
            if match(output.get("name")):
                return output
    return outputs[0] if outputs else None


def error_for_status(spec: TritonModelSpec, status: int, body: bytes) -> TritonError:
    """The provider's classification and message for a non-2xx response."""
    server_message = _server_message(body)
    o = spec.options
    lines = [
        f"Triton inference failed with HTTP {status}: {server_message}",
        "",
        "=== Request Configuration ===",
        f"  Model: {o.model_name} (version: {o.model_version})",
        f"  Endpoint: {sanitize_url(o.endpoint)}",
        f"  Input column: {spec.input_column} (tensor '{spec.input_tensor}')",
        f"  Input Flink type: {spec.input_type.text}",
        f"  Input Triton dtype: {spec.input_type.datatype}",
    ]
    lowered = server_message.lower()
    if 400 <= status < 500:
        lines += ["", "=== Troubleshooting (Client Error) ==="]
        if status == 400:
            lines += [
                "  - Verify input shape matches model's config.pbtxt",
                "  - For scalar: use INT/FLOAT/DOUBLE/STRING",
                "  - For 1-D tensor: use ARRAY<type>",
                "  - Try flatten-batch-dim=true if model expects [N] but gets [1,N]",
            ]
        elif status == 404:
            lines += [
                f"  - Verify model-name: {o.model_name}",
                f"  - Verify model-version: {o.model_version}",
            ]
        elif status in (401, 403):
            lines += ["  - Check auth-token / custom-headers configuration"]
        message = "\n".join(lines)
        if status == 400 and ("shape" in lowered or "dimension" in lowered):
            return TritonSchemaError(message, status)
        return TritonClientError(message, status)
    if 500 <= status < 600:
        lines += ["", "=== Troubleshooting (Server Error) ==="]
        if status == 503:
            lines += ["  - Server is overloaded or unavailable; this error is retried"]
        elif status == 504:
            lines += ["  - Inference exceeded a gateway timeout; consider a larger timeout"]
        else:
            lines += ["  - Check the server log for the model's failure"]
        return TritonServerError("\n".join(lines), status)
    lines += ["", "=== Unexpected Status Code ===", "  - Check for a proxy or load balancer"]
    return TritonClientError("\n".join(lines), status)


def _server_message(body: bytes) -> str:
    text = body.decode("utf-8", errors="replace")
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) and isinstance(parsed.get("error"), str):
        return str(parsed["error"])
    return text[:2000] if text else "No error details provided"

"""What every hostile exchange must satisfy, and the checks that the server still serves.

The oracle for hostile input: a client's mistake is answered 4xx (gRPC: the codes that blame the
request), never 5xx, in the protocol's error format, with a message that is not our catch-all
"internal error: ..." (which marks an exception nobody anticipated). A few answers are not
about the request's content and are allowed only where a test names them: 501/UNIMPLEMENTED
for what the endpoint does not offer (a decoupled model over unary infer, `repository_name`)
and 503/UNAVAILABLE for what the server cannot take now. A model's
own failure stays 500/INTERNAL: the corpus meets one, identity_any answering a request for an
output whose input it was not given without that output.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Collection
from pathlib import Path

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

#: The statuses of a client's mistake: malformed, wrong type, too large, unknown, not allowed.
HTTP_CLIENT_FAULT = {400, 403, 404, 405, 413, 415}
GRPC_CLIENT_FAULT = {"INVALID_ARGUMENT", "NOT_FOUND", "ALREADY_EXISTS", "RESOURCE_EXHAUSTED"}
UNHANDLED = "internal error"
#: 500/INTERNAL messages that report what a model did, not what the request was.
MODEL_FAULTS = ("did not produce requested output",)


def _model_fault(message: str) -> bool:
    return any(fault in message for fault in MODEL_FAULTS)


def check_http_answer(
    status: int, body: bytes, *, allow_ok: bool = True, allow: Collection[int] = ()
) -> dict | list | None:
    """A 200 with a JSON body (when allowed), or a 4xx with `{"error": "<message>"}`."""
    if status == 200 and allow_ok:
        return json.loads(body) if body else None
    doc = json.loads(body)
    model_fault = status == 500 and isinstance(doc, dict) and _model_fault(str(doc.get("error")))
    assert status in HTTP_CLIENT_FAULT or status in allow or model_fault, (status, body[:300])
    assert isinstance(doc, dict) and set(doc) == {"error"}, body[:300]
    message = doc["error"]
    assert isinstance(message, str) and message, body[:300]
    assert not message.startswith(UNHANDLED), message
    return doc


def check_grpc_error(exc: Exception, *, allow: Collection[str] = ()) -> str:
    """A status that blames the request, with a message that is not the catch-all."""
    code = exc.code().name  # type: ignore[attr-defined]
    details = exc.details() or ""  # type: ignore[attr-defined]
    model_fault = code == "INTERNAL" and _model_fault(details)
    assert code in GRPC_CLIENT_FAULT or code in allow or model_fault, (code, details)
    assert details and not details.startswith(UNHANDLED), (code, details)
    return details


def healthy_http(url: str) -> None:
    """add_sub over HTTP gives the right numbers: the server still serves."""
    client = httpclient.InferenceServerClient(url)
    a = np.array([1, 2, 3, 4], np.float32)
    b = np.array([4, 3, 2, 1], np.float32)
    inputs = [httpclient.InferInput("INPUT0", [4], "FP32"), httpclient.InferInput("INPUT1", [4], "FP32")]
    inputs[0].set_data_from_numpy(a)
    inputs[1].set_data_from_numpy(b)
    result = client.infer("add_sub", inputs)
    assert result.as_numpy("OUTPUT0").tolist() == [5, 5, 5, 5]
    assert result.as_numpy("OUTPUT1").tolist() == [-3, -1, 1, 3]
    client.close()


def healthy_grpc(url: str) -> None:
    client = grpcclient.InferenceServerClient(url)
    a = np.array([1, 2, 3, 4], np.float32)
    inputs = [grpcclient.InferInput("INPUT0", [4], "FP32"), grpcclient.InferInput("INPUT1", [4], "FP32")]
    inputs[0].set_data_from_numpy(a)
    inputs[1].set_data_from_numpy(a)
    result = client.infer("add_sub", inputs)
    assert result.as_numpy("OUTPUT0").tolist() == [2, 4, 6, 8]
    client.close()


def rss_mib(pid: int) -> float:
    """Resident memory of one process (the server, not its model workers), from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def wait_until(predicate: Callable[[], object], timeout: float = 30, interval: float = 0.05) -> object:
    """Poll until `predicate()` is truthy; fail after `timeout` seconds (a bound, not a measurement)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(interval)

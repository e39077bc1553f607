"""Client side of the Python model API tests: tritonclient calls, gRPC streams, notes, logs."""

from __future__ import annotations

import json
import queue
import re
import time
import urllib.request
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException


def wait_for(predicate, timeout: float = 30):
    """Poll until `predicate()` is truthy (a bound, not a measurement)."""
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)
    return value


def inputs(client, case: str, data=None, bf16=None) -> list:
    tensors = [client.InferInput("CASE", [1], "BYTES")]
    tensors[0].set_data_from_numpy(np.array([case.encode()], dtype=np.object_))
    if data is not None:
        tensors.append(client.InferInput("DATA", [len(data)], "FP32"))
        tensors[-1].set_data_from_numpy(np.array(data, dtype=np.float32))
    if bf16 is not None:
        tensors.append(client.InferInput("BF16_IN", [len(bf16)], "BF16"))
        tensors[-1].set_data_from_numpy(np.array(bf16, dtype=ml_dtypes.bfloat16))
    return tensors


def client_of(server, protocol: str):
    if protocol == "http":
        return httpclient, httpclient.InferenceServerClient(server.http_url, network_timeout=60)
    return grpcclient, grpcclient.InferenceServerClient(server.grpc_url)


def infer(server, model: str, case: str, protocol: str = "http", data=None, bf16=None, **kwargs):
    module, client = client_of(server, protocol)
    return client.infer(model, inputs(module, case, data, bf16), **kwargs)


def ask(server, model: str, case: str, protocol: str = "http", **kwargs) -> dict:
    """The JSON a model answers a case with."""
    return json.loads(infer(server, model, case, protocol, **kwargs).as_numpy("OUT")[0])


def failure(server, model: str, case: str, protocol: str = "http", **kwargs) -> InferenceServerException:
    with pytest.raises(InferenceServerException) as info:
        infer(server, model, case, protocol, **kwargs)
    return info.value


def notes(server, model: str, request_id: str) -> dict | None:
    path = server.repository / model / "notes.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    found = [json.loads(line) for line in lines if json.loads(line)["id"] == request_id]
    return found[-1] if found else None


def error_of(exc) -> dict:
    return {"type": "TritonModelException", "message": exc} if isinstance(exc, str) else exc


class Stream:
    """A gRPC stream; each answer is ("data", json), ("empty", None) or ("error", message),
    with whether it was the request's last."""

    def __init__(self, server) -> None:
        self.client = grpcclient.InferenceServerClient(server.grpc_url)
        self.answers: queue.Queue = queue.Queue()
        self.client.start_stream(callback=lambda result, error: self.answers.put((result, error)))

    def send(self, model: str, case: str, request_id: str = "") -> None:
        self.client.async_stream_infer(model, inputs(grpcclient, case), request_id=request_id,
                                       enable_empty_final_response=True)

    def next(self) -> tuple[str, object, bool]:
        result, error = self.answers.get(timeout=60)
        if error is not None:
            return "error", error.message(), False
        response = result.get_response()
        final = response.parameters["triton_final_response"].bool_param
        if not response.outputs:
            return "empty", None, final
        return "data", json.loads(result.as_numpy("OUT")[0]), final

    def until_final(self, limit: int = 50) -> list[tuple[str, object, bool]]:
        answers = []
        while len(answers) < limit:
            answers.append(self.next())
            if answers[-1][2]:
                return answers
        raise AssertionError(f"no final response: {answers}")

    def close(self, cancel: bool = False) -> None:
        self.client.stop_stream(cancel_requests=cancel)
        self.client.close()


def metrics_text(server) -> str:
    return urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics", timeout=10).read().decode()


def log_lines(server, token: str) -> list[str]:
    pattern = re.compile(r"^([IWEV])\d{4} [\d:.]+ +\d+ model\.py:\d+\] " + token + r" (\S+)$", re.M)
    return [f"{level} {what}" for level, what in pattern.findall(server.log())]


def worker_commands(server) -> dict[int, list[str]]:
    """The command lines of the server's worker processes, by pid."""
    found = {}
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
            command = [a.decode() for a in (entry / "cmdline").read_bytes().split(b"\0") if a]
        except (OSError, ValueError):
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == server.process.pid and (
                "openinfer.backends.python.worker" in command):
            found[int(entry.name)] = command
    return found

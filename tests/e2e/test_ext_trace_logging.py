"""Trace and logging extensions through tritonclient.http and tritonclient.grpc."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

from tests.e2e import ext_models
from tests.helpers import Server

TIMESTAMPS = [
    "REQUEST_START",
    "QUEUE_START",
    "COMPUTE_START",
    "COMPUTE_INPUT_END",
    "COMPUTE_OUTPUT_START",
    "COMPUTE_END",
    "INFER_RESPONSE_COMPLETE",
    "REQUEST_END",
]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = tmp_path_factory.mktemp("trace_repo")
    ext_models.add_sub(repo)
    ext_models.identity(repo, "other")
    out = tmp_path_factory.mktemp("traces")
    srv = Server(
        repo,
        [
            "--model-control-mode=explicit",
            "--load-model=add_sub",
            "--load-model=other",
            "--trace-config",
            f"triton,file={out / 'trace.json'}",
        ],
    )
    srv.trace_file = out / "trace.json"  # type: ignore[attr-defined]
    srv.start(wait_for="ready")
    yield srv
    assert srv.stop() == 0, srv.log()


@pytest.fixture(scope="module")
def http(server):
    return httpclient.InferenceServerClient(server.http_url)


@pytest.fixture(scope="module")
def grpc_client(server):
    return grpcclient.InferenceServerClient(server.grpc_url)


def _infer(client, module=httpclient, request_id=""):
    inputs = [module.InferInput("INPUT0", [4], "FP32"), module.InferInput("INPUT1", [4], "FP32")]
    inputs[0].set_data_from_numpy(np.arange(4, dtype=np.float32))
    inputs[1].set_data_from_numpy(np.ones(4, dtype=np.float32))
    return client.infer("add_sub", inputs, request_id=request_id)


def _grpc_settings(response) -> dict:
    return {key: list(value.value) for key, value in response.settings.items()}


def _traces(path: Path) -> list[list[dict]]:
    """Every numbered trace file (log_frequency=1: one trace per file), oldest first."""
    files = sorted(path.parent.glob(path.name + ".*"), key=lambda p: int(p.suffix[1:]))
    return [json.loads(p.read_text()) for p in files]


def _error(call) -> InferenceServerException:
    with pytest.raises(InferenceServerException) as info:
        call()
    return info.value


def test_trace_settings_and_files(server, http, grpc_client):
    path = server.trace_file
    initial = {
        "trace_level": ["OFF"],
        "trace_rate": "1000",
        "trace_count": "-1",
        "log_frequency": "0",
        "trace_file": str(path),
        "trace_mode": "triton",
    }
    assert http.get_trace_settings() == initial
    assert _grpc_settings(grpc_client.get_trace_settings()) == {
        k: v if isinstance(v, list) else [v] for k, v in initial.items()
    }
    _infer(http)
    assert _traces(path) == []  # tracing is off

    updated = http.update_trace_settings(
        settings={"trace_level": ["TIMESTAMPS"], "trace_rate": "1", "log_frequency": "1"}
    )
    assert updated == {
        **initial,
        "trace_level": ["TIMESTAMPS"],
        "trace_rate": "1",
        "log_frequency": "1",
    }
    _infer(http, request_id="first")
    _infer(grpc_client, grpcclient)
    traces = _traces(path)
    assert len(traces) == 2
    first, second = traces
    assert first[0] == {
        "id": first[0]["id"],
        "model_name": "add_sub",
        "model_version": 1,
        "request_id": "first",
    }
    assert second[0] == {"id": second[0]["id"], "model_name": "add_sub", "model_version": 1}
    for trace in traces:
        stamps = [entry["timestamps"][0] for entry in trace[1:]]
        assert all(entry["id"] == trace[0]["id"] for entry in trace)
        assert sorted(s["name"] for s in stamps) == sorted(TIMESTAMPS)
        ns = {s["name"]: s["ns"] for s in stamps}
        assert [ns[name] for name in TIMESTAMPS if name != "INFER_RESPONSE_COMPLETE"] == sorted(
            ns[name] for name in TIMESTAMPS if name != "INFER_RESPONSE_COMPLETE"
        )
    assert second[0]["id"] > first[0]["id"]


def test_model_trace_settings_fall_back_to_global(server, http, grpc_client):
    path = server.trace_file
    http.update_trace_settings(
        settings={"trace_level": ["TIMESTAMPS"], "trace_rate": "1", "log_frequency": "1"}
    )
    reply = grpc_client.update_trace_settings(
        model_name="add_sub", settings={"trace_level": ["TIMESTAMPS", "TENSORS"]}
    )
    assert _grpc_settings(reply)["trace_level"] == ["TIMESTAMPS", "TENSORS"]
    assert _grpc_settings(reply)["trace_rate"] == ["1"]  # copied from the global setting
    # A later global change reaches the fields the model did not set.
    http.update_trace_settings(settings={"trace_rate": "2"})
    assert http.get_trace_settings(model_name="add_sub")["trace_rate"] == "2"
    assert http.get_trace_settings(model_name="add_sub")["trace_level"] == ["TIMESTAMPS", "TENSORS"]
    http.update_trace_settings(settings={"trace_rate": "1"})

    before = len(_traces(path))
    _infer(http)
    trace = _traces(path)[before]
    tensors = {(e["activity"], e["tensor"]["name"]): e["tensor"] for e in trace if "activity" in e}
    assert tensors[("TENSOR_QUEUE_INPUT", "INPUT0")] == {
        "name": "INPUT0",
        "data": "0,1,2,3",
        "shape": "4",
        "dtype": "FP32",
    }
    assert tensors[("TENSOR_BACKEND_OUTPUT", "OUTPUT0")]["data"] == "1,2,3,4"
    assert tensors[("TENSOR_BACKEND_OUTPUT", "OUTPUT1")]["data"] == "-1,0,1,2"

    # Clearing the model's only field makes it follow the global setting again.
    cleared = http.update_trace_settings(model_name="add_sub", settings={"trace_level": None})
    assert cleared == http.get_trace_settings()


def test_trace_count_stops_sampling(server, http):
    path = server.trace_file
    http.update_trace_settings(
        settings={
            "trace_level": ["TIMESTAMPS"],
            "trace_rate": "1",
            "log_frequency": "0",
            "trace_count": "2",
        }
    )
    before = len(_traces(path))
    for _ in range(4):
        _infer(http)
    assert http.get_trace_settings()["trace_count"] == "0"
    assert (
        len(_traces(path)) == before + 1
    )  # the two traces were flushed together when the count ran out
    assert len(_traces(path)[-1]) == 2 * (1 + len(TIMESTAMPS))
    http.update_trace_settings(
        settings={"trace_level": ["OFF"], "trace_count": "-1", "log_frequency": "1"}
    )


def test_trace_setting_errors(http, grpc_client):
    err = _error(lambda: http.update_trace_settings(settings={"trace_file": "/tmp/elsewhere.json"}))
    assert (err.status(), err.message()) == (
        "501",
        "trace file location can not be updated through network protocol",
    )
    err = _error(
        lambda: grpc_client.update_trace_settings(settings={"trace_file": "/tmp/elsewhere.json"})
    )
    assert err.status() == "StatusCode.UNIMPLEMENTED"
    err = _error(
        lambda: http.update_trace_settings(settings={"trace_level": ["OFF", "TIMESTAMPS"]})
    )
    assert (err.status(), err.message()) == (
        "400",
        "Expect only one trace level 'OFF' is specified",
    )
    err = _error(lambda: http.update_trace_settings(settings={"trace_rate": "often"}))
    assert err.message() == "Unable to parse 'trace_rate', got: often"
    err = _error(lambda: http.update_trace_settings(settings={"trace_count": "-5"}))
    assert "Expecting value >= -1" in err.message()
    # Unknown levels and modes are refused over both protocols (Triton ignores them).
    for client, code in ((http, "400"), (grpc_client, "StatusCode.INVALID_ARGUMENT")):
        err = _error(lambda client=client: client.update_trace_settings(settings={"trace_level": ["EVIL"]}))
        assert (err.status(), err.message()) == (
            code, "unknown trace level 'EVIL', expected 'OFF', 'TIMESTAMPS' or 'TENSORS'"
        )
        err = _error(lambda client=client: client.update_trace_settings(settings={"trace_mode": "evil"}))
        assert err.status() == code and "unsupported trace mode 'evil'" in err.message()
    err = _error(lambda: grpc_client.update_trace_settings(settings={"trace_rate": ["1", "2"]}))
    assert (err.status(), err.message()) == (
        "StatusCode.INVALID_ARGUMENT",
        "expect only 1 value for 'trace_rate'",
    )
    for client, code in ((http, "400"), (grpc_client, "StatusCode.INVALID_ARGUMENT")):
        err = _error(lambda client=client: client.get_trace_settings(model_name="nope"))
        assert (err.status(), err.message()) == (code, "Request for unknown model : nope")
    assert http.get_trace_settings()["trace_level"] == ["OFF"]


def _log_lines(server, pattern: str) -> list[str]:
    return [line for line in server.log().splitlines() if re.search(pattern, line)]


def _wait_for_log(server, pattern: str) -> list[str]:
    deadline = time.monotonic() + 10
    while not _log_lines(server, pattern) and time.monotonic() < deadline:
        time.sleep(0.05)
    return _log_lines(server, pattern)


def test_log_settings_change_live(server, http, grpc_client):
    initial = {
        "log_file": "",
        "log_info": True,
        "log_warning": True,
        "log_error": True,
        "log_verbose_level": 0,
        "log_format": "default",
    }
    assert http.get_log_settings() == initial
    settings = grpc_client.get_log_settings().settings
    assert (settings["log_info"].bool_param, settings["log_verbose_level"].uint32_param) == (
        True,
        0,
    )
    assert settings["log_format"].string_param == "default"

    assert http.update_log_settings({"log_format": "ISO8601", "log_verbose_level": 2}) == {
        **initial,
        "log_format": "ISO8601",
        "log_verbose_level": 2,
    }
    http.unload_model("other")
    line = _wait_for_log(server, r"successfully unloaded 'other' version 1")
    assert re.match(
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ I \d+ openinfer\.repository\] successfully unloaded",
        line[0],
    )

    loaded = len(_log_lines(server, r"successfully loaded 'other'$"))
    assert loaded >= 1  # logged at start-up, once for the model (not per version), as Triton logs it
    reply = grpc_client.update_log_settings(
        {"log_info": False, "log_format": "default", "log_verbose_level": 0}
    )
    assert reply.settings["log_info"].bool_param is False
    http.load_model("other")  # logged at INFO: switched off
    assert len(_log_lines(server, r"successfully loaded 'other'$")) == loaded
    http.update_log_settings({"log_info": True})
    http.unload_model("other")
    lines = _wait_for_log(server, r"successfully unloaded 'other' version 1")
    assert len(lines) == 2
    assert re.match(
        r"I\d{4} \d\d:\d\d:\d\d\.\d{6} \d+ openinfer\.repository\] successfully unloaded", lines[1]
    )
    http.load_model("other")
    assert http.get_log_settings() == initial


def test_log_setting_errors(server, http, grpc_client):
    err = _error(lambda: http.update_log_settings({"log_file": "/tmp/x.log"}))
    assert (err.status(), err.message()) == (
        "501",
        "log file location can not be updated through network protocol",
    )
    err = _error(lambda: grpc_client.update_log_settings({"log_file": "/tmp/x.log"}))
    assert err.status() == "StatusCode.UNIMPLEMENTED"
    # An unknown format is the client's mistake, 400 over both (Triton's HTTP answers 503).
    err = _error(lambda: http.update_log_settings({"log_format": "fancy"}))
    assert (err.status(), err.message()) == ("400", "invalid argument for --log_format, got: fancy")
    err = _error(lambda: grpc_client.update_log_settings({"log_format": "fancy"}))
    assert (err.status(), err.message()) == (
        "StatusCode.INVALID_ARGUMENT",
        "invalid argument for log_format, got: fancy",  # Triton's gRPC words lack the dashes
    )
    err = _error(lambda: http.update_log_settings({"log_info": "yes"}))
    assert err.status() == "400" and "non-boolean" in err.message()
    with grpc.insecure_channel(server.grpc_url) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        request = service_pb2.LogSettingsRequest()
        request.settings["log_info"].string_param = "yes"
        with pytest.raises(grpc.RpcError) as info:
            stub.LogSettings(request)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert info.value.details() == "expect boolean for 'log_info'"
    assert http.get_log_settings()["log_format"] == "default"

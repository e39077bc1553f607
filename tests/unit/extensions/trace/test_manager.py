"""Trace settings (Triton's fallback rules), sampling, counts and the JSON written."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from openinfer.core.errors import InvalidArgumentError, UnsupportedError
from openinfer.extensions.trace import manager as trace
from openinfer.core.observability.stats import ExecutionTiming, record_compute
from openinfer.core.types import InferRequest, InferResponse, Tensor

MODEL = SimpleNamespace(name="m", version=3)


def _request(arrival: int = 100) -> InferRequest:
    request = InferRequest(
        "m", id="req-1", inputs=[Tensor("X", "FP32", (2,), np.array([0.5, 2.0], np.float32))]
    )
    request.arrival_ns = arrival
    return request


def test_defaults_and_cli(tmp_path):
    manager = trace.TraceManager()
    assert manager.settings() == {
        "trace_level": ["OFF"],
        "trace_rate": "1000",
        "trace_count": "-1",
        "log_frequency": "0",
        "trace_file": "",
        "trace_mode": "triton",
    }
    assert not manager.enabled
    path = tmp_path / "t.json"
    manager = trace.TraceManager.from_cli(
        [
            f"triton,file={path}",
            "level=TIMESTAMPS",
            "level=TENSORS",
            "rate=5",
            "count=7",
            "triton,log-frequency=2",
        ]
    )
    assert manager.settings()["trace_level"] == ["TIMESTAMPS", "TENSORS"]
    assert (manager.settings()["trace_rate"], manager.settings()["trace_count"]) == ("5", "7")
    assert manager.enabled
    for bad in (
        ["level=LOUD"],
        ["mode=opentelemetry"],
        ["opentelemetry,url=x"],
        ["rate=often"],
        ["bogus"],
    ):
        with pytest.raises(ValueError):
            trace.TraceManager.from_cli(bad)


def test_parse_update_rules():
    new, clear = trace.parse_update(
        {"trace_level": ["TIMESTAMPS"], "trace_rate": ["12abc"], "trace_count": None, "trace_mode": ["triton"]}
    )
    assert new == {"level": trace.TIMESTAMPS, "rate": 12} and clear == {
        "count"
    }  # stoi keeps the leading digits
    # Unknown levels and modes are refused (Triton ignores them and answers 200).
    with pytest.raises(InvalidArgumentError, match="unknown trace level 'NOISE'"):
        trace.parse_update({"trace_level": ["TIMESTAMPS", "NOISE"]})
    with pytest.raises(InvalidArgumentError, match="unsupported trace mode 'opentelemetry'"):
        trace.parse_update({"trace_mode": ["opentelemetry"]})
    with pytest.raises(UnsupportedError, match="trace file location can not be updated"):
        trace.parse_update({"trace_file": None})
    with pytest.raises(
        InvalidArgumentError, match="Expect only one trace level 'OFF' is specified"
    ):
        trace.parse_update({"trace_level": ["OFF", "TENSORS"]})
    with pytest.raises(InvalidArgumentError, match="Unable to parse 'log_frequency', got: x"):
        trace.parse_update({"log_frequency": ["x"]})
    with pytest.raises(InvalidArgumentError, match="out of range"):
        trace.parse_update({"trace_rate": ["-1"]})
    with pytest.raises(InvalidArgumentError, match="Expecting value >= -1"):
        trace.parse_update({"trace_count": ["-2"]})


def test_model_settings_fall_back_to_global(tmp_path):
    manager = trace.TraceManager(file=str(tmp_path / "t.json"))
    with pytest.raises(InvalidArgumentError, match="trace file name is not given"):
        trace.TraceManager().update("", {"level": trace.TIMESTAMPS}, set())
    manager.update("m", {"rate": 3}, set())
    assert manager.settings("m")["trace_rate"] == "3" and manager.settings("m")["trace_level"] == [
        "OFF"
    ]
    manager.update("", {"level": trace.TIMESTAMPS, "rate": 9}, set())
    assert manager.settings("m")["trace_level"] == [
        "TIMESTAMPS"
    ]  # follows the global field it never set
    assert manager.settings("m")["trace_rate"] == "3"  # keeps its own
    manager.update("m", {}, {"rate"})
    assert manager.settings("m") == manager.settings()  # nothing left specified: back to global
    assert "m" not in manager.model_settings


def test_sampling_rate_count_and_files(tmp_path):
    path = tmp_path / "t.json"
    manager = trace.TraceManager(
        level=trace.TIMESTAMPS | trace.TENSORS, rate=2, count=2, file=str(path)
    )
    traces = []
    for i in range(6):
        request = _request(100 + i)
        sampled = manager.sample(request, MODEL)
        assert (sampled is not None) == (i in (1, 3))  # every 2nd request, two in all
        if sampled is None:
            continue
        assert request.trace is sampled
        sampled.queued(request)
        sampled.compute(1_000, ExecutionTiming(10, 20, 30), 1_100)
        output = Tensor("Y", "BYTES", (2,), np.array([b"a", b"b"], dtype=np.object_))
        sampled.responded(InferResponse("m", "3", outputs=[output]))
        sampled.finish(5_000)
        traces.append(sampled)
    assert manager.settings()["trace_count"] == "0"
    files = sorted(tmp_path.glob("t.json.*"))
    assert [f.name for f in files] == ["t.json.0"]  # flushed once when the count ran out
    entries = json.loads(files[0].read_text())
    first = [e for e in entries if e["id"] == traces[0].id]
    assert first[0] == {
        "id": traces[0].id,
        "model_name": "m",
        "model_version": 3,
        "request_id": "req-1",
    }
    stamps = {
        e["timestamps"][0]["name"]: e["timestamps"][0]["ns"] for e in first if "timestamps" in e
    }
    assert stamps["REQUEST_START"] == 101 and stamps["REQUEST_END"] == 5_000
    assert (
        stamps["COMPUTE_START"],
        stamps["COMPUTE_INPUT_END"],
        stamps["COMPUTE_OUTPUT_START"],
        stamps["COMPUTE_END"],
    ) == (1_000, 1_010, 1_070, 1_100)
    tensors = {e["activity"]: e["tensor"] for e in first if "activity" in e}
    assert tensors["TENSOR_QUEUE_INPUT"] == {
        "name": "X",
        "data": "0.5,2",
        "shape": "2",
        "dtype": "FP32",
    }
    assert tensors["TENSOR_BACKEND_OUTPUT"]["data"] == '"a","b"'


def test_schedulers_hook_records_timing_and_stamps():
    timing = ExecutionTiming(1, 2, 3)
    plain = _request()
    record_compute([plain], 10, timing)
    assert plain.compute is timing and plain.trace is None
    manager = trace.TraceManager(level=trace.TIMESTAMPS, rate=1, file="/dev/null")
    traced = _request()
    manager.sample(traced, MODEL)
    record_compute([traced], 10, timing)
    names = [name for _, name in traced.trace.stamps]
    assert names == [
        "REQUEST_START",
        "COMPUTE_START",
        "COMPUTE_INPUT_END",
        "COMPUTE_OUTPUT_START",
        "COMPUTE_END",
    ]


def test_pending_traces_go_to_the_file_at_shutdown(tmp_path):
    path = tmp_path / "t.json"
    manager = trace.TraceManager(level=trace.TIMESTAMPS, rate=1, file=str(path))
    for i in range(2):
        request = _request()
        manager.sample(request, MODEL).finish(200)
    assert not path.exists()
    manager.close()
    assert len([e for e in json.loads(path.read_text()) if "model_name" in e]) == 2

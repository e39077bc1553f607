"""Triton's generate extension on the KServe HTTP port, with the mock LLM: tensors from
top-level keys and parameters, one JSON answer, server-sent events, errors."""

from __future__ import annotations

import json

from tests.openai.conftest import raw_post, sse_events


def url(server, route: str, model: str = "mock_llm") -> str:
    return f"http://127.0.0.1:{server.http_port}/v2/models/{model}/{route}"


def test_generate(llama3_server):
    body = {"id": "r1", "text_input": "#say:a b c#", "parameters": {"stream": False, "max_tokens": 2, "exclude_input_in_output": True}}
    status, headers, raw = raw_post(url(llama3_server, "generate"), body)
    answer = json.loads(raw)
    assert status == 200 and headers["content-type"] == "application/json"
    assert answer["id"] == "r1" and answer["model_name"] == "mock_llm" and answer["model_version"] == "1"
    assert answer["text_output"] == "a b" and answer["finish_reason"] == "length"
    assert answer["num_output_tokens"] == 2 and answer["num_input_tokens"] == 3
    # parameters that name no input reach the model as its request parameters (its sampling parameters)
    status, _, raw = raw_post(url(llama3_server, "generate"), {"text_input": "#params#", "exclude_input_in_output": True, "parameters": {"temperature": 0.5, "stop": ["x"]}})
    assert status == 200 and json.loads(json.loads(raw)["text_output"]) == {"stop": '["x"]', "temperature": 0.5}


def test_generate_stream(llama3_server):
    body = {"text_input": "#say:one two three#", "parameters": {"exclude_input_in_output": True}}
    status, headers, raw = raw_post(url(llama3_server, "generate_stream"), body)
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    events = sse_events(raw)
    assert [e["text_output"] for e in events] == ["one", " two", " three", ""]
    assert events[-1]["finish_reason"] == "stop" and all(e["model_name"] == "mock_llm" for e in events)


def test_generate_errors(llama3_server):
    status, _, raw = raw_post(url(llama3_server, "generate"), {"parameters": {"stream": False}})
    assert status == 400 and "text_input" in json.loads(raw)["error"]
    status, _, raw = raw_post(url(llama3_server, "generate", "unknown"), {"text_input": "x"})
    assert status == 404 and json.loads(raw) == {"error": "Request for unknown model: 'unknown' is not found"}
    status, _, raw = raw_post(url(llama3_server, "generate"), b"[1, 2]")
    assert status == 400 and "JSON object" in json.loads(raw)["error"]
    # a decoupled model streaming several responses needs generate_stream
    status, _, raw = raw_post(url(llama3_server, "generate"), {"text_input": "#say:a b#", "stream": True})
    assert status == 400 and "use generate stream" in json.loads(raw)["error"]
    # Triton's generate takes BYTES inputs from JSON strings only, and refuses an input given twice.
    status, headers, raw = raw_post(url(llama3_server, "generate_stream"), {"parameters": {"stream": True}})
    assert status == 400 and headers["content-type"] == "application/json"  # refused before the stream
    assert "text_input" in json.loads(raw)["error"]
    status, _, raw = raw_post(url(llama3_server, "generate"), {"text_input": 123})
    assert status == 400 and json.loads(raw)["error"] == "attempt to access JSON non-string as string"
    status, _, raw = raw_post(url(llama3_server, "generate"), b'{"text_input": "a", "text_input": "b"}')
    assert status == 400 and json.loads(raw)["error"] == "input 'text_input' already exists in request"
    status, _, raw = raw_post(url(llama3_server, "generate"), {"text_input": "a", "parameters": [1]})
    assert status == 400 and json.loads(raw)["error"] == "Expected JSON object for keyword: 'parameters'"
    status, _, raw = raw_post(url(llama3_server, "generate_stream"), {"text_input": "#fail# a b c"})
    events = sse_events(raw)
    assert status == 200 and "mock failure mid-stream" in events[-1]["error"]

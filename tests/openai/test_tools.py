"""Tool calling end to end: llama3 and mistral parsers (streaming and not), forced tool choices
through guided decoding, validation, and the streaming parse-size cap."""

from __future__ import annotations

import json
import re

import openai
import pytest

from tests.openai.conftest import OpenAIServer, raw_post, sse_events

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_current_weather",
        "description": "Get the current weather in a given location",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "state": {"type": "string"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city", "state", "unit"],
        },
    },
}
FORECAST = {
    "type": "function",
    "function": {
        "name": "get_n_day_weather_forecast",
        "description": "Get an N-day weather forecast",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "state": {"type": "string"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "num_days": {"type": "integer"},
            },
            "required": ["city", "state", "unit", "num_days"],
        },
    },
}
TOOLS = [WEATHER, FORECAST]
DALLAS = {"city": "Dallas", "state": "TX", "unit": "fahrenheit"}


def ask(script: str) -> list[dict]:
    return [
        {"role": "system", "content": "You're a helpful assistant! Answer the users question best you can."},
        {"role": "user", "content": f"What is the weather in Dallas, Texas in Fahrenheit? #tool:{script}#"},
    ]


def collect(stream) -> dict:
    """Fold a streamed tool-call answer: role, content, calls by index, finish reasons."""
    out = {"roles": [], "content": "", "calls": {}, "finishes": [], "ids": [], "names": []}
    for chunk in stream:
        choice = chunk.choices[0]
        if choice.delta.role:
            out["roles"].append(choice.delta.role)
        out["content"] += choice.delta.content or ""
        if choice.finish_reason:
            out["finishes"].append(choice.finish_reason)
        for call in choice.delta.tool_calls or []:
            assert len(choice.delta.tool_calls) == 1
            entry = out["calls"].setdefault(call.index, {"name": None, "arguments": ""})
            if call.id:
                out["ids"].append(call.id)
                assert call.type == "function"
            if call.function.name:
                out["names"].append(call.function.name)
                entry["name"] = call.function.name
            entry["arguments"] += call.function.arguments or ""
    return out


# ----------------------------------------------------------------------------- llama3 (auto)
def test_llama3_tool_call(llama3_server):
    client = llama3_server.client()
    reply = client.chat.completions.create(model="mock_llm", messages=ask("llama3"), tools=TOOLS)
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    (call,) = choice.message.tool_calls
    assert call.type == "function" and call.function.name == "get_current_weather"
    assert isinstance(call.id, str) and len(call.id) >= 9 and call.id.startswith("chatcmpl-tool-")
    assert json.loads(call.function.arguments) == DALLAS


def test_llama3_two_calls_have_distinct_ids(llama3_server):
    reply = llama3_server.client().chat.completions.create(model="mock_llm", messages=ask("llama3_two"), tools=TOOLS)
    calls = reply.choices[0].message.tool_calls
    assert [c.function.name for c in calls] == ["get_current_weather", "get_n_day_weather_forecast"]
    assert json.loads(calls[1].function.arguments) == {**DALLAS, "num_days": 2}
    assert calls[0].id != calls[1].id


def test_llama3_tool_call_streaming(llama3_server):
    client = llama3_server.client()
    plain = client.chat.completions.create(model="mock_llm", messages=ask("llama3_two"), tools=TOOLS)
    folded = collect(client.chat.completions.create(model="mock_llm", messages=ask("llama3_two"), tools=TOOLS, stream=True))
    assert folded["roles"] == ["assistant"]
    assert folded["finishes"] == ["tool_calls"]
    assert folded["content"] == ""
    assert len(folded["ids"]) == 2 and len(set(folded["ids"])) == 2
    assert folded["names"] == ["get_current_weather", "get_n_day_weather_forecast"]
    for index, call in enumerate(plain.choices[0].message.tool_calls):
        assert json.loads(folded["calls"][index]["arguments"]) == json.loads(call.function.arguments)


def test_plain_text_with_tools_and_tool_choice_none(llama3_server):
    client = llama3_server.client()
    reply = client.chat.completions.create(model="mock_llm", messages=ask("text"), tools=TOOLS)
    assert reply.choices[0].message.content == "The weather is sunny today."
    assert reply.choices[0].message.tool_calls is None and reply.choices[0].finish_reason == "stop"
    folded = collect(client.chat.completions.create(model="mock_llm", messages=ask("text"), tools=TOOLS, stream=True))
    assert folded["content"] == "The weather is sunny today." and folded["finishes"] == ["stop"] and not folded["calls"]
    reply = client.chat.completions.create(model="mock_llm", messages=ask("llama3"), tools=TOOLS, tool_choice="none")
    assert reply.choices[0].message.tool_calls is None
    assert reply.choices[0].message.content.startswith('{"name": "get_current_weather"')


def test_tool_result_turn(llama3_server, tokenizer):
    call = {"id": "call_1", "type": "function", "function": {"name": "get_current_weather", "arguments": json.dumps(DALLAS)}}
    messages = [
        {"role": "user", "content": "What is the weather in Dallas, Texas in Fahrenheit?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "98"},
    ]
    client = llama3_server.client()
    reply = client.chat.completions.create(model="mock_llm", messages=messages, tools=[WEATHER])
    answer = reply.choices[0]
    assert answer.finish_reason == "stop" and answer.message.tool_calls is None
    # the mock answers with its prompt: the template saw the call's arguments as an object, and the result
    decoded = [
        messages[0],
        {"role": "assistant", "content": None, "tool_calls": [{**call, "function": {**call["function"], "arguments": DALLAS}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "98"},
    ]
    expected = tokenizer.apply_chat_template(decoded, tools=[WEATHER], tokenize=False, add_generation_prompt=True)
    assert answer.message.content == expected
    assert '"parameters": {"city": "Dallas"' in expected and "98" in expected


# --------------------------------------------------------------------- forced (guided) choices
def test_named_tool_choice(llama3_server):
    client = llama3_server.client()
    choice = {"type": "function", "function": {"name": "get_n_day_weather_forecast"}}
    reply = client.chat.completions.create(model="mock_llm", messages=ask("text"), tools=TOOLS, tool_choice=choice)
    answer = reply.choices[0]
    assert answer.finish_reason == "stop"
    (call,) = answer.message.tool_calls
    assert call.function.name == "get_n_day_weather_forecast" and isinstance(call.id, str)
    # the mock fills the schema it was given as guided_json: the forecast tool's parameters
    assert json.loads(call.function.arguments) == {"city": "x", "state": "x", "unit": "celsius", "num_days": 1}
    folded = collect(
        client.chat.completions.create(model="mock_llm", messages=ask("text"), tools=TOOLS, tool_choice=choice, stream=True)
    )
    assert folded["finishes"] == ["stop"] and len(folded["ids"]) == 1
    assert folded["names"] == ["get_n_day_weather_forecast"]
    assert json.loads(folded["calls"][0]["arguments"]) == json.loads(call.function.arguments)


def test_required_tool_choice(llama3_server):
    client = llama3_server.client()
    reply = client.chat.completions.create(model="mock_llm", messages=ask("text"), tools=TOOLS, tool_choice="required")
    answer = reply.choices[0]
    assert answer.finish_reason == "tool_calls"
    (call,) = answer.message.tool_calls
    assert call.function.name == "get_current_weather"
    assert json.loads(call.function.arguments) == {"city": "x", "state": "x", "unit": "celsius"}
    folded = collect(
        client.chat.completions.create(model="mock_llm", messages=ask("text"), tools=TOOLS, tool_choice="required", stream=True)
    )
    assert folded["finishes"] == ["tool_calls"] and folded["names"] == ["get_current_weather"]
    assert json.loads(folded["calls"][0]["arguments"]) == {"city": "x", "state": "x", "unit": "celsius"}


def test_tool_choice_validation(llama3_server):
    url = llama3_server.base_url + "/chat/completions"
    named = {"type": "function", "function": {"name": "get_n_day_weather_forecast"}}
    cases = [
        ({"tool_choice": named}, "Named tool choice requires CreateChatCompletionRequest.tools to be provided"),
        ({"tool_choice": named, "tools": [WEATHER]}, "Tool 'get_n_day_weather_forecast' has not been passed in `tools`."),
        ({"tool_choice": "required", "tools": []}, '"required" tool choice requires CreateChatCompletionRequest.tools to be provided'),
    ]
    for extra, message in cases:
        status, _, raw = raw_post(url, {"model": "mock_llm", "messages": ask("text"), **extra})
        assert status == 400 and json.loads(raw)["error"]["message"] == message


# ------------------------------------------------------------------------------------ mistral
@pytest.fixture(scope="module")
def mistral_server(mock_repo):
    server = OpenAIServer(
        mock_repo, ["--tool-call-parser", "mistral", "--max-tool-call-parse-bytes", "512"], kserve=False
    ).start()
    yield server
    assert server.stop() == 0, server.log()


def test_mistral_tool_call(mistral_server):
    client = mistral_server.client()
    reply = client.chat.completions.create(model="mock_llm", messages=ask("mistral"), tools=TOOLS)
    (call,) = reply.choices[0].message.tool_calls
    assert reply.choices[0].finish_reason == "tool_calls" and reply.choices[0].message.content is None
    assert re.fullmatch(r"[A-Za-z0-9]{9}", call.id)
    assert json.loads(call.function.arguments) == DALLAS
    folded = collect(client.chat.completions.create(model="mock_llm", messages=ask("mistral"), tools=TOOLS, stream=True))
    assert folded["finishes"] == ["tool_calls"] and folded["content"] == ""
    assert len(folded["ids"]) == 1 and re.fullmatch(r"[A-Za-z0-9]{9}", folded["ids"][0])
    assert folded["names"] == ["get_current_weather"]
    assert json.loads(folded["calls"][0]["arguments"]) == DALLAS


def test_mistral_plain_text_with_brackets_is_not_swallowed(mistral_server):
    messages = [{"role": "user", "content": "#say:see [1] and [2] here#"}]
    folded = collect(mistral_server.client().chat.completions.create(model="mock_llm", messages=messages, tools=TOOLS, stream=True))
    assert folded["content"] == "see [1] and [2] here" and not folded["calls"]


def _stream_finishes(server, script: str, tools: bool, include_usage: bool = False) -> tuple[list, str]:
    body = {"model": "mock_llm", "messages": ask(script), "stream": True, "max_completion_tokens": 2048}
    if tools:
        body["tools"] = TOOLS
    if include_usage:
        body["stream_options"] = {"include_usage": True}
    status, _, raw = raw_post(server.base_url + "/chat/completions", body)
    assert status == 200
    events = sse_events(raw)
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    if include_usage:
        assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] > 0
    return finishes, text


def test_parse_cap_truncates_big_tool_calls(mistral_server):
    finishes, _ = _stream_finishes(mistral_server, "mistral_big", tools=True, include_usage=True)
    assert finishes == ["length"]
    assert "Streaming tool-call parse buffer exceeded 512 bytes" in mistral_server.log()
    finishes, _ = _stream_finishes(mistral_server, "mistral_small", tools=True)
    assert finishes == ["tool_calls"]
    finishes, text = _stream_finishes(mistral_server, "mistral_big", tools=False)
    assert finishes == ["stop"] and len(text) > 512  # plain streaming is never capped



@pytest.fixture(scope="module")
def parserless_server(mock_repo):
    server = OpenAIServer(mock_repo, []).start()
    yield server
    assert server.stop() == 0, server.log()


def test_tools_without_parser_are_refused(parserless_server):
    client = parserless_server.client()
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="mock_llm", messages=ask("text"), tools=TOOLS)
    assert info.value.body["message"] == "having tools in the request requires --tool-call-parser to be set"
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="mock_llm", messages=ask("text"), tools=TOOLS, tool_choice="auto")
    assert info.value.body["message"] == '"auto" tool choice requires --tool-call-parser to be set'
    reply = client.chat.completions.create(model="mock_llm", messages=ask("text"), tools=TOOLS, tool_choice="none")
    assert reply.choices[0].message.content == "The weather is sunny today."

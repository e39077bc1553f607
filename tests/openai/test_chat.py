"""Chat completions end to end: the openai SDK (sync and async, streaming and not) and raw HTTP
against `openinfer serve --openai-port` with the deterministic mock LLM."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request

import openai
import pytest

from tests.openai.conftest import raw_post, sse_events

MSG = [{"role": "user", "content": "What is machine learning?"}]


def rendered(tokenizer, messages, tools=None) -> str:
    return tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)


def words(text: str) -> int:
    import re

    return len(re.findall(r"\s*\S+|\s+", text))


def test_chat_answers_the_rendered_template(llama3_server, tokenizer):
    client = llama3_server.client()
    reply = client.chat.completions.create(model="mock_llm", messages=MSG)
    prompt = rendered(tokenizer, MSG)
    choice = reply.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content == prompt  # the mock answers with its prompt
    assert choice.message.tool_calls is None
    assert choice.finish_reason == "stop"
    assert choice.logprobs is None
    assert reply.id.startswith("chatcmpl-")
    assert reply.object == "chat.completion"
    assert reply.model == "mock_llm"
    assert reply.system_fingerprint is None
    assert reply.usage.prompt_tokens == words(prompt)
    assert reply.usage.completion_tokens == words(prompt)
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens


def test_system_developer_and_text_parts(llama3_server, tokenizer):
    client = llama3_server.client()
    messages = [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Say this is a test!"}]},
    ]
    reply = client.chat.completions.create(model="mock_llm", messages=messages)
    expected = rendered(
        tokenizer,
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": [{"type": "text", "text": "Say this is a test!"}]}],
    )
    assert reply.choices[0].message.content == expected


async def test_streaming_equals_non_streaming_with_usage(llama3_server):
    client = llama3_server.async_client()
    messages = [{"role": "user", "content": "#say:one two three four five#"}]
    plain = await client.chat.completions.create(model="mock_llm", messages=messages)
    stream = await client.chat.completions.create(
        model="mock_llm", messages=messages, stream=True, stream_options={"include_usage": True}
    )
    chunks = [chunk async for chunk in stream]
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[0].choices[0].delta.content == ""
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["stop"]
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content == plain.choices[0].message.content == "one two three four five"
    assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) == 5  # one chunk per token
    assert chunks[-1].choices == []
    assert all(c.usage is None for c in chunks[:-1])
    assert chunks[-1].usage.model_dump() == plain.usage.model_dump()
    assert {c.id for c in chunks} == {chunks[0].id} and chunks[0].id.startswith("chatcmpl-")
    assert {c.created for c in chunks} == {chunks[0].created}


def test_sse_framing_over_raw_http(llama3_server):
    body = {"model": "mock_llm", "messages": [{"role": "user", "content": "#say:a b#"}], "stream": True}
    status, headers, raw = raw_post(llama3_server.base_url + "/chat/completions", body)
    assert status == 200
    assert headers["content-type"].startswith("text/event-stream")
    events = sse_events(raw)
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert all(c["object"] == "chat.completion.chunk" and c["choices"][0]["index"] == 0 for c in chunks)
    assert [c["choices"][0]["finish_reason"] for c in chunks].count(None) == len(chunks) - 1
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


def test_max_tokens_ends_with_length(llama3_server):
    client = llama3_server.client()
    messages = [{"role": "user", "content": "#say:a b c d e#"}]
    reply = client.chat.completions.create(model="mock_llm", messages=messages, max_tokens=2)
    assert reply.choices[0].message.content == "a b"
    assert reply.choices[0].finish_reason == "length"
    assert reply.usage.completion_tokens == 2
    # max_completion_tokens wins over max_tokens
    reply = client.chat.completions.create(model="mock_llm", messages=messages, max_tokens=1, max_completion_tokens=3)
    assert reply.choices[0].message.content == "a b c"
    stream = client.chat.completions.create(model="mock_llm", messages=messages, max_tokens=2, stream=True)
    finishes = [c.choices[0].finish_reason for c in stream if c.choices[0].finish_reason]
    assert finishes == ["length"]


def test_stop_strings(llama3_server):
    client = llama3_server.client()
    reply = client.chat.completions.create(
        model="mock_llm", messages=[{"role": "user", "content": "#say:a b c d#"}], stop=[" c"]
    )
    assert reply.choices[0].message.content == "a b"
    assert reply.choices[0].finish_reason == "stop"


def test_sampling_parameters_sent_with_generation_config_defaults(llama3_server):
    client = llama3_server.client()
    messages = [{"role": "user", "content": "#params#"}]
    reply = client.chat.completions.create(model="mock_llm", messages=messages, seed=11, stop="zz", max_tokens=300)
    params = json.loads(reply.choices[0].message.content)
    # temperature/top_p/top_k come from the model's generation_config.json
    assert params == {"max_tokens": 300, "seed": 11, "stop": ["zz"], "temperature": 0.25, "top_k": 7, "top_p": 0.5}
    reply = client.chat.completions.create(
        model="mock_llm_lora_doll",
        messages=messages,
        temperature=0.9,
        max_tokens=300,
        extra_body={"top_k": 3, "repetition_penalty": 1.1, "min_tokens": 2},
    )
    params = json.loads(reply.choices[0].message.content)
    assert params["temperature"] == 0.9 and params["top_k"] == 3 and params["top_p"] == 0.5
    assert params["lora_name"] == "doll" and params["repetition_penalty"] == 1.1 and params["min_tokens"] == 2
    assert reply.model == "mock_llm_lora_doll"


def test_n_choices_and_seeds(llama3_server):
    client = llama3_server.client()
    reply = client.chat.completions.create(
        model="mock_llm", messages=[{"role": "user", "content": "#params#"}], n=3, seed=5, max_tokens=300
    )
    assert [c.index for c in reply.choices] == [0, 1, 2]
    assert [json.loads(c.message.content)["seed"] for c in reply.choices] == [5, 6, 7]
    stream = client.chat.completions.create(
        model="mock_llm", messages=[{"role": "user", "content": "#say:x y#"}], n=2, stream=True
    )
    text = {0: "", 1: ""}
    finishes = {0: [], 1: []}
    for chunk in stream:
        choice = chunk.choices[0]
        text[choice.index] += choice.delta.content or ""
        if choice.finish_reason:
            finishes[choice.index].append(choice.finish_reason)
    assert text == {0: "x y", 1: "x y"}
    assert finishes == {0: ["stop"], 1: ["stop"]}


def test_response_format_becomes_guided_json(llama3_server):
    client = llama3_server.client()
    schema = {"type": "object", "properties": {"answer": {"type": "integer"}, "unit": {"enum": ["m", "s"]}}}
    reply = client.chat.completions.create(
        model="mock_llm",
        messages=MSG,
        response_format={"type": "json_schema", "json_schema": {"name": "a", "schema": schema}},
    )
    assert json.loads(reply.choices[0].message.content) == {"answer": 1, "unit": "m"}
    reply = client.chat.completions.create(model="mock_llm", messages=MSG, response_format={"type": "json_object"})
    assert json.loads(reply.choices[0].message.content) == {}


def test_logprobs(llama3_server):
    client = llama3_server.client()
    messages = [{"role": "user", "content": "#say:hi there#"}]
    reply = client.chat.completions.create(model="mock_llm", messages=messages, logprobs=True, top_logprobs=2)
    content = reply.choices[0].logprobs.content
    assert [item.token for item in content] == ["hi", " there"]
    assert all(item.logprob == -0.25 and item.bytes == list(item.token.encode()) for item in content)
    assert [t.token for t in content[0].top_logprobs] == ["hi", "?"]
    stream = client.chat.completions.create(model="mock_llm", messages=messages, logprobs=True, top_logprobs=1, stream=True)
    streamed = [item.token for chunk in stream if chunk.choices[0].logprobs for item in chunk.choices[0].logprobs.content]
    assert streamed == ["hi", " there"]


def test_errors_use_the_openai_envelope(llama3_server):
    client = llama3_server.client()
    with pytest.raises(openai.NotFoundError) as info:
        client.chat.completions.create(model="nope", messages=MSG)
    assert info.value.status_code == 404
    assert info.value.body["code"] == "model_not_found" and info.value.body["param"] == "model"
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="mock_llm_lora_unknown", messages=MSG)
    assert info.value.body["message"] == "Unknown LoRA: unknown; for model: mock_llm_lora_unknown"
    cases = [
        ({"temperature": 2.1}, "temperature"),
        ({"top_p": 1.1}, "top_p"),
        ({"max_tokens": -1}, "max_tokens"),
        ({"n": 0}, "n"),
        ({"top_logprobs": 25, "logprobs": True}, "top_logprobs"),
        ({"logit_bias": {"0": 0}}, "logit_bias"),
        ({"top_logprobs": 2}, "top_logprobs"),
        ({"stream_options": {"include_usage": True}}, "stream_options"),
    ]
    for extra, param in cases:
        status, _, raw = raw_post(llama3_server.base_url + "/chat/completions", {"model": "mock_llm", "messages": MSG, **extra})
        body = json.loads(raw)
        assert status == 400, (extra, body)
        assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
        assert body["error"]["type"] == "invalid_request_error" and body["error"]["param"] == param, body
    status, _, raw = raw_post(llama3_server.base_url + "/chat/completions", {"model": "mock_llm", "messages": []})
    assert status == 400 and "at least 1 item" in json.loads(raw)["error"]["message"]
    status, _, raw = raw_post(llama3_server.base_url + "/chat/completions", {"model": "mock_llm", "messages": [{}]})
    assert status == 400 and "Field required" in json.loads(raw)["error"]["message"]
    status, _, raw = raw_post(llama3_server.base_url + "/chat/completions", b"{not json")
    assert status == 400 and json.loads(raw)["error"]["code"] == "invalid_json"
    image = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x"}}]}]
    status, _, raw = raw_post(llama3_server.base_url + "/chat/completions", {"model": "mock_llm", "messages": image})
    assert status == 400 and json.loads(raw)["error"]["message"] == "only text message is supported, but got image_url"
    # the server keeps serving
    assert client.chat.completions.create(model="mock_llm", messages=MSG).choices[0].finish_reason == "stop"


def test_unknown_fields_are_accepted_and_logged(llama3_server):
    client = llama3_server.client()
    reply = client.chat.completions.create(
        model="mock_llm",
        messages=[{"role": "user", "content": "#say:ok#"}],
        parallel_tool_calls=True,
        extra_body={"store": False, "metadata_x": {"a": 1}},
    )
    assert reply.choices[0].message.content == "ok"
    assert "fields were present in the request but ignored: ['metadata_x', 'store']" in llama3_server.log()


def test_backend_error_mid_stream_is_an_error_event(llama3_server):
    body = {"model": "mock_llm", "messages": [{"role": "user", "content": "#fail# a b c d"}], "stream": True}
    status, _, raw = raw_post(llama3_server.base_url + "/chat/completions", body)
    assert status == 200
    events = sse_events(raw)
    assert events[-1] == "[DONE]"
    error = events[-2]["error"]
    assert "mock failure mid-stream" in error["message"] and error["type"] == "internal_server_error"
    status, _, raw = raw_post(
        llama3_server.base_url + "/chat/completions",
        {"model": "mock_llm", "messages": [{"role": "user", "content": "#fail#"}]},
    )
    assert status == 500 and "mock failure" in json.loads(raw)["error"]["message"]


def _stats(server) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{server.http_port}/v2/models/mock_llm/stats") as reply:
        return json.loads(reply.read())["model_stats"][0]["inference_stats"]


async def test_client_disconnect_cancels_the_request(llama3_server):
    """The mock would stream 150 tokens (3 s); closing the stream after 3 chunks abandons it."""
    before = _stats(llama3_server)
    client = llama3_server.async_client()
    stream = await client.chat.completions.create(
        model="mock_llm", messages=[{"role": "user", "content": "#long#"}], stream=True
    )
    received = 0
    async for _chunk in stream:
        received += 1
        if received == 3:
            break
    await stream.close()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        after = _stats(llama3_server)
        if after["fail"]["count"] != before["fail"]["count"] or after["success"]["count"] != before["success"]["count"]:
            break
        await asyncio.sleep(0.05)
    # the core recorded the request as abandoned (not completed): the stream was closed server-side
    assert after["fail"]["count"] == before["fail"]["count"] + 1
    assert after["success"]["count"] == before["success"]["count"]


def test_max_tokens_default_and_context_check(llama3_server, tokenizer):
    """Without max_tokens the request may use the rest of the context (vLLM), not 16 tokens."""
    client = llama3_server.client()
    messages = [{"role": "user", "content": "#params#"}]
    reply = client.chat.completions.create(model="mock_llm", messages=messages)
    used = len(tokenizer(rendered(tokenizer, messages), add_special_tokens=False)["input_ids"])
    assert json.loads(reply.choices[0].message.content)["max_tokens"] == 4096 - used  # config.json's context
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="mock_llm", messages=messages, max_tokens=5000)
    assert info.value.body["param"] == "max_tokens"
    assert f"This model's maximum context length is 4096 tokens and your request has {used} input tokens" in info.value.body["message"]


def test_continuous_usage_stats(llama3_server):
    stream = llama3_server.client().chat.completions.create(
        model="mock_llm",
        messages=[{"role": "user", "content": "#say:a b c#"}],
        stream=True,
        stream_options={"include_usage": True, "continuous_usage_stats": True},
    )
    chunks = list(stream)
    completions = [c.usage.completion_tokens for c in chunks]
    assert all(c.usage is not None for c in chunks)
    assert completions == sorted(completions) and completions[-1] == 3 and chunks[-1].choices == []

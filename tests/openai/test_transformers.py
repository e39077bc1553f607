"""The OpenAI frontend over the real transformers backend: a tiny random-weight Llama (with two
LoRA adapters) and a tiny BERT encoder, built locally. Guided decoding, LoRA names, embeddings,
streaming/non-streaming agreement and cancellation, end to end."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request

import numpy as np
import openai
import pytest

from tests.openai.conftest import OpenAIServer, raw_post, sse_events

pytest.importorskip("torch")
pytest.importorskip("transformers")

from tests.llm_fixtures import llm_assets, write_llm_model

ENGINE = {"cpu_threads": 1}
MSG = [{"role": "user", "content": "What is the weather in Dallas?"}]


@pytest.fixture(scope="module")
def llm(tmp_path_factory):
    assets = llm_assets()
    repo = tmp_path_factory.mktemp("llm-openai") / "models"
    write_llm_model(repo, "tiny_llama", assets.llama, lora={"doll": assets.lora_doll, "sheep": assets.lora_sheep}, model_json=ENGINE)
    write_llm_model(repo, "tiny_bert", assets.bert, decoupled=False, model_json=ENGINE)
    write_llm_model(repo, "tiny_unary", assets.llama, decoupled=False, model_json=ENGINE)
    server = OpenAIServer(repo, ["--tool-call-parser", "llama3", "--lora-separator", "_lora_"]).start(timeout=240)
    yield server
    assert server.stop() == 0, server.log()[-3000:]


@pytest.fixture(scope="module")
def llama_tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(llm_assets().llama))


def test_models_listed_with_adapters(llm):
    ids = sorted(m.id for m in llm.client().models.list())
    assert ids == ["tiny_bert", "tiny_llama", "tiny_llama_lora_doll", "tiny_llama_lora_sheep", "tiny_unary"]
    assert llm.client().models.retrieve("tiny_llama").max_model_len == 512


async def test_greedy_stream_equals_non_stream(llm, llama_tokenizer):
    client = llm.async_client()
    kwargs = {"model": "tiny_llama", "messages": MSG, "temperature": 0, "max_tokens": 12}
    plain = await client.chat.completions.create(**kwargs)
    stream = await client.chat.completions.create(**kwargs, stream=True, stream_options={"include_usage": True})
    chunks = [c async for c in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert text == plain.choices[0].message.content
    assert finishes == [plain.choices[0].finish_reason]
    streamed, answered = chunks[-1].usage.model_dump(), plain.usage.model_dump()
    # the repeated prompt may be served from the prefix cache the first request filled
    assert streamed.pop("prompt_tokens_details")["cached_tokens"] >= answered.pop("prompt_tokens_details")["cached_tokens"]
    assert streamed == answered
    prompt = llama_tokenizer.apply_chat_template(MSG, tokenize=False, add_generation_prompt=True)
    assert plain.usage.prompt_tokens == len(llama_tokenizer(prompt, add_special_tokens=False)["input_ids"])
    assert 1 <= plain.usage.completion_tokens <= 12
    if plain.choices[0].finish_reason == "length":
        assert plain.usage.completion_tokens == 12


def test_max_tokens_gives_length(llm):
    reply = llm.client().completions.create(model="tiny_llama", prompt="The quick brown fox", temperature=0, max_tokens=3, extra_body={"ignore_eos": True})
    assert reply.choices[0].finish_reason == "length" and reply.usage.completion_tokens == 3


def test_json_schema_is_enforced(llm):
    schema = {
        "type": "object",
        "properties": {"color": {"enum": ["red", "green", "blue"]}, "ok": {"type": "boolean"}},
        "required": ["color", "ok"],
        "additionalProperties": False,
    }
    reply = llm.client().chat.completions.create(
        model="tiny_llama",
        messages=MSG,
        max_tokens=40,
        response_format={"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}},
    )
    value = json.loads(reply.choices[0].message.content)
    assert set(value) == {"color", "ok"} and value["color"] in ("red", "green", "blue") and isinstance(value["ok"], bool)


def test_named_tool_choice_is_enforced(llm):
    tool = {
        "type": "function",
        "function": {
            "name": "set_unit",
            "parameters": {
                "type": "object",
                "properties": {"unit": {"enum": ["celsius", "fahrenheit"]}},
                "required": ["unit"],
                "additionalProperties": False,
            },
        },
    }
    reply = llm.client().chat.completions.create(
        model="tiny_llama", messages=MSG, tools=[tool], tool_choice={"type": "function", "function": {"name": "set_unit"}}, max_tokens=30
    )
    (call,) = reply.choices[0].message.tool_calls
    assert call.function.name == "set_unit" and json.loads(call.function.arguments)["unit"] in ("celsius", "fahrenheit")


def test_lora_adapters_change_the_output(llm):
    client = llm.client()
    texts = {}
    for name in ("tiny_llama", "tiny_llama_lora_doll", "tiny_llama_lora_sheep"):
        reply = client.completions.create(model=name, prompt="Tell me a story about a cat.", temperature=0, max_tokens=8, extra_body={"ignore_eos": True})
        assert reply.model == name
        texts[name] = reply.choices[0].text
    assert texts["tiny_llama_lora_doll"] != texts["tiny_llama"] or texts["tiny_llama_lora_sheep"] != texts["tiny_llama"]
    with pytest.raises(openai.BadRequestError) as info:
        client.completions.create(model="tiny_llama_lora_unknown", prompt="x")
    assert info.value.body["message"] == "Unknown LoRA: unknown; for model: tiny_llama_lora_unknown"


def test_embeddings_from_the_encoder(llm):
    client = llm.client()
    reply = client.embeddings.create(model="tiny_bert", input=["The food was delicious", "The waiter was rude"])
    first, second = (np.array(d.embedding) for d in reply.data)
    assert first.shape == (32,) and abs(np.linalg.norm(first) - 1) < 1e-4 and not np.allclose(first, second)
    assert reply.usage.prompt_tokens > 0
    short = client.embeddings.create(model="tiny_bert", input="The food was delicious", dimensions=8)
    vector = np.array(short.data[0].embedding)
    assert vector.shape == (8,) and abs(np.linalg.norm(vector) - 1) < 1e-4


def test_generate_endpoints(llm):
    url = f"http://127.0.0.1:{llm.http_port}/v2/models/tiny_llama"
    body = {"text_input": "The quick brown fox", "parameters": {"stream": False, "temperature": 0, "max_tokens": 4, "exclude_input_in_output": True}}
    status, _, raw = raw_post(url + "/generate", body)
    answer = json.loads(raw)
    assert status == 200 and answer["model_name"] == "tiny_llama" and answer["model_version"] == "1"
    assert isinstance(answer["text_output"], str)
    body["parameters"]["stream"] = True
    status, headers, raw = raw_post(url + "/generate_stream", body)
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    events = sse_events(raw)
    assert "".join(e["text_output"] for e in events) == answer["text_output"]
    status, _, raw = raw_post(url + "/generate", {"parameters": {"stream": False}})
    assert status == 400 and "error" in json.loads(raw)


def _stats(server) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{server.http_port}/v2/models/tiny_llama/stats") as reply:
        return json.loads(reply.read())["model_stats"][0]["inference_stats"]


async def test_disconnect_cancels_generation(llm):
    before = _stats(llm)
    client = llm.async_client()
    stream = await client.chat.completions.create(
        model="tiny_llama", messages=MSG, max_tokens=400, stream=True, extra_body={"ignore_eos": True}
    )
    received = 0
    async for _chunk in stream:
        received += 1
        if received == 3:
            break
    await stream.close()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        after = _stats(llm)
        if after["fail"]["count"] != before["fail"]["count"] or after["success"]["count"] != before["success"]["count"]:
            break
        await asyncio.sleep(0.05)
    assert after["fail"]["count"] == before["fail"]["count"] + 1 and after["success"]["count"] == before["success"]["count"]
    reply = await client.chat.completions.create(model="tiny_llama", messages=MSG, max_tokens=2)
    assert reply.choices[0].message.content is not None


def test_unary_model_streams_as_one_chunk(llm):
    """A `decoupled: false` LLM answers once; a streaming client still gets a proper stream."""
    client = llm.client()
    kwargs = {"model": "tiny_unary", "prompt": "The quick brown fox", "temperature": 0, "max_tokens": 4}
    plain = client.completions.create(**kwargs)
    chunks = list(client.completions.create(**kwargs, stream=True))
    assert "".join(c.choices[0].text for c in chunks) == plain.choices[0].text
    assert [c.choices[0].finish_reason for c in chunks if c.choices[0].finish_reason] == [plain.choices[0].finish_reason]


def test_required_tool_choice_is_enforced(llm):
    def tool(name: str, values: list[str]) -> dict:
        return {
            "type": "function",
            "function": {
                "name": name,
                "parameters": {
                    "type": "object",
                    "properties": {"v": {"enum": values}},
                    "required": ["v"],
                    "additionalProperties": False,
                },
            },
        }

    tools = [tool("first", ["a", "b"]), tool("second", ["c"])]
    client = llm.client()
    reply = client.chat.completions.create(model="tiny_llama", messages=MSG, tools=tools, tool_choice="required", max_tokens=80, temperature=0)
    calls = reply.choices[0].message.tool_calls
    assert reply.choices[0].finish_reason == "tool_calls" and calls
    for call in calls:
        allowed = {"first": {"a", "b"}, "second": {"c"}}[call.function.name]
        assert json.loads(call.function.arguments)["v"] in allowed
    stream = client.chat.completions.create(model="tiny_llama", messages=MSG, tools=tools, tool_choice="required", max_tokens=80, temperature=0, stream=True)
    names, arguments = [], {}
    for chunk in stream:
        for call in chunk.choices[0].delta.tool_calls or []:
            if call.function.name:
                names.append(call.function.name)
            arguments[call.index] = arguments.get(call.index, "") + (call.function.arguments or "")
    assert names == [c.function.name for c in calls]  # greedy: the same calls, streamed
    assert [json.loads(arguments[i]) for i in sorted(arguments)] == [json.loads(c.function.arguments) for c in calls]

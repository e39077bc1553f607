"""Completions and embeddings end to end, with the openai SDK and raw HTTP."""

from __future__ import annotations

import base64
import json

import numpy as np
import openai
import pytest

from tests.openai.conftest import raw_post, sse_events
from tests.openai.mock_models import vector


def test_completion_and_echo(llama3_server):
    client = llama3_server.client()
    reply = client.completions.create(model="mock_llm", prompt="#say:a b c# tail")
    choice = reply.choices[0]
    assert choice.text == "a b c" and choice.finish_reason == "stop" and choice.logprobs is None
    assert reply.id.startswith("cmpl-") and reply.object == "text_completion" and reply.system_fingerprint is None
    assert reply.usage.prompt_tokens == 4 and reply.usage.completion_tokens == 3 and reply.usage.total_tokens == 7
    echoed = client.completions.create(model="mock_llm", prompt="#say:a b c# tail", echo=True)
    assert echoed.choices[0].text == "#say:a b c# taila b c"
    short = client.completions.create(model="mock_llm", prompt="#say:a b c#", max_tokens=1)
    assert short.choices[0].text == "a" and short.choices[0].finish_reason == "length"


async def test_completion_streaming_equals_non_streaming(llama3_server):
    client = llama3_server.async_client()
    plain = await client.completions.create(model="mock_llm", prompt="#say:one two three#", echo=True)
    stream = await client.completions.create(
        model="mock_llm", prompt="#say:one two three#", echo=True, stream=True, stream_options={"include_usage": True}
    )
    chunks = [c async for c in stream]
    assert "".join(c.choices[0].text for c in chunks if c.choices) == plain.choices[0].text
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["stop"]
    assert chunks[-1].choices == [] and chunks[-1].usage.model_dump() == plain.usage.model_dump()


def test_batched_prompts_token_ids_and_n(llama3_server, tokenizer):
    client = llama3_server.client()
    reply = client.completions.create(model="mock_llm", prompt=["#say:a#", "#say:b c#"], n=2)
    assert [(c.index, c.text) for c in reply.choices] == [(0, "a"), (1, "a"), (2, "b c"), (3, "b c")]
    assert reply.usage.prompt_tokens == 3 and reply.usage.completion_tokens == 6
    ids = tokenizer("#say:tok ids#", add_special_tokens=False)["input_ids"]
    reply = client.completions.create(model="mock_llm", prompt=ids)
    assert reply.choices[0].text == "tok ids"


def test_completion_logprobs(llama3_server):
    client = llama3_server.client()
    plain = client.completions.create(model="mock_llm", prompt="#say:hi there you#", logprobs=2)
    lp = plain.choices[0].logprobs
    assert lp.tokens == ["hi", " there", " you"] and lp.text_offset == [0, 2, 8]
    assert lp.token_logprobs == [-0.25] * 3 and lp.top_logprobs[0] == {"hi": -0.25, "?": -2.0}
    stream = client.completions.create(model="mock_llm", prompt="#say:hi there you#", logprobs=2, stream=True)
    tokens, offsets = [], []
    for chunk in stream:
        if chunk.choices[0].logprobs:
            tokens += chunk.choices[0].logprobs.tokens
            offsets += chunk.choices[0].logprobs.text_offset
    assert tokens == lp.tokens and offsets == lp.text_offset


def test_completion_errors(llama3_server):
    url = llama3_server.base_url + "/completions"
    cases = [
        ({"prompt": ""}, 400, "prompt must be non-empty"),
        ({"prompt": "x", "suffix": "y"}, 400, "suffix is not currently supported"),
        ({"prompt": "x", "logit_bias": {"0": 0}}, 400, "logit bias is not supported"),
        ({"prompt": "x", "logprobs": 7}, 400, "less than or equal to 5"),
        ({"prompt": "x", "best_of": 2}, 400, "best_of"),
        ({"prompt": "x", "stream_options": {"include_usage": True}}, 400, "`stream_options` can only be used when `stream` is True"),
        ({}, 400, "Field required"),
    ]
    for extra, status, message in cases:
        got, _, raw = raw_post(url, {"model": "mock_llm", **extra})
        assert got == status and message in json.loads(raw)["error"]["message"], (extra, raw)
    status, _, raw = raw_post(url, {"model": "mock_embed", "prompt": "x"})
    assert status == 400 and "embedding model" in json.loads(raw)["error"]["message"]
    status, _, raw = raw_post(url, {"model": "mock_llm", "prompt": "#fail# a b c", "stream": True})
    events = sse_events(raw)
    assert status == 200 and "error" in events[-2] and events[-1] == "[DONE]"


# ------------------------------------------------------------------------------ embeddings
def test_embeddings(llama3_server):
    client = llama3_server.client()
    text = "The food was delicious and the waiter..."
    reply = client.embeddings.create(model="mock_embed", input=text)
    assert reply.object == "list" and reply.model == "mock_embed"
    (item,) = reply.data
    assert item.object == "embedding" and item.index == 0
    assert np.allclose(item.embedding, vector(text), atol=1e-6)
    assert reply.usage.prompt_tokens == reply.usage.total_tokens == 7
    batch = client.embeddings.create(model="mock_embed", input=["a b", "c", "d e f"])
    assert [d.index for d in batch.data] == [0, 1, 2]
    assert np.allclose(batch.data[2].embedding, vector("d e f"), atol=1e-6)
    assert batch.usage.prompt_tokens == 6
    ids = client.embeddings.create(model="mock_embed", input=[101, 1996, 2833])
    assert np.allclose(ids.data[0].embedding, vector([101, 1996, 2833]), atol=1e-6) and ids.usage.prompt_tokens == 3


def test_embedding_formats_and_dimensions(llama3_server):
    url = llama3_server.base_url + "/embeddings"
    status, _, raw = raw_post(url, {"model": "mock_embed", "input": "hello", "encoding_format": "base64"})
    encoded = json.loads(raw)["data"][0]["embedding"]
    assert status == 200 and np.allclose(np.frombuffer(base64.b64decode(encoded), dtype="<f4"), vector("hello"), atol=1e-6)
    status, _, raw = raw_post(url, {"model": "mock_embed", "input": "hello", "dimensions": 3})
    short = json.loads(raw)["data"][0]["embedding"]
    full = np.array(vector("hello")[:3])
    assert status == 200 and np.allclose(short, full / np.linalg.norm(full), atol=1e-6)
    # the SDK's default base64 round trip
    reply = llama3_server.client().embeddings.create(model="mock_embed", input="hello", encoding_format="base64")
    assert isinstance(reply.data[0].embedding, str)


def test_embedding_errors(llama3_server):
    url = llama3_server.base_url + "/embeddings"
    cases = [
        ({"model": "mock_embed", "input": ""}, 400, "input"),
        ({"model": "mock_embed", "input": []}, 400, "input"),
        ({"model": "mock_embed", "input": 123}, 400, "input"),
        ({"model": "mock_embed", "input": "x", "encoding_format": "invalid"}, 400, "encoding_format"),
        ({"model": "mock_embed"}, 400, "input"),
        ({"input": "x"}, 400, "model"),
        ({"model": "Invalid", "input": "x"}, 404, "model"),
        ({"model": "mock_llm", "input": "x"}, 400, "model"),
    ]
    for body, status, param in cases:
        got, _, raw = raw_post(url, body)
        error = json.loads(raw)["error"]
        assert got == status and error["param"] == param, (body, error)
    with pytest.raises(openai.BadRequestError):
        llama3_server.client().embeddings.create(model="mock_llm", input="x")

"""Prefix caching and batched prefill seen through the OpenAI API: the real server with the
tiny Llama twice, with the prefix cache (the default) and without (`enable_prefix_caching:
false` in model.json), driven by the `openai` SDK."""

from __future__ import annotations

import asyncio

import pytest

from tests.openai.conftest import OpenAIServer

pytest.importorskip("torch")
pytest.importorskip("transformers")

from tests.llm_fixtures import llm_assets, write_llm_model  # noqa: E402

ENGINE = {"cpu_threads": 1}
SYSTEM = (
    "You are the assistant of an inference server. Inference servers answer requests from many "
    "clients at once, batching them together. The quick brown fox jumps over the lazy dog. "
    "Machine learning is a field of study. The wheel was invented in Mesopotamia around 3500 BC. "
    "Numbers: 0 1 2 3 4 5 6 7 8 9 10 42 100 3.14. Hello world! How are you today? I am fine."
)
QUESTIONS = ["What is the weather in Dallas?", "Tell me a story about a cat.", "Say this is a test."]
GREEDY = {"temperature": 0, "max_tokens": 8}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    assets = llm_assets()
    repo = tmp_path_factory.mktemp("prefix-caching") / "models"
    write_llm_model(repo, "tiny_llama", assets.llama, model_json=ENGINE)
    write_llm_model(repo, "tiny_llama_uncached", assets.llama,
                    model_json={**ENGINE, "enable_prefix_caching": False})
    server = OpenAIServer(repo).start(timeout=240)
    yield server
    assert server.stop() == 0, server.log()[-3000:]


def _messages(question: str) -> list[dict]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]


def test_a_shared_system_prompt_is_served_from_the_cache_with_the_same_answers(server):
    client = server.client()
    cached, uncached = [], []
    for question in QUESTIONS:
        cached.append(client.chat.completions.create(model="tiny_llama", messages=_messages(question), **GREEDY))
        uncached.append(client.chat.completions.create(model="tiny_llama_uncached", messages=_messages(question), **GREEDY))
    assert [r.choices[0].message.content for r in cached] == [r.choices[0].message.content for r in uncached]
    assert [r.usage.prompt_tokens for r in cached] == [r.usage.prompt_tokens for r in uncached]
    assert all(r.usage.prompt_tokens_details.cached_tokens == 0 for r in uncached)
    assert cached[0].usage.prompt_tokens_details.cached_tokens == 0
    for reply in cached[1:]:  # the system prompt's blocks, never the whole prompt
        assert 64 <= reply.usage.prompt_tokens_details.cached_tokens < reply.usage.prompt_tokens


def test_streamed_usage_and_completions_report_cached_tokens(server):
    client = server.client()
    prompt = SYSTEM + " Once upon a time"
    first = client.completions.create(model="tiny_llama", prompt=prompt, **GREEDY)
    stream = client.completions.create(
        model="tiny_llama", prompt=prompt, stream=True, stream_options={"include_usage": True}, **GREEDY
    )
    chunks = list(stream)
    usage = chunks[-1].usage
    assert "".join(c.choices[0].text for c in chunks if c.choices) == first.choices[0].text
    assert usage.prompt_tokens == first.usage.prompt_tokens
    assert 64 <= usage.prompt_tokens_details.cached_tokens < usage.prompt_tokens
    assert usage.prompt_tokens_details.cached_tokens >= first.usage.prompt_tokens_details.cached_tokens


def test_the_responses_api_reports_the_cached_input_tokens(server):
    client = server.client()
    first = client.responses.create(model="tiny_llama", instructions=SYSTEM, input=QUESTIONS[0], max_output_tokens=8,
                                    temperature=0)
    again = client.responses.create(model="tiny_llama", instructions=SYSTEM, input=QUESTIONS[1], max_output_tokens=8,
                                    temperature=0)
    assert again.usage.input_tokens_details.cached_tokens >= 64
    assert again.usage.input_tokens_details.cached_tokens < again.usage.input_tokens
    assert first.usage.input_tokens_details.cached_tokens <= again.usage.input_tokens_details.cached_tokens


async def test_a_burst_answers_as_requests_one_at_a_time(server):
    client = server.async_client()
    prompts = [f"{question} {i}" for i, question in enumerate(QUESTIONS * 2)]
    alone = [
        (await client.completions.create(model="tiny_llama_uncached", prompt=p, **GREEDY)).choices[0].text
        for p in prompts
    ]
    burst = await asyncio.gather(
        *(client.completions.create(model="tiny_llama_uncached", prompt=p, **GREEDY) for p in prompts)
    )
    assert [r.choices[0].text for r in burst] == alone

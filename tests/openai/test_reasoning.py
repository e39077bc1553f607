"""Reasoning output and the hermes, pythonic and deepseek_v3 tool-call parsers end to end: the
real server with `--reasoning-parser` / `--tool-call-parser`, the mock model writing what each
model family writes, the `openai` SDK reading it, streamed (word by word, and in pieces of a few
characters that cut the tags) and not; `chat_template_kwargs` reaching the chat template."""

from __future__ import annotations

import json

import pytest

from tests.openai.conftest import OpenAIServer, raw_post
from tests.openai.test_tools import DALLAS, TOOLS

FORECAST = {**DALLAS, "num_days": 2}

# A Qwen3-style ChatML template, down to what matters here: tools, tool calls, and the empty think
# block it closes in the prompt when `enable_thinking` is false.
QWEN3_TEMPLATE = """
{%- if tools %}<|im_start|>system
<tools>
{%- for tool in tools %}
{{ tool | tojson }}
{%- endfor %}
</tools><|im_end|>
{% endif %}
{%- for message in messages %}<|im_start|>{{ message.role }}
{%- if message.tool_calls %}
{%- for call in message.tool_calls %}
<tool_call>
{"name": "{{ call.function.name }}", "arguments": {{ call.function.arguments | tojson }}}
</tool_call>
{%- endfor %}
{%- else %}
{{ message.content }}
{%- endif %}<|im_end|>
{% endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% if enable_thinking is defined and enable_thinking is false %}<think>

</think>

{% endif %}{% endif %}"""


def ask(directive: str, chars: int | None = None) -> list[dict]:
    pieces = f" #chars:{chars}#" if chars else ""
    return [{"role": "user", "content": f"What is the weather in Dallas, Texas? {directive}{pieces}"}]


def fold(stream) -> dict:
    """A streamed answer put together, checking each chunk's shape on the way."""
    out = {"reasoning": "", "content": "", "calls": {}, "ids": [], "finishes": [], "order": []}
    for chunk in stream:
        (choice,) = chunk.choices
        delta = choice.delta
        reasoning = getattr(delta, "reasoning_content", None)
        if reasoning:
            out["reasoning"] += reasoning
            out["order"].append("reasoning")
        if delta.content:
            out["content"] += delta.content
            out["order"].append("content")
        if choice.finish_reason:
            out["finishes"].append(choice.finish_reason)
        for call in delta.tool_calls or []:
            out["order"].append("call")
            entry = out["calls"].setdefault(call.index, {"name": None, "arguments": ""})
            if call.id:
                assert call.type == "function" and call.function.name and entry["name"] is None
                out["ids"].append(call.id)
                entry["name"] = call.function.name
            assert entry["name"] is not None, "arguments before the call's name"
            entry["arguments"] += call.function.arguments or ""
    return out


def reasoning_before_answer(order: list[str]) -> bool:
    last = max((i for i, kind in enumerate(order) if kind == "reasoning"), default=-1)
    return all(kind == "reasoning" for kind in order[: last + 1])


# ---------------------------------------------------------------------------- qwen3 + hermes
@pytest.fixture(scope="module")
def qwen3_server(mock_repo, tmp_path_factory):
    template = tmp_path_factory.mktemp("qwen3") / "chat_template.jinja"
    template.write_text(QWEN3_TEMPLATE)
    args = ["--reasoning-parser", "qwen3", "--tool-call-parser", "hermes", "--chat-template", str(template)]
    server = OpenAIServer(mock_repo, args, kserve=False).start()
    yield server
    assert server.stop() == 0, server.log()


def test_qwen3_reasoning_apart(qwen3_server):
    client = qwen3_server.client()
    message = client.chat.completions.create(model="mock_llm", messages=ask("#think:qwen3_think#")).choices[0].message
    assert message.reasoning_content == "\nThe user asks about Dallas. Sunny, I recall.\n"
    assert message.content == "\n\nIt is sunny in Dallas." and message.tool_calls is None
    for chars in (None, 3):
        folded = fold(client.chat.completions.create(model="mock_llm", messages=ask("#think:qwen3_think#", chars), stream=True))
        assert folded["reasoning"] == message.reasoning_content and folded["content"] == message.content
        assert folded["finishes"] == ["stop"] and reasoning_before_answer(folded["order"])


def test_enable_thinking_false_reaches_the_template(qwen3_server):
    client = qwen3_server.client()
    off = {"chat_template_kwargs": {"enable_thinking": False}}
    reply = client.chat.completions.create(model="mock_llm", messages=ask("#think:qwen3_think#"), extra_body=off)
    assert reply.choices[0].message.reasoning_content is None
    assert reply.choices[0].message.content == "It is sunny in Dallas."
    stream = client.chat.completions.create(model="mock_llm", messages=ask("#think:qwen3_think#", 4), extra_body=off, stream=True)
    folded = fold(stream)
    assert folded["reasoning"] == "" and folded["content"] == "It is sunny in Dallas."


def test_qwen3_reasoning_then_a_hermes_call(qwen3_server):
    client = qwen3_server.client()
    reply = client.chat.completions.create(model="mock_llm", messages=ask("#think:qwen3_tool#"), tools=TOOLS)
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    assert choice.message.reasoning_content == "\nI need the weather tool.\n"
    (call,) = choice.message.tool_calls
    assert call.function.name == "get_current_weather" and json.loads(call.function.arguments) == DALLAS
    assert call.id.startswith("chatcmpl-tool-")
    for chars in (None, 3):
        stream = client.chat.completions.create(model="mock_llm", messages=ask("#think:qwen3_tool#", chars), tools=TOOLS, stream=True)
        folded = fold(stream)
        assert folded["reasoning"] == "\nI need the weather tool.\n" and folded["content"].strip() == ""
        assert folded["finishes"] == ["tool_calls"] and len(folded["ids"]) == 1
        assert folded["calls"][0]["name"] == "get_current_weather"
        assert json.loads(folded["calls"][0]["arguments"]) == DALLAS
        assert reasoning_before_answer(folded["order"])


def test_hermes_two_calls_after_text(qwen3_server):
    client = qwen3_server.client()
    off = {"chat_template_kwargs": {"enable_thinking": False}}
    reply = client.chat.completions.create(model="mock_llm", messages=ask("#tool:hermes_two#"), tools=TOOLS, extra_body=off)
    message = reply.choices[0].message
    assert message.content == "Let me check both." and message.reasoning_content is None
    assert [c.function.name for c in message.tool_calls] == ["get_current_weather", "get_n_day_weather_forecast"]
    assert [json.loads(c.function.arguments) for c in message.tool_calls] == [DALLAS, FORECAST]
    assert message.tool_calls[0].id != message.tool_calls[1].id
    for chars in (None, 5):
        stream = client.chat.completions.create(
            model="mock_llm", messages=ask("#tool:hermes_two#", chars), tools=TOOLS, extra_body=off, stream=True
        )
        folded = fold(stream)
        assert folded["content"] == "Let me check both.\n" and folded["finishes"] == ["tool_calls"]
        assert [folded["calls"][i]["name"] for i in (0, 1)] == ["get_current_weather", "get_n_day_weather_forecast"]
        assert [json.loads(folded["calls"][i]["arguments"]) for i in (0, 1)] == [DALLAS, FORECAST]
        assert len(set(folded["ids"])) == 2


def test_chat_template_kwargs_mistakes_are_400(qwen3_server):
    url = qwen3_server.base_url + "/chat/completions"
    base = {"model": "mock_llm", "messages": ask("#think:qwen3_think#")}
    status, _, raw = raw_post(url, {**base, "chat_template_kwargs": "enable_thinking"})
    error = json.loads(raw)["error"]
    assert status == 400 and error["type"] == "invalid_request_error" and "chat_template_kwargs" in error["message"]
    for key in ("tokenize", "chat_template", "return_dict"):
        status, _, raw = raw_post(url, {**base, "chat_template_kwargs": {key: True}})
        error = json.loads(raw)["error"]
        assert status == 400 and error["param"] == "chat_template_kwargs" and repr(key) in error["message"]


# ------------------------------------------------------------------- deepseek_r1 + deepseek_v3
@pytest.fixture(scope="module")
def deepseek_server(mock_repo):
    args = ["--reasoning-parser", "deepseek_r1", "--tool-call-parser", "deepseek_v3", "--max-tool-call-parse-bytes", "500"]
    server = OpenAIServer(mock_repo, args, kserve=False).start()
    yield server
    assert server.stop() == 0, server.log()


def test_r1_reasoning_without_an_opening_tag(deepseek_server):
    client = deepseek_server.client()
    message = client.chat.completions.create(model="mock_llm", messages=ask("#tool:r1#")).choices[0].message
    assert message.reasoning_content == "The user asks for 2 + 2. That is 4.\n"
    assert message.content == "\n\nThe answer is 4."
    for chars in (None, 2):
        folded = fold(client.chat.completions.create(model="mock_llm", messages=ask("#tool:r1#", chars), stream=True))
        assert (folded["reasoning"], folded["content"]) == (message.reasoning_content, message.content)
        assert reasoning_before_answer(folded["order"])
    # no `</think>` at all: the model never stopped thinking
    message = client.chat.completions.create(model="mock_llm", messages=ask("#say:still thinking#")).choices[0].message
    assert message.reasoning_content == "still thinking" and message.content is None


def test_r1_long_reasoning_then_deepseek_v3_calls(deepseek_server):
    """The reasoning (over 700 characters) does not count against the 500-byte tool-parse cap."""
    client = deepseek_server.client()
    reply = client.chat.completions.create(model="mock_llm", messages=ask("#tool:r1_tool#"), tools=TOOLS)
    message = reply.choices[0].message
    assert reply.choices[0].finish_reason == "tool_calls" and message.content is None
    assert len(message.reasoning_content) > 700 and message.reasoning_content.startswith("Let me think")
    assert [c.function.name for c in message.tool_calls] == ["get_current_weather", "get_n_day_weather_forecast"]
    assert [json.loads(c.function.arguments) for c in message.tool_calls] == [DALLAS, FORECAST]
    for chars in (None, 7):
        stream = client.chat.completions.create(model="mock_llm", messages=ask("#tool:r1_tool#", chars), tools=TOOLS, stream=True)
        folded = fold(stream)
        assert folded["finishes"] == ["tool_calls"] and folded["reasoning"] == message.reasoning_content
        assert [folded["calls"][i]["name"] for i in (0, 1)] == ["get_current_weather", "get_n_day_weather_forecast"]
        assert [json.loads(folded["calls"][i]["arguments"]) for i in (0, 1)] == [DALLAS, FORECAST]
        assert folded["content"].strip() == "" and reasoning_before_answer(folded["order"])


def test_guided_answers_have_no_reasoning_part(deepseek_server):
    """The backends constrain the whole output, so a JSON answer is content, not reasoning."""
    client = deepseek_server.client()
    reply = client.chat.completions.create(model="mock_llm", messages=ask("#tool:r1#"), response_format={"type": "json_object"})
    assert reply.choices[0].message.content == "{}" and reply.choices[0].message.reasoning_content is None
    named = {"type": "function", "function": {"name": "get_current_weather"}}
    folded = fold(client.chat.completions.create(model="mock_llm", messages=ask("#tool:r1#"), tools=TOOLS, tool_choice=named, stream=True))
    assert folded["reasoning"] == "" and folded["calls"][0]["name"] == "get_current_weather"
    assert json.loads(folded["calls"][0]["arguments"]) == {"city": "x", "state": "x", "unit": "celsius"}


# ------------------------------------------------------------------------------------ pythonic
@pytest.fixture(scope="module")
def pythonic_server(mock_repo):
    server = OpenAIServer(mock_repo, ["--tool-call-parser", "pythonic"], kserve=False).start()
    yield server
    assert server.stop() == 0, server.log()


def test_pythonic_calls(pythonic_server):
    client = pythonic_server.client()
    reply = client.chat.completions.create(model="mock_llm", messages=ask("#tool:pythonic_two#"), tools=TOOLS)
    message = reply.choices[0].message
    assert reply.choices[0].finish_reason == "tool_calls" and message.content is None
    assert [c.function.name for c in message.tool_calls] == ["get_current_weather", "get_n_day_weather_forecast"]
    assert [json.loads(c.function.arguments) for c in message.tool_calls] == [DALLAS, FORECAST]
    for chars in (None, 4):
        stream = client.chat.completions.create(model="mock_llm", messages=ask("#tool:pythonic_two#", chars), tools=TOOLS, stream=True)
        folded = fold(stream)
        assert folded["finishes"] == ["tool_calls"] and folded["content"] == ""
        assert [json.loads(folded["calls"][i]["arguments"]) for i in (0, 1)] == [DALLAS, FORECAST]


def test_pythonic_leaves_text_and_has_no_reasoning_field(pythonic_server):
    url = pythonic_server.base_url + "/chat/completions"
    status, _, raw = raw_post(url, {"model": "mock_llm", "messages": ask("#say:[1, 2] is a list#"), "tools": TOOLS})
    message = json.loads(raw)["choices"][0]["message"]
    assert status == 200 and message["content"] == "[1, 2] is a list" and message["tool_calls"] is None
    assert "reasoning_content" not in message  # no --reasoning-parser: the field is not sent


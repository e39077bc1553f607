"""The Responses API end to end: `/v1/responses` through the openai SDK (whole, streamed, and
the SDK's `responses.stream` helper), stored responses, `previous_response_id`, and refusals,
against `openinfer serve --openai-port` with the deterministic mock LLM."""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request

import openai
import pytest

from tests.hardening.oracle import wait_until
from tests.openai.conftest import OpenAIServer, raw_post

TEXT_EVENTS = [
    "response.output_item.added",
    "response.content_part.added",
    "response.output_text.delta",
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
]


def rendered(tokenizer, messages) -> str:
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def words(text: str) -> int:
    """How many tokens the mock counts: whitespace-led words."""
    return len(re.findall(r"\s*\S+|\s+", text))


def squeezed(types: list[str]) -> list[str]:
    """Event types with runs of one type folded into one, to compare orders."""
    return [t for i, t in enumerate(types) if i == 0 or types[i - 1] != t]


def request(server, method: str, path: str) -> tuple[int, dict]:
    req = urllib.request.Request(server.url + path, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


# ------------------------------------------------------------------------------ whole answers
def test_create_answers_text_with_usage(llama3_server, tokenizer):
    started = time.time()
    reply = llama3_server.client().responses.create(model="mock_llm", input="#say:Hello there#")
    assert reply.id.startswith("resp_") and reply.object == "response" and reply.model == "mock_llm"
    assert started - 2 <= reply.created_at <= time.time() + 2
    assert reply.status == "completed" and reply.error is None and reply.incomplete_details is None
    assert reply.output_text == "Hello there"
    (item,) = reply.output
    assert item.type == "message" and item.role == "assistant" and item.status == "completed"
    assert item.id.startswith("msg_")
    assert [(c.type, c.text, c.annotations) for c in item.content] == [("output_text", "Hello there", [])]
    prompt = rendered(tokenizer, [{"role": "user", "content": "#say:Hello there#"}])
    usage = reply.usage
    assert (usage.input_tokens, usage.output_tokens) == (words(prompt), 2)
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens
    assert usage.input_tokens_details.cached_tokens == 0 and usage.output_tokens_details.reasoning_tokens == 0
    assert reply.store is True and reply.tools == [] and reply.tool_choice == "auto"


def test_instructions_roles_and_text_parts_reach_the_template(llama3_server, tokenizer):
    client = llama3_server.client()
    reply = client.responses.create(model="mock_llm", instructions="Be brief.", input="What is machine learning?")
    expected = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is machine learning?"}]
    assert reply.output_text == rendered(tokenizer, expected)  # the mock answers with its prompt
    assert reply.instructions == "Be brief."
    items = [
        {"role": "developer", "content": "Answer in English."},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "one"}, {"type": "input_text", "text": "two"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok", "annotations": []}]},
        {"role": "user", "content": "three"},
    ]
    reply = client.responses.create(model="mock_llm", input=items)
    expected = [
        {"role": "system", "content": "Answer in English."},
        {"role": "user", "content": "one\ntwo"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "three"},
    ]
    assert reply.output_text == rendered(tokenizer, expected)


def test_sampling_fields_map_to_the_chat_parameters(llama3_server):
    reply = llama3_server.client().responses.create(
        model="mock_llm", input="#params#", temperature=0.5, top_p=0.75, max_output_tokens=300
    )
    params = json.loads(reply.output_text)
    assert (params["temperature"], params["top_p"], params["max_tokens"]) == (0.5, 0.75, 300)
    assert (reply.temperature, reply.top_p, reply.max_output_tokens) == (0.5, 0.75, 300)


def test_max_output_tokens_leaves_the_response_incomplete(llama3_server):
    client = llama3_server.client()
    reply = client.responses.create(model="mock_llm", input="#say:a b c d e#", max_output_tokens=2)
    assert reply.status == "incomplete" and reply.incomplete_details.reason == "max_output_tokens"
    assert reply.output_text == "a b" and reply.output[0].status == "incomplete"
    events = list(client.responses.create(model="mock_llm", input="#say:a b c d e#", max_output_tokens=2, stream=True))
    assert events[-1].type == "response.incomplete"
    assert events[-1].response.incomplete_details.reason == "max_output_tokens"
    assert events[-1].response.output[0].content[0].text == "a b"


def test_text_format_json_schema_is_guided(llama3_server):
    schema = {"type": "object", "properties": {"colour": {"type": "string", "enum": ["red", "blue"]}}, "required": ["colour"]}
    reply = llama3_server.client().responses.create(
        model="mock_llm", input="Pick a colour.", text={"format": {"type": "json_schema", "name": "pick", "schema": schema}}
    )
    assert json.loads(reply.output_text) == {"colour": "red"}
    assert reply.text.format.type == "json_schema"


# ---------------------------------------------------------------------------------- streaming
async def test_stream_events_in_order_and_equal_to_the_whole_answer(llama3_server):
    client = llama3_server.async_client()
    whole = await client.responses.create(model="mock_llm", input="#say:one two three four#")
    events = [event async for event in await client.responses.create(model="mock_llm", input="#say:one two three four#", stream=True)]
    types = [event.type for event in events]
    assert squeezed(types) == ["response.created", "response.in_progress", *TEXT_EVENTS, "response.completed"]
    assert types.count("response.output_text.delta") == 4  # one per token
    assert [event.sequence_number for event in events] == list(range(len(events)))
    created, completed = events[0].response, events[-1].response
    assert created.status == "in_progress" and created.output == [] and created.id == completed.id
    assert created.id.startswith("resp_")
    deltas = [event.delta for event in events if event.type == "response.output_text.delta"]
    assert "".join(deltas) == "one two three four" == whole.output_text
    done = next(event for event in events if event.type == "response.output_text.done")
    item = next(event.item for event in events if event.type == "response.output_item.done")
    assert done.text == item.content[0].text == completed.output_text == whole.output_text
    assert {event.item_id for event in events if hasattr(event, "item_id")} == {item.id}
    assert completed.status == "completed"
    assert completed.usage.model_dump() == whole.usage.model_dump()


def test_sdk_stream_helper_gives_the_final_response(llama3_server):
    client = llama3_server.client()
    with client.responses.stream(model="mock_llm", input="#say:red green blue#") as stream:
        deltas = [event.delta for event in stream if event.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert "".join(deltas) == "red green blue" == final.output_text
    assert final.status == "completed" and final.usage.output_tokens == 3
    assert client.responses.retrieve(final.id).output_text == "red green blue"  # streamed answers are stored too


def test_sse_framing_names_each_event(llama3_server):
    body = {"model": "mock_llm", "input": "#say:a b#", "stream": True}
    status, headers, raw = raw_post(llama3_server.base_url + "/responses", body)
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    text = raw.decode()
    assert text.endswith("\n\n") and "[DONE]" not in text
    blocks = text.split("\n\n")[:-1]
    for block in blocks:
        name, data = block.split("\n")
        assert name.startswith("event: ") and data.startswith("data: ")
        assert json.loads(data[len("data: "):])["type"] == name[len("event: "):]
    assert blocks[-1].startswith("event: response.completed\n")


def test_backend_failure_mid_stream_is_response_failed(llama3_server):
    client = llama3_server.client()
    events = list(client.responses.create(model="mock_llm", input="#fail# a b c d", stream=True))
    assert events[-1].type == "response.failed"
    failed = events[-1].response
    assert failed.status == "failed" and "mock failure mid-stream" in failed.error.message
    assert failed.error.code == "server_error"
    assert [event.sequence_number for event in events] == list(range(len(events)))


def _inference_counts(server) -> tuple[int, int]:
    with urllib.request.urlopen(f"http://127.0.0.1:{server.http_port}/v2/models/mock_llm/stats") as reply:
        stats = json.loads(reply.read())["model_stats"][0]["inference_stats"]
    return stats["success"]["count"], stats["fail"]["count"]


def test_client_leaving_a_stream_cancels_the_generation(llama3_server):
    """The mock would stream 150 tokens (3 s); closing the stream after a few events abandons it."""
    succeeded, failed = _inference_counts(llama3_server)
    client = llama3_server.client()
    stream = client.responses.create(model="mock_llm", input="#long#", stream=True)
    for event in stream:
        if event.type == "response.output_text.delta":
            break
    stream.close()
    after = wait_until(lambda: (counts := _inference_counts(llama3_server)) != (succeeded, failed) and counts)
    assert after == (succeeded, failed + 1)  # recorded as abandoned, not completed


# ------------------------------------------------------------------ stored responses, turns
def test_previous_response_id_continues_without_earlier_instructions(llama3_server, tokenizer):
    client = llama3_server.client()
    first = client.responses.create(model="mock_llm", instructions="Be kind.", input="My name is Ada.")
    second = client.responses.create(model="mock_llm", previous_response_id=first.id, input="What is my name?")
    turns = [
        {"role": "user", "content": "My name is Ada."},
        {"role": "assistant", "content": first.output_text},
        {"role": "user", "content": "What is my name?"},
    ]
    assert second.output_text == rendered(tokenizer, turns)
    assert second.previous_response_id == first.id and second.instructions is None
    third = client.responses.create(
        model="mock_llm", previous_response_id=second.id, instructions="Be short.", input="Thanks."
    )
    turns = [
        {"role": "system", "content": "Be short."},
        *turns,
        {"role": "assistant", "content": second.output_text},
        {"role": "user", "content": "Thanks."},
    ]
    assert third.output_text == rendered(tokenizer, turns)


async def test_a_streamed_response_can_be_continued(llama3_server, tokenizer):
    client = llama3_server.async_client()
    stream = await client.responses.create(model="mock_llm", input="Remember blue.", stream=True)
    first = [event async for event in stream][-1].response
    second = await client.responses.create(model="mock_llm", previous_response_id=first.id, input="Which colour?")
    turns = [
        {"role": "user", "content": "Remember blue."},
        {"role": "assistant", "content": first.output_text},
        {"role": "user", "content": "Which colour?"},
    ]
    assert second.output_text == rendered(tokenizer, turns)


def test_get_and_delete_a_stored_response(llama3_server):
    client = llama3_server.client()
    reply = client.responses.create(model="mock_llm", input="#say:keep me#", metadata={"topic": "test"})
    fetched = client.responses.retrieve(reply.id)
    assert fetched.model_dump() == reply.model_dump()
    assert fetched.metadata == {"topic": "test"}
    assert request(llama3_server, "DELETE", f"/v1/responses/{reply.id}") == (
        200, {"id": reply.id, "object": "response", "deleted": True}
    )
    with pytest.raises(openai.NotFoundError) as info:
        client.responses.retrieve(reply.id)
    assert info.value.body == {
        "message": f"Response with id '{reply.id}' not found.", "type": "not_found_error", "param": "response_id", "code": 404
    }
    with pytest.raises(openai.NotFoundError):
        client.responses.delete(reply.id)
    with pytest.raises(openai.NotFoundError) as info:
        client.responses.create(model="mock_llm", previous_response_id=reply.id, input="again")
    assert info.value.body["code"] == "previous_response_not_found"
    other = client.responses.create(model="mock_llm", input="#say:gone#")
    assert client.responses.delete(other.id) is None  # the SDK's delete answers nothing
    status, body = request(llama3_server, "GET", "/v1/responses/not-a-response")
    assert status == 400 and body["error"]["param"] == "response_id"
    assert "Expected an ID that begins with 'resp'" in body["error"]["message"]


def test_store_false_is_not_kept(llama3_server):
    client = llama3_server.client()
    reply = client.responses.create(model="mock_llm", input="#say:forget me#", store=False)
    assert reply.output_text == "forget me" and reply.store is False
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(reply.id)
    with pytest.raises(openai.NotFoundError) as info:
        client.responses.create(model="mock_llm", previous_response_id=reply.id, input="more")
    assert info.value.status_code == 404
    assert info.value.body == {
        "message": f"Previous response with id '{reply.id}' not found.",
        "type": "not_found_error",
        "param": "previous_response_id",
        "code": "previous_response_not_found",
    }
    streamed = list(client.responses.create(model="mock_llm", input="#say:x#", store=False, stream=True))[-1].response
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(streamed.id)


def test_the_store_keeps_the_most_recently_used(mock_repo):
    server = OpenAIServer(mock_repo, ["--responses-store-size", "2"]).start()
    try:
        client = server.client()
        first, second = (client.responses.create(model="mock_llm", input=f"#say:{n}#") for n in ("one", "two"))
        assert client.responses.retrieve(first.id).output_text == "one"  # now the most recently used
        third = client.responses.create(model="mock_llm", input="#say:three#")
        assert client.responses.retrieve(first.id).output_text == "one"
        assert client.responses.retrieve(third.id).output_text == "three"
        with pytest.raises(openai.NotFoundError):
            client.responses.retrieve(second.id)
    finally:
        assert server.stop() == 0, server.log()


# --------------------------------------------------------------------------------- refusals
@pytest.mark.parametrize(
    "extra, param, words_in_message",
    [
        ({"tools": [{"type": "web_search"}]}, "tools", "'web_search' is not supported"),
        ({"tool_choice": {"type": "web_search_preview"}}, "tool_choice", "not supported"),
        ({"background": True}, "background", "Background responses are not supported"),
        ({"include": ["message.output_text.logprobs"]}, "include", "include"),
        ({"reasoning": {"effort": "high"}}, "reasoning", "Reasoning options are not supported"),
        ({"conversation": "conv_1"}, "conversation", "previous_response_id"),
        ({"truncation": "auto"}, "truncation", "truncation 'auto' is not supported"),
        ({"prompt": {"id": "pmpt_1"}}, "prompt", "not supported"),
        ({"input": [{"type": "reasoning", "id": "rs_1", "summary": []}]}, "input", "type 'reasoning' are not supported"),
        ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "http://x"}]}]}, "input", "input_image"),
        ({"input": [{"role": "tool", "content": "x"}]}, "input", "role"),
        ({"temperature": 2.5}, "temperature", "less than or equal to 2"),
        ({"max_output_tokens": 0}, "max_output_tokens", "greater than or equal to 1"),
        ({"input": None}, "input", "input"),
    ],
)
def test_unsupported_features_and_bad_input_are_400(llama3_server, extra, param, words_in_message):
    body = {"model": "mock_llm", "input": "#say:x#", **extra}
    status, _, raw = raw_post(llama3_server.base_url + "/responses", body)
    error = json.loads(raw)["error"]
    assert status == 400, error
    assert error["type"] == "invalid_request_error" and error["param"] == param
    assert words_in_message in error["message"]


def test_unknown_model_and_unknown_previous_response_are_404(llama3_server):
    client = llama3_server.client()
    with pytest.raises(openai.NotFoundError) as info:
        client.responses.create(model="nope", input="x")
    assert info.value.body["code"] == "model_not_found"
    with pytest.raises(openai.NotFoundError) as info:
        client.responses.create(model="mock_llm", input="x", previous_response_id="resp_unknown")
    assert info.value.body["message"] == "Previous response with id 'resp_unknown' not found."
    status, _, raw = raw_post(llama3_server.base_url + "/responses", b"{not json")
    assert status == 400 and json.loads(raw)["error"]["code"] == "invalid_json"

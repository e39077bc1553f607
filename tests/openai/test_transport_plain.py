"""The OpenAI app and the KServe generate routes served through plain ASGI (uvicorn's own h11
protocol, no fast path): answers, server-sent events, the body limit, and a client that leaves
cancelling its generation."""

from __future__ import annotations

import asyncio
import json
import socket
import time
import urllib.request

import pytest

from openinfer.frontends.asgi.uvicorn_compat import PROTOCOL_ENV
from tests.openai.conftest import OpenAIServer, raw_post, sse_events

LIMIT = 1 << 16


@pytest.fixture(scope="module")
def plain_server(mock_repo):
    server = OpenAIServer(mock_repo, ["--log-verbose=1", f"--http-max-input-size={LIMIT}"], env={PROTOCOL_ENV: "h11"})
    server.start()
    yield server
    assert server.stop() == 0, server.log()


def _stats(server) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{server.http_port}/v2/models/mock_llm/stats") as reply:
        return json.loads(reply.read())["model_stats"][0]["inference_stats"]


def _wait_for_one_more_failure(server, before: dict) -> dict:
    deadline = time.monotonic() + 30
    after = _stats(server)
    while time.monotonic() < deadline and after["fail"]["count"] == before["fail"]["count"]:
        time.sleep(0.05)
        after = _stats(server)
    return after


def test_both_listeners_are_plain(plain_server):
    log = plain_server.log()
    assert log.count("serves through plain ASGI on uvicorn's h11 protocol") == 3, log  # KServe, metrics, OpenAI
    assert "uvicorn fast path" not in log


def test_chat_answer_and_stream(plain_server):
    client = plain_server.client()
    messages = [{"role": "user", "content": "#say:a b c#"}]
    reply = client.chat.completions.create(model="mock_llm", messages=messages)
    assert reply.choices[0].message.content == "a b c"
    status, headers, raw = raw_post(plain_server.base_url + "/chat/completions",
                                    {"model": "mock_llm", "messages": messages, "stream": True})
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    events = sse_events(raw)
    assert events[-1] == "[DONE]"
    assert "".join(e["choices"][0]["delta"].get("content") or "" for e in events[:-1]) == "a b c"


def test_generate_answer_and_stream(plain_server):
    url = f"http://127.0.0.1:{plain_server.http_port}/v2/models/mock_llm/"
    body = {"text_input": "#say:one two three#", "parameters": {"exclude_input_in_output": True}}
    status, _, raw = raw_post(url + "generate", body)
    assert status == 200 and json.loads(raw)["text_output"] == "one two three"
    status, _, raw = raw_post(url + "generate_stream", body)
    assert status == 200
    assert [e["text_output"] for e in sse_events(raw)] == ["one", " two", " three", ""]


def test_body_limit(plain_server):
    big = {"model": "mock_llm", "messages": [{"role": "user", "content": "x" * LIMIT}]}
    status, _, raw = raw_post(plain_server.base_url + "/chat/completions", big)
    assert status == 413 and "exceeds the maximum allowed input size" in json.loads(raw)["error"]["message"]
    status, _, raw = raw_post(f"http://127.0.0.1:{plain_server.http_port}/v2/models/mock_llm/generate",
                              {"text_input": "x" * LIMIT})
    assert status == 400 and "exceeds the maximum allowed input size" in json.loads(raw)["error"]


async def test_leaving_a_stream_cancels_the_request(plain_server):
    before = _stats(plain_server)
    client = plain_server.async_client()
    stream = await client.chat.completions.create(
        model="mock_llm", messages=[{"role": "user", "content": "#long#"}], stream=True
    )
    received = 0
    async for _chunk in stream:
        received += 1
        if received == 3:
            break
    await stream.close()
    after = await asyncio.to_thread(_wait_for_one_more_failure, plain_server, before)
    assert after["fail"]["count"] == before["fail"]["count"] + 1
    assert after["success"]["count"] == before["success"]["count"]


def test_leaving_before_the_answer_cancels_the_request(plain_server):
    """`generate` answers once, when the model is done; the mock streams for 3 s first."""
    before = _stats(plain_server)
    data = json.dumps({"text_input": "#long#", "parameters": {"stream": True}}).encode()
    sock = socket.create_connection(("127.0.0.1", plain_server.http_port))
    sock.sendall(b"POST /v2/models/mock_llm/generate HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                 b"content-length: %d\r\n\r\n" % len(data) + data)
    time.sleep(1)  # the generation is under way
    sock.close()
    after = _wait_for_one_more_failure(plain_server, before)
    assert after["fail"]["count"] == before["fail"]["count"] + 1
    assert after["success"]["count"] == before["success"]["count"]


def test_leaving_a_generate_stream_cancels_the_request(plain_server):
    """The KServe generate stream: a client that reads the first event and leaves ends the
    generation (counted as failed), and the stream it left ends there."""
    before = _stats(plain_server)
    data = json.dumps({"text_input": "#long#"}).encode()
    sock = socket.create_connection(("127.0.0.1", plain_server.http_port))
    sock.sendall(b"POST /v2/models/mock_llm/generate_stream HTTP/1.1\r\nhost: x\r\n"
                 b"content-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(data) + data)
    received = b""
    while b"data: " not in received:
        received += sock.recv(4096)
    assert received.startswith(b"HTTP/1.1 200")
    sock.close()
    after = _wait_for_one_more_failure(plain_server, before)
    assert after["fail"]["count"] == before["fail"]["count"] + 1
    assert after["success"]["count"] == before["success"]["count"]


async def test_streams_deliver_every_token_and_the_usage(plain_server):
    """Completions and chat completions streamed through the plain adapter, whose guard watches
    `receive` for the client leaving: nothing may end a stream that the client still reads."""
    client = plain_server.async_client()
    say = "#say:one two three four five#"
    stream = await client.completions.create(
        model="mock_llm", prompt=say, stream=True, stream_options={"include_usage": True}
    )
    chunks = [chunk async for chunk in stream]
    assert "".join(c.choices[0].text for c in chunks if c.choices) == "one two three four five"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 5
    stream = await client.chat.completions.create(
        model="mock_llm", messages=[{"role": "user", "content": say}], stream=True, stream_options={"include_usage": True}
    )
    chunks = [chunk async for chunk in stream]
    assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) == 5
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "one two three four five"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 5

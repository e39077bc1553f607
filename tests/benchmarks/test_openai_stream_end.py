"""``openinfer bench openai`` against a server that ends its streams without ``data: [DONE]``
(as ``transformers serve`` does): the end of the body ends the stream, and the missing sentinel
is counted as a note, not an error. A body cut off mid-way is still an error."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from aiohttp import web

from openinfer.bench.cli import main
from tests.helpers import free_port

TOKENS = 5


async def _completions(request: web.Request) -> web.StreamResponse:
    """Streamed completions of `max_tokens` events, a usage event, and no [DONE]. The model
    "cut" stops after two events by dropping the connection, so the chunked body never ends."""
    body = await request.json()
    reply = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await reply.prepare(request)
    tokens = int(body["max_tokens"])
    for i in range(tokens):
        if body["model"] == "cut" and i == 2:
            assert request.transport is not None
            request.transport.abort()
            return reply
        choice = {"index": 0, "text": f" t{i}", "finish_reason": "length" if i == tokens - 1 else None}
        await reply.write(b"data: " + json.dumps({"object": "text_completion", "choices": [choice]}).encode() + b"\n\n")
    usage = {"prompt_tokens": 3, "completion_tokens": tokens, "total_tokens": 3 + tokens}
    await reply.write(b"data: " + json.dumps({"object": "text_completion", "choices": [], "usage": usage}).encode()
                      + b"\n\n")
    await reply.write_eof()
    return reply


@pytest.fixture(scope="module")
def no_done_server() -> Iterator[str]:
    """The server above on a free loopback port, in a thread with its own event loop."""
    app = web.Application()
    app.router.add_post("/v1/completions", _completions)
    runner = web.AppRunner(app)
    port = free_port()
    loop = asyncio.new_event_loop()
    listening = threading.Event()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(runner.setup())
        loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", port).start())
        listening.set()
        loop.run_forever()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert listening.wait(30), "the SSE server did not start"
    yield f"127.0.0.1:{port}"
    asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(30)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(30)


def _bench(url: str, model: str, out: Path) -> int:
    return main(["openai", "-m", model, "--url", url, "--endpoint-type", "completions", "--streaming",
                 "--output-tokens-mean", str(TOKENS), "--concurrency", "2", "--request-count", "6",
                 "--json", str(out), "--no-progress"])


def test_a_stream_without_done_ends_with_its_body(no_done_server: str, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.json"
    assert _bench(no_done_server, "no-done", out) == 0
    doc = orjson.loads(out.read_bytes())
    assert doc["errors"] == 0 and doc["request_count"] == 6
    assert doc["streams_without_done"] == 6
    m = doc["metrics"]
    assert m["output_sequence_length"]["avg"] == TOKENS  # the usage event, after the last token, was read
    assert 0 < m["time_to_first_token"]["avg"] <= m["request_latency"]["avg"]
    assert "6 stream(s) ended without data: [DONE]" in capsys.readouterr().out


def test_a_body_cut_off_mid_stream_is_still_an_error(no_done_server: str, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    assert _bench(no_done_server, "cut", out) == 1
    doc = orjson.loads(out.read_bytes())
    assert doc["request_count"] == 0 and doc["errors"] == 6
    assert doc["first_error"].startswith(("IncompleteReadError", "ConnectionResetError")), doc["first_error"]

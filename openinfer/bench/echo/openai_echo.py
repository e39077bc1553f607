"""A fake OpenAI-compatible server: fixed tokens at a fixed pace, in OpenAI's shapes.

It lets ``openinfer bench openai`` be tested (and its own overhead measured) without a model:
``max_tokens`` tokens come back, streamed as server-sent events when asked, with ``usage``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import orjson

_JSON = [(b"content-type", b"application/json")]
_SSE = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]


class OpenAIEcho:
    def __init__(self, token_delay_s: float = 0.0) -> None:
        self.token_delay_s = token_delay_s
        self.requests = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await receive()
            await send({"type": "lifespan.startup.complete"})
            await receive()
            await send({"type": "lifespan.shutdown.complete"})
            return
        body = b""
        more = True
        while more:
            msg = await receive()
            body += msg.get("body", b"")
            more = msg.get("more_body", False)
        path = scope["path"]
        if path == "/v1/models":
            await _send(send, 200, _JSON, orjson.dumps(
                {"object": "list", "data": [{"id": "echo", "object": "model"}]}))
            return
        if scope["method"] != "POST":
            await _send(send, 404, _JSON, b'{"error":{"message":"not found"}}')
            return
        req = orjson.loads(body or b"{}")
        self.requests += 1
        if path == "/v1/embeddings":
            inputs = req.get("input")
            inputs = inputs if isinstance(inputs, list) else [inputs]
            data = [{"object": "embedding", "index": i, "embedding": [0.0] * 16}
                    for i in range(len(inputs))]
            n = sum(len(str(x).split()) for x in inputs)
            await _send(send, 200, _JSON, orjson.dumps({
                "object": "list", "data": data, "model": req.get("model"),
                "usage": {"prompt_tokens": n, "total_tokens": n}}))
            return
        chat = path == "/v1/chat/completions"
        if not chat and path != "/v1/completions":
            await _send(send, 404, _JSON, b'{"error":{"message":"not found"}}')
            return
        prompt = (" ".join(str(m.get("content", "")) for m in req.get("messages", []))
                  if chat else str(req.get("prompt", "")))
        n_in = len(prompt.split())
        n_out = int(req.get("max_completion_tokens") or req.get("max_tokens") or 16)
        usage = {"prompt_tokens": n_in, "completion_tokens": n_out,
                 "total_tokens": n_in + n_out}
        base = {"id": f"cmpl-{self.requests}", "created": int(time.time()),
                "model": req.get("model")}
        if not req.get("stream"):
            await asyncio.sleep(self.token_delay_s * n_out)
            text = " tok" * n_out
            choice = ({"index": 0, "message": {"role": "assistant", "content": text},
                       "finish_reason": "length"} if chat else
                      {"index": 0, "text": text, "finish_reason": "length"})
            await _send(send, 200, _JSON, orjson.dumps({
                **base, "object": "chat.completion" if chat else "text_completion",
                "choices": [choice], "usage": usage}))
            return
        await send({"type": "http.response.start", "status": 200, "headers": _SSE})
        obj = "chat.completion.chunk" if chat else "text_completion"
        for i in range(n_out):
            await asyncio.sleep(self.token_delay_s)
            choice = ({"index": 0, "delta": {"content": " tok"}, "finish_reason": None}
                      if chat else {"index": 0, "text": " tok", "finish_reason": None})
            if i == n_out - 1:
                choice["finish_reason"] = "length"
            await send({"type": "http.response.body", "more_body": True,
                        "body": b"data: " + orjson.dumps(
                            {**base, "object": obj, "choices": [choice]}) + b"\n\n"})
        if (req.get("stream_options") or {}).get("include_usage"):
            await send({"type": "http.response.body", "more_body": True,
                        "body": b"data: " + orjson.dumps(
                            {**base, "object": obj, "choices": [], "usage": usage}) + b"\n\n"})
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})


async def _send(send: Any, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})

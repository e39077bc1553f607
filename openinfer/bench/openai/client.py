"""One OpenAI request, timed the way genai-perf times it.

Time to first token is measured to the first event that carries content; the request ends at
the last event. Bodies are read over the same raw keep-alive client as the v2 path.

A stream ends where its HTTP body ends. OpenAI closes it with ``data: [DONE]``, but servers that
leave the sentinel out (``transformers serve``) answer in full all the same, so a missing sentinel
is noted on the record, not an error; a body cut off mid-way still fails in the HTTP reader.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..httpconn import HttpConnection, encode_request

PATHS = {
    "chat": "/v1/chat/completions",
    "completions": "/v1/completions",
    "embeddings": "/v1/embeddings",
}


class OpenAIError(RuntimeError):
    """The server answered with an error status or an error event."""


@dataclass
class Record:
    """What one request produced, in nanoseconds from its start."""

    start_ns: int = 0
    first_ns: int = 0  # first content
    end_ns: int = 0
    chunk_ns: list[int] = field(default_factory=list)  # each content-bearing event
    text: str = ""
    usage: dict[str, int] = field(default_factory=dict)
    input_tokens: int = 0
    done_sentinel: bool = False  # a stream that ended with `data: [DONE]`


def build_body(endpoint: str, model: str, prompt: str, max_tokens: int, stream: bool,
               extra: dict[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model}
    if endpoint == "embeddings":
        body["input"] = prompt
    else:
        if endpoint == "chat":
            body["messages"] = [{"role": "user", "content": prompt}]
        else:
            body["prompt"] = prompt
        body["max_tokens"] = max_tokens
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
    body.update(extra)
    return body


def _content(endpoint: str, event: dict[str, Any]) -> str:
    choices = event.get("choices") or []
    if not choices:
        return ""
    c = choices[0]
    if endpoint == "chat":
        if "delta" in c:
            d = c.get("delta") or {}
            return str(d.get("content") or "") + str(d.get("reasoning_content") or "")
        return str((c.get("message") or {}).get("content") or "")
    return str(c.get("text") or "")


async def send(conn: HttpConnection, host: str, endpoint: str, body: dict[str, Any]) -> Record:
    data = encode_request("POST", host, PATHS[endpoint], orjson.dumps(body),
                          {"Content-Type": "application/json", "Accept": "*/*"})
    rec = Record()
    t0 = time.perf_counter_ns()
    rec.start_ns = t0
    if not body.get("stream"):
        resp = await conn.request(data)
        rec.end_ns = rec.first_ns = time.perf_counter_ns() - t0
        if resp.status != 200:
            raise OpenAIError(f"HTTP {resp.status}: {resp.body[:300].decode('utf-8', 'replace')}")
        doc = orjson.loads(resp.body)
        rec.usage = doc.get("usage") or {}
        if endpoint != "embeddings":
            rec.text = _content(endpoint, doc)
            rec.chunk_ns = [rec.end_ns]
        elif not doc.get("data"):
            raise OpenAIError("embeddings response has no data")
        return rec
    status, _, chunks = await conn.stream(data)
    if status != 200:
        raw = b"".join([c async for c in chunks])
        raise OpenAIError(f"HTTP {status}: {raw[:300].decode('utf-8', 'replace')}")
    buf = b""
    parts: list[str] = []
    async for chunk in chunks:
        now = time.perf_counter_ns() - t0
        buf += chunk
        while b"\n\n" in buf:
            event, buf = buf.split(b"\n\n", 1)
            for line in event.split(b"\n"):
                line = line.strip()
                if not line.startswith(b"data:"):
                    continue
                payload = line[5:].strip()
                if payload == b"[DONE]":
                    rec.done_sentinel = True
                    continue
                doc = orjson.loads(payload)
                if "error" in doc:
                    raise OpenAIError(str(doc["error"]))
                if doc.get("usage"):
                    rec.usage = doc["usage"]
                text = _content(endpoint, doc)
                if text:
                    if not rec.first_ns:
                        rec.first_ns = now
                    rec.chunk_ns.append(now)
                    parts.append(text)
        rec.end_ns = now
    rec.text = "".join(parts)
    return rec

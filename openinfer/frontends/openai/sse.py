"""Server-sent events as OpenAI streams them: `data: <json>\\n\\n` ... `data: [DONE]\\n\\n`.

An error after the stream has started cannot change the status code any more, so it is sent as
one `data: {"error": {...}}` event, followed by `[DONE]` like every other stream.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import orjson

from ...core.errors import OpenInferError
from .errors import error_payload

log = logging.getLogger("openinfer.openai")

DONE = b"data: [DONE]\n\n"


def event(payload: Any) -> bytes:
    return b"data: " + orjson.dumps(payload) + b"\n\n"


async def sse(chunks: AsyncIterator[dict[str, Any]], *, done: bool = True) -> AsyncIterator[bytes]:
    try:
        async for chunk in chunks:
            yield event(chunk)
    except (OpenInferError, ValueError, RuntimeError, KeyError, TypeError) as exc:
        if not isinstance(exc, OpenInferError):
            log.exception("error while streaming")
        yield event(error_payload(exc)[1])
    if done:
        yield DONE

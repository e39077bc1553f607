"""A streamed chat completion as the Responses API's typed events, in the order OpenAI sends them.

response.created, response.in_progress; per text item: output_item.added, content_part.added,
output_text.delta..., output_text.done, content_part.done, output_item.done; per function call:
output_item.added, function_call_arguments.delta..., function_call_arguments.done,
output_item.done; then response.completed (or .incomplete at the token limit, .failed when
generation broke). Every event carries the next `sequence_number`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from typing import Any

from ..errors import error_payload
from ..sse import STREAM_ERRORS
from .output import (
    COMPLETED,
    FAILED,
    IN_PROGRESS,
    ResponseShape,
    function_call_item,
    item_id,
    message_item,
    status_of,
    text_part,
    usage,
)


class _Sequence:
    """Numbers the events of one stream."""

    def __init__(self) -> None:
        self.next = 0

    def __call__(self, type_: str, **fields: Any) -> dict[str, Any]:
        event = {"type": type_, **fields, "sequence_number": self.next}
        self.next += 1
        return event


class _Text:
    def __init__(self, index: int) -> None:
        self.id = item_id("msg")
        self.index = index
        self.text = ""


class _Call:
    def __init__(self, index: int, call_id: str, name: str) -> None:
        self.id = item_id("fc")
        self.index = index
        self.call_id = call_id
        self.name = name
        self.arguments = ""


class OutputEvents:
    """Opens, feeds and closes output items as chat deltas arrive; `output` holds the finished
    items (and, after a failure, the unfinished ones as they stood)."""

    def __init__(self, event: _Sequence) -> None:
        self.event = event
        self.output: list[dict[str, Any]] = []
        self.text: _Text | None = None
        self.call: _Call | None = None

    def _where(self, item: _Text | _Call) -> dict[str, Any]:
        return {"item_id": item.id, "output_index": item.index}

    def _open_text(self) -> list[dict[str, Any]]:
        events = self._close_call(COMPLETED)
        self.text = text = _Text(len(self.output))
        self.output.append(message_item(text.id, None, IN_PROGRESS))
        return events + [
            self.event("response.output_item.added", output_index=text.index, item=message_item(text.id, None, IN_PROGRESS)),
            self.event("response.content_part.added", **self._where(text), content_index=0, part=text_part("")),
        ]

    def _close_text(self, status: str) -> list[dict[str, Any]]:
        text, self.text = self.text, None
        if text is None:
            return []
        self.output[text.index] = message_item(text.id, text.text, status)
        return [
            self.event("response.output_text.done", **self._where(text), content_index=0, text=text.text, logprobs=[]),
            self.event("response.content_part.done", **self._where(text), content_index=0, part=text_part(text.text)),
            self.event("response.output_item.done", output_index=text.index, item=self.output[text.index]),
        ]

    def _close_call(self, status: str) -> list[dict[str, Any]]:
        call, self.call = self.call, None
        if call is None:
            return []
        self.output[call.index] = function_call_item(call.id, call.call_id, call.name, call.arguments, status)
        return [
            self.event("response.function_call_arguments.done", **self._where(call), arguments=call.arguments),
            self.event("response.output_item.done", output_index=call.index, item=self.output[call.index]),
        ]

    def content(self, delta: str) -> list[dict[str, Any]]:
        events = self._open_text() if self.text is None else []
        assert self.text is not None
        self.text.text += delta
        self.output[self.text.index]["content"] = [text_part(self.text.text)]
        return events + [
            self.event("response.output_text.delta", **self._where(self.text), content_index=0, delta=delta, logprobs=[])
        ]

    def tool_call(self, delta: dict[str, Any]) -> list[dict[str, Any]]:
        """A chat tool-call delta: one with an `id` starts a call, the others add arguments."""
        events: list[dict[str, Any]] = []
        function = delta.get("function") or {}
        if delta.get("id") or self.call is None:
            events += self._close_text(COMPLETED) + self._close_call(COMPLETED)
            self.call = call = _Call(len(self.output), delta.get("id") or item_id("call"), function.get("name", ""))
            opened = function_call_item(call.id, call.call_id, call.name, "", IN_PROGRESS)
            self.output.append(dict(opened))
            events.append(self.event("response.output_item.added", output_index=call.index, item=opened))
        call = self.call
        arguments = function.get("arguments") or ""
        if arguments:
            call.arguments += arguments
            self.output[call.index]["arguments"] = call.arguments
            events.append(self.event("response.function_call_arguments.delta", **self._where(call), delta=arguments))
        return events

    def finish(self, status: str) -> list[dict[str, Any]]:
        """Close what is open; an answer with nothing in it still gets its (empty) message."""
        events = self._open_text() if not self.output else []
        return events + self._close_text(status) + self._close_call(status)


async def response_events(
    shape: ResponseShape,
    chunks: AsyncIterator[dict[str, Any]],
    on_done: Callable[[dict[str, Any]], None],
) -> AsyncIterator[dict[str, Any]]:
    """The typed events of one response; `on_done` receives the final Response object."""
    event = _Sequence()
    yield event("response.created", response=shape.response(IN_PROGRESS, []))
    yield event("response.in_progress", response=shape.response(IN_PROGRESS, []))
    items = OutputEvents(event)
    finish_reason: str | None = None
    chat_usage: dict[str, int] | None = None
    try:
        async with aclosing(chunks):  # type: ignore[type-var]
            async for chunk in chunks:
                chat_usage = chunk.get("usage") or chat_usage
                for choice in chunk["choices"]:
                    delta = choice["delta"]
                    found = items.content(delta["content"]) if delta.get("content") else []
                    for call in delta.get("tool_calls") or []:
                        found += items.tool_call(call)
                    finish_reason = choice.get("finish_reason") or finish_reason
                    for found_event in found:
                        yield found_event
    except STREAM_ERRORS as exc:
        message = error_payload(exc)[1]["error"]["message"]
        final = shape.response(FAILED, items.output, None, {"code": "server_error", "message": message})
        on_done(final)
        yield event("response.failed", response=final)
        return
    status = status_of(finish_reason)
    for closing in items.finish(status):
        yield closing
    final = shape.response(status, items.output, usage(chat_usage))
    on_done(final)
    yield event(f"response.{status}", response=final)

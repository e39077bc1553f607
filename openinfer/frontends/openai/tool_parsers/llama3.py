"""Llama 3.1/3.2/3.3 JSON tool calls: `<|python_tag|>{"name": f, "parameters": {...}}; {...}`.

An output is a tool call when it starts with `<|python_tag|>` or `{` (leading whitespace allowed);
several calls are separated by `;`. `"arguments"` is accepted in place of `"parameters"`.
Anything that does not parse stays plain content.
"""

from __future__ import annotations

import json

from .base import (
    ParsedOutput,
    StreamDelta,
    StreamParser,
    ToolCall,
    ToolParser,
    call_from_object,
    openai_call_id,
)
from .scanner import MarkedCallStream

BOT = "<|python_tag|>"


def _decode_calls(text: str) -> list[ToolCall] | None:
    decoder = json.JSONDecoder()
    calls: list[ToolCall] = []
    pos = 0
    while True:
        while pos < len(text) and text[pos] in " \t\r\n;":
            pos += 1
        if pos >= len(text):
            return calls
        try:
            obj, pos = decoder.raw_decode(text, pos)
        except ValueError:
            return None
        call = call_from_object(obj, openai_call_id, ascii_only=True)  # json.dumps' default, as Triton
        if call is None:
            return None
        calls.append(call)


class Llama3Parser(ToolParser):
    name = "llama3"

    def parse(self, text: str) -> ParsedOutput:
        body = text.lstrip()
        if body.startswith(BOT):
            body = body[len(BOT) :]
        elif not body.startswith("{"):
            return ParsedOutput(text)
        calls = _decode_calls(body)
        if not calls:
            return ParsedOutput(text)
        return ParsedOutput(None, calls)

    def stream(self) -> StreamParser:
        return Llama3Stream()


class Llama3Stream(MarkedCallStream):
    def __init__(self) -> None:
        super().__init__(openai_call_id)

    def feed(self, text: str) -> StreamDelta:
        if self._mode == "text":
            return StreamDelta(content=text)
        if self._mode == "tool":
            return self._tool(text)
        self._held += text
        head = self._held.lstrip()
        if not head or BOT.startswith(head):
            return StreamDelta()
        if head.startswith(BOT):
            self._mode = "tool"
            held, self._held = head[len(BOT) :], ""
            return self._tool(held)
        if head.startswith("{"):
            self._mode = "tool"
            held, self._held = self._held, ""
            return self._tool(held)
        self._mode = "text"
        held, self._held = self._held, ""
        return StreamDelta(content=held)

    def finish(self) -> StreamDelta:
        if self._mode == "undecided":
            held, self._held = self._held, ""
            return StreamDelta(content=held)
        if self._mode == "tool":
            return self._finish_tool()
        return StreamDelta()

"""Mistral Instruct / Nemo tool calls: `[TOOL_CALLS][{"name": f, "arguments": {...}}, ...]`.

Ids are nine alphanumeric characters (Mistral's templates reject others). Text before the
`[TOOL_CALLS]` token stays content. Unlike Triton, a `[` in ordinary prose does not switch a
stream into tool mode: only `[TOOL_CALLS]`, or an output that starts with `[{`, does.
"""

from __future__ import annotations

import json
import re

from ..markers import partial_tail
from .base import (
    ParsedOutput,
    StreamDelta,
    StreamParser,
    ToolCall,
    ToolParser,
    call_from_object,
    mistral_call_id,
)
from .scanner import MarkedCallStream

BOT = "[TOOL_CALLS]"
_ARRAY = re.compile(r"\[{.*}\]", re.DOTALL)


def _calls_from(value: object) -> list[ToolCall] | None:
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list) or not value:
        return None
    calls = []
    for item in value:
        call = call_from_object(item, mistral_call_id)
        if call is None:
            return None
        calls.append(call)
    return calls


class MistralParser(ToolParser):
    name = "mistral"

    def parse(self, text: str) -> ParsedOutput:
        index = text.find(BOT)
        if index >= 0:
            before, body = text[:index], text[index:].replace(BOT, "").strip()
        elif text.lstrip().startswith("["):
            before, body = "", text.strip()
        else:
            return ParsedOutput(text)
        try:
            calls = _calls_from(json.loads(body))
        except ValueError:
            match = _ARRAY.search(body)
            try:
                calls = _calls_from(json.loads(match.group(0))) if match else None
            except ValueError:
                calls = None
        if not calls:
            return ParsedOutput(text)
        return ParsedOutput(before.strip() or None, calls)

    def stream(self) -> StreamParser:
        return MistralStream()


class MistralStream(MarkedCallStream):
    def __init__(self) -> None:
        super().__init__(mistral_call_id)

    def feed(self, text: str) -> StreamDelta:
        if self._mode == "tool":
            return self._tool(text.replace(BOT, ""))
        self._held += text
        index = self._held.find(BOT)
        if index >= 0:
            before, after = self._held[:index], self._held[index + len(BOT) :]
            self._held = ""
            self._mode = "tool"
            delta = self._tool(after.replace(BOT, ""))
            delta.content = before + delta.content
            return delta
        if self._mode == "undecided":
            head = self._held.lstrip()
            after_bracket = head[1:].lstrip() if head.startswith("[") else None
            if not head or BOT.startswith(head) or after_bracket == "":
                return StreamDelta()  # could still become `[TOOL_CALLS]` or `[{`
            if after_bracket is not None and after_bracket.startswith("{"):
                self._mode = "tool"
                held, self._held = self._held, ""
                return self._tool(held)
            self._mode = "text"
        # plain text: send everything but a tail that could be the start of `[TOOL_CALLS]`
        keep = partial_tail(self._held, BOT)
        out = self._held[: len(self._held) - keep]
        self._held = self._held[len(self._held) - keep :]
        return StreamDelta(content=out)

    def finish(self) -> StreamDelta:
        if self._mode == "tool":
            return self._finish_tool()
        held, self._held = self._held, ""
        return StreamDelta(content=held)

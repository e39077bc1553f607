"""Hermes-style tool calls (Qwen 2.5 / Qwen 3, NousHermes), as their chat templates write them:

    Let me check.
    <tool_call>
    {"name": "get_weather", "arguments": {"city": "Paris"}}
    </tool_call>
    <tool_call>
    {"name": "get_time", "arguments": {"zone": "CET"}}
    </tool_call>

Text before the first `<tool_call>` is content; text between and after the blocks is dropped
(the templates write only newlines there). A last block the model did not close still counts.
An output whose first block holds no call object stays text.
"""

from __future__ import annotations

from ..markers import MarkerWatch
from .base import (
    StreamDelta,
    StreamParser,
    ToolParser,
    openai_call_id,
)
from .scanner import CallStreamer

START, END = "<tool_call>", "</tool_call>"


class HermesParser(ToolParser):
    name = "hermes"

    def stream(self) -> StreamParser:
        return HermesStream()


class HermesStream(StreamParser):
    """States: `text` (before the first block), `call` (inside a block: its JSON goes to the call
    streamer), `between` (after a block), `plain` (the "call" was not one: all of it is text)."""

    def __init__(self) -> None:
        self._state = "text"
        self._watch = MarkerWatch(START)
        self._calls = CallStreamer(openai_call_id)
        self._raw = ""  # the output from the first `<tool_call>` on, should it turn out to be text

    @property
    def called(self) -> bool:
        return bool(self._calls.calls)

    def feed(self, text: str) -> StreamDelta:
        if self._state == "plain":
            return StreamDelta(content=text)
        if self._state != "text":
            self._raw += text
        delta = StreamDelta()
        while True:
            before, after = self._watch.feed(text)
            if self._state == "text":
                delta.content += before
                if after is not None:
                    self._raw = START + after
            elif self._state == "call":
                _extend(delta, self._calls.feed(before))
            if after is None:
                break
            self._state = "call" if self._state != "call" else "between"
            self._watch = MarkerWatch(END if self._state == "call" else START)
            text = after
        if not self._calls.calls and (self._calls.rejected or self._calls.scanner.junk):
            return self._as_text(delta.content)
        return delta

    def finish(self) -> StreamDelta:
        if self._state == "plain":
            return StreamDelta()
        if self._state == "text":
            return StreamDelta(content=self._watch.flush())
        delta = StreamDelta()
        if self._state == "call":
            _extend(delta, self._calls.feed(self._watch.flush()))
        _extend(delta, self._calls.finish())
        if not self._calls.calls:
            return self._as_text("")
        return delta

    def _as_text(self, content: str) -> StreamDelta:
        self._state = "plain"
        raw, self._raw = self._raw, ""
        return StreamDelta(content=content + raw)


def _extend(delta: StreamDelta, more: StreamDelta) -> None:
    delta.content += more.content
    delta.tool_calls.extend(more.tool_calls)

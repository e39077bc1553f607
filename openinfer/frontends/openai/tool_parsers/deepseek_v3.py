"""DeepSeek V3 tool calls, as its chat template writes them (one line here, `\\n` where shown):

    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\\n```json\\n
    {"city": "Paris"}\\n```<｜tool▁call▁end｜>\\n<｜tool▁call▁begin｜>...<｜tool▁call▁end｜><｜tool▁calls▁end｜>

Text before `<｜tool▁calls▁begin｜>` is content. A call's name runs from `<｜tool▁sep｜>` to the end of
its line; its arguments are the JSON object that follows (the fence around it is not read), streamed
as the model writes them.
"""

from __future__ import annotations

import re

from ..markers import MarkerWatch
from .base import (
    StreamDelta,
    StreamParser,
    ToolCallDelta,
    ToolParser,
    openai_call_id,
)
from .scanner import ObjectScanner, coalesce

CALLS_BEGIN = "<\uff5ctool\u2581calls\u2581begin\uff5c>"
CALLS_END = "<\uff5ctool\u2581calls\u2581end\uff5c>"
CALL_BEGIN = "<\uff5ctool\u2581call\u2581begin\uff5c>"
CALL_END = "<\uff5ctool\u2581call\u2581end\uff5c>"
SEP = "<\uff5ctool\u2581sep\uff5c>"
_NAME = re.compile(r"\s*([^\s`{<]+)(?=[\s`{<])")


class DeepSeekV3Parser(ToolParser):
    name = "deepseek_v3"

    def stream(self) -> StreamParser:
        return DeepSeekV3Stream()


class DeepSeekV3Stream(StreamParser):
    """States: `text` (before the calls), `between` (waiting for a call), `head` (its type and
    name), `args` (its JSON object), `tail` (up to the call's end), `done`, and `plain` (the
    calls never parsed: all of it is text)."""

    def __init__(self) -> None:
        self._state = "text"
        self._watch = MarkerWatch(CALLS_BEGIN)
        self._buf = ""  # unread text of the calls section
        self._raw = ""  # the output from `<｜tool▁calls▁begin｜>` on, should it turn out to be text
        self._ids: list[str] = []
        self._args: ObjectScanner | None = None
        self._sent = 0  # characters of the current arguments already sent

    @property
    def called(self) -> bool:
        return bool(self._ids)

    def feed(self, text: str) -> StreamDelta:
        if self._state == "plain":
            return StreamDelta(content=text)
        if self._state == "done":
            return StreamDelta()  # what follows the calls is dropped
        delta = StreamDelta()
        if self._state == "text":
            delta.content, after = self._watch.feed(text)
            if after is None:
                return delta
            self._state, self._raw, text = "between", CALLS_BEGIN, after
        self._raw += text
        if self._args is not None:
            self._args.feed(text)
        else:
            self._buf += text
        self._advance(delta)
        return coalesce(delta)

    def finish(self) -> StreamDelta:
        if self._state == "text":
            return StreamDelta(content=self._watch.flush())
        if self._state != "plain" and not self._ids:
            self._state = "plain"
            return StreamDelta(content=self._raw)
        return StreamDelta()

    def _advance(self, delta: StreamDelta) -> None:
        while self._state not in ("done", "plain"):
            if self._state == "between":
                begin = self._buf.find(CALL_BEGIN)
                if begin < 0:
                    if CALLS_END in self._buf:
                        self._state, self._buf = "done", ""
                    return
                self._buf, self._state = self._buf[begin + len(CALL_BEGIN) :], "head"
            elif self._state == "head":
                if not self._head(delta):
                    return
            elif self._state == "args":
                if not self._arguments(delta):
                    return
            else:  # tail
                end = self._buf.find(CALL_END)
                if end < 0:
                    return
                self._buf, self._state = self._buf[end + len(CALL_END) :], "between"

    def _head(self, delta: StreamDelta) -> bool:
        """`function<｜tool▁sep｜>NAME` and what ends the name: the call's header goes out."""
        sep = self._buf.find(SEP)
        match = _NAME.match(self._buf, sep + len(SEP)) if sep >= 0 else None
        if match is None:
            return False
        self._ids.append(openai_call_id())
        delta.tool_calls.append(ToolCallDelta(len(self._ids) - 1, self._ids[-1], match.group(1), ""))
        self._buf, self._state = self._buf[match.end() :], "args"
        return True

    def _arguments(self, delta: StreamDelta) -> bool:
        """The JSON object after the name, sent as it arrives; `{}` when the call has none."""
        index = len(self._ids) - 1
        if self._args is None:
            brace, end = self._buf.find("{"), self._buf.find(CALL_END)
            if 0 <= end < brace or (brace < 0 and end >= 0):
                delta.tool_calls.append(ToolCallDelta(index, arguments="{}"))
                self._state = "tail"
                return True
            if brace < 0:
                return False
            self._args, self._sent = ObjectScanner(), 0
            self._args.feed(self._buf[brace:])
            self._buf = ""
        scanner = self._args
        obj = scanner.objects[0] if scanner.objects else None
        end = obj.end if obj is not None and obj.end is not None else scanner.pos
        if end > self._sent:
            delta.tool_calls.append(ToolCallDelta(index, arguments=scanner.buf[self._sent : end]))
            self._sent = end
        if obj is None or obj.end is None:
            return False
        self._buf, self._args, self._state = scanner.buf[obj.end :], None, "tail"
        return True

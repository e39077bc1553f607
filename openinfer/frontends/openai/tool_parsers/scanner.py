"""Incremental extraction of `{"name": ..., "<args>": {...}}` objects from streamed text.

The scanner reads each character once (no re-parsing of the accumulated text), tracks JSON
strings, escapes and nesting, and reports for the current top-level object which keys have
started and finished. The call streamer on top sends the function name once it is complete
and the raw text of the arguments as it arrives, so concatenated fragments are exactly the
arguments the model wrote. Objects may be separated by `,`/`;` and wrapped in `[...]`
(llama3: `{..}; {..}`, mistral and `tool_choice: required`: `[{..}, {..}]`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

from .base import ARGUMENT_KEYS, StreamDelta, StreamParser, ToolCallDelta

_SEPARATORS = " \t\r\n,;[]"


@dataclass
class _Value:
    key: str
    start: int
    end: int | None = None


@dataclass
class _Object:
    start: int
    values: list[_Value] = field(default_factory=list)
    end: int | None = None


class ObjectScanner:
    """Character-level JSON tracking of top-level objects in a growing buffer."""

    def __init__(self) -> None:
        self.buf = ""
        self.pos = 0
        self.objects: list[_Object] = []
        self.junk = False  # a non-separator, non-object character between objects
        self._depth = 0
        self._in_string = False
        self._escape = False
        self._expect = "key"  # at depth 1: key | colon | value | next
        self._key_start = -1
        self._value: _Value | None = None
        self._value_kind = ""  # string | nested | primitive

    @property
    def current(self) -> _Object | None:
        return self.objects[-1] if self.objects and self.objects[-1].end is None else None

    def feed(self, text: str) -> None:
        self.buf += text
        buf = self.buf
        while self.pos < len(buf) and not self.junk:
            self._step(buf[self.pos], self.pos)
            self.pos += 1

    def _step(self, ch: str, i: int) -> None:
        if self._depth == 0:
            if ch == "{":
                self.objects.append(_Object(i))
                self._depth = 1
                self._expect = "key"
            elif ch not in _SEPARATORS:
                self.junk = True
            return
        if self._in_string:
            if self._escape:
                self._escape = False
            elif ch == "\\":
                self._escape = True
            elif ch == '"':
                self._in_string = False
                if self._depth == 1:
                    self._string_closed(i)
            return
        if ch == '"':
            self._in_string = True
            if self._depth == 1:
                if self._expect == "key":
                    self._key_start = i
                elif self._expect == "value":
                    self._start_value(i, "string")
            return
        if ch in "{[":
            if self._depth == 1 and self._expect == "value":
                self._start_value(i, "nested")
            self._depth += 1
            return
        if ch in "}]":
            self._depth -= 1
            if self._depth == 1 and self._value is not None and self._value_kind == "nested":
                self._end_value(i + 1)
            elif self._depth == 0:
                if self._value is not None:
                    self._end_value(i)
                obj = self.objects[-1]
                obj.end = i + 1
            return
        if self._depth == 1:
            if ch == ":" and self._expect == "colon":
                self._expect = "value"
            elif ch == ",":
                if self._value is not None:
                    self._end_value(i)
                self._expect = "key"
            elif self._expect == "value" and not ch.isspace():
                self._start_value(i, "primitive")

    def _string_closed(self, i: int) -> None:
        if self._expect == "key":
            key = self.buf[self._key_start : i + 1]
            try:
                self._pending_key = json.loads(key)
            except ValueError:
                self._pending_key = key.strip('"')
            self._expect = "colon"
        elif self._value is not None and self._value_kind == "string":
            self._end_value(i + 1)

    def _start_value(self, i: int, kind: str) -> None:
        value = _Value(getattr(self, "_pending_key", ""), i)
        self._value = value
        self._value_kind = kind
        self.objects[-1].values.append(value)
        self._expect = "next"

    def _end_value(self, end: int) -> None:
        assert self._value is not None
        raw = self.buf[self._value.start : end]
        self._value.end = self._value.start + len(raw.rstrip())
        self._value = None
        self._value_kind = ""


@dataclass
class _CallState:
    id: str
    name_sent: bool = False
    args_sent: int = 0  # characters of the raw arguments already sent
    args_done: bool = False


class CallStreamer:
    """Tool-call deltas from a scanner; says `rejected` when the first object is not a call."""

    def __init__(self, new_id: Callable[[], str]) -> None:
        self.scanner = ObjectScanner()
        self.new_id = new_id
        self.calls: list[_CallState] = []
        self.rejected = False

    def feed(self, text: str) -> StreamDelta:
        self.scanner.feed(text)
        return self._emit(final=False)

    def finish(self) -> StreamDelta:
        return self._emit(final=True)

    def _emit(self, final: bool) -> StreamDelta:
        delta = StreamDelta()
        if self.rejected:
            return delta
        scanner = self.scanner
        for index, obj in enumerate(scanner.objects):
            keys = {v.key: v for v in obj.values}
            first = obj.values[0].key if obj.values else None
            if first is not None and first != "name" and first not in ARGUMENT_KEYS:
                self.rejected = self.rejected or index == 0  # not a call at all: it was text
                return delta
            name_value = keys.get("name")
            if name_value is None or name_value.end is None:
                continue
            try:
                name = json.loads(scanner.buf[name_value.start : name_value.end])
            except ValueError:
                name = None
            if not isinstance(name, str):
                if index == 0:
                    self.rejected = True
                return delta
            while len(self.calls) <= index:
                self.calls.append(_CallState(self.new_id()))
            state = self.calls[index]
            if not state.name_sent:
                delta.tool_calls.append(ToolCallDelta(index, state.id, name, ""))
                state.name_sent = True
            args = next((keys[k] for k in ARGUMENT_KEYS if k in keys), None)
            fragment = None
            if args is not None and not state.args_done:
                raw_end = args.end if args.end is not None else scanner.pos
                raw = scanner.buf[args.start : raw_end]
                if raw.startswith('"'):  # arguments given as a JSON string: send it decoded, whole
                    if args.end is not None:
                        try:
                            fragment = json.loads(raw)
                        except ValueError:
                            fragment = raw
                        state.args_done = True
                else:
                    fragment = raw[state.args_sent :]
                    state.args_sent = len(raw)
                    state.args_done = args.end is not None
            elif args is None and obj.end is not None and not state.args_done:
                fragment = "{}"
                state.args_done = True
            if fragment:
                delta.tool_calls.append(ToolCallDelta(index, arguments=fragment))
        return coalesce(delta)


def coalesce(delta: StreamDelta) -> StreamDelta:
    """Merge a call's header and its first fragment into one delta entry."""
    merged: list[ToolCallDelta] = []
    for item in delta.tool_calls:
        if merged and merged[-1].index == item.index and item.id is None and item.name is None:
            merged[-1].arguments = (merged[-1].arguments or "") + (item.arguments or "")
        else:
            merged.append(item)
    delta.tool_calls = merged
    return delta


class MarkedCallStream(StreamParser):
    """What the llama3 and mistral stream parsers share once they think a tool call began:
    stream the calls' deltas, and fall back to plain text if the "call" never parses."""

    def __init__(self, call_id: Callable[[], str]) -> None:
        self._held = ""
        self._mode = "undecided"  # undecided | text | tool
        self._calls = CallStreamer(call_id)
        self._tool_text = ""

    @property
    def called(self) -> bool:
        return bool(self._calls.calls)

    def _tool(self, text: str) -> StreamDelta:
        self._tool_text += text
        delta = self._calls.feed(text)
        if self._calls.rejected and not self._calls.calls:
            self._mode = "text"
            return StreamDelta(content=self._tool_text)
        return delta

    def _finish_tool(self) -> StreamDelta:
        delta = self._calls.finish()
        if not self._calls.calls:  # never became a call: it was text after all
            self._mode = "text"
            return StreamDelta(content=self._tool_text)
        return delta


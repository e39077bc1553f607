"""Pythonic tool calls (Llama 3.2, Llama 4): a Python list of calls with keyword arguments,

    [get_weather(city="Paris", days=2), get_time(zone='CET')]

optionally between Llama 4's `<|python_start|>` and `<|python_end|>`. An output is a call list
only when it starts with one. Each argument is read with `ast.parse` and `ast.literal_eval` (never
evaluated) and sent as JSON as soon as the comma or parenthesis after it arrives; a call's name and
id go out with its first argument. Anything that is not a list of such calls stays text.
"""

from __future__ import annotations

import ast
import json
from typing import Any

from .base import (
    StreamDelta,
    StreamParser,
    ToolCallDelta,
    ToolParser,
    openai_call_id,
)
from .scanner import coalesce

START = "<|python_start|>"
_QUOTES = "\"'"


def keyword(text: str) -> tuple[str, Any] | None:
    """`name=<literal>` as (name, value); None for anything else."""
    try:
        node = ast.parse(f"f({text})", mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if not isinstance(node, ast.Call) or node.args or len(node.keywords) != 1 or node.keywords[0].arg is None:
        return None
    try:
        return node.keywords[0].arg, ast.literal_eval(node.keywords[0].value)
    except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
        return None


def _is_name(text: str) -> bool:
    return bool(text) and all(part.isidentifier() for part in text.split("."))


class PythonicParser(ToolParser):
    name = "pythonic"

    def stream(self) -> StreamParser:
        return PythonicStream()


class PythonicStream(StreamParser):
    """States: `lead` (may still become a list), `list` (reading calls), `done` (after `]`: the
    rest is dropped), `plain` (not a call list: all of it is text)."""

    def __init__(self) -> None:
        self._state = "lead"
        self._raw = ""  # the output so far, should it turn out to be text
        self._buf = ""  # the list's text after `[`
        self._pos = 0
        self._depth = 1
        self._quote = ""  # the open string's quote: ' " ''' or \"\"\"
        self._escape = False
        self._mark = 0  # where the current call's name, or keyword argument, begins
        self._name: str | None = None  # the open call's name
        self._sent_args = 0  # keyword arguments of the open call already sent
        self._ids: list[str] = []

    @property
    def called(self) -> bool:
        return bool(self._ids)

    def feed(self, text: str) -> StreamDelta:
        if self._state == "plain":
            return StreamDelta(content=text)
        if self._state == "done":
            return StreamDelta()
        self._raw += text
        if self._state == "lead":
            body = self._raw.lstrip()
            if body.startswith(START):
                body = body[len(START) :].lstrip()
            elif START.startswith(body):
                return StreamDelta()
            if not body:
                return StreamDelta()
            if not body.startswith("["):
                return self._as_text()
            self._state, self._buf = "list", body[1:]
        else:
            self._buf += text
        return self._scan(final=False)

    def finish(self) -> StreamDelta:
        if self._state == "lead":
            return self._as_text()
        delta = self._scan(final=True) if self._state == "list" else StreamDelta()
        if self._state == "list" and not self._ids:
            return self._as_text()
        return delta

    def _as_text(self) -> StreamDelta:
        self._state = "plain"
        raw, self._raw = self._raw, ""
        return StreamDelta(content=raw)

    def _scan(self, final: bool) -> StreamDelta:
        """Read the new characters: strings, nesting, and the commas and parentheses that end
        arguments and calls. Long only in cases; each character is read once."""
        delta = StreamDelta()
        buf = self._buf
        while self._pos < len(buf) and self._state == "list":
            ch, pos = buf[self._pos], self._pos
            if self._quote:
                if self._escape:
                    self._escape = False
                elif ch == "\\":
                    self._escape = True
                elif buf.startswith(self._quote, pos):
                    self._pos += len(self._quote) - 1
                    self._quote = ""
                elif len(self._quote) == 3 and ch == self._quote[0] and len(buf) - pos < 3 and not final:
                    break  # maybe the start of the closing triple quote
            elif ch in _QUOTES:
                if len(buf) - pos < 3 and buf[pos:] == ch * (len(buf) - pos) and not final:
                    break  # one quote or a triple one: the next characters tell
                self._quote = ch * 3 if buf.startswith(ch * 3, pos) else ch
                self._pos += len(self._quote) - 1
            elif ch in "([{":
                if self._depth == 1 and not self._open_call(buf[self._mark : pos], ch):
                    return self._fail(delta)
                self._depth += 1
            elif ch in ")]}":
                self._depth -= 1
                if not self._close(buf, pos, delta):
                    return self._fail(delta)
            elif ch == "," and self._depth <= 2 and not self._comma(buf, pos, delta):
                return self._fail(delta)
            self._pos += 1
        return coalesce(delta)

    def _open_call(self, name: str, bracket: str) -> bool:
        if bracket != "(" or not _is_name(name.strip()):
            return False
        self._name, self._sent_args, self._mark = name.strip(), 0, self._pos + 1
        return True

    def _comma(self, buf: str, pos: int, delta: StreamDelta) -> bool:
        if self._depth == 1:  # between calls
            if buf[self._mark : pos].strip():
                return False
        elif not self._argument(buf[self._mark : pos], delta):
            return False
        self._mark = pos + 1
        return True

    def _close(self, buf: str, pos: int, delta: StreamDelta) -> bool:
        if self._depth == 1:  # the call's `)`
            if buf[pos] != ")" or not self._argument(buf[self._mark : pos], delta):
                return False
            self._send(delta, "}" if self._sent_args else "{}")
            self._name, self._mark = None, pos + 1
        elif self._depth == 0:  # the list's `]`
            if buf[pos] != "]" or buf[self._mark : pos].strip() or not self._ids:
                return False
            self._state = "done"
        return True

    def _argument(self, text: str, delta: StreamDelta) -> bool:
        """One `name=value` of the open call, sent as a JSON member; blank text is no argument."""
        if not text.strip():
            return True
        found = keyword(text)
        if found is None:
            return False
        try:
            value = json.dumps(found[1], ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError):
            return False
        self._send(delta, ("{" if not self._sent_args else ", ") + json.dumps(found[0]) + ": " + value)
        self._sent_args += 1
        return True

    def _send(self, delta: StreamDelta, fragment: str) -> None:
        if not self._sent_args and fragment != "}":
            self._ids.append(openai_call_id())
            delta.tool_calls.append(ToolCallDelta(len(self._ids) - 1, self._ids[-1], self._name, fragment))
        else:
            delta.tool_calls.append(ToolCallDelta(len(self._ids) - 1, arguments=fragment))

    def _fail(self, delta: StreamDelta) -> StreamDelta:
        """Not a call list after all: text if nothing was sent, else the rest is dropped."""
        if not self._ids:
            return self._as_text()
        self._state = "done"
        return coalesce(delta)

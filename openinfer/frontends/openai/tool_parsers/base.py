"""What a tool-call parser produces, for whole outputs and for streams."""

from __future__ import annotations

import abc
import json
import secrets
import string
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: The keys a `{"name": ..., <key>: {...}}` call object may carry its arguments under, in order.
ARGUMENT_KEYS = ("arguments", "parameters")


def openai_call_id() -> str:
    """A distinct id per call (OpenAI uses `call_...`, vLLM `chatcmpl-tool-...`)."""
    return f"chatcmpl-tool-{uuid.uuid4().hex}"


def mistral_call_id() -> str:
    """Mistral chat templates require exactly nine alphanumeric characters."""
    alphabet = string.ascii_letters + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(9))


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: str  # a JSON text

    def as_dict(self) -> dict:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


def call_from_object(obj: object, new_id: Callable[[], str], *, ascii_only: bool = False) -> ToolCall | None:
    """A `{"name": f, "arguments"|"parameters": {...}}` object as a call; None when it is not one."""
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    args: Any = next((obj[key] for key in ARGUMENT_KEYS if key in obj), {})
    arguments = args if isinstance(args, str) else json.dumps(args, ensure_ascii=ascii_only)
    return ToolCall(new_id(), obj["name"], arguments)


@dataclass
class ParsedOutput:
    """A whole output: text content (None when only calls were made) and the calls."""

    content: str | None
    tool_calls: list[ToolCall] = field(default_factory=list)
    reasoning: str | None = None  # set by the reasoning parser, never by a tool parser


@dataclass
class ToolCallDelta:
    index: int
    id: str | None = None
    name: str | None = None
    arguments: str | None = None

    def as_dict(self) -> dict:
        out: dict = {"index": self.index}
        if self.id is not None:
            out["id"] = self.id
            out["type"] = "function"
        function: dict = {}
        if self.name is not None:
            function["name"] = self.name
        if self.arguments is not None:
            function["arguments"] = self.arguments
        if function:
            out["function"] = function
        return out


@dataclass
class StreamDelta:
    content: str = ""
    tool_calls: list[ToolCallDelta] = field(default_factory=list)
    reasoning: str = ""  # set by the reasoning parser, never by a tool parser

    def __bool__(self) -> bool:
        return bool(self.content or self.tool_calls or self.reasoning)


class StreamParser(abc.ABC):
    """Turns text deltas into content and tool-call deltas, one request at a time."""

    @abc.abstractmethod
    def feed(self, text: str) -> StreamDelta:
        """The part of the output that can be sent now."""

    @abc.abstractmethod
    def finish(self) -> StreamDelta:
        """Whatever was held back, at the end of the output."""

    @property
    @abc.abstractmethod
    def called(self) -> bool:
        """Whether at least one tool call was emitted."""


class ToolParser(abc.ABC):
    """A model family's tool-call format."""

    name: str = ""

    @abc.abstractmethod
    def stream(self) -> StreamParser:
        """A parser for one streamed output."""

    def parse(self, text: str) -> ParsedOutput:
        """Split a whole output into content and calls; unparseable text stays content. By
        default by the stream parser's own rules (`parse_streamed`), so the two never disagree."""
        return parse_streamed(self.stream(), text)


def parse_streamed(stream: StreamParser, text: str) -> ParsedOutput:
    """A whole output parsed by feeding it to a stream parser, so the two never disagree. Calls
    whose arguments are not a JSON object (an output cut short) leave the text as content."""
    delta = stream.feed(text)
    tail = stream.finish()
    content = delta.content + tail.content
    calls: dict[int, ToolCall] = {}
    for item in delta.tool_calls + tail.tool_calls:
        call = calls.setdefault(item.index, ToolCall(item.id or "", item.name or "", ""))
        call.arguments += item.arguments or ""
    if not calls:
        return ParsedOutput(text)
    for call in calls.values():
        try:
            if not isinstance(json.loads(call.arguments), dict):
                return ParsedOutput(text)
        except ValueError:
            return ParsedOutput(text)
    return ParsedOutput(content.strip() or None, [calls[index] for index in sorted(calls)])

"""What a tool-call parser produces, for whole outputs and for streams."""

from __future__ import annotations

import abc
import secrets
import string
import uuid
from dataclasses import dataclass, field


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


@dataclass
class ParsedOutput:
    """A whole output: text content (None when only calls were made) and the calls."""

    content: str | None
    tool_calls: list[ToolCall] = field(default_factory=list)


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

    def __bool__(self) -> bool:
        return bool(self.content or self.tool_calls)


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
    def parse(self, text: str) -> ParsedOutput:
        """Split a whole output into content and calls; unparseable text stays content."""

    @abc.abstractmethod
    def stream(self) -> StreamParser:
        """A parser for one streamed output."""

"""Forced tool choices: a named function (the output is its arguments) or `required` (a JSON
array of `{name, parameters}` calls over every tool), both generated under a JSON schema."""

from __future__ import annotations

from typing import Any

from .base import StreamDelta, StreamParser, ToolCallDelta, openai_call_id
from .scanner import CallStreamer


def required_schema(tools: list[Any]) -> dict[str, Any]:
    """A JSON array of `{name, parameters}` items, one branch per tool (vLLM's `required`)."""
    return {
        "type": "array",
        "minItems": 1,
        "items": {
            "type": "object",
            "anyOf": [
                {
                    "properties": {
                        "name": {"type": "string", "enum": [tool.function.name]},
                        "parameters": tool.function.parameters or {"type": "object"},
                    },
                    "required": ["name", "parameters"],
                }
                for tool in tools
            ],
        },
    }


class NamedStream(StreamParser):
    """Forced function: the whole output is the arguments; name, id and type go out once."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.id = openai_call_id()
        self.sent = False

    @property
    def called(self) -> bool:
        return self.sent

    def feed(self, text: str) -> StreamDelta:
        if not self.sent:
            self.sent = True
            return StreamDelta(tool_calls=[ToolCallDelta(0, self.id, self.name, text)])
        return StreamDelta(tool_calls=[ToolCallDelta(0, arguments=text)] if text else [])

    def finish(self) -> StreamDelta:
        if not self.sent:
            return self.feed("")
        return StreamDelta()


class RequiredStream(StreamParser):
    """`tool_choice: required`: a JSON array of `{name, parameters}` objects."""

    def __init__(self) -> None:
        self.calls = CallStreamer(openai_call_id)
        self.text = ""

    @property
    def called(self) -> bool:
        return bool(self.calls.calls)

    def feed(self, text: str) -> StreamDelta:
        self.text += text
        return self.calls.feed(text)

    def finish(self) -> StreamDelta:
        delta = self.calls.finish()
        if not self.calls.calls:
            return StreamDelta(content=self.text)
        return delta

"""Tool-call parsers by name (`--tool-call-parser`)."""

from __future__ import annotations

from .base import ParsedOutput, StreamDelta, StreamParser, ToolCall, ToolCallDelta, ToolParser
from .llama3 import Llama3Parser
from .mistral import MistralParser

PARSERS: dict[str, type[ToolParser]] = {"llama3": Llama3Parser, "mistral": MistralParser}


def get_parser(name: str) -> ToolParser:
    try:
        return PARSERS[name]()
    except KeyError:
        raise ValueError(f"tool parser: '{name}' not found in tool_call_parsers ({sorted(PARSERS)})") from None


__all__ = [
    "PARSERS",
    "ParsedOutput",
    "StreamDelta",
    "StreamParser",
    "ToolCall",
    "ToolCallDelta",
    "ToolParser",
    "get_parser",
]

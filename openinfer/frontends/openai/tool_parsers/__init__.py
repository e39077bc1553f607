"""Tool-call parsers by name (`--tool-call-parser`), as vLLM names them."""

from __future__ import annotations

from .base import ParsedOutput, StreamDelta, StreamParser, ToolCall, ToolCallDelta, ToolParser
from .deepseek_v3 import DeepSeekV3Parser
from .hermes import HermesParser
from .llama3 import Llama3Parser
from .mistral import MistralParser
from .pythonic import PythonicParser

#: vLLM's names; llama3 and mistral first, as Triton lists them.
PARSERS: dict[str, type[ToolParser]] = {
    "llama3": Llama3Parser,
    "mistral": MistralParser,
    "hermes": HermesParser,
    "pythonic": PythonicParser,
    "deepseek_v3": DeepSeekV3Parser,
}


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

"""Reasoning parsers by name (`--reasoning-parser`), as vLLM names them."""

from __future__ import annotations

from .base import Reasoned, ReasoningParser, ReasoningStream, Split
from .think import DeepSeekR1Parser, Qwen3Parser

PARSERS: dict[str, type[ReasoningParser]] = {"deepseek_r1": DeepSeekR1Parser, "qwen3": Qwen3Parser}


def get_reasoning_parser(name: str) -> ReasoningParser:
    try:
        return PARSERS[name]()
    except KeyError:
        raise ValueError(f"reasoning parser: '{name}' not found in reasoning_parsers ({sorted(PARSERS)})") from None


__all__ = ["PARSERS", "Reasoned", "ReasoningParser", "ReasoningStream", "Split", "get_reasoning_parser"]

"""One choice's output taken apart: the reasoning first (`--reasoning-parser`), then tool calls
parsed from the answer that follows it, whole or as a stream."""

from __future__ import annotations

from collections.abc import Callable

from ..reasoning import ReasoningParser, ReasoningStream, Split
from ..tool_parsers import ParsedOutput, StreamDelta, StreamParser
from ..tool_parsers.scanner import coalesce


def parse_choice(text: str, reasoning: ReasoningParser | None, tools: Callable[[str], ParsedOutput]) -> ParsedOutput:
    """A whole output; with a reasoning parser an empty answer is `None`, as vLLM sends it."""
    if reasoning is None:
        return tools(text)
    reasoned = reasoning.split(text)
    parsed = tools(reasoned.content)
    parsed.reasoning = reasoned.reasoning
    if parsed.content == "":
        parsed.content = None
    return parsed


class ChoiceStream:
    """A streamed output: reasoning deltas, then content and tool-call deltas. `limit` caps the
    characters the tool-call parser reads (`--max-tool-call-parse-bytes`)."""

    def __init__(self, reasoning: ReasoningStream | None, tools: StreamParser | None, limit: int | None) -> None:
        self.reasoning = reasoning
        self.tools = tools
        self.limit = limit
        self.parsed = 0  # characters given to the tool-call parser

    @property
    def called(self) -> bool:
        return self.tools is not None and self.tools.called

    def feed(self, text: str) -> StreamDelta | None:
        """The deltas this text makes; None when the tool-call parser would pass its cap."""
        split = self.reasoning.feed(text) if self.reasoning is not None else Split(content=text)
        return self._answer(split, capped=True)

    def finish(self) -> StreamDelta:
        split = self.reasoning.finish() if self.reasoning is not None else Split()
        delta = self._answer(split, capped=False)
        assert delta is not None
        if self.tools is None:
            return delta
        tail = self.tools.finish()
        return coalesce(StreamDelta(delta.content + tail.content, delta.tool_calls + tail.tool_calls, delta.reasoning))

    def _answer(self, split: Split, capped: bool) -> StreamDelta | None:
        if self.tools is None or not split.content:
            return StreamDelta(content=split.content, reasoning=split.reasoning)
        if capped and self.limit is not None and self.parsed + len(split.content) > self.limit:
            return None
        self.parsed += len(split.content)
        delta = self.tools.feed(split.content)
        delta.reasoning = split.reasoning
        return delta

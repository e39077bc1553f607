"""What a reasoning parser produces: a model's thinking apart from its answer."""

from __future__ import annotations

import abc
from dataclasses import dataclass


@dataclass
class Split:
    """A piece of output: its reasoning and its content (either may be empty)."""

    reasoning: str = ""
    content: str = ""


@dataclass
class Reasoned:
    """A whole output: the reasoning (None when the model did not reason) and the answer."""

    reasoning: str | None
    content: str


class ReasoningStream(abc.ABC):
    """Splits one streamed output as it arrives."""

    @abc.abstractmethod
    def feed(self, text: str) -> Split:
        """The part of the output that can be sent now."""

    @abc.abstractmethod
    def finish(self) -> Split:
        """Whatever was held back, at the end of the output."""

    @property
    @abc.abstractmethod
    def reasoned(self) -> bool:
        """Whether the output had a reasoning part."""


class ReasoningParser(abc.ABC):
    """A model family's way of writing its reasoning."""

    name: str = ""

    @abc.abstractmethod
    def stream(self) -> ReasoningStream:
        """A parser for one output."""

    def split(self, text: str) -> Reasoned:
        """A whole output, split by the same rules as a stream, so both always agree."""
        stream = self.stream()
        head, tail = stream.feed(text), stream.finish()
        reasoning = head.reasoning + tail.reasoning
        return Reasoned(reasoning if stream.reasoned else None, head.content + tail.content)

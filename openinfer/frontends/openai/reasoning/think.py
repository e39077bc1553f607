"""The `<think>...</think>` family.

`deepseek_r1` (DeepSeek-R1, QwQ, Qwen3 thinking-only models): their chat templates open `<think>`
in the prompt, so the output is reasoning up to `</think>` whether or not it repeats the opening
tag; without `</think>` (the model was cut short) all of it is reasoning.

`qwen3`: the output reasons only when it writes `<think>`; text before the tag is content. With
`chat_template_kwargs: {"enable_thinking": false}` Qwen3's template closes an empty think block in
the prompt, the model writes no tag, and everything is content.
"""

from __future__ import annotations

from ..markers import MarkerWatch
from .base import ReasoningParser, ReasoningStream, Split

OPEN, CLOSE = "<think>", "</think>"


class ThinkStream(ReasoningStream):
    """States: `lead` (reasoning begins, an opening tag may still come), `before` (content that
    may be followed by an opening tag), `reasoning`, `answer` (the rest is content)."""

    def __init__(self, opened: bool) -> None:
        self._state = "lead" if opened else "before"
        self._lead = ""
        self._open = MarkerWatch(OPEN)
        self._close = MarkerWatch(CLOSE)
        self._reasoned = opened

    @property
    def reasoned(self) -> bool:
        return self._reasoned

    def feed(self, text: str) -> Split:
        if self._state == "lead":
            self._lead += text
            head = self._lead.lstrip()
            if not head or (OPEN.startswith(head) and head != OPEN):
                return Split()
            rest = head[len(OPEN) :] if head.startswith(OPEN) else self._lead
            self._lead, self._state = "", "reasoning"
            return self.feed(rest)
        if self._state == "before":
            before, after = self._open.feed(text)
            if after is None:
                return Split(content=before)
            self._state, self._reasoned = "reasoning", True
            split = self.feed(after)
            return Split(split.reasoning, before + split.content)
        if self._state == "reasoning":
            before, after = self._close.feed(text)
            if after is None:
                return Split(reasoning=before)
            self._state = "answer"
            return Split(before, after)
        return Split(content=text)

    def finish(self) -> Split:
        if self._state == "lead":
            held, self._lead = self._lead, ""
            return Split(reasoning=held)
        if self._state == "before":
            return Split(content=self._open.flush())
        if self._state == "reasoning":
            return Split(reasoning=self._close.flush())
        return Split()


class DeepSeekR1Parser(ReasoningParser):
    name = "deepseek_r1"

    def stream(self) -> ReasoningStream:
        return ThinkStream(opened=True)


class Qwen3Parser(ReasoningParser):
    name = "qwen3"

    def stream(self) -> ReasoningStream:
        return ThinkStream(opened=False)

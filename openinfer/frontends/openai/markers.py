"""Finding a marker (`</think>`, `<tool_call>`, `[TOOL_CALLS]`) in text that arrives in pieces.

A stream may split a marker anywhere, so the end of each piece that could be the marker's
beginning is held back until the next piece shows whether it is.
"""

from __future__ import annotations


def partial_tail(text: str, marker: str) -> int:
    """Length of the longest end of `text` that is a proper beginning of `marker`."""
    for size in range(min(len(marker) - 1, len(text)), 0, -1):
        if marker.startswith(text[-size:]):
            return size
    return 0


class MarkerWatch:
    """Looks for one marker in streamed text."""

    def __init__(self, marker: str) -> None:
        self.marker = marker
        self.held = ""

    def feed(self, text: str) -> tuple[str, str | None]:
        """The text that surely comes before the marker, and the text after it (None while the
        marker has not been seen; the watch is then spent and holds nothing)."""
        text = self.held + text
        index = text.find(self.marker)
        if index >= 0:
            self.held = ""
            return text[:index], text[index + len(self.marker) :]
        keep = partial_tail(text, self.marker)
        self.held = text[len(text) - keep :]
        return text[: len(text) - keep], None

    def flush(self) -> str:
        """What was held back, at the end of the text."""
        held, self.held = self.held, ""
        return held

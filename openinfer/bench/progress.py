"""A live one-line progress bar per level, on stderr when it is a terminal."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """Redraws one line in place; prints nothing but the final line when not on a terminal."""

    def __init__(self, stream: TextIO | None = None, enabled: bool = True) -> None:
        self.stream = stream or sys.stderr
        self.live = enabled and self.stream.isatty()
        self.enabled = enabled
        self.last = 0.0

    def update(self, label: str, fraction: float, text: str) -> None:
        if not self.live:
            return
        now = time.monotonic()
        if now - self.last < 0.1 and fraction < 1.0:
            return
        self.last = now
        width = 28
        done = int(max(0.0, min(1.0, fraction)) * width)
        bar = "█" * done + "░" * (width - done)
        self.stream.write(f"\r\x1b[2K{label:>14} {bar} {text}")
        self.stream.flush()

    def done(self, label: str, text: str) -> None:
        if not self.enabled:
            return
        if self.live:
            self.stream.write("\r\x1b[2K")
        self.stream.write(f"{label:>14} {text}\n")
        self.stream.flush()

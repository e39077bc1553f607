"""Progress on stderr: a live bar per level, and the whole run's position in front of it.

`make bench` measures many levels on many servers; `RunProgress` (entered for the whole run)
puts "step i of n, what runs now, time left" in front of every level's bar, so the run draws
one line from start to end.
"""

from __future__ import annotations

import sys
import time
from typing import ClassVar, TextIO


def _duration(seconds: float) -> str:
    seconds = int(max(0, seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s"


class RunProgress:
    """The position of a whole run: steps done out of all, the step running now, time left
    (the mean time of the steps done so far, times the steps left)."""

    active: ClassVar[RunProgress | None] = None

    def __init__(self, total: int, stream: TextIO | None = None, enabled: bool = True) -> None:
        self.total = max(1, total)
        self.done = 0
        self.what = ""
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.live = enabled and self.stream.isatty()
        self.started = time.monotonic()

    def __enter__(self) -> RunProgress:  # noqa: PYI034
        RunProgress.active = self
        return self

    def __exit__(self, *exc: object) -> None:
        RunProgress.active = None
        if self.live:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()

    def extend(self, steps: int) -> None:
        self.total += steps

    def left(self) -> str:
        if not self.done:
            return "time left: estimating"
        per_step = (time.monotonic() - self.started) / self.done
        return f"~{_duration(per_step * (self.total - self.done))} left"

    def prefix(self) -> str:
        return f"[{min(self.done + 1, self.total)}/{self.total} {self.what} · {self.left()}]"

    def begin(self, what: str) -> None:
        """A step starts (a level on one server, the LLM row...)."""
        self.what = what
        if not self.enabled:
            return
        if self.live:
            self.stream.write(f"\r\x1b[2K{self.prefix()}")
        else:
            self.stream.write(f"{self.prefix()}\n")
        self.stream.flush()

    def step_done(self) -> None:
        self.done = min(self.total, self.done + 1)


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
        run = RunProgress.active
        head = f"{run.prefix()} " if run is not None else ""
        self.stream.write(f"\r\x1b[2K{head}{label:>14} {bar} {text}")
        self.stream.flush()

    def done(self, label: str, text: str) -> None:
        if not self.enabled:
            return
        if RunProgress.active is not None and RunProgress.active.live:
            return  # the run's line stays the only line; the results table says the rest
        if self.live:
            self.stream.write("\r\x1b[2K")
        self.stream.write(f"{label:>14} {text}\n")
        self.stream.flush()

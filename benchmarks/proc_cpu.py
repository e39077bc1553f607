"""The CPU and memory a server spends, read from /proc: its process and every process it
started (a Python model's worker, MLServer's parallel workers), so servers that split the work
across processes are charged for all of it."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

_TICK = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _children() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        children.setdefault(int(fields[1]), []).append(int(entry))
    return children


def child_pids(pid: int) -> set[int]:
    """The processes `pid` has started and that are alive now."""
    return set(_children().get(pid, []))


def tree_cpu_seconds(pid: int, itself: bool = True, skip: set[int] | frozenset[int] = frozenset()) -> float:
    """User plus system CPU seconds of `pid` (unless not `itself`) and all its descendants
    alive now, but for the children in `skip` (and theirs). Each process's count includes
    the children it has already reaped, so a worker that exits mid-level does not take its
    CPU with it."""
    children = _children()
    total, todo = 0.0, [pid] if itself else [c for c in children.get(pid, []) if c not in skip]
    while todo:
        current = todo.pop()
        todo.extend(children.get(current, []))
        try:
            with open(f"/proc/{current}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(f) for f in fields[11:15]) / _TICK  # utime stime cutime cstime
    return total


def tree_rss_bytes(pid: int) -> int:
    """Resident memory of `pid` and its descendants alive now (pages two of them share count
    twice, as `ps` would sum them)."""
    children = _children()
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        todo.extend(children.get(current, []))
        try:
            with open(f"/proc/{current}/statm") as f:
                total += int(f.read().split()[1]) * _PAGE
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
    return total


class PeakRss:
    """The highest `tree_rss_bytes(pid)` seen while the block runs, sampled every `interval`
    seconds from a thread (a server's memory grows under load and may fall back after it)."""

    def __init__(self, pid: int, interval: float = 0.1) -> None:
        self.pid, self.interval, self.peak = pid, interval, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while True:
            self.peak = max(self.peak, tree_rss_bytes(self.pid))
            if self._stop.wait(self.interval):
                return

    def __enter__(self) -> PeakRss:  # noqa: PYI034
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, tree_rss_bytes(self.pid))


def measured(pid: int | None, run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run a level; its result gains `server_cpu_us`, the server's CPU per request (its CPU
    share over the run divided by the measured throughput)."""
    if pid is None:
        return run()
    cpu0, t0 = tree_cpu_seconds(pid), time.monotonic()
    result = run()
    cpu1, t1 = tree_cpu_seconds(pid), time.monotonic()
    if result.get("throughput") and cpu1 >= cpu0:  # less: part of the tree went away meanwhile
        result["server_cpu_us"] = (cpu1 - cpu0) / (t1 - t0) / result["throughput"] * 1e6
    return result

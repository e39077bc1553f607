"""The CPU a server spends, read from /proc: its process and every process it started (a
Python model's worker, MLServer's parallel workers), so servers that split the work across
processes are charged for all of it."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

_TICK = os.sysconf("SC_CLK_TCK")


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

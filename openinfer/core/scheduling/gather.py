"""Letting a batch fill while the event loop is busy, for instances whose every batch costs
the loop a fixed price (a Python model's worker process: encoding, a socket write, a wake-up,
decoding the answer; about 60 µs of the loop's CPU and as much in the worker per crossing).

Triton's batcher, with no queue delay, sends whatever is queued the moment an instance is free.
Its frontends run on threads of their own, so that costs the frontends nothing. Here the
frontends, the batcher and the crossing share one event loop: when the loop is saturated
(gRPC's per-call cost is ~300 µs of loop time, so under load requests reach the batcher one
at a time), sending each request alone spends loop time on a crossing per request, and that
time is taken from the requests still being read. Holding a batch while the loop has other work
costs those requests nothing (the loop was busy with them anyway) and lets the next ones join.

So, only after requests have been seen overlapping (an arrival found another batch in flight
within the last `CONCURRENT_WINDOW_NS`; a lone client never waits), a batch that is not yet full
is held for as long as loop iterations keep doing other work, and sent at the first iteration
that finds the loop idle, when it fills, or after `MAX_HOLD_NS`. A model whose last batch ran
that long or longer is never held: there the instance, not the loop, is what requests wait
for, and an idle instance would be time lost.

Measured on the 2-core development machine, gRPC [1,16] at concurrency 16 through a worker
process, same run: 1.5 requests per crossing and 588 µs of server CPU per request without this,
5.0 and 490 µs with it (the model on the loop itself: 449 µs); 2,078 against 2,402 infer/s, the
model on the loop 2,411. A lone client never waits, so concurrency 1 is unchanged.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

#: How long after two requests were last seen overlapping the batcher still gathers.
CONCURRENT_WINDOW_NS = 5_000_000
#: An iteration of the loop quicker than this did nothing but come back to us: the loop is idle.
IDLE_ITERATION_NS = 10_000  # an idle uvloop iteration takes 2.5 µs here, asyncio's 5
#: The longest a batch is held for others to join.
MAX_HOLD_NS = 3_000_000


class LoopGather:
    """Decides whether a batch that could go now waits for the loop to catch up."""

    __slots__ = ("_overlap_until", "_slow")

    def __init__(self) -> None:
        self._overlap_until = 0
        self._slow = False  # the last batch ran for `MAX_HOLD_NS` or longer

    def arrival(self, overlapping: bool) -> None:
        """A request arrived; `overlapping` when another one was queued or running."""
        if overlapping:
            self._overlap_until = time.perf_counter_ns() + CONCURRENT_WINDOW_NS

    @property
    def active(self) -> bool:
        return not self._slow and time.perf_counter_ns() < self._overlap_until

    def timed(self, release: Callable[[Any], None]) -> Callable[[Any], None]:
        """`release` for a batch sent now, noting how long the batch ran when it is called."""
        sent = time.perf_counter_ns()

        def released(instance: Any) -> None:
            self._slow = time.perf_counter_ns() - sent >= MAX_HOLD_NS
            release(instance)

        return released

    async def hold(self, full: Callable[[], bool]) -> None:
        """Yield to the loop until an iteration finds it idle, the batch is `full`, or time is up."""
        perf = time.perf_counter_ns
        started = perf()
        while True:
            before = perf()
            await asyncio.sleep(0)
            if not loop_still_busy(started, before, perf()) or full():
                return


def loop_still_busy(started_ns: int, turn_began_ns: int, now_ns: int) -> bool:
    """Whether a hold begun at `started_ns` goes on: the loop's turn since `turn_began_ns` did
    other work than come back to the holder, and `MAX_HOLD_NS` has not passed."""
    return now_ns - turn_began_ns >= IDLE_ITERATION_NS and now_ns - started_ns < MAX_HOLD_NS

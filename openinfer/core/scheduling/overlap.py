"""Whether requests overlap in this process: how the crossing to a worker behaves.

A Python model's worker process and the server's event loop wait for each other at every
crossing (`backends.python`). What each side should do while it waits depends on the load:

- **One request at a time**, each side may poll rather than sleep (`backends.python.spin`),
  which saves a wake-up per crossing, and the loop writes a batch to its worker at once.
- **Under concurrent load** (two requests in flight within `OVERLAP_WINDOW_NS`), neither side
  polls, and the loop writes what one of its turns sent to a worker together, at the end of
  the turn. The worker then finds several batches waiting and runs them back to back, with
  one wake-up and warm caches, instead of a process switch per request. Polling would only
  take the CPU that the frontends need.

Identity [1,16] FP32 in a worker at concurrency 16, interleaved against the rule before it
(one side polled, chosen by protocol; two batches per worker, the first written at once): over
HTTP on one core, 4,088-4,905 against 1,580-3,296 infer/s (docs/python-worker.md has the rest).

The state is the process's, not a server's: it describes this process's threads and CPUs.
"""

from __future__ import annotations

import time

#: How long after two requests were last seen in flight together the load counts as concurrent.
OVERLAP_WINDOW_NS = 5_000_000


class Load:
    """One deadline, updated as requests enter: an integer compare per request when idle."""

    __slots__ = ("_overlap_until",)

    def __init__(self) -> None:
        self._overlap_until = 0

    def entered(self, in_flight: int) -> None:
        """A request entered the server, `in_flight` counting it."""
        if in_flight > 1:
            self._overlap_until = time.perf_counter_ns() + OVERLAP_WINDOW_NS

    def concurrent(self) -> bool:
        """Whether requests have overlapped lately: then nobody polls and sends are gathered."""
        return time.perf_counter_ns() < self._overlap_until


#: This process's load.
LOAD = Load()

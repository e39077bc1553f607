"""Whether requests overlap in this process, and which frontend carries them.

A Python model's worker process and the server's event loop may each poll rather than sleep
while they wait for the other (`backends.python.spin`). One request at a time, that saves a
wake-up per crossing. Under concurrent load, two polling processes take both CPUs of a small
machine, and the CPU they take is what the frontend's own work needed. Which side should
still poll depends on what carries the requests, measured on the 2-core development machine
(identity [1,16] FP32 in a worker at concurrency 16, one server, the modes interleaved; mean
infer/s and server CPU µs per request with the worker, over n runs; the model on the loop
itself took 100-108 µs over HTTP and 332-384 µs over gRPC in the same runs):

| under load | HTTP JSON (n=2) | gRPC (n=5) |
|---|---:|---:|
| both poll (what one request at a time gets) | 11,377 · 152 | 3,203 · 416 |
| the loop polls, the worker sleeps | 11,110 · 110 | 3,213 · 397 |
| the worker polls, the loop sleeps | 10,444 · 150 | 3,489 · 374 |
| both sleep | 10,064 · 109 | 3,125 · 390 |

An HTTP request is carried by the event loop alone, which is then the bottleneck: a polling
loop answers sooner, and a worker whose next batch waits for the loop gains nothing by
polling for it. A gRPC call is carried as much by grpc's own threads (its completion-queue
poller, its event engine) as by the loop: a polling loop takes the CPU those threads need,
while a polling worker picks its next batch up without a wake-up. So under load one side
polls: the loop for HTTP (and in-process callers), the worker for gRPC.

The state is the process's, not a server's: it describes this process's threads and CPUs.
"""

from __future__ import annotations

import time

from .protocols import Protocol

#: How long after two requests were last seen in flight together the load counts as concurrent.
OVERLAP_WINDOW_NS = 5_000_000


class Load:
    """Two deadlines, updated as requests enter: an integer compare per request when idle."""

    __slots__ = ("_overlap_until", "_threaded_until")

    def __init__(self) -> None:
        self._overlap_until = 0
        self._threaded_until = 0  # the last overlap that a gRPC call was part of

    def entered(self, in_flight: int, protocol: Protocol | None) -> None:
        """A request entered the server, `in_flight` counting it."""
        if in_flight > 1:
            until = time.perf_counter_ns() + OVERLAP_WINDOW_NS
            self._overlap_until = until
            if protocol is Protocol.GRPC:
                self._threaded_until = until

    def who_polls(self) -> tuple[bool, bool]:
        """For a batch sent to a worker now: (the loop may poll for its answer, the worker may
        poll for its next batch), each still within its own budget."""
        now = time.perf_counter_ns()
        if now >= self._overlap_until:
            return True, True
        threaded = now < self._threaded_until
        return not threaded, threaded


#: This process's load.
LOAD = Load()

"""How each side of the crossing to a worker waits for the other: poll a little before sleeping.

Sleeping in `poll()` and being woken by the server's write costs the worker a wake-up per
request, and on a virtual machine a halted CPU takes tens of microseconds to resume. When
requests come back to back, polling without sleeping (yielding the CPU to anything else that
wants it) answers sooner and costs less CPU than the wake-up it saves. Measured on the 2-vCPU
development machine, identity [1,16] FP32, default / `in_process` throughput:

| cell | sleep at once | poll up to 200 µs | poll up to 500 µs |
|---|---:|---:|---:|
| gRPC c16 | 0.83 (443 µs CPU/request) | 1.10 (373 µs) | 0.87 (430 µs) |
| HTTP c1 | 0.72 (379 µs) | 0.60 (491 µs) | 0.83 (567 µs) |

Polling pays only when the next request comes before the budget runs out: at c1 a 200 µs
budget is spent in full and the wake-up paid anyway. So the budget follows the gaps this worker
has seen (twice their running mean, at most `LIMIT_NS`), and a worker whose requests come further
apart than that sleeps at once: an idle model polls for at most a couple of `LIMIT_NS` after
its last request, then costs nothing.

Polling spends CPU that would otherwise idle, which a container with a CPU limit pays for in
quota: a model's `worker_poll_us` parameter sets the limit (0: sleep at once, as Triton's stub
does), reaching the worker as `POLL_ENV`. Without it, a server that may use only one CPU (its
affinity, or a container's CPU quota) never polls: there the side it waits for can run only
when it stops.

The server waits too: once a batch is out, its event loop has nothing to do until the answer
comes, sleeps in epoll, and the answer's arrival pays the same wake-up on the server's side.
`LoopPoller` keeps the loop turning instead, within the same kind of budget (the gaps measured
from a send, or the previous answer, to the next answer), by queueing a callback that queues
itself again each turn: a loop with a callback ready polls for events without sleeping, so it
picks the answer up on its next turn and serves anything else that arrives meanwhile as usual.
Each turn yields the CPU, which the worker may be waiting for. Interleaved against the same
server without it (best of 4 rounds each, identity [1,16] FP32 in a worker): HTTP at concurrency
1 from 1,933 to 2,202 infer/s, gRPC at concurrency 1 from 1,172 to 1,261, gRPC at concurrency 16
from 2,766 to 3,141 (server CPU per request 422 → 404 µs), HTTP at concurrency 16 from 8,107 to
8,572. The model's `worker_poll_us` limits both sides.

Under concurrent load neither side polls (`core.scheduling.overlap`): the loop gathers the batches of one of
its turns into one write and the worker runs them back to back, so the wake-up is shared, and
a poller would take the CPU the frontends need. The server says so with each batch it sends;
the worker reads the server's word from a byte of the inbound ring's header
(`ring.Arena.tell_to_sleep`) when it starts to wait, and sleeps at once when told to.

Polling only while a CPU is spare was tried and not kept: both sides looked at the kernel's
count of runnable tasks (/proc/loadavg) before and every 16 turns while polling, and slept
once the others left no CPU idle. Interleaved with the budget alone (best of 3 rounds, identity
[1,16] FP32, servers on one core and the client on the other), it gave the same throughput and
CPU per request at concurrency 16 over both protocols, and lost at concurrency 1: HTTP 1,534
against 1,812 infer/s, gRPC 1,049 against 1,119. At concurrency 1 the tasks it counts are the
very ones the poller waits for (the client, the server's loop): their being busy does not say
that polling takes a CPU anyone needs.
"""

from __future__ import annotations

import asyncio
import os
import select
import time
from collections.abc import Callable, Mapping

#: The longest a worker polls before sleeping, unless the model says otherwise.
LIMIT_NS = 1_000_000
#: The model config parameter that sets it, in microseconds.
POLL_PARAMETER = "worker_poll_us"
#: How the server hands the parameter's value to the worker.
POLL_ENV = "OPENINFER_WORKER_POLL_US"


def poll_limit_us(text: str | None) -> int | None:
    """The model's `worker_poll_us` (its text, None when unset), checked."""
    if text is None:
        return None
    if not text.strip().isdecimal():
        raise ValueError(
            f"model parameter '{POLL_PARAMETER}' must be a whole number of microseconds, "
            f"0 or more, got '{text}'"
        )
    return int(text)


def limit_from_env(environ: Mapping[str, str], cpus: int | None = None) -> int:
    """The polling limit in nanoseconds: the model's, as the server passed it; otherwise
    `LIMIT_NS`, or 0 where this process may use only one CPU (`cpus`, read when not given).

    A poller yields its CPU between looks, but on the only CPU there is, the process it waits
    for gets to run only through those yields, and every yield and look is CPU the request pays
    for. Server pinned to one core, identity [1,16] FP32 in a worker, quiet machine, against a
    1 ms limit: 5,682-6,253 against 5,039-5,415 requests/s in process at concurrency 1
    (docs/python-worker.md has the rest)."""
    text = environ.get(POLL_ENV, "")
    if text.isdigit():
        return int(text) * 1000
    return LIMIT_NS if (usable_cpus() if cpus is None else cpus) > 1 else 0


def usable_cpus() -> int:
    """How many CPUs this process may run on at once: its affinity, capped by a CPU quota
    (cgroup v2 `cpu.max`, as a container's `--cpus` sets it), rounded up."""
    count = len(os.sched_getaffinity(0))
    try:
        with open("/proc/self/cgroup") as f:
            path = next((line.strip()[3:] for line in f if line.startswith("0::")), None)
        if path is not None:
            with open(f"/sys/fs/cgroup{path}/cpu.max") as f:
                quota, period = f.read().split()[:2]
            if quota != "max":
                count = min(count, max(1, -(-int(quota) // int(period))))
    except (OSError, ValueError):
        pass  # no cgroup v2 quota to read: the affinity says it
    return count


class PollBudget:
    """How long the next wait may poll: twice the running mean of the waits seen, 0 (sleep at
    once) while that mean is at the limit or beyond."""

    def __init__(self, limit_ns: int = LIMIT_NS) -> None:
        self.limit_ns = limit_ns
        self.mean_gap_ns = float(limit_ns)  # the running mean of the waits seen, capped

    @property
    def budget_ns(self) -> int:
        """How long the next wait polls before it sleeps: 0 when the waits are too long."""
        if self.limit_ns <= 0 or self.mean_gap_ns >= self.limit_ns:
            return 0
        return min(self.limit_ns, int(2 * self.mean_gap_ns))

    def observe(self, gap_ns: int) -> None:
        """Count one wait into the running mean."""
        gap = min(gap_ns, 2 * self.limit_ns)
        self.mean_gap_ns += (gap - self.mean_gap_ns) / 4


class Spinner(PollBudget):
    """The worker's side: waits for a file descriptor to be readable, polling while the recent
    gaps between requests say one is due shortly, sleeping otherwise, or when `told_to_sleep`
    (the server's word, `core.scheduling.overlap`) says so."""

    def __init__(self, limit_ns: int = LIMIT_NS, told_to_sleep: Callable[[], bool] | None = None) -> None:
        super().__init__(limit_ns)
        self.told_to_sleep = told_to_sleep

    def wait(self, readable: select.poll) -> None:
        """Return once `readable` reports an event (input, end of stream or an error)."""
        clock = time.perf_counter_ns
        start = clock()
        told = self.told_to_sleep
        budget = 0 if told is not None and told() else self.budget_ns
        if budget:
            deadline = start + budget
            while not readable.poll(0):
                if clock() >= deadline:
                    readable.poll()
                    break
                os.sched_yield()  # anything else runnable on this CPU goes first
        else:
            readable.poll()
        self.observe(clock() - start)


class LoopPoller(PollBudget):
    """The server's side: keeps its event loop turning while a worker's answer is due shortly."""

    def __init__(self, limit_ns: int = LIMIT_NS) -> None:
        super().__init__(limit_ns)
        self.outstanding = 0  # batches sent and not yet answered
        self._since = 0  # when the wait for the next answer began
        self._deadline = 0
        self.turning = False

    def sent(self, poll: bool = True) -> None:
        """A batch went to the worker: turn the loop until its answer is due, within budget
        (unless not to `poll`: `core.scheduling.overlap`)."""
        now = time.perf_counter_ns()
        if not self.outstanding:
            self._since = now
        self.outstanding += 1
        budget = self.budget_ns if poll else 0
        if budget:
            self._deadline = now + budget
            if not self.turning:
                self.turning = True
                asyncio.get_running_loop().call_soon(self._turn)

    def answered(self) -> None:
        """A batch's answer came in."""
        now = time.perf_counter_ns()
        if self.outstanding:
            self.outstanding -= 1
            self.observe(now - self._since)
        self._since = now

    def _turn(self) -> None:
        if self.outstanding and time.perf_counter_ns() < self._deadline:
            os.sched_yield()  # the worker may be waiting for this CPU
            asyncio.get_running_loop().call_soon(self._turn)
        else:
            self.turning = False

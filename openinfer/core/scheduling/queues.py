"""The dynamic batcher's waiting room: priority levels, queue policies and request timeouts.

Triton's `PriorityQueue`: one FIFO per priority level (1 is the highest), each with its
`ModelQueuePolicy` (`max_queue_size`, `default_timeout_microseconds`,
`allow_timeout_override`, `timeout_action`). A request whose timeout runs out while it waits
is rejected (`REJECT`) or moved behind everything else (`DELAY`). Each timeout is a loop
timer, so an expired request is answered at its deadline even while every instance is busy.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ..._proto import model_config_pb2 as mc
from ..errors import InvalidArgumentError, UnavailableError, request_label
from ..requests.responses import ResponseSender
from ..types import InferRequest


@dataclass(slots=True)
class QueuePolicy:
    delay_on_timeout: bool = False  # timeout_action DELAY (else REJECT)
    default_timeout_us: int = 0
    allow_timeout_override: bool = False
    max_queue_size: int = 0

    @classmethod
    def from_config(cls, policy: mc.ModelQueuePolicy) -> QueuePolicy:
        return cls(
            delay_on_timeout=policy.timeout_action == mc.ModelQueuePolicy.DELAY,
            default_timeout_us=int(policy.default_timeout_microseconds),
            allow_timeout_override=policy.allow_timeout_override,
            max_queue_size=int(policy.max_queue_size),
        )

    def timeout_us(self, request: InferRequest) -> int:
        """The request's timeout: the default, or a shorter one the request asks for if allowed."""
        timeout = self.default_timeout_us
        asked = request.timeout_us
        if self.allow_timeout_override and asked and (timeout == 0 or asked < timeout):
            timeout = asked
        return timeout


class Entry:
    """One waiting request."""

    __slots__ = ("delayed", "enqueued_ns", "level", "queued", "request", "sender", "size", "timer")

    def __init__(self, request: InferRequest, sender: ResponseSender) -> None:
        self.request = request
        self.sender = sender
        self.size = max(request.batch_size, 1)
        self.enqueued_ns = time.perf_counter_ns()
        self.level = 0
        self.timer: asyncio.TimerHandle | None = None
        self.delayed = False
        self.queued = False

    def dequeued(self) -> None:
        """Out of the queue, for whatever reason: its queue timeout no longer applies."""
        self.queued = False
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None


class PriorityQueue:
    """FIFOs by priority level, then the delayed FIFO; iteration yields batch order."""

    def __init__(
        self,
        model_name: str,
        settings: mc.ModelDynamicBatching | None,
        on_change: Callable[[], None],
    ) -> None:
        levels = int(settings.priority_levels) if settings is not None else 0
        default = int(settings.default_priority_level) if settings is not None else 0
        if levels and not 1 <= default <= levels:
            raise InvalidArgumentError(
                f"default priority level must be in range [1, {levels}] for {model_name}"
            )
        base = (
            QueuePolicy.from_config(settings.default_queue_policy)
            if settings is not None
            else QueuePolicy()
        )
        self._policies = [base] * max(levels, 1)
        if settings is not None:
            for level, policy in settings.priority_queue_policy.items():
                if not 1 <= level <= max(levels, 0):
                    raise InvalidArgumentError(
                        f"priority queue policy must have priority level in range [1, {levels}] "
                        f"for {model_name}"
                    )
                self._policies[level - 1] = QueuePolicy.from_config(policy)
        self._levels = levels
        self._default = max(default, 1)
        self._queues: list[deque[Entry]] = [deque() for _ in self._policies]
        #: Whether any level gives requests a deadline (decided at load: most models have none).
        self._deadlines = any(p.default_timeout_us or p.allow_timeout_override for p in self._policies)
        self._delayed: deque[Entry] = deque()
        #: Requests waiting; read it rather than `len()` on the hot path (no Python call).
        self.size = 0
        self._on_change = on_change

    def __len__(self) -> int:
        return self.size

    def __iter__(self) -> Iterator[Entry]:
        for queue in self._queues:
            yield from queue
        yield from self._delayed

    def level_of(self, request: InferRequest) -> int:
        """0 and out-of-range priorities fall back to the default level (Triton's rule)."""
        priority = request.priority
        if not self._levels or priority == 0 or priority > self._levels:
            return self._default
        return priority

    def push(self, entry: Entry) -> None:
        """Queue a request; UNAVAILABLE when its level's queue is full."""
        level = self.level_of(entry.request)
        policy = self._policies[level - 1]
        queue = self._queues[level - 1]
        if policy.max_queue_size and len(queue) >= policy.max_queue_size:
            entry.request.state.failure_reason = "REJECTED"
            raise UnavailableError(f"{request_label(entry.request.id)}Exceeds maximum queue size")
        entry.level = level
        entry.queued = True
        queue.append(entry)
        self.size += 1
        timeout_us = policy.timeout_us(entry.request)
        if timeout_us:
            loop = asyncio.get_running_loop()
            entry.timer = loop.call_later(timeout_us / 1e6, self._expire, entry, policy)

    def reject_overdue(self, request: InferRequest, sender: ResponseSender) -> bool:
        """For a request about to run without waiting: if its deadline (from its arrival) has
        already passed under `REJECT`, answer it as an expired one and say so. Triton checks a
        request's deadline as its batch forms, so one shorter than that step never runs."""
        if not self._deadlines:
            return False
        policy = self._policies[self.level_of(request) - 1]
        timeout_us = policy.timeout_us(request)
        waited = time.perf_counter_ns() - request.arrival_ns if request.arrival_ns else 0
        if not timeout_us or policy.delay_on_timeout or waited < timeout_us * 1000:
            return False
        request.state.failure_reason = "REJECTED"
        sender.fail(UnavailableError(f"{request_label(request.id)}Request timeout expired"))
        return True

    def pop_front(self, count: int) -> list[Entry]:
        """Remove the first `count` entries in batch order."""
        taken: list[Entry] = []
        for queue in (*self._queues, self._delayed):
            while queue and len(taken) < count:
                entry = queue.popleft()
                entry.dequeued()
                taken.append(entry)
            if len(taken) == count:
                break
        self.size -= len(taken)
        return taken

    def withdraw(self, entry: Entry) -> None:
        """Take back a request whose caller went away while it waited: it will not run."""
        if not entry.queued:
            return
        (self._delayed if entry.delayed else self._queues[entry.level - 1]).remove(entry)
        entry.dequeued()
        self.size -= 1
        self._on_change()

    def drain(self) -> list[Entry]:
        return self.pop_front(self.size)

    def _expire(self, entry: Entry, policy: QueuePolicy) -> None:
        entry.timer = None
        if not entry.queued or entry.delayed:
            return
        self._queues[entry.level - 1].remove(entry)
        if policy.delay_on_timeout:
            entry.delayed = True
            self._delayed.append(entry)
        else:
            entry.dequeued()
            self.size -= 1
            entry.request.state.failure_reason = "REJECTED"
            entry.sender.fail(
                UnavailableError(f"{request_label(entry.request.id)}Request timeout expired")
            )
        self._on_change()

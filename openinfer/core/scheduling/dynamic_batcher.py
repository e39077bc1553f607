"""Triton's dynamic batcher: concurrent requests become one `execute` call.

The backend receives the batch as a list of requests (the Python backend model sees
`len(requests) == N`; tensor backends concatenate along dim 0 themselves) and answers each
through its own sender, so splitting results back is per request by construction.

How a batch is formed, following Triton's `DynamicBatchScheduler`:
  * a batch is formed only when an instance is free, so requests gather while all are busy;
  * requests are taken in priority order (then the delayed ones) while the summed batch
    dimension stays within the largest preferred batch size (`max_batch_size` when none is
    given) and the requests' variable-size inputs have equal shapes (unless ragged);
  * a preferred batch size is sent at once; otherwise the batcher waits up to
    `max_queue_delay_microseconds` from the oldest request for one to form, recomputing the
    remaining delay every time something arrives, and then sends what it has;
  * with no delay it sends what is queued as soon as an instance is free; a request that
    finds the queue empty and an instance free runs at once. One exception, for instances
    that are costly to reach (a worker process): once requests overlap, a batch is held while
    the event loop is busy, so that it fills (`gather`).
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import functools
import logging
import time
from collections.abc import Coroutine, Iterable
from dataclasses import dataclass
from typing import Any

from ..._proto import model_config_pb2 as mc
from ..backend import ModelInstance
from ..errors import InternalError, InvalidArgumentError, UnavailableError
from ..observability.stats import ModelStats
from ..requests.responses import ResponseSender
from ..types import InferRequest
from .base import InstancePool, Scheduler
from .execute import run_batch
from .gather import LoopGather
from .ordering import OrderedRelease
from .queues import Entry, PriorityQueue

log = logging.getLogger("openinfer.scheduling")


@dataclass(slots=True)
class BatchPlan:
    """What the queue's head allows right now."""

    count: int = 0  # requests the batch can take
    size: int = 0  # their summed batch dimension
    preferred_count: int = 0  # requests up to the largest preferred size reached (0 = none)
    oldest_ns: int = 0  # enqueue time of the oldest of them
    full: bool = False  # the next request cannot join (size limit or shape mismatch)


def batch_limits(model_name: str, max_batch_size: int, preferred: list[int]) -> tuple[list[int], int]:
    """Validated preferred sizes (sorted) and the largest batch the batcher forms."""
    for size in preferred:
        if size <= 0:
            raise InvalidArgumentError(
                f"dynamic batching preferred size must be positive for {model_name}"
            )
        if max_batch_size > 0 and size > max_batch_size:
            raise InvalidArgumentError(
                f"dynamic batching preferred size must be <= max batch size for {model_name}"
            )
    sizes = sorted(set(preferred)) if max_batch_size > 0 else []
    limit = sizes[-1] if sizes else max(max_batch_size, 1)
    return sizes, limit


def equal_shape_inputs(config: mc.ModelConfig) -> frozenset[str]:
    """Inputs whose shapes must match inside a batch: variable-size and not ragged."""
    return frozenset(
        t.name
        for t in config.input
        if t.is_shape_tensor or (not t.allow_ragged_batch and any(d == -1 for d in t.dims))
    )


class BatchShape:
    """Decides whether a request may join a batch started by another one."""

    def __init__(self, config: mc.ModelConfig) -> None:
        self.equal = equal_shape_inputs(config)
        self.has_optional = any(t.optional for t in config.input)

    def compatible(self, first: InferRequest, other: InferRequest) -> bool:
        if self.has_optional and {t.name for t in first.inputs} != {t.name for t in other.inputs}:
            return False
        for name in self.equal:
            a, b = first.input(name), other.input(name)
            if a is None or b is None:
                if a is not b:
                    return False
                continue
            if a.shape[1:] != b.shape[1:]:
                return False
        return True


def plan_batch(entries: Iterable[Entry], limit: int, preferred: list[int], shape: BatchShape) -> BatchPlan:
    """Walk the queue head in batch order and see how large a batch it allows."""
    plan = BatchPlan()
    first: InferRequest | None = None
    for entry in entries:
        if plan.count:
            if plan.size + entry.size > limit or not shape.compatible(first, entry.request):  # type: ignore[arg-type]
                plan.full = True
                break
        else:
            first = entry.request
            plan.oldest_ns = entry.enqueued_ns
        plan.count += 1
        plan.size += entry.size
        plan.oldest_ns = min(plan.oldest_ns, entry.enqueued_ns)
        index = bisect.bisect_left(preferred, plan.size)
        if index < len(preferred) and preferred[index] == plan.size:
            plan.preferred_count = plan.count
        if plan.size >= limit:
            plan.full = True
            break
    return plan


class DynamicBatcher(Scheduler):
    """Queues requests by priority and sends them to free instances in batches."""

    pool: InstancePool

    def __init__(self, config: mc.ModelConfig, pool: InstancePool, stats: ModelStats) -> None:
        settings = config.dynamic_batching
        self.model_name = config.name
        self.pool = pool
        self.stats = stats
        self.preferred, self.limit = batch_limits(
            config.name, config.max_batch_size, list(settings.preferred_batch_size)
        )
        self.delay_ns = int(settings.max_queue_delay_microseconds) * 1000
        self.shape = BatchShape(config)
        self.queue = PriorityQueue(config.name, settings, self._wake_up)
        self.ordering = OrderedRelease() if settings.preserve_ordering else None
        self._arrived = asyncio.Event()
        self._loop_task: asyncio.Task[None] | None = None
        self._running: set[asyncio.Task[bool]] = set()
        self._stopped = False
        #: With no queue delay and instances that are costly to reach (see `gather`).
        self.gather = LoopGather() if self.delay_ns == 0 and pool.costly_dispatch else None

    # ---------------------------------------------------------------- intake
    async def schedule(self, request: InferRequest, sender: ResponseSender) -> None:
        if self._stopped:
            sender.fail(UnavailableError(f"model '{self.model_name}' is not accepting requests"))
            return
        gather = self.gather
        if gather is not None:
            gather.arrival(bool(self.queue.size) or self.pool.in_use)
        if self.delay_ns == 0 and not self.queue.size and (gather is None or not gather.active):
            # Nothing waits and nothing would be waited for: with a free instance the batcher
            # would send this request alone at once, so send it from here (as the direct
            # scheduler does) without a round through the batch loop's task.
            if self.queue.reject_overdue(request, sender):
                return
            instance = self.pool.try_acquire()
            if instance is not None:
                await self._execute(instance, [request], [sender])
                return
        entry = Entry(request, sender)
        try:
            self.queue.push(entry)
        except UnavailableError as exc:
            sender.fail(exc)
            return
        # A caller that goes away while its request waits takes it out of the queue (a backend
        # that can stop started work sets its own hook once the batch runs).
        sender.on_cancel = functools.partial(self.queue.withdraw, entry)
        if self._loop_task is None:
            self._loop_task = asyncio.create_task(self._batch_loop(), name=f"batcher:{self.model_name}")
            self._loop_task.add_done_callback(self._loop_ended)
        self._arrived.set()

    def _loop_ended(self, task: asyncio.Task[None]) -> None:
        """A crashed batch loop must not leave requests waiting forever: fail them, restart later."""
        self._loop_task = None
        if task.cancelled() or task.exception() is None:
            return
        log.error("batcher of model '%s' failed", self.model_name, exc_info=task.exception())
        error = InternalError(f"the batcher of model '{self.model_name}' failed: {task.exception()}")
        for entry in self.queue.drain():
            entry.sender.fail(error)

    def _wake_up(self) -> None:
        self._arrived.set()

    # ---------------------------------------------------------------- batching
    async def _batch_loop(self) -> None:
        while True:
            if not self.queue:  # idle: hold no instance, so a lone arrival may run at once
                self._arrived.clear()
                await self._arrived.wait()
                continue
            instance = self.pool.try_acquire() or await self.pool.acquire()
            try:
                entries = await self._next_batch()
            except BaseException:
                self.pool.release(instance)
                raise
            task = asyncio.create_task(
                self._execute(instance, [e.request for e in entries], [e.sender for e in entries])
            )
            self._running.add(task)
            task.add_done_callback(self._running.discard)
            # Waiting for the next batch must not keep this one alive: its requests and answers
            # (and a worker's ring under an output that echoes an input) would stay held until
            # then, and the fast path may never come back here.
            del instance, entries, task

    async def _next_batch(self) -> list[Entry]:
        held = False
        while True:
            if not self.queue:
                self._arrived.clear()
                await self._arrived.wait()
                continue
            plan = plan_batch(self.queue, self.limit, self.preferred, self.shape)
            waited = time.perf_counter_ns() - plan.oldest_ns
            expired = self.delay_ns > 0 and waited >= self.delay_ns
            if plan.preferred_count and not expired:
                return self.queue.pop_front(plan.preferred_count)
            if self.gather is not None and not held and not plan.full and self.gather.active:
                await self.gather.hold(self._full)
                held = True
                continue  # plan again with what joined (or was withdrawn) meanwhile
            if self.delay_ns == 0 or expired or plan.full:
                return self.queue.pop_front(plan.count)
            self._arrived.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), (self.delay_ns - waited) / 1e9)

    def _full(self) -> bool:
        return plan_batch(self.queue, self.limit, self.preferred, self.shape).full

    def _execute(
        self, instance: ModelInstance, requests: list[InferRequest], senders: list[ResponseSender]
    ) -> Coroutine[Any, Any, bool]:
        """The batch's run (to await or to make a task of), giving the instance back at its end."""
        if self.ordering is not None:
            senders = self.ordering.wrap(senders)
        release = self.pool.release if self.gather is None else self.gather.timed(self.pool.release)
        return run_batch(instance, requests, senders, self.stats, self.model_name, release)

    # ---------------------------------------------------------------- shutdown
    async def stop(self) -> None:
        self._stopped = True
        task = self._loop_task
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        error = UnavailableError(f"model '{self.model_name}' was unloaded before the request ran")
        for entry in self.queue.drain():
            entry.sender.fail(error)

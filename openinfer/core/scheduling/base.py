"""What every scheduler offers the core, and the pool of idle instances they share."""

from __future__ import annotations

import abc
import asyncio
from collections import deque

from ..backend import ModelInstance
from ..requests.responses import ResponseSender
from ..types import InferRequest


class Scheduler(abc.ABC):
    """Takes validated requests and gets them executed on the model's instances."""

    @abc.abstractmethod
    async def schedule(self, request: InferRequest, sender: ResponseSender) -> None:
        """Run the request (or queue it); responses go to `sender`. Returns once it is handed off."""

    async def stop(self) -> None:
        """Stop taking work; fail whatever is still queued."""

    #: The idle instances a pool-fed scheduler hands out (None: the scheduler has none).
    pool: InstancePool | None = None

    def can_change_instances(self) -> bool:
        """Whether instances may come and go while it runs (`add_instance`, `retire_instance`)."""
        return self.pool is not None

    def add_instance(self, instance: ModelInstance) -> None:
        """A new instance (an instance-count update) starts taking work."""
        assert self.pool is not None
        self.pool.add(instance)

    async def retire_instance(self, instance: ModelInstance) -> None:
        """Give an instance no more work; returns once it holds none and may be stopped."""
        assert self.pool is not None
        await self.pool.retire(instance)


class InstancePool:
    """Idle instances handed out first come, first served."""

    def __init__(self, instances: list[ModelInstance], *, pipelined: bool = True) -> None:
        # An instance that queues work internally takes `pipeline_depth` batches at once.
        # Batchers turn that off: they form a batch only when an instance is really free, so
        # requests keep gathering (and keep their priority, queue limit and timeout) meanwhile.
        self.pipelined = pipelined
        self._idle: deque[ModelInstance] = deque(
            i for i in instances for _ in range(i.pipeline_depth if pipelined else 1)
        )
        self._waiters: deque[asyncio.Future[ModelInstance]] = deque()
        self.size = len(instances)
        self.costly_dispatch = any(i.costly_dispatch for i in instances)
        self._busy: dict[ModelInstance, int] = dict.fromkeys(instances, 0)  # slots in use per instance
        #: Instances taken out (an instance-count update): their work finishes, none is given them.
        self._retiring: dict[ModelInstance, asyncio.Future[None]] = {}

    def _take(self) -> ModelInstance:
        """A free instance before a second slot of a busy one: requests spread over instances."""
        idle, busy = self._idle, self._busy
        instance = idle[0]
        if busy.get(instance):
            for candidate in idle:
                if not busy.get(candidate):
                    instance = candidate
                    break
            idle.remove(instance)
        else:
            idle.popleft()
        busy[instance] = busy.get(instance, 0) + 1
        return instance

    @property
    def in_use(self) -> bool:
        """Whether some instance is running a batch."""
        return any(self._busy.values())

    def try_acquire(self) -> ModelInstance | None:
        return self._take() if self._idle and not self._waiters else None

    async def acquire(self) -> ModelInstance:
        if self._idle and not self._waiters:
            return self._take()
        waiter: asyncio.Future[ModelInstance] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            return await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release(waiter.result())
            raise

    def release(self, instance: ModelInstance) -> None:
        if self._retiring and instance in self._retiring:
            self._busy[instance] -= 1
            if not self._busy[instance] and not self._retiring[instance].done():
                self._retiring[instance].set_result(None)
            return
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(instance)  # stays busy: handed straight to the next request
                return
        self._busy[instance] = max(self._busy.get(instance, 0) - 1, 0)
        self._idle.append(instance)

    def add(self, instance: ModelInstance) -> None:
        """A new instance (an instance-count update) takes work at once."""
        self.size += 1
        self.costly_dispatch = self.costly_dispatch or instance.costly_dispatch
        self._busy[instance] = 0
        for _ in range(instance.pipeline_depth if self.pipelined else 1):
            self._busy[instance] += 1
            self.release(instance)

    async def retire(self, instance: ModelInstance) -> None:
        """Take an instance out: it gets no new work; returns once the work it holds is done."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._retiring[instance] = done
        self._idle = deque(i for i in self._idle if i is not instance)
        self.size -= 1
        try:
            if self._busy.get(instance):
                await done
        finally:
            del self._retiring[instance]
            self._busy.pop(instance, None)

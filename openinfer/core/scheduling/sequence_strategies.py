"""The two strategies of `sequence_batching { direct | oldest }` (the module docstring of
`sequence_batcher` says how each batches) and the live `Sequence` they share."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from typing import TYPE_CHECKING

from ..._proto import model_config_pb2 as mc
from ..backend import ModelInstance
from ..types import Tensor
from .base import InstancePool
from .dynamic_batcher import batch_limits, plan_batch
from .ordering import OrderedRelease
from .queues import Entry

if TYPE_CHECKING:
    from .sequence_batcher import SequenceBatcher


class Sequence:
    """One live sequence: its waiting requests, its state and where it runs."""

    __slots__ = ("busy", "ended", "expires_ns", "expiry", "id", "lane", "pending", "single", "state", "timer")

    def __init__(self, sequence_id: int | str) -> None:
        self.id = sequence_id
        self.pending: deque[Entry] = deque()
        self.state: dict[str, Tensor] = {}
        self.busy = False
        self.ended = False  # END queued, idle-expired or replaced: takes no more requests
        self.single = False  # made by the iterative sequencer for one request
        self.lane: Lane | None = None
        self.timer: asyncio.TimerHandle | None = None
        #: While it waits in the backlog: when its requests' `timeout` runs out, and the timer.
        self.expires_ns = 0
        self.expiry: asyncio.TimerHandle | None = None


class Strategy:
    """How the sequences of one model share its instances (`direct` or `oldest`)."""

    #: Sequences that have no slot (direct) or candidate place (oldest) yet.
    backlog: deque[Sequence]

    def add(self, sequence: Sequence) -> None:
        raise NotImplementedError

    def ready(self, sequence: Sequence) -> None:
        raise NotImplementedError

    def remove(self, sequence: Sequence) -> None:
        raise NotImplementedError

    def sequences(self) -> list[Sequence]:
        raise NotImplementedError

    def waiting(self, sequence: Sequence) -> bool:
        """In the backlog: no slot (direct) or candidate place (oldest) yet."""
        return sequence in self.backlog

    def add_instance(self, instance: ModelInstance) -> None:
        """A new instance takes sequences (an instance-count update)."""
        raise NotImplementedError

    async def retire_instance(self, instance: ModelInstance) -> None:
        """No new sequence starts on the instance; returns once it holds none."""
        raise NotImplementedError

    async def stop(self) -> None:
        raise NotImplementedError


class Lane:
    """One instance and its slots: slot i is row i of every batch the instance runs, so a
    sequence keeps its row from START to its end (a model may keep per-row state)."""

    def __init__(self, instance: ModelInstance, slots: int) -> None:
        self.instance = instance
        self.slots: list[Sequence | None] = [None] * slots
        self.wake = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        self.running = False  # a batch of it is executing
        self.retiring = False  # its instance is leaving: no new sequence starts on it

    def free_slot(self) -> int | None:
        if self.retiring:
            return None
        for index, sequence in enumerate(self.slots):
            if sequence is None:
                return index
        return None

    def held(self) -> list[Sequence]:
        return [s for s in self.slots if s is not None]


class Direct(Strategy):
    """Each sequence holds a slot on one instance from START to its end."""

    def __init__(self, owner: SequenceBatcher, config: mc.ModelConfig, instances: list[ModelInstance]) -> None:
        direct = config.sequence_batching.direct
        self.owner = owner
        self.slots = max(config.max_batch_size, 1)
        self.lanes = [Lane(instance, self.slots) for instance in instances]
        self.backlog: deque[Sequence] = deque()
        self.delay_ns = int(direct.max_queue_delay_microseconds) * 1000
        self.min_utilization = float(direct.minimum_slot_utilization)

    def add(self, sequence: Sequence) -> None:
        for lane in self.lanes:
            slot = lane.free_slot()
            if slot is not None:
                self._assign(sequence, lane, slot)
                return
        self.backlog.append(sequence)

    def _assign(self, sequence: Sequence, lane: Lane, slot: int) -> None:
        sequence.lane = lane
        lane.slots[slot] = sequence
        if sequence.pending:
            self.ready(sequence)

    def ready(self, sequence: Sequence) -> None:
        lane = sequence.lane
        if lane is None:
            return  # in the backlog until a slot frees
        if lane.task is None:
            lane.task = asyncio.create_task(self._lane_loop(lane), name=f"sequence-lane:{self.owner.model_name}")
            lane.task.add_done_callback(lambda task: self._lane_ended(lane, task))
        lane.wake.set()

    def remove(self, sequence: Sequence) -> None:
        lane = sequence.lane
        if lane is None:
            with contextlib.suppress(ValueError):
                self.backlog.remove(sequence)
            return
        slot = lane.slots.index(sequence)
        lane.slots[slot] = None
        sequence.lane = None
        if self.backlog and not lane.retiring:
            self._assign(self.backlog.popleft(), lane, slot)

    def add_instance(self, instance: ModelInstance) -> None:
        lane = Lane(instance, self.slots)
        self.lanes.append(lane)
        while self.backlog and (slot := lane.free_slot()) is not None:
            self._assign(self.backlog.popleft(), lane, slot)

    async def retire_instance(self, instance: ModelInstance) -> None:
        """The instance's sequences run to their end on it (a model may keep per-slot state);
        none starts there meanwhile. Checked every few milliseconds: a rare, unhurried wait."""
        lane = next(lane for lane in self.lanes if lane.instance is instance)
        lane.retiring = True
        while (lane.held() or lane.running) and not self.owner.stopped:
            await asyncio.sleep(0.02)
        self.lanes.remove(lane)
        if lane.task is not None:
            lane.task.cancel()

    def sequences(self) -> list[Sequence]:
        return [s for lane in self.lanes for s in lane.held()] + list(self.backlog)

    def _lane_ended(self, lane: Lane, task: asyncio.Task[None]) -> None:
        lane.task = None
        self.owner.loop_failed(task, lane.held())

    async def _lane_loop(self, lane: Lane) -> None:
        """Each batch holds rows 0 to the last slot with a request; a slot between them without
        one gets a null request (READY false), as in Triton, so every row stays its slot's."""
        while True:
            rows = [s if s is not None and s.pending and not s.busy else None for s in lane.slots]
            ready = [s for s in rows if s is not None]
            if not ready:
                lane.wake.clear()
                await lane.wake.wait()
                continue
            if self.delay_ns and len(ready) / len(lane.slots) < self.min_utilization:
                waited = time.perf_counter_ns() - min(s.pending[0].enqueued_ns for s in ready)
                if waited < self.delay_ns:
                    lane.wake.clear()
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(lane.wake.wait(), (self.delay_ns - waited) / 1e9)
                    continue
            while rows[-1] is None:
                rows.pop()
            lane.running = True
            try:
                await self.owner.run(lane.instance, rows, None)
            finally:
                lane.running = False

    async def stop(self) -> None:
        for lane in self.lanes:
            task = lane.task
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task


class Oldest(Strategy):
    """Batches take the next request of the sequences waiting longest, on any free instance."""

    def __init__(self, owner: SequenceBatcher, config: mc.ModelConfig, pool: InstancePool) -> None:
        oldest = config.sequence_batching.oldest
        self.owner = owner
        self.pool = pool
        self.preferred, self.limit = batch_limits(
            config.name, config.max_batch_size, list(oldest.preferred_batch_size)
        )
        self.delay_ns = int(oldest.max_queue_delay_microseconds) * 1000
        self.max_candidates = int(oldest.max_candidate_sequences)
        self.ordering = OrderedRelease() if oldest.preserve_ordering else None
        self.candidates: dict[Sequence, None] = {}
        self.backlog: deque[Sequence] = deque()
        self.arrived = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        self.running: set[asyncio.Task[None]] = set()

    def add_instance(self, instance: ModelInstance) -> None:
        self.pool.add(instance)

    async def retire_instance(self, instance: ModelInstance) -> None:
        await self.pool.retire(instance)

    def add(self, sequence: Sequence) -> None:
        if self.max_candidates and len(self.candidates) >= self.max_candidates:
            self.backlog.append(sequence)
        else:
            self.candidates[sequence] = None

    def ready(self, sequence: Sequence) -> None:
        if self.task is None:
            self.task = asyncio.create_task(self._loop(), name=f"sequence-oldest:{self.owner.model_name}")
            self.task.add_done_callback(self._loop_ended)
        self.arrived.set()

    def remove(self, sequence: Sequence) -> None:
        if sequence not in self.candidates:
            with contextlib.suppress(ValueError):
                self.backlog.remove(sequence)
            return
        del self.candidates[sequence]
        while self.backlog and (not self.max_candidates or len(self.candidates) < self.max_candidates):
            self.candidates[self.backlog.popleft()] = None
        self.arrived.set()

    def sequences(self) -> list[Sequence]:
        return list(self.candidates) + list(self.backlog)

    async def _loop(self) -> None:
        while True:
            instance = self.pool.try_acquire() or await self.pool.acquire()
            try:
                batch = await self._next_batch()
            except BaseException:
                self.pool.release(instance)
                raise
            for sequence in batch:
                sequence.busy = True  # claimed now, so the next batch cannot take it too
            task = asyncio.create_task(self._execute(instance, batch))
            self.running.add(task)
            task.add_done_callback(self.running.discard)

    def _loop_ended(self, task: asyncio.Task[None]) -> None:
        self.task = None
        self.owner.loop_failed(task, list(self.candidates))

    async def _next_batch(self) -> list[Sequence]:
        while True:
            ready = [s for s in self.candidates if s.pending and not s.busy]
            if not ready:
                self.arrived.clear()
                await self.arrived.wait()
                continue
            ready.sort(key=lambda s: s.pending[0].enqueued_ns)
            plan = plan_batch((s.pending[0] for s in ready), self.limit, self.preferred, self.owner.shape)
            waited = time.perf_counter_ns() - plan.oldest_ns
            expired = self.delay_ns > 0 and waited >= self.delay_ns
            if plan.preferred_count and not expired:
                return ready[: plan.preferred_count]
            if self.delay_ns == 0 or expired or plan.full:
                return ready[: plan.count]
            self.arrived.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.arrived.wait(), (self.delay_ns - waited) / 1e9)

    async def _execute(self, instance: ModelInstance, batch: list[Sequence]) -> None:
        try:
            await self.owner.run(instance, batch, self.ordering)
        finally:
            self.pool.release(instance)
            self.arrived.set()

    async def stop(self) -> None:
        task = self.task
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

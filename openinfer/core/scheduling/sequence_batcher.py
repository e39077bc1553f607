"""Triton's sequence batcher: requests of one sequence run in order, with state between them.

Every request names its sequence (`sequence_id`, or the request's `id` when the parameter is
absent, as Flink's Triton provider sends it). A sequence begins with a START request and
ends after its END request has run, or when no request arrives for
`max_sequence_idle_microseconds`; a later request without START then fails with Triton's
missing-START error. At most one request of a sequence executes at a time, so the implicit
state one request writes is what the next one reads.

Two strategies, as in `sequence_batching { direct | oldest }`:
  * direct: each instance has `max_batch_size` slots (1 if the model does not batch); a
    sequence holds one slot, on one instance, from START to its end, and waits in a backlog
    while every slot is taken. An instance's batch is the next request of each of its
    sequences that has one.
  * oldest: sequences hold no slot; a batch takes the next request of the sequences waiting
    longest, up to the batch limit, on whichever instance is free (`max_candidate_sequences`
    bounds how many sequences take part at once, the rest wait in the backlog).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections import deque
from pathlib import Path

from ..._proto import model_config_pb2 as mc
from ..backend import ModelInstance
from ..errors import InternalError, InvalidArgumentError, OpenInferError, UnavailableError
from ..responses import ResponseSender
from ..stats import ModelStats
from ..types import InferRequest, InferResponse, Tensor
from .base import InstancePool, Scheduler
from .dynamic_batcher import BatchShape, batch_limits, plan_batch
from .execute import run_batch
from .ordering import OrderedRelease
from .queues import Entry
from .sequence_state import SequenceTensors

log = logging.getLogger("openinfer.scheduling")

_MAX_UINT64 = (1 << 64) - 1


def correlation_id(request: InferRequest) -> int | str:
    """The request's sequence id; without the parameter, its `id` (digits become a number)."""
    if request.sequence_id not in (0, ""):
        return request.sequence_id
    rid = request.id
    if rid.isascii() and rid.isdigit() and int(rid) <= _MAX_UINT64:
        return int(rid)
    return rid


class Sequence:
    """One live sequence: its waiting requests, its state and where it runs."""

    __slots__ = ("busy", "ended", "id", "lane", "pending", "single", "state", "timer")

    def __init__(self, sequence_id: int | str) -> None:
        self.id = sequence_id
        self.pending: deque[Entry] = deque()
        self.state: dict[str, Tensor] = {}
        self.busy = False
        self.ended = False  # END queued, idle-expired or replaced: takes no more requests
        self.single = False  # made by the iterative sequencer for one request
        self.lane: _Lane | None = None
        self.timer: asyncio.TimerHandle | None = None


class _StateSender(ResponseSender):
    """Captures the model's state outputs as soon as they arrive, then forwards the response."""

    __slots__ = ("inner", "sequence", "tensors")

    def __init__(self, inner: ResponseSender, sequence: Sequence, tensors: SequenceTensors) -> None:
        super().__init__(inner.request)
        self.inner = inner
        self.sequence = sequence
        self.tensors = tensors

    def _deliver(self, response: InferResponse) -> None:
        self.tensors.capture(self.request, response, self.sequence.state)
        self.inner.send(response, final=response.final)

    def _finish(self) -> None:
        self.inner.send(None, final=True)

    def _fail(self, error: Exception) -> None:
        self.inner.fail(error)


class SequenceBatcher(Scheduler):
    """Routes each request to its sequence and lets the strategy batch across sequences."""

    def __init__(
        self,
        config: mc.ModelConfig,
        instances: list[ModelInstance],
        pool: InstancePool,
        stats: ModelStats,
        model_dir: Path,
    ) -> None:
        sb = config.sequence_batching
        self.model_name = config.name
        self.stats = stats
        self.tensors = SequenceTensors(config, model_dir)
        self.idle_s = (int(sb.max_sequence_idle_microseconds) or 1_000_000) / 1e6
        self.batching = config.max_batch_size > 0
        #: Triton's iterative sequencer: a request without a correlation ID is a sequence of its
        #: own (it may come back to `execute` by rescheduling), under an ID made here.
        self.iterative = sb.iterative_sequence
        self._made_ids = itertools.count(1 << 62)  # far from the IDs clients pick
        self.active: dict[int | str, Sequence] = {}
        self.shape = BatchShape(config)
        self.strategy: _Strategy
        if sb.WhichOneof("strategy_choice") == "oldest":
            self.strategy = _Oldest(self, config, pool)
        else:
            self.strategy = _Direct(self, config, instances)
        self._stopped = False

    # ---------------------------------------------------------------- intake
    async def schedule(self, request: InferRequest, sender: ResponseSender) -> None:
        if self._stopped:
            sender.fail(UnavailableError(f"model '{self.model_name}' is not accepting requests"))
            return
        try:
            sequence = self._sequence_for(request)
        except OpenInferError as exc:
            sender.fail(exc)
            return
        sequence.pending.append(Entry(request, sender))
        self._arm(sequence)
        if request.sequence_end or sequence.single:
            self._close(sequence)
        self.strategy.ready(sequence)

    def _sequence_for(self, request: InferRequest) -> Sequence:
        sid = correlation_id(request)
        single = False
        if sid in (0, "") and self.iterative:
            sid, single = next(self._made_ids), True
            request.sequence_start = True
        if sid in (0, ""):
            raise InvalidArgumentError(
                f"inference request to model '{self.model_name}' must specify a non-zero or "
                f"non-empty correlation ID"
            )
        request.sequence_id = sid
        if self.batching and request.batch_size > 1:
            raise InvalidArgumentError(
                f"inference request to model '{self.model_name}' must specify batch-size 1 due "
                f"to requirements of sequence batcher"
            )
        self.tensors.check_correlation_id(request, sid)
        sequence = self.active.get(sid)
        if request.sequence_start:
            if sequence is not None:
                log.warning(
                    "sequence %s for model '%s' has a conflict. The previous sequence did not end "
                    "before this sequence start. Previous sequence will be terminated early.",
                    sid, self.model_name,
                )
                self._close(sequence)
                self._release_if_done(sequence)
            sequence = self.active[sid] = Sequence(sid)
            sequence.single = single
            self.strategy.add(sequence)
        elif sequence is None:
            raise InvalidArgumentError(
                f"inference request for sequence {sid} to model '{self.model_name}' must specify "
                f"the START flag on the first request of the sequence"
            )
        return sequence

    # ---------------------------------------------------------------- lifetime
    def _close(self, sequence: Sequence) -> None:
        """No more requests join this sequence; it is released once its queue has run."""
        sequence.ended = True
        if self.active.get(sequence.id) is sequence:
            del self.active[sequence.id]

    def _release_if_done(self, sequence: Sequence) -> None:
        if sequence.ended and not sequence.pending and not sequence.busy:
            if sequence.timer is not None:
                sequence.timer.cancel()
                sequence.timer = None
            self.strategy.remove(sequence)

    def _arm(self, sequence: Sequence) -> None:
        if sequence.timer is not None:
            sequence.timer.cancel()
        loop = asyncio.get_running_loop()
        sequence.timer = loop.call_later(self.idle_s, self._idle, sequence)

    def _idle(self, sequence: Sequence) -> None:
        sequence.timer = None
        if sequence.busy or sequence.pending or sequence.ended:
            return  # not idle: the end of its running request re-arms the timer
        log.info(
            "sequence %s of model '%s' expired after %.0f us without a request",
            sequence.id, self.model_name, self.idle_s * 1e6,
        )
        self._close(sequence)
        self._release_if_done(sequence)

    # ---------------------------------------------------------------- execution
    async def run(
        self, instance: ModelInstance, sequences: list[Sequence], ordering: OrderedRelease | None
    ) -> None:
        """Execute the next request of each sequence as one batch."""
        entries = [s.pending.popleft() for s in sequences]
        for sequence in sequences:
            sequence.busy = True
        try:
            senders = [e.sender for e in entries]
            if ordering is not None:
                senders = ordering.wrap(senders)
            if self.tensors.states:
                senders = [_StateSender(x, s, self.tensors) for x, s in zip(senders, sequences)]
            requests = []
            for entry, sequence, sender in zip(entries, sequences, senders):
                try:
                    self.tensors.inject(entry.request, sequence.id, sequence.state)
                except OpenInferError as exc:
                    sender.fail(exc)
                    continue
                requests.append((entry.request, sender))
            if requests:
                await run_batch(
                    instance, [r for r, _ in requests], [s for _, s in requests], self.stats, self.model_name
                )
        finally:
            for sequence in sequences:
                sequence.busy = False
                if sequence.ended:
                    self._release_if_done(sequence)
                else:
                    self._arm(sequence)

    def loop_failed(self, task: asyncio.Task[None], sequences: list[Sequence]) -> None:
        """A crashed batching loop must not leave requests waiting forever: fail them."""
        if task.cancelled() or task.exception() is None:
            return
        log.error("sequence batcher of model '%s' failed", self.model_name, exc_info=task.exception())
        error = InternalError(f"the sequence batcher of model '{self.model_name}' failed: {task.exception()}")
        for sequence in sequences:
            while sequence.pending:
                sequence.pending.popleft().sender.fail(error)

    # ---------------------------------------------------------------- shutdown
    async def stop(self) -> None:
        self._stopped = True
        await self.strategy.stop()
        error = UnavailableError(f"model '{self.model_name}' was unloaded before the request ran")
        for sequence in self.strategy.sequences():
            if sequence.timer is not None:
                sequence.timer.cancel()
            while sequence.pending:
                sequence.pending.popleft().sender.fail(error)
        self.active.clear()


class _Strategy:
    def add(self, sequence: Sequence) -> None:
        raise NotImplementedError

    def ready(self, sequence: Sequence) -> None:
        raise NotImplementedError

    def remove(self, sequence: Sequence) -> None:
        raise NotImplementedError

    def sequences(self) -> list[Sequence]:
        raise NotImplementedError

    async def stop(self) -> None:
        raise NotImplementedError


class _Lane:
    """One instance and the sequences holding its slots."""

    def __init__(self, instance: ModelInstance, slots: int) -> None:
        self.instance = instance
        self.slots = slots
        self.sequences: list[Sequence] = []
        self.wake = asyncio.Event()
        self.task: asyncio.Task[None] | None = None


class _Direct(_Strategy):
    def __init__(self, owner: SequenceBatcher, config: mc.ModelConfig, instances: list[ModelInstance]) -> None:
        direct = config.sequence_batching.direct
        self.owner = owner
        slots = max(config.max_batch_size, 1)
        self.lanes = [_Lane(instance, slots) for instance in instances]
        self.backlog: deque[Sequence] = deque()
        self.delay_ns = int(direct.max_queue_delay_microseconds) * 1000
        self.min_utilization = float(direct.minimum_slot_utilization)

    def add(self, sequence: Sequence) -> None:
        for lane in self.lanes:
            if len(lane.sequences) < lane.slots:
                self._assign(sequence, lane)
                return
        self.backlog.append(sequence)

    def _assign(self, sequence: Sequence, lane: _Lane) -> None:
        sequence.lane = lane
        lane.sequences.append(sequence)
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
        lane.sequences.remove(sequence)
        sequence.lane = None
        while self.backlog and len(lane.sequences) < lane.slots:
            self._assign(self.backlog.popleft(), lane)

    def sequences(self) -> list[Sequence]:
        return [s for lane in self.lanes for s in lane.sequences] + list(self.backlog)

    def _lane_ended(self, lane: _Lane, task: asyncio.Task[None]) -> None:
        lane.task = None
        self.owner.loop_failed(task, lane.sequences)

    async def _lane_loop(self, lane: _Lane) -> None:
        while True:
            ready = [s for s in lane.sequences if s.pending and not s.busy]
            if not ready:
                lane.wake.clear()
                await lane.wake.wait()
                continue
            if self.delay_ns and len(ready) / lane.slots < self.min_utilization:
                waited = time.perf_counter_ns() - min(s.pending[0].enqueued_ns for s in ready)
                if waited < self.delay_ns:
                    lane.wake.clear()
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(lane.wake.wait(), (self.delay_ns - waited) / 1e9)
                    continue
            await self.owner.run(lane.instance, ready[: lane.slots], None)

    async def stop(self) -> None:
        for lane in self.lanes:
            task = lane.task
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task


class _Oldest(_Strategy):
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

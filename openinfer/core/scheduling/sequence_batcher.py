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
import itertools
import logging
import time
from pathlib import Path

from ..._proto import model_config_pb2 as mc
from ..backend import ModelInstance
from ..errors import (
    CancelledError,
    InternalError,
    InvalidArgumentError,
    OpenInferError,
    UnavailableError,
)
from ..observability.stats import ModelStats
from ..requests.responses import NullSender, ResponseSender
from ..types import InferRequest, InferResponse
from .base import InstancePool, Scheduler
from .dynamic_batcher import BatchShape
from .execute import run_batch
from .ordering import OrderedRelease
from .queues import Entry
from .sequence_state import SequenceTensors
from .sequence_strategies import Direct, Oldest, Sequence, Strategy

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
        self.strategy: Strategy
        if sb.WhichOneof("strategy_choice") == "oldest":
            self.strategy = Oldest(self, config, pool)
        else:
            self.strategy = Direct(self, config, instances)
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
        if request.timeout_us and self.strategy.waiting(sequence):
            self._expire_at(sequence, time.monotonic_ns() + request.timeout_us * 1000)
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

    def _break(self, sequence: Sequence) -> None:
        """A request of `sequence` did not run, or its instance lost the state: the sequence
        ends here, and its waiting and later requests fail with Triton's missing-START error
        instead of running on state that misses a step (a new START begins it again)."""
        self._close(sequence)
        error = InvalidArgumentError(
            f"inference request for sequence {sequence.id} to model '{self.model_name}' must "
            f"specify the START flag on the first request of the sequence"
        )
        while sequence.pending:
            sequence.pending.popleft().sender.fail(error)

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

    def _expire_at(self, sequence: Sequence, deadline_ns: int) -> None:
        """As Triton: a sequence still in the backlog when the earliest `timeout` of its
        requests runs out is rejected whole; one that has its slot by then is not."""
        if sequence.expires_ns and sequence.expires_ns <= deadline_ns:
            return
        sequence.expires_ns = deadline_ns
        if sequence.expiry is not None:
            sequence.expiry.cancel()
        loop = asyncio.get_running_loop()
        sequence.expiry = loop.call_later(max(deadline_ns - time.monotonic_ns(), 0) / 1e9, self._expired, sequence)

    def _expired(self, sequence: Sequence) -> None:
        sequence.expiry = None
        if not self.strategy.waiting(sequence):
            return
        self._close(sequence)
        self.strategy.remove(sequence)
        if sequence.timer is not None:
            sequence.timer.cancel()
            sequence.timer = None
        error = UnavailableError("timeout of the corresponding sequence has been expired")
        while sequence.pending:
            entry = sequence.pending.popleft()
            entry.request.state.failure_reason = "REJECTED"
            entry.sender.fail(error)

    # ---------------------------------------------------------------- execution
    async def run(
        self, instance: ModelInstance, rows: list[Sequence] | list[Sequence | None],
        ordering: OrderedRelease | None,
    ) -> None:
        """Execute the next request of each sequence as one batch, in row order; a None row is
        a slot without a request, filled with a null request (the direct strategy's)."""
        sequences = [s for s in rows if s is not None]
        entries = [s.pending.popleft() for s in sequences]
        for sequence in sequences:
            sequence.busy = True
        try:
            running = []  # a request cancelled while it waited is dropped, and its sequence ends
            for sequence, entry in zip(sequences, entries):
                if entry.request.state.is_cancelled:
                    entry.request.state.failure_reason = "CANCELED"
                    entry.sender.fail(CancelledError("the request was cancelled before it ran"))
                    self._break(sequence)
                else:
                    running.append(sequence)
            if not running:
                return
            if len(running) < len(sequences):  # a dropped request's row keeps its place, as a null
                rows = [row if row is None or row in running else None for row in rows]
                entries = [e for s, e in zip(sequences, entries) if s in running]
            template = entries[0].request
            senders = [e.sender for e in entries]
            if ordering is not None:
                senders = ordering.wrap(senders)
            if self.tensors.states:
                senders = [_StateSender(x, s, self.tensors) for x, s in zip(senders, sequences)]
            taken = iter(zip(entries, senders))  # in row order, as `sequences` is
            requests: list[tuple[InferRequest, ResponseSender]] = []
            for row in rows:
                if row is not None:
                    entry, sender = next(taken)
                    request = entry.request
                    try:
                        self.tensors.inject(request, row.id, row.state)
                    except OpenInferError as exc:
                        sender.fail(exc)
                        row = None  # its row still holds its place
                if row is None:
                    request = self.tensors.null_request(template)
                    sender = NullSender(request)
                requests.append((request, sender))
            if any(type(sender) is not NullSender for _, sender in requests):
                ran = await run_batch(
                    instance, [r for r, _ in requests], [s for _, s in requests], self.stats, self.model_name
                )
                if not ran:  # the instance failed (its process died, say): whatever state it
                    for sequence in running:  # kept for these sequences is gone with it
                        self._break(sequence)
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

    # ----------------------------------------------------------- instances
    def can_change_instances(self) -> bool:
        return True

    def add_instance(self, instance: ModelInstance) -> None:
        self.strategy.add_instance(instance)

    async def retire_instance(self, instance: ModelInstance) -> None:
        await self.strategy.retire_instance(instance)

    @property
    def stopped(self) -> bool:
        return self._stopped

    # ---------------------------------------------------------------- shutdown
    async def stop(self) -> None:
        self._stopped = True
        await self.strategy.stop()
        error = UnavailableError(f"model '{self.model_name}' was unloaded before the request ran")
        for sequence in self.strategy.sequences():
            for timer in (sequence.timer, sequence.expiry):
                if timer is not None:
                    timer.cancel()
            while sequence.pending:
                sequence.pending.popleft().sender.fail(error)
        self.active.clear()

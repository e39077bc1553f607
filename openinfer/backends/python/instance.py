"""An instance of a Python model in its own worker process, as Triton runs every instance.

A worker that dies fails only the requests it held, with Triton's words; the instance then
reports not ready and is started again by the next request, which fails (as in Triton), so the
one after it is served by the new process. The server and the other models never notice.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from typing import TYPE_CHECKING, Any

from ...core.backend import InstanceSpec, ModelContext, ModelInstance
from ...core.errors import InternalError, OpenInferError, UnavailableError
from ...core.observability.stats import ExecutionTiming
from ...core.requests.responses import ResponseSender
from ...core.types import InferRequest
from . import convert
from .services import ModelServices, model_log
from .shm_files import SharedMemoryFull
from .wire import (
    Call, Cancel, CancelCall, CheckReady, Done, Execute, Executed, Failed, Finalize, Initialize, Log,
    Readiness, Reply, Respond,
)
from .worker_process import PIPELINE_DEPTH, WorkerProcess

if TYPE_CHECKING:
    from .backend import PythonBackend

log = logging.getLogger("openinfer.python")

#: How long a readiness check waits for the model's own `is_ready()`.
READY_TIMEOUT_S = 5.0


class _Batch:
    """A batch the worker is running: what is answered when it reports `Executed`."""

    __slots__ = ("future", "keys", "requests", "senders")

    def __init__(self, future: asyncio.Future, keys: list[int], requests: list[InferRequest],
                 senders: list[ResponseSender]) -> None:
        self.future, self.keys, self.requests, self.senders = future, keys, requests, senders


class PythonInstance(ModelInstance):
    """One instance of a Python model: its worker process, and the requests in flight there.

    The worker runs `execute` calls one at a time, in order, so further batches can wait in its
    queue (Triton's one-batch-per-instance contract holds inside the process): the process
    never idles between batches, and under concurrent load the batches one turn of the loop
    sends cross in one write and run back to back (`core.scheduling.overlap`). Identity [1,16] FP32 over
    HTTP at concurrency 16 on one core, in one run: 3,578-3,774 infer/s with 4 batches queued,
    3,478-4,140 with 8, 3,689-4,814 with 16. A deeper queue commits a request to its instance
    sooner; batchers never use it (`InstancePool`)."""

    pipeline_depth = PIPELINE_DEPTH
    costly_dispatch = True

    def __init__(self, ctx: ModelContext, spec: InstanceSpec, backend: PythonBackend, services: ModelServices) -> None:
        self.ctx = ctx
        self.spec = spec
        self.name = spec.name
        self.backend = backend
        self.services = services
        self.worker: WorkerProcess | None = None
        self._keys = itertools.count()
        self._batches: dict[int, _Batch] = {}
        #: Every request the worker may still answer through a response sender, by key.
        self._senders: dict[int, ResponseSender] = {}
        self._calls: dict[int, asyncio.Task] = {}
        self._ready_check: asyncio.Future[Readiness] | None = None
        self._streams: dict[int, Any] = {}  # the BLS streams among them, for their cancel()
        self._ready = asyncio.Event()
        self._restarting: asyncio.Task | None = None
        self._stopping = False
        self.has_is_ready = False
        params = ctx.config.parameters
        timeout = params["execute_timeout_secs"].string_value if "execute_timeout_secs" in params else ""
        self.execute_timeout = float(timeout) if timeout else None
        self._last_answered = 0.0  # when the worker last finished a batch (and began the next)

    # --------------------------------------------------------------- lifecycle
    async def start(self, worker: WorkerProcess | None = None) -> None:
        if worker is None:
            worker = await self.backend.start_worker(self)
        worker.owner = self
        try:
            self.has_is_ready = bool(await worker.call(Initialize(convert.initialize_args(self.ctx, self.spec)), timeout=600))
        except OpenInferError as exc:
            await worker.kill()
            raise InternalError(exc.message) from None  # the model's failure, in the stub's words
        # Only an initialized worker is the instance's: one that dies while initializing must
        # not start a restart of its own (a model that cannot initialize would respawn forever).
        self.worker = worker
        self._ready.set()

    async def stop(self) -> None:
        self._stopping = True
        if self._restarting is not None:
            self._restarting.cancel()
        if self.worker is not None:
            await self.worker.close(Finalize(), timeout=30)

    @property
    def healthy(self) -> bool:
        return self.worker is not None and not self.worker.dead

    async def not_ready_reason(self) -> str | None:
        """Why the instance cannot serve now (None when it can): a dead process, or the
        model's own `is_ready()` answering False, raising, or not answering in time."""
        worker = self.worker
        if worker is None or worker.dead:
            return f"Stub process '{self.name}' is not healthy."
        if not self.has_is_ready:
            return None
        # One check at a time: a query that comes while one runs waits for its answer, and a
        # check that outlives its query's timeout goes on for the next one, as in Triton.
        if self._ready_check is None or self._ready_check.done():
            self._ready_check = asyncio.get_running_loop().create_future()
            worker.send(CheckReady())
        try:
            answer = await asyncio.wait_for(asyncio.shield(self._ready_check), READY_TIMEOUT_S)
        except asyncio.TimeoutError:
            return "Timed out waiting for user-defined is_ready() response"
        if answer.error is not None:
            return answer.error
        return None if answer.ready else f"Model '{self.name}' is not ready (user-defined check failed)."

    def worker_died(self, worker: WorkerProcess, code: int | None) -> None:
        if worker is not self.worker:
            return
        self._ready.clear()
        held = bool(self._batches or self._senders)
        error = InternalError(self._death_message())
        for batch in self._batches.values():
            if not batch.future.done():
                batch.future.set_exception(error)
        self._batches.clear()
        for sender in self._senders.values():
            sender.fail(error)
        self._senders.clear()
        if self._ready_check is not None and not self._ready_check.done():
            self._ready_check.set_result(Readiness(False, f"Stub process '{self.name}' is not healthy."))
        for task in self._calls.values():
            task.cancel()
        self._calls.clear()
        if not self._stopping:
            log.error("Stub process '%s' is not healthy (exit code %s).", self.name, code)
            if held:  # the execution it broke restarts it, as in Triton; an idle one waits
                self._restart()

    def _death_message(self) -> str:
        return (
            f"Failed to process the request(s) for model instance '{self.name}', message: "
            f"Stub process '{self.name}' is not healthy."
        )

    def _restart(self) -> None:
        """Start a new worker in the background (once); requests wait for it to be ready."""
        if self._restarting is None or self._restarting.done():
            self._restarting = asyncio.ensure_future(self._restart_loop())

    async def _restart_loop(self) -> None:
        delay = 0.5
        while not self._stopping:
            try:
                await self.start()
                log.info("Stub process '%s' restarted", self.name)
                return
            except Exception as exc:
                log.error("restart of stub process '%s' failed: %s", self.name, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10)

    # ---------------------------------------------------------------- execute
    async def execute(self, requests: list[InferRequest], senders: list[ResponseSender]) -> ExecutionTiming:
        worker = self.worker
        if worker is not None and worker.dead:
            await worker.reaped.wait()
            if self._restarting is None or self._restarting.done():
                # It died while idle: this request fails and starts a new process, as in Triton.
                self._restart()
                raise InternalError(self._death_message())
        if not self._ready.is_set():
            await asyncio.wait_for(self._ready.wait(), 60)
            worker = self.worker
        assert worker is not None
        requests, senders = convert.to_run(requests, senders)
        timing = ExecutionTiming()
        while requests:
            executed = await self._run(worker, requests, senders)
            if executed.timing is not None:
                timing = convert.execution_timing(executed.timing, timing)
            if not executed.rescheduled:
                break
            # Requests released with RESCHEDULE go back to `execute`, still unanswered.
            requests, senders = convert.to_run(requests, senders, executed.keys, executed.rescheduled)
        return timing

    async def _run(self, worker: WorkerProcess, requests: list[InferRequest], senders: list[ResponseSender]) -> Any:
        batch_id = next(self._keys)
        wires = []
        for request, sender in zip(requests, senders):
            key = next(self._keys)
            self._senders[key] = sender
            sender.on_cancel = lambda key=key: self._cancel(worker, key)
            wires.append(convert.wire_request(request, key))
        keys = [w.key for w in wires]
        future: asyncio.Future[Executed] = asyncio.get_running_loop().create_future()
        self._batches[batch_id] = _Batch(future, keys, requests, senders)
        try:
            worker.send_batch(Execute(batch_id, wires))
        except Exception:  # never sent (the worker is gone, /dev/shm is full): nothing stays held
            self._batches.pop(batch_id, None)
            for key in keys:
                self._senders.pop(key, None)
            raise
        try:
            executed = await self._answer(batch_id, future)
        except asyncio.CancelledError:  # the caller went away: the worker skips or flags the work
            self._batches.pop(batch_id, None)
            for sender in senders:
                sender.cancel()
            raise
        except asyncio.TimeoutError:
            self._batches.pop(batch_id, None)
            for key in keys:  # these fail with the timeout, not with the process they outlived
                self._senders.pop(key, None)
            await worker.kill()  # a hung model: its process goes, the instance restarts
            self._restart()
            raise UnavailableError(
                f"model '{self.ctx.name}' instance '{self.name}' did not finish within "
                f"{self.execute_timeout}s; the instance was restarted"
            ) from None
        return _Outcome(executed.timing, executed.rescheduled, keys)

    async def _answer(self, batch_id: int, future: asyncio.Future[Executed]) -> Executed:
        """The batch's answer. `execute_timeout_secs` counts from when the worker starts the
        batch: one queued behind others waits for them first (the worker runs batches in
        order, each once the one before it is answered)."""
        if self.execute_timeout is None:
            return await future
        sent = time.monotonic()
        wait = self.execute_timeout
        while True:
            try:
                return await asyncio.wait_for(asyncio.shield(future), wait)
            except asyncio.TimeoutError:
                if next(iter(self._batches), batch_id) != batch_id:
                    wait = self.execute_timeout  # still queued: look again later
                    continue
                wait = max(sent, self._last_answered) + self.execute_timeout - time.monotonic()
                if wait <= 0:
                    raise  # the batch running now has run for the whole timeout: the model hangs

    def _forget(self, key: int) -> None:
        self._senders.pop(key, None)

    def _cancel(self, worker: WorkerProcess, key: int) -> None:
        """Tell the worker a request was cancelled: queued, it is skipped; running, the model's
        `is_cancelled()` turns true. Its sender stays: what the model still sends is delivered
        to a caller that keeps reading (a BLS stream), and dropped for one that left."""
        try:
            worker.send(Cancel([key]))
        except OpenInferError:
            pass  # the worker is gone, and the work with it

    # --------------------------------------------------------------- dispatch
    def dispatch(self, worker: WorkerProcess, message: Any) -> None:
        kind = type(message)
        if kind is Executed:
            if self.execute_timeout is not None:  # only a timeout reads it (`_answer`)
                self._last_answered = time.monotonic()
            worker.batch_answered(message.batch_id)
            batch = self._batches.pop(message.batch_id, None)
            if batch is not None and not batch.future.done():
                # Answered here, not where `_run` resumes: a dead worker's held answers are
                # dispatched just before `worker_died` fails every request still unanswered.
                if message.error is not None:
                    log.error("%s", message.error)
                convert.deliver(message, batch.keys, batch.requests, batch.senders, self._forget)
                batch.future.set_result(message)
        elif kind is Respond:
            self._respond(message)
        elif kind is Call:
            self._calls[message.call_id] = asyncio.ensure_future(self._serve(worker, message))
        elif kind is CancelCall:  # the model cancelled a BLS stream: the callee is asked to stop
            stream = self._streams.get(message.call_id)
            if stream is not None:
                stream.cancel()
        elif kind is Readiness:
            if self._ready_check is not None and not self._ready_check.done():
                self._ready_check.set_result(message)
        elif kind is Log:
            model_log(message.level, message.message, message.filename, message.line)
        elif kind is Done or kind is Failed:
            worker.answered(message)

    def _respond(self, message: Respond) -> None:
        sender = self._senders.get(message.key)
        if sender is None:
            return
        if convert.respond(sender, message.response, message.final, self.ctx.decoupled):
            self._senders.pop(message.key, None)

    async def _serve(self, worker: WorkerProcess, call: Call) -> None:
        """A model's service call, answered with one `Reply` (or one per streamed answer)."""
        try:
            if call.kind in self.services.STREAMS:
                final = False
                stream = self._streams[call.call_id] = self.services.stream(call.kind, call.args)
                async for payload, final in stream:
                    worker.send(Reply(call.call_id, payload, final))
                if not final:
                    worker.send(Reply(call.call_id, None, True))
            else:
                worker.send(Reply(call.call_id, await self.services.handle(call.kind, call.args), True))
        except asyncio.CancelledError:
            _send_quietly(worker, Reply(call.call_id, None, True))
        except SharedMemoryFull as exc:  # the answer's tensors do not fit in /dev/shm
            _send_quietly(worker, Reply(call.call_id, self.services.failed_answer(call.kind, exc), True))
        except Exception as exc:
            _send_quietly(worker, Reply(call.call_id, None, True, convert.triton_error(exc)))
        finally:
            self._calls.pop(call.call_id, None)
            self._streams.pop(call.call_id, None)


class _Outcome:
    __slots__ = ("keys", "rescheduled", "timing")

    def __init__(self, timing: Any, rescheduled: list[int], keys: list[int]) -> None:
        self.timing, self.rescheduled, self.keys = timing, rescheduled, keys


def _send_quietly(worker: WorkerProcess, message: Any) -> None:
    try:
        worker.send(message)
    except OpenInferError:
        pass  # the worker is gone: nobody waits for the answer

"""Python models that opt out of their own process and run on the server's event loop.

`parameters { key: "execution_mode" value { string_value: "in_process" } }` trades Triton's
isolation for latency: no channel crossing and no process wake-ups, which is how MLServer's
`parallel_workers: 0` and KServe run models. The model is called through the same
`ModelRunner` as in a worker, and reaches the same `ModelServices`; only the transport differs.
`execute` runs on the event loop, so it must be quick and must not block: BLS works through
`await request.async_exec()` in an `async def execute`, and the blocking calls (`exec()`,
model loading) are refused with a message that says why.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from ...core.backend import InstanceSpec, ModelContext, ModelInstance
from ...core.errors import InternalError, OpenInferError
from ...core.observability.stats import ExecutionTiming
from ...core.requests.responses import ResponseSender
from ...core.types import InferRequest
from . import convert, pb_utils
from .pb_utils import _host
from .runner import ModelRunner, Started, describe, raised_by_model, wire_response
from .services import ModelServices, log, model_log
from .wire import Executed

MODE_KEY = "execution_mode"
IN_PROCESS = "in_process"

#: Services an in-process model may call synchronously (they never wait for the event loop).
_SYNC_SERVICES = frozenset({
    "metric_family", "metric_create", "metric_increment", "metric_set", "metric_observe",
    "metric_value", "metric_release", "metric_family_release", "is_model_loaded",
})


def wants_in_process(ctx: ModelContext) -> bool:
    params = ctx.config.parameters
    return MODE_KEY in params and params[MODE_KEY].string_value == IN_PROCESS


class InProcessHost:
    """`pb_utils`' host for one in-process instance: services are direct calls."""

    blocking_forbidden = True
    #: What `pb_utils.get_model_dir()` answers: the model's version folder.
    model_dir = ""

    def __init__(self, services: ModelServices, loop: asyncio.AbstractEventLoop, decoupled: bool) -> None:
        self.services = services
        self.decoupled = decoupled
        self.loop = loop
        self.senders: dict[int, ResponseSender] = {}
        self.requested: dict[int, list[str]] = {}

    def call(self, kind: str, *args: Any) -> Any:
        if kind == "is_model_ready":  # cannot wait for the instances' own checks on this loop
            kind = "is_model_loaded"
        if kind not in _SYNC_SERVICES:
            raise pb_utils.TritonModelException(
                f"'{kind}' cannot be called by a model running in the server process: it would block "
                "the server's event loop (run the model in its own process instead)"
            )
        try:
            return getattr(self.services, kind)(*args)
        except OpenInferError as exc:
            raise pb_utils.TritonModelException(exc.message) from None

    def stream(self, kind: str, *args: Any) -> Any:
        return self.call(kind, *args)

    async def call_async(self, kind: str, *args: Any) -> Any:
        try:
            return await self.services.handle(kind, args)
        except OpenInferError as exc:
            raise pb_utils.TritonModelException(exc.message) from None

    def send_response(self, key: int, response: Any, final: bool) -> None:
        wire = None if response is None else wire_response(response, self.requested.get(key))
        if _on_loop(self.loop):
            self._deliver(key, wire, final)
        else:  # a thread the model started: the core's senders live on the loop
            self.loop.call_soon_threadsafe(self._deliver, key, wire, final)

    def _deliver(self, key: int, wire: Any, final: bool) -> None:
        sender = self.senders.get(key)
        if sender is None:
            return
        if convert.respond(sender, wire, final, self.decoupled):
            self.forget(key)

    def forget(self, key: int) -> None:
        self.senders.pop(key, None)
        self.requested.pop(key, None)

    def is_cancelled(self, key: int) -> bool:
        sender = self.senders.get(key)
        return sender is None or sender.closed

    def log(self, level: int, message: str, filename: str, line: int) -> None:
        model_log(level, message, filename, line)


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return threading.current_thread() is threading.main_thread() and not loop.is_running()


class InProcessInstance(ModelInstance):
    """A `TritonPythonModel` object living in the server process."""

    def __init__(self, ctx: ModelContext, spec: InstanceSpec, model_class: type, services: ModelServices) -> None:
        self.ctx = ctx
        self.spec = spec
        self.runner = ModelRunner(model_class, spec.name)
        self.host = InProcessHost(services, asyncio.get_event_loop(), ctx.decoupled)
        self.host.model_dir = str(ctx.version_dir)  # what pb_utils.get_model_dir() answers
        self._keys = 0
        self._background: set[asyncio.Task] = set()

    async def _call(self, fn: Any, *args: Any) -> Any:
        token = _host.enter(self.host)
        try:
            result = fn(*args)
            if asyncio.iscoroutine(result):
                result = await result
            return result
        finally:
            _host.leave(token)

    async def start(self) -> None:
        try:
            await self._call(self.runner.initialize, convert.initialize_args(self.ctx, self.spec))
        except Exception as exc:
            raise InternalError(raised_by_model(exc)) from exc  # in the words of Triton's stub

    async def not_ready_reason(self) -> str | None:
        try:
            ready = self.runner.check_ready(await self._call(self.runner.is_ready))
        except Exception as exc:
            return describe(exc)
        return None if ready else f"Model '{self.spec.name}' is not ready (user-defined check failed)."

    async def execute(self, requests: list[InferRequest], senders: list[ResponseSender]) -> ExecutionTiming:
        timing = ExecutionTiming()
        host = self.host
        requests, senders = convert.to_run(requests, senders)
        while requests:
            keys = []
            wires = []
            for request, sender in zip(requests, senders):
                self._keys += 1
                key = self._keys
                keys.append(key)
                host.senders[key] = sender
                if request.outputs:
                    host.requested[key] = [o.name for o in request.outputs]
                wires.append(convert.wire_request(request, key))
            token = _host.enter(host)
            try:
                batch = self.runner.start(wires)
            finally:
                _host.leave(token)
            if asyncio.iscoroutine(batch.result):
                if self.runner.decoupled:  # answers come through the senders; do not wait
                    task = asyncio.ensure_future(self._background_run(batch))
                    self._background.add(task)
                    task.add_done_callback(self._background.discard)
                    executed = self.runner.conclude(batch)
                else:
                    try:
                        executed = await self._await(batch, shielded=True)
                    except asyncio.CancelledError:  # the caller left: nothing more goes to it
                        for key in keys:
                            host.forget(key)
                        raise
            else:
                executed = self.runner.conclude(batch)
            if executed.error is not None:
                host.log(pb_utils.LogLevel.ERROR, executed.error, "", 0)
            convert.deliver(executed, keys, requests, senders, host.forget)
            if executed.timing is not None:
                timing = convert.execution_timing(executed.timing, timing)
            if not executed.rescheduled:
                break
            # Requests released with RESCHEDULE come back to `execute`, still unanswered.
            requests, senders = convert.to_run(requests, senders, keys, executed.rescheduled)
        return timing

    async def _await(self, batch: Started, shielded: bool = False) -> Executed:
        """The outcome of an `async def execute`. `shielded`: a caller that leaves does not cancel
        the model's coroutine, which sees `request.is_cancelled()` and ends as it would in a
        worker process, instead of meeting CancelledError at whatever it awaits."""
        token = _host.enter(self.host)
        try:
            if shielded:
                running = asyncio.ensure_future(batch.result)
                running.add_done_callback(_outcome_taken)
                return self.runner.conclude(batch, await asyncio.shield(running))
            return self.runner.conclude(batch, await batch.result)
        except Exception as exc:
            return self.runner.conclude(batch, None, exc)
        finally:
            _host.leave(token)

    async def _background_run(self, batch: Started) -> None:
        executed = await self._await(batch)
        if executed.error is not None:
            self.host.log(pb_utils.LogLevel.ERROR, executed.error, "", 0)
            for wire in batch.wires:
                sender = self.host.senders.pop(wire.key, None)
                if sender is not None:
                    sender.fail(InternalError(executed.error))

    async def stop(self) -> None:
        for task in list(self._background):
            task.cancel()
        try:
            await self._call(self.runner.finalize)
        except Exception as exc:  # logged as a worker's failing finalize is; the unload goes on
            log.error("finalize of '%s' failed: %s", self.spec.name, describe(exc))


def _outcome_taken(task: asyncio.Future) -> None:
    """A shielded execute whose caller left has no one to take its outcome: take it here."""
    if not task.cancelled():
        task.exception()

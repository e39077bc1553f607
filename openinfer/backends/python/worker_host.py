"""`pb_utils`' host inside a worker process: every service a model asks for (BLS, metrics,
model loading, responses, logs) is a message to the server; answers come back to the thread
that waits for them."""

from __future__ import annotations

import asyncio
import itertools
import queue
import threading
from typing import Any

from . import ipc, pb_utils
from .runner import wire_response
from .shm_files import SharedMemoryFull
from .wire import Call, CancelCall, Log, Reply, Respond, WireResponse


class _Stream:
    """The answers of one streaming service call, as (payload, final) pairs."""

    def __init__(self, host: WorkerHost, call_id: int, answers: queue.Queue) -> None:
        self._host, self._call_id, self._answers = host, call_id, answers

    def __iter__(self):
        try:
            while True:
                reply: Reply = self._answers.get()
                if reply.error is not None:
                    raise pb_utils.TritonModelException(reply.error[1])
                yield reply.payload, reply.final
                if reply.final:
                    return
        finally:
            self._host.forget_call(self._call_id)

    def cancel(self) -> None:
        self._host.channel.send(CancelCall(self._call_id))


class WorkerHost:
    """`pb_utils`' host in a worker process: every service is a message to the server."""

    blocking_forbidden = False

    def __init__(self, channel: ipc.BlockingChannel) -> None:
        self.channel = channel
        #: Called when a thread is about to wait for the server: someone must read the socket.
        self.need_reader: Any = lambda: None
        #: Called by `is_cancelled`: read what the server sent meanwhile, if nobody is reading.
        self.poll: Any = lambda: None
        self._ids = itertools.count()
        self._waiting: dict[int, queue.Queue] = {}
        self._lock = threading.Lock()
        #: Keys of requests received and not yet finished; and those whose caller left.
        self.active: set[int] = set()
        self.cancelled: set[int] = set()
        #: The outputs each live request asked for (responses leave out the others).
        self.requested: dict[int, list[str]] = {}
        #: What `pb_utils.get_model_dir()` answers: the model's version folder (set by `Load`).
        self.model_dir = ""

    # -- services
    def open_call(self, kind: str, args: tuple) -> tuple[int, queue.Queue]:
        call_id = next(self._ids)
        answers: queue.Queue = queue.Queue()
        with self._lock:
            self._waiting[call_id] = answers
        try:
            self._send_for_model(Call(call_id, kind, args))
        except pb_utils.TritonModelException:
            self.forget_call(call_id)
            raise
        self.need_reader()
        return call_id, answers

    def forget_call(self, call_id: int) -> None:
        with self._lock:
            self._waiting.pop(call_id, None)

    def _send_for_model(self, message: Any) -> None:
        """Send what the model asked for; tensors that do not fit in /dev/shm fail its call."""
        try:
            self.channel.send(message)
        except SharedMemoryFull as exc:
            raise pb_utils.TritonModelException(str(exc)) from None

    def call(self, kind: str, *args: Any) -> Any:
        call_id, answers = self.open_call(kind, args)
        try:
            reply: Reply = answers.get()
        finally:
            self.forget_call(call_id)
        if reply.error is not None:
            raise pb_utils.TritonModelException(reply.error[1])
        return reply.payload

    def stream(self, kind: str, *args: Any) -> _Stream:
        call_id, answers = self.open_call(kind, args)
        return _Stream(self, call_id, answers)

    async def call_async(self, kind: str, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(None, lambda: self.call(kind, *args))

    def deliver(self, reply: Reply) -> None:
        """The reader thread hands a service answer to the thread waiting for it."""
        with self._lock:
            answers = self._waiting.get(reply.call_id)
        if answers is not None:
            answers.put(reply)

    # -- responses and cancellation
    def send_response(self, key: int, response: Any, final: bool) -> None:
        wire = None if response is None else _safe_wire(response, self.requested.get(key))
        self._send_for_model(Respond(key, wire, final))
        if final:
            self.finish([key])

    @property
    def awaiting_replies(self) -> bool:
        return bool(self._waiting)

    def is_cancelled(self, key: int) -> bool:
        if key not in self.cancelled:
            self.poll()
        return key in self.cancelled

    def begin(self, requests: list) -> None:
        with self._lock:
            for request in requests:
                self.active.add(request.key)
                if request.outputs:
                    self.requested[request.key] = request.outputs

    def mark_cancelled(self, keys: list[int]) -> None:
        with self._lock:
            self.cancelled.update(k for k in keys if k in self.active)

    def finish(self, keys: Any) -> None:
        with self._lock:
            for key in keys:
                self.active.discard(key)
                self.cancelled.discard(key)
                self.requested.pop(key, None)

    def log(self, level: int, message: str, filename: str, line: int) -> None:
        self.channel.send(Log(level, message, filename, line))


def _safe_wire(response: Any, requested: list[str] | None) -> WireResponse:
    if not isinstance(response, pb_utils.InferenceResponse):
        raise pb_utils.TritonModelException(
            f"Expected an 'InferenceResponse' object, found type '{type(response)}'."
        )
    return wire_response(response, requested)

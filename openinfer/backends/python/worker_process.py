"""The server's end of one worker process: spawning it, the channel, and what it answered.

The process runs `python -m openinfer.backends.python.worker`; messages cross as frames on a
socketpair, large tensors through two shared rings (`ipc`). One `asyncio.Protocol` per worker
decodes everything a read brought and hands each answer to the owner (an instance, or the
loader that runs `auto_complete_config`) through `dispatch`, in the same callback. While a
batch is out, the loop polls for its answer rather than sleeping (`spin.LoopPoller`), unless
requests overlap (`core.scheduling.overlap`).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any, Protocol

from ...core.errors import InternalError, UnavailableError
from ...core.scheduling.gather import loop_still_busy
from ...core.scheduling.overlap import LOAD
from . import ipc, ring, spin
from .answer_log import AnswerLog
from .ring import NO_RING
from .wire import Done, Failed

log = logging.getLogger("openinfer.python")

#: How many batches an instance may have in its worker at once (queued there, run in order).
PIPELINE_DEPTH = 16


class WorkerOwner(Protocol):
    name: str  # the instance name, as Triton names the stub

    def dispatch(self, worker: WorkerProcess, message: Any) -> None: ...

    def worker_died(self, worker: WorkerProcess, code: int | None) -> None: ...


class WorkerProcess:
    """One running worker: the process, its channel and the reader that dispatches answers."""

    def __init__(self, owner: WorkerOwner, python: str | None = None) -> None:
        self.owner = owner
        self.python = python or sys.executable
        self.process: asyncio.subprocess.Process | None = None
        self.transport: asyncio.Transport | None = None
        self._death: asyncio.Task[None] | None = None
        #: Control messages awaiting their answers; the worker answers them in order.
        self.pending: collections.deque[asyncio.Future[Any]] = collections.deque()
        self.dead = False
        self.exit_code: int | None = None
        #: Set once the death is handled (exit code known, held requests failed).
        self.reaped = asyncio.Event()
        self._outbox: list[bytes] = []
        #: When the batches in the outbox began to wait for the loop to be idle (0: not held).
        self._held_since = 0
        self._turn_began = 0
        #: Shared rings for large tensors: one per direction, mapped by both processes.
        self.to_worker: ring.Arena | None = None
        self.from_worker: ring.Arena | None = None
        #: Where the worker keeps answers it holds back (`answer_log`), read if it dies.
        self.answers: AnswerLog | None = None
        #: Keeps the loop from sleeping while an answer is due shortly; limited as the worker is.
        self.poller = spin.LoopPoller(0)

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    async def spawn(self, env_overrides: dict[str, str] | None = None) -> None:
        parent, child = socket.socketpair()
        self._make_arenas()
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[3])
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
        env[ipc.shm_names.SESSION_ENV] = ipc.shm_names.session()
        env.update(env_overrides or {})
        self.poller = spin.LoopPoller(spin.limit_from_env(env))
        # The working directory is the server's, as Triton's stubs inherit it.
        self.process = await asyncio.create_subprocess_exec(
            self.python,
            "-m",
            "openinfer.backends.python.worker",
            str(child.fileno()),
            self.to_worker.name if self.to_worker is not None else NO_RING,
            self.from_worker.name if self.from_worker is not None else NO_RING,
            self.answers.name if self.answers is not None else NO_RING,
            # Unused by the worker: labels the process in `ps` as Triton's are, so tools that
            # look for "triton_python_backend_stub" (and its instance) find it.
            "triton_python_backend_stub",
            self.owner.name,
            pass_fds=[child.fileno()],
            env=env,
        )
        child.close()
        loop = asyncio.get_running_loop()
        self.transport, _ = await loop.create_connection(lambda: _Channel(self), sock=parent)

    def _make_arenas(self) -> None:
        """The two rings; none when /dev/shm cannot give even their headers (every tensor then
        crosses through the socket, and the log says why once)."""
        try:
            self.to_worker = ring.Arena.create(ipc.shm_prefix())
            self.from_worker = ring.Arena.create(ipc.shm_prefix())
        except ipc.shm_files.SharedMemoryFull as shortage:
            self._release_arenas()
            ipc.shm_files.warn_once(shortage)
        try:
            self.answers = AnswerLog.create(ipc.shm_prefix())
        except ipc.shm_files.SharedMemoryFull:
            self.answers = None  # the worker sends every answer at once

    async def call(self, message: Any, timeout: float | None = None) -> Any:
        """A control message (load, initialize, a readiness check, ...) and its answer's value.

        Several may be in flight (readiness checks from many clients); each answer goes to the
        oldest waiting call, and one that timed out keeps its place so later answers match."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pending.append(future)
        self.send(message)
        answer = await asyncio.wait_for(asyncio.shield(future), timeout)
        if type(answer) is Failed:  # the model's or its process's failure, not the client's (Triton: Internal)
            raise InternalError(answer.message)
        return answer.value

    def answered(self, message: Done | Failed) -> None:
        if self.pending:
            future = self.pending.popleft()
            if not future.done():
                future.set_result(message)

    def send(self, message: Any, at_once: bool = False, hold: bool = False) -> None:
        """Queue a message; everything queued in one loop iteration goes out in one write.
        `at_once`: write it now if nothing is queued before it (the order stays the same).
        `hold`: it may wait while the loop is busy (`_held_turn`), unless something that may
        not wait is queued with it."""
        if self.dead or self.transport is None:
            raise UnavailableError(f"Stub process '{self.owner.name}' is not healthy.")
        frame = ipc.encode(message, self.to_worker)
        if at_once and not self._outbox:
            self.transport.write(frame)
            return
        if not self._outbox:
            if hold:
                self._held_since = self._turn_began = time.perf_counter_ns()
                asyncio.get_running_loop().call_soon(self._held_turn)
            else:
                asyncio.get_running_loop().call_soon(self._flush)
        elif self._held_since and not hold:  # it goes at the end of this turn, and the rest with it
            self._held_since = 0
            asyncio.get_running_loop().call_soon(self._flush)
        self._outbox.append(frame)

    def send_batch(self, message: Any) -> None:
        """Send an `Execute`, its inputs' ring space pinned until `batch_answered`: the answer
        may name them as its outputs (a model that returns an input) instead of copying them.

        One request at a time, the batch goes out at once and both sides may poll for what
        comes next. Under concurrent load (`core.scheduling.overlap`) neither polls, and the batch goes out
        with whatever else this turn of the loop sends: the worker runs them back to back. To a
        worker with nothing to run, it waits until a turn of the loop finds nothing else to do
        (`_held_turn`), so that the batches gathered meanwhile share the worker's wake-up."""
        concurrent = LOAD.concurrent()
        arena = self.to_worker
        start = 0
        if arena is not None:
            start = arena.head
            arena.tell_to_sleep(concurrent)
        idle = not self.poller.outstanding
        # An idle worker under load waits for the loop to be idle too: each write to it costs
        # it a wake-up, and the batches that gather meanwhile share one (`_held_turn`).
        self.send(message, at_once=not concurrent and idle, hold=concurrent and (idle or self._held_since > 0))
        self.poller.sent(not concurrent)
        if arena is not None and arena.head != start:
            arena.pin(message.batch_id, start)

    def batch_answered(self, batch_id: int) -> None:
        """The batch's answer is decoded: its outputs hold what they echo on their own."""
        self.poller.answered()
        if self.to_worker is not None:
            self.to_worker.unpin(batch_id)

    def _held_turn(self) -> None:
        """Once a turn while batches are held: write them when a turn of the loop found nothing
        else to do, when `PIPELINE_DEPTH` wait (no more can come), or after `gather.MAX_HOLD_NS`."""
        if not self._held_since:
            return  # written meanwhile
        now = time.perf_counter_ns()
        if loop_still_busy(self._held_since, self._turn_began, now) and len(self._outbox) < PIPELINE_DEPTH:
            self._turn_began = now
            asyncio.get_running_loop().call_soon(self._held_turn)
            return
        self._flush()

    def _flush(self) -> None:
        self._held_since = 0
        frames, self._outbox = self._outbox, []
        if frames and self.transport is not None and not self.dead:
            self.transport.write(b"".join(frames) if len(frames) > 1 else frames[0])

    def _closed(self) -> None:
        if self._death is None:
            self._death = asyncio.ensure_future(self._died())

    async def _died(self) -> None:
        self.dead = True
        code = None
        if self.process is not None:
            try:
                code = await asyncio.wait_for(self.process.wait(), 5)
            except asyncio.TimeoutError:
                self.process.kill()
            else:  # gone: what it held is final
                self._answer_what_was_held()
        if self.process is not None:
            ipc.cleanup_leftovers(self.process.pid)
        self._release_arenas()
        if self.pending:
            log.error("Stub process '%s' exited with code %s", self.owner.name, code)
        while self.pending:
            future = self.pending.popleft()
            if not future.done():
                future.set_result(Failed(f"Stub process '{self.owner.name}' is not healthy."))
        self.exit_code = code
        try:
            self.owner.worker_died(self, code)
        finally:
            self.reaped.set()

    def _answer_what_was_held(self) -> None:
        """The answers the dead worker held and had not sent (`answer_log`), dispatched as if
        they had come: a crash in a later batch does not take them along. One that did reach
        the socket was dispatched then, and finds its batch answered already."""
        if self.answers is None:
            return
        try:
            for message in ipc.FrameReader().feed(self.answers.left_behind()):
                self.owner.dispatch(self, message)
        except Exception:
            log.exception("answers held by the worker of '%s' could not be read", self.owner.name)

    def forget_arena_names(self) -> None:
        """Unlink the rings' and the answer log's names once both processes hold their mappings."""
        for shared in (self.to_worker, self.from_worker, self.answers):
            if shared is not None:
                shared.unlink()

    def _release_arenas(self) -> None:
        for shared in (self.to_worker, self.from_worker, self.answers):
            if shared is not None:
                shared.close(unlink=True)
        self.to_worker = self.from_worker = self.answers = None

    async def kill(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.kill()
        if self.transport is not None:
            try:
                await asyncio.wait_for(self.reaped.wait(), 5)
            except asyncio.TimeoutError:
                pass

    async def close(self, finalize: Any, timeout: float) -> None:
        """Finalize the model (the `finalize` message) and let the process exit."""
        try:
            if not self.dead:
                await self.call(finalize, timeout=timeout)
        except Exception as exc:
            log.error("finalize of '%s' failed: %s", self.owner.name, exc)
        finally:
            if self.transport is not None:
                self.transport.close()
            if self.process is not None:
                try:
                    await asyncio.wait_for(self.process.wait(), timeout)
                except asyncio.TimeoutError:
                    self.process.kill()


class _Channel(asyncio.Protocol):
    """The server's reader of one worker: every answer a read brought, dispatched in turn."""

    def __init__(self, worker: WorkerProcess) -> None:
        self.worker = worker
        self.frames = ipc.FrameReader()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.frames.arena = self.worker.from_worker
        self.frames.sent = self.worker.to_worker

    def data_received(self, data: bytes) -> None:
        worker = self.worker
        try:
            for message in self.frames.feed(data):
                worker.owner.dispatch(worker, message)
        except Exception:
            log.exception("worker channel of '%s' failed", worker.owner.name)
            assert self.transport is not None
            self.transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self.worker._closed()

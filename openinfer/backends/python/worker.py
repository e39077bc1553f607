"""A Python model's own process, as Triton's stub: imports `model.py`, runs it, answers over
the channel.

Run as `python -m openinfer.backends.python.worker <fd> <inbound ring> <outbound ring> <answer log>`;
the fd is one end of a socketpair; a ring or log named `-` is none (/dev/shm had no room for it).
Three threads:
- the main thread runs the model's methods one call at a time, in order (Triton's contract for
  an instance), and reads the socket itself whenever it waits for work, so a request reaches
  `execute` with no hand-off between threads;
- a watcher reads instead while `execute` runs longer than `WATCH_S` or a thread waits for a
  service answer (BLS): it routes service answers to whichever thread waits for them, marks
  cancelled requests at once and runs readiness checks beside `execute`;
- an event loop thread, started on first use, runs coroutines: an `async def execute` of a
  decoupled model runs there in the background, so several overlap as in Triton.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import io
import os
import signal
import socket
import sys
import threading
import time
from typing import Any, cast

from ...core.memory.malloc import tune_malloc
from ...core.memory import heap
from . import forked, ipc, pb_utils, ring, shm_files, spin
from .answer_log import MAX_HOLD_S, AnswerLog
from .pb_utils import _host, c_module
from .ring import NO_RING
from .runner import (
    ModelRunner,
    auto_complete,
    cancelled_response,
    describe,
    load_worker_model,
    raised_by_model,
)
from .shm_files import SharedMemoryFull, shm_free
from .wire import (
    AutoComplete, CheckReady, Done, Execute, Executed, Failed, Finalize, Initialize, Load, Readiness, Reply,
    Respond, WireResponse,
)
from .wire import Cancel as CancelMessage
from .worker_host import WorkerHost

#: How long `execute` may run before the watcher thread takes over reading the socket, so a
#: cancellation or a readiness check reaches the model while it works.
WATCH_S = 0.02


class Worker:
    """Runs the model's methods on the main thread, which also reads the socket while it has
    nothing to run: a request goes from the socket to `execute` on one thread, with no hand-off.

    A watcher thread reads instead while `execute` runs longer than `WATCH_S`, or at once when a
    thread waits for a service answer (BLS); it hands the socket back as soon as the main thread
    waits for work again. One reader at a time: whoever holds `_read_lock`.

    The watcher looks every `WATCH_S` only while work comes in; after a look that found none
    since the last, it parks until the next task starts. An idle worker then costs no wake-ups
    (here each costs about 80 µs of CPU: a server with a few idle models spent 2% of a core on
    their watchers)."""

    def __init__(self, channel: ipc.BlockingChannel) -> None:
        self.channel = channel
        self.host = WorkerHost(channel)
        self.host.need_reader = self._need_reader
        self.host.poll = self._poll
        self.tasks: collections.deque[Any] = collections.deque()
        self.model_class: Any = None
        self.runner: ModelRunner | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._read_lock = threading.Lock()
        self._cond = threading.Condition()
        self._main_waiting = False
        self._busy_since: float | None = None
        self._wanted = threading.Event()
        self._started = 0  # tasks begun, which the watcher compares between looks
        self._parked = False
        self._park_lock = threading.Lock()
        #: Whether answers may wait for the batches read after them (`answer_log`): only where
        #: this process and the server share one CPU, on which an answer sent at once can only
        #: be read by taking the CPU from the batches still to run.
        self.may_hold = channel.answers is not None and spin.usable_cpus() == 1
        self._held_since = 0.0  # when the first answer now held was held (monotonic)
        inbound = channel.inbound  # where the server says whether to poll (`core.scheduling.overlap`)
        self._spinner = spin.Spinner(  # how the main thread waits
            spin.limit_from_env(os.environ), inbound.told_to_sleep if inbound is not None else None
        )

    # --------------------------------------------------------------- reading
    def route(self, message: Any) -> None:
        """Act on one message from the server; work for the main thread is queued."""
        kind = type(message)
        if kind is Reply:
            self.host.deliver(message)
        elif kind is CancelMessage:  # handled here, so a running execute sees it at once
            self.host.mark_cancelled(message.keys)
        elif kind is CheckReady:  # beside execute, as Triton's stub runs it
            threading.Thread(target=self.check_ready, name="openinfer-is-ready", daemon=True).start()
        else:
            if kind is Execute:
                self.host.begin(message.requests)
            with self._cond:
                self.tasks.append(message)
                self._cond.notify()

    def _server_gone(self) -> None:
        # The server is gone (or done with us): stop, even if the model is still busy.
        with self._cond:
            self.tasks.append(None)
            self._cond.notify()
        _exit_soon()

    def next_task(self) -> Any:
        """The main thread's next message: queued, or read from the socket itself."""
        cond = self._cond
        while True:
            with cond:
                if self.tasks:
                    return self.tasks.popleft()
            if self._read_lock.acquire(blocking=False):
                try:
                    message = self.channel.receive(self._spinner.wait)
                except (EOFError, OSError):
                    return None
                finally:
                    self._read_lock.release()
                # Ours to run next unless the watcher queued work before we took the socket.
                if type(message) is Execute and not self.tasks:
                    self.host.begin(message.requests)
                    return message
                self.route(message)
                del message
                continue
            with cond:  # the watcher reads: wait for what it hands over, or for the socket
                self._main_waiting = True
                while not self.tasks and self._read_lock.locked():
                    cond.wait()
                self._main_waiting = False

    def _need_reader(self) -> None:
        if not self._read_lock.locked():
            self._wanted.set()

    def _poll(self) -> None:
        """Read what has arrived without waiting (a cancellation), when nobody else reads."""
        if not self._read_lock.acquire(blocking=False):
            return
        try:
            messages = self.channel.poll()
        except (EOFError, OSError):
            self._server_gone()
            return
        finally:
            self._stop_reading()
        for message in messages:
            self.route(message)

    def watch(self) -> None:
        """The watcher thread: reads while the main thread is busy for long or a thread waits
        for the server."""
        seen = -1
        while True:
            if self._wanted.wait(None if self._parked else WATCH_S):
                self._wanted.clear()
            busy = self._busy_since
            long_busy = busy is not None and time.monotonic() - busy >= WATCH_S
            if not (long_busy or self.host.awaiting_replies):
                with self._park_lock:
                    self._parked = busy is None and self._started == seen
                    seen = self._started
                continue
            if not self._read_lock.acquire(blocking=False):
                continue  # someone reads already
            try:
                self.channel.send_held()  # answers must not wait for a long batch
                while True:
                    try:
                        message = self.channel.receive()
                    except (EOFError, OSError):
                        self._server_gone()
                        return
                    self.route(message)
                    del message  # a tensor held here would hold its ring space while we wait
                    if self._main_waiting:
                        break
            finally:
                self._stop_reading()

    def _begin(self) -> None:
        """The main thread starts a task: the watcher must be looking while it runs."""
        self._busy_since = time.monotonic()
        with self._park_lock:
            self._started += 1
            if self._parked:
                self._parked = False
                self._wanted.set()

    def _stop_reading(self) -> None:
        """Give up the socket; the main thread, if it waits for it, reads next."""
        self._read_lock.release()
        if self._main_waiting:
            with self._cond:
                self._cond.notify_all()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            threading.Thread(target=self._loop.run_forever, name="openinfer-model-loop", daemon=True).start()
        return self._loop

    def _wait(self, value: Any) -> Any:
        """The value of a model method, waiting on the loop thread if it is a coroutine."""
        if asyncio.iscoroutine(value) or asyncio.isfuture(value):
            return asyncio.run_coroutine_threadsafe(_awaited(value), self.loop).result()
        return value

    def check_ready(self) -> None:
        """Answer a readiness check with the model's own `is_ready()` (True without one)."""
        runner = self.runner
        try:
            ready = True if runner is None else runner.check_ready(self._wait(runner.is_ready()))
            answer = Readiness(ready)
        except BaseException as exc:
            answer = Readiness(False, describe(exc))
        self.channel.send(answer)

    # ---------------------------------------------------------------- execute
    def execute(self, message: Execute) -> None:
        """Run a batch; requests cancelled while they waited in this process are skipped."""
        runner = self.runner
        assert runner is not None
        live = message.requests
        if self.host.cancelled:
            skipped = [w.key for w in live if w.key in self.host.cancelled]
            for key in skipped:
                self.channel.send(Respond(key, cancelled_response(), True))
            self.host.finish(skipped)
            live = [w for w in live if w.key not in skipped]
        if not live:
            self.channel.send(Executed(message.batch_id, [None] * len(message.requests), None, []))
            return
        batch = runner.start(live)
        if asyncio.iscoroutine(batch.result):
            if runner.decoupled:  # Triton does not wait: responses come through the senders
                future = asyncio.run_coroutine_threadsafe(_awaited(batch.result), self.loop)
                future.add_done_callback(lambda f: self._background_done(batch, f))
                self._report(message, runner.conclude(batch, None, None), live)
                return
            try:
                result = self._wait(batch.result)
                error = None
            except Exception as exc:
                result, error = None, exc
            self._report(message, runner.conclude(batch, result, error), live)
            return
        self._report(message, runner.conclude(batch), live)

    def _background_done(self, batch: Any, future: Any) -> None:
        error = future.exception()
        result = None if error is not None else future.result()
        outcome = self.runner.conclude(batch, result, error)  # type: ignore[union-attr]
        if outcome.error is not None:
            self.host.log(pb_utils.LogLevel.ERROR, outcome.error, "", 0)
            for wire in batch.wires:
                if wire.key in self.host.active:
                    self.channel.send(Respond(wire.key, WireResponse([], {}, (1, outcome.error)), True))
            self.host.finish([w.key for w in batch.wires])

    def _report(self, message: Execute, outcome: Executed, live: list) -> None:
        responses = outcome.responses
        if responses is not None and len(live) != len(message.requests):
            by_key = dict(zip((w.key for w in live), responses))
            responses = [by_key.get(w.key) for w in message.requests]
        inbound = self.channel.inbound
        echo = None
        if inbound is not None and responses:
            inputs = [array for wire in live for _, _, array in wire.inputs if array.nbytes >= ipc.SHM_THRESHOLD]
            echo = ring.echo_finder(message.batch_id, inputs, inbound) if inputs else None
        answer = Executed(message.batch_id, responses, outcome.timing, outcome.rescheduled, outcome.error)
        try:
            if not (self.may_hold and echo is None and self._hold(answer)):
                self.channel.send(answer, echo)
        except SharedMemoryFull as exc:  # the outputs do not fit in /dev/shm: the batch fails
            outcome = outcome._replace(batch_id=message.batch_id, responses=None, error=str(exc))
            self.channel.send(outcome)
        if outcome.error is not None or not self.runner.decoupled:  # type: ignore[union-attr]
            answered = [w.key for w, r in zip(live, outcome.responses or []) if r is not None]
            self.host.finish(answered if outcome.error is None else [w.key for w in live])

    def _hold(self, answer: Executed) -> bool:
        """Keep the answer back while batches already read wait to run (`answer_log`), unless
        the first held has waited `MAX_HOLD_S` or this batch ran that long (the next would
        likely keep it as long); the next write, or the next wait for input, sends it, as does
        the watcher once a batch runs longer than `WATCH_S`. A decoupled model's answers are
        never held. Only where `may_hold`."""
        channel = self.channel
        if not (self.tasks or channel.has_read_ahead()) or self.runner.decoupled:  # type: ignore[union-attr]
            return False
        now = time.monotonic()
        busy = self._busy_since
        if busy is not None and now - busy >= MAX_HOLD_S:
            return False
        if not channel.holding:
            self._held_since = now
        elif now - self._held_since >= MAX_HOLD_S:
            return False
        return channel.hold(answer)

    # ------------------------------------------------------------------- loop
    def run(self) -> None:
        threading.Thread(target=self.watch, name="openinfer-reader", daemon=True).start()
        _host.install(self.host)
        forked.install(self.host)  # a process the model forks reaches the server too
        while True:
            message = self.next_task()
            if message is None:
                return
            kind = type(message)
            if kind is Execute:
                self._begin()
                try:
                    self.execute(message)
                finally:
                    self._busy_since = None
                    del message  # its inputs' ring space is free while we wait for the next
                continue
            self._begin()
            try:
                if kind is Load:
                    self.host.model_dir = message.model_dir or os.path.dirname(os.path.abspath(message.path))
                    self.model_class = load_worker_model(message.path, message.backend_dir)
                    self.channel.send(Done(None))
                elif kind is AutoComplete:
                    self.channel.send(Done(auto_complete(self.model_class, message.config)))
                elif kind is Initialize:
                    self.runner = ModelRunner(self.model_class, message.args["model_instance_name"])
                    self._wait(self.runner.initialize(message.args))
                    heap.settle()  # the model and what it imported stay out of full collections
                    self.channel.send(Done(hasattr(self.runner.model, "is_ready")))
                elif kind is Finalize:
                    if self.runner is not None:
                        self._wait(self.runner.finalize())
                    self.channel.send(Done(None))
                    return
            except BaseException as exc:  # as Triton's stub words them: the model's frames where it ran
                self.channel.send(Failed(raised_by_model(exc) if kind is Initialize else f"{type(exc).__name__}: {exc}"))
            finally:
                self._busy_since = None


def _leave() -> None:
    """End the process now, taking a killed server's shared-memory files along."""
    try:
        ipc.shm_names.remove_own_if_server_dead()
    finally:
        os._exit(0)


def _exit_soon(grace_s: float = 1.0) -> None:
    """End the process shortly unless the main thread returns first (a model stuck in
    `execute` must not outlive its server)."""
    timer = threading.Timer(grace_s, _leave)
    timer.daemon = True
    timer.start()


def _report_to_server(host: WorkerHost, text: str) -> None:
    """A worker's own warning, in the server's log. From a thread of its own: the shortage is
    met inside a send, which holds the channel's write lock until it is done."""
    threading.Thread(target=host.log, args=(pb_utils.LogLevel.WARNING, text, shm_files.__file__, 0),
                     name="openinfer-report", daemon=True).start()


async def _awaited(value: Any) -> Any:
    return await value


def main() -> None:
    tune_malloc()
    fd, inbound_name, outbound_name, answers_name = int(sys.argv[1]), *sys.argv[2:5]
    sys.argv = [""]  # as in Triton's embedded interpreter: the model sees no arguments of ours
    # A model's prints reach the server's log a line at a time, each line in one write: unbuffered,
    # a print's text and its newline were two writes, and the server's own lines fell between.
    for stream in (sys.stdout, sys.stderr):
        cast(io.TextIOWrapper, stream).reconfigure(line_buffering=True, write_through=False)
    # As Triton's stub: a Ctrl-C or SIGTERM meant for the server's process group must not end
    # the worker before the server has had it finalize the model.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sock = socket.socket(fileno=fd)
    sock.setblocking(True)
    ipc.shm_names.join(os.environ[ipc.shm_names.SESSION_ENV])
    inbound, outbound = (None if name == NO_RING else ring.Arena(name) for name in (inbound_name, outbound_name))
    free = outbound.free if outbound is not None else lambda: shm_free() or 0
    sys.modules.setdefault("triton_python_backend_utils", pb_utils)  # Triton's module names
    sys.modules.setdefault("c_python_backend_utils", c_module.module(free))
    answers = None if answers_name == NO_RING else AnswerLog(answers_name)
    worker = Worker(ipc.BlockingChannel(sock, inbound=inbound, outbound=outbound, answers=answers))
    shm_files.report = functools.partial(_report_to_server, worker.host)
    try:
        worker.run()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
            sock.close()
        finally:
            _leave()


if __name__ == "__main__":
    main()

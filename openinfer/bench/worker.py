"""One load-generating process: its own event loop, connections and latency record.

The parent steers workers over a pipe (``run`` a level, ``snap`` a window, ``stop``, ``exit``);
each live completion count also goes to a shared array so the progress bar costs no messages.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from .control import ModelInfo
from .options import Options
from .plan import build
from .v2_http import HttpDriver, InferError
from .validate import ValidationError

_FAILURES = (InferError, ValidationError, ConnectionError, asyncio.TimeoutError, OSError)


@dataclass
class LevelCommand:
    """What one worker does for one level: its share of the concurrency or rate."""

    concurrency: int = 0
    rate: float = 0.0
    request_count: int = 0  # 0: until stopped


@dataclass
class Snapshot:
    count: int = 0
    errors: int = 0
    delayed: int = 0
    latencies_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    cpu_s: float = 0.0
    wall_s: float = 0.0
    first_error: str = ""


class Worker:
    def __init__(self, opts: Options, info: ModelInfo, index: int, slots: int, counter: Any):
        self.opts, self.info, self.index, self.slots = opts, info, index, slots
        self.counter = counter
        plan = build(opts, info)
        self.rows = len(plan.rows)
        if opts.protocol == "grpc":
            from .v2_grpc import GrpcDriver

            self.driver: Any = GrpcDriver(opts, plan, index, slots)
        else:
            self.driver = HttpDriver(opts, plan, index, slots)
        self.sequence_length = opts.sequence_length or (20 if info.sequence else 0)
        self._reset()
        self.total = 0
        self.next_seq = 1 + index * 1_000_000
        self.tasks: list[asyncio.Task[None]] = []
        self.stopping = False

    def _reset(self) -> None:
        self.lat: list[int] = []
        self.count = self.errors = self.delayed = 0
        self.first_error = ""
        self.t_snap = time.perf_counter()
        self.cpu_snap = time.process_time()

    def snapshot(self) -> Snapshot:
        now, cpu = time.perf_counter(), time.process_time()
        snap = Snapshot(self.count, self.errors, self.delayed, np.array(self.lat, np.int64),
                        cpu - self.cpu_snap, now - self.t_snap, self.first_error)
        self._reset()
        return snap

    def _params(self, state: list[int]) -> dict[str, Any] | None:
        """Sequence flags for the next request of a slot; state is [sequence id, position]."""
        if not self.sequence_length:
            return None
        if state[1] == 0:
            state[0] = self.next_seq
            self.next_seq += 1
        pos = state[1]
        state[1] = (pos + 1) % self.sequence_length
        return {"sequence_id": state[0], "sequence_start": pos == 0,
                "sequence_end": pos == self.sequence_length - 1}

    async def _one(self, slot: int, state: list[int]) -> None:
        n = self.total
        self.total += 1
        validate = n % self.opts.validate_every == 0
        t0 = time.perf_counter_ns()
        try:
            await self.driver.infer(slot, n % self.rows, self._params(state), validate)
        except _FAILURES as exc:
            self.errors += 1
            self.counter[self.index] += 1  # finished attempts: the parent waits on these
            if not self.first_error:
                self.first_error = f"{type(exc).__name__}: {exc}"
            return
        self.lat.append(time.perf_counter_ns() - t0)
        self.count += 1
        self.counter[self.index] += 1

    async def _closed_loop(self, slot: int, budget: list[int]) -> None:
        state = [0, 0]
        while not self.stopping:
            if budget[0] >= 0:
                if budget[0] == 0:
                    return
                budget[0] -= 1
            await self._one(slot, state)

    async def _open_loop(self, rate: float, budget: list[int]) -> None:
        free: asyncio.Queue[int] = asyncio.Queue()
        for s in range(self.slots):
            free.put_nowait(s)
        states = [[0, 0] for _ in range(self.slots)]
        interval = 1.0 / rate
        loop = asyncio.get_running_loop()
        next_t = loop.time()
        inflight: set[asyncio.Task[None]] = set()

        async def run(slot: int) -> None:
            try:
                await self._one(slot, states[slot])
            finally:
                free.put_nowait(slot)

        while not self.stopping and budget[0] != 0:
            delay = next_t - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            if free.empty():
                self.delayed += 1
            slot = await free.get()
            if budget[0] > 0:
                budget[0] -= 1
            t = asyncio.create_task(run(slot))
            inflight.add(t)
            t.add_done_callback(inflight.discard)
            next_t += interval
        if inflight:
            await asyncio.gather(*inflight, return_exceptions=True)

    def start(self, cmd: LevelCommand) -> None:
        self.stopping = False
        budget = [cmd.request_count if cmd.request_count > 0 else -1]
        self._reset()
        if cmd.rate > 0:
            self.tasks = [asyncio.ensure_future(self._open_loop(cmd.rate, budget))]
        else:  # concurrency 0: an idle worker, started only so that its clocks restart
            self.tasks = [asyncio.ensure_future(self._closed_loop(s, budget))
                          for s in range(cmd.concurrency)]

    async def stop(self) -> Snapshot:
        self.stopping = True
        if self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)
        self.tasks = []
        return self.snapshot()


async def _serve(conn: Connection, worker: Worker) -> None:
    loop = asyncio.get_running_loop()
    inbox: asyncio.Queue[Any] = asyncio.Queue()

    def read_pipe() -> None:
        # A thread, not loop.add_reader: the event loop would make the pipe non-blocking, and
        # a large snapshot sent on a non-blocking pipe fails half-way.
        while True:
            try:
                msg = conn.recv()
            except (EOFError, OSError):
                msg = ("exit", None)
            loop.call_soon_threadsafe(inbox.put_nowait, msg)
            if msg[0] == "exit":
                return

    await worker.driver.setup()
    threading.Thread(target=read_pipe, daemon=True).start()
    conn.send(("ready", os.getpid()))
    while True:
        kind, arg = await inbox.get()
        if kind == "run":
            worker.start(arg)
        elif kind == "snap":
            conn.send(("snap", worker.snapshot()))
        elif kind == "stop":
            conn.send(("stopped", await worker.stop()))
        elif kind == "exit":
            await worker.stop()
            await worker.driver.close()
            try:
                conn.send(("bye", None))
            except OSError:
                pass
            return


def _tune_malloc() -> None:
    """Keep glibc from mapping and unmapping every large response buffer.

    With default thresholds each multi-hundred-KiB receive buffer is an mmap/munmap pair; for
    [1,65536] FP32 tensors that halves a Python gRPC peer's throughput (measured on a bare
    echo), and the generator must stay cheap. No-op where the C library is not glibc.
    """
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-1, 1 << 30)  # M_TRIM_THRESHOLD
        libc.mallopt(-3, 1 << 30)  # M_MMAP_THRESHOLD
    except (OSError, AttributeError):
        pass


def main(conn: Connection, opts: Options, info: ModelInfo, index: int, slots: int,
         counter: Any) -> None:
    """Process entry point (spawned): set up, then obey the parent until ``exit``."""
    _tune_malloc()
    try:
        import uvloop

        run: Any = uvloop.run
    except ImportError:  # the standard loop is slower but correct
        run = asyncio.run
    try:
        worker = Worker(opts, info, index, slots, counter)
        run(_serve(conn, worker))
    except BaseException as exc:  # report any setup failure to the parent, then die
        try:
            conn.send(("error", f"worker {index}: {type(exc).__name__}: {exc}"))
        except Exception:
            pass
        raise SystemExit(1) from None

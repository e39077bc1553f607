"""The thread an engine computes in, and the way its results reach the event loop.

Model code never runs on the event loop. An engine owns one thread; requests are handed to
it through a locked queue, and everything it produces in one step (responses, failures,
execution records for the statistics) goes back to the loop in one `call_soon_threadsafe`,
where senders and counters are touched (neither is thread-safe).

The engine and the loop share one GIL. A decode step is hundreds of small torch calls, each
releasing and retaking it; a loop that wakes up to deliver the step's tokens would fight for
the GIL at every one of them, and every lost round is a futex wake and a context switch on
both sides (on a small model that costs more than the delivery itself). So after handing a
step over, the engine waits (without the GIL, at most `TURN_S`) until the loop has delivered
it and let the woken consumers run once: the two take turns instead of interleaving.

A turn costs two thread wake-ups, and on a virtual machine a thread that slept for a while wakes
slowly: its CPU halted and must resume (on the development machine the loop runs a callback 85 µs,
median, after a `call_soon_threadsafe` that follows a millisecond of sleep; two threads that wake
each other back to back take 28 µs a wake-up). Measured per token on the 2-vCPU development machine
(tiny Llama, concurrency 1, streamed through the OpenAI serving code in process): the step 0.9-1.3
ms; the turn 165-200 µs, of which 60-85 µs pass before the loop runs `_drain`, 50-65 µs go to
delivering and to the consumers' own work (the OpenAI chunk adds 10-15 µs to a bare stream's), and
45-55 µs pass before the engine runs again. The two wake-ups, most of the turn, are a cost that
`model.generate` never pays: it does not leave its thread.

Taking turns pays while a step's delivery is small: one sequence's token. With several sequences
running, the loop's share of a step (a chunk for every stream) is several times larger, and it
pays to let the loop deliver while the engine computes the next step, its torch calls releasing
the GIL: in process, at concurrency 8, interleaved over eleven rounds, the engine that did not
wait was faster in nine (median 2,855-3,305 against 2,532-2,782 tokens/s). So an engine waits
for its turn only after a step that ran one sequence or none (`takes_turns`).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...core.errors import UnavailableError
from ...core.observability.stats import ExecutionTiming, ModelStats
from ...core.requests.responses import ResponseSender
from ...core.types import InferResponse

log = logging.getLogger("openinfer.llm")

#: The longest an engine waits for the loop to take its turn (a busy loop must not stall it).
TURN_S = 0.002


@dataclass
class Outbox:
    """What one engine step hands back to the loop."""

    sends: list[tuple[ResponseSender, InferResponse | None, bool]] = field(default_factory=list)
    failures: list[tuple[ResponseSender, Exception]] = field(default_factory=list)
    executions: list[tuple[int, ExecutionTiming]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.sends or self.failures or self.executions)


class EngineThread:
    """Base: a daemon thread running `step()` while there is work; subclasses compute."""

    def __init__(self, name: str, loop: asyncio.AbstractEventLoop, stats: ModelStats | None) -> None:
        self.name = name
        self.loop = loop
        self.stats = stats
        self._cv = threading.Condition()
        self._incoming: list[Any] = []
        self._stopping = False
        # Outboxes waiting for the loop. Only the first one of a run wakes the loop: each wakeup
        # is a self-pipe write whose return waits for the GIL the loop then holds.
        self._out_lock = threading.Lock()
        self._pending: list[Outbox] = []
        self._thread = threading.Thread(target=self._main, name=f"openinfer-{name}", daemon=True)
        self.on_step: Callable[[Outbox], None] | None = None  # test hook, called on the loop

    # ------------------------------------------------------------------ loop side
    def start(self) -> None:
        self._thread.start()

    def submit(self, item: Any) -> None:
        with self._cv:
            if self._stopping:
                raise UnavailableError(f"model '{self.name}' is unloading")
            self._incoming.append(item)
            self._cv.notify()

    async def stop(self) -> None:
        with self._cv:
            self._stopping = True
            self._cv.notify()
        await asyncio.get_running_loop().run_in_executor(None, self._thread.join)

    def _drain(self, turn: Any) -> None:
        with self._out_lock:
            batch, self._pending = self._pending, []
        for outbox in batch:
            self._deliver(outbox)
        if turn is not None:  # after the consumers these deliveries woke (callbacks run in order)
            self.loop.call_soon(turn.release)

    def _deliver(self, outbox: Outbox) -> None:
        for sender, error in outbox.failures:
            sender.fail(error)
        for sender, response, final in outbox.sends:
            sender.send(response, final=final)
        if self.stats is not None:
            for batch_size, timing in outbox.executions:
                self.stats.record_execution(batch_size, batch_size, timing)
        if self.on_step is not None:
            self.on_step(outbox)

    def loop_caught_up(self) -> bool:
        """True when the loop has taken every outbox: when it lags, an engine may hold
        streaming deltas back and send them merged (as vLLM does for slow consumers)."""
        return not self._pending

    # ---------------------------------------------------------------- thread side
    def _take(self) -> list[Any] | None:
        """New work; blocks while idle; None once stopping."""
        with self._cv:
            while not self._incoming and not self.busy() and not self._stopping:
                self._cv.wait()
            if self._stopping:
                return None
            items, self._incoming = self._incoming, []
            return items

    def _main(self) -> None:
        import torch

        with torch.inference_mode():
            while True:
                items = self._take()
                if items is None:
                    break
                outbox = Outbox()
                try:
                    self.step(items, outbox)
                except Exception as exc:  # an engine bug must fail requests, not hang them
                    log.exception("engine step of model '%s' failed", self.name)
                    self.fail_all(outbox, exc)
                self.flush(outbox)
        outbox = Outbox()
        with self._cv:
            leftover, self._incoming = self._incoming, []
        self.fail_all(outbox, UnavailableError(f"model '{self.name}' is unloading"), leftover)
        self.flush(outbox)

    def flush(self, outbox: Outbox) -> None:
        if not outbox:
            return
        with self._out_lock:
            wake = not self._pending
            self._pending.append(outbox)
        if not wake:  # the loop is already called for and will take this one too
            return
        turn = None
        if self.takes_turns():
            turn = threading.Lock()  # held until the loop releases it: cheaper than an Event
            turn.acquire()
        try:
            self.loop.call_soon_threadsafe(self._drain, turn)
        except RuntimeError:  # the loop is closed: nobody is waiting any more
            with self._out_lock:
                self._pending.clear()
            return
        if turn is not None:
            turn.acquire(timeout=TURN_S)

    # ----------------------------------------------------------------- subclasses
    def takes_turns(self) -> bool:
        """Whether the engine waits for the loop after handing a step over (the docstring above)."""
        return True

    def busy(self) -> bool:
        """Work in progress that needs more steps without new input."""
        return False

    def step(self, items: list[Any], outbox: Outbox) -> None:
        raise NotImplementedError

    def fail_all(self, outbox: Outbox, error: Exception, extra: list[Any] = ()) -> None:  # type: ignore[assignment]
        raise NotImplementedError

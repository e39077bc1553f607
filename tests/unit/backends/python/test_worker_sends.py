"""When the server's end of a worker channel writes a batch: at once for a lone request; under
concurrent load (`core.scheduling.overlap`) with the loop's turn to a busy worker, and to an idle
one once the loop is idle too.

A real socketpair and the running loop's transport stand in for nothing: the worker's end is
read without waiting, so what is there before the loop turns is what was written at once.
"""

from __future__ import annotations

import asyncio
import socket

import numpy as np
import pytest

from openinfer.backends.python import ipc, worker_process
from openinfer.backends.python.wire import Execute, WireRequest
from openinfer.backends.python.worker_process import WorkerProcess
from openinfer.core.scheduling import overlap


class _Owner:
    name = "identity_0_0"

    def dispatch(self, worker: WorkerProcess, message: object) -> None:
        pass

    def worker_died(self, worker: WorkerProcess, code: int | None) -> None:
        pass


def _batch(batch_id: int) -> Execute:
    values = np.full((1, 4), batch_id, np.float32)
    return Execute(batch_id, [WireRequest(batch_id, "m", "", "", [("IN", "FP32", values)], ["OUT"], {}, 0, 0, 0)])


def _written(sock: socket.socket) -> list[int]:
    """The batch ids of every frame the worker's end can read now, in order."""
    data = b""
    while True:
        try:
            data += sock.recv(1 << 16, socket.MSG_DONTWAIT)
        except BlockingIOError:
            break
    return [message.batch_id for message in ipc.FrameReader().feed(data)]


@pytest.fixture
async def channel():
    """The server's end (a `WorkerProcess` on the loop's transport) and the worker's socket."""
    ours, theirs = socket.socketpair()
    worker = WorkerProcess(_Owner())
    worker.transport, _ = await asyncio.get_running_loop().create_connection(asyncio.Protocol, sock=ours)
    yield worker, theirs
    worker.transport.close()
    theirs.close()


async def test_alone_the_first_batch_in_flight_is_written_at_once_and_later_ones_keep_their_order(channel, monkeypatch):
    monkeypatch.setattr(overlap.LOAD, "_overlap_until", 0)  # no request overlapped another
    worker, theirs = channel
    worker.send_batch(_batch(1))
    assert _written(theirs) == [1]  # before the loop turned
    worker.send_batch(_batch(2))  # one is in flight: this one waits its turn
    worker.send_batch(_batch(3))
    assert _written(theirs) == []
    await asyncio.sleep(0)
    assert _written(theirs) == [2, 3]


@pytest.fixture
def under_load(monkeypatch):
    monkeypatch.setattr(overlap, "OVERLAP_WINDOW_NS", 600 * 10**9)
    monkeypatch.setattr(overlap.LOAD, "_overlap_until", 0)
    overlap.LOAD.entered(2)  # two requests in flight together


@pytest.fixture
def loop_busy(monkeypatch):
    """Whether the loop counts as busy on each look of a hold: set `busy[0]`."""
    busy = [True]
    monkeypatch.setattr(worker_process, "loop_still_busy", lambda *_: busy[0])
    return busy


async def test_under_load_a_busy_worker_gets_every_batch_at_the_end_of_the_loops_turn(channel, under_load, loop_busy):
    worker, theirs = channel
    worker.poller.outstanding = 1  # it runs a batch already: a write wakes nobody
    for batch_id in (1, 2, 3):
        worker.send_batch(_batch(batch_id))
    assert _written(theirs) == []
    await asyncio.sleep(0)
    assert _written(theirs) == [1, 2, 3]


async def test_under_load_an_idle_worker_waits_while_the_loop_is_busy_then_gets_them_together(channel, under_load, loop_busy):
    worker, theirs = channel
    worker.send_batch(_batch(1))
    await asyncio.sleep(0)
    worker.send_batch(_batch(2))
    await asyncio.sleep(0)
    assert _written(theirs) == []  # the loop had other work both turns
    loop_busy[0] = False
    await asyncio.sleep(0)
    assert _written(theirs) == [1, 2]
    worker.poller.outstanding = 0  # answered: the next ones wait again
    worker.send_batch(_batch(3))
    await asyncio.sleep(0)
    assert _written(theirs) == [3]  # the loop was idle at once


async def test_a_held_batch_goes_with_a_message_that_may_not_wait(channel, under_load, loop_busy):
    worker, theirs = channel
    worker.send_batch(_batch(1))
    await asyncio.sleep(0)
    worker.send(Execute(2, []))  # a message sent plainly (as a cancellation is)
    await asyncio.sleep(0)
    assert _written(theirs) == [1, 2]


async def test_a_hold_ends_when_the_worker_can_take_no_more(channel, under_load, loop_busy):
    worker, theirs = channel
    for batch_id in range(worker_process.PIPELINE_DEPTH):
        worker.send_batch(_batch(batch_id))
    await asyncio.sleep(0)
    assert _written(theirs) == list(range(worker_process.PIPELINE_DEPTH))

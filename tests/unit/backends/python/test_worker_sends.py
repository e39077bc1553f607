"""When the server's end of a worker channel writes a batch: at once for a lone request, with
the loop's turn under concurrent load (`core.scheduling.overlap`).

A real socketpair and the running loop's transport stand in for nothing: the worker's end is
read without waiting, so what is there before the loop turns is what was written at once.
"""

from __future__ import annotations

import asyncio
import socket

import numpy as np
import pytest

from openinfer.backends.python import ipc
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


async def test_under_load_every_batch_waits_for_the_loops_turn_and_they_cross_together(channel, monkeypatch):
    monkeypatch.setattr(overlap, "OVERLAP_WINDOW_NS", 600 * 10**9)
    monkeypatch.setattr(overlap.LOAD, "_overlap_until", 0)
    overlap.LOAD.entered(2)  # two requests in flight together
    worker, theirs = channel
    for batch_id in (1, 2, 3):
        worker.send_batch(_batch(batch_id))
    assert _written(theirs) == []
    await asyncio.sleep(0)
    assert _written(theirs) == [1, 2, 3]

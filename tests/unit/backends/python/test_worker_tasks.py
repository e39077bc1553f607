"""The worker's main thread: what it reads itself runs at once, after anything handed over first.

A real `Worker` over a real socketpair; the test plays the server's end, writing the frames the
server writes and reading the worker's answers."""

from __future__ import annotations

import json
import socket
import threading

import numpy as np
import pytest

from openinfer.backends.python import ipc, pb_utils
from openinfer.backends.python.runner import ModelRunner
from openinfer.backends.python.wire import Cancel, Execute, Executed, Respond, WireRequest
from openinfer.backends.python.worker import Worker


class Doubler:
    """Answers each request with its input twice over."""

    def execute(self, requests: list) -> list:
        return [
            pb_utils.InferenceResponse([pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(r, "IN").as_numpy() * 2)])
            for r in requests
        ]


@pytest.fixture
def ends():
    server_end, worker_end = socket.socketpair()
    worker = Worker(ipc.BlockingChannel(worker_end))
    worker.runner = ModelRunner(Doubler, "doubler_0")
    worker.runner.initialize({"model_config": json.dumps({"name": "doubler"}), "model_instance_name": "doubler_0"})
    yield server_end, worker
    server_end.close()
    worker_end.close()


def _execute(batch_id: int, *keys: int) -> Execute:
    return Execute(batch_id, [
        WireRequest(key, "doubler", "", f"id-{key}", [("IN", "FP32", np.full((1, 4), key, np.float32))], [], {}, 0, 0, 0)
        for key in keys
    ])


def _answers(server_end: socket.socket, count: int) -> list:
    reader = ipc.FrameReader()
    messages: list = []
    while len(messages) < count:
        messages.extend(reader.feed(server_end.recv(1 << 16)))
    return messages


def test_a_batch_the_main_thread_reads_runs_and_is_answered(ends) -> None:
    server_end, worker = ends
    server_end.sendall(ipc.encode(_execute(1, 10, 11), None))
    message = worker.next_task()
    assert type(message) is Execute and message.batch_id == 1
    assert worker.host.active == {10, 11}  # a cancellation that arrives now is marked for it
    worker.execute(message)
    (answer,) = _answers(server_end, 1)
    assert type(answer) is Executed and answer.batch_id == 1 and answer.error is None
    assert [r.outputs[0][2].tolist() for r in answer.responses] == [[[20.0] * 4], [[22.0] * 4]]
    assert worker.host.active == set()


class _WatcherJustDone:
    """The socket's lock, taken over from a watcher that queued a batch just before it let go:
    after the main thread found no work queued, before it took the socket."""

    def __init__(self, worker: Worker, queued: Execute) -> None:
        self.worker, self.queued, self.lock = worker, queued, threading.Lock()

    def acquire(self, blocking: bool = True) -> bool:
        if self.queued is not None:
            self.worker.tasks.append(self.queued)
            self.queued = None
        return self.lock.acquire(blocking)

    def release(self) -> None:
        self.lock.release()

    def locked(self) -> bool:
        return self.lock.locked()


def test_work_handed_over_first_runs_before_what_the_main_thread_reads(ends) -> None:
    server_end, worker = ends
    worker._read_lock = _WatcherJustDone(worker, _execute(1, 10))
    server_end.sendall(ipc.encode(_execute(2, 20), None))
    assert worker.next_task().batch_id == 1
    assert worker.next_task().batch_id == 2


def test_a_request_cancelled_before_it_runs_is_skipped_and_the_rest_run(ends) -> None:
    server_end, worker = ends
    server_end.sendall(ipc.encode(_execute(1, 10, 11), None) + ipc.encode(Cancel([10]), None))
    message = worker.next_task()
    worker.route(worker.channel.receive())  # the cancellation, read before the batch starts
    worker.execute(message)
    skipped, answer = _answers(server_end, 2)
    assert type(skipped) is Respond and skipped.key == 10 and skipped.final
    assert skipped.response.error is not None and "cancelled" in skipped.response.error[1]
    assert type(answer) is Executed and answer.responses[0] is None
    assert answer.responses[1].outputs[0][2].tolist() == [[22.0] * 4]
    assert worker.host.active == set() and worker.host.cancelled == set()

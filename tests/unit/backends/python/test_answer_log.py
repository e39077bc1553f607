"""Answers a worker holds back while batches it has read wait to run: where the worker and the
server share one CPU, they go in one write once nothing is left to run, and a worker that dies
meanwhile leaves them for the server to deliver.

Real workers on real sockets: a `Worker` in this process with the test playing the server's end,
and a worker process the server's own `WorkerProcess` spawns. A process's affinity is inherited,
so a worker made while this process may use one CPU holds, as one in a pinned server does.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import select
import socket
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from openinfer.backends.python import ipc, pb_utils
from openinfer.backends.python.answer_log import AnswerLog
from openinfer.backends.python.runner import ModelRunner
from openinfer.backends.python.wire import Execute, Executed, Initialize, Load, WireRequest
from openinfer.backends.python.worker import Worker
from openinfer.backends.python.worker_process import WorkerProcess


@contextlib.contextmanager
def one_cpu() -> Iterator[None]:
    """This process (and what it starts meanwhile) may run on one CPU only."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(before)})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


class Doubler:
    def execute(self, requests: list) -> list:
        return [
            pb_utils.InferenceResponse([pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(r, "IN").as_numpy() * 2)])
            for r in requests
        ]


def _execute(batch_id: int, value: float) -> Execute:
    values = np.full((1, 4), value, np.float32)
    return Execute(batch_id, [WireRequest(batch_id, "doubler", "", "", [("IN", "FP32", values)], [], {}, 0, 0, 0)])


def _frames(*batches: Execute) -> bytes:
    return b"".join(ipc.encode(batch) for batch in batches)


def _readable(sock: socket.socket) -> bool:
    return bool(select.select([sock], [], [], 0)[0])


@pytest.fixture
def log():
    answers = AnswerLog.create(ipc.shm_prefix())
    yield answers
    answers.close(unlink=True)


def _worker(log: AnswerLog) -> tuple[socket.socket, socket.socket, Worker]:
    server_end, worker_end = socket.socketpair()
    worker = Worker(ipc.BlockingChannel(worker_end, answers=log))
    worker.runner = ModelRunner(Doubler, "doubler_0")
    worker.runner.initialize({"model_config": json.dumps({"name": "doubler"}), "model_instance_name": "doubler_0"})
    return server_end, worker_end, worker


def test_on_one_cpu_answers_wait_for_the_batches_read_with_them_and_go_in_one_write(log) -> None:
    with one_cpu():
        server_end, worker_end, worker = _worker(log)
    try:
        assert worker.may_hold
        server_end.sendall(_frames(_execute(1, 1.0), _execute(2, 2.0), _execute(3, 3.0)))
        for batch_id in (1, 2):
            worker.execute(worker.next_task())
            assert not _readable(server_end)  # held: nothing reached the server
        held = ipc.FrameReader().feed(log.left_behind())  # what the server would find, were it dead
        assert [(type(m), m.batch_id) for m in held] == [(Executed, 1), (Executed, 2)]
        worker.execute(worker.next_task())  # the last one read: all three go now
        data = server_end.recv(1 << 16)
        answers = ipc.FrameReader().feed(data)
        assert [m.batch_id for m in answers] == [1, 2, 3]
        assert [m.responses[0].outputs[0][2].tolist() for m in answers] == [[[2.0] * 4], [[4.0] * 4], [[6.0] * 4]]
        assert log.left_behind() == b"" and not worker.channel.holding
    finally:
        server_end.close()
        worker_end.close()


def test_with_more_than_one_cpu_each_answer_goes_at_once(log) -> None:
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("this machine lets the tests use one CPU only")
    server_end, worker_end, worker = _worker(log)
    try:
        assert not worker.may_hold
        server_end.sendall(_frames(_execute(1, 1.0), _execute(2, 2.0)))
        worker.execute(worker.next_task())
        assert [m.batch_id for m in ipc.FrameReader().feed(server_end.recv(1 << 16))] == [1]
        assert log.left_behind() == b""
    finally:
        server_end.close()
        worker_end.close()


CRASHES_ON_NEGATIVE = '''
import os
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        answers = []
        for request in requests:
            values = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            if values[0, 0] < 0:
                os._exit(3)  # gone at once, as a crash in native code would be
            answers.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", values * 2)]))
        return answers
'''


class _Recorder:
    """The worker's owner, as an instance is: records what it is handed and when."""

    name = "crasher_0_0"

    def __init__(self) -> None:
        self.answers: list[tuple[int, bool, list]] = []  # batch id, whether the worker was dead
        self.died_after: int | None = None

    def dispatch(self, worker: WorkerProcess, message: object) -> None:
        if type(message) is Executed:
            self.answers.append((message.batch_id, worker.dead, message.responses[0].outputs[0][2].tolist()))
        else:
            worker.answered(message)

    def worker_died(self, worker: WorkerProcess, code: int | None) -> None:
        self.died_after = len(self.answers)


async def test_a_worker_that_dies_leaves_its_held_answers_to_the_server(tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text(CRASHES_ON_NEGATIVE)
    owner = _Recorder()
    worker = WorkerProcess(owner)
    with one_cpu():
        await worker.spawn()
    try:
        assert worker.answers is not None
        await worker.call(Load(str(tmp_path / "model.py"), "crasher", "", str(tmp_path)), timeout=60)
        await worker.call(Initialize({"model_config": json.dumps({"name": "crasher"}), "model_instance_name": "crasher_0_0"}), timeout=60)
        for batch_id, value in ((1, 1.0), (2, 2.0), (3, -1.0)):
            worker.send(_execute(batch_id, value))  # one turn of the loop: one write
        await asyncio.wait_for(worker.reaped.wait(), 60)
    finally:
        await worker.kill()
    # The first two were answered and held when the third crashed: the server read them from
    # the log once the process was gone, before it failed what was left.
    assert owner.answers == [(1, True, [[2.0] * 4]), (2, True, [[4.0] * 4])]
    assert owner.died_after == 2
    assert worker.exit_code == 3

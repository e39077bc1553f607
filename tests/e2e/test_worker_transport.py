"""The channel to a Python model's worker process under stress: many requests in flight, tensors
of every size (the socket, the shared ring, a file of their own), a process that dies or hangs
mid-request, cancellation and readiness checks while `execute` runs, and BLS calls that cross
several workers."""

from __future__ import annotations

import concurrent.futures
import os
import queue
import threading
import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.helpers import Server, child_pids, write_model

ECHO = '''
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            x += 0  # the model may write into what it received
            out.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("OUT", x),
                pb_utils.Tensor("NEG", (-x).T.copy().T),  # and answer any layout
            ]))
        return out
'''

ECHO_CONFIG = '''
backend: "python"
max_batch_size: 16
input [ { name: "IN" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ -1 ] }, { name: "NEG" data_type: TYPE_FP32 dims: [ -1 ] } ]
dynamic_batching { }
'''

# Answers with its input, changed in place (OUT), and with the second half of it (NEG): both are
# bytes the server wrote, which come back without a copy.
DOUBLER = '''
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            x *= 2
            out.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("OUT", x),
                pb_utils.Tensor("NEG", x[:, x.shape[1] // 2:]),
            ]))
        return out
'''

STRINGS = '''
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor(
            "OUT", np.array([s[::-1] for s in pb_utils.get_input_tensor_by_name(r, "IN").as_numpy()], dtype=np.object_))])
            for r in requests]
'''

# Sleeps a little in every batch (OPENINFER_TEST_PAUSE_S, 50 ms unless set), so many requests are
# held when a -1 kills the process at once; where OPENINFER_TEST_NOTES names a file, it writes down
# each value it answers there first.
CRASHER = '''
import os, time
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.pause = float(os.environ.get("OPENINFER_TEST_PAUSE_S", "0.05"))
        notes = os.environ.get("OPENINFER_TEST_NOTES")
        self.noted = os.open(notes, os.O_WRONLY | os.O_APPEND | os.O_CREAT) if notes else None

    def execute(self, requests):
        time.sleep(self.pause)
        out = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            if x[0, 0] < 0:
                os._exit(3)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", x), pb_utils.Tensor("NEG", -x)]))
        if self.noted is not None:
            os.write(self.noted, b"".join(b"%d\\n" % int(r.as_numpy()[0, 0]) for r in
                                          (pb_utils.get_input_tensor_by_name(q, "IN") for q in requests)))
        return out
'''

# Runs until its caller leaves (or hangs for good when asked); answers is_ready() meanwhile.
WAITER = '''
import time
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def is_ready(self):
        return True

    def execute(self, requests):
        out = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            if x[0] < 0:
                while True:
                    time.sleep(1)
            deadline = time.monotonic() + float(x[0])
            while not request.is_cancelled() and time.monotonic() < deadline:
                time.sleep(0.01)
            seen = np.array([1.0 if request.is_cancelled() else 0.0], np.float32)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", seen)]))
        return out
'''

WAITER_CONFIG = '''
backend: "python"
max_batch_size: 0
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 1 ] } ]
parameters { key: "execute_timeout_secs" value { string_value: "20" } }
'''

# BLS down a chain of workers: outer -> middle -> echo, each answer checked on the way back up.
HOP = '''
import numpy as np
import triton_python_backend_utils as pb_utils

NEXT = "{next}"


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            answer = pb_utils.InferenceRequest(
                model_name=NEXT, requested_output_names=["OUT"], inputs=[pb_utils.Tensor("IN", x + 1)]
            ).exec()
            if answer.has_error():
                raise pb_utils.TritonModelException(answer.error().message())
            y = pb_utils.get_output_tensor_by_name(answer, "OUT").as_numpy()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", y), pb_utils.Tensor("NEG", -y)]))
        return out
'''


# Decoupled: answers from a thread of its own that asks is_cancelled() before every answer, so
# that thread reads the socket now and then while the main thread waits for the next request.
TICKER = '''
import threading
import time
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            count = int(pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()[0])
            threading.Thread(target=self.tick, args=(request.get_response_sender(), count), daemon=True).start()
        return None

    def tick(self, sender, count):
        for i in range(count):
            for _ in range(20):
                sender.is_cancelled()
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([i], np.float32))]))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
'''


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = tmp_path_factory.mktemp("transport_repo")
    write_model(repo, "echo", ECHO_CONFIG, ECHO)
    write_model(repo, "crasher", ECHO_CONFIG, CRASHER)
    write_model(repo, "doubler", ECHO_CONFIG, DOUBLER)
    write_model(repo, "middle", ECHO_CONFIG.replace("max_batch_size: 16", "max_batch_size: 16\ninstance_group [ { count: 2 } ]"),
                HOP.format(next="echo"))
    write_model(repo, "outer", ECHO_CONFIG.replace("max_batch_size: 16", "max_batch_size: 16\ninstance_group [ { count: 2 } ]"),
                HOP.format(next="middle"))
    write_model(repo, "waiter", WAITER_CONFIG, WAITER)
    write_model(repo, "hanger", WAITER_CONFIG.replace('"20"', '"1"'), WAITER)
    write_model(repo, "strings", '''
        backend: "python"
        max_batch_size: 0
        input [ { name: "IN" data_type: TYPE_STRING dims: [ -1 ] } ]
        output [ { name: "OUT" data_type: TYPE_STRING dims: [ -1 ] } ]
        ''', STRINGS)
    write_model(repo, "ticker", WAITER_CONFIG.replace("max_batch_size: 0", "max_batch_size: 0\nmodel_transaction_policy { decoupled: true }"), TICKER)
    with Server(repo).start(wait_for="ready") as running:
        yield running


def _rows(values: np.ndarray, client=grpcclient):
    tensor = client.InferInput("IN", list(values.shape), "FP32")
    tensor.set_data_from_numpy(values)
    return tensor


# Sizes on both sides of the ring threshold (64 KiB) and one over the ring's limit for a buffer.
SIZES = [1, 16, 1000, 16 * 1024, 16 * 1024 + 1, 300_000, 5_000_000]


def test_many_requests_in_flight_each_get_their_own_answer(server):
    """Concurrent requests of mixed sizes over both protocols: every answer is its request's."""
    rng = np.random.default_rng(7)

    def one(i: int) -> None:
        size = SIZES[i % len(SIZES)] if i % 5 else 16
        values = rng.random((1, size), dtype=np.float32) + i
        if i % 2:
            result = grpcclient.InferenceServerClient(server.grpc_url).infer("echo", [_rows(values)])
        else:
            result = httpclient.InferenceServerClient(server.http_url, network_timeout=300).infer(
                "echo", [_rows(values, httpclient)])
        np.testing.assert_array_equal(result.as_numpy("OUT"), values)
        np.testing.assert_array_equal(result.as_numpy("NEG"), -values)

    with concurrent.futures.ThreadPoolExecutor(24) as pool:
        for future in [pool.submit(one, i) for i in range(120)]:
            future.result()


def test_inputs_answered_as_outputs_come_back_as_the_model_left_them(server):
    """Outputs that are (part of) the inputs, changed in place, with many batches in flight
    sending more through the ring than it holds while earlier answers are still being sent."""
    rng = np.random.default_rng(11)

    def one(i: int) -> None:
        values = rng.random((1, [16_384, 300_000, 1_000_000][i % 3]), dtype=np.float32) + i
        client = grpcclient if i % 2 else httpclient
        result = (grpcclient.InferenceServerClient(server.grpc_url) if i % 2 else
                  httpclient.InferenceServerClient(server.http_url, network_timeout=300)).infer(
            "doubler", [_rows(values, client)])
        np.testing.assert_array_equal(result.as_numpy("OUT"), values * 2)
        np.testing.assert_array_equal(result.as_numpy("NEG"), values[:, values.shape[1] // 2:] * 2)

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        for future in [pool.submit(one, i) for i in range(96)]:
            future.result()


def test_answers_sent_from_where_they_lie_keep_their_bytes_until_the_client_has_them(server):
    """HTTP writes binary outputs from the ring itself, so a slow reader keeps ring space held
    while the ring fills, empties and starts over beneath it: echoed inputs and copied outputs,
    many in flight, each answer exactly its own request's."""
    sizes = [2_500_000, 300_000, 16_384]

    def one(i: int) -> None:
        values = np.random.default_rng(i).random((1, sizes[i % 3]), dtype=np.float32) + i
        model = "doubler" if i % 4 else "echo"
        result = httpclient.InferenceServerClient(server.http_url, network_timeout=300).infer(
            model, [_rows(values, httpclient)])
        twice = values * 2 if model == "doubler" else values
        np.testing.assert_array_equal(result.as_numpy("OUT"), twice)
        np.testing.assert_array_equal(
            result.as_numpy("NEG"), twice[:, values.shape[1] // 2:] if model == "doubler" else -values)

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        for future in [pool.submit(one, i) for i in range(240)]:
            future.result()


def test_strings_cross_as_well(server):
    client = httpclient.InferenceServerClient(server.http_url)
    tensor = httpclient.InferInput("IN", [3], "BYTES")
    tensor.set_data_from_numpy(np.array([b"abc", b"", "é".encode() * 40_000], dtype=np.object_))
    out = client.infer("strings", [tensor]).as_numpy("OUT")
    assert out.tolist() == [b"cba", b"", ("é".encode() * 40_000)[::-1]]


def test_crash_mid_batch_fails_what_it_held_and_the_next_process_serves(server):
    client = grpcclient.InferenceServerClient(server.grpc_url)
    barrier = threading.Barrier(13)

    def one(value: float) -> tuple[str, object]:
        own = grpcclient.InferenceServerClient(server.grpc_url)
        values = np.full((1, 40_000), value, np.float32)  # through the ring
        barrier.wait()
        try:
            return "ok", own.infer("crasher", [_rows(values)]).as_numpy("OUT")[0, 0]
        except InferenceServerException as exc:
            return "error", exc.message()

    with concurrent.futures.ThreadPoolExecutor(13) as pool:
        futures = [pool.submit(one, float(i + 1)) for i in range(12)] + [pool.submit(one, -1.0)]
        outcomes = [f.result() for f in futures]
    assert outcomes[-1][0] == "error" and "is not healthy" in str(outcomes[-1][1])
    for (kind, detail), expected in zip(outcomes[:-1], range(1, 13)):
        assert (kind == "ok" and detail == expected) or "is not healthy" in str(detail), (kind, detail)
    answered = 0
    for i in range(20):  # the restart may take a request to begin, as in Triton
        values = np.full((1, 16), i, np.float32)
        try:
            np.testing.assert_array_equal(client.infer("crasher", [_rows(values)]).as_numpy("OUT"), values)
            answered += 1
        except InferenceServerException as exc:
            assert "is not healthy" in exc.message() or "not ready" in exc.message()
    assert answered >= 15
    assert client.is_model_ready("crasher")


def test_a_hung_model_is_timed_out_and_replaced(server):
    client = httpclient.InferenceServerClient(server.http_url, network_timeout=120)
    with pytest.raises(InferenceServerException, match="did not finish within"):
        client.infer("hanger", [_rows(np.array([-1.0], np.float32), httpclient)])
    for _ in range(20):
        try:
            result = client.infer("hanger", [_rows(np.array([0.0], np.float32), httpclient)])
            break
        except InferenceServerException as exc:
            assert "is not healthy" in exc.message() or "not ready" in exc.message()
    assert result.as_numpy("OUT").tolist() == [0.0]


def test_cancellation_and_readiness_reach_a_running_execute(server):
    """While `execute` runs, the worker still hears the server: a readiness check is answered
    by the model, and a cancelled request's `is_cancelled()` turns true."""
    client = grpcclient.InferenceServerClient(server.grpc_url)
    done = threading.Event()
    outcome: list = []

    def callback(result, error):
        outcome.append(error)
        done.set()

    call = client.async_infer("waiter", [_rows(np.array([60.0], np.float32))], callback=callback)
    assert client.is_model_ready("waiter")  # answered by is_ready() while execute runs
    call.cancel()
    assert done.wait(60)
    assert isinstance(outcome[0], InferenceServerException) and "CANCELLED" in outcome[0].status()
    # The model saw the cancellation (it returned long before its 60 s): the instance is free.
    result = client.infer("waiter", [_rows(np.array([0.0], np.float32))])
    assert result.as_numpy("OUT").tolist() == [0.0]


def test_bls_across_three_workers_with_many_callers(server):
    rng = np.random.default_rng(3)

    def one(i: int) -> None:
        size = [16, 20_000, 200_000][i % 3]
        values = rng.random((1, size), dtype=np.float32)
        own = grpcclient.InferenceServerClient(server.grpc_url)
        result = own.infer("outer", [_rows(values)])
        np.testing.assert_allclose(result.as_numpy("OUT"), values + 2)
        np.testing.assert_allclose(result.as_numpy("NEG"), -(values + 2))

    with concurrent.futures.ThreadPoolExecutor(12) as pool:
        for future in [pool.submit(one, i) for i in range(36)]:
            future.result()


def test_a_decoupled_model_polling_for_cancellation_never_stalls_the_next_request(server):
    client = grpcclient.InferenceServerClient(server.grpc_url)
    answers: queue.Queue = queue.Queue()
    client.start_stream(callback=lambda result, error: answers.put((result, error)))
    try:
        for round_ in range(30):
            client.async_stream_infer("ticker", [_rows(np.array([5.0], np.float32))])
            values = []
            for _ in range(5):
                result, error = answers.get(timeout=60)
                assert error is None, error
                values.append(float(result.as_numpy("OUT")[0]))
            assert values == [0.0, 1.0, 2.0, 3.0, 4.0], round_
    finally:
        client.stop_stream()


def _wake_ups(pid: int) -> int:
    """Voluntary context switches of every thread of `pid` and of its children: how often they slept and woke."""
    total = 0
    for child in [pid, *child_pids(pid)]:
        for task in os.listdir(f"/proc/{child}/task"):
            with open(f"/proc/{child}/task/{task}/status") as f:
                total += next(int(line.split()[1]) for line in f if line.startswith("voluntary_ctxt_switches"))
    return total


def test_an_idle_worker_does_not_wake_up(tmp_path):
    """Once a worker has had nothing to do for a while, none of its threads wakes until the next
    request (which still reaches it, and a cancellation during a long execute still does)."""
    write_model(tmp_path, "echo", ECHO_CONFIG, ECHO)
    with Server(tmp_path).start(wait_for="ready") as running:
        client = httpclient.InferenceServerClient(running.http_url)
        values = np.ones((1, 4), np.float32)
        np.testing.assert_array_equal(client.infer("echo", [_rows(values, httpclient)]).as_numpy("OUT"), values)
        worker = child_pids(running.process.pid)[0]
        time.sleep(0.5)  # the watcher's last looks find nothing begun: it parks
        before = _wake_ups(worker)
        time.sleep(1.0)
        assert _wake_ups(worker) == before
        np.testing.assert_array_equal(client.infer("echo", [_rows(values + 1, httpclient)]).as_numpy("OUT"), values + 1)


def _poll_config(value: str) -> str:
    return ECHO_CONFIG + f'parameters {{ key: "worker_poll_us" value {{ string_value: "{value}" }} }}\n'


def test_worker_poll_us_reaches_the_worker_and_a_bad_value_fails_only_that_model(tmp_path):
    write_model(tmp_path, "sleeper", _poll_config("0"), ECHO)
    write_model(tmp_path, "poller", _poll_config("250"), ECHO)
    write_model(tmp_path, "bad", _poll_config("-5"), ECHO)
    with Server(tmp_path, ["--exit-on-error=false"]).start() as running:
        client = httpclient.InferenceServerClient(running.http_url)
        values = np.arange(4, dtype=np.float32).reshape(1, 4)
        for model in ("sleeper", "poller"):
            np.testing.assert_array_equal(client.infer(model, [_rows(values, httpclient)]).as_numpy("OUT"), values)
        settings = {}
        for child in child_pids(running.process.pid):
            cmdline = open(f"/proc/{child}/cmdline").read().split("\0")
            environ = dict(e.split("=", 1) for e in open(f"/proc/{child}/environ").read().split("\0") if "=" in e)
            settings[cmdline[-2]] = environ.get("OPENINFER_WORKER_POLL_US")
        assert settings == {"sleeper_0": "0", "poller_0": "250"}
        assert not client.is_model_ready("bad")
        index = {m["name"]: m for m in client.get_model_repository_index()}
        assert "worker_poll_us" in index["bad"]["reason"] and "'-5'" in index["bad"]["reason"]


def test_on_one_cpu_a_crash_loses_no_answer_the_model_gave(tmp_path):
    """Pinned to one CPU, a worker holds answers while batches it read wait (`answer_log`); a
    model that dies in a later batch must not take them along: every request the model answered
    before the crash is answered to its client."""
    notes = tmp_path / "notes"
    repo = tmp_path / "repo"
    write_model(repo, "noting", ECHO_CONFIG.replace("dynamic_batching { }", ""), CRASHER)
    with Server(repo, launcher=["taskset", "-c", str(min(os.sched_getaffinity(0)))],
                env={"OPENINFER_TEST_NOTES": str(notes), "OPENINFER_TEST_PAUSE_S": "0"}).start(wait_for="ready") as running:
        for round_ in range(3):
            barrier = threading.Barrier(16)

            def one(value: float) -> tuple[str, object]:
                own = grpcclient.InferenceServerClient(running.grpc_url)
                barrier.wait()
                try:
                    return "ok", own.infer("noting", [_rows(np.full((1, 16), value, np.float32))]).as_numpy("OUT")[0, 0]
                except InferenceServerException as exc:
                    return "error", exc.message()

            notes.write_bytes(b"")
            values = [round_ * 100 + i for i in range(1, 16)]
            with concurrent.futures.ThreadPoolExecutor(16) as pool:
                futures = [pool.submit(one, float(v)) for v in values[:8]] + [pool.submit(one, -1.0)]
                futures += [pool.submit(one, float(v)) for v in values[8:]]
                outcomes = dict(zip([*values[:8], -1, *values[8:]], (f.result() for f in futures)))
            answered_by_model = {int(line) for line in notes.read_text().split()}
            for value, (kind, detail) in outcomes.items():
                if value in answered_by_model:
                    assert (kind, detail) == ("ok", value), (round_, value, detail)
                else:
                    assert kind == "error" and "is not healthy" in str(detail), (round_, value, detail)
            client = grpcclient.InferenceServerClient(running.grpc_url)
            for _ in range(20):  # the restart may take a request to begin, as in Triton
                try:
                    client.infer("noting", [_rows(np.ones((1, 16), np.float32))])
                    break
                except InferenceServerException as exc:
                    assert "is not healthy" in exc.message() or "not ready" in exc.message()

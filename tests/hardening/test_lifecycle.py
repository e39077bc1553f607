"""Models coming and going under load, and the server going away under load.

Unloading or reloading a model while it is being called lets its in-flight requests finish
and never disturbs the other models; SIGTERM lets in-flight requests finish within
--exit-timeout-secs, refuses new ones with UNAVAILABLE and exits 0.
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.hardening import models
from tests.hardening.oracle import wait_until
from tests.helpers import Server


class Load:
    """Background callers of add_sub over HTTP and gRPC, counting answers and errors."""

    def __init__(self, server: Server, threads: int = 4) -> None:
        self.server = server
        self.stop = threading.Event()
        self.ok = 0
        self.errors: list[str] = []
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.run, args=(i % 2 == 0,), daemon=True) for i in range(threads)]

    def run(self, use_http: bool) -> None:
        protocol = httpclient if use_http else grpcclient
        client = protocol.InferenceServerClient(self.server.http_url if use_http else self.server.grpc_url)
        a = np.arange(4, dtype=np.float32)
        while not self.stop.is_set():
            inputs = [protocol.InferInput("INPUT0", [4], "FP32"), protocol.InferInput("INPUT1", [4], "FP32")]
            inputs[0].set_data_from_numpy(a)
            inputs[1].set_data_from_numpy(a)
            try:
                out = client.infer("add_sub", inputs).as_numpy("OUTPUT0").tolist()
                with self.lock:
                    if out == [0, 2, 4, 6]:
                        self.ok += 1
                    else:
                        self.errors.append(f"wrong answer {out}")
            except InferenceServerException as exc:
                with self.lock:
                    self.errors.append(exc.message())

    def __enter__(self) -> Load:
        for thread in self.threads:
            thread.start()
        wait_until(lambda: self.ok >= 10)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(30)


def slow_call(url: str, seconds: float, model: str = "slow", request_id: str = "") -> float:
    client = httpclient.InferenceServerClient(url, network_timeout=120)
    tensor = httpclient.InferInput("IN", [1], "FP32")
    tensor.set_data_from_numpy(np.array([seconds], np.float32))
    return float(client.infer(model, [tensor], request_id=request_id).as_numpy("OUT")[0])


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = models.copy_examples(tmp_path_factory.mktemp("lifecycle") / "repo", ("add_sub", "identity_fp32"))
    models.write_slow(repo, instances=2)
    server = Server(repo, ["--model-control-mode", "explicit", "--load-model", "*"]).start(wait_for="ready")
    yield server
    assert server.stop() == 0, server.log()


def test_unload_waits_for_in_flight_requests_and_others_never_notice(server):
    client = httpclient.InferenceServerClient(server.http_url)
    model_dir = server.repository / "slow"
    with Load(server) as load, ThreadPoolExecutor(2) as pool:
        in_flight = [pool.submit(slow_call, server.http_url, 1.5, request_id=f"U{i}") for i in range(2)]
        wait_until(lambda: {"start U0", "start U1"} <= set(models.events(model_dir)))
        client.unload_model("slow")  # returns once the two requests are done
        assert [f.result() for f in in_flight] == [1.5, 1.5]
        assert {"done U0", "done U1"} <= set(models.events(model_dir))
        assert not client.is_model_ready("slow")
        with pytest.raises(InferenceServerException) as info:
            slow_call(server.http_url, 0)
        assert info.value.status() in ("404", "503")
        client.load_model("slow")
        assert slow_call(server.http_url, 0) == 0
    assert load.errors == [] and load.ok > 0


def test_reloading_a_model_while_it_is_called_loses_no_request(server):
    """identity_fp32 is reloaded (new config each time) under continuous calls: every call is
    answered, by the old or the new version."""
    client = httpclient.InferenceServerClient(server.http_url)
    config = client.get_model_config("identity_fp32")
    stop = threading.Event()
    outcomes: list[object] = []

    def caller() -> None:
        own = grpcclient.InferenceServerClient(server.grpc_url)
        x = np.array([[1.5, 2.5]], np.float32)
        while not stop.is_set():
            tensor = grpcclient.InferInput(config["input"][0]["name"], list(x.shape), "FP32")
            tensor.set_data_from_numpy(x)
            try:
                outcomes.append(own.infer("identity_fp32", [tensor]).as_numpy(config["output"][0]["name"]).tolist())
            except InferenceServerException as exc:
                outcomes.append(exc.message())

    with Load(server) as load:
        threads = [threading.Thread(target=caller) for _ in range(3)]
        for thread in threads:
            thread.start()
        wait_until(lambda: len(outcomes) > 10)
        for round_ in range(3):
            config["parameters"] = {"round": {"string_value": str(round_)}}
            client.load_model("identity_fp32", config=json.dumps(config))
        stop.set()
        for thread in threads:
            thread.join(30)
    failures = [o for o in outcomes if o != [[1.5, 2.5]]]
    assert failures == [] and len(outcomes) > 10, failures[:5]
    assert load.errors == []


@pytest.fixture
def doomed(tmp_path):
    repo = models.copy_examples(tmp_path / "repo", ("add_sub",))
    models.write_slow(repo, instances=4)
    server = Server(repo, ["--exit-timeout-secs", "30"]).start(wait_for="ready")
    yield server
    server.stop()


def test_sigterm_under_load_finishes_in_flight_refuses_new_and_exits_zero(doomed):
    model_dir = doomed.repository / "slow"
    refused: list[str] = []
    with ThreadPoolExecutor(4) as pool:
        load = Load(doomed)
        load.__enter__()
        in_flight = [pool.submit(slow_call, doomed.http_url, 2, request_id=f"T{i}") for i in range(4)]
        wait_until(lambda: sum(line.startswith("start T") for line in models.events(model_dir)) == 4)
        doomed.process.terminate()  # SIGTERM
        wait_until(lambda: "Shutting down" in doomed.log())
        for protocol, url in ((httpclient, doomed.http_url), (grpcclient, doomed.grpc_url)):
            client = protocol.InferenceServerClient(url)
            tensor = protocol.InferInput("IN", [1], "FP32")
            tensor.set_data_from_numpy(np.array([0], np.float32))
            with pytest.raises(InferenceServerException) as info:
                client.infer("slow", [tensor])
            refused.append(str(info.value.status()))
        load.__exit__()
        assert [f.result() for f in in_flight] == [2.0] * 4  # every in-flight request answered
    assert doomed.process.wait(60) == 0, doomed.log()
    assert refused == ["503", "StatusCode.UNAVAILABLE"], refused
    assert sum(line.startswith("done T") for line in models.events(model_dir)) == 4
    # Callers that raced the shutdown got UNAVAILABLE (or found the listener gone), never a wrong answer.
    assert all("Server not ready" in e or "connect" in e.lower() or "unavailable" in e.lower() for e in load.errors), load.errors[:5]


def test_sigterm_keeps_refusing_while_clients_send_and_closes_once_they_stop(tmp_path):
    """A balancer routes to a stopping server until its health checks fail: the listeners stay
    open, each request refused with UNAVAILABLE, not cut off, until requests stop coming."""
    repo = models.copy_examples(tmp_path / "repo", ("add_sub",))
    server = Server(repo, ["--exit-linger-secs", "60"]).start(wait_for="ready")
    try:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        inputs = [grpcclient.InferInput(name, [4], "FP32") for name in ("INPUT0", "INPUT1")]
        for tensor in inputs:
            tensor.set_data_from_numpy(np.arange(4, dtype=np.float32))
        assert client.infer("add_sub", inputs).as_numpy("OUTPUT0").tolist() == [0, 2, 4, 6]
        server.process.terminate()  # SIGTERM
        refusals: list[str] = []
        while len(refusals) < 20:  # well past the unload: each answered, none cut off
            with pytest.raises(InferenceServerException) as info:
                client.infer("add_sub", inputs)
            refusals.append(f"{info.value.status()}: {info.value.message()}")
            time.sleep(0.05)
        assert set(refusals) == {"StatusCode.UNAVAILABLE: Server not ready"}, refusals
        assert server.process.poll() is None  # still answering while refused requests come
        assert server.process.wait(30) == 0, server.log()  # then quiet: closes long before 60 s
    finally:
        server.stop()

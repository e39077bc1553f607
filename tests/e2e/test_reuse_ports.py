"""`--reuse-http-port` and `--reuse-grpc-port`: servers that all set them share one port and the
kernel spreads new connections between them; a server that does not set them refuses a port
another holds."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tests.helpers import Server, free_ports, write_model

WHO = '''
import os
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("PID", np.array([os.getpid()], dtype=np.int64))])
                for r in requests]
'''
CONFIG = """
backend: "python"
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "PID" data_type: TYPE_INT64 dims: [ 1 ] } ]
parameters { key: "execution_mode" value { string_value: "in_process" } }
"""
REUSE = ["--reuse-http-port", "true", "--reuse-grpc-port", "true"]


@pytest.fixture
def repo(tmp_path):
    write_model(tmp_path / "repo", "who", CONFIG, WHO)
    return tmp_path / "repo"


def _answered_by(module, client) -> int:
    tensor = module.InferInput("IN", [1], "FP32")
    tensor.set_data_from_numpy(np.ones(1, np.float32))
    return int(client.infer("who", [tensor]).as_numpy("PID")[0])


def test_servers_that_set_reuse_share_the_http_and_grpc_ports(repo):
    http_port, grpc_port, metrics_first, metrics_second = free_ports(4)
    with Server(repo, REUSE).start(ports=(http_port, grpc_port, metrics_first)) as first, \
            Server(repo, REUSE).start(ports=(http_port, grpc_port, metrics_second)) as second:
        pids = {first.process.pid, second.process.pid}
        http_answers, grpc_answers = set(), set()
        for _ in range(40):  # a new connection each time: the kernel picks a server per connection
            with httpclient.InferenceServerClient(f"localhost:{http_port}") as client:
                http_answers.add(_answered_by(httpclient, client))
            with grpcclient.InferenceServerClient(f"localhost:{grpc_port}") as client:
                grpc_answers.add(_answered_by(grpcclient, client))
            if http_answers == grpc_answers == pids:
                break
        assert http_answers == pids
        assert grpc_answers == pids


@pytest.mark.parametrize("service", ["HTTP", "GRPC", "Metrics"])
def test_without_reuse_a_port_already_taken_stops_the_server(repo, service):
    """Triton's words for each service whose port is taken; the server then exits with 1."""
    with Server(repo).start() as first:
        taken = {"HTTP": first.http_port, "GRPC": first.grpc_port, "Metrics": first.metrics_port}[service]
        ports = free_ports(3)
        ports[["HTTP", "GRPC", "Metrics"].index(service)] = taken
        second = Server(repo)
        with contextlib.suppress(RuntimeError):  # ("exited early"; HTTP may be up a moment first)
            second.start(ports=tuple(ports))
        assert second.process.wait(60) == 1
        assert f"failed to start {service} service: Unavailable - Socket '127.0.0.1:{taken}' already in use" \
            in second.log()
        assert _answered_by(httpclient, httpclient.InferenceServerClient(first.http_url)) == first.process.pid


def test_reuse_set_on_one_server_only_does_not_share(repo):
    """SO_REUSEPORT needs every socket on the port to set it: a server that sets it cannot join
    one that did not."""
    with Server(repo).start() as first:
        second = Server(repo, REUSE)
        with pytest.raises(RuntimeError, match="server exited early"):
            second.start(ports=(first.http_port, *free_ports(2)))
        assert second.process.returncode == 1
        assert f"failed to start HTTP service: Unavailable - Socket '127.0.0.1:{first.http_port}' already in use " \
            "(Address already in use)" in second.log()
        assert _answered_by(httpclient, httpclient.InferenceServerClient(first.http_url)) == first.process.pid

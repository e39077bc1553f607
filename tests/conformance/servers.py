"""The two servers the comparison talks to, started on one repository with the same flags.

Triton comes from the nvidia-pytriton wheel, installed and prepared as `make bench` installs
it (`bench.peers`, `bench.triton`); where it cannot be had, the comparison is skipped with why.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks import peers, triton
from tests.helpers import Server, free_ports, http_status, read_log, stop_process

#: Both servers: models loaded at start and then by request, so the repository cases can
#: load and unload.
FLAGS = ["--model-control-mode", "explicit", "--load-model", "*", "--exit-timeout-secs", "5"]
#: openinfer serves client shared memory only when asked (README, "Differences from Triton").
OPENINFER_FLAGS = ["--allow-client-shm", "true"]


@dataclass
class Endpoint:
    """Where one server listens."""

    name: str
    http_port: int
    grpc_port: int
    metrics_port: int

    @property
    def http_base(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    @property
    def grpc_target(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"


class TritonProcess:
    """`tritonserver` on free loopback ports."""

    def __init__(self, layout: triton.Layout, repository: Path, log_dir: Path) -> None:
        http, grpc, metrics = free_ports(3)
        self.endpoint = Endpoint("triton", http, grpc, metrics)
        self.log_path = log_dir / "triton.log"
        argv = [*triton.argv(layout, repository, http, grpc, metrics), *FLAGS]
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                            env={**os.environ, **triton.env(layout)})

    def wait_ready(self, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"tritonserver exited with {self.process.returncode}:\n{self.log()}")
            if http_status(f"{self.endpoint.http_base}/v2/health/ready") == 200:
                return
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"tritonserver did not become ready:\n{self.log()}")

    def log(self) -> str:
        return read_log(self.log_path)

    def stop(self) -> None:
        stop_process(self.process, timeout=30)


def triton_layout() -> tuple[triton.Layout | None, str]:
    """Triton installed (once, into benchmarks/.venvs/triton) and ready to start, or None and why."""
    py, why = peers.ensure_peer("triton", install=True)
    if py is None:
        return None, why
    return triton.prepare(py)


def start_both(repository: Path, log_dir: Path) -> tuple[Server, TritonProcess]:
    """Both servers, started together (each loads every model) and ready."""
    layout, why = triton_layout()
    if layout is None:
        raise LookupError(why)
    peer = TritonProcess(layout, repository, log_dir)
    ours = Server(repository, [*FLAGS, *OPENINFER_FLAGS])
    try:
        ours.start(wait_for="ready", timeout=180)
        peer.wait_ready()
    except BaseException:
        ours.stop()
        peer.stop()
        raise
    return ours, peer

"""Replicas of `openinfer serve`, each in a network namespace of its own behind haproxy.

A bridge on the host joins one veth per namespace; the replicas listen on their namespace's
address, haproxy on 127.0.0.1 balances HTTP and gRPC (HTTP/2) over them with health checks on
`/v2/health/ready`, and an S3 server for their shared repository listens on the bridge. Every
address is on links this harness creates; one run at a time on a machine (a lock file).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tests.helpers import ROOT, free_ports

PREFIX = "oirep"
BRIDGE = f"{PREFIX}br"
SUBNET = "10.231.77"  # a /24 on the bridge alone: .1 the host, .11.. the replicas
HOST_IP = f"{SUBNET}.1"
HTTP, GRPC, METRICS = 8000, 8001, 8002


def unavailable_reason() -> str | None:
    """Why the replica harness cannot run here, or None."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "haproxy"):
        if shutil.which(tool) is None:
            return f"'{tool}' is not installed (.ci/system-deps installs it with apt-get)"
    probe = f"{PREFIX}probe{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, check=False)
    if made.returncode != 0:
        return f"cannot create a network namespace: {made.stderr.decode().strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True, check=False)
    return None


def _ip(*args: str, ns: str | None = None, check: bool = True) -> None:
    command = ["ip", *(["netns", "exec", ns, "ip"] if ns else []), *args]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}: {result.stderr.strip()}")


@dataclass
class Replica:
    index: int
    args: list[str]
    env: dict[str, str]
    log_dir: Path
    process: subprocess.Popen | None = None
    generation: int = 0

    @property
    def ns(self) -> str:
        return f"{PREFIX}{self.index}"

    @property
    def address(self) -> str:
        return f"{SUBNET}.{10 + self.index}"

    def start(self) -> None:
        self.generation += 1
        log = open(self.log_dir / f"replica{self.index}.{self.generation}.log", "wb")  # noqa: SIM115
        command = [
            "ip", "netns", "exec", self.ns, sys.executable, "-m", "openinfer", "serve",
            "--http-port", str(HTTP), "--grpc-port", str(GRPC), "--metrics-port", str(METRICS),
            *self.args,
        ]
        env = {**os.environ, **self.env, "PYTHONPATH": str(ROOT)}
        self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=env)

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://{self.address}:{HTTP}/v2/health/ready", timeout=1) as reply:
                return reply.status == 200
        except OSError:
            return False

    def wait_ready(self, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"replica {self.index} exited:\n{self.log()}")
            if self.ready():
                return
            time.sleep(0.1)
        raise RuntimeError(f"replica {self.index} did not become ready:\n{self.log()}")

    def terminate(self, timeout: float = 60) -> int | None:
        """SIGTERM: Triton's graceful shutdown (in-flight requests finish)."""
        if self.process is None:
            return None
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()

    def kill(self) -> None:
        """SIGKILL, with the model workers it started (same network namespace)."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
        for pid in _netns_pids(self.ns):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def log(self) -> str:
        path = self.log_dir / f"replica{self.index}.{self.generation}.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""


def _netns_pids(ns: str) -> list[int]:
    result = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True, check=False)
    return [int(p) for p in result.stdout.split()]


class Haproxy:
    """Debian's haproxy: HTTP on one port, gRPC (h2c) on another, a stats socket to watch."""

    def __init__(self, replicas: list[Replica], workdir: Path) -> None:
        self.http_port, self.grpc_port = free_ports(2)
        self.socket = workdir / "haproxy.sock"
        self.config = workdir / "haproxy.cfg"
        servers_http = "\n".join(f"  server r{r.index} {r.address}:{HTTP} check" for r in replicas)
        servers_grpc = "\n".join(
            f"  server r{r.index} {r.address}:{GRPC} proto h2 check port {HTTP} check-proto h1" for r in replicas
        )
        self.config.write_text(HAPROXY_CONFIG.format(
            socket=self.socket, http_port=self.http_port, grpc_port=self.grpc_port,
            servers_http=servers_http, servers_grpc=servers_grpc,
        ))
        check = subprocess.run(["haproxy", "-c", "-f", str(self.config)], capture_output=True, text=True, check=False)
        if check.returncode != 0:
            raise RuntimeError(f"haproxy refused its configuration:\n{check.stdout}{check.stderr}")
        self.process = subprocess.Popen(
            ["haproxy", "-db", "-f", str(self.config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )

    def stat(self) -> dict[tuple[str, str], str]:
        """(backend, server) -> status (UP, DOWN, ...) from the stats socket."""
        with socket.socket(socket.AF_UNIX) as sock:
            sock.connect(str(self.socket))
            sock.sendall(b"show stat\n")
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
        rows = [line.split(",") for line in data.decode().splitlines() if line and not line.startswith("#")]
        return {(row[0], row[1]): row[17] for row in rows if len(row) > 17}

    def wait_status(self, server: str, status: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                states = self.stat()
                if all(states.get((backend, server), "").startswith(status) for backend in ("http_replicas", "grpc_replicas")):
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"haproxy never saw {server} {status}: {self.stat()}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)


# Retries: a request a replica refuses while it shuts down (503, Triton's "Server not ready"
# answer) or a connection it closes goes to another replica (`redispatch`); bodies are buffered
# so a retry can resend them.
HAPROXY_CONFIG = """
global
  maxconn 2000
  stats socket {socket} mode 600 level admin

defaults
  mode http
  timeout connect 500ms
  timeout client 60s
  timeout server 60s
  timeout check 3s
  retries 3
  option redispatch 1
  retry-on conn-failure empty-response 503
  option http-buffer-request
  default-server inter 300ms fall 3 rise 2

frontend http_in
  bind 127.0.0.1:{http_port}
  default_backend http_replicas

frontend grpc_in
  bind 127.0.0.1:{grpc_port} proto h2
  default_backend grpc_replicas

backend http_replicas
  balance roundrobin
  option httpchk GET /v2/health/ready
  http-check expect status 200
{servers_http}

backend grpc_replicas
  balance roundrobin
  option httpchk GET /v2/health/ready
  http-check expect status 200
{servers_grpc}
"""


@dataclass
class Network:
    """The bridge and one namespace + veth per replica, for the `with` block's length."""

    count: int
    lock: object = None

    def __enter__(self) -> Network:
        self.lock = open("/tmp/openinfer-replicas.lock", "w")
        fcntl.flock(self.lock, fcntl.LOCK_EX)  # type: ignore[arg-type]
        self._remove_leftovers()
        _ip("link", "add", BRIDGE, "type", "bridge")
        _ip("addr", "add", f"{HOST_IP}/24", "dev", BRIDGE)
        _ip("link", "set", BRIDGE, "up")
        for index in range(1, self.count + 1):
            ns, host_end, ns_end = f"{PREFIX}{index}", f"{PREFIX}h{index}", f"{PREFIX}n{index}"
            _ip("netns", "add", ns)
            _ip("link", "add", host_end, "type", "veth", "peer", "name", ns_end)
            _ip("link", "set", ns_end, "netns", ns)
            _ip("link", "set", host_end, "master", BRIDGE, "up")
            _ip("addr", "add", f"{SUBNET}.{10 + index}/24", "dev", ns_end, ns=ns)
            _ip("link", "set", ns_end, "up", ns=ns)
            _ip("link", "set", "lo", "up", ns=ns)
        return self

    def _remove_leftovers(self) -> None:
        for index in range(1, 10):
            for pid in _netns_pids(f"{PREFIX}{index}"):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            _ip("netns", "del", f"{PREFIX}{index}", check=False)
            _ip("link", "del", f"{PREFIX}h{index}", check=False)
        _ip("link", "del", BRIDGE, check=False)

    def __exit__(self, *exc: object) -> None:
        self._remove_leftovers()
        fcntl.flock(self.lock, fcntl.LOCK_UN)  # type: ignore[arg-type]
        self.lock.close()  # type: ignore[attr-defined]

"""Start the real `openinfer serve` on free ports and write model repositories for tests."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "model_repository"


def child_pids(pid: int) -> list[int]:
    """The direct children of `pid` (a server's worker processes), from /proc."""
    return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def small_dev_shm(size: str) -> list[str]:
    """A launcher (`Server.launcher`) that runs the server in user and mount namespaces of its
    own over a /dev/shm of `size` (`64m`: a container's default), as `mount -t tmpfs` sizes it."""
    return ["unshare", "-rm", "sh", "-c", f'mount -t tmpfs -o size={size} tmpfs /dev/shm && exec "$@"', "sh"]


def small_dev_shm_works() -> bool:
    """Whether this machine lets an unprivileged user make those namespaces."""
    if shutil.which("unshare") is None:
        return False
    return subprocess.run([*small_dev_shm("1m"), "true"], capture_output=True, check=False).returncode == 0


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """`count` distinct free ports: each socket stays bound until all are chosen, since a port
    just released may be handed out again at once (a server told to use it twice fails)."""
    socks = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in socks]
    finally:
        for sock in socks:
            sock.close()


def write_model(
    repo: Path, name: str, config: str, model_py: str | None = None, version: int = 1, files: dict[str, bytes] | None = None
) -> Path:
    """A model directory as Triton users lay it out: config.pbtxt and `<version>/model.py`."""
    model_dir = repo / name
    (model_dir / str(version)).mkdir(parents=True, exist_ok=True)
    (model_dir / "config.pbtxt").write_text(textwrap.dedent(config))
    if model_py is not None:
        (model_dir / str(version) / "model.py").write_text(textwrap.dedent(model_py))
    for relative, content in (files or {}).items():
        path = model_dir / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    return model_dir


def http_status(url: str, headers: dict[str, str] | None = None, timeout: float = 2) -> int:
    """The status a GET answers with; 0 when nothing answers yet."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=timeout) as reply:
            return reply.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def read_log(path: Path | None) -> str:
    return path.read_text(errors="replace") if path and path.exists() else ""


def stop_process(process: subprocess.Popen | None, timeout: float = 60) -> int | None:
    """SIGTERM (a graceful server shutdown), then SIGKILL after `timeout`; the exit code."""
    if process is None or process.poll() is not None:
        return process.returncode if process else None
    process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        return process.wait()


class Listening:
    """Where a test reaches a server's listeners, from the ports it was given."""

    http_port: int
    grpc_port: int
    metrics_port: int

    @property
    def http_url(self) -> str:
        return f"localhost:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"localhost:{self.grpc_port}"

    @property
    def metrics_url(self) -> str:
        return f"http://localhost:{self.metrics_port}/metrics"


@dataclass
class InProcessServer(Listening):
    """openinfer serving `repository` from the test's own process (`openinfer.Server`), with the
    listeners `openinfer serve` opens, on free ports of 127.0.0.1: tests that need no process of
    the server's own (no signals, no log file, no exit code) skip starting one. Python models
    still run in worker processes, as they do under `openinfer serve`."""

    repository: Path
    #: `openinfer serve` flags by their Python names (`model_control_mode="explicit"`).
    flags: dict[str, Any] = field(default_factory=dict)
    http_port: int = 0
    grpc_port: int = 0
    metrics_port: int = 0
    server: Any = None

    def __enter__(self) -> InProcessServer:
        import openinfer

        self.http_port, self.grpc_port, self.metrics_port = free_ports(3)
        self.server = openinfer.Server(self.repository, **self.flags).start()
        try:
            self.server.start_frontends(http_port=self.http_port, grpc_port=self.grpc_port,
                                        metrics_port=self.metrics_port)
        except BaseException:
            self.server.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()


@dataclass
class Server(Listening):
    """A running `openinfer serve` process."""

    repository: Path
    args: list[str] = field(default_factory=list)
    http_port: int = 0
    grpc_port: int = 0
    metrics_port: int = 0
    process: subprocess.Popen | None = None
    log_path: Path | None = None
    #: where the test reaches the server; "[::1]" for IPv6 runs.
    host: str = "127.0.0.1"
    #: run in a process group of its own, so a test may signal the whole group.
    new_session: bool = False
    #: extra environment variables for the server process.
    env: dict[str, str] = field(default_factory=dict)
    #: a command the server runs under (e.g. `unshare`), its own command line appended.
    launcher: list[str] = field(default_factory=list)

    def start(self, wait_for: str = "live", timeout: float = 90, ports: tuple[int, int, int] | None = None) -> Server:
        """Start on `ports` (HTTP, gRPC, metrics), or on free ones."""
        self.http_port, self.grpc_port, self.metrics_port = ports or tuple(free_ports(3))
        command = [
            *self.launcher, sys.executable, "-m", "openinfer", "serve",
            "--model-repository", str(self.repository),
            "--http-port", str(self.http_port),
            "--grpc-port", str(self.grpc_port),
            "--metrics-port", str(self.metrics_port),
            *(["--http-address", self.host, "--grpc-address", self.host] if self.host == "127.0.0.1" else []),
            *self.args,
        ]
        self.log_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"openinfer-test-{self.http_port}.log"
        log = open(self.log_path, "wb")
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), **self.env)
        self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=str(ROOT), env=env,
                                        start_new_session=self.new_session)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited early:\n{self.log()}")
            if self._status(f"/v2/health/{wait_for}") == 200 and "Started HTTPService" in self.log():
                return self
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"server did not become {wait_for}:\n{self.log()}")

    def _status(self, path: str) -> int:
        return http_status(f"http://{self.host}:{self.http_port}{path}")

    def log(self) -> str:
        return read_log(self.log_path)

    def stop(self, timeout: float = 60) -> int | None:
        return stop_process(self.process, timeout)

    def __enter__(self) -> Server:
        """Start, unless `start` already ran (`with Server(...).start(wait_for=...) as s`)."""
        return self if self.process is not None and self.process.poll() is None else self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

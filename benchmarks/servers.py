"""The servers under test: how to start each on free ports, know it is ready, and stop it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from openinfer.bench.control import ControlError, connect

from . import repository, triton
from .grids import BINARY, Grid
from .peers import ensure_peer

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
MODEL = repository.MODEL


# glibc maps and unmaps every buffer above 128 KiB by default; for [1,65536] FP32 tensors that
# halves a bare grpc.aio echo's throughput. The ceilings run without that cost (they are the
# stack's best case); `--tune-malloc` gives every server the same setting.
TUNED_MALLOC = {"MALLOC_MMAP_THRESHOLD_": str(1 << 30), "MALLOC_TRIM_THRESHOLD_": str(1 << 30)}


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def wait_http_ready(process: subprocess.Popen, url: str, timeout: float) -> str:
    """Poll `url` until it answers 200: "ready", or "exited" if `process` ends first, or
    "timeout"; the caller says what each means for its server."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return "exited"
        try:
            with urllib.request.urlopen(url, timeout=2) as reply:
                if reply.status == 200:
                    return "ready"
        except OSError:  # not listening yet, or answering an error status
            pass
        time.sleep(0.2)
    return "timeout"


@dataclass
class Server:
    key: str
    label: str
    protocols: tuple[str, ...]
    argv: list[str] = field(default_factory=list)
    cwd: Path = ROOT
    http_port: int = 0
    grpc_port: int = 0
    env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None
    skip: str = ""  # why it cannot run here
    binary: bool = False  # answers HTTP requests with binary tensors (Triton's extension)
    batch_dim: bool = True  # the model's first dimension is the batch (left out of `--shape`)
    cpus: tuple[int, ...] = ()  # pinned there, with every process it starts; () = anywhere
    workdir: Path = RESULTS  # its log, and its model repository where the bench writes one

    def speaks(self, protocol: str) -> bool:
        """Whether a cell of `protocol` runs on this server ("http-binary": HTTP, binary tensors)."""
        return protocol in self.protocols or (protocol == BINARY and self.binary and "http" in self.protocols)

    def url(self, protocol: str) -> str:  # "http-binary" goes to the HTTP port
        return f"127.0.0.1:{self.grpc_port if protocol == 'grpc' else self.http_port}"

    @property
    def log(self) -> Path:
        return self.workdir / f"{self.key}.log"

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def restart(self) -> str:
        """Start again after the server exited; what it exited with, for the cell's notes."""
        code = self.proc.returncode if self.proc is not None else None
        self.start()
        return f"restarted after it exited with {code}; see {self.log}"

    def start(self, timeout: float = 180.0) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        # A restart appends: the log keeps why the server went down.
        log = self.log.open("ab" if self.proc is not None else "wb")
        env = dict(os.environ, PYTHONUNBUFFERED="1", **self.env)
        # taskset execs the server in its own place (same pid); what it starts inherits the CPUs.
        pin = ["taskset", "-c", ",".join(map(str, self.cpus))] if self.cpus else []
        self.proc = subprocess.Popen(pin + self.argv, cwd=self.cwd, stdout=log, stderr=log, env=env,
                                     start_new_session=True)
        deadline = time.monotonic() + timeout
        pending = list(self.protocols)
        while pending:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.label} exited with {self.proc.returncode}; "
                                   f"see {self.log}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{self.label} not ready after {timeout:.0f} s")
            try:
                ctl = connect(pending[0], self.url(pending[0]))
                try:
                    ready = ctl.model_ready(MODEL, "")
                finally:
                    ctl.close()
                if ready:
                    pending.pop(0)
                else:
                    time.sleep(0.5)
            except (ControlError, OSError, ConnectionError):
                time.sleep(0.5)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)


def _mlserver(parallel_workers: int | None, install: bool, workdir: Path) -> Server:
    key = "mlserver" if parallel_workers is None else f"mlserver_pw{parallel_workers}"
    label = "MLServer 1.7.1" + (" (parallel_workers: 0)" if parallel_workers == 0 else "")
    server = Server(key, label, ("http", "grpc"), workdir=workdir)
    py, why = ensure_peer("mlserver", install)
    if py is None:
        server.skip = why
        return server
    http, grpc, metrics = free_ports(3)
    folder = workdir / key
    if folder.exists():
        shutil.rmtree(folder)
    shutil.copytree(HERE / "models" / "mlserver", folder)
    settings = {"http_port": http, "grpc_port": grpc, "metrics_port": metrics,
                "host": "127.0.0.1", "debug": False}
    if parallel_workers is not None:
        settings["parallel_workers"] = parallel_workers
    (folder / "settings.json").write_text(json.dumps(settings, indent=2))
    server.argv = [str(py.parent / "mlserver"), "start", str(folder)]
    server.http_port, server.grpc_port = http, grpc
    return server


def _kserve(install: bool, workdir: Path) -> Server:
    server = Server("kserve", "KServe", ("http", "grpc"), binary=True, workdir=workdir)
    py, why = ensure_peer("kserve", install)
    if py is None:
        server.skip = why
        return server
    http, grpc = free_ports(2)
    server.argv = [str(py), str(HERE / "models" / "kserve" / "identity.py"),
                   "--model_name", MODEL, "--http_port", str(http), "--grpc_port", str(grpc)]
    server.http_port, server.grpc_port = http, grpc
    return server


def _openinfer(grid: Grid, workdir: Path, in_process: bool = False, frontends: int = 1) -> Server:
    """openinfer serving the grid's repository: by default (as Triton does) in a worker process;
    with `in_process` on the server's event loop, as MLServer's `parallel_workers: 0`; with
    `frontends` > 1, KServe HTTP in that many frontend processes (HTTP cells only)."""
    key, label = ("openinfer_inproc", "openinfer (in_process)") if in_process else ("openinfer", "openinfer")
    protocols: tuple[str, ...] = ("http", "grpc")
    if frontends > 1:
        key, label, protocols = key + "_fp", f"{label}, {frontends} HTTP frontend processes", ("http",)
    server = Server(key, label, protocols, binary=True, batch_dim=grid.batching, workdir=workdir)
    # The launcher beside the interpreter running the bench, so that both run the same code.
    exe = Path(sys.executable).parent / "openinfer"
    if not exe.exists():
        server.skip = f"needs {exe} (make install-test)"
        return server
    repo = repository.write(workdir / key, grid.batching, in_process)
    http, grpc, metrics = free_ports(3)
    server.argv = [str(exe), "serve", "--model-repository", str(repo), "--http-port", str(http),
                   "--grpc-port", str(grpc), "--metrics-port", str(metrics),
                   "--allow-client-shm", "true", *(["--frontend-processes", str(frontends)] if frontends > 1 else [])]
    server.http_port, server.grpc_port = http, grpc
    return server


def _triton(grid: Grid, install: bool, workdir: Path) -> Server:
    """Triton 2.51 (CPU build) on the same repository openinfer's default mode serves."""
    server = Server("triton", "Triton 2.51", ("http", "grpc"), binary=True, batch_dim=grid.batching,
                    workdir=workdir)
    py, why = ensure_peer("triton", install)
    layout = None
    if py is not None:
        layout, why = triton.prepare(py)
    if layout is None:
        server.skip = why
        return server
    repo = repository.write(workdir / "triton", grid.batching)
    http, grpc, metrics = free_ports(3)
    server.argv = triton.argv(layout, repo, http, grpc, metrics)
    server.env = triton.env(layout)
    server.http_port, server.grpc_port = http, grpc
    return server


def _echo(kind: str, workdir: Path) -> Server:
    key, label = {"http": ("asgi_echo", "bare ASGI echo (ceiling)"),
                  "grpc": ("grpc_echo", "bare grpc.aio echo (ceiling)")}[kind]
    (port,) = free_ports(1)
    server = Server(key, label, (kind,), env=dict(TUNED_MALLOC), workdir=workdir)
    server.argv = [sys.executable, "-m", "openinfer.bench.echo", kind, "--port", str(port)]
    if kind == "grpc":
        server.grpc_port = port
    else:
        server.http_port = port
    return server


ALL = ("triton", "openinfer", "openinfer_inproc", "openinfer_fp", "openinfer_inproc_fp", "mlserver",
       "mlserver_pw0", "kserve", "asgi_echo", "grpc_echo")


def make(key: str, grid: Grid, cpus: tuple[int, ...] = (), install: bool = True,
         tune_malloc: bool = False) -> Server:
    """Server `key` for `grid`, pinned to `cpus`; its files under results/<grid>-<n>cpu/."""
    workdir = RESULTS / f"{grid.key}-{len(cpus) or 'all'}cpu"
    server = _make(key, grid, install, workdir, max(len(cpus), 2))
    server.cpus = cpus
    if tune_malloc:
        server.env.update(TUNED_MALLOC)
    return server


def _make(key: str, grid: Grid, install: bool, workdir: Path, cores: int) -> Server:
    if key == "triton":
        return _triton(grid, install, workdir)
    if key in ("openinfer", "openinfer_inproc", "openinfer_fp", "openinfer_inproc_fp"):
        return _openinfer(grid, workdir, in_process="inproc" in key, frontends=cores if key.endswith("_fp") else 1)
    if key == "mlserver":
        return _mlserver(None, install, workdir)
    if key == "mlserver_pw0":
        return _mlserver(0, install, workdir)
    if key == "kserve":
        return _kserve(install, workdir)
    if key in ("asgi_echo", "grpc_echo"):
        return _echo("http" if key == "asgi_echo" else "grpc", workdir)
    raise ValueError(f"unknown server {key!r}; choose from {', '.join(ALL)}")

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
from dataclasses import dataclass, field
from pathlib import Path

from openinfer.bench.control import ControlError, connect

from .peers import ensure_peer

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
MODEL = "identity_fp32"
#: The HTTP cells with binary tensors (the binary data extension) instead of JSON.
BINARY = "http-binary"


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

    def speaks(self, protocol: str) -> bool:
        """Whether a cell of `protocol` runs on this server ("http-binary": HTTP, binary tensors)."""
        return protocol in self.protocols or (protocol == BINARY and self.binary and "http" in self.protocols)

    def url(self, protocol: str) -> str:  # "http-binary" goes to the HTTP port
        return f"127.0.0.1:{self.grpc_port if protocol == 'grpc' else self.http_port}"

    def start(self, timeout: float = 180.0) -> None:
        RESULTS.mkdir(parents=True, exist_ok=True)
        log = (RESULTS / f"{self.key}.log").open("wb")
        env = dict(os.environ, PYTHONUNBUFFERED="1", **self.env)
        self.proc = subprocess.Popen(self.argv, cwd=self.cwd, stdout=log, stderr=log, env=env,
                                     start_new_session=True)
        deadline = time.monotonic() + timeout
        pending = list(self.protocols)
        while pending:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.label} exited with {self.proc.returncode}; "
                                   f"see {RESULTS / (self.key + '.log')}")
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


def _mlserver(parallel_workers: int | None, install: bool) -> Server:
    key = "mlserver" if parallel_workers is None else f"mlserver_pw{parallel_workers}"
    label = "MLServer 1.7.1" + (" (parallel_workers: 0)" if parallel_workers == 0 else "")
    server = Server(key, label, ("http", "grpc"))
    py, why = ensure_peer("mlserver", install)
    if py is None:
        server.skip = why
        return server
    http, grpc, metrics = free_ports(3)
    folder = RESULTS / key
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


def _kserve(install: bool) -> Server:
    server = Server("kserve", "KServe", ("http", "grpc"), binary=True)
    py, why = ensure_peer("kserve", install)
    if py is None:
        server.skip = why
        return server
    http, grpc = free_ports(2)
    server.argv = [str(py), str(HERE / "models" / "kserve" / "identity.py"),
                   "--model_name", MODEL, "--http_port", str(http), "--grpc_port", str(grpc)]
    server.http_port, server.grpc_port = http, grpc
    return server


def _openinfer(in_process: bool = False) -> Server:
    """openinfer serving the example identity model: by default (as Triton does) in a worker
    process; with `in_process` on the server's event loop, as MLServer's `parallel_workers: 0`."""
    key, label = ("openinfer_inproc", "openinfer (in_process)") if in_process else ("openinfer", "openinfer")
    server = Server(key, label, ("http", "grpc"), binary=True)
    exe = ROOT / ".venv" / "bin" / "openinfer"
    repo = ROOT / "examples" / "model_repository"
    if not exe.exists() or not (repo / MODEL).exists():
        server.skip = f"needs {exe.relative_to(ROOT)} and {repo.relative_to(ROOT)}/{MODEL}"
        return server
    if in_process:
        repo = _in_process_repository(repo / MODEL, RESULTS / key)
    http, grpc, metrics = free_ports(3)
    server.argv = [str(exe), "serve", "--model-repository", str(repo), "--http-port", str(http),
                   "--grpc-port", str(grpc), "--metrics-port", str(metrics),
                   "--allow-client-shm", "true"]
    server.http_port, server.grpc_port = http, grpc
    return server


def _in_process_repository(model: Path, folder: Path) -> Path:
    """A one-model repository: the example model, its config asking for `execution_mode: in_process`."""
    if folder.exists():
        shutil.rmtree(folder)
    shutil.copytree(model, folder / MODEL)
    config = folder / MODEL / "config.pbtxt"
    config.write_text(config.read_text() + '\nparameters { key: "execution_mode" '
                      'value { string_value: "in_process" } }\n')
    return folder


def _echo(kind: str) -> Server:
    key, label = {"http": ("asgi_echo", "bare ASGI echo (ceiling)"),
                  "grpc": ("grpc_echo", "bare grpc.aio echo (ceiling)")}[kind]
    (port,) = free_ports(1)
    server = Server(key, label, (kind,), env=dict(TUNED_MALLOC))
    server.argv = [sys.executable, "-m", "openinfer.bench.echo", kind, "--port", str(port)]
    if kind == "grpc":
        server.grpc_port = port
    else:
        server.http_port = port
    return server


ALL = ("openinfer", "openinfer_inproc", "mlserver", "mlserver_pw0", "kserve", "asgi_echo", "grpc_echo")


def make(key: str, install: bool = True, tune_malloc: bool = False) -> Server:
    server = _make(key, install)
    if tune_malloc:
        server.env.update(TUNED_MALLOC)
    return server


def _make(key: str, install: bool) -> Server:
    if key in ("openinfer", "openinfer_inproc"):
        return _openinfer(in_process=key == "openinfer_inproc")
    if key == "mlserver":
        return _mlserver(None, install)
    if key == "mlserver_pw0":
        return _mlserver(0, install)
    if key == "kserve":
        return _kserve(install)
    if key in ("asgi_echo", "grpc_echo"):
        return _echo("http" if key == "asgi_echo" else "grpc")
    raise ValueError(f"unknown server {key!r}; choose from {', '.join(ALL)}")

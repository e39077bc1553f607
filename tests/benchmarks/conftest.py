"""Fixtures: the bare echo servers (always), the real server (when it is built)."""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import free_port

ROOT = Path(__file__).resolve().parents[2]


def _wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"echo server exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listening on {port} after {timeout} s")


def _echo(kind: str, *extra: str) -> Iterator[str]:
    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen(
        [sys.executable, "-m", "openinfer.bench.echo", kind, "--port", str(port), *extra],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        _wait_port(port, proc)
        yield f"127.0.0.1:{port}"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(10)


@pytest.fixture(scope="session")
def http_echo() -> Iterator[str]:
    yield from _echo("http")


@pytest.fixture(scope="session")
def grpc_echo() -> Iterator[str]:
    yield from _echo("grpc")


@pytest.fixture(scope="session")
def openai_echo() -> Iterator[str]:
    yield from _echo("openai", "--token-delay-ms", "0.2")


@pytest.fixture(scope="session")
def real_server():  # type: ignore[no-untyped-def]
    """``openinfer serve`` on the example repository; skipped until the server exists."""
    if importlib.util.find_spec("openinfer.app.cli") is None:
        pytest.skip("openinfer.app.cli is missing: the server is not built yet")
    from tests.helpers import EXAMPLES, Server

    if not (EXAMPLES / "identity_fp32").exists():
        pytest.skip(f"{EXAMPLES}/identity_fp32 is missing")
    server = Server(EXAMPLES, args=["--allow-client-shm", "true"]).start(wait_for="ready")
    yield server
    server.stop()

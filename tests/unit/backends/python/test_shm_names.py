"""The worker channel's shared-memory files: named per server session, and removed by a later
server only once the server that made them is gone, judged by its lock and never by its pid
(which another PID namespace, a container sharing /dev/shm, does not see)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator

from openinfer.backends.python import shm_names

SERVER = textwrap.dedent("""
    import os, sys, time
    from openinfer.backends.python import shm_names
    prefix = shm_names.prefix()
    for suffix in ("arena-0", "7", "w12345-3"):
        open(os.path.join(shm_names.SHM_DIR, prefix + suffix), "wb").close()
    print(shm_names.session(), flush=True)
    time.sleep(60)
""")


@contextlib.contextmanager
def _server_with_files() -> Iterator[str]:
    """Another server process: a live session with a ring, a buffer and a worker's buffer.
    Yields the session; the process is killed outright (SIGKILL) on the way out."""
    process = subprocess.Popen([sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True)
    try:
        session = process.stdout.readline().strip()
        assert session
        yield session
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()


def _files(session: str) -> list[str]:
    return sorted(n for n in os.listdir(shm_names.SHM_DIR) if n.startswith(f"{shm_names.PREFIX}{session}-"))


def test_a_running_servers_files_stay_and_a_killed_ones_go():
    with _server_with_files() as session:
        assert len(_files(session)) == 4  # three files and the lock
        shm_names.cleanup_stale()
        assert len(_files(session)) == 4
    shm_names.cleanup_stale()
    assert _files(session) == []


def test_liveness_is_the_lock_not_the_pid():
    """A session whose pid this process cannot see (as from another PID namespace) but whose
    lock is held stays; the pid in its name is not even a running process here."""
    with _server_with_files() as session:
        pid = int(session.split("-")[0][1:])
        fake = f"p99999999-{session.split('-')[1]}"
        os.rename(os.path.join(shm_names.SHM_DIR, f"{shm_names.PREFIX}{session}-alive"),
                  os.path.join(shm_names.SHM_DIR, f"{shm_names.PREFIX}{fake}-alive"))
        for name in _files(session):
            os.rename(os.path.join(shm_names.SHM_DIR, name),
                      os.path.join(shm_names.SHM_DIR, name.replace(session, fake)))
        assert pid != 99999999 and len(_files(fake)) == 4
        shm_names.cleanup_stale()
        assert len(_files(fake)) == 4  # the lock moved with the file: still held
    shm_names.cleanup_stale()
    assert _files(fake) == []


def test_two_servers_with_the_same_pid_get_different_names():
    """Containers sharing /dev/shm each run their server as pid 1: the token tells them apart."""
    with _server_with_files() as first, _server_with_files() as second:
        assert first.split("-")[1] != second.split("-")[1]
    shm_names.cleanup_stale()
    assert _files(first) == _files(second) == []


def test_a_workers_files_carry_its_servers_session_and_its_own_pid():
    own = shm_names.prefix()
    assert own == f"{shm_names.PREFIX}{shm_names.session()}-"
    assert shm_names.prefix(worker_pid=42) == f"{own}w42-"
    code = ("import os; from openinfer.backends.python import shm_names as s; s.join('S'); "
            "print(s.prefix() == f'openinfer-ipc-S-w{os.getpid()}-')")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "True"

"""Names of the shared-memory files a server and its Python workers make, and the clean-up of
those that a server killed outright (SIGKILL) left behind.

Every file of one server is named `openinfer-ipc-<session>-...`: the server's rings
`<session>-arena-N`, its large buffers `<session>-N`, a worker's large buffers
`<session>-w<pid>-N`. The session is `p<pid>-<token>`, the server's pid and a random token:
pids alone collide between containers that share /dev/shm (`--ipc=host`, a pod's shared
volume), where every server may be pid 1. Whether a session is alive is not judged by its pid either (another PID namespace
sees other pids) but by a lock: the server holds an exclusive `flock` on `<session>-alive` for as
long as it runs, and the kernel drops it when the process ends, however it ends. A clean-up
removes a session's files only when it can take that lock itself: the workers of a killed
server do so as they leave (as Triton's stubs leave nothing behind), and any server starting
later sweeps what a session whose workers were killed too left.
"""

from __future__ import annotations

import atexit
import fcntl
import os
import secrets

SHM_DIR = "/dev/shm"
PREFIX = "openinfer-ipc-"
#: Set by the server in its workers' environment: the session their files belong to.
SESSION_ENV = "OPENINFER_IPC_SESSION"
_ALIVE = "-alive"

_session: str | None = None
_in_worker = False


def session() -> str:
    """This process's session: its server's (in a worker), or its own, started on first use."""
    global _session
    if _session is None:
        _session = _start()
    return _session


def join(server_session: str) -> None:
    """A worker: its files belong to its server's session."""
    global _session, _in_worker
    _session, _in_worker = server_session, True


def prefix(worker_pid: int | None = None) -> str:
    """The prefix of this process's files; the server passes `worker_pid` for a worker's."""
    if _in_worker:
        worker_pid = os.getpid()
    mine = f"{PREFIX}{session()}-"
    return mine if worker_pid is None else f"{mine}w{worker_pid}-"


def _start() -> str:
    """A new session, locked as alive until this process ends."""
    # "p" first: an older server's clean-up, which judged names that start with a pid by that
    # pid, passes these by.
    name = f"p{os.getpid()}-{secrets.token_hex(4)}"
    path = os.path.join(SHM_DIR, f"{PREFIX}{name}{_ALIVE}")
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)  # never inherited by workers
    fcntl.flock(fd, fcntl.LOCK_EX)
    atexit.register(_end, path, fd)
    return name


def _end(path: str, fd: int) -> None:
    _unlink(path)
    os.close(fd)


def remove_files(file_prefix: str) -> None:
    """Remove every file whose name starts with `file_prefix` (a dead worker's, say)."""
    try:
        names = os.listdir(SHM_DIR)
    except OSError:
        return
    for name in names:
        if name.startswith(file_prefix):
            _unlink(os.path.join(SHM_DIR, name))


def cleanup_stale() -> None:
    """Remove the files of every session whose server is gone (its lock is free)."""
    try:
        names = os.listdir(SHM_DIR)
    except OSError:
        return
    own = _session
    for name in names:
        if not (name.startswith(PREFIX) and name.endswith(_ALIVE)):
            continue
        other = name[len(PREFIX) : -len(_ALIVE)]
        if other != own:
            _remove_if_dead(other)


def remove_own_if_server_dead() -> None:
    """A worker whose server is gone: remove the session's files now, if the server was killed
    outright (its lock is free), rather than leave them until the next server's clean-up. A
    server that ends normally still holds the lock here and removes its files itself."""
    if _in_worker and _session is not None:
        _remove_if_dead(_session)


def _remove_if_dead(other: str) -> None:
    try:
        fd = os.open(os.path.join(SHM_DIR, f"{PREFIX}{other}{_ALIVE}"), os.O_RDWR)
    except OSError:
        return  # gone meanwhile, or another user's
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return  # its server runs
    try:
        remove_files(f"{PREFIX}{other}-")  # its alive file too, while we hold the lock
    finally:
        os.close(fd)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass

"""One tensor per shared-memory file, for what a worker's ring cannot take, and the rule both
use: no page of /dev/shm is written before it is reserved.

A mapped write to a page that a full /dev/shm cannot supply ends the writing process with
SIGBUS, and Docker and Kubernetes give a container only 64 MB. So pages are reserved first
(`posix_fallocate`, which fails with ENOSPC instead). A reservation that fails sends the
tensor through the socket instead (`ipc`), and the first tensor sent so is logged once, with
what to do about it.
"""

from __future__ import annotations

import itertools
import logging
import mmap
import os
from collections.abc import Callable

from . import shm_names

SHM_DIR = shm_names.SHM_DIR
_counter = itertools.count()
log = logging.getLogger("openinfer.python")
_warned = False


class SharedMemoryFull(Exception):
    """Not an OSError: the channel treats those as the other side being gone. Carries Triton's
    words for shared memory that cannot grow, and what was asked for."""

    def __init__(self, size: int, why: str) -> None:
        super().__init__(
            f"Failed to increase the shared memory pool size to hold a {size}-byte tensor in "
            f"{SHM_DIR}: {why}. If you are running inside docker, use '--shm-size' to give it more "
            f"shared memory."
        )
        self.size, self.why = size, why

    def __reduce__(self) -> tuple:
        return SharedMemoryFull, (self.size, self.why)


def reserve(fd: int, offset: int, length: int) -> None:
    """Give the file's pages in [offset, offset + length) their memory now, or raise
    `SharedMemoryFull` when /dev/shm cannot."""
    try:
        os.posix_fallocate(fd, offset, length)
    except OSError as exc:
        raise SharedMemoryFull(length, exc.strerror or str(exc)) from None


def warn_once(shortage: SharedMemoryFull) -> None:
    """Say once per server, whichever of its processes first sends a tensor another way for
    want of shared memory, what to do."""
    global _warned
    if _warned:
        return
    _warned = True
    try:  # an empty file takes no page: the server's other processes see it and stay quiet
        marker = os.path.join(SHM_DIR, f"{shm_names.PREFIX}{shm_names.session()}-shm-short")
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        return
    except OSError:
        pass  # not even an inode: say it anyway
    free = shm_free()
    report(
        f"{SHM_DIR} is short of space ({shortage.why}; {shortage.size} bytes wanted, "
        f"{'unknown' if free is None else free} free): tensors that do not fit cross through the "
        f"worker's socket instead, which is slower. Give the container more shared memory, e.g. "
        f"docker run --shm-size=1g, or an emptyDir with medium: Memory mounted on {SHM_DIR} in "
        f"Kubernetes."
    )


#: Where the warning goes: the server's log; a worker sends it to the server (`worker.main`).
report: Callable[[str], None] = log.warning


def shm_free() -> int | None:
    try:
        stat = os.statvfs(SHM_DIR)
    except OSError:
        return None
    return stat.f_bavail * stat.f_frsize


def write(raw: memoryview) -> str:
    """A new file holding `raw`; its name. `SharedMemoryFull` when its pages cannot be had."""
    name = f"{shm_names.prefix()}f{next(_counter)}"
    path = os.path.join(SHM_DIR, name)
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    try:
        try:
            reserve(fd, 0, raw.nbytes)
        except SharedMemoryFull:
            os.unlink(path)
            raise
        with mmap.mmap(fd, raw.nbytes) as region:
            region[:] = raw
    finally:
        os.close(fd)
    return name


def unlink(name: str) -> None:
    try:
        os.unlink(os.path.join(SHM_DIR, name))
    except OSError:
        pass


def read(name: str, size: int) -> memoryview:
    """The file's bytes, mapped; the file itself is removed at once (the mapping stays)."""
    path = os.path.join(SHM_DIR, name)
    fd = os.open(path, os.O_RDWR)
    try:
        os.unlink(path)
        if size == 0:
            return memoryview(b"")
        return memoryview(mmap.mmap(fd, size))
    finally:
        os.close(fd)

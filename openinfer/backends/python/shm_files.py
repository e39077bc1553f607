"""One tensor per shared-memory file, for what a worker's ring cannot take.

The file's pages are reserved before anything is written (`posix_fallocate`): on a full
/dev/shm a mapped write would otherwise end the writing process with SIGBUS, where Triton's
stub answers that its shared memory pool could not grow. A reservation that fails raises
`SharedMemoryFull` with Triton's words, and each side answers the request with it.
"""

from __future__ import annotations

import itertools
import mmap
import os

from . import shm_names

SHM_DIR = shm_names.SHM_DIR
_counter = itertools.count()


class SharedMemoryFull(Exception):
    """Not an OSError: the channel treats those as the other side being gone."""


def write(raw: memoryview) -> str:
    """A new file holding `raw`; its name."""
    name = f"{shm_names.prefix()}f{next(_counter)}"
    path = os.path.join(SHM_DIR, name)
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    try:
        try:
            os.posix_fallocate(fd, 0, raw.nbytes)
        except OSError as exc:
            os.unlink(path)
            raise SharedMemoryFull(
                f"Failed to increase the shared memory pool size to hold a {raw.nbytes}-byte tensor "
                f"in {SHM_DIR}: {exc.strerror}. If you are running inside docker, use '--shm-size' "
                f"to give it more shared memory."
            ) from None
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

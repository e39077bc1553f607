"""System shared-memory regions for ``--shared-memory system``.

A few lines of ``mmap`` over ``/dev/shm`` do what ``shm_open`` does in C; the key is the name a
v2 server passes to ``shm_open`` (with its leading slash). Using our own helper keeps the bench free
of tritonclient's modules, which cannot share a process with our generated protobuf code.
"""

from __future__ import annotations

import mmap
import os

SHM_DIR = "/dev/shm"


class Region:
    """A shared-memory region this process created, mapped read-write."""

    def __init__(self, key: str, byte_size: int) -> None:
        if not key.startswith("/"):
            key = "/" + key
        self.key, self.byte_size = key, byte_size
        self.path = os.path.join(SHM_DIR, key.lstrip("/"))
        fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o600)
        try:
            os.ftruncate(fd, byte_size)
            self.map = mmap.mmap(fd, byte_size)
        finally:
            os.close(fd)

    def write(self, offset: int, data: bytes) -> None:
        self.map[offset : offset + len(data)] = data

    def read(self, offset: int, size: int) -> memoryview:
        return memoryview(self.map)[offset : offset + size]

    def close(self) -> None:
        """Unmap and unlink; the server must have unregistered the region first."""
        try:
            self.map.close()
        except BufferError:  # a memoryview still points into it; the unlink still matters
            pass
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

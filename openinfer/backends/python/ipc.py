"""Message framing between the server and a Python model's worker process.

Messages are pickled (protocol 5). Array buffers at or above `SHM_THRESHOLD` bytes travel
out of band through files in /dev/shm: the sender writes them once, the receiver maps them
and unlinks the name straight away, so a tensor crosses with one copy and no socket traffic.
Smaller buffers ride inside the pickle, where a syscall would cost more than the copy.
"""

from __future__ import annotations

import itertools
import mmap
import os
import pickle
import socket
import struct
from typing import Any

SHM_DIR = "/dev/shm"
SHM_THRESHOLD = 64 * 1024
_HEADER = struct.Struct("<II")  # payload length, number of out-of-band buffers
_NAME = struct.Struct("<HQ")  # name length, byte size
_counter = itertools.count()


def shm_prefix(pid: int | None = None) -> str:
    return f"openinfer-ipc-{pid or os.getpid()}-"


def _write_shm(raw: memoryview) -> str:
    name = f"{shm_prefix()}{next(_counter)}"
    fd = os.open(os.path.join(SHM_DIR, name), os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    try:
        os.ftruncate(fd, raw.nbytes)
        with mmap.mmap(fd, raw.nbytes) as region:
            region[:] = raw
    finally:
        os.close(fd)
    return name


def _read_shm(name: str, size: int) -> memoryview:
    path = os.path.join(SHM_DIR, name)
    fd = os.open(path, os.O_RDWR)
    try:
        os.unlink(path)
        if size == 0:
            return memoryview(b"")
        return memoryview(mmap.mmap(fd, size))
    finally:
        os.close(fd)


def encode(message: Any) -> list[bytes]:
    """The frames that carry one message (header, pickle, out-of-band names)."""
    names: list[bytes] = []

    def out_of_band(buffer: pickle.PickleBuffer) -> bool:
        raw = buffer.raw()
        if raw.nbytes < SHM_THRESHOLD:
            return True  # keep in band
        encoded = _write_shm(raw).encode()
        names.append(_NAME.pack(len(encoded), raw.nbytes) + encoded)
        return False

    payload = pickle.dumps(message, protocol=5, buffer_callback=out_of_band)
    return [_HEADER.pack(len(payload), len(names)), payload, *names]


def decode(payload: bytes, buffers: list[memoryview]) -> Any:
    return pickle.loads(payload, buffers=buffers)


def read_buffer_names(read_exact, count: int) -> list[memoryview]:
    buffers = []
    for _ in range(count):
        length, size = _NAME.unpack(read_exact(_NAME.size))
        buffers.append(_read_shm(read_exact(length).decode(), size))
    return buffers


async def read_buffer_names_async(reader, count: int) -> list[memoryview]:
    buffers = []
    for _ in range(count):
        length, size = _NAME.unpack(await reader.readexactly(_NAME.size))
        name = (await reader.readexactly(length)).decode()
        buffers.append(_read_shm(name, size))
    return buffers


class BlockingChannel:
    """The worker's end: a blocking socket, reads on one thread, writes under a lock."""

    def __init__(self, sock: socket.socket) -> None:
        import threading

        self.sock = sock
        self._write_lock = threading.Lock()

    def _read_exact(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(min(n, 1 << 20))
            if not chunk:
                raise EOFError("server closed the channel")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks) if len(chunks) != 1 else chunks[0]

    def receive(self) -> Any:
        length, count = _HEADER.unpack(self._read_exact(_HEADER.size))
        payload = self._read_exact(length)
        return decode(payload, read_buffer_names(self._read_exact, count))

    def send(self, message: Any) -> None:
        frames = encode(message)
        with self._write_lock:
            self.sock.sendall(b"".join(frames))


def cleanup_leftovers(pid: int) -> None:
    """Remove buffers a dead process wrote but never had read."""
    prefix = shm_prefix(pid)
    try:
        for name in os.listdir(SHM_DIR):
            if name.startswith(prefix):
                try:
                    os.unlink(os.path.join(SHM_DIR, name))
                except OSError:
                    pass
    except OSError:
        pass

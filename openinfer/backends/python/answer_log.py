"""Answers a worker holds back while further batches wait in it, kept where the server can still
read them if the worker dies.

Where the server and its worker share one CPU, each answer written to the socket wakes the
server's event loop, which takes the CPU from the worker to read that one answer; the worker
then comes back to caches the server has filled. While batches the worker has already read wait
to run, it can instead hold its answers and send them in one write when it has nothing left:
one wake-up for the lot. Held in the worker's own memory, though, a model that crashed in a
later batch would take the earlier batches' answers with it, where Triton's stub sends each
response as it is made. So the held answers lie in a small shared-memory file that both
processes map: the worker appends each answer's frame and then counts it in the header; the
server reads the frames counted there once the worker has died (`WorkerProcess`), and answers
the batches that are still waiting for them.

Layout: a 64-byte header whose first 8 bytes count the bytes held, then those frames back to
back. Only the worker writes; the server reads only after the worker's exit, so no lock is
needed. Every page is reserved when the file is made (`shm_files.reserve`): a log that /dev/shm
cannot give its pages is not made, and the worker then sends every answer at once.
"""

from __future__ import annotations

import itertools
import mmap
import os
import socket
import struct

from . import shm_files, shm_names

_COUNT = struct.Struct("<Q")
_HEADER = 64
#: Room for the frames held at once; an answer that does not fit is sent, with those before it.
LOG_SIZE = 64 * 1024
#: The longest the first held answer waits for the batches after it. A cheap model's batch
#: takes the worker tens of microseconds under load, so this covers a full pipeline of them
#: (`PIPELINE_DEPTH`); a costlier model's answers go sooner, each as its batch ends.
MAX_HOLD_S = 0.001
_counter = itertools.count()


class AnswerLog:
    """One worker's held answers: `hold` and `send` in the worker, `left_behind` in the server."""

    def __init__(self, name: str, create: bool = False) -> None:
        self.name = name
        path = os.path.join(shm_names.SHM_DIR, name)
        fd = os.open(path, os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0), 0o600)
        try:
            if create:
                try:
                    shm_files.reserve(fd, 0, _HEADER + LOG_SIZE)
                except shm_files.SharedMemoryFull:
                    os.unlink(path)
                    raise
            self.region = mmap.mmap(fd, _HEADER + LOG_SIZE)
        finally:
            os.close(fd)
        self.held = 0  # worker: bytes of frames held

    @staticmethod
    def create(prefix: str) -> AnswerLog:
        return AnswerLog(f"{prefix}answers-{next(_counter)}", create=True)

    def hold(self, frame: bytes) -> bool:
        """Worker: append a frame and count it; False (nothing written) when it does not fit."""
        start = _HEADER + self.held
        end = start + len(frame)
        if end > _HEADER + LOG_SIZE:
            return False
        self.region[start:end] = frame
        self.held = end - _HEADER
        _COUNT.pack_into(self.region, 0, self.held)  # counted only once it is all there
        return True

    def send(self, sock: socket.socket, then: bytes = b"") -> None:
        """Worker: write the held frames to the socket (and `then` after them, in the same
        write), and hold nothing more. Counted until written: a worker that dies in the write
        leaves them for the server."""
        with memoryview(self.region) as region, region[_HEADER : _HEADER + self.held] as frames:
            sock.sendall(b"".join((frames, then)) if then else frames)
        _COUNT.pack_into(self.region, 0, 0)
        self.held = 0

    def left_behind(self) -> bytes:
        """Server, once the worker is gone: the frames it held and had not sent (some may have
        reached the socket after all, if it died within `send`)."""
        (count,) = _COUNT.unpack_from(self.region, 0)
        return bytes(self.region[_HEADER : _HEADER + min(count, LOG_SIZE)])

    def unlink(self) -> None:
        try:
            os.unlink(os.path.join(shm_names.SHM_DIR, self.name))
        except OSError:
            pass  # already gone

    def close(self, unlink: bool = False) -> None:
        self.region.close()  # nothing views it past a call: `send` releases its views, the rest copy
        if unlink:
            self.unlink()

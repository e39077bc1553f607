"""The channel between the server and a Python model's worker process.

A request crosses as one frame on a socketpair: a 5-byte header (body length, codec) and a
body. The hot messages (`Execute`, `Executed`, `Respond`, `Cancel`) are packed (`packed`):
marshal-ed builtins with the small tensors' bytes appended raw; every other message is
pickled. A tensor of `SHM_THRESHOLD` bytes or more goes through the direction's shared ring
(`ring.Arena`) and the frame carries only where it lies. The receiver reads it there, as a numpy
view; the ring space returns to the sender when the last array over it is dropped (a buffer that
does not fit goes through a file of its own that the receiver maps and unlinks, and one that
/dev/shm has no room for at all goes inside the frame, as a small one does). An output that
is one of its batch's own inputs (or part of one) is not copied back: the answer names where it
lies in the ring the server wrote (`^batch:pos`), and the server keeps that ring from the
batch's inputs on unwritten (`pin`) until the answer is decoded, then under each such output
until it is dropped.

What each step costs, one [1,16] FP32 request on the 2-core development machine (best of
repeated runs; the machine is shared, so take these as orders of magnitude):

| step | before | now |
|---|---:|---:|
| encode `Execute` (pickle, then packed) | 9.5-15 µs | 3 µs |
| decode `Execute` | 6 µs | 4.5 µs |
| encode `Executed` | 9-16 µs | 3 µs |
| decode `Executed` | 7.5-11 µs | 5 µs |
| one blocking read (recv of 1 MiB, then of 64 KiB) | 22-50 µs | 3 µs |
| worker: reader thread hands the request to the main thread | 8 µs CPU, 32 µs wall | none |
| server: a coroutine awaiting header, body, names per message | 3 awaits | one callback per read |
| [1,65536] FP32 through the ring (copied out, then viewed) | 224 µs | 168 µs |
| put of [1,65536] FP32 into the ring (on through it, then started over when empty) | 34-58 µs | 12-15 µs |
| identity's [1,65536] FP32 output back (copied, then named where it lies) | ~60 µs | 0 |

Two processes cost a wake-up each way (a socketpair ping-pong: 10-12 µs of CPU per round trip,
26 µs wall at best) and one future resolved on the server's loop (5.5 µs). While requests come
back to back the worker polls before it sleeps and saves its wake-up, and while a batch is out
the server's loop keeps turning instead of sleeping until the answer wakes it (`spin`); where
the two share one CPU, the worker's answers wait for the batches read with them and cross in
one write (`answer_log`). An eventfd would save 1.5-2 µs more per frame; the socket, though, tells each side when the other
dies.
"""

from __future__ import annotations

import collections
import math
import pickle
import select
import socket
import struct
import threading
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from . import packed, shm_files, shm_names
from .answer_log import AnswerLog
from .ring import Arena

SHM_THRESHOLD = 64 * 1024
#: The largest tensor that crosses in a frame when /dev/shm has no room for it (a frame's
#: length is 32 bits); a larger one fails its request with Triton's shared-memory error.
INLINE_MAX = 1 << 31
_FRAME = struct.Struct("<IB")  # body length, codec
PICKLED, PACKED = 0, 1
_LENGTH = struct.Struct("<I")  # a pickled body's pickle length
#: What one blocking read asks for: recv(n) allocates n bytes first, so asking for 1 MiB to
#: get a 200-byte frame costs 50 µs where 64 KiB costs 3 µs. A frame known to be larger is
#: read with what it still lacks.
_READ_SIZE = 64 * 1024
_READ_MAX = 64 * 1024 * 1024
_NAME = struct.Struct("<HQ")  # name length, byte size



def shm_prefix() -> str:
    """What this process's shared-memory files are named from (`shm_names`)."""
    return shm_names.prefix()


class NeedsSharedMemory(Exception):
    """A frame that may not use shared memory (`encode`'s `shared`) has a large tensor."""


def encode(
    message: Any, arena: Arena | None = None, echo: Callable[[np.ndarray], str | None] | None = None,
    shared: bool = True,
) -> bytes:
    """One message as a frame: the hot ones packed (`packed`), the others pickled. Without
    `shared`, a tensor that would go through shared memory raises `NeedsSharedMemory` instead."""
    mark = arena.mark() if arena is not None else None
    files: list[str] = []

    def put_large(raw: memoryview) -> str | None:
        if not shared:
            raise NeedsSharedMemory()
        descriptor = arena.put(raw) if arena is not None else None
        if descriptor is None:
            try:
                descriptor = shm_files.write(raw)
            except shm_files.SharedMemoryFull as shortage:
                if raw.nbytes > INLINE_MAX:
                    raise
                shm_files.warn_once(shortage)
                return None  # /dev/shm is short: the bytes go in the frame itself
            files.append(descriptor)
        return descriptor

    def give_back() -> None:
        if arena is not None and mark is not None:
            arena.give_back(mark)
        for name in files:
            shm_files.unlink(name)
        files.clear()

    def frame() -> bytes:
        try:
            parts = packed.pack(message, put_large, SHM_THRESHOLD, echo)
        except packed.Unpackable:  # give back what the packing had written, then pickle
            give_back()
            parts = None
        if parts is None:  # not a hot message, or not packable
            return _pickled(message, put_large)
        body = b"".join(parts)
        return _FRAME.pack(len(body), PACKED) + body

    try:
        return frame()
    except shm_files.SharedMemoryFull:  # nothing half-written stays behind
        give_back()
        raise


def _pickled(message: Any, put_large: Callable[[memoryview], str | None]) -> bytes:
    names: list[bytes] = []

    def out_of_band(buffer: pickle.PickleBuffer) -> bool:
        raw = buffer.raw()
        if raw.nbytes < SHM_THRESHOLD:
            return True  # keep in band
        descriptor = put_large(raw)
        if descriptor is None:
            return True  # no room in /dev/shm: in band
        encoded = descriptor.encode()
        names.append(_NAME.pack(len(encoded), raw.nbytes) + encoded)
        return False

    payload = pickle.dumps(message, protocol=5, buffer_callback=out_of_band)
    body = b"".join([_LENGTH.pack(len(payload)), payload, *names])
    return _FRAME.pack(len(body), PICKLED) + body


def decode(codec: int, body: memoryview, arena: Arena | None = None, sent: Arena | None = None) -> Any:
    """The message of one frame's body (`sent`: the ring this side writes, which echoes read)."""
    if codec == PACKED:
        return packed.unpack(body, lambda descriptor, dtype, shape: _array(descriptor, dtype, shape, arena, sent))
    if codec != PICKLED:
        raise EOFError(f"unknown frame codec {codec}")
    (length,) = _LENGTH.unpack_from(body, 0)
    offset = _LENGTH.size + length
    payload = body[_LENGTH.size : offset]
    buffers = []
    while offset < len(body):
        name_length, size = _NAME.unpack_from(body, offset)
        offset += _NAME.size
        name = bytes(body[offset : offset + name_length]).decode()
        offset += name_length
        buffers.append(_buffer(name, size, arena))
    return pickle.loads(payload, buffers=buffers)


def _array(name: str, dtype: np.dtype, shape: tuple, arena: Arena | None, sent: Arena | None = None) -> np.ndarray:
    """A large tensor read where it lies: a view into the ring (its space is released when the
    last array over it goes), into the ring this side wrote (an echo, pinned as long), or over
    a file of its own."""
    size = math.prod(shape) * dtype.itemsize
    if name.startswith("^"):
        if sent is None:
            raise EOFError("an echoed buffer arrived on a channel without a ring")
        batch, position = (int(x) for x in name[1:].split(":"))
        view, key = sent.echo_view(batch, position, size)
        flat = np.frombuffer(view, dtype)
        del view
        weakref.finalize(flat.base, sent.unpin, key)
        return flat.reshape(shape)
    if name.startswith("@") and arena is not None:
        view, span = arena.take_view(name, size)
        flat = np.frombuffer(view, dtype)
        del view
        # Every array derived from `flat` keeps its base alive, so this runs after the last.
        weakref.finalize(flat.base, arena.release, span)
        return flat.reshape(shape)
    return np.frombuffer(_buffer(name, size, arena), dtype).reshape(shape)


def _buffer(name: str, size: int, arena: Arena | None) -> memoryview | bytearray:
    if name.startswith("@"):
        if arena is None:
            raise EOFError("a shared ring buffer arrived on a channel without one")
        return arena.take(name, size)
    return shm_files.read(name, size)


class FrameReader:
    """Cuts a byte stream into messages: everything one read brought is decoded at once, so the
    server's loop runs one callback per read, however many answers it carried."""

    def __init__(self, arena: Arena | None = None, sent: Arena | None = None) -> None:
        self.arena = arena
        self.sent = sent  # the ring the other way, which answers may echo
        self._rest = bytearray()
        #: Bytes the frame begun in `_rest` still lacks (0 when its header is not in yet).
        self.missing = 0

    def feed(self, data: bytes) -> list[Any]:
        if self._rest:  # a frame left incomplete: grow it in place, not by concatenation
            self._rest += data
            data = self._rest
        messages = []
        self.missing = 0
        offset, total = 0, len(data)
        with memoryview(data) as view:
            while total - offset >= _FRAME.size:
                length, codec = _FRAME.unpack_from(view, offset)
                end = offset + _FRAME.size + length
                if end > total:
                    self.missing = end - total
                    break
                messages.append(decode(codec, view[offset + _FRAME.size : end], self.arena, self.sent))
                offset = end
        self._rest = bytearray(data[offset:]) if offset < total else bytearray()
        return messages


class BlockingChannel:
    """The worker's end: a blocking socket, reads on one thread, writes under a lock."""

    def __init__(
        self, sock: socket.socket, inbound: Arena | None = None, outbound: Arena | None = None,
        answers: AnswerLog | None = None,
    ) -> None:
        self.sock = sock
        self.inbound = inbound
        self.outbound = outbound
        self.answers = answers  # where answers may wait to go in one write (`hold`)
        self._write_lock = threading.Lock()
        self._frames = FrameReader(inbound)
        self._ready: collections.deque[Any] = collections.deque()
        # Waiting in poll() for input alone, not in a blocking recv: recv sleeps on the socket's
        # one wait queue, which the server's every read of our answers also wakes (to say
        # there is room to write), so each request cost a second, empty wake-up.
        self._readable = select.poll()
        self._readable.register(sock.fileno(), select.POLLIN)

    def receive(self, wait: Callable[[select.poll], Any] | None = None) -> Any:
        """The next message; `wait` (a `spin.Spinner`'s) waits for input instead of `poll()`."""
        while not self._ready:
            self.send_held()  # nothing left to run here: what waited goes now
            wait(self._readable) if wait else self._readable.poll()  # on input, end of stream or an error
            chunk = self._read()
            if not chunk:
                raise EOFError("server closed the channel")
            self._ready.extend(self._frames.feed(chunk))
        return self._ready.popleft()

    def _read(self, flags: int = 0) -> bytes:
        return self.sock.recv(min(max(_READ_SIZE, self._frames.missing), _READ_MAX), flags)

    def poll(self) -> list[Any]:
        """Every message already here, without waiting for more."""
        while True:
            try:
                chunk = self._read(socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                break
            if not chunk:
                raise EOFError("server closed the channel")
            self._ready.extend(self._frames.feed(chunk))
        messages = list(self._ready)
        self._ready.clear()
        return messages

    def has_read_ahead(self) -> bool:
        """Whether messages already read wait to be taken."""
        return bool(self._ready)

    def send(self, message: Any, echo: Callable[[np.ndarray], str | None] | None = None) -> None:
        """Write a message, after any held answers, in the same write (the order stays)."""
        with self._write_lock:  # the ring is reserved in send order: one writer at a time
            frame = encode(message, self.outbound, echo)
            answers = self.answers
            if answers is not None and answers.held:
                answers.send(self.sock, frame)
            else:
                self.sock.sendall(frame)

    def hold(self, message: Any) -> bool:
        """Keep an answer back in the answer log, to go with the next write (`answer_log`);
        False when it cannot wait there (no log, a tensor that needs shared memory, no room),
        and the caller sends it."""
        answers = self.answers
        if answers is None:
            return False
        try:
            frame = encode(message, shared=False)
        except NeedsSharedMemory:
            return False
        with self._write_lock:
            return answers.hold(frame)

    @property
    def holding(self) -> bool:
        """Whether answers are held."""
        return self.answers is not None and self.answers.held > 0

    def send_held(self) -> None:
        """Write the held answers now."""
        answers = self.answers
        if answers is not None and answers.held:
            with self._write_lock:
                if answers.held:
                    answers.send(self.sock)


def cleanup_leftovers(pid: int) -> None:
    """Remove buffers a dead worker wrote but never had read."""
    shm_names.remove_files(shm_names.prefix(worker_pid=pid))


def cleanup_stale() -> None:
    """Remove what servers that were killed outright (SIGKILL) left in /dev/shm."""
    shm_names.cleanup_stale()

"""A shared ring for one direction of a worker's channel: the sender copies a large tensor in
(`put`), the receiver reads it where it lies (`take_view`) and releases it when the last array
over it is dropped, in any order.

The sender reuses the ring up to the oldest buffer still held; a buffer that does not fit (too
large, or behind one still held) is refused and goes through a file of its own. When everything
sent has been released, the sender starts over at the ring's start, where the memory is still
in the caches; all of the ring is free then, whatever the size of the buffer that starts it.
The sender may also keep space unwritten for its own reasons (`pin`): a batch's inputs until
its answer is in, and under an answer that names an input as its output (`echo_finder`) for as
long as that output is held.

The header holds what the receiver has released (8 bytes, written only by the receiver) and one
byte the sender sets to say whether the receiver should sleep rather than poll (`core.scheduling.overlap`).

The file is sparse, and a mapped write to a page that a full /dev/shm cannot supply ends the
writing process with SIGBUS. So no page is written before it is reserved: the header when the
ring is made, the rest by the sender before a `put` first reaches it (`posix_fallocate`, in
steps of `_RESERVE_STEP`). A reservation that fails refuses the `put`, and the buffer goes
another way (`ipc`); the receiver only reads pages the sender reserved.
"""

from __future__ import annotations

import collections
import itertools
import mmap
import os
import struct
import threading
from collections.abc import Callable

import numpy as np

from . import shm_files, shm_names

SHM_DIR = shm_names.SHM_DIR
_counter = itertools.count()
_CONSUMED = struct.Struct("<Q")  # the arena header: bytes the receiver has copied out
_SLEEP_HINT = _CONSUMED.size  # then one byte the sender sets: 1 when the receiver should sleep
_ARENA_HEADER = 64
_ALIGN = 64
ARENA_SIZE = 64 * 1024 * 1024  # sparse: only the pages a tensor touches are ever allocated
#: The name a worker is given for a ring that could not be made: its tensors use the socket.
NO_RING = "-"
_RESERVE_STEP = 1024 * 1024  # what the sender reserves at a time beyond what a put needs


class Arena:
    """One direction's shared ring: `put` on the sending side, `take` on the receiving side."""

    def __init__(self, name: str, create: bool = False) -> None:
        self.name = name
        path = os.path.join(SHM_DIR, name)
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
        fd = os.open(path, flags, 0o600)
        try:
            if create:
                os.ftruncate(fd, _ARENA_HEADER + ARENA_SIZE)
                try:
                    shm_files.reserve(fd, 0, _ARENA_HEADER)
                except shm_files.SharedMemoryFull:
                    os.unlink(path)
                    raise
            self.region = mmap.mmap(fd, _ARENA_HEADER + ARENA_SIZE)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd  # kept open to reserve pages before they are first written
        self._reserved = 0  # sender: bytes from the ring's start known to have their pages
        self.view = memoryview(self.region)
        self.head = 0  # sender: bytes ever reserved (monotonic)
        #: Receiver: the buffers taken and not yet released, in ring order, as [end, released].
        self._spans: collections.deque[list] = collections.deque()
        self._lock = threading.Lock()  # a view may be released by whichever thread drops it
        self.closed = False
        #: Sender: positions (monotonic) the ring must not be written over yet, whatever the
        #: receiver released: a batch's inputs until its answer is in, an answer's echo after.
        self._pins: dict[object, int] = {}
        self._rewound = 0  # sender: where it last started over on an empty ring
        #: Receiver: where the ring's first byte lies in this process, to recognise arrays over it.
        self.address = np.frombuffer(self.region, np.uint8, 1, _ARENA_HEADER).__array_interface__["data"][0]

    @staticmethod
    def create(prefix: str) -> Arena:
        return Arena(f"{prefix}arena-{next(_counter)}", create=True)

    def put(self, raw: memoryview) -> str | None:
        """Copy a buffer into the ring; its descriptor, or None when it does not fit now."""
        size = raw.nbytes
        if size > ARENA_SIZE // 4:
            return None
        consumed = self._floor()
        start = self.head
        position = start % ARENA_SIZE
        rewound = consumed == start and position
        if rewound:  # nothing is held: start over where the ring is warm
            start += ARENA_SIZE - position
            position = 0
            consumed = start  # all before it is free, whatever the header says until a release
        if position + size > ARENA_SIZE:  # never split a buffer across the end: wrap
            start += ARENA_SIZE - position
            position = 0
        end = start + ((size + _ALIGN - 1) // _ALIGN) * _ALIGN
        if end - consumed > ARENA_SIZE:
            return None  # the receiver has not caught up
        if position + size > self._reserved and not self._reserve(position + size):
            return None  # /dev/shm cannot give the pages: never write them unreserved
        base = _ARENA_HEADER + position
        self.view[base : base + size] = raw
        if rewound:
            self._rewound = start
        self.head = end
        return f"@{position}:{end}"

    def _reserve(self, needed: int) -> bool:
        """Reserve the ring's pages up to `needed` bytes (a step further where that fits)."""
        if self.closed:
            return False
        step = min(ARENA_SIZE, max(needed, self._reserved + _RESERVE_STEP))
        for upto in dict.fromkeys((step, needed)):  # the step first, then the put alone
            try:
                shm_files.reserve(self._fd, _ARENA_HEADER + self._reserved, upto - self._reserved)
            except shm_files.SharedMemoryFull:
                continue  # a step too many: try what the put needs alone
            self._reserved = upto
            return True
        return False

    def mark(self) -> tuple[int, int]:
        """Sender: where the ring stands, for `give_back` to return to."""
        return self.head, self._rewound

    def give_back(self, mark: tuple[int, int]) -> None:
        """Sender: forget every `put` since `mark` (a message that was not sent after all)."""
        self.head, self._rewound = mark

    def tell_to_sleep(self, sleep: bool) -> None:
        """Sender: whether the receiver should sleep, not poll, while it waits for the next
        message (`core.scheduling.overlap`); a byte in the header, read without a message of its own."""
        if not self.closed:
            self.region[_SLEEP_HINT] = 1 if sleep else 0

    def told_to_sleep(self) -> bool:
        """Receiver: what the sender last said by `tell_to_sleep`."""
        return bool(self.region[_SLEEP_HINT])

    def free(self) -> int:
        """Bytes the sender could still put in the ring (its capacity less what is unread)."""
        return ARENA_SIZE - (self.head - self._floor())

    def _floor(self) -> int:
        """How far the sender may reuse the ring: what the receiver released, short of pins."""
        (consumed,) = _CONSUMED.unpack_from(self.region, 0)
        consumed = max(consumed, self._rewound)
        if self._pins:
            with self._lock:  # another thread may have dropped the last pin meanwhile
                return min(consumed, *self._pins.values()) if self._pins else consumed
        return consumed

    def pin(self, key: object, head: int) -> None:
        """Sender: keep what was put since the head was `head` unwritten until `unpin(key)`; a put
        that found the ring empty started over past `head`, and the pin starts there too."""
        with self._lock:
            self._pins[key] = max(head, self._rewound)

    def unpin(self, key: object) -> None:
        with self._lock:
            self._pins.pop(key, None)

    def echo_view(self, batch: int, position: int, size: int) -> tuple[memoryview, object]:
        """Sender: an answer's tensor that is bytes this side wrote for batch `batch` (the
        model returned an input, or part of one), where they lie; the ring stays pinned under
        it until `unpin` of the returned key."""
        with self._lock:
            start = self._pins.get(batch)
            if start is None or position < 0 or position + size > ARENA_SIZE:
                raise EOFError(f"an answer refers to ring bytes of batch {batch} no longer held")
            key = object()
            self._pins[key] = start
        base = _ARENA_HEADER + position
        return self.view[base : base + size], key

    def take(self, descriptor: str, size: int) -> bytearray:
        """Copy a buffer out of the ring and release its space to the sender."""
        view, span = self.take_view(descriptor, size)
        data = bytearray(view)
        view.release()
        self.release(span)
        return data

    def take_view(self, descriptor: str, size: int) -> tuple[memoryview, list]:
        """A buffer where it lies in the ring; its space stays the receiver's until `release`."""
        position, end = (int(x) for x in descriptor[1:].split(":"))
        base = _ARENA_HEADER + position
        span = [end, False]
        with self._lock:
            self._spans.append(span)
        return self.view[base : base + size], span

    def release(self, span: list) -> None:
        """Give a taken buffer's space back; the sender reuses the ring up to the oldest one
        still held, so buffers may be released in any order."""
        with self._lock:
            span[1] = True
            spans, consumed = self._spans, None
            while spans and spans[0][1]:
                consumed = spans.popleft()[0]
            if consumed is not None and not self.closed:
                _CONSUMED.pack_into(self.region, 0, consumed)

    def unlink(self) -> None:
        try:
            os.unlink(os.path.join(SHM_DIR, self.name))
        except OSError:
            pass  # already gone

    def close(self, unlink: bool = False) -> None:
        with self._lock:
            was_closed, self.closed = self.closed, True
        if not was_closed:
            os.close(self._fd)
            try:
                self.view.release()
                self.region.close()
            except BufferError:
                pass  # arrays still view the ring: the mapping goes with the last of them
        if unlink:
            self.unlink()


def echo_finder(batch: int, arrays: list[np.ndarray], ring: Arena) -> Callable[[np.ndarray], str | None]:
    """Worker: for an answer to `batch`, the descriptor of an output that lies inside one of
    the batch's inputs in the inbound `ring` (`^batch:position`), so it is not copied back:
    the server reads it where it wrote it. None for any other array."""
    low, high = ring.address, ring.address + ARENA_SIZE
    spans = []
    for array in arrays:
        start = array.__array_interface__["data"][0]
        if low <= start < high:
            spans.append((start, start + array.nbytes))

    def echo(array: np.ndarray) -> str | None:
        if not spans or not array.flags.c_contiguous:
            return None
        start = array.__array_interface__["data"][0]
        end = start + array.nbytes
        for first, last in spans:
            if first <= start and end <= last:
                return f"^{batch}:{start - low}"
        return None

    return echo

"""The worker channel's frames: what goes in comes out, however the stream is cut."""

from __future__ import annotations

import gc
import os

import numpy as np
import pytest

from openinfer.backends.python import ipc, packed, shm_names
from openinfer.backends.python import ring as shared_ring
from openinfer.backends.python.wire import (
    Cancel,
    Done,
    Execute,
    Executed,
    Respond,
    WireRequest,
    WireResponse,
)


def _request(key: int, *tensors: tuple[str, str, np.ndarray], parameters: dict | None = None) -> WireRequest:
    return WireRequest(key, "m", "", f"id-{key}", list(tensors), ["OUT"], parameters or {}, "seq-7", 3, 1500)


def _same(a: object, b: object) -> None:
    """Equal messages, arrays compared by dtype, shape and value."""
    if isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray)
        assert (a.dtype, a.shape) == (b.dtype, b.shape)
        np.testing.assert_array_equal(a, b)
        return
    if isinstance(a, (tuple, list)):
        assert type(a) is type(b) and len(a) == len(b), (a, b)
        for x, y in zip(a, b):
            _same(x, y)
        return
    assert a == b


@pytest.fixture
def arena():
    ring = shared_ring.Arena.create(ipc.shm_prefix())
    yield ring
    ring.close(unlink=True)


MESSAGES = [
    Execute(1, [
        _request(2, ("A", "FP32", np.arange(16, dtype=np.float32).reshape(1, 16))),
        _request(3, ("B", "INT64", np.arange(12).reshape(3, 4).T), ("C", "BOOL", np.array([True, False])),
                 parameters={"p": 1, "q": "x", "r": True, "s": 0.5}),
        _request(4, ("E", "FP16", np.zeros((0, 5), np.float16)), ("S", "FP64", np.array(2.5))),
    ]),
    Executed(5, [WireResponse([("OUT", "UINT8", np.arange(200, dtype=np.uint8))], {"k": "v"}),
                 None, WireResponse([], {}, (3, "bad input"))], (1, 2, 3), [7], None),
    Executed(6, None, None, [], "Failed to process the request(s)"),
    Respond(8, WireResponse([("OUT", "INT32", np.array([[1, 2], [3, 4]], np.int32))], {}), True),
    Respond(9, None, True),
    Cancel([1, 2, 3]),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_hot_messages_are_packed_and_come_back_equal(message, arena):
    frame = ipc.encode(message, arena)
    assert frame[4] == ipc.PACKED
    (back,) = ipc.FrameReader(arena).feed(frame)
    _same(message, back)
    for tensors in _tensors(back):
        for _, _, array in tensors:
            assert array.flags.writeable  # a model may write into its inputs, as with pickle


def _tensors(message: object) -> list:
    if isinstance(message, Execute):
        return [r.inputs for r in message.requests]
    if isinstance(message, Executed):
        return [r.outputs for r in message.responses or [] if r is not None]
    if isinstance(message, Respond) and message.response is not None:
        return [message.response.outputs]
    return []


def test_what_only_pickle_carries_is_pickled():
    strings = np.array([b"a", b"bc"], dtype=np.object_)
    for message in (
        Execute(1, [_request(1, ("S", "BYTES", strings))]),
        Execute(1, [_request(1, ("A", "FP32", np.ones(2, np.float32)), parameters={"n": np.int64(3)})]),
        Done({"config": [1, 2]}),
    ):
        frame = ipc.encode(message)
        assert frame[4] == ipc.PICKLED
        (back,) = ipc.FrameReader().feed(frame)
        _same(message, back)


def test_large_tensors_cross_through_the_ring_and_files(arena):
    big = np.random.default_rng(0).random(ipc.SHM_THRESHOLD // 4 * 3, dtype=np.float32)
    huge = np.arange(shared_ring.ARENA_SIZE // 4 // 8 + 1000, dtype=np.float64)  # over the ring's limit
    message = Respond(1, WireResponse([("BIG", "FP32", big), ("HUGE", "FP64", huge)], {}), False)
    frame = ipc.encode(message, arena)
    assert len(frame) < 1024  # the bytes went around the socket
    (back,) = ipc.FrameReader(arena).feed(frame)
    _same(message, back)
    files = [n for n in os.listdir(shm_names.SHM_DIR) if n.startswith(ipc.shm_prefix())]
    assert not [n for n in files if "arena" not in n and not n.endswith("-alive")]  # no buffer left behind


def test_a_stream_cut_anywhere_gives_the_same_messages(arena):
    frames = b"".join(ipc.encode(m, arena) for m in MESSAGES)
    reader = ipc.FrameReader(arena)
    received = []
    for i in range(0, len(frames), 7):  # every frame arrives in pieces, headers split too
        received.extend(reader.feed(frames[i : i + 7]))
    assert len(received) == len(MESSAGES)
    for sent, back in zip(MESSAGES, received):
        _same(sent, back)


def test_packing_refuses_object_arrays_before_writing_anything(arena):
    big = np.ones(ipc.SHM_THRESHOLD, np.float32)
    strings = np.array(["x"], dtype=np.object_)
    message = Execute(1, [_request(1, ("BIG", "FP32", big)), _request(2, ("S", "BYTES", strings))])
    with pytest.raises(packed.Unpackable):
        packed.pack(message, lambda raw: "unused", ipc.SHM_THRESHOLD)
    head = arena.head
    frame = ipc.encode(message, arena)  # pickled, its large buffer through the ring once
    assert frame[4] == ipc.PICKLED
    (back,) = ipc.FrameReader(arena).feed(frame)
    _same(message, back)
    assert arena.head - head < 2 * big.nbytes


def test_large_tensors_are_read_in_place_and_their_space_returns_when_dropped(arena):
    """The receiver's arrays view the ring; the sender gets the space back once the oldest
    array still alive goes, whatever order they are dropped in."""
    chunk = ipc.SHM_THRESHOLD  # bytes per tensor
    frames = [ipc.encode(Respond(i, WireResponse([("T", "UINT8", np.full(chunk, i, np.uint8))], {}), False), arena)
              for i in range(3)]
    reader = ipc.FrameReader(arena)
    arrays = [reader.feed(f)[0].response.outputs[0][2] for f in frames]
    everything = shared_ring.ARENA_SIZE
    assert arena.free() == everything - 3 * chunk
    view = arrays[0][10:]  # a view of a view keeps the ring space too
    del arrays[1]  # the middle one first: nothing can be reused yet
    assert arena.free() == everything - 3 * chunk
    arrays[0][:] = 7  # writable, like any array the model gets
    del arrays[0]
    assert arena.free() == everything - 3 * chunk  # `view` still reads the first
    assert int(view[0]) == 7
    del view
    assert arena.free() == everything - chunk
    arrays.clear()
    assert arena.free() == everything


def test_no_buffer_is_overwritten_while_held_whatever_the_sizes_and_release_order(arena):
    """Random sizes (up to a quarter of the ring), random drop order: every array still held
    keeps its values; what does not fit goes through a file of its own."""
    rng = np.random.default_rng(7)
    reader = ipc.FrameReader(arena)
    held: list[tuple[int, np.ndarray]] = []
    for i in range(400):
        size = int(rng.choice([ipc.SHM_THRESHOLD, 700_000, 3_000_000, shared_ring.ARENA_SIZE // 5]))
        frame = ipc.encode(Respond(i, WireResponse([("T", "UINT8", np.full(size, i % 251, np.uint8))], {}), False), arena)
        held.append((i, reader.feed(frame)[0].response.outputs[0][2]))
        while held and rng.random() < 0.45:
            held.pop(int(rng.integers(len(held))))
        for value, array in held:
            assert int(array[0]) == value % 251 and int(array[-1]) == value % 251
    held.clear()
    array = None  # the loop's last one
    assert arena.free() == shared_ring.ARENA_SIZE


def test_an_empty_ring_starts_over_at_its_beginning(arena):
    """Nothing held: the next buffer goes where the last one went (memory still in the caches),
    not on through the whole ring; something held: it goes after it."""
    reader = ipc.FrameReader(arena)
    chunk = np.full(ipc.SHM_THRESHOLD, 5, np.uint8)

    def position_of_next() -> tuple[int, np.ndarray]:
        head = arena.head
        (message,) = reader.feed(ipc.encode(Respond(1, WireResponse([("T", "UINT8", chunk)], {}), False), arena))
        return (arena.head - chunk.nbytes) % shared_ring.ARENA_SIZE if arena.head > head else -1, message.response.outputs[0][2]

    first, array = position_of_next()
    del array
    again, array = position_of_next()
    assert again == first == 0
    held, other = position_of_next()
    assert held == chunk.nbytes  # the first is still held: this one goes after it
    np.testing.assert_array_equal(array, chunk)


def test_an_empty_ring_starts_over_for_a_buffer_larger_than_where_it_stood(arena):
    """Starting over frees the whole ring, whatever the next buffer's size. Measured from
    where the ring had stood, a buffer larger than that position did not fit: it went through
    a file, and the ring took itself for started over without being so, after which buffers
    were written over ones still held."""
    reader = ipc.FrameReader(arena)
    small = np.full(ipc.SHM_THRESHOLD, 1, np.uint8)
    (message,) = reader.feed(ipc.encode(Respond(1, WireResponse([("T", "UINT8", small)], {}), False), arena))
    del message
    gc.collect()  # released: the ring is empty, standing at the small buffer's end
    large = np.full(8 * ipc.SHM_THRESHOLD, 2, np.uint8)
    head = arena.head
    (held,) = reader.feed(ipc.encode(Respond(2, WireResponse([("T", "UINT8", large)], {}), False), arena))
    assert arena.head > head, "the larger buffer missed the ring"
    assert (arena.head - large.nbytes) % shared_ring.ARENA_SIZE == 0  # at the ring's start again
    for value in range(3, 40):  # what follows goes after it, never over it
        chunk = np.full(ipc.SHM_THRESHOLD * (1 + value % 5), value, np.uint8)
        (message,) = reader.feed(ipc.encode(Respond(value, WireResponse([("T", "UINT8", chunk)], {}), False), arena))
        del message
        np.testing.assert_array_equal(held.response.outputs[0][2], large)


def test_a_message_packed_then_pickled_leaves_the_ring_as_one_put_would(arena):
    """A message that packing refuses after its tensor went into the ring is pickled instead,
    its tensor put again: the ring must forget the first put whole, start over included, or
    later buffers are written over the held one."""
    reader = ipc.FrameReader(arena)
    (message,) = reader.feed(ipc.encode(Respond(1, WireResponse([("T", "UINT8", np.ones(ipc.SHM_THRESHOLD, np.uint8))], {}), False), arena))
    del message
    gc.collect()  # the ring is empty, not at its start: the next put starts it over
    big = np.full(4 * ipc.SHM_THRESHOLD, 9, np.uint8)
    refused = Execute(1, [_request(1, ("BIG", "UINT8", big)), _request(2, ("S", "BYTES", np.array(["x"], np.object_)))])
    frame = ipc.encode(refused, arena)
    assert frame[4] == ipc.PICKLED
    reader.feed(frame)  # a pickled message's tensors are copied out, their space released
    (held,) = reader.feed(ipc.encode(Respond(2, WireResponse([("T", "UINT8", big)], {}), False), arena))
    chunk = np.full(4 << 20, 3, np.uint8)
    for _ in range(2 * shared_ring.ARENA_SIZE // chunk.nbytes):  # round the ring twice while it is held
        (message,) = reader.feed(ipc.encode(Respond(3, WireResponse([("T", "UINT8", chunk)], {}), False), arena))
        del message
        np.testing.assert_array_equal(held.response.outputs[0][2], big)

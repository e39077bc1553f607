"""Outputs a model returns from its own inputs go back as "echoes": the server reads them in
the ring it wrote them to, which stays pinned under them. Both ends of both rings live in this
process here; the channel's own code does each side's part."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from openinfer.backends.python import ipc
from openinfer.backends.python import ring as shared_ring
from openinfer.backends.python.wire import Execute, Executed, WireRequest, WireResponse

N = ipc.SHM_THRESHOLD // 4  # FP32 elements: the smallest tensor that goes through the ring


@pytest.fixture
def rings():
    """(server's to-worker ring, the worker's view of it, worker's from-worker ring, the server's view)."""
    to_worker, from_worker = shared_ring.Arena.create(ipc.shm_prefix()), shared_ring.Arena.create(ipc.shm_prefix())
    inbound, outbound = shared_ring.Arena(to_worker.name), shared_ring.Arena(from_worker.name)
    yield to_worker, inbound, outbound, from_worker
    for ring in (inbound, outbound, to_worker, from_worker):
        ring.close(unlink=ring in (to_worker, from_worker))


def send_batch(ring: shared_ring.Arena, batch: int, values: np.ndarray) -> bytes:
    """The server's side of `WorkerProcess.send_batch`: encode, then pin what the batch wrote."""
    start = ring.head
    request = WireRequest(1, "m", "", "", [("IN", "FP32", values)], ["OUT"], {}, 0, 0, 0)
    frame = ipc.encode(Execute(batch, [request]), ring)
    ring.pin(batch, start)
    return frame


def test_an_input_returned_as_output_is_not_copied_and_reads_what_the_model_wrote(rings):
    to_worker, inbound, outbound, from_worker = rings
    original = np.arange(2 * N, dtype=np.float32).reshape(1, -1)
    frame = send_batch(to_worker, 7, original)

    # worker: the model doubles its input in place and answers with it, a slice of it, and a copy
    (message,) = ipc.FrameReader(inbound).feed(frame)
    x = message.requests[0].inputs[0][2]
    x *= 2
    echo = shared_ring.echo_finder(7, [x], inbound)
    head = outbound.head
    answer = ipc.encode(Executed(7, [WireResponse([("OUT", "FP32", x), ("HALF", "FP32", x[:, N:]),
                                                    ("COPY", "FP32", x.copy())], {})], None, []), outbound, echo)
    assert outbound.head - head == x.nbytes  # only the copy went through the return ring
    del message, x
    gc.collect()  # the worker lets go of its input: the ring space is released on its side

    # server: the answer reads where the server wrote the input
    (executed,) = ipc.FrameReader(from_worker, sent=to_worker).feed(answer)
    to_worker.unpin(7)  # `batch_answered`: the outputs hold their own pins now
    outputs = {name: array for name, _, array in executed.responses[0].outputs}
    np.testing.assert_array_equal(outputs["OUT"], original * 2)
    np.testing.assert_array_equal(outputs["HALF"], original[:, N:] * 2)
    np.testing.assert_array_equal(outputs["COPY"], original * 2)

    # However much the server sends meanwhile, it never writes over an echo still held.
    held = shared_ring.ARENA_SIZE - to_worker.free()
    assert held > 0
    for _ in range(3 * shared_ring.ARENA_SIZE // (4 * N)):
        frame = ipc.encode(Execute(8, [WireRequest(2, "m", "", "", [("IN", "FP32", np.full((1, N), -1, np.float32))],
                                                   [], {}, 0, 0, 0)]), to_worker)
        for _, _, array in ipc.FrameReader(inbound).feed(frame)[0].requests[0].inputs:
            del array  # the worker takes each and lets it go at once
    np.testing.assert_array_equal(outputs["OUT"], original * 2)
    np.testing.assert_array_equal(outputs["HALF"], original[:, N:] * 2)
    outputs.clear()
    executed = None
    gc.collect()
    assert to_worker.free() == shared_ring.ARENA_SIZE


def test_only_the_batchs_own_inputs_are_echoed(rings):
    to_worker, inbound, outbound, from_worker = rings
    frame = send_batch(to_worker, 1, np.ones((1, N), np.float32))
    (message,) = ipc.FrameReader(inbound).feed(frame)
    x = message.requests[0].inputs[0][2]
    assert shared_ring.echo_finder(1, [x], inbound)(x) == f"^1:{x.__array_interface__['data'][0] - inbound.address}"
    assert shared_ring.echo_finder(2, [], inbound)(x) is None  # another batch's answer copies it
    assert shared_ring.echo_finder(1, [x], inbound)(np.ones((1, N), np.float32)) is None  # not in the ring
    assert shared_ring.echo_finder(1, [x], inbound)(x.reshape(2, -1).T) is None  # not contiguous: copied


def test_an_echo_of_a_batch_no_longer_pinned_is_refused(rings):
    to_worker, inbound, outbound, from_worker = rings
    frame = send_batch(to_worker, 3, np.ones((1, N), np.float32))
    (message,) = ipc.FrameReader(inbound).feed(frame)
    x = message.requests[0].inputs[0][2]
    answer = ipc.encode(Executed(3, [WireResponse([("OUT", "FP32", x)], {})], None, []), outbound,
                        shared_ring.echo_finder(3, [x], inbound))
    to_worker.unpin(3)
    with pytest.raises(EOFError, match="no longer held"):
        ipc.FrameReader(from_worker, sent=to_worker).feed(answer)


def round_trip(rings, batch: int, values: np.ndarray) -> np.ndarray:
    """One identity batch through both rings, as the server and worker run it; the output
    the server reads (an echo, pinned for as long as it is held)."""
    to_worker, inbound, outbound, from_worker = rings
    (message,) = ipc.FrameReader(inbound).feed(send_batch(to_worker, batch, values))
    x = message.requests[0].inputs[0][2]
    answer = ipc.encode(Executed(batch, [WireResponse([("OUT", "FP32", x)], {})], None, []), outbound,
                        shared_ring.echo_finder(batch, [x], inbound))
    del message, x
    (executed,) = ipc.FrameReader(from_worker, sent=to_worker).feed(answer)
    to_worker.unpin(batch)
    return executed.responses[0].outputs[0][2]


def test_answers_held_until_the_next_request_never_push_inputs_out_of_the_ring(rings):
    """A server at concurrency 1 still holds one answer while it sends the next request. A
    batch that found the ring empty starts over at its start, and its pin must start there
    too: pinned from where the ring had been, it held a whole lap, and from then on every
    input went through a file of its own."""
    to_worker = rings[0]
    values = np.arange(4 * N, dtype=np.float32).reshape(1, -1)
    held = None
    for batch in range(shared_ring.ARENA_SIZE // values.nbytes + 8):  # more than a lap
        if batch % 2:
            held = None  # nothing is held: this input starts the ring over
            assert to_worker.free() == shared_ring.ARENA_SIZE
        head = to_worker.head
        held = round_trip(rings, batch, values)  # the previous answer goes as this one is kept
        assert to_worker.head > head, f"batch {batch}'s input missed the ring"
        np.testing.assert_array_equal(held, values)


@pytest.mark.parametrize("seed", range(8))
def test_held_and_pinned_buffers_keep_their_bytes_whatever_the_order(monkeypatch, seed):
    """Batches of several inputs, released by the receiver in any order, answered with echoes
    of some of them that the sender drops in any order, in a small ring that fills, empties
    and starts over: every buffer still held or echoed reads what was written into it."""
    monkeypatch.setattr(shared_ring, "ARENA_SIZE", 1 << 20)
    sender = shared_ring.Arena.create(ipc.shm_prefix())
    receiver = shared_ring.Arena(sender.name)
    sender.unlink()
    rng = np.random.default_rng(seed)
    sizes = [64, 4096, 30_000, shared_ring.ARENA_SIZE // 8, shared_ring.ARENA_SIZE // 4 - 64, shared_ring.ARENA_SIZE // 5]
    held: list[tuple[memoryview, list, int]] = []  # the receiver's, with the byte written
    echoed: list[tuple[memoryview, object, int]] = []  # the sender's
    unanswered: dict[int, list[tuple[str, int, int]]] = {}
    lapped = 0
    for batch in range(1, 20_000):
        choice = rng.random()
        if choice < 0.35:
            head, items = sender.head, []
            for index in range(int(rng.integers(1, 4))):
                size, fill = int(rng.choice(sizes)), (batch * 3 + index) % 251 + 1
                descriptor = sender.put(memoryview(bytes([fill]) * size))
                if descriptor is not None:
                    items.append((descriptor, size, fill))
                    held.append((*receiver.take_view(descriptor, size), fill))
            if sender.head != head:
                sender.pin(batch, head)
            lapped = max(lapped, sender.head // shared_ring.ARENA_SIZE)
            unanswered[batch] = items
        elif choice < 0.6 and held:
            view, span, fill = held.pop(int(rng.integers(len(held))))
            intact = bytes(view).count(fill) == len(view)
            assert intact, f"batch {batch}: a buffer the receiver held was written over"
            view.release()
            receiver.release(span)
        elif choice < 0.8 and unanswered:
            answered = list(unanswered)[int(rng.integers(len(unanswered)))]
            for descriptor, size, fill in unanswered.pop(answered):
                if rng.random() < 0.5:
                    position = int(descriptor[1:].split(":")[0])
                    echoed.append((*sender.echo_view(answered, position, size), fill))
            sender.unpin(answered)
        elif echoed:
            view, key, fill = echoed.pop(int(rng.integers(len(echoed))))
            intact = bytes(view).count(fill) == len(view)
            assert intact, f"batch {batch}: an echoed buffer was written over"
            sender.unpin(key)
    assert lapped > 20  # the ring went round, and started over, many times
    for view, *_ in held + echoed:
        view.release()
    receiver.close()
    sender.close()

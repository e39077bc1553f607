"""The process's load, as the crossing to a worker reads it: which side may poll."""

from __future__ import annotations

import pytest

from openinfer.core import load
from openinfer.core.protocols import Protocol


def test_with_nothing_overlapping_both_sides_may_poll():
    state = load.Load()
    assert state.who_polls() == (True, True)
    state.entered(1, Protocol.GRPC)  # one request at a time is no load
    state.entered(1, Protocol.HTTP)
    assert state.who_polls() == (True, True)


@pytest.mark.parametrize("protocol", [Protocol.HTTP, None], ids=["http", "in-process"])
def test_requests_the_loop_carries_keep_the_loop_polling_and_put_the_worker_to_sleep(protocol):
    state = load.Load()
    state.entered(2, protocol)
    assert state.who_polls() == (True, False)


def test_grpc_calls_in_flight_together_keep_the_worker_polling_and_the_loop_asleep():
    state = load.Load()
    state.entered(3, Protocol.GRPC)
    assert state.who_polls() == (False, True)
    state.entered(4, Protocol.HTTP)  # gRPC's threads still need the CPU while its calls overlap
    assert state.who_polls() == (False, True)


def test_once_requests_stop_overlapping_both_sides_poll_again(monkeypatch):
    monkeypatch.setattr(load, "OVERLAP_WINDOW_NS", 0)  # the window has passed as soon as it opens
    state = load.Load()
    state.entered(16, Protocol.GRPC)
    assert state.who_polls() == (True, True)

"""The process's load, as the crossing to a worker reads it: whether requests overlap."""

from __future__ import annotations

from openinfer.core.scheduling import overlap


def test_one_request_at_a_time_is_no_load():
    state = overlap.Load()
    assert not state.concurrent()
    for _ in range(100):
        state.entered(1)
    assert not state.concurrent()


def test_two_requests_in_flight_together_are_concurrent_load():
    state = overlap.Load()
    state.entered(2)
    assert state.concurrent()


def test_once_requests_stop_overlapping_the_load_is_over(monkeypatch):
    monkeypatch.setattr(overlap, "OVERLAP_WINDOW_NS", 0)  # the window has passed as soon as it opens
    state = overlap.Load()
    state.entered(16)
    assert not state.concurrent()

"""Backoff with jitter and the circuit breaker's state machine."""

from __future__ import annotations

import pytest

from openinfer.integrations.flink import TritonCircuitBreakerOpenError
from openinfer.integrations.flink.resilience import CircuitBreaker, jittered, nominal_backoff


def test_exponential_backoff_is_capped() -> None:
    assert [nominal_backoff(a, 0.1, 30) for a in range(4)] == [0.1, 0.2, 0.4, 0.8]
    assert nominal_backoff(20, 0.1, 30) == 30
    assert nominal_backoff(10_000, 0.1, 5) == 5


def test_equal_jitter_stays_in_the_upper_half() -> None:
    samples = [jittered(0.8) for _ in range(500)]
    assert all(0.4 <= s <= 0.8 for s in samples) and len(set(samples)) > 1
    assert jittered(0.001) == 0.001
    assert jittered(1.0, lambda low, high: low) == 0.5


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def breaker(clock: Clock) -> CircuitBreaker:
    return CircuitBreaker("http://h", 0.5, 60.0, 2, clock=clock)


def test_opens_only_after_ten_requests_at_the_threshold() -> None:
    b = breaker(Clock())
    for _ in range(9):
        b.record_failure()
    assert b.state == b.CLOSED
    b.record_failure()
    assert b.state == b.OPEN
    with pytest.raises(TritonCircuitBreakerOpenError, match="OPEN"):
        b.before_request()


def test_stays_closed_below_the_threshold() -> None:
    b = breaker(Clock())
    for _ in range(6):
        b.record_success()
    for _ in range(5):
        b.record_failure()
    assert b.state == b.CLOSED


def test_half_open_probes_then_closes() -> None:
    clock = Clock()
    b = breaker(clock)
    for _ in range(10):
        b.record_failure()
    clock.now = 61
    b.before_request()
    assert b.state == b.HALF_OPEN
    b.before_request()
    with pytest.raises(TritonCircuitBreakerOpenError, match="HALF_OPEN"):
        b.before_request()
    b.record_success()
    b.record_success()
    assert b.state == b.CLOSED
    b.before_request()


def test_a_failed_probe_reopens() -> None:
    clock = Clock()
    b = breaker(clock)
    for _ in range(10):
        b.record_failure()
    clock.now = 61
    b.before_request()
    b.record_failure()
    assert b.state == b.OPEN
    with pytest.raises(TritonCircuitBreakerOpenError):
        b.before_request()

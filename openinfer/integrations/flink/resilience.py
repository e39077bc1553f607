"""Retry backoff, circuit breaker and health checker, with the provider's semantics.

* Backoff: `initial * 2**attempt`, capped at `retry-max-backoff`, then "equal jitter": a uniform
  delay in `[d/2, d]`, so parallel retries do not hit a recovering server at the same instant.
* Breaker: CLOSED -> OPEN when at least 10 requests were seen and the failure rate reaches the
  threshold; OPEN -> HALF_OPEN after `circuit-breaker-timeout`; HALF_OPEN lets through
  `half-open-requests` probes, closes after that many successes, reopens on any failure.
* Health checker: a daemon thread polling `/v2/health/live` (then `/ready`); failures feed the
  breaker. It uses blocking stdlib HTTP so it runs whatever the UDF's execution mode.
"""

from __future__ import annotations

import logging
import random
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable

from openinfer.integrations.flink.errors import TritonCircuitBreakerOpenError

log = logging.getLogger(__name__)

_MIN_REQUESTS = 10
_MAX_CLOSED_REQUESTS = 10_000


def nominal_backoff(attempt: int, initial: float, cap: float) -> float:
    """Delay before retry number `attempt + 1` (0-based attempt), without jitter."""
    return float(min(initial * (2 ** min(max(attempt, 0), 30)), cap))


def jittered(delay: float, rng: Callable[[float, float], float] = random.uniform) -> float:
    """Equal jitter: uniform in `[delay / 2, delay]`; delays of 1 ms or less pass through."""
    if delay <= 0.001:
        return delay
    return float(rng(delay / 2, delay))


class CircuitBreaker:
    """Thread-safe three-state breaker shared by one function instance's requests."""

    CLOSED, OPEN, HALF_OPEN = "CLOSED", "OPEN", "HALF_OPEN"

    def __init__(
        self,
        endpoint: str,
        failure_threshold: float,
        open_seconds: float,
        half_open_requests: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.endpoint = endpoint
        self.failure_threshold = failure_threshold
        self.open_seconds = open_seconds
        self.half_open_requests = half_open_requests
        self._clock = clock
        self._lock = threading.Lock()
        self.state = self.CLOSED
        self._since = clock()
        self._total = self._failed = 0
        self._probes = self._probe_successes = 0

    def before_request(self) -> None:
        """Raise `TritonCircuitBreakerOpenError` unless a request may go out now."""
        with self._lock:
            if self.state == self.CLOSED:
                return
            if self.state == self.OPEN:
                remaining = self.open_seconds - (self._clock() - self._since)
                if remaining <= 0:
                    self._enter(self.HALF_OPEN)
                    self._probes = 1
                    return
                raise TritonCircuitBreakerOpenError(
                    f"Circuit breaker is OPEN for endpoint {self.endpoint}. Server is considered "
                    f"unhealthy. Will retry in {int(remaining)} seconds."
                )
            if self._probes >= self.half_open_requests:
                raise TritonCircuitBreakerOpenError(
                    f"Circuit breaker is HALF_OPEN for endpoint {self.endpoint}. Maximum test "
                    f"requests ({self.half_open_requests}) reached. Please retry later."
                )
            self._probes += 1

    def record_success(self) -> None:
        with self._lock:
            if self.state == self.CLOSED:
                self._count(failed=False)
            elif self.state == self.HALF_OPEN:
                self._probe_successes += 1
                if self._probe_successes >= self.half_open_requests:
                    self._enter(self.CLOSED)

    def record_failure(self) -> None:
        with self._lock:
            if self.state == self.CLOSED:
                self._count(failed=True)
            elif self.state == self.HALF_OPEN:
                self._enter(self.OPEN)

    def _count(self, *, failed: bool) -> None:
        self._total += 1
        self._failed += int(failed)
        if self._total >= _MIN_REQUESTS and self._failed / self._total >= self.failure_threshold:
            log.warning(
                "circuit breaker opening for %s: %d/%d failed",
                self.endpoint,
                self._failed,
                self._total,
            )
            self._enter(self.OPEN)
        elif self._total >= _MAX_CLOSED_REQUESTS:
            self._total = self._failed = 0

    def _enter(self, state: str) -> None:
        self.state = state
        self._since = self._clock()
        self._total = self._failed = 0
        self._probes = self._probe_successes = 0


class HealthChecker:
    """Polls the server's health endpoints on a daemon thread and reports to a breaker."""

    def __init__(
        self,
        urls: tuple[str, ...],
        interval: float,
        breaker: CircuitBreaker | None,
        headers: dict[str, str] | None = None,
        timeout: float = 5.0,
    ) -> None:
        self.urls = urls
        self.interval = interval
        self.breaker = breaker
        self.headers = headers or {}
        self.timeout = timeout
        self.healthy = True
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def check_now(self) -> bool:
        """One synchronous check: liveness first, readiness as a fallback."""
        for url in self.urls:
            request = urllib.request.Request(url, headers=self.headers, method="GET")
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    if 200 <= response.status < 300:
                        self.healthy = True
                        return True
            except (urllib.error.URLError, OSError, ValueError):
                continue
        self.healthy = False
        return False

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name=f"triton-health-{self.urls[0]}", daemon=True
            )
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            healthy = self.check_now()
            if self.breaker is None:
                if not healthy:
                    log.warning("health check failed for %s", self.urls[0])
                continue
            if healthy:
                if self.breaker.state == CircuitBreaker.HALF_OPEN:
                    self.breaker.record_success()
            else:
                self.breaker.record_failure()

    def close(self) -> None:
        self._stop.set()

"""Calls one model for rows or batches, with the provider's failure rules.

* 4xx, unparseable responses and requests that cannot be built fail fast (no retry).
* 5xx, network errors and timeouts are retried `max-retries` times with jittered exponential
  backoff.
* After the final failure the row gets `default-value` when one is configured; otherwise the
  error propagates and fails the Flink job with the server's message.
* The optional circuit breaker counts one logical request once, whatever its attempts.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar
from urllib.parse import urlsplit

from openinfer.integrations.flink.errors import (
    TritonCircuitBreakerOpenError,
    TritonClientError,
    TritonError,
    counts_against_breaker,
    is_retryable,
)
from openinfer.integrations.flink.http import HttpPool
from openinfer.integrations.flink.resilience import (
    CircuitBreaker,
    HealthChecker,
    jittered,
    nominal_backoff,
)
from openinfer.integrations.flink.spec import TritonModelSpec
from openinfer.integrations.flink.types import empty_result
from openinfer.integrations.flink.wire import (
    MISSING,
    batch_request,
    config_url,
    encode_body,
    error_for_status,
    health_urls,
    infer_url,
    parse_batch_response,
    parse_row_response,
    request_headers,
    row_request,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

#: Batch requests of one Arrow batch that may be in flight at once.
MAX_CONCURRENT_BATCH_REQUESTS = 8
_UNKNOWN = -1


class TritonModelClient:
    """One model's client inside one function instance (one Flink subtask)."""

    def __init__(self, spec: TritonModelSpec, *, subtask_index: int = 0) -> None:
        self.spec = spec
        self.subtask_index = subtask_index
        options = spec.options
        url = urlsplit(infer_url(spec))
        self._origin = f"{url.scheme}://{url.netloc.rpartition('@')[2]}"
        self._infer_target = url.path
        self._config_target = urlsplit(config_url(spec)).path
        self._headers = request_headers(spec)
        self._pool: HttpPool | None = None
        self._counter = itertools.count()
        self._max_batch_size: int | None = options.batch_size
        self._warned_unbatched = False
        self.breaker = (
            CircuitBreaker(
                options.endpoint,
                options.circuit_breaker_failure_threshold,
                options.circuit_breaker_timeout,
                options.circuit_breaker_half_open_requests,
            )
            if options.circuit_breaker_enabled
            else None
        )
        self.health = (
            HealthChecker(
                health_urls(options.endpoint),
                options.health_check_interval,
                self.breaker,
                headers=self._plain_headers(),
            )
            if options.health_check_enabled
            else None
        )

    # -- lifecycle -------------------------------------------------------------------------

    def open(self) -> None:
        if self.health is not None:
            if not self.health.check_now():
                log.warning(
                    "initial health check failed for %s; requests may fail until it recovers",
                    self.spec.options.endpoint,
                )
            self.health.start()

    def close(self) -> None:
        if self.health is not None:
            self.health.close()
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    # -- public calls ----------------------------------------------------------------------

    async def predict(self, value: Any) -> Any:
        """The output column's value for one row (one request, the provider's format)."""
        try:
            result = await self._call(
                lambda: row_request(self.spec, value, self._sequence_id()),
                lambda body: parse_row_response(self.spec, body),
            )
        except TritonError as error:
            return self._fallback(error)
        return self._missing_to_empty(result)

    async def predict_batch(self, values: Sequence[Any]) -> list[Any]:
        """Output values for many rows, stacked into as few requests as the model allows.

        Rows the server could not take in a stacked tensor (NULL values, NULL elements, arrays
        of a different length) are grouped or sent on their own, so every row gets exactly the
        answer it would get in row mode.
        """
        results: list[Any] = [None] * len(values)
        limit = await self._batch_limit()
        singles, groups = self._partition(values, limit)
        semaphore = asyncio.Semaphore(MAX_CONCURRENT_BATCH_REQUESTS)

        async def run_single(index: int) -> None:
            async with semaphore:
                results[index] = await self.predict(values[index])

        async def run_group(indices: list[int]) -> None:
            rows = [values[i] for i in indices]
            async with semaphore:
                try:
                    outputs = await self._call(
                        lambda: batch_request(self.spec, rows, self._sequence_id()),
                        lambda body: parse_batch_response(self.spec, body, len(rows)),
                    )
                except TritonError as error:
                    outputs = [self._fallback(error)] * len(rows)
            for index, output in zip(indices, outputs):
                results[index] = self._missing_to_empty(output)

        await asyncio.gather(*map(run_single, singles), *map(run_group, groups))
        return results

    # -- internals -------------------------------------------------------------------------

    def _partition(
        self, values: Sequence[Any], limit: int | None
    ) -> tuple[list[int], list[list[int]]]:
        if limit == 0:
            return list(range(len(values))), []
        singles: list[int] = []
        by_width: dict[int, list[int]] = {}
        for index, value in enumerate(values):
            if value is None or (self.spec.input_type.is_array and any(v is None for v in value)):
                singles.append(index)
            else:
                width = len(value) if self.spec.input_type.is_array else 1
                by_width.setdefault(width, []).append(index)
        step = limit if limit and limit > 0 else max(len(values), 1)
        groups = [
            indices[start : start + step]
            for indices in by_width.values()
            for start in range(0, len(indices), step)
        ]
        return singles, groups

    async def _batch_limit(self) -> int | None:
        """Rows per request: `batch-size`, else the model's `max_batch_size` (0: one row per
        request), else unlimited when the server does not say."""
        if self._max_batch_size is None:
            self._max_batch_size = await self._discover_max_batch_size()
        if self._max_batch_size == 0 and not self._warned_unbatched:
            self._warned_unbatched = True
            log.warning(
                "model '%s' has max_batch_size 0: pandas mode sends one request per row",
                self.spec.options.model_name,
            )
        return None if self._max_batch_size == _UNKNOWN else self._max_batch_size

    async def _discover_max_batch_size(self) -> int:
        try:
            response = await self._pool_here().request(
                "GET", self._config_target, self._plain_headers_list(), None,
                self.spec.options.timeout,
            )  # fmt: skip
            if response.status == 200:
                value = json.loads(response.body).get("max_batch_size", 0)
                return int(value)
        except (TritonError, ValueError, AttributeError):
            pass
        return _UNKNOWN

    async def _call(self, build: Callable[[], dict[str, Any]], parse: Callable[[bytes], T]) -> T:
        """One logical request: breaker check, attempts with backoff, breaker accounting."""
        options = self.spec.options
        attempt = 0
        while True:
            try:
                if self.breaker is not None:
                    self.breaker.before_request()
                body = self._encode(build)
                response = await self._pool_here().request(
                    "POST", self._infer_target, self._headers, body, options.timeout
                )
                if not 200 <= response.status < 300:
                    raise error_for_status(self.spec, response.status, response.body)
                result = parse(response.body)
            except TritonCircuitBreakerOpenError:
                if attempt > 0 and self.breaker is not None:
                    self.breaker.record_failure()
                raise
            except TritonError as error:
                if is_retryable(error) and attempt < options.max_retries:
                    delay = jittered(
                        nominal_backoff(
                            attempt, options.retry_initial_backoff, options.retry_max_backoff
                        )
                    )
                    log.info(
                        "retrying '%s' (attempt %d/%d) in %.3fs: %s",
                        options.model_name, attempt + 2, options.max_retries + 1, delay,
                        str(error).splitlines()[0],
                    )  # fmt: skip
                    await asyncio.sleep(delay)
                    attempt += 1
                    continue
                if self.breaker is not None and (counts_against_breaker(error) or attempt > 0):
                    self.breaker.record_failure()
                raise
            if self.breaker is not None:
                self.breaker.record_success()
            return result

    def _encode(self, build: Callable[[], dict[str, Any]]) -> bytes:
        try:
            return encode_body(self.spec, build())
        except (TypeError, ValueError, OverflowError) as exc:
            raise TritonClientError(
                f"Failed to build the request for model '{self.spec.name}' from a "
                f"{self.spec.input_type.text} value: {exc}"
            ) from exc

    def _fallback(self, error: TritonError) -> Any:
        if self.spec.has_default:
            log.warning(
                "inference for '%s' failed; returning default-value: %s",
                self.spec.name,
                str(error).splitlines()[0],
            )
            return self.spec.default
        raise error

    def _missing_to_empty(self, value: Any) -> Any:
        if value is not MISSING:
            return value
        if self.spec.has_default:
            return self.spec.default
        return empty_result(self.spec.output_type)

    def _sequence_id(self) -> str | None:
        options = self.spec.options
        if options.sequence_id is None:
            return None
        if options.sequence_id_auto_increment:
            return f"{options.sequence_id}-{self.subtask_index}-{next(self._counter)}"
        return options.sequence_id

    def _pool_here(self) -> HttpPool:
        """The pool of the running loop (each PyFlink mode runs its calls on one loop)."""
        loop = asyncio.get_running_loop()
        if self._pool is None or self._pool.loop not in (None, loop):
            self._pool = HttpPool(self._origin)
        return self._pool

    def _plain_headers_list(self) -> list[tuple[str, str]]:
        return [(k, v) for k, v in self._headers if k.lower() not in _BODY_HEADERS]

    def _plain_headers(self) -> dict[str, str]:
        return dict(self._plain_headers_list())


_BODY_HEADERS = {"content-type", "content-encoding"}


def run_sync(loop: asyncio.AbstractEventLoop, call: Awaitable[T]) -> T:
    """Run a coroutine on a function instance's private loop (row and pandas modes)."""
    return loop.run_until_complete(call)

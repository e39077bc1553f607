"""Exceptions raised by the Flink integration, mirroring the `triton` model provider's tree.

```
ValueError
 └── TritonConfigError            bad WITH option, unsupported column type, bad default-value
TritonError                       anything that failed while calling the server
 ├── TritonClientError            4xx, an unparseable response, or a request we could not build
 │    └── TritonSchemaError       400 whose message mentions a shape or dimension
 ├── TritonServerError            5xx: retried with backoff
 ├── TritonNetworkError           connection refused/reset, timeouts: retried with backoff
 └── TritonCircuitBreakerOpenError  the breaker is open: failed fast, never retried
```

The split is what the retry policy keys on: only `TritonServerError` and `TritonNetworkError`
(and statuses outside 4xx/5xx) are transient.
"""

from __future__ import annotations


class TritonConfigError(ValueError):
    """A model definition that can never work: raised at registration, before any job runs."""


class TritonError(Exception):
    """Base class of every failure while calling the inference server."""

    #: HTTP status of the response that caused the failure, when there was one.
    status: int | None = None


class TritonClientError(TritonError):
    """A persistent, client-side problem (4xx, bad response JSON): retrying cannot help."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class TritonSchemaError(TritonClientError):
    """The server rejected the tensor's shape or dimensions (usually `flatten-batch-dim`)."""


class TritonServerError(TritonError):
    """The server failed (5xx); transient, so it is retried."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class TritonNetworkError(TritonError):
    """The request never got an HTTP answer: refused, reset, or timed out."""


class TritonCircuitBreakerOpenError(TritonError):
    """The circuit breaker is open, so the request was not sent."""


def is_retryable(error: BaseException) -> bool:
    """Whether the provider's policy retries this failure (5xx, network, odd statuses)."""
    if isinstance(error, (TritonServerError, TritonNetworkError)):
        return True
    if isinstance(error, TritonClientError) and error.status is not None:
        return not 400 <= error.status < 500
    return False


def counts_against_breaker(error: BaseException) -> bool:
    """Whether a final failure is a backend-health signal (5xx and network errors only)."""
    return isinstance(error, (TritonServerError, TritonNetworkError))

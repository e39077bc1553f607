"""The seam between the model API and whatever runs the model.

A worker process installs one `Host` for its whole life; the server installs one per in-process
model around each call into it. Everything in `pb_utils` that needs the server (BLS, response
senders, cancellation, metrics, model loading, logging) goes through the current host, so the
API is written once and both execution paths behave alike.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from typing import Any, Protocol

#: The phase of the model's life the current thread is in: "initialize", "execute", "finalize".
phase: contextvars.ContextVar[str] = contextvars.ContextVar("pb_utils_phase", default="execute")


class CallStream(Protocol):
    """The answers of one streaming call (a decoupled BLS request)."""

    def __iter__(self) -> Iterator[Any]: ...

    def cancel(self) -> None: ...


class Host(Protocol):
    """What the model API asks of the process that runs the model."""

    #: True where a blocking call would stall the server's own event loop.
    blocking_forbidden: bool

    def call(self, kind: str, *args: Any) -> Any:
        """A request to the server's services and its answer (see `services.ModelServices`)."""

    def stream(self, kind: str, *args: Any) -> CallStream:
        """A request whose answers arrive one by one until the last."""

    async def call_async(self, kind: str, *args: Any) -> Any:
        """`call` for an `async def execute` (answers through `await`)."""

    def send_response(self, key: int, response: Any, final: bool) -> None:
        """A response (or a flag-only final) of the request known by `key`."""

    def is_cancelled(self, key: int) -> bool: ...

    def log(self, level: int, message: str, filename: str, line: int) -> None: ...


class _Detached:
    """The host of a model imported outside any server: calls explain why they fail."""

    blocking_forbidden = False

    def _refuse(self, *_: Any) -> Any:
        from .errors import TritonModelException

        raise TritonModelException("this call needs a running server: the model is not being served")

    call = stream = send_response = _refuse

    async def call_async(self, *args: Any) -> Any:
        self._refuse()

    def is_cancelled(self, key: int) -> bool:
        return False

    def log(self, level: int, message: str, filename: str, line: int) -> None:
        print(message, flush=True)


_process_host: Host = _Detached()
_context_host: contextvars.ContextVar[Host | None] = contextvars.ContextVar("pb_utils_host", default=None)


def current() -> Host:
    host = _context_host.get()
    return _process_host if host is None else host


def install(host: Host) -> None:
    """Make `host` the process's host (a worker process does this once)."""
    global _process_host
    _process_host = host


def enter(host: Host) -> contextvars.Token:
    """Make `host` current for this context (an in-process model's call); undo with `leave`."""
    return _context_host.set(host)


def leave(token: contextvars.Token) -> None:
    _context_host.reset(token)


def require_execute(what: str = "BLS") -> None:
    """Triton allows server calls such as BLS only while `execute` runs."""
    if phase.get() != "execute":
        from .errors import TritonModelException

        raise TritonModelException(f"{what} is only supported during the 'execute' function.")

"""Response senders: how a backend hands responses back to whoever waits for a request.

A unary caller waits on a future for exactly one response; a streaming caller reads a queue
that may receive many (decoupled models). Backends see one interface and never know which.
Senders must be called on the server's event loop; thread-based backends hop there first.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

from .errors import InternalError
from .types import InferRequest, InferResponse

_DONE = object()


class ResponseSender:
    """Delivers the responses of one request; `complete()` ends it (Triton's FINAL flag)."""

    __slots__ = ("closed", "on_cancel", "request", "responses_sent")

    def __init__(self, request: InferRequest) -> None:
        self.request = request
        self.closed = False
        self.responses_sent = 0
        #: Set by a backend that can stop work it has started (the Python backend's workers).
        self.on_cancel: Callable[[], None] | None = None

    def cancel(self) -> None:
        """The caller went away: deliver nothing more and let the backend stop the work."""
        if self.closed:
            return
        self.closed = True
        hook, self.on_cancel = self.on_cancel, None
        if hook is not None:
            hook()

    def send(self, response: InferResponse | None, final: bool = True) -> None:
        if self.closed:
            return
        if response is not None:
            self.responses_sent += 1
            response.final = final
            self._deliver(response)
        if final:
            self.closed = True
            self._finish()

    def fail(self, error: Exception) -> None:
        """End the request with an error (only if it has not ended already)."""
        if self.closed:
            return
        self.closed = True
        self._fail(error)

    # Implemented by the two kinds of sender.
    def _deliver(self, response: InferResponse) -> None:
        raise NotImplementedError

    def _finish(self) -> None:
        raise NotImplementedError

    def _fail(self, error: Exception) -> None:
        raise NotImplementedError


class UnarySender(ResponseSender):
    """Exactly one response, awaited through a future."""

    __slots__ = ("future",)

    def __init__(self, request: InferRequest, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(request)
        self.future: asyncio.Future[InferResponse] = loop.create_future()

    def _deliver(self, response: InferResponse) -> None:
        if not self.future.done():
            self.future.set_result(response)

    def _finish(self) -> None:
        if not self.future.done():
            self.future.set_exception(
                InternalError(
                    f"model '{self.request.model_name}' completed the request without a response"
                )
            )

    def _fail(self, error: Exception) -> None:
        if not self.future.done():
            self.future.set_exception(error)


class StreamSender(ResponseSender):
    """Any number of responses, read in order through `__aiter__`."""

    __slots__ = ("queue",)

    def __init__(self, request: InferRequest) -> None:
        super().__init__(request)
        self.queue: asyncio.Queue[object] = asyncio.Queue()

    def _deliver(self, response: InferResponse) -> None:
        self.queue.put_nowait(response)

    def _finish(self) -> None:
        self.queue.put_nowait(_DONE)

    def _fail(self, error: Exception) -> None:
        self.queue.put_nowait(error)
        self.queue.put_nowait(_DONE)

    async def __aiter__(self) -> AsyncIterator[InferResponse]:
        while True:
            item = await self.queue.get()
            if item is _DONE:
                return
            if isinstance(item, Exception):
                raise item
            yield item  # type: ignore[misc]

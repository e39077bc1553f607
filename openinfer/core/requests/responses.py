"""Response senders: how a backend hands responses back to whoever waits for a request.

A unary caller waits on a future for exactly one response; a streaming caller reads a queue
that may receive many (decoupled models). Backends see one interface and never know which.
Senders must be called on the server's event loop; thread-based backends hop there first.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterator, Callable

from ..errors import InternalError
from ..types import InferRequest, InferResponse

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


class NullSender(ResponseSender):
    """The sender of a null request (a sequence slot without a request, READY false): nobody
    waits for its answer, so whatever the model says of it is dropped."""

    __slots__ = ()

    def _deliver(self, response: InferResponse) -> None:
        pass

    def _finish(self) -> None:
        pass

    def _fail(self, error: Exception) -> None:
        pass


class UnarySender(ResponseSender):
    """Exactly one response. A caller that finds it already delivered (a model that answered
    while being scheduled) takes it as is; otherwise it waits on `future`, made on demand."""

    __slots__ = ("result", "error", "_future")

    def __init__(self, request: InferRequest) -> None:
        super().__init__(request)
        self.result: InferResponse | None = None
        self.error: Exception | None = None
        self._future: asyncio.Future[InferResponse] | None = None

    @property
    def future(self) -> asyncio.Future[InferResponse]:
        """A future of the response, settled already if it has arrived."""
        future = self._future
        if future is None:
            future = self._future = asyncio.get_running_loop().create_future()
            if self.error is not None:
                future.set_exception(self.error)
            elif self.result is not None:
                future.set_result(self.result)
        return future

    def _settle(self, result: InferResponse | None, error: Exception | None) -> None:
        if self.result is not None or self.error is not None:
            return
        self.result, self.error = result, error
        future = self._future
        if future is not None and not future.done():
            if error is not None:
                future.set_exception(error)
            elif result is not None:
                future.set_result(result)

    def _deliver(self, response: InferResponse) -> None:
        self._settle(response, None)

    def _finish(self) -> None:
        if self.result is None and self.error is None:
            self._settle(
                None,
                InternalError(f"model '{self.request.model_name}' completed the request without a response"),
            )

    def _fail(self, error: Exception) -> None:
        self._settle(None, error)


class StreamSender(ResponseSender):
    """Any number of responses, read in order through `__aiter__` by one reader.

    A deque and the reader's one waiting future rather than an `asyncio.Queue`: this runs once
    per streamed token, and the queue's getter bookkeeping cost more than the delivery."""

    __slots__ = ("_items", "_waiter")

    def __init__(self, request: InferRequest) -> None:
        super().__init__(request)
        self._items: collections.deque[object] = collections.deque()
        self._waiter: asyncio.Future[None] | None = None

    def _put(self, item: object) -> None:
        self._items.append(item)
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    def _deliver(self, response: InferResponse) -> None:
        self._put(response)

    def _finish(self) -> None:
        self._put(_DONE)

    def _fail(self, error: Exception) -> None:
        self._items.append(error)
        self._put(_DONE)

    async def __aiter__(self) -> AsyncIterator[InferResponse]:
        items = self._items
        while True:
            if not items:
                waiter = self._waiter = asyncio.get_running_loop().create_future()
                try:
                    await waiter
                finally:
                    self._waiter = None
                continue
            item = items.popleft()
            if item is _DONE:
                return
            if isinstance(item, Exception):
                raise item
            yield item  # type: ignore[misc]

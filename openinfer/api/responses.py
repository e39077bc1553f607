"""Responses as numpy arrays, and the iterators that carry a decoupled model's stream."""

from __future__ import annotations

import asyncio
import queue
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.types import InferResponse


@dataclass
class InferenceResponse:
    """One response: `outputs` maps each output's name to its numpy array (BYTES as `bytes` objects)."""

    model_name: str
    model_version: str
    id: str = ""
    outputs: dict[str, np.ndarray] = field(default_factory=dict)
    parameters: dict[str, Any] = field(default_factory=dict)
    #: False for each response of a decoupled stream but the last.
    final: bool = True

    @classmethod
    def of(cls, response: InferResponse) -> InferenceResponse:
        if response.error is not None:
            raise response.error
        return cls(
            model_name=response.model_name,
            model_version=response.model_version,
            id=response.id,
            outputs={t.name: t.data for t in response.outputs if t.data is not None},
            parameters=dict(response.parameters),
            final=response.final,
        )


_END = object()


class _Responses:
    """What the blocking and the asyncio iterators share: how a queued item ends the stream,
    and that cancelling (or dropping the iterator) cancels the request once."""

    _cancel: Any = None
    _done = False

    def _settle(self, item: Any, stop: type[Exception]) -> InferenceResponse:
        if item is _END:
            self._done = True
            raise stop
        if isinstance(item, BaseException):
            self._done = True
            raise item
        return item

    def cancel(self) -> None:
        if not self._done and self._cancel is not None:
            self._cancel()
        self._done = True

    def __del__(self) -> None:
        self.cancel()


class ResponseIterator(_Responses, Iterator[InferenceResponse]):
    """A decoupled model's responses, in order, as they arrive. Closing it (or dropping it
    before the end) cancels the request, which asks the model to stop."""

    def __init__(self) -> None:
        self._queue: queue.Queue[Any] = queue.Queue()

    def _put(self, item: Any) -> None:
        self._queue.put(item)

    def __next__(self) -> InferenceResponse:
        if self._done:
            raise StopIteration
        return self._settle(self._queue.get(), StopIteration)

    def close(self) -> None:
        self.cancel()


class AsyncResponseIterator(_Responses, AsyncIterator[InferenceResponse]):
    """The asyncio form of `ResponseIterator`, fed from the server's loop into the caller's."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._queue: asyncio.Queue[Any] = asyncio.Queue()

    def _put(self, item: Any) -> None:
        if not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._queue.put_nowait, item)

    async def __anext__(self) -> InferenceResponse:
        if self._done:
            raise StopAsyncIteration
        return self._settle(await self._queue.get(), StopAsyncIteration)

    async def aclose(self) -> None:
        self.cancel()


async def pump(stream: Any, sink: ResponseIterator | AsyncResponseIterator) -> None:
    """Runs on the server's loop: moves each response of `stream` into `sink`, then the end."""
    try:
        async for response in stream:
            if response.final and not response.outputs and response.error is None:
                continue  # the flag that closes a stream, without data
            sink._put(_convert(response))
    except asyncio.CancelledError:
        sink._put(_END)
        raise
    except BaseException as exc:  # noqa: BLE001 - handed to the reader, who raises it
        sink._put(exc)
        return
    sink._put(_END)


def _convert(response: InferResponse) -> InferenceResponse | BaseException:
    try:
        return InferenceResponse.of(response)
    except BaseException as exc:  # noqa: BLE001 - an error response ends up raised by the reader
        return exc

"""The event loop the in-process server lives on, in a thread of its own.

The core is asyncio code that expects one loop. Running it on a private thread lets plain
scripts call it synchronously and lets callers that already run a loop (Jupyter, web apps)
call it without nesting loops: every call is handed over with `run_coroutine_threadsafe`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    def __init__(self, name: str = "openinfer-core") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()
        self.loop.close()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Runs `coro` on the core's loop and waits for it; cancels it if the wait times out."""
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("a blocking openinfer call was made from the server's own event loop")
        future = self.submit(coro)
        try:
            return future.result(timeout)
        except BaseException:
            future.cancel()
            raise

    def close(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=30)

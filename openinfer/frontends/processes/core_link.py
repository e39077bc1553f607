"""The core process's end of one frontend process's channel.

Messages from the frontend:
- `("infer", key, request)`: run it (`InferenceServer.infer`, as the in-process HTTP handler
  does) and answer `("done", key, response)` or `("fail", key, OpenInferError)` (requests and
  responses packed as `messages` packs them);
- `("http", key, method, path, headers, body)`: a request for any other route, or an infer
  request the frontend could not decode alone; the core's own HTTP app answers it, and its
  ASGI messages go back as `("send", key, message)` then `("end", key)`;
- `("cancel", key)`: the client left; the request is cancelled as a disconnect cancels it.

The core logs a failed inference (Triton's `Infer failed` line), since its log settings are the
ones `/v2/logging` changes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from ...core.errors import InternalError, OpenInferError
from ...core.observability.failure_log import log_failure
from ...core.requests.protocols import Protocol
from ...core.server import InferenceServer
from ...core.types import InferRequest
from .channel import Channel
from .messages import pack_response, unpack_request

log = logging.getLogger("openinfer.frontends")


class CoreLink:
    """Serves one frontend: its requests run here, on the core's loop."""

    def __init__(self, server: InferenceServer, app: Callable, on_lost: Callable[[CoreLink], None]) -> None:
        self.server = server
        self.app = app  # the core's own KServe HTTP app, for forwarded requests
        self._on_lost = on_lost
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._left: dict[int, asyncio.Event] = {}
        self.channel: Channel | None = None
        #: Set when the frontend says it accepts connections.
        self.ready = asyncio.Event()

    async def attach(self, sock: Any) -> None:
        self.channel = await Channel.over(sock, self._receive, self._lost)

    # ------------------------------------------------------------------ messages
    def _receive(self, message: tuple) -> None:
        kind, key = message[0], message[1]
        if kind == "ready":
            self.ready.set()
        elif kind == "infer":
            try:
                request = unpack_request(message[2])
            except Exception as exc:  # noqa: BLE001 - a request that cannot be read fails, not hangs
                self._send(("fail", key, InternalError(f"a request from a frontend process could not be read: {exc}")))
                return
            self._start(key, self._infer(key, request))
        elif kind == "http":
            self._left[key] = asyncio.Event()
            self._start(key, self._forward(key, *message[2:]))
        elif kind == "cancel":
            left = self._left.get(key)
            if left is not None:
                left.set()  # the core's app sees the client leave, as over its own socket
            else:
                task = self._tasks.get(key)
                if task is not None:
                    task.cancel()

    def _start(self, key: int, work: Any) -> None:
        task = asyncio.ensure_future(work)
        self._tasks[key] = task
        task.add_done_callback(lambda _: self._forget(key))

    def _forget(self, key: int) -> None:
        self._tasks.pop(key, None)
        self._left.pop(key, None)

    def _send(self, message: tuple) -> None:
        if self.channel is not None:
            self.channel.send(message)

    # ------------------------------------------------------------------ work
    async def _infer(self, key: int, request: InferRequest) -> None:
        try:
            response = await self.server.infer(request, protocol=Protocol.HTTP)
        except OpenInferError as exc:
            log_failure(request.id, exc.message)
            self._send(("fail", key, exc))
            return
        except asyncio.CancelledError:
            return  # the client left; nobody is waiting for an answer
        except Exception as exc:  # a bug must still answer in the protocol's format
            log.exception("inference from a frontend process failed")
            self._send(("fail", key, InternalError(f"internal error: {exc}")))
            return
        try:
            self._send(("done", key, pack_response(response)))
        except Exception as exc:  # noqa: BLE001 - an answer that cannot cross (too large a frame)
            self._send(("fail", key, InternalError(f"the answer could not reach the frontend: {exc}")))

    async def _forward(self, key: int, method: str, path: str, headers: list, body: bytes) -> None:
        left = self._left[key]
        delivered = False

        async def receive() -> dict[str, Any]:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            await left.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            self._send(("send", key, message))

        scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
            "path": path, "raw_path": path.encode(), "query_string": b"", "headers": headers,
        }
        try:
            await self.app(scope, receive, send)
        finally:
            self._send(("end", key))

    # ------------------------------------------------------------------ end
    def _lost(self) -> None:
        """The frontend is gone: what it had in flight is cancelled, as if its clients left."""
        for left in self._left.values():
            left.set()
        for task in list(self._tasks.values()):
            task.cancel()
        self._on_lost(self)

    def close(self) -> None:
        if self.channel is not None:
            self.channel.close()

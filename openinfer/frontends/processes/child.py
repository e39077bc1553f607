"""What runs in a frontend process: the KServe HTTP app on the inherited listening socket, with
inference sent to the core process and every other route forwarded to the core's own app.

Started by `pool` as `python -m openinfer.frontends.processes.child LISTEN_FD CHANNEL_FD`; the
first frame on the channel is its `FrontendConfig`. It ends when the channel does (the core
stopped it, or died) or on SIGTERM, after the requests it has begun are answered.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import os
import signal
import socket
import sys
from dataclasses import dataclass, field
from typing import Any, Protocol

from ...core.errors import UnavailableError
from ...core.observability.tracing import NoTracing, Tracer
from ...core.types import InferRequest, InferResponse
from ..asgi.listener import listener
from ..asgi.transport import Transport
from ..http.app import HttpApp, HttpOptions, HttpRequest, HttpResponse
from ..http.handlers import decode_infer, encode_infer
from ..http.paths import MODEL, model_args
from .channel import Channel, Frames
from .messages import pack_request, unpack_response

_METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS")


class AppliesLogging(Protocol):
    """Log settings a process can install as its own (the logging extension's `LogSettings`)."""

    def apply(self) -> None: ...

    def detached(self) -> AppliesLogging: ...


@dataclass
class FrontendConfig:
    """What a frontend process needs from the core's settings."""

    host: str
    port: int
    options: HttpOptions
    client_timeout: float
    #: The server's log settings (the logging feature's), applied in the process; None: Python's.
    log_settings: AppliesLogging | None
    #: Whether the core traces with OpenTelemetry (then a client's W3C headers are kept).
    propagates_context: bool = False
    listener_settings: dict[str, Any] = field(default_factory=dict)


class NeedsCore(Exception):
    """Only the core can decide this request (a raw tensor's shape comes from its model table)."""


class ContextOnly(NoTracing):
    """A frontend's tracer: it samples nothing (the core does), and keeps a client's trace
    context on a request where the core's tracer would."""

    def __init__(self, propagates_context: bool) -> None:
        self.propagates_context = propagates_context


class CoreView:
    """What decoding asks of the server, seen from a frontend process."""

    def __init__(self, propagates_context: bool) -> None:
        self.trace: Tracer = ContextOnly(propagates_context)

    def model(self, name: str, version: str) -> Any:
        raise NeedsCore(name)


class CoreClient:
    """Requests to the core over the channel, each under a key of its own."""

    def __init__(self) -> None:
        self.channel: Channel | None = None
        self._keys = itertools.count()
        self._answers: dict[int, asyncio.Future[InferResponse]] = {}
        self._streams: dict[int, asyncio.Queue[dict[str, Any] | None]] = {}
        self.ready = asyncio.Event()

    def receive(self, message: tuple) -> None:
        kind, key = message[0], message[1]
        if kind == "done" or kind == "fail":
            answer = self._answers.pop(key, None)
            if answer is not None and not answer.done():
                if kind == "done":
                    answer.set_result(unpack_response(message[2]))
                else:
                    answer.set_exception(message[2])
        elif kind == "send":
            stream = self._streams.get(key)
            if stream is not None:
                stream.put_nowait(message[2])
        elif kind == "end":
            stream = self._streams.pop(key, None)
            if stream is not None:
                stream.put_nowait(None)

    def lost(self) -> None:
        """The core is gone: nothing in flight will be answered."""
        for answer in self._answers.values():
            if not answer.done():
                answer.set_exception(UnavailableError("the server's core process is not available"))
        self._answers.clear()
        for stream in self._streams.values():
            stream.put_nowait(None)
        self._streams.clear()

    def _send(self, message: tuple) -> None:
        if self.channel is None or self.channel.closed:
            raise UnavailableError("the server's core process is not available")
        self.channel.send(message)

    async def infer(self, request: InferRequest) -> InferResponse:
        key = next(self._keys)
        answer = self._answers[key] = asyncio.get_running_loop().create_future()
        try:
            self._send(("infer", key, pack_request(request)))
            return await answer
        except asyncio.CancelledError:
            if self._answers.pop(key, None) is not None:
                self._send(("cancel", key))
            raise

    def open(self, method: str, path: str, headers: list, body: bytes) -> tuple[int, asyncio.Queue]:
        key = next(self._keys)
        stream = self._streams[key] = asyncio.Queue()
        self._send(("http", key, method, path, headers, body))
        return key, stream

    def cancel(self, key: int) -> None:
        if self._streams.pop(key, None) is not None and self.channel is not None:
            self.channel.send(("cancel", key))


async def infer(app: HttpApp, core: CoreClient, req: HttpRequest) -> HttpResponse:
    """Decoded and encoded here; run in the core."""
    try:
        request, binary_default = decode_infer(app, req, *model_args(req))
    except Exception:  # noqa: BLE001 - the core words and logs every refusal, and holds the model table
        return await forward(core, req)
    response = await core.infer(request)
    return encode_infer(req, response, binary_default)


async def forward(core: CoreClient, req: HttpRequest) -> HttpResponse:
    """Answered by the core's own app; its messages are relayed as they come."""
    headers = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in req.headers.items()]
    key, stream = core.open(req.method, req.path, headers, bytes(req.body))
    return HttpResponse(stream=functools.partial(_relay, core, key, stream))


async def _relay(core: CoreClient, key: int, stream: asyncio.Queue, transport: Transport) -> None:
    assert transport.send is not None
    with transport.cancel_on_disconnect() as guard:
        while (message := await stream.get()) is not None:
            await transport.send(message)
    if guard.left:
        core.cancel(key)


def build_app(config: FrontendConfig, core: CoreClient) -> HttpApp:
    app = HttpApp(CoreView(config.propagates_context), config.options)  # type: ignore[arg-type]
    app.add_route(MODEL + r"/infer", "POST", "inference", functools.partial(infer, app, core),
                  raw_body=True, cancellable=True)
    app.add_route(r"/.*", _METHODS, None, functools.partial(forward, core), raw_body=True)
    return app


async def serve(config: FrontendConfig, listening: socket.socket, channel_socket: socket.socket) -> None:
    core = CoreClient()
    http = listener(build_app(config, core), config.host, config.port, client_timeout=config.client_timeout,
                    **config.listener_settings)

    def stop() -> None:
        http.should_exit = True

    def lost() -> None:
        core.lost()
        stop()

    core.channel = await Channel.over(channel_socket, core.receive, lost)
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop)
    asyncio.get_running_loop().add_signal_handler(signal.SIGINT, lambda: None)  # the core orders the end
    task = asyncio.create_task(http.serve(sockets=[listening]))
    while not http.started and not task.done():
        await asyncio.sleep(0.01)
    if http.started:
        core.channel.send(("ready", os.getpid()))
    await task


def _read_config(sock: socket.socket) -> FrontendConfig:
    """The channel's first frame, read before the loop starts."""
    frames = Frames()
    messages: list[tuple] = []
    while not messages:
        chunk = sock.recv(65536)
        if not chunk:
            raise SystemExit("the core process closed the channel before configuring this frontend")
        messages = frames.feed(chunk)
    kind, config = messages[0]
    assert kind == "config" and len(messages) == 1
    return config


def main(argv: list[str] | None = None) -> None:
    listen_fd, channel_fd = (int(value) for value in (argv or sys.argv[1:])[:2])
    channel_socket = socket.socket(fileno=channel_fd)
    config = _read_config(channel_socket)
    if config.log_settings is not None:
        config.log_settings.apply()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(serve(config, socket.socket(fileno=listen_fd), channel_socket))


if __name__ == "__main__":
    main()

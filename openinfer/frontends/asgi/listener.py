"""The one uvicorn server every HTTP listener runs (KServe, metrics, OpenAI)."""

from __future__ import annotations

import contextlib
import logging
import socket
from collections.abc import Iterator
from typing import Any

import uvicorn

from .uvicorn_compat import chosen_protocol
from .uvicorn_protocol import DEFAULT_TIMEOUT_SECS, protocol_class

log = logging.getLogger("openinfer.http")


class Listener(uvicorn.Server):
    """uvicorn's server without its own signal handling: the runner orders shutdown."""

    #: Bind with SO_REUSEPORT, so other servers that set it too listen on the same port and the
    #: kernel spreads new connections between them (uvicorn's own binding has no such option).
    reuse_port = False
    #: The service's name in Triton's start-up failure ("HTTP", "Metrics").
    service = "HTTP"

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        if sockets is None and self.reuse_port:
            try:
                sockets = [bound_socket(self.config.host, self.config.port, reuse_port=True)]
            except OSError as exc:  # ends the task, as uvicorn's own failed bind does
                log.error("%s (%s)", self._not_started(), exc.strerror or exc)
                return
        try:
            await super().serve(sockets=sockets)
        except SystemExit:
            # uvicorn exits the process when it cannot bind; the runner stops the server in order
            # instead, and says so (uvicorn has logged why, Triton's words follow).
            if self.started:
                raise
            log.error("%s", self._not_started())

    def _not_started(self) -> str:
        return not_started(self.service, self.config.host, self.config.port)


def not_started(service: str, host: str, port: int) -> str:
    """Triton's start-up failure of a service whose port is taken."""
    return f"failed to start {service} service: Unavailable - Socket '{host}:{port}' already in use"


def bound_socket(host: str, port: int, *, reuse_port: bool) -> socket.socket:
    """A listening socket bound with SO_REUSEADDR (and SO_REUSEPORT when asked; IPv6 hosts too),
    inheritable, so frontend processes can accept on it."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
        sock.listen(2048)  # uvicorn's default backlog
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def listener(
    app: Any, host: str, port: int, *, client_timeout: float = DEFAULT_TIMEOUT_SECS, reuse_port: bool = False,
    service: str = "HTTP", **config: Any,
) -> Listener:
    """A listener for `app`: the fast protocol (with slow-client deadlines) where the installed
    uvicorn allows it, uvicorn's own otherwise. `config` overrides uvicorn.Config's defaults
    below (log level, access log, keep-alive, headers)."""
    chosen = chosen_protocol()
    how = "the uvicorn fast path" if chosen == "fast" else f"plain ASGI on uvicorn's {chosen} protocol"
    log.debug("HTTP listener %s:%d serves through %s (uvicorn %s)", host, port, how, uvicorn.__version__)
    settings: dict[str, Any] = {
        "loop": "none",
        "http": protocol_class(client_timeout) if chosen == "fast" else chosen,
        "lifespan": "off",
        "access_log": False,
        "log_level": "warning",
        **config,
    }
    server = Listener(uvicorn.Config(app, host=host, port=port, **settings))
    server.reuse_port, server.service = reuse_port, service
    return server

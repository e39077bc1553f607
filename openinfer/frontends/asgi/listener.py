"""The one uvicorn server every HTTP listener runs (KServe, metrics, OpenAI)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

import uvicorn

from .uvicorn_compat import chosen_protocol
from .uvicorn_protocol import DEFAULT_TIMEOUT_SECS, protocol_class

log = logging.getLogger("openinfer.http")


class Listener(uvicorn.Server):
    """uvicorn's server without its own signal handling: the runner orders shutdown."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def listener(
    app: Any, host: str, port: int, *, client_timeout: float = DEFAULT_TIMEOUT_SECS, **config: Any
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
    return Listener(uvicorn.Config(app, host=host, port=port, **settings))

"""Whether the running uvicorn is one the fast path knows.

The fast path (`uvicorn_protocol`) subclasses uvicorn's httptools protocol and reads and writes
fields of its request cycle that are not public API. It is used only when uvicorn's version is
in the tested range and every one of those names is still there; otherwise every listener runs
uvicorn's own protocol and the apps use the plain ASGI adapter, with one log line saying why.
`OPENINFER_HTTP_PROTOCOL=httptools` or `=h11` chooses one of uvicorn's own protocols on purpose.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import os
from typing import Any

log = logging.getLogger("openinfer.http")

#: uvicorn releases the fast path is known to work with (lowest included, highest excluded);
#: the same range as the dependency pin in pyproject.toml.
TESTED = ((0, 30), (0, 55))
#: Environment variable: `fast` (default), or `httptools` / `h11` for uvicorn's own protocol.
PROTOCOL_ENV = "OPENINFER_HTTP_PROTOCOL"

#: What the fast path uses of uvicorn's `HttpToolsProtocol` (methods it extends or calls, and
#: fields of an instance) ...
PROTOCOL_METHODS = (
    "connection_made", "connection_lost", "data_received", "on_body", "on_headers_complete",
    "on_message_complete", "on_response_complete",
)
PROTOCOL_FIELDS = ("cycle", "parser", "flow", "loop", "transport")
#: ... of its `RequestResponseCycle` ...
CYCLE_FIELDS = (
    "scope", "transport", "flow", "default_headers", "message_event", "on_response", "access_log",
    "keep_alive", "disconnected", "waiting_for_100_continue", "body", "more_body",
    "response_started", "response_complete", "receive", "send",
)
#: ... and of its `FlowControl`.
FLOW_FIELDS = ("write_paused", "pause_reading", "resume_reading")


def chosen_protocol() -> str:
    """`fast` when the fast path is wanted and usable, else the uvicorn protocol to run."""
    wanted = os.environ.get(PROTOCOL_ENV, "fast").strip().lower() or "fast"
    if wanted in ("httptools", "h11"):
        return wanted
    problem = fast_path_problem()
    if problem is not None:
        _say_once(problem)
        return "httptools"
    return "fast"


@functools.cache
def _say_once(problem: str) -> None:
    log.warning("HTTP fast path off, serving through plain ASGI: %s", problem)


@functools.cache
def fast_path_problem() -> str | None:
    """Why the fast path cannot run on the installed uvicorn; None when it can."""
    try:
        import uvicorn
        from uvicorn.protocols.http.flow_control import FlowControl
        from uvicorn.protocols.http.httptools_impl import (  # noqa: F401 - STATUS_LINE is used
            STATUS_LINE,
            HttpToolsProtocol,
            RequestResponseCycle,
        )
        from uvicorn.server import ServerState
    except ImportError as exc:
        return f"uvicorn's httptools protocol is not importable ({exc})"
    version = _version(uvicorn.__version__)
    if version is None or not TESTED[0] <= version < TESTED[1]:
        low, high = (".".join(map(str, v)) for v in TESTED)
        return f"uvicorn {uvicorn.__version__} is outside the tested range >={low},<{high}"
    missing = [name for name in PROTOCOL_METHODS if not callable(getattr(HttpToolsProtocol, name, None))]
    try:
        protocol = _protocol(uvicorn, HttpToolsProtocol, ServerState)
        missing += [name for name in PROTOCOL_FIELDS if not hasattr(protocol, name)]
        cycle = _cycle(RequestResponseCycle)
        missing += [f"cycle.{name}" for name in CYCLE_FIELDS if not hasattr(cycle, name)]
        flow = FlowControl(None)  # type: ignore[arg-type]
        missing += [f"flow.{name}" for name in FLOW_FIELDS if not hasattr(flow, name)]
    except Exception as exc:  # noqa: BLE001 - a changed constructor is a changed uvicorn
        return f"uvicorn {uvicorn.__version__} builds its protocol differently ({exc})"
    if missing:
        return f"uvicorn {uvicorn.__version__} lacks {', '.join(missing)}"
    return None


def _version(text: str) -> tuple[int, int] | None:
    try:
        major, minor = text.split(".")[:2]
        return int(major), int(minor)
    except ValueError:
        return None


def _protocol(uvicorn: Any, protocol_class: Any, server_state_class: Any) -> Any:
    async def app(scope: Any, receive: Any, send: Any) -> None:  # never called
        return None

    config = uvicorn.Config(app, http="httptools", loop="none", lifespan="off", log_config=None)
    loop = asyncio.new_event_loop()
    try:
        return protocol_class(config=config, server_state=server_state_class(), app_state={}, _loop=loop)
    finally:
        loop.close()


def _cycle(cycle_class: Any) -> Any:
    """A cycle built from its constructor's own parameter names (values are never used)."""
    values: dict[str, Any] = {
        "scope": {}, "transport": None, "flow": None, "logger": log, "access_logger": log,
        "access_log": False, "default_headers": [], "message_event": None,
        "expect_100_continue": False, "keep_alive": True, "on_response": lambda: None,
    }
    names = [n for n in inspect.signature(cycle_class).parameters if n != "self"]
    unknown = [n for n in names if n not in values]
    if unknown:
        raise TypeError(f"unknown cycle parameters {unknown}")
    return cycle_class(**{n: values[n] for n in names})

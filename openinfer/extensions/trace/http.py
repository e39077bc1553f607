"""`/v2/trace/setting` and `/v2/models/{m}/trace/setting`."""

from __future__ import annotations

import functools
from typing import Any
from urllib.parse import unquote

from ...core.errors import InvalidArgumentError
from ...core.server import InferenceServer
from ...frontends.http.app import HttpApp, HttpRequest, HttpResponse, json_response
from ..json_body import body_object
from . import manager as traces


async def trace_setting(server: InferenceServer, req: HttpRequest) -> HttpResponse:
    model = unquote(req.match.group(1)) if req.match is not None and req.match.lastindex else ""
    if model and not server.model_ready(model):
        raise InvalidArgumentError(f"Request for unknown model : {model}")
    if req.method == "POST":
        new, clear = traces.parse_update(trace_values(body_object(req)))
        return json_response(traces.of(server).update(model, new, clear))
    return json_response(traces.of(server).settings(model))


def trace_values(doc: dict[str, Any]) -> dict[str, list[str] | None]:
    """HTTP trace settings -> the core's form: strings (levels: a list), null to clear."""
    values: dict[str, list[str] | None] = {}
    for key, value in doc.items():
        if value is None:
            values[key] = None
        elif key == "trace_level":
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise InvalidArgumentError("Unable to parse 'trace_level': attempt to access JSON non-string as string")
            values[key] = list(value)
        elif key == "trace_mode":
            if not isinstance(value, str):
                raise InvalidArgumentError("Unable to parse 'trace_mode': attempt to access JSON non-string as string")
            values[key] = [value]
        elif key in ("trace_rate", "trace_count", "log_frequency", "trace_file"):
            # Triton wants strings; integers (what `update_trace_settings(trace_rate=5)` sends)
            # are taken too rather than failing with a JSON type error.
            if isinstance(value, bool) or not isinstance(value, (str, int)):
                raise InvalidArgumentError(f"Unable to parse '{key}': attempt to access JSON non-string as string")
            values[key] = [str(value)]
    return values


def install(app: HttpApp, group: str | None) -> None:
    handler = functools.partial(trace_setting, app.server)
    app.add_route(r"/v2/trace/setting", ("GET", "POST"), group, handler)
    app.add_route(r"/v2/models/([^/]+)/trace/setting", ("GET", "POST"), group, handler)

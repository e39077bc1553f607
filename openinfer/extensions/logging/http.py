"""`/v2/logging`."""

from __future__ import annotations

import functools

from ...core.errors import UnsupportedError
from ...core.server import InferenceServer
from ...frontends.http.app import HttpApp, HttpRequest, HttpResponse, json_response
from ..json_body import body_object, nullable
from .settings import log_settings


async def logging_settings(server: InferenceServer, req: HttpRequest) -> HttpResponse:
    settings = log_settings(server)
    if req.method == "POST":
        doc = body_object(req)
        if doc.get("log_file") is not None:
            raise UnsupportedError("log file location can not be updated through network protocol")
        values = {  # Triton's words here are the JSON parser's alone
            "log_info": nullable(doc, "log_info", bool, named=False),
            "log_warning": nullable(doc, "log_warning", bool, named=False),
            "log_error": nullable(doc, "log_error", bool, named=False),
            "log_verbose_level": nullable(doc, "log_verbose_level", int, named=False),
            "log_format": nullable(doc, "log_format", str, named=False),
        }
        settings.update(values, "--log_format")  # (an unknown format: 400, where Triton's HTTP answers 503)
    return json_response(settings.as_dict())


def install(app: HttpApp, group: str | None) -> None:
    app.add_route(r"/v2/logging", ("GET", "POST"), group, functools.partial(logging_settings, app.server))

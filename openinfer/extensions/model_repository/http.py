"""`/v2/repository[/{repository}]/index` and `.../models/{m}/load|unload`.

The parameters are read by the core (`InferenceServer.load_request`), as gRPC's are; here only
the JSON shape is taken apart (file contents travel as base64 strings in JSON).
"""

from __future__ import annotations

import base64
import functools
from urllib.parse import unquote

from ...core.errors import InvalidArgumentError
from ...core.server import InferenceServer
from ...frontends.http.app import HttpApp, HttpRequest, HttpResponse, json_response
from ...frontends.http.codec import loads_object

_REPOSITORY = r"/v2/repository(?:/([^/]+))?"


def _repository_name(req: HttpRequest) -> str:
    return unquote(req.match.group(1) or "") if req.match is not None else ""


def _body_parameters(body: bytes) -> dict:
    """The `parameters` object of a repository request body (an empty body has none)."""
    if not body.strip():
        return {}
    params = loads_object(body).get("parameters", {})
    if not isinstance(params, dict):
        raise InvalidArgumentError("Unable to parse 'parameters': expected a JSON object")
    return dict(params)


async def repository_index(server: InferenceServer, req: HttpRequest) -> HttpResponse:
    ready = False
    if req.body.strip():
        value = loads_object(req.body).get("ready", False)
        if not isinstance(value, bool):
            raise InvalidArgumentError("attempt to access JSON non-boolean as boolean")  # Triton's words
        ready = value
    return json_response([row.as_json() for row in server.repository_index(ready, _repository_name(req))])


async def repository_load(server: InferenceServer, req: HttpRequest) -> HttpResponse:
    name = unquote(req.match.group(2))  # type: ignore[union-attr]
    parameters = _body_parameters(req.body)
    for key, value in parameters.items():  # file contents travel as base64 strings
        if key.startswith("file:") and isinstance(value, str):
            try:
                parameters[key] = base64.b64decode(value, validate=True)
            except ValueError:
                raise InvalidArgumentError(f"'{key}' must be base64-encoded file content") from None
    await server.load_request(name, parameters, _repository_name(req))
    return HttpResponse(200, b"")


async def repository_unload(server: InferenceServer, req: HttpRequest) -> HttpResponse:
    name = unquote(req.match.group(2))  # type: ignore[union-attr]
    await server.unload_request(name, _body_parameters(req.body), _repository_name(req))
    return HttpResponse(200, b"")


def install(app: HttpApp, group: str | None) -> None:
    bind = functools.partial
    server = app.server
    app.add_route(_REPOSITORY + r"/index", "POST", group, bind(repository_index, server))
    app.add_route(_REPOSITORY + r"/models/([^/]+)/load", "POST", group, bind(repository_load, server))
    app.add_route(_REPOSITORY + r"/models/([^/]+)/unload", "POST", group, bind(repository_unload, server))

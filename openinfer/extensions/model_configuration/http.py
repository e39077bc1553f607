"""`/v2/models/{m}[/versions/{v}]/config`."""

from __future__ import annotations

import functools

from ...core import config as configs
from ...core.server import InferenceServer
from ...frontends.http.app import HttpApp, HttpRequest, HttpResponse, json_response
from ...frontends.http.paths import MODEL, model_args


async def model_config(server: InferenceServer, req: HttpRequest) -> HttpResponse:
    name, version = model_args(req)
    return json_response(configs.config_to_json(server.model_config(name, version)))


def install(app: HttpApp, group: str | None) -> None:
    app.add_route(MODEL + r"/config", "GET", group, functools.partial(model_config, app.server))

"""`/v2/models/stats` and `/v2/models/{m}[/versions/{v}]/stats`."""

from __future__ import annotations

import functools

from ...core.server import InferenceServer
from ...frontends.http.app import HttpApp, HttpRequest, HttpResponse, json_response
from ...frontends.http.paths import MODEL, model_args


async def model_stats(server: InferenceServer, req: HttpRequest) -> HttpResponse:
    name, version = ("", "") if req.match is None or req.match.lastindex is None else model_args(req)
    return json_response({"model_stats": [stats.as_json() for stats in server.statistics(name, version)]})


def install(app: HttpApp, group: str | None) -> None:
    handler = functools.partial(model_stats, app.server)
    app.add_route(r"/v2/models/stats", "GET", group, handler)
    app.add_route(MODEL + r"/stats", "GET", group, handler)

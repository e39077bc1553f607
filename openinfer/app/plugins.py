"""Plug-ins: optional parts of the server that plug into the composition root.

(Not to be confused with protocol extensions, `openinfer/extensions/`: those are parts of the
KServe v2 protocol that Triton names in `GET /v2`.) Each plug-in module exposes an object with `configure(settings) -> Contribution` (run once
the command line is parsed, before the server is built; it reads the settings and says what it
changes) and, if it needs them, `http_hook(app)`, `grpc_hook(grpc_server)` and
`async start(server, settings) -> dict`. Keeping the list here lets features land without the
runner growing a branch for each.
"""

from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass

log = logging.getLogger("openinfer.plugins")

#: module paths whose `PLUGIN` attribute is loaded, in order.
PLUGIN_MODULES: list[str] = [
    "openinfer.frontends.openai",  # --openai-port: the OpenAI API; /v2/models/{m}/generate[_stream]
]


@dataclass(frozen=True)
class Contribution:
    """What a plug-in's `configure` tells the composition root."""

    #: False: the plug-in serves alone; the KServe HTTP, gRPC and metrics listeners stay off.
    kserve_frontends: bool = True


def discover() -> list:
    found = []
    for path in PLUGIN_MODULES:
        try:
            module = importlib.import_module(path)
        except ImportError as exc:
            log.warning("plug-in %s unavailable: %s", path, exc)
            continue
        found.append(module.PLUGIN)
    return found

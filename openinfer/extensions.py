"""Optional parts of the server that plug into the composition root.

Each extension module exposes an object with `configure(server, args)` and, if it needs them,
`http_hook(app)`, `grpc_hook(grpc_server)` and `async start(server, args) -> dict`. Keeping
the list here lets features land without the runner growing a branch for each.
"""

from __future__ import annotations

import importlib
import logging

log = logging.getLogger("openinfer.extensions")

#: module paths whose `EXTENSION` attribute is loaded, in order.
EXTENSION_MODULES: list[str] = [
    "openinfer.core.cache",  # --cache-config: the response cache
    "openinfer.frontends.openai",  # --openai-port: the OpenAI API; /v2/models/{m}/generate[_stream]
]


def discover() -> list:
    found = []
    for path in EXTENSION_MODULES:
        try:
            module = importlib.import_module(path)
        except ImportError as exc:
            log.warning("extension %s unavailable: %s", path, exc)
            continue
        found.append(module.EXTENSION)
    return found

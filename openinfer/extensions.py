"""Optional parts of the server that plug into the composition root.

Each extension module exposes an object with `configure(settings) -> Contribution` (run once
the command line is parsed, before the server is built; it reads the settings and says what it
changes) and, if it needs them, `http_hook(app)`, `grpc_hook(grpc_server)` and
`async start(server, settings) -> dict`. Keeping the list here lets features land without the
runner growing a branch for each.
"""

from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass

log = logging.getLogger("openinfer.extensions")

#: module paths whose `EXTENSION` attribute is loaded, in order.
EXTENSION_MODULES: list[str] = [
    "openinfer.frontends.openai",  # --openai-port: the OpenAI API; /v2/models/{m}/generate[_stream]
]


@dataclass(frozen=True)
class Contribution:
    """What an extension's `configure` tells the composition root."""

    #: False: the extension serves alone; the KServe HTTP, gRPC and metrics listeners stay off.
    kserve_frontends: bool = True


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

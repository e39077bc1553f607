"""The listeners in front of one server: KServe HTTP (in this process or in frontend processes),
gRPC, metrics and the features' own, with the access rules of `--http-restricted-api` and
`--grpc-restricted-protocol`."""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass, field
from typing import Any

from .. import features as known_features
from ..core.server import InferenceServer
from ..features import Feature
from ..frontends.access import PROTOCOL_GROUPS, AccessPolicy
from ..frontends.addresses import TRITON_LISTENER, display, grpc_target, host_of
from .compose import Composition
from .settings import Settings


@dataclass
class Frontends:
    """The listeners serving one InferenceServer."""

    uvicorn_servers: list = field(default_factory=list)
    tasks: list = field(default_factory=list)
    grpc_server: object | None = None
    #: The HTTP frontend processes (`--frontend-processes` > 1).
    http_processes: Any = None

    def failed(self) -> bool:
        """A listener ended on its own (it could not bind, or crashed)."""
        processes = self.http_processes
        return (processes is not None and not processes.started) or any(task.done() for task in self.tasks)

    async def stop(self) -> None:
        for s in self.uvicorn_servers:
            s.should_exit = True
        if self.grpc_server is not None:
            await self.grpc_server.stop(grace=1)  # type: ignore[attr-defined]
        if self.http_processes is not None:
            await self.http_processes.stop()
        await asyncio.gather(*self.tasks, return_exceptions=True)


def access_policies(args: Settings, features: tuple[Feature, ...] | None = None) -> tuple[AccessPolicy, AccessPolicy]:
    """`--http-restricted-api` and `--grpc-restricted-protocol` over the protocol's groups and
    those the features add (ValueError names a bad one)."""
    features = known_features.load() if features is None else features
    groups = PROTOCOL_GROUPS + tuple(g for g in known_features.groups(features) if g not in PROTOCOL_GROUPS)
    return (
        AccessPolicy.parse(list(args.http_restricted_api), groups),
        AccessPolicy.parse(list(args.grpc_restricted_protocol), groups, feature="protocol"),
    )


async def _start_http(fronts: Frontends, server: InferenceServer, args: Settings, features: tuple[Feature, ...],
                      access: AccessPolicy) -> Any:
    """The KServe HTTP app, served in this process (its listener is returned) or by
    `--frontend-processes` processes in front of it (None)."""
    from ..frontends.asgi.listener import listener
    from ..frontends.http import handlers
    from ..frontends.http.app import HttpApp, HttpOptions

    app = HttpApp(server, HttpOptions(args.http_max_input_size, access, args.http_header_forward_pattern))
    handlers.install(app, known_features.http_installers(features))
    if args.frontend_processes > 1:
        from ..extensions.logging.settings import LogSettings
        from ..frontends.processes.pool import start_http_processes

        log_settings = server.feature_state("logging")  # each process applies a copy

        fronts.http_processes = await start_http_processes(
            server, app, args.frontend_processes, host_of(args.http_address), args.http_port,
            reuse_port=args.reuse_http_port, client_timeout=args.http_client_timeout_secs,
            listener_settings=TRITON_LISTENER,
            log_settings=log_settings if isinstance(log_settings, LogSettings) else None,
        )
        return None
    http = listener(
        app, host_of(args.http_address), args.http_port, client_timeout=args.http_client_timeout_secs,
        reuse_port=args.reuse_http_port, **TRITON_LISTENER,
    )
    fronts.uvicorn_servers.append(http)
    fronts.tasks.append(asyncio.create_task(http.serve()))
    return http


async def start_frontends(built: Composition, args: Settings) -> Frontends:
    """gRPC, HTTP and the features' listeners (metrics, the OpenAI API), as the settings ask;
    returns once every listener is up or one has failed (`Frontends.failed`). Raises ValueError
    on a bad access rule and OSError when gRPC cannot bind."""
    from ..frontends.grpc import transport_options
    from ..frontends.grpc.service import Binding, start_grpc

    server = built.server
    http_access, grpc_access = access_policies(args, built.features)
    allow_http = args.allow_http and built.kserve_frontends
    fronts = Frontends()
    if args.allow_grpc and built.kserve_frontends:
        binding = Binding(
            grpc_target(args.grpc_address, args.grpc_port), args.reuse_grpc_port,
            tuple(transport_options.channel_options(args)), transport_options.server_credentials(args),
        )
        compression = None
        if args.grpc_infer_response_compression_level != "none":
            import grpc

            # gRPC's level -> algorithm ranking (gzip, deflate): low picks gzip, medium/high deflate.
            low = args.grpc_infer_response_compression_level == "low"
            compression = grpc.Compression.Gzip if low else grpc.Compression.Deflate
        fronts.grpc_server = await start_grpc(
            server, binding, grpc_access, compression,
            rpcs=known_features.grpc_rpcs(built.features), header_forward=args.grpc_header_forward_pattern,
        )
        print(f"Started GRPCInferenceService at {display(args.grpc_address, args.grpc_port)}", file=sys.stderr, flush=True)
    http = await _start_http(fronts, server, args, built.features, http_access) if allow_http else None
    announce: list[str] = []
    for feature in built.features:
        if feature.start is None or (feature.kserve and not built.kserve_frontends):
            continue
        contribution = built.contributions.get(feature.name)
        opened = await feature.start(server, args, contribution.state if contribution is not None else None)
        fronts.uvicorn_servers.extend(opened.servers)
        fronts.tasks.extend(opened.tasks)
        announce.extend(opened.announce)
    # Wait until every listener is up (or one failed to bind).
    while not all(s.started for s in fronts.uvicorn_servers):
        if fronts.failed():
            break
        await asyncio.sleep(0.02)
    if allow_http and (http.started if http is not None else fronts.http_processes.started):
        print(f"Started HTTPService at {display(args.http_address, args.http_port)}", file=sys.stderr, flush=True)
    if not fronts.failed():
        for line in announce:
            print(line, file=sys.stderr, flush=True)
    return fronts

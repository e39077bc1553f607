"""The composition root: settings -> core -> frontends, one event loop, ordered shutdown."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import extensions as protocol_extensions
from ._malloc import tune_malloc
from .backends.registry import BackendRegistry
from .core.errors import InvalidArgumentError, OpenInferError
from .core.memory import gpu_limit
from .core.memory.shm import SharedMemoryManager
from .core.observability import otel
from .core.observability.log_settings import LogSettings
from .core.observability.trace import TraceManager
from .core.repository import storage
from .core.repository.repository import ControlMode, RepositoryOptions
from .core.repository.storage import RemoteRepository
from .core.requests.response_cache import parse_cache_config
from .core.server import InferenceServer, ServerOptions, ServerServices
from .frontends.access import PROTOCOL_GROUPS, AccessPolicy
from .frontends.latency import MetricsConfig, latency_observers
from .settings import Settings

log = logging.getLogger("openinfer")


def host_of(address: str) -> str:
    """tritonserver address syntax -> a bindable host: `ipv6:[::1]` and `[::]` become `::1`, `::`."""
    address = address.removeprefix("ipv6:")
    return address.strip("[]")


def grpc_target(address: str, port: int) -> str:
    host = host_of(address)
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def display(address: str, port: int) -> str:
    host = host_of(address)
    return f"ipv6:[{host}]:{port}" if ":" in host else f"{host}:{port}"


def configure_logging(settings: Settings) -> LogSettings:
    """Triton's log flags; the same settings object then serves `/v2/logging` live."""
    log_settings = LogSettings.from_args(settings)
    log_settings.apply()
    return log_settings


def _trace_specs(args: Settings) -> list[str]:
    """`--trace-config` plus the deprecated `--trace-*` flags in its syntax."""
    specs = [f"triton,file={args.trace_file}"] if getattr(args, "trace_file", None) else []
    specs += [f"level={level}" for level in getattr(args, "trace_level", None) or []]
    for flag, key in (("trace_rate", "rate"), ("trace_count", "count"), ("trace_log_frequency", "triton,log-frequency")):
        if getattr(args, flag, None) is not None:
            specs.append(f"{key}={getattr(args, flag)}")
    return specs + list(args.trace_config)


def _cache_specs(args: Settings) -> list[str]:
    """`--cache-config`, and the deprecated `--response-cache-byte-size` in its syntax."""
    size = getattr(args, "response_cache_byte_size", None)
    if size is None:
        return list(args.cache_config)
    print(f"Warning: '--response-cache-byte-size' has been deprecated! This will default to the 'local' cache "
          f"implementation with the provided byte size for its config. Please use '--cache-config' instead. The "
          f"equivalent --cache-config CLI args would be: '--cache-config=local,size={size}'", file=sys.stderr)
    return [f"local,size={size}", *args.cache_config]


def _backend_config(specs: list[str], backend_directory: str | None = None) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    if backend_directory:  # every backend sees it, as Triton passes it in each backend's cmdline config
        out[""] = {"backend-directory": backend_directory}
    for spec in specs:
        backend, _, pair = spec.partition(",")
        key, _, value = pair.partition("=")
        if not pair:  # a global setting: `--backend-config default-max-batch-size=8`
            key, _, value = backend.partition("=")
            backend = ""
        out.setdefault(backend, {})[key] = value
    return out


def _repositories(specs: list[str] | tuple[str, ...], exit_on_error: bool) -> tuple[list[Path], list[RemoteRepository], str]:
    """Local folders and object-storage repositories (`s3://`, `gs://`, `as://`), in order, and
    why the server cannot initialize ("" when it can). A path that is not a folder ends the
    process, in Triton's words, unless `--exit-on-error=false` asks to serve anyway."""
    local: list[Path] = []
    remotes: list[RemoteRepository] = []
    for spec in dict.fromkeys(specs):  # a path given twice is one repository, as in Triton
        if storage.is_remote(spec):
            try:
                remotes.append(storage.open_remote(spec))
            except ValueError as exc:
                raise SystemExit(f"error: {exc}") from None
        elif not Path(spec).is_dir():
            error = (f"Internal - failed to stat file {spec}" if not Path(spec).exists()
                     else "Invalid argument - repository path is not a valid directory")
            if exit_on_error:
                raise SystemExit(f"error: creating server: {error}")
            log.error("%s", error.replace(" - ", ": ", 1))
            return [], [], error
        else:
            local.append(Path(spec))
    return local, remotes, ""


def _gpu_limits(values: list[str]) -> dict[int, float]:
    try:
        return gpu_limit.parse(values)
    except ValueError as exc:
        raise SystemExit(f"error: --model-load-gpu-limit: {exc}") from None


def server_options(args: Settings) -> ServerOptions:
    """The core's options from the command line; a flag the server cannot take ends the process."""
    mode = ControlMode(args.model_control_mode)
    if args.load_model and mode is not ControlMode.EXPLICIT:
        raise SystemExit("error: --load-model requires --model-control-mode=explicit")
    if "*" in args.load_model and len(args.load_model) > 1:
        raise SystemExit("error: --load-model=* must be the only --load-model")
    local, remotes, init_error = _repositories(args.model_repository, args.exit_on_error)
    repo_options = RepositoryOptions(
        control_mode=mode,
        startup_models=list(args.load_model),
        poll_secs=args.repository_poll_secs if mode is ControlMode.POLL else 0,
        auto_complete=not (args.disable_auto_complete_config or args.strict_model_config),
        model_config_name=args.model_config_name,
        backend_config=_backend_config(args.backend_config, args.backend_directory),
        exit_timeout_secs=args.exit_timeout_secs,
        remotes=remotes,
        load_retry=max(args.model_load_retry_count, 0),
        gpu_limits=_gpu_limits(args.model_load_gpu_limit),
        namespacing=args.model_namespacing,
    )
    return ServerOptions(
        model_repositories=local + [remote.local for remote in remotes],
        server_id=args.id,
        extensions=protocol_extensions.names(),
        strict_readiness=args.strict_readiness,
        repository=repo_options,
        init_error=init_error,
    )


@dataclass(frozen=True)
class Composition:
    """The server built from the settings, and what the listeners still need to know."""

    server: InferenceServer
    metrics: MetricsConfig
    #: False when a plug-in serves alone (KServe HTTP, gRPC and metrics stay off).
    kserve_frontends: bool = True


def build_server(args: Settings, log_settings: LogSettings | None = None, plugins: list | None = None) -> Composition:
    """The server with its services (shared memory, trace, log settings, the latency observers
    of `--metrics-config`, the response cache), built after every plug-in has read the
    settings: a bad flag anywhere ends the process before anything starts."""
    options = server_options(args)
    try:
        specs, otel_config = otel.split_specs(_trace_specs(args))
        trace = TraceManager.from_cli(specs)
        if otel_config is not None:
            trace.use_opentelemetry(otel.OtelTracing(otel_config))
        metrics = MetricsConfig.parse(list(args.metrics_config))
        cache = parse_cache_config(_cache_specs(args))
    except ImportError as exc:
        raise SystemExit(
            f"error: --trace-config mode=opentelemetry needs {exc.name}: install openinfer's 'otel' extra"
        ) from None
    except ValueError as exc:
        raise SystemExit(f"error: {exc}") from None
    except InvalidArgumentError as exc:
        raise SystemExit(f"error: {exc.message}") from None
    services = ServerServices(
        shm=SharedMemoryManager(allow_client=args.allow_client_shm),
        trace=trace,
        log_settings=log_settings or LogSettings.from_args(args),
        cache=cache,
        stats_observer=latency_observers(metrics),  # every model version it loads gets one
    )
    contributions = [plugin.configure(args) for plugin in plugins or []]
    kserve = all(c.kserve_frontends for c in contributions if c is not None)
    server = InferenceServer(options, BackendRegistry(backend_directory=args.backend_directory), services=services)
    return Composition(server, metrics, kserve)


def model_table(server: InferenceServer) -> str:
    rows = [("Model", "Version", "Status")]
    for row in server.repository_index():
        if not row.version:
            continue
        status = row.state + (f": {row.reason}" if row.reason else "")
        rows.append((row.name, row.version, status))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    line = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    out = [line]
    for index, cells in enumerate(rows):
        out.append("| " + " | ".join(cell.ljust(w) for cell, w in zip(cells, widths)) + " |")
        if index == 0:
            out.append(line)
    out.append(line)
    return "\n".join(out)


def startup_failures(server: InferenceServer, args: Settings) -> list[str]:
    """The models that failed to load at start-up: UNAVAILABLE ones, those whose poll failed,
    and in explicit mode the `--load-model` names the repository does not hold; and object
    stores that could not be read."""
    index = server.repository_index()
    failed = {f"model repository {r.url}" for r in server.options.repository.remotes if r.last_error}
    failed |= {r.name for r in index if r.state == "UNAVAILABLE" and r.reason != "unloaded"}
    failed |= set(server.repository.poll_failed())
    known = {r.name for r in index if r.version}
    failed.update(name for name in args.load_model if name != "*" and name not in known)
    return sorted(failed)


#: uvicorn settings of the KServe and metrics listeners: no Server/Date headers, as Triton.
_TRITON_LISTENER: dict[str, Any] = {
    "proxy_headers": False, "server_header": False, "date_header": False,
    "timeout_keep_alive": 30, "h11_max_incomplete_event_size": 64 * 1024,
}


def compose(args: Settings, log_settings: LogSettings | None = None) -> tuple[Composition, list]:
    """The server and its plug-ins configured from the settings: nothing loaded, no port open.
    `openinfer serve` and the in-process API (`openinfer.api`) both start from here."""
    plugins = _load_plugins()
    return build_server(args, log_settings, plugins), plugins


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


def access_policies(args: Settings) -> tuple[AccessPolicy, AccessPolicy]:
    """`--http-restricted-api` and `--grpc-restricted-protocol` over the protocol's groups and
    those the protocol extensions add (ValueError names a bad one)."""
    groups = PROTOCOL_GROUPS + protocol_extensions.groups()
    return (
        AccessPolicy.parse(list(args.http_restricted_api), groups),
        AccessPolicy.parse(list(args.grpc_restricted_protocol), groups, feature="protocol"),
    )


async def _start_http(fronts: Frontends, server: InferenceServer, args: Settings, plugins: list, access: AccessPolicy) -> Any:
    """The KServe HTTP app, served in this process (its listener is returned) or by
    `--frontend-processes` processes in front of it (None)."""
    from .frontends.asgi.listener import listener
    from .frontends.http import handlers
    from .frontends.http.app import HttpApp, HttpOptions

    app = HttpApp(server, HttpOptions(args.http_max_input_size, access, args.http_header_forward_pattern))
    handlers.install(app, protocol_extensions.http_installers())
    for plugin in plugins:
        if hasattr(plugin, "http_hook"):
            plugin.http_hook(app)
    if args.frontend_processes > 1:
        from .frontends.processes.pool import start_http_processes

        fronts.http_processes = await start_http_processes(
            server, app, args.frontend_processes, host_of(args.http_address), args.http_port,
            reuse_port=args.reuse_http_port, client_timeout=args.http_client_timeout_secs,
            listener_settings=_TRITON_LISTENER,
        )
        return None
    http = listener(
        app, host_of(args.http_address), args.http_port, client_timeout=args.http_client_timeout_secs,
        reuse_port=args.reuse_http_port, **_TRITON_LISTENER,
    )
    fronts.uvicorn_servers.append(http)
    fronts.tasks.append(asyncio.create_task(http.serve()))
    return http


async def start_frontends(built: Composition, args: Settings, plugins: list) -> Frontends:
    """gRPC, HTTP, metrics and the plug-ins' listeners, as the settings ask; returns once every
    listener is up or one has failed (`Frontends.failed`). Raises ValueError on a bad access
    rule and OSError when gRPC cannot bind."""
    from .frontends.asgi.listener import listener
    from .frontends.grpc import transport_options
    from .frontends.grpc.service import Binding, start_grpc
    from .frontends.metrics import metrics_app

    server = built.server
    http_access, grpc_access = access_policies(args)
    allow_http = args.allow_http and built.kserve_frontends
    allow_metrics = args.allow_metrics and built.kserve_frontends
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
            server, binding, grpc_access, [p.grpc_hook for p in plugins if hasattr(p, "grpc_hook")], compression,
            rpcs=protocol_extensions.grpc_rpcs(), header_forward=args.grpc_header_forward_pattern,
        )
        print(f"Started GRPCInferenceService at {display(args.grpc_address, args.grpc_port)}", file=sys.stderr, flush=True)
    http = await _start_http(fronts, server, args, plugins, http_access) if allow_http else None
    if allow_metrics:
        maddr = args.metrics_address or args.http_address
        metrics_asgi = metrics_app(
            server, config=built.metrics, cpu=args.allow_cpu_metrics, gpu=args.allow_gpu_metrics
        )
        metrics = listener(
            metrics_asgi, host_of(maddr), args.metrics_port, client_timeout=args.http_client_timeout_secs,
            service="Metrics", **_TRITON_LISTENER,
        )
        fronts.uvicorn_servers.append(metrics)
        fronts.tasks.append(asyncio.create_task(metrics.serve()))
    for plugin in plugins:
        if hasattr(plugin, "start"):
            extra = await plugin.start(server, args)
            fronts.uvicorn_servers.extend(extra.get("uvicorn", []))
            fronts.tasks.extend(extra.get("tasks", []))
    # Wait until every listener is up (or one failed to bind).
    while not all(s.started for s in fronts.uvicorn_servers):
        if fronts.failed():
            break
        await asyncio.sleep(0.02)
    if allow_http and (http.started if http is not None else fronts.http_processes.started):
        print(f"Started HTTPService at {display(args.http_address, args.http_port)}", file=sys.stderr, flush=True)
    if allow_metrics and metrics.started:
        print(f"Started Metrics Service at {display(args.metrics_address or args.http_address, args.metrics_port)}", file=sys.stderr, flush=True)
    return fronts


#: At shutdown, how long no request may have been refused before the listeners close.
LINGER_QUIET_SECS = 0.5


async def serve(args: Settings, log_settings: LogSettings | None = None) -> int:
    from .frontends.grpc import transport_options

    try:  # refused before any model loads
        access_policies(args)
        if args.allow_grpc:
            transport_options.server_credentials(args)  # TLS files that cannot be read
    except (ValueError, OpenInferError) as exc:
        print(f"error: {getattr(exc, 'message', exc)}", file=sys.stderr)
        return 1
    built, plugins = compose(args, log_settings)
    server = built.server
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)

    await server.start()
    print(model_table(server), file=sys.stderr, flush=True)
    failed = startup_failures(server, args)
    if failed and args.exit_on_error:
        names = ", ".join(f"'{name}'" for name in failed)
        print(
            f"error: creating server: Internal - failed to load all models ({names}; the log above says "
            "why); exiting because --exit-on-error is true, --exit-on-error=false serves the others",
            file=sys.stderr,
            flush=True,
        )
        await server.stop()
        return 1
    try:
        fronts = await start_frontends(built, args, plugins)
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        await server.stop()
        return 1
    if fronts.failed():
        print("error: a listener failed to start (address in use?); the log above says which", file=sys.stderr,
              flush=True)
        await server.stop()
        await fronts.stop()
        return 1

    await stop.wait()
    print("Shutting down: draining in-flight requests", file=sys.stderr, flush=True)
    sending = server.served_within(LINGER_QUIET_SECS)
    await server.stop()  # refuses new work, waits for in-flight requests, unloads
    await server.inflight.quiet(LINGER_QUIET_SECS, args.exit_linger_secs, sending)
    await fronts.stop()
    return 0


def _load_plugins() -> list:
    """Optional frontends that register themselves (the OpenAI API)."""
    from .plugins import discover

    return discover()


def run_server(parsed: argparse.Namespace) -> int:
    args = Settings.from_args(parsed)
    log_settings = configure_logging(args)
    tune_malloc()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    return asyncio.run(serve(args, log_settings))

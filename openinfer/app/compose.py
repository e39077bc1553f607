"""The composition root: settings -> the core with its services and plug-ins. Nothing is loaded and
no port is open yet; `openinfer serve` (`serve.py`) and the in-process API (`openinfer.api`) both
start from here."""

from __future__ import annotations

from dataclasses import dataclass

from ..backends.registry import BackendRegistry
from ..core.errors import InvalidArgumentError
from ..core.memory.shm import SharedMemoryManager
from ..core.observability import otel
from ..core.observability.log_settings import LogSettings
from ..core.observability.trace import TraceManager
from ..core.requests.response_cache import parse_cache_config
from ..core.server import InferenceServer, ServerServices
from ..frontends.latency import MetricsConfig, latency_observers
from .server_options import cache_specs, server_options, trace_specs
from .settings import Settings


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
        specs, otel_config = otel.split_specs(trace_specs(args))
        trace = TraceManager.from_cli(specs)
        if otel_config is not None:
            trace.use_opentelemetry(otel.OtelTracing(otel_config))
        metrics = MetricsConfig.parse(list(args.metrics_config))
        cache = parse_cache_config(cache_specs(args))
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


def compose(args: Settings, log_settings: LogSettings | None = None) -> tuple[Composition, list]:
    """The server and its plug-ins configured from the settings: nothing loaded, no port open.
    `openinfer serve` and the in-process API (`openinfer.api`) both start from here."""
    plugins = _load_plugins()
    return build_server(args, log_settings, plugins), plugins


def _load_plugins() -> list:
    """Optional frontends that register themselves (the OpenAI API)."""
    from .plugins import discover

    return discover()

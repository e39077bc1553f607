"""Prometheus metrics as a feature: tritonserver's `--metrics-*` flags, the latency observers
`--metrics-config` gives every loaded model version, and the listener serving `/metrics`."""

from __future__ import annotations

import asyncio

from ..app.settings import Settings
from ..core.server import InferenceServer
from ..features.contract import Contribution, Feature, Listeners
from ..features.flags import FlagGroups, bool_flag, number, port
from .addresses import TRITON_LISTENER, display, host_of
from .latency import MetricsConfig, latency_observers


def add_flags(groups: FlagGroups) -> None:
    g = groups["Metrics"]
    bool_flag(g, "--allow-metrics", True, "serve Prometheus metrics at /metrics")
    bool_flag(g, "--allow-gpu-metrics", True, "report GPU metrics (NVML through the `gpu` extra, nvidia-ml-py)")
    bool_flag(g, "--allow-cpu-metrics", True, "report CPU utilisation and memory metrics")
    g.add_argument("--metrics-address", default=None, metavar="ADDRESS",
                   help="bind address of the metrics endpoint (default: --http-address)")
    g.add_argument("--metrics-port", type=port, default=8002, metavar="PORT", help="port of the metrics endpoint")
    g.add_argument("--metrics-interval-ms", type=number, default=2000, metavar="MS",
                   help="accepted for compatibility: metrics are computed when scraped")
    g.add_argument("--metrics-config", action="append", default=[], metavar="KEY=VALUE",
                   help="a metrics setting such as summary_latencies=true or histogram_latencies=true; repeatable")


def configure(settings: Settings) -> Contribution:
    """The latency observers every model version gets, whether or not the listener opens: the
    in-process API reads the same statistics."""
    try:
        config = MetricsConfig.parse(list(settings.metrics_config))
    except ValueError as exc:
        raise SystemExit(f"error: {exc}") from None
    return Contribution(services={"stats_observer": latency_observers(config)}, state=config)


async def start(server: InferenceServer, settings: Settings, state: object) -> Listeners:
    if not settings.allow_metrics:
        return Listeners()
    from .asgi.listener import listener
    from .metrics import metrics_app

    config = state if isinstance(state, MetricsConfig) else None
    app = metrics_app(server, config=config, cpu=settings.allow_cpu_metrics, gpu=settings.allow_gpu_metrics)
    address = settings.metrics_address or settings.http_address
    served = listener(
        app, host_of(address), settings.metrics_port, client_timeout=settings.http_client_timeout_secs,
        service="Metrics", **TRITON_LISTENER,
    )
    return Listeners(
        servers=(served,), tasks=(asyncio.create_task(served.serve()),),
        announce=(f"Started Metrics Service at {display(address, settings.metrics_port)}",),
    )


FEATURE = Feature(name="metrics", flags=add_flags, configure=configure, start=start, kserve=True)

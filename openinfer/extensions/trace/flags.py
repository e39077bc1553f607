"""The trace flags (`--trace-config`, and the deprecated `--trace-*` in its syntax) and the trace
manager they make."""

from __future__ import annotations

from ...app.settings import Settings
from ...core.errors import InvalidArgumentError
from . import otel
from .manager import TraceManager
from ...features.contract import Contribution
from ...features.flags import FlagGroups, integer


def add_flags(groups: FlagGroups) -> None:
    groups["Tracing"].add_argument(
        "--trace-config", action="append", default=[], metavar="[MODE,]KEY=VALUE",
        help="a trace setting (level, rate, count, mode, file, log-frequency); repeatable")
    old = groups["Deprecated"]
    old.add_argument("--trace-file", default=None, metavar="PATH", help="use --trace-config triton,file=<path>")
    old.add_argument("--trace-level", action="append", default=[], metavar="LEVEL",
                     help="use --trace-config level=<level>")
    old.add_argument("--trace-rate", type=integer, default=None, metavar="N", help="use --trace-config rate=<n>")
    old.add_argument("--trace-count", type=integer, default=None, metavar="N", help="use --trace-config count=<n>")
    old.add_argument("--trace-log-frequency", type=integer, default=None, metavar="N",
                     help="use --trace-config triton,log-frequency=<n>")


def trace_specs(settings: Settings) -> list[str]:
    """`--trace-config` plus the deprecated `--trace-*` flags in its syntax."""
    specs = [f"triton,file={settings.trace_file}"] if settings.trace_file else []
    specs += [f"level={level}" for level in settings.trace_level]
    for flag, key in (("trace_rate", "rate"), ("trace_count", "count"), ("trace_log_frequency", "triton,log-frequency")):
        if getattr(settings, flag) is not None:
            specs.append(f"{key}={getattr(settings, flag)}")
    return specs + list(settings.trace_config)


def configure(settings: Settings) -> Contribution:
    """The trace manager the infer path samples with; a bad setting ends the process."""
    try:
        specs, otel_config = otel.split_specs(trace_specs(settings))
        trace = TraceManager.from_cli(specs)
        if otel_config is not None:
            trace.use_opentelemetry(otel.OtelTracing(otel_config))
    except ImportError as exc:
        raise SystemExit(
            f"error: --trace-config mode=opentelemetry needs {exc.name}: install openinfer's 'otel' extra"
        ) from None
    except ValueError as exc:
        raise SystemExit(f"error: {exc}") from None
    except InvalidArgumentError as exc:
        raise SystemExit(f"error: {exc.message}") from None
    return Contribution(services={"trace": trace}, state=trace)

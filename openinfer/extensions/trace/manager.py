"""Triton's trace extension: sampling settings (global and per model) and JSON trace files.

Settings follow Triton's `TraceManager`: a global setting, per-model settings that fall back
to the global one field by field, `trace_rate` sampling, a `trace_count` budget, and
`log_frequency` flushes into `<trace_file>.<n>` files (otherwise everything goes to
`<trace_file>` at shutdown). A sampled request carries a `Trace` (`request.trace`); the core and
the schedulers stamp it, and it is written as Triton's JSON when the request ends. With tracing
off the request path pays one attribute check (`TraceManager.enabled`).
"""

from __future__ import annotations

import itertools
import logging
import re
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...core.errors import InvalidArgumentError, UnavailableError, UnsupportedError
from ...core.types import InferRequest
from .record import OFF, TENSORS, TIMESTAMPS, Trace

if TYPE_CHECKING:
    from .otel import OtelTrace

log = logging.getLogger("openinfer.trace")

_LEVEL_NAMES = {"TIMESTAMPS": TIMESTAMPS, "TENSORS": TENSORS}
_UINT32_MAX = 2**32 - 1
_INT32_MAX = 2**31 - 1
_FIELDS = ("level", "rate", "count", "log_frequency", "file")
_STOI = re.compile(r"\s*[+-]?\d+")


def level_names(level: int) -> list[str]:
    if level == OFF:
        return ["OFF"]
    return [name for name, bit in _LEVEL_NAMES.items() if level & bit]


class TraceFile:
    """One output path: numbered files for periodic flushes, the path itself at shutdown."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._index = itertools.count()
        self._main: Any = None
        self._lock = threading.Lock()

    def save(self, traces: list[str], to_index_file: bool) -> None:
        try:
            if to_index_file:
                with open(f"{self.path}.{next(self._index)}", "w", encoding="utf-8") as out:
                    out.write("[" + ",".join(traces) + "]")
                return
            with self._lock:
                if self._main is None:
                    self._main = open(self.path, "w", encoding="utf-8")
                    self._main.write("[")
                else:
                    self._main.write(",")
                self._main.write(",".join(traces))
                self._main.flush()
        except OSError as exc:
            log.error("failed creating trace file: %s", exc)

    def close(self) -> None:
        with self._lock:
            if self._main is not None:
                self._main.write("]")
                self._main.close()
                self._main = None


@dataclass(eq=False)
class TraceSetting:
    """The settings of one scope and the sampling state of the traces taken under them."""

    level: int
    rate: int
    count: int
    log_frequency: int
    file: TraceFile
    specified: frozenset[str] = frozenset()
    sampled: int = 0
    created: int = 0
    collected: int = 0
    pending: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    mode: str = "triton"  # or "opentelemetry": spans are exported, no file is written

    @property
    def invalid_reason(self) -> str:
        if self.level == OFF:
            return "tracing is disabled"
        if self.rate == 0:
            return "sample rate must be non-zero"
        if self.mode == "triton" and not self.file.path:
            return "trace file name is not given"
        return ""

    @property
    def active(self) -> bool:
        """Could sample at all (the count budget aside)."""
        return not self.invalid_reason

    def take(self) -> bool:
        """Count a request; True when it is the one in `rate` to trace and the budget allows."""
        with self.lock:
            if self.invalid_reason or self.count == 0:
                return False
            self.sampled += 1
            if self.sampled % self.rate != 0:
                return False
            if self.count > 0:
                self.count -= 1
                self.created += 1
            return True

    def write(self, trace_json: str) -> None:
        with self.lock:
            self.pending.append(trace_json)
            self.collected += 1
            flush = (self.count == 0 and self.collected >= self.created) or (
                self.log_frequency != 0 and len(self.pending) >= self.log_frequency
            )
            if not flush:
                return
            chunks, self.pending = self.pending, []
        self.file.save(chunks, to_index_file=True)

    def retire(self) -> None:
        """Replaced or shutting down: what is left goes out (numbered file if periodic)."""
        with self.lock:
            chunks, self.pending = self.pending, []
        if chunks:
            self.file.save(chunks, to_index_file=self.log_frequency != 0)

    def as_dict(self) -> dict[str, Any]:
        """Triton's settings response, keys in its order."""
        return {
            "trace_level": level_names(self.level),
            "trace_rate": str(self.rate),
            "trace_count": str(self.count),
            "log_frequency": str(self.log_frequency),
            "trace_file": self.file.path,
            "trace_mode": self.mode,
        }


# ----------------------------------------------------------------------------- settings
def _parse_int(key: str, text: str, low: int, high: int) -> int:
    match = _STOI.match(text)  # std::stoi: leading integer, trailing text ignored
    if match is None:
        raise InvalidArgumentError(f"Unable to parse '{key}', got: {text}")
    value = int(match.group())
    if key == "trace_count" and value < low:
        raise InvalidArgumentError(
            f"Unable to parse 'trace_count'. Expecting value >= {low}, got:{text}"
        )
    if not low <= value <= high:
        raise InvalidArgumentError(
            f"Unable to parse '{key}', value is out of range [ {low}, {high} ], got: {text}"
        )
    return value


def parse_update(values: dict[str, list[str] | None]) -> tuple[dict[str, int], set[str]]:
    """A settings update (each value a list of strings, None to clear) -> (new values, cleared)."""
    if "trace_file" in values:
        raise UnsupportedError("trace file location can not be updated through network protocol")
    new: dict[str, int] = {}
    clear: set[str] = set()
    for key, target, low, high in (
        ("trace_rate", "rate", 0, _UINT32_MAX),
        ("trace_count", "count", -1, _INT32_MAX),
        ("log_frequency", "log_frequency", 0, _UINT32_MAX),
    ):
        if key not in values:
            continue
        value = values[key]
        if value is None:
            clear.add(target)
        else:
            new[target] = _parse_int(key, value[0], low, high)
    if "trace_level" in values:
        levels = values["trace_level"]
        if levels is None:
            clear.add("level")
        else:
            level, given = OFF, False
            for name in levels:
                if name == "OFF":
                    if len(levels) != 1:
                        raise InvalidArgumentError("Expect only one trace level 'OFF' is specified")
                    level, given = OFF, True
                elif name in _LEVEL_NAMES:
                    level |= _LEVEL_NAMES[name]
                    given = True
                else:  # Triton ignores it and answers 200: a typo would silently change nothing
                    raise InvalidArgumentError(
                        f"unknown trace level '{name}', expected 'OFF', 'TIMESTAMPS' or 'TENSORS'"
                    )
            if given:
                new["level"] = level
    for mode in values.get("trace_mode") or ():
        if mode != "triton":  # read-only: the one mode this server traces in
            raise InvalidArgumentError(
                f"unsupported trace mode '{mode}', the trace mode is 'triton' and cannot be changed"
            )
    return new, clear


class TraceManager:
    """Global and per-model trace settings; hands out traces for sampled requests."""

    def __init__(
        self,
        level: int = OFF,
        rate: int = 1000,
        count: int = -1,
        log_frequency: int = 0,
        file: str = "",
    ) -> None:
        self._files: dict[str, TraceFile] = {}
        self.global_default = TraceSetting(level, rate, count, log_frequency, self._file(file))
        self.global_setting = TraceSetting(level, rate, count, log_frequency, self._file(file))
        self.model_settings: dict[str, TraceSetting] = {}
        self._fallback_models: set[str] = set()
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self.enabled = False
        #: The OpenTelemetry exporter in `mode=opentelemetry` (`core.observability.otel`); None in Triton mode.
        self.otel: Any = None
        self._refresh()

    @property
    def propagates_context(self) -> bool:
        """A client's W3C trace context is kept in OpenTelemetry mode, where spans hang from it."""
        return self.otel is not None

    def use_opentelemetry(self, tracing: Any) -> None:
        """Spans to `tracing` (`otel.OtelTracing`) instead of JSON files."""
        self.otel = tracing
        for setting in (self.global_default, self.global_setting):
            setting.mode = "opentelemetry"
        self._refresh()

    @classmethod
    def from_cli(cls, specs: list[str]) -> TraceManager:
        """`--trace-config [<mode>,]<setting>=<value>` as tritonserver parses it."""
        level, rate, count, frequency, path = OFF, 1000, -1, 0, ""
        for spec in specs:
            head, eq, value = spec.partition("=")
            mode, _, key = head.rpartition(",")
            if not eq or not key:
                raise ValueError(
                    f"--trace-config '{spec}' must look like [<mode>,]<setting>=<value>"
                )
            if mode == "opentelemetry" or (not mode and key == "mode" and value != "triton"):
                raise ValueError("only the 'triton' trace mode is supported")
            try:
                if mode == "triton" and key == "file":
                    path = value
                elif mode == "triton" and key == "log-frequency":
                    frequency = int(value)
                elif not mode and key == "rate":
                    rate = int(value)
                elif not mode and key == "count":
                    count = int(value)
                elif not mode and key == "level":
                    if value.upper() == "OFF":
                        level = OFF
                    elif value.upper() in _LEVEL_NAMES:
                        level |= _LEVEL_NAMES[value.upper()]
                    else:
                        raise ValueError(
                            f"unknown trace level '{value}' (OFF, TIMESTAMPS, TENSORS)"
                        )
                elif not (not mode and key == "mode"):
                    raise ValueError(f"unknown trace setting '{spec}'")
            except ValueError as exc:
                if "invalid literal" in str(exc):
                    raise ValueError(
                        f"--trace-config '{spec}': '{value}' is not an integer"
                    ) from None
                raise
        if rate < 0 or count < -1 or frequency < 0:
            raise ValueError("--trace-config: rate and log-frequency must be >= 0, count >= -1")
        return cls(level, rate, count, frequency, path)

    def _file(self, path: str) -> TraceFile:
        file = self._files.get(path)
        if file is None:
            file = self._files[path] = TraceFile(path)
        return file

    def _refresh(self) -> None:
        self.enabled = self.global_setting.active or any(
            s.active for s in self.model_settings.values()
        )
        if self.otel is not None:  # a propagated context is traced whatever the rate
            self.enabled = any(s.level != OFF for s in (self.global_setting, *self.model_settings.values()))

    # --------------------------------------------------------------- settings
    def setting_for(self, model_name: str = "") -> TraceSetting:
        return (
            self.model_settings.get(model_name, self.global_setting)
            if model_name
            else self.global_setting
        )

    def settings(self, model_name: str = "") -> dict[str, Any]:
        return self.setting_for(model_name).as_dict()

    def update(self, model_name: str, new: dict[str, int], clear: set[str]) -> dict[str, Any]:
        with self._lock:
            self._update(model_name, new, clear)
            if not model_name:  # models that mirror the global setting follow it
                for name in list(self._fallback_models):
                    self._update(name, {}, set())
            self._refresh()
        return self.settings(model_name)

    def _update(self, model_name: str, new: dict[str, Any], clear: set[str]) -> None:
        current = self.model_settings.get(model_name) if model_name else self.global_setting
        fallback = self.global_setting if model_name else self.global_default
        values: dict[str, Any] = {f: getattr(fallback, f) for f in _FIELDS}
        specified = set()
        for name in _FIELDS:
            if name in clear:
                continue
            if name in new or (current is not None and name in current.specified):
                values[name] = new[name] if name in new else getattr(current, name)
                specified.add(name)
        if model_name:
            if not specified:
                retired = self.model_settings.pop(model_name, None)
                self._fallback_models.discard(model_name)
                if retired is not None:
                    retired.retire()
                return
            if specified == set(_FIELDS):
                self._fallback_models.discard(model_name)
            else:
                self._fallback_models.add(model_name)
        setting = TraceSetting(
            values["level"],
            values["rate"],
            values["count"],
            values["log_frequency"],
            values["file"],
            frozenset(specified),
            mode="opentelemetry" if self.otel is not None else "triton",
        )
        if setting.invalid_reason and setting.level != OFF:
            raise InvalidArgumentError(
                f"Attempting to set invalid trace setting :{setting.invalid_reason}"
            )
        if model_name:
            old = self.model_settings.get(model_name)
            self.model_settings[model_name] = setting
        else:
            old, self.global_setting = self.global_setting, setting
        if old is not None:
            old.retire()

    # ---------------------------------------------------------------- sampling
    def sample(self, request: InferRequest, model: Any) -> Trace | OtelTrace | None:
        """A trace for this request if its model's scope samples it (set on `request.trace`)."""
        setting = self.setting_for(model.name)
        if self.otel is not None:
            from .otel import sample

            return sample(self.otel, setting, self._ids, request, model)
        if not setting.take():
            return None
        trace = Trace(next(self._ids), setting, model.name, int(model.version), request.id)
        trace.stamp("REQUEST_START", request.arrival_ns)
        request.trace = trace
        return trace

    def close(self) -> None:
        """Flush every pending trace and close the files (server shutdown)."""
        with self._lock:
            for setting in (self.global_setting, *self.model_settings.values()):
                setting.retire()
            for file in self._files.values():
                file.close()
        if self.otel is not None:
            self.otel.close()


def of(server: Any) -> TraceManager:
    """The server's trace manager: the trace feature's state."""
    manager = server.feature_state("trace")
    if not isinstance(manager, TraceManager):
        raise UnavailableError("trace settings are not available")
    return manager

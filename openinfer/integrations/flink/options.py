"""The `WITH (...)` options of a `'provider'='triton'` model: names, types, defaults, validation.

The twelve keys of `PROVIDER_OPTIONS` are those of Flink's `flink-model-triton` provider, with
its names and defaults (`model-version` `latest`, `timeout` `30s`, `flatten-batch-dim`,
`sequence-start` and `sequence-end` `false`), so the same `CREATE MODEL` statement works with the
Java provider and with this package. Values are parsed the way Flink parses them (durations like
`10s` / `30000ms`, booleans `true` / `false`, maps as `'K:V,K2:V2'`), and every value is checked
here, at registration, rather than at the first row.

`EXTENSIONS` are keys of this package only (the Java provider refuses them): retries and
`default-value`, the health check and circuit breaker, `sequence-id-auto-increment`, and
`mode`, `batch-size` and `tensor-name-case`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NoReturn
from urllib.parse import urlsplit

from openinfer.integrations.flink.errors import TritonConfigError

PROVIDER = "triton"

#: Modes of the generated Python function (an extension of this package).
MODES = ("async", "pandas", "row")

_REQUIRED = ("endpoint", "model-name")
#: The optional keys of the Java provider's options class.
PROVIDER_OPTIONS = (
    "model-version",
    "timeout",
    "flatten-batch-dim",
    "priority",
    "sequence-id",
    "sequence-start",
    "sequence-end",
    "compression",
    "auth-token",
    "custom-headers",
)
#: Keys of this package only.
EXTENSIONS = (
    "sequence-id-auto-increment",
    "max-retries",
    "retry-initial-backoff",
    "retry-max-backoff",
    "default-value",
    "health-check-enabled",
    "health-check-interval",
    "circuit-breaker-enabled",
    "circuit-breaker-failure-threshold",
    "circuit-breaker-timeout",
    "circuit-breaker-half-open-requests",
    "mode",
    "batch-size",
    "tensor-name-case",
)
#: Every key a triton model may carry ('provider' itself included).
SUPPORTED_KEYS = frozenset(("provider", *_REQUIRED, *PROVIDER_OPTIONS, *EXTENSIONS))


@dataclass(frozen=True)
class TritonOptions:
    """Validated options of one model; durations are in seconds."""

    endpoint: str
    model_name: str
    #: `latest` (the provider's default): the newest ready version, asked for with the
    #: unversioned URL, which Triton and openinfer both serve (Triton has no `/versions/latest`).
    model_version: str = "latest"
    timeout: float = 30.0
    flatten_batch_dim: bool = False
    priority: int | None = None
    sequence_id: str | None = None
    sequence_id_auto_increment: bool = False
    sequence_start: bool = False
    sequence_end: bool = False
    compression: str | None = None
    auth_token: str | None = None
    custom_headers: tuple[tuple[str, str], ...] = ()
    max_retries: int = 0
    retry_initial_backoff: float = 0.1
    retry_max_backoff: float = 30.0
    #: The raw string; it is parsed against the output column's type by `types.parse_default`.
    default_value: str | None = None
    health_check_enabled: bool = False
    health_check_interval: float = 30.0
    circuit_breaker_enabled: bool = False
    circuit_breaker_failure_threshold: float = 0.5
    circuit_breaker_timeout: float = 60.0
    circuit_breaker_half_open_requests: int = 3
    mode: str = "async"
    batch_size: int | None = None
    tensor_name_case: str = "preserve"


def parse_options(raw: Mapping[str, str], *, model: str = "<model>") -> TritonOptions:
    """Validate a model's option map (as stored in the catalog) into `TritonOptions`.

    Raises `TritonConfigError` naming the model and the option, for unknown keys too.
    """
    provider = raw.get("provider")
    if provider is not None and provider.strip().lower() != PROVIDER:
        raise TritonConfigError(f"model '{model}': 'provider' is '{provider}', expected 'triton'")
    unknown = sorted(set(raw) - SUPPORTED_KEYS)
    if unknown:
        raise TritonConfigError(
            f"model '{model}': unsupported options for provider 'triton': {', '.join(unknown)}. "
            f"Supported options: {', '.join(sorted(SUPPORTED_KEYS))}"
        )
    missing = [key for key in _REQUIRED if not (raw.get(key) or "").strip()]
    if missing:
        raise TritonConfigError(
            f"model '{model}': missing required option(s): {', '.join(missing)}"
        )
    p = _Parser(raw, model)
    options = TritonOptions(
        endpoint=_endpoint(p, raw["endpoint"].strip()),
        model_name=raw["model-name"].strip(),
        model_version=p.version("model-version"),
        timeout=p.duration("timeout", 30.0, positive=True),
        flatten_batch_dim=p.boolean("flatten-batch-dim", False),
        priority=p.optional_integer("priority", low=0, high=255),
        sequence_id=p.string("sequence-id"),
        sequence_id_auto_increment=p.boolean("sequence-id-auto-increment", False),
        sequence_start=p.boolean("sequence-start", False),
        sequence_end=p.boolean("sequence-end", False),
        compression=p.optional_choice("compression", ("gzip",)),
        auth_token=p.string("auth-token"),
        custom_headers=p.headers("custom-headers"),
        max_retries=p.integer("max-retries", 0, low=0),
        retry_initial_backoff=p.duration("retry-initial-backoff", 0.1),
        retry_max_backoff=p.duration("retry-max-backoff", 30.0),
        default_value=raw.get("default-value"),
        health_check_enabled=p.boolean("health-check-enabled", False),
        health_check_interval=p.duration("health-check-interval", 30.0),
        circuit_breaker_enabled=p.boolean("circuit-breaker-enabled", False),
        circuit_breaker_failure_threshold=p.number("circuit-breaker-failure-threshold", 0.5),
        circuit_breaker_timeout=p.duration("circuit-breaker-timeout", 60.0),
        circuit_breaker_half_open_requests=p.integer("circuit-breaker-half-open-requests", 3),
        mode=p.choice("mode", "async", MODES),
        batch_size=p.optional_integer("batch-size", low=1),
        tensor_name_case=p.choice("tensor-name-case", "preserve", ("preserve", "upper")),
    )
    _cross_checks(options, model)
    return options


def _cross_checks(o: TritonOptions, model: str) -> None:
    """Rules that involve several options, as the provider applies them."""

    def fail(message: str) -> NoReturn:
        raise TritonConfigError(f"model '{model}': {message}")

    if o.sequence_id_auto_increment and o.sequence_id is None:
        fail("'sequence-id-auto-increment' requires 'sequence-id' to be set")
    # Like the provider, backoff durations only matter (and are only checked) when retrying.
    if o.max_retries > 0:
        if o.retry_initial_backoff <= 0:
            fail("'retry-initial-backoff' must be a positive duration")
        if o.retry_max_backoff < o.retry_initial_backoff:
            fail("'retry-max-backoff' must be >= 'retry-initial-backoff'")
    if o.health_check_enabled and o.health_check_interval <= 0:
        fail("'health-check-interval' must be a positive duration")
    if o.circuit_breaker_enabled:
        if not 0.0 < o.circuit_breaker_failure_threshold <= 1.0:
            fail("'circuit-breaker-failure-threshold' must be in (0.0, 1.0]")
        if o.circuit_breaker_half_open_requests <= 0:
            fail("'circuit-breaker-half-open-requests' must be positive")
        if o.circuit_breaker_timeout <= 0:
            fail("'circuit-breaker-timeout' must be a positive duration")


def _endpoint(p: _Parser, value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        p.fail("endpoint", value, "an http:// or https:// URL with a host, e.g. http://triton:8000")
    try:
        parts.port  # noqa: B018 - raises on a malformed port
    except ValueError:
        p.fail("endpoint", value, "a URL with a numeric port")
    return value


class _Parser:
    """Flink-style conversion of one option at a time, with errors naming model and key."""

    def __init__(self, raw: Mapping[str, str], model: str) -> None:
        self.raw = raw
        self.model = model

    def fail(self, key: str, value: str, expected: str) -> NoReturn:
        raise TritonConfigError(
            f"model '{self.model}': invalid value '{value}' for option '{key}': expected {expected}"
        )

    def string(self, key: str) -> str | None:
        value = self.raw.get(key)
        return None if value is None else value

    def boolean(self, key: str, default: bool) -> bool:
        value = self.raw.get(key)
        if value is None:
            return default
        lowered = value.strip().lower()
        if lowered not in ("true", "false"):
            self.fail(key, value, "'true' or 'false'")
        return lowered == "true"

    def integer(self, key: str, default: int, *, low: int | None = None) -> int:
        value = self.optional_integer(key, low=low)
        return default if value is None else value

    def optional_integer(
        self, key: str, *, low: int | None = None, high: int | None = None
    ) -> int | None:
        value = self.raw.get(key)
        if value is None:
            return None
        if not re.fullmatch(r"[+-]?\d+", value.strip()):
            self.fail(key, value, "an integer")
        number = int(value.strip())
        if number > 2**31 - 1 or number < -(2**31):
            self.fail(key, value, "a 32-bit integer")
        if (low is not None and number < low) or (high is not None and number > high):
            bounds = f"between {low} and {high}" if high is not None else f">= {low}"
            self.fail(key, value, f"an integer {bounds}")
        return number

    def number(self, key: str, default: float) -> float:
        value = self.raw.get(key)
        if value is None:
            return default
        try:
            number = float(value.strip())
        except ValueError:
            number = math.nan
        if not math.isfinite(number):
            self.fail(key, value, "a number")
        return number

    def duration(self, key: str, default: float, *, positive: bool = False) -> float:
        value = self.raw.get(key)
        if value is None:
            return default
        seconds = parse_duration(value)
        if seconds is None:
            self.fail(key, value, "a duration such as '10s', '30000ms', '1 min' or 'PT10S'")
        if positive and seconds <= 0:
            self.fail(key, value, "a positive duration")
        return seconds

    def choice(self, key: str, default: str, allowed: tuple[str, ...]) -> str:
        value = self.optional_choice(key, allowed)
        return default if value is None else value

    def optional_choice(self, key: str, allowed: tuple[str, ...]) -> str | None:
        value = self.raw.get(key)
        if value is None:
            return None
        lowered = value.strip().lower()
        if lowered not in allowed:
            self.fail(key, value, "one of " + ", ".join(f"'{a}'" for a in allowed))
        return lowered

    def version(self, key: str) -> str:
        value = self.raw.get(key)
        if value is None:
            return "latest"
        stripped = value.strip()
        if stripped.lower() == "latest":
            return "latest"
        if not re.fullmatch(r"\d+", stripped) or int(stripped) < 1:
            self.fail(key, value, "'latest' or a version number >= 1")
        return str(int(stripped))

    def headers(self, key: str) -> tuple[tuple[str, str], ...]:
        value = self.raw.get(key)
        if value is None:
            return ()
        try:
            pairs = parse_map(value)
        except ValueError as exc:
            self.fail(key, value, f"'Key:Value,Key2:Value2' ({exc})")
        for name, header_value in pairs:
            if not re.fullmatch(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+", name):
                self.fail(key, value, f"valid HTTP header names, not '{name}'")
            if "\r" in header_value or "\n" in header_value:
                self.fail(key, value, "header values without line breaks")
        return tuple(pairs)


_UNITS = {
    "d": 86400.0, "day": 86400.0, "days": 86400.0,
    "h": 3600.0, "hour": 3600.0, "hours": 3600.0,
    "m": 60.0, "min": 60.0, "mins": 60.0, "minute": 60.0, "minutes": 60.0,
    "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0,
    "ms": 1e-3, "milli": 1e-3, "millis": 1e-3, "millisecond": 1e-3, "milliseconds": 1e-3,
    "µs": 1e-6, "us": 1e-6, "micro": 1e-6, "micros": 1e-6,
    "microsecond": 1e-6, "microseconds": 1e-6,
    "ns": 1e-9, "nano": 1e-9, "nanos": 1e-9, "nanosecond": 1e-9, "nanoseconds": 1e-9,
}  # fmt: skip
_ISO = re.compile(
    r"P(?:(?P<d>\d+(?:\.\d+)?)D)?"
    r"(?:T(?:(?P<h>\d+(?:\.\d+)?)H)?(?:(?P<m>\d+(?:\.\d+)?)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?",
    re.IGNORECASE,
)


def parse_duration(text: str) -> float | None:
    """Seconds in a Flink duration (`10s`, `30000ms`, `1 min`, `500` = ms, `PT1M`), else None."""
    stripped = text.strip()
    iso = _ISO.fullmatch(stripped)
    if iso and stripped.upper() not in ("P", "PT"):
        parts = {k: float(v) for k, v in iso.groupdict().items() if v}
        return (
            parts.get("d", 0) * 86400
            + parts.get("h", 0) * 3600
            + parts.get("m", 0) * 60
            + parts.get("s", 0)
        )
    match = re.fullmatch(r"(\d+)\s*([a-zA-Zµ]*)", stripped)
    if not match:
        return None
    unit = match.group(2).lower()
    if unit == "":
        return int(match.group(1)) * 1e-3
    if unit not in _UNITS:
        return None
    return int(match.group(1)) * _UNITS[unit]


def parse_map(text: str) -> list[tuple[str, str]]:
    """Flink's map syntax `K:V,K2:V2`. A key or value holding `,` or `:` can be quoted
    (`'X-Url':'http://a:1'`, a doubled quote escapes itself); in an unquoted value, colons after
    the first are kept (`Authorization:Basic a:b`)."""
    pairs: list[tuple[str, str]] = []
    fields: list[str] = [""]
    quoted: list[bool] = [False]
    i = 0
    while i <= len(text):
        char = text[i] if i < len(text) else ","
        if char in ("'", '"') and not quoted[-1] and not fields[-1].strip():
            fields[-1], i = _quoted(text, i)
            quoted[-1] = True
            continue
        if char == ",":
            if any(f.strip() for f in fields) or any(quoted):
                if len(fields) != 2:
                    raise ValueError(f"entry '{':'.join(fields)}' is not Key:Value")
                key, value = (f if q else f.strip() for f, q in zip(fields, quoted))
                pairs.append((key, value))
            fields, quoted = [""], [False]
        elif char == ":" and len(fields) == 1:
            fields.append("")
            quoted.append(False)
        elif quoted[-1]:
            if not char.isspace():
                raise ValueError(f"text after a closing quote in '{text}'")
        else:
            fields[-1] += char
        i += 1
    return pairs


def _quoted(text: str, start: int) -> tuple[str, int]:
    """The content of the quoted token at `start` and the index just past its closing quote."""
    quote, end, value = text[start], start + 1, []
    while True:
        if end >= len(text):
            raise ValueError(f"unterminated quote in '{text}'")
        if text[end] == quote:
            if end + 1 < len(text) and text[end + 1] == quote:
                value.append(quote)
                end += 2
                continue
            return "".join(value), end + 1
        value.append(text[end])
        end += 1

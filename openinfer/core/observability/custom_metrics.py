"""Custom metric families that models create at run time (`pb_utils.MetricFamily`).

The rules are Triton's (its core wraps prometheus-cpp 1.0 with a merging registry):

* A family is known by its name. Asking for a name again with the same kind gives the
  family already there, keeping the first description; another kind is refused. Triton
  never takes a family out of its registry, so the kind and description a name first got
  stay with it for the server's lifetime; a family with no series prints nothing.
* A series is known by its label set within its family. Creating it again shares it; it
  leaves the exposition when the last reference to it is released. A histogram series
  keeps the buckets it was first created with.
* Releasing the last reference an owner holds on a family also releases the metrics made
  through it (the Python backend clears a family's metrics before deleting the family);
  those metric ids then fail every operation with the message a Triton model sees.

Ids: `create_family` gives one id per (owner, name), reference counted, so every owner's
metrics can be released when its model version unloads; `create_metric` gives a new id per
call, each one reference on the shared series.

The text is what prometheus-cpp prints: `# HELP` (left out for an empty description) and
`# TYPE`, labels sorted by name, numbers as `%.16g` (`+Inf`, `-Inf`, `Nan`), histograms as
`_count`, `_sum`, then cumulative `_bucket` lines with `le` up to `+Inf`. Families come out
counters first, then gauges, then histograms, each group in creation order.
"""

from __future__ import annotations

import bisect
import itertools
import math
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..errors import InvalidArgumentError, UnsupportedError

COUNTER, GAUGE, HISTOGRAM = "COUNTER", "GAUGE", "HISTOGRAM"
_KINDS = (COUNTER, GAUGE, HISTOGRAM)
_TYPE_WORD = {COUNTER: "counter", GAUGE: "gauge", HISTOGRAM: "histogram"}
_LABEL_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_NAME_CHARS = _LABEL_CHARS | {":"}

# Triton's messages (core src/metric_family.cc, prometheus-cpp, the Python backend's stub).
KIND_CONFLICT = "Family name already exists with different type"
INVALID_NAME = "Invalid metric name"
INVALID_LABEL = "Invalid label name"
LABEL_NOT_STRING = "attempt to access JSON non-string as string"
UNSUPPORTED_KIND = "Unsupported kind passed to MetricFamily constructor."
MISSING_BUCKETS = "Bucket boundaries not found in Metric args."
UNSORTED_BUCKETS = "Bucket Boundaries must be strictly sorted"
NEGATIVE_COUNTER = (
    "TRITONSERVER_METRIC_KIND_COUNTER can only be incremented monotonically by non-negative values."
)
FAMILY_DELETED = (
    "Invalid metric operation as the corresponding 'MetricFamily' has been deleted. "
    "The 'MetricFamily' object should be deleted AFTER its corresponding 'Metric' objects "
    "have been deleted."
)


def _unexpected_buckets(kind: str) -> str:
    return f"Unexpected args found in {kind.lower()} Metric constructor."


def _unsupported(kind: str, operation: str) -> str:
    return f"TRITONSERVER_METRIC_KIND_{kind} does not support {operation}"


def _valid_name(name: str, chars: frozenset[str]) -> bool:
    return bool(name) and not name[0].isdigit() and not name.startswith("__") and set(name) <= chars


@dataclass(eq=False)
class _Series:
    labels: tuple[tuple[str, str], ...]  # sorted by name
    bounds: tuple[float, ...] = ()  # histogram upper bounds, +Inf implied
    value: float = 0.0  # counter / gauge; histogram: the sum
    counts: list[int] = field(default_factory=list)  # histogram: per bucket, +Inf last
    refs: int = 0


@dataclass(eq=False)
class _Family:
    name: str
    description: str
    kind: str
    series: dict[tuple[tuple[str, str], ...], _Series] = field(default_factory=dict)


@dataclass(eq=False)
class _Handle:
    """One owner's references on one family."""

    id: int
    owner: str
    family: _Family
    refs: int = 0
    metrics: set[int] = field(default_factory=set)


@dataclass(eq=False)
class _Metric:
    id: int
    handle: _Handle
    series: _Series


class CustomMetrics:
    """Metric families that models create at run time, exported beside the nv_* families."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._families: dict[str, _Family] = {}  # by name; never removed (as in Triton)
        self._handles: dict[int, _Handle] = {}
        self._handle_of: dict[tuple[str, str], int] = {}  # (owner, name) -> handle id
        self._metrics: dict[int, _Metric] = {}
        self._orphans: dict[int, str] = {}  # metric id -> owner, its family released first
        self._reserved: dict[str, str] = {}  # the server's own family names -> type word

    # ------------------------------------------------------------------ families
    def reserve(self, kinds: Mapping[str, str]) -> None:
        """Names the server prints itself (name -> counter/gauge/histogram/summary).

        In Triton a model's family joins the server's own family of that name when the
        kinds agree; here both would be printed apart, so such a name is refused instead.
        """
        with self._lock:
            self._reserved.update({name: kind.lower() for name, kind in kinds.items()})

    def create_family(self, owner: str, name: str, description: str, kind: str) -> int:
        kind = kind.upper() if isinstance(kind, str) else kind
        if kind not in _KINDS:
            raise InvalidArgumentError(UNSUPPORTED_KIND)
        with self._lock:
            family = self._families.get(name)
            if family is None:
                builtin = self._reserved.get(name)
                if builtin is not None:
                    if builtin != _TYPE_WORD[kind]:
                        raise InvalidArgumentError(KIND_CONFLICT)
                    raise InvalidArgumentError(
                        f"metric family '{name}' is one of the server's own families; "
                        "a model cannot add to it"
                    )
                if not isinstance(name, str) or not _valid_name(name, _NAME_CHARS):
                    raise InvalidArgumentError(INVALID_NAME)
                family = self._families[name] = _Family(name, str(description), kind)
            elif family.kind != kind:
                raise InvalidArgumentError(KIND_CONFLICT)
            key = (owner, name)
            handle_id = self._handle_of.get(key)
            if handle_id is None:
                handle_id = next(self._ids)
                self._handles[handle_id] = _Handle(handle_id, owner, family)
                self._handle_of[key] = handle_id
            self._handles[handle_id].refs += 1
            return handle_id

    def release_family(self, family_id: int) -> None:
        """Drop one reference; the owner's last one also releases the metrics made through it."""
        with self._lock:
            handle = self._handle(family_id)
            handle.refs -= 1
            if handle.refs <= 0:
                self._drop_handle(handle, orphan=True)

    def release_owner(self, owner: str) -> None:
        """Everything `owner` still holds (its model version unloaded). Unknown owners: nothing."""
        with self._lock:
            for handle in [h for h in self._handles.values() if h.owner == owner]:
                self._drop_handle(handle, orphan=False)
            for metric_id in [m for m, o in self._orphans.items() if o == owner]:
                del self._orphans[metric_id]

    # ------------------------------------------------------------------- metrics
    def create_metric(
        self,
        family_id: int,
        labels: Mapping[str, str] | None,
        buckets: Iterable[float] | None = None,
    ) -> int:
        """A metric on the series with these labels (`None`: no labels), created at zero if new.

        Checked in Triton's order: label values, buckets against the kind, bucket order, then
        (for a new series) label names.
        """
        with self._lock:
            handle = self._handle(family_id)
            family = handle.family
            pairs = tuple(sorted((labels or {}).items(), key=lambda pair: str(pair[0])))
            if any(not isinstance(value, str) for _, value in pairs):
                raise InvalidArgumentError(LABEL_NOT_STRING)
            bounds: tuple[float, ...] = ()
            if family.kind == HISTOGRAM:
                if buckets is None:
                    raise InvalidArgumentError(MISSING_BUCKETS)
                bounds = tuple(_float(b) for b in buckets)
                if any(a >= b for a, b in zip(bounds, bounds[1:])):
                    raise InvalidArgumentError(UNSORTED_BUCKETS)
            elif buckets is not None:
                raise InvalidArgumentError(_unexpected_buckets(family.kind))
            series = family.series.get(pairs)
            if series is None:
                for name, _ in pairs:
                    if not isinstance(name, str) or not _valid_name(name, _LABEL_CHARS):
                        raise InvalidArgumentError(INVALID_LABEL)
                series = _Series(pairs, bounds)
                if family.kind == HISTOGRAM:
                    series.counts = [0] * (len(bounds) + 1)
                family.series[pairs] = series
            series.refs += 1
            metric_id = next(self._ids)
            self._metrics[metric_id] = _Metric(metric_id, handle, series)
            handle.metrics.add(metric_id)
            return metric_id

    def release_metric(self, metric_id: int) -> None:
        with self._lock:
            if self._orphans.pop(metric_id, None) is not None:
                return  # already released with its family
            metric = self._metric(metric_id)
            metric.handle.metrics.discard(metric_id)
            self._drop_metric(metric)

    def increment(self, metric_id: int, value: float) -> None:
        with self._lock:
            metric = self._metric(metric_id)
            kind = metric.handle.family.kind
            if kind == HISTOGRAM:
                raise UnsupportedError(_unsupported(kind, "Increment"))
            value = _float(value)
            if kind == COUNTER and value < 0.0:
                raise InvalidArgumentError(NEGATIVE_COUNTER)
            metric.series.value += value

    def set(self, metric_id: int, value: float) -> None:
        with self._lock:
            metric = self._metric(metric_id)
            kind = metric.handle.family.kind
            if kind != GAUGE:
                raise UnsupportedError(_unsupported(kind, "Set"))
            metric.series.value = _float(value)

    def observe(self, metric_id: int, value: float) -> None:
        with self._lock:
            metric = self._metric(metric_id)
            kind = metric.handle.family.kind
            if kind != HISTOGRAM:
                raise UnsupportedError(_unsupported(kind, "Observe"))
            series = metric.series
            value = _float(value)
            series.counts[bisect.bisect_left(series.bounds, value)] += 1  # le: bound inclusive
            series.value += value

    def value(self, metric_id: int) -> float:
        with self._lock:
            metric = self._metric(metric_id)
            kind = metric.handle.family.kind
            if kind == HISTOGRAM:
                raise UnsupportedError(_unsupported(kind, "Value"))
            return metric.series.value

    # ---------------------------------------------------------------- exposition
    def exposition(self) -> str:
        """Prometheus text of every family that has a series; "" when none has."""
        lines: list[str] = []
        with self._lock:
            families = sorted(self._families.values(), key=lambda f: _KINDS.index(f.kind))
            for family in families:
                if not family.series:
                    continue
                name = family.name
                if family.description:  # written as is, but a line break would end the line
                    lines.append(f"# HELP {name} " + family.description.replace("\n", "\\n"))
                lines.append(f"# TYPE {name} {_TYPE_WORD[family.kind]}")
                for series in family.series.values():
                    labels = ",".join(f'{k}="{_escape(v)}"' for k, v in series.labels)
                    if family.kind != HISTOGRAM:
                        lines.append(f"{name}{_braces(labels)} {_number(series.value)}")
                        continue
                    total = sum(series.counts)
                    lines.append(f"{name}_count{_braces(labels)} {total}")
                    lines.append(f"{name}_sum{_braces(labels)} {_number(series.value)}")
                    prefix = labels + "," if labels else ""
                    cumulative = 0
                    for bound, count in zip((*series.bounds, math.inf), series.counts):
                        cumulative += count
                        lines.append(f'{name}_bucket{{{prefix}le="{_number(bound)}"}} {cumulative}')
        return "".join(line + "\n" for line in lines)

    # ------------------------------------------------------------------- helpers
    def _handle(self, family_id: int) -> _Handle:
        handle = self._handles.get(family_id)
        if handle is None:
            raise InvalidArgumentError(f"unknown or released metric family id {family_id}")
        return handle

    def _metric(self, metric_id: int) -> _Metric:
        metric = self._metrics.get(metric_id)
        if metric is None:
            if metric_id in self._orphans:
                raise InvalidArgumentError(FAMILY_DELETED)
            raise InvalidArgumentError(f"unknown or released metric id {metric_id}")
        return metric

    def _drop_metric(self, metric: _Metric) -> None:
        del self._metrics[metric.id]
        series = metric.series
        series.refs -= 1
        if series.refs <= 0:
            metric.handle.family.series.pop(series.labels, None)

    def _drop_handle(self, handle: _Handle, orphan: bool) -> None:
        for metric_id in handle.metrics:
            self._drop_metric(self._metrics[metric_id])
            if orphan:
                self._orphans[metric_id] = handle.owner
        handle.metrics.clear()
        del self._handles[handle.id]
        del self._handle_of[(handle.owner, handle.family.name)]


def _float(value: object) -> float:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"a metric value must be a number, got {value!r}") from None


def _braces(labels: str) -> str:
    return f"{{{labels}}}" if labels else ""


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    """A double as prometheus-cpp's text serializer writes it (C++ stream, precision 16)."""
    if math.isnan(value):
        return "Nan"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return format(value, ".16g")

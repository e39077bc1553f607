"""Custom metrics: families and metrics a model creates, exported on the server's metrics port.

The objects are handles: the values live in the server, so several worker processes of one
model add up, and a handle that is garbage-collected releases its series as Triton's do.
"""

from __future__ import annotations

import enum
from typing import Any

from . import _host
from .errors import TritonModelException


class MetricKind(enum.IntEnum):
    COUNTER = 0
    GAUGE = 1
    HISTOGRAM = 2


class Metric:
    """One labelled series of a family."""

    __slots__ = ("_host", "_id", "__weakref__")

    def __init__(self, family: MetricFamily, metric_id: int) -> None:
        # No reference to the family: as in Triton, deleting the family object releases it,
        # and its metrics then refuse every operation.
        self._host = family._host
        self._id = metric_id

    def increment(self, value: float) -> None:
        _call(self._host, "Failed to increment metric value: ", "metric_increment", self._id, float(value))

    def set(self, value: float) -> None:
        _call(self._host, "Failed to set metric value: ", "metric_set", self._id, float(value))

    def observe(self, value: float) -> None:
        _call(self._host, "Failed to observe metric value: ", "metric_observe", self._id, float(value))

    def value(self) -> float:
        return _call(self._host, "Failed to get metric value: ", "metric_value", self._id)

    def __del__(self) -> None:
        _release(self._host, "metric_release", self._id)


class MetricFamily:
    COUNTER = MetricKind.COUNTER
    GAUGE = MetricKind.GAUGE
    HISTOGRAM = MetricKind.HISTOGRAM

    def __init__(self, name: str, description: str, kind: MetricKind) -> None:
        self._id: int | None = None
        self._host = _host.current()
        self._kind = MetricKind(kind)
        self._id = _call(self._host, "Error when creating MetricFamily: ", "metric_family", str(name),
                         str(description), self._kind.name)

    def Metric(self, labels: dict[str, str] | None = None, buckets: list[float] | None = None) -> Metric:  # noqa: N802 - Triton's name
        if labels is not None and not isinstance(labels, dict):
            raise TritonModelException("Failed to create metric. Labels must be a dictionary.")
        if buckets is not None and not isinstance(buckets, list):
            raise TritonModelException("Failed to create metric. Buckets must be a list.")
        if self._kind == MetricKind.HISTOGRAM and buckets is None:
            raise TritonModelException("Failed to create metric. Missing required buckets.")
        if self._kind != MetricKind.HISTOGRAM and buckets is not None:
            raise TritonModelException("Failed to create metric. Unexpected buckets found.")
        metric_id = _call(self._host, "Error when creating Metric: ", "metric_create", self._id,
                          dict(labels or {}), buckets)
        return Metric(self, metric_id)

    def __del__(self) -> None:
        if self._id is not None:
            _release(self._host, "metric_family_release", self._id)


def _call(host: _host.Host, prefix: str, kind: str, *args: object) -> Any:
    try:
        return host.call(kind, *args)
    except TritonModelException as exc:
        raise TritonModelException(prefix + str(exc)) from None


def _release(host: _host.Host, kind: str, handle: int) -> None:
    try:
        host.call(kind, handle)
    except Exception:
        pass  # the server or its channel is already gone: so is the series

"""Triton's statistics extension: per model version counts and times.

The numbers are gathered by the core as requests run (`core/observability/stats.py`) and shaped by
`InferenceServer.statistics`; this package is the extension's endpoints.
"""

from __future__ import annotations

from ...features.contract import Feature
from .grpc import StatisticsRpcs
from .http import install

FEATURE = Feature(
    name="statistics", extensions=("statistics",), group="statistics",
    http=install, grpc=StatisticsRpcs,
)

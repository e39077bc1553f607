"""Triton's trace extension: read and change trace settings, server-wide or per model.

Sampling and recording happen on the core's infer path (`core/observability/trace.py`,
`core/observability/trace_record.py`); this package is
the extension's flags, what it makes of them, and its endpoints.
"""

from __future__ import annotations

from ...features.contract import Feature
from .flags import add_flags, configure
from .grpc import TraceRpcs
from .http import install

FEATURE = Feature(
    name="trace", extensions=("trace",), group="trace",
    flags=add_flags, configure=configure, http=install, grpc=TraceRpcs,
)

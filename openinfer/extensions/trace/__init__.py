"""Triton's trace extension: read and change trace settings, server-wide or per model.

The trace manager (`manager.py`: settings, sampling, Triton's trace files; `record.py`: a
request's timestamps and tensors; `otel.py`: OpenTelemetry spans) is this feature's state. Its
flags make it, its endpoints change it, and the core samples every request through it as its
`core/observability/tracing.py: Tracer`.
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

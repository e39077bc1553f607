"""Triton's trace extension: read and change trace settings, server-wide or per model.

Sampling and recording happen on the core's infer path (`core/observability/trace.py`,
`core/observability/trace_record.py`); this package is the extension's endpoints.
"""

from __future__ import annotations

from ..spec import ProtocolExtension
from .grpc import TraceRpcs
from .http import install

EXTENSION = ProtocolExtension(names=("trace",), group="trace", http=install, grpc=TraceRpcs)

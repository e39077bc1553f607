"""Triton's logging extension: read and change the log settings while the server runs.

The settings object (`core/observability/log_settings.py`) is built from the command line at start-up and
applied to Python's logging; this package is the extension's endpoints.
"""

from __future__ import annotations

from ..spec import ProtocolExtension
from .grpc import LoggingRpcs
from .http import install

EXTENSION = ProtocolExtension(names=("logging",), group="logging", http=install, grpc=LoggingRpcs)

"""Triton's logging extension: read and change the log settings while the server runs.

The settings object (`core/observability/log_settings.py`) is built from the command line at start-up and
applied to Python's logging; this package is
the extension's flags, what it makes of them, and its endpoints.
"""

from __future__ import annotations

from ...features.contract import Feature
from .flags import add_flags, configure
from .grpc import LoggingRpcs
from .http import install

FEATURE = Feature(
    name="logging", extensions=("logging",), group="logging",
    flags=add_flags, configure=configure, http=install, grpc=LoggingRpcs,
)

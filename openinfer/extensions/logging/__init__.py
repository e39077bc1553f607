"""Triton's logging extension: read and change the log settings while the server runs.

The settings (`settings.py`, the feature's state) are built from the command line at start-up
and applied to Python's logging; the endpoints read and change them, and HTTP frontend processes
apply a copy of their own.
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

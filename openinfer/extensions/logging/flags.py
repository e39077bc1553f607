"""The logging flags (tritonserver's `--log-*`) and the log settings they make."""

from __future__ import annotations

from ...app.settings import Settings
from .settings import FORMATS, LogSettings
from ...features.contract import Contribution
from ...features.flags import FlagGroups, bool_flag, integer


def add_flags(groups: FlagGroups) -> None:
    g = groups["Logging"]
    g.add_argument("--log-verbose", type=integer, default=0, metavar="LEVEL",
                   help="verbose logging level: 0 is off, higher levels log more detail")
    bool_flag(g, "--log-info", True, "log informational messages")
    bool_flag(g, "--log-warning", True, "log warnings")
    bool_flag(g, "--log-error", True, "log errors")
    g.add_argument("--log-format", choices=list(FORMATS), default="default",
                   help="timestamp format of log lines")
    g.add_argument("--log-file", default="", metavar="PATH",
                   help="write the log to this file instead of stderr")


def configure(settings: Settings) -> Contribution:
    """The log settings `/v2/logging` reads and changes, the feature's state. `openinfer serve`
    applies them to Python's logging before anything else runs and hands the composition that
    same object."""
    return Contribution(state=LogSettings.from_args(settings))

"""`pb_utils.Logger`: a model's messages in the server's own log, at the server's log settings."""

from __future__ import annotations

import enum
import sys
from typing import TypeAlias

from . import _host
from .errors import require


class LogLevel(enum.IntEnum):
    INFO = 0
    WARNING = 1
    ERROR = 2
    VERBOSE = 3


def _caller() -> tuple[str, int]:
    import os

    frame = sys._getframe(3)
    return os.path.basename(frame.f_code.co_filename), frame.f_lineno


class Logger:
    """Static methods, as Triton's; the levels are also attributes (`Logger.INFO`)."""

    LogLevel: TypeAlias = LogLevel
    INFO = LogLevel.INFO
    WARNING = LogLevel.WARNING
    ERROR = LogLevel.ERROR
    VERBOSE = LogLevel.VERBOSE

    @staticmethod
    def log(message: str, level: LogLevel = LogLevel.INFO) -> None:
        Logger._write(message, level)

    @staticmethod
    def log_info(message: str) -> None:
        Logger._write(message, LogLevel.INFO)

    @staticmethod
    def log_warn(message: str) -> None:
        Logger._write(message, LogLevel.WARNING)

    @staticmethod
    def log_error(message: str) -> None:
        Logger._write(message, LogLevel.ERROR)

    @staticmethod
    def log_verbose(message: str) -> None:
        Logger._write(message, LogLevel.VERBOSE)

    @staticmethod
    def _write(message: str, level: int) -> None:
        require(message, str, "message")
        require(level, LogLevel, "level")
        filename, line = _caller()
        _host.current().log(int(level), str(message), filename, line)

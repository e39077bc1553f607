"""Triton's logging extension: the server's log settings, applied to Python logging and changeable live.

One `LogSettings` object owns the root handler: its filter drops the severities that are
switched off, `log_verbose_level > 0` lets `openinfer` debug records through, and the
formatter writes Triton's line shapes (`I1129 09:35:49.123456 1234 name] message`, or
`2024-11-29T09:35:49Z I 1234 name] message` with `log_format=ISO8601`).
"""

from __future__ import annotations

import dataclasses
import logging
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from ...core.errors import InvalidArgumentError, UnavailableError, UnsupportedError

FORMATS = ("default", "ISO8601")
_NOISY = ("uvicorn.access",)


class TritonFormatter(logging.Formatter):
    """Triton's two log line formats."""

    def __init__(self, log_format: str = "default") -> None:
        super().__init__()
        self.log_format = log_format

    def format(self, record: logging.LogRecord) -> str:
        level = record.levelname[:1] if record.levelno >= logging.INFO else "V"
        message = record.getMessage()
        if record.exc_info:
            message += "\n" + self.formatException(record.exc_info)
        if self.log_format == "ISO8601":
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(record.created))
            return f"{stamp} {level} {record.process} {record.name}] {message}"
        local = time.localtime(record.created)
        micros = int((record.created % 1) * 1_000_000)
        return f"{level}{time.strftime('%m%d %H:%M:%S', local)}.{micros:06d} {record.process} {record.name}] {message}"


class _SeverityFilter(logging.Filter):
    def __init__(self, settings: LogSettings) -> None:
        super().__init__()
        self.settings = settings

    def filter(self, record: logging.LogRecord) -> bool:
        s = self.settings
        if record.levelno >= logging.ERROR:
            return s.log_error
        if record.levelno >= logging.WARNING:
            return s.log_warning
        if record.levelno >= logging.INFO:
            return s.log_info
        return s.log_verbose_level > 0


@dataclass
class LogSettings:
    """The values `GET /v2/logging` reports, in Triton's key order."""

    log_file: str = ""
    log_info: bool = True
    log_warning: bool = True
    log_error: bool = True
    log_verbose_level: int = 0
    log_format: str = "default"
    _handler: logging.Handler | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_args(cls, args: Any) -> LogSettings:
        return cls(
            log_file=args.log_file or "",
            log_info=args.log_info,
            log_warning=args.log_warning,
            log_error=args.log_error,
            log_verbose_level=max(int(args.log_verbose), 0),
            log_format=args.log_format,
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "log_file": self.log_file,
            "log_info": self.log_info,
            "log_warning": self.log_warning,
            "log_error": self.log_error,
            "log_verbose_level": self.log_verbose_level,
            "log_format": self.log_format,
        }

    def update(self, values: dict[str, Any], format_option: str = "log_format") -> dict[str, Any]:
        """Apply a typed update (None values are ignored, as Triton ignores nulls); all or nothing.
        `format_option`: how the frontend's Triton names the format in its refusal."""
        changes = {k: v for k, v in values.items() if v is not None}
        if "log_file" in changes:
            raise UnsupportedError("log file location can not be updated through network protocol")
        fmt = changes.get("log_format")
        if fmt is not None and fmt not in FORMATS:
            raise InvalidArgumentError(f"invalid argument for {format_option}, got: {fmt}")
        level = changes.get("log_verbose_level")
        if level is not None and (
            isinstance(level, bool) or not isinstance(level, int) or level < 0
        ):
            raise InvalidArgumentError("'log_verbose_level' must be a non-negative integer")
        for key in ("log_info", "log_warning", "log_error", "log_verbose_level", "log_format"):
            if key in changes:
                setattr(self, key, changes[key])
        if self._handler is not None:
            self.apply()
        return self.as_dict()

    def detached(self) -> LogSettings:
        """A copy without this process's handler, for another process to apply as its own."""
        return dataclasses.replace(self, _handler=None)

    def apply(self) -> None:
        """Install (or refresh) the root handler with these settings."""
        if self._handler is None:
            if self.log_file:
                self._handler = logging.FileHandler(self.log_file)
            else:
                self._handler = logging.StreamHandler(sys.stderr)
            self._handler.addFilter(_SeverityFilter(self))
        self._handler.setFormatter(TritonFormatter(self.log_format))
        root = logging.getLogger()
        root.handlers[:] = [self._handler]
        root.setLevel(logging.INFO)
        logging.getLogger("openinfer").setLevel(
            logging.DEBUG if self.log_verbose_level > 0 else logging.INFO
        )
        for name in _NOISY:
            logging.getLogger(name).setLevel(logging.WARNING)


def log_settings(server: Any) -> LogSettings:
    """The server's log settings: the logging feature's state."""
    settings = server.feature_state("logging")
    if not isinstance(settings, LogSettings):
        raise UnavailableError("the log settings are not available")
    return settings

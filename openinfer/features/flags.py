"""Flags of `openinfer serve`, for the server's own (`openinfer/app/serve_flags.py`) and every
feature's: the help groups they go in, in tritonserver's order, and the values they parse into,
refused in tritonserver's words."""

from __future__ import annotations

import argparse
from typing import Any

#: tritonserver's help groups, in its order; a feature's flags join one of these or a group of
#: its own, which follows them.
GROUP_ORDER = (
    "Server", "Logging", "Model Repository", "HTTP", "GRPC", "Metrics", "Tracing", "Backend",
    "Response Cache", "Memory/Device Management",
)
#: The group that always comes last.
DEPRECATED = "Deprecated"


class FlagGroups:
    """The help groups of one parser by title: `groups["Logging"].add_argument(...)`. The known
    groups are made up front in their order, any other when first asked for, and `Deprecated`
    by `finish`, after all of them, whoever declared a deprecated flag first."""

    def __init__(self, parser: argparse.ArgumentParser, order: tuple[str, ...] = GROUP_ORDER) -> None:
        self.parser = parser
        self._groups: dict[str, Any] = {title: parser.add_argument_group(title) for title in order}
        self._deprecated: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def __getitem__(self, title: str) -> Any:
        if title == DEPRECATED:
            return self
        if title not in self._groups:
            self._groups[title] = self.parser.add_argument_group(title)
        return self._groups[title]

    def add_argument(self, *names: Any, **settings: Any) -> None:
        """A deprecated flag, added to its group by `finish`."""
        self._deprecated.append((names, settings))

    def finish(self) -> argparse.ArgumentParser:
        group = self.parser.add_argument_group(DEPRECATED)
        for names, settings in self._deprecated:
            group.add_argument(*names, **settings)
        self._deprecated.clear()
        return self.parser


def parse_bool(value: str) -> bool:
    """tritonserver's boolean flag values."""
    lowered = value.strip().lower()
    if lowered in ("true", "on", "1", "yes"):
        return True
    if lowered in ("false", "off", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"invalid boolean '{value}' (use true/false/on/off/1/0)")


def integer(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got '{value}'") from None


def positive(value: str) -> int:
    number = integer(value)
    if number <= 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0, got '{value}'")
    return number


def max_input_size(value: str) -> int:
    number = integer(value)
    if number <= 0:
        raise argparse.ArgumentTypeError("Error: --http-max-input-size must be greater than 0.")
    return number


def port(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = -1
    if not 0 <= number <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port number 0-65535, got '{value}'")
    return number


def number(value: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got '{value}'") from None


def bool_flag(group: Any, name: str, default: bool, help: str) -> None:
    """A tritonserver-style boolean: `--flag`, `--flag true`, `--flag=off`."""
    group.add_argument(name, type=parse_bool, nargs="?", const=True, default=default, metavar="BOOL", help=help)

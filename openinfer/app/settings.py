"""The command line, parsed once into read-only settings.

`serve_flags.py` declares every flag; `Settings.from_args` freezes what argparse made of them, and the
composition root and its plug-ins all read that one object. Nobody writes to it: a plug-in
that changes what the server does (the response cache, the OpenAI frontend serving alone)
says so in what its `configure` returns. Lists become tuples, so nothing inside changes either.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any


def parse_bool(value: str) -> bool:
    """tritonserver's boolean flag values."""
    lowered = value.strip().lower()
    if lowered in ("true", "on", "1", "yes"):
        return True
    if lowered in ("false", "off", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"invalid boolean '{value}' (use true/false/on/off/1/0)")


def _frozen(value: Any) -> Any:
    return tuple(_frozen(item) for item in value) if isinstance(value, list) else value


@dataclass(frozen=True)
class Settings:
    """Every parsed flag by its argparse name, read as an attribute (`settings.http_port`)."""

    flags: Mapping[str, Any]

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Settings:
        return cls(MappingProxyType({name: _frozen(value) for name, value in vars(args).items()}))

    def __getattr__(self, name: str) -> Any:
        try:
            return self.flags[name]
        except KeyError:
            raise AttributeError(f"no setting '{name}'") from None

"""The command line, parsed once into read-only settings.

`serve_flags.py` declares the server's own flags and gathers the features'; `Settings.from_args`
freezes what argparse made of them, and the composition root and the features all read that one
object. Nobody writes to it: a feature that changes what the server does (the OpenAI frontend
serving alone) says so in what its `configure` returns. Lists become tuples, so nothing inside
changes either; `replace` makes a changed copy.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any


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

    def replace(self, **changes: Any) -> Settings:
        """These settings with `changes` (by flag name; AttributeError names an unknown one)."""
        for name in changes:
            if name not in self.flags:
                raise AttributeError(f"no setting '{name}'")
        return Settings(MappingProxyType({**self.flags, **{k: _frozen(v) for k, v in changes.items()}}))

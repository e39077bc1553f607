"""The command line, parsed once into read-only settings.

`serve_flags.py` declares the server's own flags and gathers the features'; `Settings.from_args`
freezes what argparse made of them into typed fields (`settings_fields.py`, written from the
parser), and the composition root and the features all read that one object. Nobody writes to it: a feature that changes what the server does (the OpenAI frontend
serving alone) says so in what its `configure` returns. Lists become tuples, so nothing inside
changes either; `replace` makes a changed copy.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
import dataclasses
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

from .settings_fields import ServeFlags


def frozen(value: Any) -> Any:
    """Lists, at any depth, as tuples: a parsed value nobody can change."""
    return tuple(frozen(item) for item in value) if isinstance(value, list) else value


#: The flags openinfer knows: the typed fields.
_FIELDS = frozenset(f.name for f in fields(ServeFlags))


@dataclass(frozen=True)
class Settings(ServeFlags):
    """Every parsed flag by its Python name, typed (`settings.http_port` is an int). The flags of
    features installed beside openinfer, which `ServeFlags` cannot know, are in `extra`, and read
    as attributes too."""

    extra: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Settings:
        parsed = {name: frozen(value) for name, value in vars(args).items()}
        extra = {name: value for name, value in parsed.items() if name not in _FIELDS}
        return cls(**{name: value for name, value in parsed.items() if name in _FIELDS},
                   extra=MappingProxyType(extra))

    def __getattr__(self, name: str) -> Any:  # only for what no field has: the extra flags
        try:
            return self.__dict__["extra"][name]
        except KeyError:
            raise AttributeError(f"no setting '{name}'") from None

    def replace(self, **changes: Any) -> Settings:
        """These settings with `changes` (by flag name; AttributeError names an unknown one)."""
        for name in changes:
            if name not in _FIELDS and name not in self.extra:
                raise AttributeError(f"no setting '{name}'")
        extra = {**self.extra, **{k: frozen(v) for k, v in changes.items() if k not in _FIELDS}}
        return dataclasses.replace(self, **{k: frozen(v) for k, v in changes.items() if k in _FIELDS},
                                   extra=MappingProxyType(extra))

"""Writes `settings_fields.py`, the typed, frozen form of every `openinfer serve` flag, from the
argument parser, so the flags are declared once and read with their types everywhere.

`make docs` runs `python -m openinfer.app.settings_schema`; a test renders it again and compares.
A flag's type follows from how it parses: a boolean flag is `bool`, a flag whose `type` returns
`int` is `int`, a repeatable flag a tuple of its values, and a flag whose default is None may be
None.
"""

from __future__ import annotations

import argparse
import sys
import typing
from pathlib import Path

from .settings import frozen

TARGET = Path(__file__).with_name("settings_fields.py")

HEADER = '''"""Every `openinfer serve` flag, typed and frozen: the fields of `settings.Settings`.

Written from the argument parser by `python -m openinfer.app.settings_schema` (`make docs`); do
not edit by hand. A test checks it is current.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ServeFlags:
    """Each flag by its Python name, with the type it parses into and its default."""

'''


def _value_type(action: argparse.Action) -> str:
    """The type one value of the flag parses into."""
    if action.nargs == 0:
        return "bool"
    if action.nargs == "+":
        return "tuple[str, ...]"
    if action.choices:
        return type(next(iter(action.choices))).__name__
    parse = action.type
    if parse is None:
        return "str"
    if isinstance(parse, type):
        return parse.__name__
    returned = typing.get_type_hints(parse).get("return")
    if returned is None:
        raise TypeError(f"{action.option_strings[0]}: its type function does not say what it returns")
    return returned.__name__ if isinstance(returned, type) else str(returned).replace("typing.", "")


def field_line(action: argparse.Action) -> str:
    """`name: type = default` for one flag."""
    one = _value_type(action)
    repeated = isinstance(action, argparse._AppendAction)  # argparse names no public class for it
    kind = f"tuple[{one}, ...]" if repeated else one
    default = frozen(action.default)
    if action.required:  # always given: never None (its default only stands in for it)
        default = () if repeated else default
    elif default is None:
        kind = f"{kind} | None"
    return f"    {action.dest}: {kind} = {default!r}"


def render() -> str:
    from .serve_flags import serve_parser

    parser = serve_parser(features=_openinfers_own())
    return HEADER + "\n".join(field_line(action) for action in parser.flags()) + "\n"


def _openinfers_own() -> list[str]:
    """The features openinfer lists itself (not those installed beside it)."""
    from .. import features

    return list(features.FEATURES)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    target = Path(args[0]) if args else TARGET
    target.write_text(render())
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

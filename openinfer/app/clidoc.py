"""Writes the flag reference (`docs/cli.md`) from the argument parsers, so it cannot drift.

`make docs` runs `python -m openinfer.app.clidoc docs/cli.md`; a test renders it again and compares.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .serve_flags import default_text

HEADER = """# Command-line reference

Generated from the argument parsers by `make docs`; do not edit by hand. `openinfer <command>
--help` prints the same text. Booleans take `true`/`false`/`on`/`off`/`1`/`0`; a bare boolean flag
means `true`.
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _flag(action: argparse.Action) -> str:
    names = ", ".join(f"`{name}`" for name in action.option_strings)
    if action.nargs == 0:
        return names
    if action.choices:
        return f"{names} `{{{','.join(map(str, action.choices))}}}`"
    return f"{names} `{action.metavar or action.dest.upper()}`"


def _groups(parser: argparse.ArgumentParser) -> list[tuple[str, list[argparse.Action]]]:
    out = []
    for group in parser._action_groups:  # argparse keeps no public accessor for groups
        actions = [a for a in group._group_actions if a.option_strings and a.help is not argparse.SUPPRESS
                   and "-h" not in a.option_strings]
        if actions:
            out.append((group.title or "Options", actions))
    return out


def render_parser(parser: argparse.ArgumentParser) -> str:
    lines = [f"## `{parser.prog}`", "", f"Usage: `{parser.format_usage().removeprefix('usage: ').strip()}`", ""]
    if parser.description:
        lines += [parser.description, ""]
    for title, actions in _groups(parser):
        lines += [f"### {title}", "", "| Flag | Default | Meaning |", "|---|---|---|"]
        for action in actions:
            shown = default_text(action)
            default = f"`{shown}`" if shown is not None else ""
            lines.append(f"| {_cell(_flag(action))} | {_cell(default)} | {_cell(action.help or '')} |")
        lines.append("")
    return "\n".join(lines)


def render() -> str:
    from .scaffold import new_model_parser
    from .serve_flags import serve_parser

    return "\n".join([HEADER, render_parser(serve_parser()), render_parser(new_model_parser())]).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    target = Path(args[0] if args else "docs/cli.md")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render())
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

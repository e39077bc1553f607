"""CONTRIBUTING.md lists the files each kind of change touches: its lists must name what the tree
has, or a newcomer follows them into files and tables that are not there."""

from __future__ import annotations

import re
from pathlib import Path

from openinfer.core.backend import Backend

ROOT = Path(__file__).resolve().parents[2]
TEXT = (ROOT / "CONTRIBUTING.md").read_text()
#: The guide's bullets and paragraphs, each with the continuation lines that belong to it.
ITEMS = [item for item in re.split(r"\n(?=- |\n)", TEXT) if item.strip()]
PATH = re.compile(r"`((?:openinfer|tests|docs)/[\w/.-]+)`")
TABLE = re.compile(r"`([A-Z][A-Z0-9_]+)`")


def test_every_path_it_names_exists():
    named = {path for path in PATH.findall(TEXT) if "<" not in path}
    assert named, "the guide names no files"
    assert sorted(path for path in named if not (ROOT / path).exists()) == []


def test_every_table_it_names_is_in_the_files_beside_it():
    checked = 0
    for item in ITEMS:
        files = [ROOT / path for path in PATH.findall(item) if path.endswith(".py") and "<" not in path]
        for table in TABLE.findall(item):
            if not files:
                continue
            defined = re.compile(rf"^{table}\b\s*(:[^=\n]*)?=", re.MULTILINE)
            assert any(defined.search(f.read_text()) for f in files), f"{table} is in none of {files}"
            checked += 1
    assert checked >= 5


def test_the_backend_methods_it_names_are_the_contract():
    (item,) = [item for item in ITEMS if "a `Backend`" in item]
    methods = re.findall(r"`([a-z_]+)`", item)
    assert methods and all(callable(getattr(Backend, name, None)) for name in methods), methods

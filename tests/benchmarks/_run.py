"""Run the bench CLI in-process and read its JSON report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from openinfer.bench.cli import main

ROOT_HINT = str(Path(__file__).resolve().parents[2])


def bench(tmp_path: Path, *argv: str) -> tuple[int, dict[str, Any]]:
    out = tmp_path / "result.json"
    code = main([*argv, "--json", str(out), "--no-progress"])
    return code, orjson.loads(out.read_bytes()) if out.exists() else {}


def identity_data(tmp_path: Path, n: int = 16, wrong: bool = False) -> Path:
    """A perf_analyzer input file whose validation_data is the input (or not, when wrong)."""
    values = [float(i) / 8 for i in range(n)]
    expect = [v + 1 for v in values] if wrong else values
    path = tmp_path / "data.json"
    path.write_bytes(orjson.dumps({
        "data": [{"INPUT0": values}],
        "validation_data": [{"OUTPUT0": expect}],
    }))
    return path

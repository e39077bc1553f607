"""The package's shape holds: the import contracts in pyproject.toml (core imports no frontend
or backend, frontends and backends never import each other) are kept."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_import_contracts_are_kept():
    lint = Path(sys.executable).parent / "lint-imports"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # analyse this checkout, not an installed copy
    done = subprocess.run(
        [str(lint), "--no-cache"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    with open(ROOT / "pyproject.toml", "rb") as f:
        contracts = tomllib.load(f)["tool"]["importlinter"]["contracts"]
    assert "backends never import frontends" in {c["name"] for c in contracts}
    assert f"Contracts: {len(contracts)} kept, 0 broken." in done.stdout

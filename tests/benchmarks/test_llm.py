"""`python -m benchmarks.llm`, the LLM row of `make bench`, at a tiny size: every row and every cell of
the comparison with `transformers serve` streams all its tokens and the tables are written
(figures are not checked; speed is the bench's business). aiperf takes part where the bench has
installed it, and is reported as not measured elsewhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.peers import VENVS
from tests.helpers import ROOT

pytest.importorskip("torch")
pytest.importorskip("transformers")

REQUESTS, MAX_TOKENS = 2, 4


@pytest.mark.slow
@pytest.mark.timeout(900)  # four processes load torch; on two busy cores that takes minutes
def test_the_llm_row_runs_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "llm.md"
    command = [sys.executable, "-m", "benchmarks.llm", "--requests", str(REQUESTS), "--max-tokens", str(MAX_TOKENS),
               "--rounds", "1", "--same-process", "--concurrency", "1,4", "--no-install", "--out", str(out)]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=870, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(out.with_suffix(".json").read_text())
    rows = {row["name"]: row for row in result["rows"]}
    assert list(rows) == [
        "transformers generate, in-process", "engine in-process c=1", "frontend in-process (no HTTP) c=1",
        "served c=1", "served c=8",
    ]
    assert rows["served c=8"]["requests"] == 2 * REQUESTS
    for row in rows.values():
        assert row["output_tokens"] == row["requests"] * MAX_TOKENS, row
        assert row["tokens_per_s"] > 0, row
    table = out.read_text()
    assert f"| served c=1 | 1 | {REQUESTS} |" in table and "served c=8 / served c=1" in table

    peers = result["peers"]
    generators = ["openinfer-bench", "aiperf"] if (VENVS / "aiperf.ok").exists() else ["openinfer-bench"]
    cells = {(c["server"], c["generator"], c["concurrency"]): c for c in peers["cells"]}
    assert set(cells) == {(s, g, c) for s in ("openinfer", "transformers") for g in generators for c in (1, 4)}
    for (server, generator, _), cell in cells.items():
        assert "error" not in cell, cell
        assert cell["output_tokens"] == cell["requests"] * MAX_TOKENS, cell
        assert cell["server_cpu_us_per_token"] > 0 and cell["server_rss_mib"] > 0, cell
        if server == "transformers" and generator == "openinfer-bench":
            assert cell["streams_without_done"] == cell["requests"]  # a note, not an error
    assert len(peers["ratios"]) == 2 * len(generators)
    if "aiperf" not in generators:
        assert "aiperf" in peers["not_measured"]
    assert "## LLM: openinfer against `transformers serve --continuous-batching`" in table

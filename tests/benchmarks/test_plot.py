"""Benchmark pictures: `openinfer bench --plot` against a real server, and the run's charts."""

from __future__ import annotations

import io
import json
import operator
import re
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from benchmarks import charts, results
from openinfer.bench.cli import main
from openinfer.bench.plot import latency_distributions, throughput_latency
from openinfer.bench.progress import Progress, RunProgress
from tests.helpers import EXAMPLES, Server


def _series(svg: str) -> set[str]:
    return set(re.findall(r'id="series-([^"]+)"', svg))


def test_bench_plot_draws_each_concurrency_level(tmp_path):
    with Server(EXAMPLES, ["--model-control-mode", "explicit", "--load-model", "identity_fp32"]) as server:
        out = tmp_path / "levels.svg"
        code = main(["-m", "identity_fp32", "-u", server.http_url, "--shape", "INPUT0:4",
                     "--concurrency-range", "1:2:1", "--request-count", "40", "--warmup-ms", "0",
                     "--no-progress", "--plot", str(out)])
    assert code == 0
    svg = out.read_text()
    assert svg.startswith("<?xml") and "<svg" in svg
    assert len(_series(svg)) == 1  # one server, one line
    assert "c=1" in svg and "c=2" in svg  # a point per level, labelled
    assert "p50 latency (ms)" in svg and "throughput (infer/s)" in svg


def test_charts_have_a_line_per_server_and_workload(tmp_path):
    cells = [
        {"label": label, "server": label, "protocol": proto, "size": 16, "concurrency": conc,
         "throughput": 1000.0 * conc, "p50_ms": 1.0 + conc, "p99_ms": 2.0 + conc}
        for label in ("openinfer", "MLServer") for proto in ("http", "grpc") for conc in (1, 16)
    ]
    path = throughput_latency(charts.panels(cells), tmp_path / "t.svg")
    assert _series(path.read_text()) == {
        "http-json-1-16-openinfer", "http-json-1-16-mlserver", "grpc-1-16-openinfer", "grpc-1-16-mlserver"}
    runs = {"served c=1": {"time_to_first_token": [2.0, 2.5, 3.1], "inter_token_latency": [1.0, 1.1]},
            "served c=8": {"time_to_first_token": [9.0, 11.0], "inter_token_latency": [1.9, 2.2, 2.4]}}
    svg = latency_distributions(runs, tmp_path / "l.svg").read_text()
    assert _series(svg) == {"time-to-first-token-served-c-1", "time-to-first-token-served-c-8",
                            "inter-token-latency-served-c-1", "inter-token-latency-served-c-8"}
    assert "Time to first token (ms)" in svg and "served c=8 (n=2)" in svg


def test_results_read_back_and_embed():
    """The charts are drawn again from a RESULTS.md: what `results.render` writes reads back
    as the cells it was given (a RESULTS.md of the bench's own making, not the one a run left)."""
    keys = ("label", "server", "grid", "cores", "protocol", "size", "concurrency", "throughput", "p50_ms", "p99_ms")
    cells = [
        {"label": label, "server": server, "grid": grid, "cores": cores, "protocol": proto, "size": size,
         "concurrency": conc, "throughput": 100.0 * conc + size, "p50_ms": 1.25 + conc, "p99_ms": 2.5 + conc,
         "completed": 500, "client_cpu": 40.0}
        for label in ("openinfer", "Triton") for server in (label,) for grid in ("plain", "batching")
        for cores in (1, 2) for proto in ("http", "grpc", "http-binary") for size in (16, 65536) for conc in (1, 16)
    ]
    text = results.render(cells, {}, {})
    back = charts.cells_from_markdown(text)
    key = operator.itemgetter("grid", "cores", "server", "protocol", "size", "concurrency")
    assert sorted(back, key=key) == sorted(({k: c[k] for k in keys} for c in cells), key=key)
    drawn = [("a chart", charts.HERE / "charts" / "x.svg")]
    embedded = charts.embed(text, drawn)
    assert "![a chart](charts/x.svg)" in embedded
    assert charts.embed(embedded, drawn) == embedded  # a rerun replaces its block
    assert embedded.index(charts.START) < embedded.index("## Every run")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_one_progress_line_spans_the_run():
    """`make bench`: every level's bar is drawn behind the run's position, on the same line."""
    stream = _Terminal()
    with RunProgress(3, stream=stream) as run:
        run.begin("openinfer http [1,16] c=1")
        assert stream.getvalue().endswith("[1/3 openinfer http [1,16] c=1 · time left: estimating]")
        level = Progress(stream=stream)
        level.update("c=1", 1.0, "done")
        assert re.search(r"\r\x1b\[2K\[1/3 openinfer http \[1,16\] c=1 · time left: estimating\] +c=1 █+ done$",
                         stream.getvalue())
        level.done("c=1", "120 requests")  # no second line while the run's line is live
        run.step_done()
        run.begin("MLServer http [1,16] c=1")
        assert re.search(r"\[2/3 MLServer http \[1,16\] c=1 · ~\d+m\d\ds left\]$", stream.getvalue())
    assert "\n" not in stream.getvalue()
    assert RunProgress.active is None


def test_the_llm_chart_sets_transformers_serve_beside_the_served_rows(tmp_path: Path) -> None:
    samples = {"time_to_first_token": [1.0, 2.0], "inter_token_latency": [0.5]}
    peer = {"server": "transformers", "server_label": "transformers serve", "generator": "openinfer-bench",
            "samples": samples}
    result = {
        "rows": [{"name": "engine in-process c=1", "concurrency": 1},
                 {"name": "served c=1", "concurrency": 1, "samples": samples},
                 {"name": "served c=8", "concurrency": 8, "samples": samples}],
        "peers": {"cells": [{**peer, "concurrency": 1}, {**peer, "concurrency": 4}, {**peer, "concurrency": 8},
                            {**peer, "generator": "aiperf", "concurrency": 8},
                            {**peer, "concurrency": 8, "server": "openinfer", "server_label": "openinfer"}]},
    }
    path = tmp_path / "llm.json"
    path.write_text(json.dumps(result))
    assert list(charts.llm_runs(path)) == ["served c=1", "served c=8", "transformers serve c=1", "transformers serve c=8"]

"""The LLM comparison's bookkeeping and report: best rounds, openinfer / transformers serve per
load generator, where the generators disagree, and what was not measured (and why)."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path
from typing import Any

from benchmarks import llm_compare, llm_report
from benchmarks.llm_servers import LlmServer


def _server(key: str, label: str, tmp: Path) -> LlmServer:
    return LlmServer(key, label, ["true"], {}, "/health", "m", {}, 1, tmp / f"{key}.log")


def _row(tps: float, ttft: float = 10.0, itl: float = 2.0, cpu: float = 500.0, rss: int = 400) -> dict[str, Any]:
    return {"requests": 4, "output_tokens": 32, "tokens_per_s": tps, "ttft_p50_ms": ttft, "ttft_p99_ms": 2 * ttft,
            "itl_p50_ms": itl, "itl_p99_ms": 2 * itl, "server_cpu_us_per_token": cpu, "server_cores": 0.5,
            "server_rss_mib": rss}


def _comparison(tmp: Path) -> llm_compare.Comparison:
    servers = [_server("openinfer", "openinfer", tmp), _server("transformers", "transformers serve", tmp)]
    comparison = llm_compare.Comparison(servers, None, 4, 8, lambda n: ["p"] * n, 12, concurrency=(1, 8))
    runs = comparison.runs
    runs[("openinfer", "openinfer-bench", 1)] = [_row(200.0), _row(250.0, ttft=8.0)]  # the second round is best
    runs[("transformers", "openinfer-bench", 1)] = [_row(125.0, ttft=16.0, cpu=1000.0, rss=1600)]
    runs[("openinfer", "aiperf", 1)] = [_row(240.0, ttft=12.0)]  # 0.96x tokens/s, 1.5x TTFT
    runs[("transformers", "aiperf", 1)] = [{**_row(100.0, ttft=16.0), "streams_without_done": 0}]
    runs[("openinfer", "openinfer-bench", 8)] = [_row(1000.0)]
    comparison.failures[("transformers", "openinfer-bench", 8)] = "RuntimeError: 60 output tokens counted, 64 expected"
    return comparison


def test_each_cell_keeps_its_best_round_and_failures_say_why(tmp_path: Path) -> None:
    result = _comparison(tmp_path).result()
    cells = {(c["server"], c["generator"], c["concurrency"]): c for c in result["cells"]}
    best = cells[("openinfer", "openinfer-bench", 1)]
    assert best["tokens_per_s"] == 250.0 and best["ttft_p50_ms"] == 8.0 and best["runs_tokens_per_s"] == [200.0, 250.0]
    assert "64 expected" in cells[("transformers", "openinfer-bench", 8)]["error"]
    assert ("openinfer", "aiperf", 8) not in cells  # never run: no row


def test_ratios_are_openinfer_over_transformers_serve_per_generator(tmp_path: Path) -> None:
    result = _comparison(tmp_path).result()
    ratios = {(r["generator"], r["concurrency"]): r for r in result["ratios"]}
    assert set(ratios) == {("openinfer-bench", 1), ("aiperf", 1)}  # c=8 has no transformers serve figure
    ours = ratios[("openinfer-bench", 1)]
    assert ours["tokens_per_s"] == 2.0 and ours["ttft_p50_ms"] == 0.5
    assert ours["server_cpu_us_per_token"] == 0.5 and ours["server_rss_mib"] == 0.25
    assert ratios[("aiperf", 1)]["tokens_per_s"] == 2.4


def test_disagreements_name_the_figures_more_than_ten_percent_apart(tmp_path: Path) -> None:
    result = _comparison(tmp_path).result()
    rows = {(d["server"], d["concurrency"]): d for d in result["disagreements"]}
    assert rows[("openinfer", 1)]["tokens_per_s"] == 0.96 and rows[("openinfer", 1)]["differ"] == ["ttft_p50_ms"]
    assert rows[("transformers", 1)]["differ"] == ["tokens_per_s"]  # 100 against 125
    text = llm_report.render(result, rounds=2, max_tokens=8, prompt_words=12)
    assert "| openinfer | 1 | 0.96x | **1.50x** | 1.00x |" in text
    assert "disagree by more than 10% on openinfer c=1: TTFT p50; transformers serve c=1: tokens/s" in text


def test_the_report_has_every_column_and_says_what_was_not_measured(tmp_path: Path) -> None:
    comparison = _comparison(tmp_path)
    comparison.runs[("transformers", "openinfer-bench", 1)][0]["streams_without_done"] = 4
    comparison.not_measured["aiperf"] = "aiperf did not install; see benchmarks/.venvs/aiperf.log"
    text = llm_report.render(comparison.result(), rounds=2, max_tokens=8, prompt_words=12)
    assert text.startswith(llm_report.TITLE)
    assert ("| openinfer | openinfer bench openai | 1 | 250.0 | 8.00 / 16.00 | 2.00 / 4.00 | 0.50 · 500 | 400 |"
            in text)
    assert "| transformers serve | openinfer bench openai | 8 | not measured: RuntimeError: 60 output tokens" in text
    assert "| openinfer bench openai | 1 | 2.00x | 0.50x | 0.50x | 1.00x | 1.00x | 0.50x | 0.25x |" in text
    assert "- transformers serve ends its streams without `data: [DONE]` (4 streams" in text
    assert "- aiperf not measured: aiperf did not install; see benchmarks/.venvs/aiperf.log" in text


def test_a_peer_or_generator_left_out_is_reported_not_fatal(tmp_path: Path) -> None:
    ours = _server("openinfer", "openinfer", tmp_path)
    with ExitStack() as stack:
        comparison = llm_compare.setup(stack, ours, tmp_path, tmp_path, 4, 8, lambda n: ["p"] * n, 12,
                                       peer=False, use_aiperf=False)
    assert comparison.servers == [ours] and comparison.tool is None
    assert comparison.not_measured == {"transformers serve": "left out (--no-peer)", "aiperf": "left out (--no-aiperf)"}
    result = comparison.result()
    assert result["ratios"] == [] and result["disagreements"] == []
    text = llm_report.render(result, rounds=1, max_tokens=8, prompt_words=12)
    assert "- transformers serve not measured: left out (--no-peer)" in text


def test_levels_from_concurrency_eight_send_twice_the_requests() -> None:
    assert [llm_compare.requests_at(24, c) for c in (1, 4, 8)] == [24, 24, 48]

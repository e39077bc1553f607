"""``openinfer bench openai`` against the fake OpenAI server."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from openinfer.bench.cli import main


@pytest.mark.parametrize("endpoint,streaming", [
    ("chat", True), ("chat", False), ("completions", True), ("embeddings", False),
])
def test_openai_endpoints(tmp_path: Path, openai_echo: str, endpoint: str,
                          streaming: bool) -> None:
    out = tmp_path / "r.json"
    argv = ["openai", "-m", "echo", "--url", openai_echo, "--endpoint-type", endpoint,
            "--synthetic-input-tokens-mean", "40", "--output-tokens-mean", "12",
            "--concurrency", "3", "--request-count", "30", "--json", str(out), "--no-progress"]
    assert main(argv + (["--streaming"] if streaming else [])) == 0
    doc = orjson.loads(out.read_bytes())
    m = doc["metrics"]
    assert doc["request_count"] == 30 and doc["errors"] == 0
    assert doc["streams_without_done"] == 0  # the echo ends every stream with data: [DONE]
    assert m["request_throughput"]["avg"] > 0
    assert m["input_sequence_length"]["avg"] == 40
    if endpoint == "embeddings":
        assert "output_sequence_length" not in m
        return
    assert m["output_sequence_length"]["avg"] == 12
    if streaming:
        ttft, itl = m["time_to_first_token"], m["inter_token_latency"]
        assert 0 < ttft["avg"] <= m["request_latency"]["avg"] and itl["avg"] > 0
    else:
        assert "time_to_first_token" not in m


def test_openai_table(openai_echo: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["openai", "-m", "echo", "--url", openai_echo, "--streaming",
                 "--request-count", "10", "--output-tokens-mean", "4", "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "Time to first token (ms)" in text and "Request throughput (per sec)" in text


def test_openai_prefix_prompts_open_every_prompt(tmp_path: Path, openai_echo: str) -> None:
    out = tmp_path / "r.json"
    assert main(["openai", "-m", "echo", "--url", openai_echo, "--endpoint-type", "completions",
                 "--synthetic-input-tokens-mean", "40", "--num-prefix-prompts", "2",
                 "--prefix-prompt-length", "20", "--request-count", "10", "--json", str(out),
                 "--no-progress"]) == 0
    assert orjson.loads(out.read_bytes())["metrics"]["input_sequence_length"]["avg"] == 60

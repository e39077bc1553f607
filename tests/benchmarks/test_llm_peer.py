"""`transformers serve --continuous-batching` as the LLM row's peer, driven by both load
generators: every answer has the asked length, its streams end without `data: [DONE]` (a note,
not an error), and aiperf reads the tiny model's tokenizer from a hub cache entry made for it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from benchmarks.llm import INPUT_WORDS, prompts
from benchmarks.llm_compare import measure_cell
from benchmarks.llm_load import TOKENIZER_ID, Load, aiperf, openinfer_bench, prepare_aiperf, tokenizer_cache
from benchmarks.llm_servers import LlmServer, transformers_serve
from benchmarks.peers import VENVS

pytest.importorskip("torch")
pytest.importorskip("transformers")

MAX_TOKENS = 6


@pytest.fixture(scope="module")
def model_dir() -> Path:
    from tests.llm_fixtures import llm_assets

    return llm_assets().llama


@pytest.fixture(scope="module")
def peer(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlmServer]:
    server, why = transformers_serve(model_dir, tmp_path_factory.mktemp("peer"))
    if server is None:
        pytest.skip(why)
    with server:
        yield server


def _load(requests: int = 3) -> Load:
    return Load(concurrency=2, requests=requests, warmup=2, max_tokens=MAX_TOKENS, prompts=tuple(prompts(requests)),
                prompt_words=INPUT_WORDS)


@pytest.mark.timeout(600)
def test_openinfer_bench_measures_transformers_serve_without_done(peer: LlmServer) -> None:
    load = _load()
    row = measure_cell(peer, partial(openinfer_bench, peer, load), load)
    assert row["requests"] == 3 and row["output_tokens"] == 3 * MAX_TOKENS  # EOS never ends an answer early
    assert row["streams_without_done"] == 3
    assert row["tokens_per_s"] > 0 and row["ttft_p50_ms"] > 0 and row["itl_p50_ms"] > 0
    assert row["server_cpu_us_per_token"] > 0 and row["server_rss_mib"] > 0


def test_the_cache_entry_gives_the_models_tokenizer_offline(model_dir: Path, tmp_path: Path) -> None:
    home = tmp_path / "hf"
    assert tokenizer_cache(model_dir, home) == TOKENIZER_ID
    assert not list(home.rglob("*.safetensors"))  # tokenizer and config only
    load = (f"from transformers import AutoTokenizer; "
            f"print(len(AutoTokenizer.from_pretrained({TOKENIZER_ID!r}).encode('the quick brown fox')))")
    env = dict(os.environ, HF_HOME=str(home), HF_HUB_OFFLINE="1")
    done = subprocess.run([sys.executable, "-c", load], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    from transformers import AutoTokenizer

    assert int(done.stdout.strip()) == len(AutoTokenizer.from_pretrained(str(model_dir)).encode("the quick brown fox"))


@pytest.mark.timeout(600)
def test_aiperf_measures_transformers_serve(peer: LlmServer, model_dir: Path, tmp_path: Path) -> None:
    if not (VENVS / "aiperf.ok").exists():
        pytest.skip("aiperf is not installed in benchmarks/.venvs/aiperf (python -m benchmarks.llm installs it)")
    tool, why = prepare_aiperf(model_dir, tmp_path, install=False)
    assert tool is not None, why
    load = _load()
    row = measure_cell(peer, partial(aiperf, tool, peer, load), load)
    assert row["requests"] == 3 and row["output_tokens"] == 3 * MAX_TOKENS
    assert row["tokens_per_s"] > 0 and row["ttft_p50_ms"] > 0 and row["itl_p99_ms"] >= row["itl_p50_ms"] > 0

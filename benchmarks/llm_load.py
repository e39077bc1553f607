"""The two load generators of the LLM comparison, each run as a subprocess against a server and
read back into the same figures: output tokens/s, TTFT and ITL p50/p99 (ms), and the requests and
output tokens counted (the server's `usage`, so both count what the server generated).

* `openinfer bench openai`, this repository's (genai-perf's definitions);
* NVIDIA's `aiperf` (genai-perf's successor), from a venv of its own (benchmarks/peers.py: it pins
  rich, orjson, psutil and transformers below this project's). It gets the prompts
  `openinfer bench openai` makes, as a single-turn JSONL dataset sent in order, and reads the
  model's tokenizer from a Hugging Face cache entry made for it: aiperf loads a tokenizer by hub
  id, and with `HF_HUB_OFFLINE=1` only from the cache.

Both send the same body: a streamed completion of `max_tokens` greedy tokens with the server's
fixed-length fields (benchmarks/llm_servers.py), `stream_options.include_usage` on.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .llm_servers import ROOT, LlmServer

TOKENIZER_ID = "openinfer/tiny-llama"  # the hub id aiperf is given; no hub is ever asked
_REVISION = "0" * 40


@dataclass(frozen=True)
class Load:
    """One level: `requests` measured after `warmup` unmeasured ones, `concurrency` in flight."""

    concurrency: int
    requests: int
    warmup: int
    max_tokens: int
    prompts: tuple[str, ...]  # what `openinfer bench openai` sends (bench.llm.prompts)
    prompt_words: int

    def body_fields(self, server: LlmServer) -> dict[str, Any]:
        return {"temperature": 0, **server.fixed_length(self.max_tokens)}


def openinfer_bench(server: LlmServer, load: Load) -> dict[str, Any]:
    """`openinfer bench openai` against `server`; its figures, or RuntimeError with its output."""
    extra = [arg for k, v in load.body_fields(server).items() for arg in ("--extra-inputs", f"{k}:{json.dumps(v)}")]
    command = [
        sys.executable, "-m", "openinfer", "bench", "openai", "-m", server.model, "-u", server.url,
        "--endpoint-type", "completions", "--streaming", "--synthetic-input-tokens-mean", str(load.prompt_words),
        "--output-tokens-mean", str(load.max_tokens), *extra, "--concurrency", str(load.concurrency),
        "--request-count", str(load.requests), "--warmup-request-count", str(load.warmup),
        "--json", "-", "--no-progress",
    ]
    out = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=False,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    if out.returncode != 0:
        raise RuntimeError(f"openinfer bench openai against {server.label} failed: {out.stdout[-1500:]} {out.stderr[-1500:]}")
    doc = json.loads(out.stdout)
    m = doc["metrics"]
    return {
        "requests": doc["request_count"],
        "output_tokens": round(m["output_sequence_length"]["avg"] * doc["request_count"]),
        "tokens_per_s": round(m["output_token_throughput"]["avg"], 1),
        "ttft_p50_ms": round(m["time_to_first_token"]["p50"], 2),
        "ttft_p99_ms": round(m["time_to_first_token"]["p99"], 2),
        "itl_p50_ms": round(m["inter_token_latency"]["p50"], 3),
        "itl_p99_ms": round(m["inter_token_latency"]["p99"], 3),
        "streams_without_done": doc.get("streams_without_done", 0),
        "client_cpu_percent": round(doc["client_cpu_percent"], 1),
        "samples": doc.get("samples", {}),
    }


@dataclass(frozen=True)
class Aiperf:
    """aiperf ready to run: its executable, and the HF_HOME holding the tokenizer's cache entry."""

    exe: Path
    hf_home: Path
    workdir: Path


def tokenizer_cache(model_dir: Path, hf_home: Path, model_id: str = TOKENIZER_ID) -> str:
    """A hub cache entry for `model_id` under `hf_home` (`hub/models--org--name/snapshots/<rev>`
    and `refs/main`) holding `model_dir`'s tokenizer and config files, not its weights."""
    entry = hf_home / "hub" / f"models--{model_id.replace('/', '--')}"
    snapshot = entry / "snapshots" / _REVISION
    snapshot.mkdir(parents=True, exist_ok=True)
    for path in model_dir.iterdir():
        if path.is_file() and path.suffix in (".json", ".jinja", ".model", ".txt"):
            shutil.copy2(path, snapshot / path.name)
    (entry / "refs").mkdir(exist_ok=True)
    (entry / "refs" / "main").write_text(_REVISION)
    return model_id


def prepare_aiperf(model_dir: Path, workdir: Path, install: bool = True) -> tuple[Aiperf | None, str]:
    """aiperf from its venv (installed on first use unless not `install`), or None and why."""
    from .peers import ensure_peer

    py, why = ensure_peer("aiperf", install)
    if py is None:
        return None, why
    exe = py.parent / "aiperf"
    if not exe.exists():
        return None, f"no aiperf executable in {py.parent}"
    hf_home = workdir / "hf-home"
    tokenizer_cache(model_dir, hf_home)
    return Aiperf(exe, hf_home, workdir), ""


def aiperf(tool: Aiperf, server: LlmServer, load: Load) -> dict[str, Any]:
    """`aiperf profile` against `server`; its figures, or RuntimeError with its output."""
    run_dir = Path(tempfile.mkdtemp(prefix=f"aiperf-{server.key}-c{load.concurrency}-", dir=tool.workdir))
    dataset = run_dir / "prompts.jsonl"
    dataset.write_text("".join(json.dumps({"text": p, "output_length": load.max_tokens}) + "\n" for p in load.prompts))
    command = [
        str(tool.exe), "profile", "-m", server.model, "-u", server.url, "--endpoint-type", "completions",
        "--streaming", "--tokenizer", TOKENIZER_ID, "--input-file", str(dataset),
        "--custom-dataset-type", "single_turn", "--dataset-sampling-strategy", "sequential",
        "--extra-inputs", json.dumps(load.body_fields(server)), "--use-server-token-count",
        "--concurrency", str(load.concurrency), "--request-count", str(load.requests),
        "--warmup-request-count", str(load.warmup),
        "--no-server-metrics", "--no-gpu-telemetry", "--ui", "none", "--artifact-dir", str(run_dir / "out"),
    ]
    env = dict(os.environ, HF_HOME=str(tool.hf_home), HF_HUB_OFFLINE="1")
    out = subprocess.run(command, capture_output=True, text=True, cwd=run_dir, env=env, check=False)
    export = run_dir / "out" / "profile_export_aiperf.json"
    if out.returncode != 0 or not export.exists():
        raise RuntimeError(f"aiperf against {server.label} failed ({out.returncode}): {out.stdout[-1500:]} {out.stderr[-1500:]}")
    doc = json.loads(export.read_text())
    if doc.get("error_summary"):
        raise RuntimeError(f"aiperf against {server.label}: failed requests: {json.dumps(doc['error_summary'])[:1500]}")
    return {
        "requests": round(doc["request_count"]["avg"]),
        "output_tokens": round(doc["total_output_tokens"]["avg"]),
        "tokens_per_s": round(doc["output_token_throughput"]["avg"], 1),
        "ttft_p50_ms": round(doc["time_to_first_token"]["p50"], 2),
        "ttft_p99_ms": round(doc["time_to_first_token"]["p99"], 2),
        "itl_p50_ms": round(doc["inter_token_latency"]["p50"], 3),
        "itl_p99_ms": round(doc["inter_token_latency"]["p99"], 3),
    }


GENERATORS = {"openinfer-bench": "openinfer bench openai", "aiperf": "aiperf"}

"""The OpenAI-compatible servers the LLM row compares, as processes on loopback ports.

* **openinfer**: `openinfer serve` with only the OpenAI frontend and the `transformers` backend
  (`cpu_threads: 1`, continuous batching up to 16 sequences);
* **transformers serve**: Hugging Face's own server, `transformers serve --continuous-batching`,
  from this interpreter's `transformers` (the same version, torch and model code openinfer's
  backend runs, so the comparison is of the servers, not of two stacks), with one torch thread
  (`OMP_NUM_THREADS=1`) like openinfer's model, and a KV cache of `KV_BLOCKS` blocks of 256
  tokens: room for 32 of the bench's requests at once. Left to itself it sizes the cache at
  80-90% of the free memory, which on a CPU is the machine's RAM (14.8 GB resident here).

Both serve the same local model folder offline (`HF_HUB_OFFLINE=1`). Each takes its own extra
request fields that make every answer exactly `max_tokens` long: openinfer `min_tokens` and
`ignore_eos`, `transformers serve` (which refuses fields outside OpenAI's) an end-of-sequence id
no token has, through its `generation_config` field.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from .servers import free_ports, wait_http_ready

ROOT = Path(__file__).resolve().parents[1]
MODEL = "tiny_llama"  # the name openinfer serves the model under
KV_BLOCKS = 32  # transformers serve's KV cache, in blocks of 256 tokens (see above)


class LlmServer:
    """One server process: started, ready (its health URL answers 200), stopped."""

    def __init__(self, key: str, label: str, command: list[str], env: dict[str, str], ready_path: str,
                 model: str, fixed_length: dict[str, Any], port: int, log: Path) -> None:
        self.key, self.label, self.command, self.env = key, label, command, env
        self.ready_path, self.model, self.port, self.log = ready_path, model, port, log
        self._fixed_length = fixed_length
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.process is not None, f"{self.label} is not running"
        return self.process.pid

    def fixed_length(self, max_tokens: int) -> dict[str, Any]:
        """Request fields, beyond greedy decoding and `max_tokens`, that make every answer
        `max_tokens` long (EOS ignored); a field given as None takes `max_tokens` itself."""
        return {k: max_tokens if v is None else v for k, v in self._fixed_length.items()}

    def __enter__(self) -> LlmServer:  # noqa: PYI034
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, timeout: float = 300) -> None:
        env = dict(os.environ, PYTHONPATH=str(ROOT), **self.env)
        self.process = subprocess.Popen(self.command, stdout=open(self.log, "wb"), stderr=subprocess.STDOUT,
                                        env=env, cwd=ROOT)
        state = wait_http_ready(self.process, f"http://{self.url}{self.ready_path}", timeout)
        if state == "exited":
            raise RuntimeError(f"{self.label} exited at start:\n{self.log.read_text(errors='replace')[-2000:]}")
        if state == "timeout":
            self.stop()
            raise RuntimeError(f"{self.label} was not ready after {timeout:.0f} s; see {self.log}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


def openinfer(model_dir: Path, workdir: Path) -> LlmServer:
    """`openinfer serve` with the OpenAI frontend only; its repository goes to `workdir/models`."""
    from tests.llm_fixtures import write_llm_model

    repo = workdir / "models"
    write_llm_model(repo, MODEL, model_dir, model_json={"cpu_threads": 1, "max_num_seqs": 16})
    (port,) = free_ports(1)
    command = [sys.executable, "-m", "openinfer", "serve", "--model-repository", str(repo),
               "--openai-port", str(port), "--openai-address", "127.0.0.1", "--enable-kserve-frontends", "false"]
    return LlmServer("openinfer", "openinfer", command, {"HF_HUB_OFFLINE": "1"}, "/health/ready", MODEL,
                     {"min_tokens": None, "ignore_eos": True}, port, workdir / "openinfer.log")


def transformers_serve(model_dir: Path, workdir: Path) -> tuple[LlmServer | None, str]:
    """`transformers serve --continuous-batching` on `model_dir`, or None and why it cannot run."""
    try:
        from transformers.utils.import_utils import is_serve_available
    except ImportError as exc:
        return None, f"transformers is not installed ({exc})"
    if not is_serve_available():
        return None, "transformers serve needs fastapi, uvicorn, pydantic and openai (pip install 'transformers[serving]')"
    (port,) = free_ports(1)
    command = [sys.executable, "-m", "transformers.cli.transformers", "serve", str(model_dir),
               "--continuous-batching", "--cb-num-blocks", str(KV_BLOCKS), "--device", "cpu",
               "--host", "127.0.0.1", "--port", str(port),
               "--log-level", "warning"]
    env = {"HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    # A pinned server answers only to its model's path; -1 is "no end-of-sequence token" to its batcher.
    no_eos = {"generation_config": json.dumps({"eos_token_id": -1})}
    return LlmServer("transformers", "transformers serve", command, env, "/health", str(model_dir), no_eos, port,
                     workdir / "transformers-serve.log"), ""

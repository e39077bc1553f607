"""Fixtures for the OpenAI frontend: a locally trained tokenizer, the deterministic mock models,
and the real `openinfer serve` with `--openai-port`, driven by the official `openai` SDK."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.helpers import ROOT, free_port, free_ports, http_status, read_log, stop_process, write_model
from tests.llm_fixtures import build_tokenizer
from tests.openai import mock_models


@dataclass
class OpenAIServer:
    """`openinfer serve ... --openai-port P`; ready when `/health/ready` answers 200."""

    repository: Path
    args: list[str] = field(default_factory=list)
    kserve: bool = True
    port: int = 0
    http_port: int = 0
    process: subprocess.Popen | None = None
    log_path: Path | None = None
    #: extra environment variables for the server process.
    env: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def command(self) -> list[str]:
        self.port, self.http_port, grpc_port, metrics_port = free_ports(4)
        command = [
            sys.executable, "-m", "openinfer", "serve",
            "--model-repository", str(self.repository),
            "--openai-port", str(self.port), "--openai-address", "127.0.0.1",
            "--http-port", str(self.http_port), "--grpc-port", str(grpc_port),
            "--metrics-port", str(metrics_port),
            "--http-address", "127.0.0.1", "--grpc-address", "127.0.0.1",
        ]
        if not self.kserve:
            command += ["--enable-kserve-frontends", "false"]
        return command + self.args

    def launch(self) -> subprocess.Popen:
        self.log_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"openinfer-openai-{free_port()}.log"
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        env.pop("OPENINFER_API_KEY", None)
        env.update(self.env)
        self.process = subprocess.Popen(
            self.command(), stdout=open(self.log_path, "wb"), stderr=subprocess.STDOUT, cwd=str(ROOT), env=env  # noqa: SIM115
        )
        return self.process

    def start(self, timeout: float = 120) -> OpenAIServer:
        self.launch()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited early:\n{self.log()}")
            if "Started OpenAI-compatible frontend" in self.log() and self.status("/health/ready") == 200:
                return self
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"server did not become ready:\n{self.log()}")

    def run_to_exit(self, timeout: float = 60) -> tuple[int, str]:
        """For start-up failures: wait for the process to end; its exit code and log."""
        self.launch()
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            raise
        return code, self.log()

    def status(self, path: str, headers: dict[str, str] | None = None) -> int:
        return http_status(self.url + path, headers, timeout=5)

    def log(self) -> str:
        return read_log(self.log_path)

    def stop(self, timeout: float = 60) -> int | None:
        return stop_process(self.process, timeout)

    def client(self, **kwargs):
        import openai

        return openai.OpenAI(base_url=self.base_url, api_key=kwargs.pop("api_key", "EMPTY"), max_retries=0, **kwargs)

    def async_client(self, **kwargs):
        import openai

        return openai.AsyncOpenAI(base_url=self.base_url, api_key=kwargs.pop("api_key", "EMPTY"), max_retries=0, **kwargs)


@pytest.fixture(scope="session")
def tokenizer_dir(tmp_path_factory) -> Path:
    return build_tokenizer(tmp_path_factory.mktemp("tokenizer"))


@pytest.fixture(scope="session")
def tokenizer(tokenizer_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tokenizer_dir))


def make_repo(root: Path, tokenizer_dir: Path, *, generation_config: dict | None = None) -> Path:
    """mock_llm (+ LoRA names), mock_embed, identity_fp32; the tokenizer sits next to mock_llm."""
    repo = root / "repo"
    write_model(repo, "mock_llm", mock_models.llm_config("mock_llm"), mock_models.LLM_MODEL)
    write_model(repo, "mock_embed", mock_models.embed_config("mock_embed"), mock_models.EMBED_MODEL)
    write_model(repo, "identity_fp32", mock_models.IDENTITY_CONFIG, mock_models.IDENTITY_MODEL)
    version = repo / "mock_llm" / "1"
    (version / "model.json").write_text(json.dumps({"model": str(tokenizer_dir), "enable_lora": True}))
    (version / "multi_lora.json").write_text(json.dumps({"doll": "doll", "sheep": "sheep"}))
    source = root / "weights"
    if generation_config is not None:
        source.mkdir(exist_ok=True)
        for path in tokenizer_dir.iterdir():
            (source / path.name).write_bytes(path.read_bytes())
        (source / "generation_config.json").write_text(json.dumps(generation_config))
        (source / "config.json").write_text(json.dumps({"max_position_embeddings": 4096}))
        (version / "model.json").write_text(json.dumps({"model": str(source), "enable_lora": True}))
    return repo


@pytest.fixture(scope="session")
def mock_repo(tmp_path_factory, tokenizer_dir) -> Path:
    return make_repo(
        tmp_path_factory.mktemp("openai"),
        tokenizer_dir,
        generation_config={"temperature": 0.25, "top_p": 0.5, "top_k": 7},
    )


@pytest.fixture(scope="session")
def llama3_server(mock_repo):
    """The main server: llama3 tool parser, LoRA names, tokenizer found in the model's directory."""
    server = OpenAIServer(mock_repo, ["--tool-call-parser", "llama3", "--lora-separator", "_lora_"]).start()
    yield server
    assert server.stop() == 0, server.log()


def raw_post(url: str, body: dict | bytes, headers: dict[str, str] | None = None, timeout: float = 30):
    """POST without any client-side normalisation; returns (status, headers, body bytes)."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, method="POST", headers={"content-type": "application/json", **(headers or {})}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            return reply.status, {k.lower(): v for k, v in reply.headers.items()}, reply.read()
    except urllib.error.HTTPError as exc:
        return exc.code, {k.lower(): v for k, v in exc.headers.items()}, exc.read()


def sse_events(body: bytes) -> list:
    """Parse an SSE body strictly: every event is `data: <json>` or `data: [DONE]`, blank-line separated."""
    text = body.decode()
    assert text.endswith("\n\n"), text[-100:]
    events = []
    for block in text.split("\n\n")[:-1]:
        assert block.startswith("data: "), block
        assert "\n" not in block, block
        payload = block[len("data: ") :]
        events.append(payload if payload == "[DONE]" else json.loads(payload))
    return events

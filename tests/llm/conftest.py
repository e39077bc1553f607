"""One real server for the LLM backend tests, serving tiny models built locally."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.helpers import Server
from tests.llm_fixtures import LlmAssets, llm_assets, write_llm_model

pytest.importorskip("torch")
pytest.importorskip("transformers")

#: one intra-op thread: these models are tiny and the test machine has two busy cores
ENGINE = {"cpu_threads": 1}
GENERATION_DEFAULTS = {"max_new_tokens": 5, "temperature": 0.0}


@pytest.fixture(scope="session")
def assets() -> LlmAssets:
    return llm_assets()


def build_repository(repo: Path, assets: LlmAssets) -> Path:
    lora = {"doll": assets.lora_doll, "sheep": assets.lora_sheep}
    write_llm_model(repo, "tiny_llama", assets.llama, lora=lora, model_json=ENGINE)
    write_llm_model(repo, "tiny_llama_unary", assets.llama, decoupled=False, model_json=ENGINE)
    write_llm_model(repo, "tiny_bert", assets.bert, decoupled=False, model_json=ENGINE)
    # the same weights with sampling defaults in generation_config.json
    tuned = repo.parent / "tiny-llama-tuned"
    shutil.copytree(assets.llama, tuned, dirs_exist_ok=True)
    config = json.loads((tuned / "generation_config.json").read_text())
    config.update(GENERATION_DEFAULTS)
    (tuned / "generation_config.json").write_text(json.dumps(config))
    write_llm_model(repo, "tiny_llama_tuned", tuned, decoupled=False, model_json=ENGINE)
    # vLLM needs a GPU: loaded on demand to check its UNAVAILABLE reason
    write_llm_model(repo, "tiny_llama_vllm", assets.llama, backend="vllm")
    return repo


@pytest.fixture(scope="session")
def llm_server(assets: LlmAssets, tmp_path_factory: pytest.TempPathFactory):
    repo = build_repository(tmp_path_factory.mktemp("llm") / "models", assets)
    load = ["tiny_llama", "tiny_llama_unary", "tiny_bert", "tiny_llama_tuned"]
    args = ["--model-control-mode=explicit", *(f"--load-model={name}" for name in load)]
    server = Server(repo, args=args).start(wait_for="ready", timeout=180)
    yield server
    code = server.stop()
    assert code == 0, f"server exited with {code}:\n{server.log()[-4000:]}"

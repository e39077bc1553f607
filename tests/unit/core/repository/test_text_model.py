"""What a model's folder says about it as a text model (`LoadedModel.text`), read by the core for
every backend, and by the LLM backends from their own reading of model.json."""

from __future__ import annotations

import json
from pathlib import Path

from openinfer._proto import model_config_pb2 as mc
from openinfer.backends.llm.model_files import describe_text
from openinfer.core.backend import ModelContext
from openinfer.core.repository.text_model import read_text_model


def _model(tmp_path: Path, engine_args: dict, parameters: dict[str, str] | None = None) -> ModelContext:
    model_dir = tmp_path / "chat"
    version_dir = model_dir / "1"
    version_dir.mkdir(parents=True)
    weights = tmp_path / "weights"
    weights.mkdir()
    (weights / "tokenizer_config.json").write_text("{}")
    (weights / "config.json").write_text(json.dumps({"max_position_embeddings": 2048}))
    (weights / "generation_config.json").write_text(
        json.dumps({"temperature": 0.6, "max_new_tokens": 64, "do_sample": True, "top_k": None}))
    (version_dir / "model.json").write_text(json.dumps(engine_args))
    (version_dir / "multi_lora.json").write_text(json.dumps({"doll": "adapters/doll", "sheep": "adapters/sheep"}))
    (model_dir / "chat_template.jinja").write_text("{{ messages[0]['content'] }}")
    config = mc.ModelConfig(name="chat", backend="python")
    for key, value in (parameters or {}).items():
        config.parameters[key].string_value = value
    return ModelContext("chat", 1, config, model_dir, version_dir, "python")


def test_the_folder_names_weights_tokenizer_template_adapters_and_defaults(tmp_path):
    text = read_text_model(_model(tmp_path, {"model": "../../weights", "enable_lora": "true"}))
    assert text.source_dir == (tmp_path / "weights").resolve()
    assert text.tokenizer_dir == text.source_dir
    assert text.chat_template == "{{ messages[0]['content'] }}"
    assert text.loras == ("doll", "sheep")
    assert dict(text.generation_defaults) == {"temperature": 0.6, "max_tokens": 64}
    assert text.max_model_len == 2048


def test_lora_switched_off_lists_no_adapters_and_a_parameter_names_the_weights(tmp_path):
    ctx = _model(tmp_path, {"enable_lora": False}, {"model": str(tmp_path / "weights")})
    text = read_text_model(ctx)
    assert text.loras == ()
    assert text.source_dir == tmp_path / "weights"


def test_a_folder_with_nothing_to_say_says_nothing(tmp_path):
    text = read_text_model(_model(tmp_path, {}))
    assert text.source_dir is None and text.tokenizer_dir is None
    assert text.loras == ("doll", "sheep")  # model.json does not switch LoRA off
    assert dict(text.generation_defaults) == {} and text.max_model_len is None


def test_the_llm_backends_give_the_engines_context_length_and_their_adapters(tmp_path):
    ctx = _model(tmp_path, {"model": "../../weights", "max_model_len": 512})
    text = describe_text(ctx)
    assert text.max_model_len == 512  # the engine's limit, before the model's 2048
    assert text.loras == ()  # the backend loads adapters only with enable_lora
    assert text.tokenizer_dir == (tmp_path / "weights").resolve()
    assert dict(text.generation_defaults) == {"temperature": 0.6, "max_tokens": 64}

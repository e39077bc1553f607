"""What an LLM model directory holds, in Triton's vLLM-backend layout.

    <model>/config.pbtxt            backend: "transformers" | "vllm"
    <model>/<version>/model.json    engine arguments; "model" names the weights
    <model>/<version>/multi_lora.json   {"<lora name>": "<adapter dir>"} when "enable_lora"

Paths in both files are absolute or relative to the version directory (then the model
directory). A name that is not a local directory is passed on as is (a hub id resolves only
from a local cache: nothing is downloaded here).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ...core.backend import ModelContext
from ...core.errors import InternalError, InvalidArgumentError
from ...core.repository.text_model import (
    ENGINE_ARGS_FILE,
    MULTI_LORA_FILE,
    TextModel,
    chat_template,
    generation_defaults,
    has_tokenizer,
    max_model_len,
    read_json,
)


@dataclass
class ModelFiles:
    model: str  # local directory (resolved) or an id for the local cache
    tokenizer: str
    engine_args: dict[str, Any]
    loras: dict[str, str] = field(default_factory=dict)  # name -> adapter directory
    lora_enabled: bool = False

    @property
    def local(self) -> Path | None:
        path = Path(self.model)
        return path if path.is_dir() else None

    def read_json(self, name: str) -> dict[str, Any]:
        """A JSON file of the model directory (generation_config.json, config.json), or {}."""
        local = self.local
        return {} if local is None else read_json(local / name)


def _resolve(value: str, ctx: ModelContext) -> str:
    path = Path(value).expanduser()
    if path.is_absolute():
        return str(path)
    for base in (ctx.version_dir, ctx.model_dir):
        candidate = (base / path).resolve()
        if candidate.exists():
            return str(candidate)
    return value


def _truthy(value: Any) -> bool:
    return str(value).lower() == "true"


def flag(args: dict[str, Any], name: str, default: bool) -> bool:
    """A boolean engine arg: JSON true/false or the strings "true"/"false"."""
    return _truthy(args[name]) if name in args else default


def read_model_files(ctx: ModelContext) -> ModelFiles:
    """Parse model.json and multi_lora.json with Triton's messages for what is missing."""
    path = ctx.version_dir / ENGINE_ARGS_FILE
    if not path.is_file():
        raise InvalidArgumentError(
            f"'{ENGINE_ARGS_FILE}' containing engine args must be provided in '{ctx.version_dir}'"
        )
    try:
        args = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise InvalidArgumentError(f"invalid '{path}': {exc}") from None
    if not isinstance(args, dict) or not isinstance(args.get("model"), str) or not args["model"]:
        raise InvalidArgumentError(f"'{path}' must be a JSON object with a \"model\" string")
    model = _resolve(args["model"], ctx)
    tokenizer = _resolve(args["tokenizer"], ctx) if isinstance(args.get("tokenizer"), str) else model
    files = ModelFiles(model=model, tokenizer=tokenizer, engine_args=args)
    if _truthy(args.get("enable_lora", False)):
        lora_path = ctx.version_dir / MULTI_LORA_FILE
        if not lora_path.is_file():
            raise InvalidArgumentError(f"Triton backend cannot find {lora_path}.")
        try:
            loras = json.loads(lora_path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise InvalidArgumentError(f"invalid '{lora_path}': {exc}") from None
        if not isinstance(loras, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in loras.items()
        ):
            raise InvalidArgumentError(f"'{lora_path}' must map LoRA names to adapter paths")
        files.loras = {name: _resolve(value, ctx) for name, value in loras.items()}
        files.lora_enabled = True
    return files


def check_lora(name: str | None, files: ModelFiles, supported: list[str]) -> None:
    """Triton's vLLM-backend messages for a LoRA the model does not have."""
    if name is None:
        return
    if not files.lora_enabled:
        raise InternalError("LoRA feature is not enabled.")
    if name not in supported:
        raise InternalError(f"LoRA {name} is not supported, we currently support {supported}")


def describe_text(ctx: ModelContext) -> TextModel:
    """What the LLM backends serve, from their own reading of model.json: the adapters they
    load, the engine's `max_model_len` before the model's own, the tokenizer the engine uses."""
    files = read_model_files(ctx)
    source = files.local
    tokenizer = Path(files.tokenizer)
    length = files.engine_args.get("max_model_len")
    return TextModel(
        source_dir=source,
        tokenizer_dir=tokenizer if has_tokenizer(tokenizer) else None,
        chat_template=chat_template(ctx),
        loras=tuple(files.loras) if files.lora_enabled else (),
        generation_defaults=MappingProxyType(generation_defaults(files.read_json("generation_config.json"))),
        max_model_len=int(length) if length else max_model_len(files.read_json("config.json")),
    )

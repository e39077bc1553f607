"""What a model's folder says about it as a text model: the description the OpenAI frontend serves.

A text model (text in, text or vectors out) needs more than its config: where its Hugging Face
files are, its tokenizer, its chat template, its LoRA adapters, the sampling defaults of its
`generation_config.json` and its context length. Backends fill this in (`Backend.describe_text`);
the default here reads the folder as Triton's OpenAI frontend does, for any backend:

    <model>/<version>/model.json        "model" and "tokenizer" name folders (vLLM engine args)
    <model>/<version>/multi_lora.json   {"<adapter>": "<path>"} when "enable_lora" is not false
    config.pbtxt parameters            "model" and "tokenizer" as above, and before them
    chat_template.jinja                in the version folder, else the model folder

A folder named relatively is found under the version folder, then the model folder.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..backend import ModelContext

log = logging.getLogger("openinfer.server")

ENGINE_ARGS_FILE = "model.json"
MULTI_LORA_FILE = "multi_lora.json"
#: A chat template stored on its own, as transformers saves it next to a tokenizer.
CHAT_TEMPLATE_FILE = "chat_template.jinja"
_TOKENIZER_FILES = ("tokenizer_config.json", "tokenizer.json")

#: generation_config.json key -> sampling parameter (the subset vLLM's `--generation-config auto`
#: honours).
GENERATION_CONFIG_KEYS = {
    "temperature": "temperature",
    "top_p": "top_p",
    "top_k": "top_k",
    "min_p": "min_p",
    "repetition_penalty": "repetition_penalty",
    "max_new_tokens": "max_tokens",
}


@dataclass(frozen=True)
class TextModel:
    """A model version as a text model; every field may be empty (a model that tokenizes for
    itself has no tokenizer here)."""

    #: Where its weights, `config.json` and `generation_config.json` live.
    source_dir: Path | None = None
    tokenizer_dir: Path | None = None
    #: The text of its own `chat_template.jinja`, for chat without a tokenizer.
    chat_template: str | None = None
    #: The LoRA adapters a request may name.
    loras: tuple[str, ...] = ()
    #: Sampling defaults from `generation_config.json`, by sampling parameter name.
    generation_defaults: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    #: Its context length: the engine's limit where its backend has one, else its `config.json`'s.
    max_model_len: int | None = None


def generation_defaults(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The sampling defaults a `generation_config.json` sets explicitly."""
    return {ours: raw[key] for key, ours in GENERATION_CONFIG_KEYS.items() if raw.get(key) is not None}


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object from a file; {} when it is missing, unreadable or not an object."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def has_tokenizer(path: Path) -> bool:
    return path.is_dir() and any((path / name).is_file() for name in _TOKENIZER_FILES)


def find_dir(value: str, *bases: Path) -> Path | None:
    """A folder named absolutely or relative to one of `bases` (version folder, then model folder)."""
    path = Path(value).expanduser()
    if path.is_absolute():
        return path if path.is_dir() else None
    for base in bases:
        if (base / path).is_dir():
            return (base / path).resolve()
    return None


#: Where a model's folders are named: the config's parameters, then `model.json`.
Named = tuple[Mapping[str, Any], ...]


def _named_dir(ctx: ModelContext, named: Named, key: str) -> Path | None:
    """The first folder found that `key` names."""
    for source in named:
        value = source.get(key)
        found = find_dir(value, ctx.version_dir, ctx.model_dir) if isinstance(value, str) and value else None
        if found is not None:
            return found
    return None


def _source_dir(ctx: ModelContext, named: Named) -> Path | None:
    found = _named_dir(ctx, named, "model")
    if found is not None:
        return found
    for candidate in (ctx.version_dir, ctx.model_dir):
        if has_tokenizer(candidate) or (candidate / "config.json").is_file():
            return candidate
    return None


def _tokenizer_dir(ctx: ModelContext, named: Named, source: Path | None) -> Path | None:
    """The tokenizer named for the model, else the one stored with its weights."""
    found = _named_dir(ctx, named, "tokenizer")
    if found is not None and has_tokenizer(found):
        return found
    return source if source is not None and has_tokenizer(source) else None


def chat_template(ctx: ModelContext) -> str | None:
    """The text of a `chat_template.jinja` in the version folder, else the model folder."""
    for candidate in (ctx.version_dir, ctx.model_dir):
        path = candidate / CHAT_TEMPLATE_FILE
        if path.is_file():
            try:
                return path.read_text()
            except (OSError, UnicodeDecodeError) as exc:
                log.warning("cannot read %s: %s", path, exc)
    return None


def adapter_names(version_dir: Path, engine_args: Mapping[str, Any] | None = None) -> tuple[str, ...]:
    """The adapters `multi_lora.json` lists; none when `model.json` (`engine_args`, read here
    when not given) switches LoRA off."""
    if engine_args is None:
        engine_args = read_json(version_dir / ENGINE_ARGS_FILE)
    enabled = engine_args.get("enable_lora")
    if enabled is not None and str(enabled).strip().lower() != "true":
        return ()
    path = version_dir / MULTI_LORA_FILE
    if not path.is_file():
        return ()
    try:
        table = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        log.warning("cannot read %s: %s", path, exc)
        return ()
    if not isinstance(table, dict):
        log.warning("%s must map adapter names to paths", path)
        return ()
    return tuple(str(name) for name in table)


def max_model_len(hf_config: Mapping[str, Any]) -> int | None:
    length = hf_config.get("max_position_embeddings") or hf_config.get("n_positions")
    return length if isinstance(length, int) else None


def read_text_model(ctx: ModelContext) -> TextModel:
    """The description any backend's model gets unless its backend knows better."""
    engine_args = read_json(ctx.version_dir / ENGINE_ARGS_FILE)
    parameters = {key: value.string_value for key, value in ctx.config.parameters.items()}
    named = (parameters, engine_args)
    source = _source_dir(ctx, named)
    defaults: dict[str, Any] = {}
    length = None
    if source is not None:
        defaults = generation_defaults(read_json(source / "generation_config.json"))
        length = max_model_len(read_json(source / "config.json"))
    return TextModel(
        source_dir=source,
        tokenizer_dir=_tokenizer_dir(ctx, named, source),
        chat_template=chat_template(ctx),
        loras=adapter_names(ctx.version_dir, engine_args),
        generation_defaults=MappingProxyType(defaults),
        max_model_len=length,
    )

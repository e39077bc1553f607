"""Which loaded models the OpenAI frontend serves, and what it knows about each.

Facts come from the core's loaded model: its config, and what its backend says of it as a text
model (`LoadedModel.text`: tokenizer, chat template, adapters, generation defaults). They are
cached per loaded model object, so a reload is seen at once.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...core.errors import OpenInferError
from ...core.server import InferenceServer
from .errors import invalid, model_not_found
from .lora import split_name

log = logging.getLogger("openinfer.openai")

OWNED_BY = "openinfer"
GENERATE, EMBED, OTHER = "generate", "embed", "other"

@dataclass
class TensorShape:
    datatype: str
    dims: tuple[int, ...]


@dataclass
class ModelInfo:
    name: str
    version: str
    backend: str
    kind: str
    created: int
    inputs: dict[str, TensorShape]
    outputs: set[str]
    batched: bool
    decoupled: bool
    source_dir: Path | None
    tokenizer_dir: Path | None
    #: The model's own `chat_template.jinja`, for chat without a tokenizer.
    chat_template: str | None = None
    loras: list[str] = field(default_factory=list)
    generation_defaults: dict[str, Any] = field(default_factory=dict)
    max_model_len: int | None = None
    request_format: str = "vllm"  # or "tensorrtllm"

    def has_input(self, name: str) -> bool:
        return name in self.inputs


@dataclass
class ResolvedModel:
    """A request's `model` string resolved to a served model (and maybe a LoRA adapter)."""

    requested: str
    info: ModelInfo
    lora: str | None


class ModelCatalog:
    """Builds `ModelInfo` on first sight of each loaded model object."""

    def __init__(self, server: InferenceServer, *, lora_separator: str | None, backend: str | None) -> None:
        self.server = server
        self.lora_separator = lora_separator or None
        self.forced_backend = backend
        self._cache: dict[int, ModelInfo] = {}

    def _build(self, model: Any) -> ModelInfo:
        ctx = model.ctx
        inputs = {name: TensorShape(spec.datatype, spec.dims) for name, spec in model.inputs.items()}
        kind = GENERATE if "text_input" in inputs else EMBED if "embedding_request" in inputs else OTHER
        text = model.text
        request_format = self.forced_backend or (
            "tensorrtllm" if "max_tokens" in inputs and "sampling_parameters" not in inputs else "vllm"
        )
        info = ModelInfo(
            name=model.name,
            version=model.version_str,
            backend=ctx.backend_name or model.config.backend or model.config.platform,
            kind=kind,
            created=int(time.time()),
            inputs=inputs,
            outputs=set(model.outputs),
            batched=model.max_batch_size > 0,
            decoupled=bool(model.decoupled),
            source_dir=text.source_dir,
            tokenizer_dir=text.tokenizer_dir,
            chat_template=text.chat_template,
            loras=list(text.loras) if kind == GENERATE else [],
            generation_defaults=dict(text.generation_defaults),
            max_model_len=text.max_model_len,
            request_format=request_format,
        )
        log.info("Found model: name='%s', backend='%s'", info.name, info.backend)
        return info

    def info_of(self, model: Any) -> ModelInfo:
        info = self._cache.get(id(model))
        if info is None or info.name != model.name:
            info = self._build(model)
            self._cache[id(model)] = info
        return info

    def loaded(self) -> list[ModelInfo]:
        models = {}
        for model in self.server.loaded_models():
            models[model.name] = model  # newest READY version wins, as for inference
        live = {id(m) for m in models.values()}
        for key in [k for k in self._cache if k not in live]:
            self._cache.pop(key, None)
        return [self.info_of(m) for m in models.values()]

    def find(self, name: str) -> ModelInfo | None:
        try:
            return self.info_of(self.server.model(name))
        except OpenInferError:
            return None

    def resolve(self, requested: str, kinds: tuple[str, ...] = (GENERATE,)) -> ResolvedModel:
        """The model a request names; 404 when unknown, 400/404 for an unknown adapter."""
        base, lora = split_name(requested, self.lora_separator)
        info = self.find(base)
        if info is None:
            raise model_not_found(requested)
        if lora is not None and lora not in info.loras:
            raise invalid(f"Unknown LoRA: {lora}; for model: {requested}", "model", "lora_not_found")
        if info.kind not in kinds:
            raise invalid(_wrong_kind(info, kinds), "model", "model_not_supported")
        return ResolvedModel(requested, info, lora)

    def model_ids(self) -> list[tuple[str, ModelInfo]]:
        """Every id /v1/models lists: each model, then `<model><sep><lora>` for its adapters."""
        out = []
        for info in self.loaded():
            out.append((info.name, info))
            if self.lora_separator:
                out.extend((f"{info.name}{self.lora_separator}{lora}", info) for lora in info.loras)
        return out


def _wrong_kind(info: ModelInfo, kinds: tuple[str, ...]) -> str:
    if EMBED in kinds:
        return (
            f"Model '{info.name}' does not support embedding requests (it has no "
            "'embedding_request' input)"
        )
    if info.kind == EMBED:
        return f"Model '{info.name}' is an embedding model; use /v1/embeddings"
    return f"Model '{info.name}' does not support text generation (it has no 'text_input' input)"

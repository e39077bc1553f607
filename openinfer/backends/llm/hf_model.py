"""Loading a Hugging Face model directory for the transformers backend (in a worker thread).

Decides what the model can do (generate with a causal LM, or embed with an encoder), loads
the weights, the tokenizer, the LoRA adapters listed in multi_lora.json (peft), and reads the
defaults the engine needs: end-of-sequence ids, context length, generation_config sampling
defaults. Foreign errors become UNAVAILABLE/INVALID_ARG here, once.
"""

from __future__ import annotations

import inspect
import logging
import os
import warnings
from dataclasses import dataclass, field
from typing import Any

from ...core.errors import InvalidArgumentError, UnavailableError
from ...core.repository.text_model import generation_defaults
from . import llama_decode
from .interface import EMBED, GENERATE
from .model_files import ModelFiles

log = logging.getLogger("openinfer.llm")

_DTYPES = {"float32": "float32", "float": "float32", "bfloat16": "bfloat16", "float16": "float16",
           "half": "float16"}
_threads_set = False


@dataclass
class HFModel:
    task: str  # GENERATE or EMBED
    model: Any
    tokenizer: Any
    eos_ids: list[int] = field(default_factory=list)
    max_model_len: int = 2048
    defaults: dict[str, Any] = field(default_factory=dict)
    loras: list[str] = field(default_factory=list)
    cache_kwarg: str = "past_key_values"
    logits_to_keep: bool = False
    pooling: str = "mean"  # embeddings: mean | cls | last
    normalize: bool = True
    vocab_size: int = 0
    #: Whether this model's caches join a running batch (kv_cache.mergeable); None until warm_up.
    joinable_cache: bool | None = None
    #: What computes a decode step instead of transformers' forward (`llama_decode`), if anything.
    decoder: llama_decode.LlamaDecoder | None = None

    @property
    def peft(self) -> bool:
        return bool(self.loras)


def _set_threads(args: dict[str, Any]) -> None:
    """Intra-op threads, once per process: `cpu_threads` in model.json, else half the cores
    (the event loop, tokenizers and other models need the rest; on small machines OpenMP
    spinning on a busy core costs more than the extra thread gains)."""
    global _threads_set
    import torch

    wanted = args.get("cpu_threads")
    if wanted is None and _threads_set:
        return
    count = int(wanted) if wanted is not None else max(1, (os.cpu_count() or 2) // 2)
    torch.set_num_threads(max(1, min(count, os.cpu_count() or count)))
    _threads_set = True


def detect_task(files: ModelFiles, architectures: list[str] | None = None) -> str:
    """`task`/`runner` in model.json wins; else a causal-LM architecture generates."""
    args = files.engine_args
    wanted = str(args.get("task") or args.get("runner") or "").lower()
    if wanted in ("embed", "embedding", "pooling"):
        return EMBED
    if wanted in ("generate", "generation"):
        return GENERATE
    if architectures is None:
        architectures = files.read_json("config.json").get("architectures") or []
    if any(a.endswith(("ForCausalLM", "LMHeadModel", "ForConditionalGeneration")) for a in architectures):
        return GENERATE
    return EMBED


def _eos_ids(files: ModelFiles, tokenizer: Any, config: Any) -> list[int]:
    ids: list[int] = []
    for source in (files.read_json("generation_config.json").get("eos_token_id"),
                   getattr(config, "eos_token_id", None), tokenizer.eos_token_id):
        values = source if isinstance(source, list) else [source]
        ids.extend(int(v) for v in values if isinstance(v, int) and int(v) not in ids)
    return ids


def _pooling(files: ModelFiles) -> str:
    """sentence-transformers' pooling config when present (1_Pooling/config.json)."""
    local = files.local
    if local is not None:
        cfg = ModelFiles(str(local / "1_Pooling"), "", {}).read_json("config.json")
        if cfg.get("pooling_mode_cls_token"):
            return "cls"
        if cfg.get("pooling_mode_lasttoken"):
            return "last"
    return str(files.engine_args.get("pooling", "mean")).lower()


def load(files: ModelFiles, model_name: str) -> HFModel:
    try:
        import torch
        import transformers
        from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:
        raise UnavailableError(
            f"model '{model_name}': the transformers backend needs torch and transformers "
            f"(pip install 'openinfer[llm]'): {exc}"
        ) from None
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    args = files.engine_args
    _set_threads(args)
    trust = bool(args.get("trust_remote_code", False))
    try:
        config = AutoConfig.from_pretrained(files.model, trust_remote_code=trust)
        tokenizer = AutoTokenizer.from_pretrained(files.tokenizer, trust_remote_code=trust)
    except (OSError, ValueError) as exc:
        raise InvalidArgumentError(
            f"model '{model_name}': cannot load '{files.model}' (a local model directory is "
            f"needed; nothing is downloaded): {exc}"
        ) from None
    task = detect_task(files, getattr(config, "architectures", None) or [])
    dtype_name = _DTYPES.get(str(args.get("dtype", "float32")).lower(), "float32")
    dtype = getattr(torch, dtype_name)
    try:
        loader = AutoModelForCausalLM if task == GENERATE else AutoModel
        model = loader.from_pretrained(files.model, dtype=dtype, trust_remote_code=trust)
    except (OSError, ValueError, RuntimeError) as exc:
        raise InvalidArgumentError(f"model '{model_name}': cannot load weights: {exc}") from None
    model.eval()
    loras: list[str] = []
    if files.lora_enabled and files.loras:
        if task != GENERATE:
            raise InvalidArgumentError(f"model '{model_name}': LoRA adapters need a generative model")
        model, loras = _load_loras(model, files.loras, model_name)
    max_len = int(
        args.get("max_model_len")
        or getattr(config, "max_position_embeddings", 0)
        or min(getattr(tokenizer, "model_max_length", 2048), 1 << 20)
    )
    forward = inspect.signature((model.get_base_model() if loras else model).forward).parameters
    own_decode = task == GENERATE and not loras and args.get("llama_decode", True) is not False
    return HFModel(
        task=task,
        model=model,
        tokenizer=tokenizer,
        eos_ids=_eos_ids(files, tokenizer, config),
        max_model_len=max_len,
        defaults=generation_defaults(files.read_json("generation_config.json")),
        loras=loras,
        cache_kwarg="cache" if "cache" in forward else "past_key_values",
        logits_to_keep="logits_to_keep" in forward,
        pooling=_pooling(files) if task == EMBED else "mean",
        normalize=bool(args.get("normalize", True)),
        vocab_size=int(getattr(config, "vocab_size", 0) or len(tokenizer)),
        decoder=llama_decode.decoder_for(model) if own_decode else None,
    )


def _load_loras(model: Any, adapters: dict[str, str], model_name: str) -> tuple[Any, list[str]]:
    try:
        from peft import PeftModel
    except ImportError as exc:
        raise UnavailableError(f"model '{model_name}': LoRA adapters need 'peft': {exc}") from None
    names = list(adapters)
    try:
        warnings.filterwarnings("ignore", category=FutureWarning, module="transformers")
        peft_model = PeftModel.from_pretrained(model, adapters[names[0]], adapter_name=names[0])
        for name in names[1:]:
            peft_model.load_adapter(adapters[name], adapter_name=name)
    except (OSError, ValueError, RuntimeError, KeyError) as exc:
        raise InvalidArgumentError(f"model '{model_name}': cannot load LoRA adapter: {exc}") from None
    peft_model.eval()
    log.info("model '%s': LoRA adapters %s", model_name, names)
    return peft_model, names


def warm_up(lm: HFModel) -> None:
    """One small forward pass (two for a causal LM: prefill + a cached step) before READY, so
    the first request does not pay for torch's first-call allocations; a causal LM's pass also
    shows whether its caches can be batched."""
    import torch

    ids = torch.tensor([[lm.tokenizer.bos_token_id or 0] * 4], dtype=torch.long)
    with torch.inference_mode():
        if lm.task == EMBED:
            lm.model(input_ids=ids, attention_mask=torch.ones_like(ids))
            return
        from transformers import DynamicCache

        from .kv_cache import mergeable

        cache = DynamicCache()
        extra = {"adapter_names": [lm.loras[0]]} if lm.peft else {}
        out = lm.model(input_ids=ids, use_cache=True, **{lm.cache_kwarg: cache}, **extra)
        cache = getattr(out, "past_key_values", None) or cache
        lm.joinable_cache = mergeable(cache)
        lm.model(input_ids=ids[:, :1], use_cache=True, attention_mask=torch.ones(1, 5, dtype=torch.long),
                 position_ids=torch.tensor([[4]]), **{lm.cache_kwarg: cache}, **extra)

"""Tiny LLM assets built locally (no hub downloads): tokenizer, causal LM, encoder, LoRA adapters.

Everything is random-weight and seeded, so outputs are deterministic for a given build. The
assets are built once per machine under the temp directory (keyed by a build version) and
shared by every test session; `llm_assets()` is the entry point, `write_llm_model()` lays a
Triton-style model directory (`config.pbtxt` + `1/model.json`) over them.

    assets = llm_assets()
    write_llm_model(repo, "tiny_llama", assets.llama, lora={"doll": assets.lora_doll})
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path

#: Bump when a builder changes, so stale cached assets are not reused.
BUILD_VERSION = "3"

SPECIAL_TOKENS = [
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eot_id|>",
    "<|python_tag|>",
    "<pad>",
]

#: Llama-3 shaped template; tools (when given) are rendered as JSON in a system block, and
#: assistant tool calls as `{"name": ..., "parameters": ...}` (what the llama3 parser reads).
CHAT_TEMPLATE = (
    "{{- bos_token }}"
    "{%- if tools %}<|start_header_id|>system<|end_header_id|>\n\n"
    "You can call these tools by answering with JSON {\"name\": ..., \"parameters\": ...}:\n"
    "{%- for tool in tools %}\n{{ tool | tojson }}{%- endfor %}<|eot_id|>{%- endif %}"
    "{%- for message in messages %}"
    "<|start_header_id|>{{ message['role'] }}<|end_header_id|>\n\n"
    "{% if message['content'] is string %}{{ message['content'] | trim }}"
    "{%- elif message['content'] %}{%- for part in message['content'] %}"
    "{%- if part['type'] == 'text' %}{{ part['text'] | trim }}{%- endif %}{%- endfor %}"
    "{%- endif %}"
    "{%- if message['tool_calls'] is defined and message['tool_calls'] %}"
    "{%- for call in message['tool_calls'] %}"
    "{\"name\": \"{{ call['function']['name'] }}\", \"parameters\": "
    "{{ call['function']['arguments'] | tojson }}}"
    "{%- endfor %}{%- endif %}<|eot_id|>"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)

_CORPUS = """\
The quick brown fox jumps over the lazy dog. Machine learning is a field of study.
Inference servers answer requests from many clients at once, batching them together.
What is the weather in Dallas, Texas? It is sunny and warm, around 85 degrees.
The wheel was invented in Mesopotamia around 3500 BC. Tell me a story about a cat.
{"name": "get_current_weather", "parameters": {"city": "Dallas", "state": "TX"}}
Numbers: 0 1 2 3 4 5 6 7 8 9 10 42 100 3.14 -1 true false null [ ] { } : , " '
Hello world! How are you today? I am fine, thank you. Say this is a test.
"""


@dataclass(frozen=True)
class LlmAssets:
    """Paths of the built assets (each a Hugging Face style directory)."""

    root: Path
    tokenizer: Path
    llama: Path  # causal LM with tokenizer + chat template + generation_config.json
    bert: Path  # encoder for embeddings, with tokenizer
    lora_doll: Path  # peft LoRA adapter over `llama`
    lora_sheep: Path


# --------------------------------------------------------------------------- builders
def build_tokenizer(out: Path, vocab_size: int = 384) -> Path:
    """A byte-level BPE trained on a small corpus, with Llama-3 style special tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator([_CORPUS] * 4, trainer=trainer)
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|begin_of_text|>",
        eos_token="<|eot_id|>",
        pad_token="<pad>",
        model_max_length=512,
    )
    fast.chat_template = CHAT_TEMPLATE
    out.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(out)
    return out


def _copy_tokenizer(src: Path, dst: Path) -> None:
    for path in src.iterdir():
        if path.is_file():
            (dst / path.name).write_bytes(path.read_bytes())


def build_tiny_llama(
    out: Path,
    tokenizer_dir: Path,
    *,
    seed: int = 0,
    generation_config: dict | None = None,
    **sizes: int,
) -> Path:
    """A 2-layer Llama with random weights, saved with its tokenizer and generation config.
    `sizes` override LlamaConfig fields (GPU kernels want head_dim >= 32: hidden_size=256)."""
    import torch
    from transformers import AutoTokenizer, GenerationConfig, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    torch.manual_seed(seed)
    fields = {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 512,
        **sizes,  # passed to the constructor so derived fields (head_dim) follow
    }
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
        **fields,
    )
    model = LlamaForCausalLM(config)
    with torch.no_grad():  # larger logits so greedy picks are stable and adapters show
        model.lm_head.weight.mul_(8.0)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    _copy_tokenizer(tokenizer_dir, out)
    gen = {
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
    }
    gen.update(generation_config or {})
    GenerationConfig(**gen).save_pretrained(out)
    return out


def build_tiny_bert(out: Path, tokenizer_dir: Path, *, seed: int = 0, **sizes: int) -> Path:
    """A 2-layer BERT-style encoder with random weights, for the embeddings path."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    torch.manual_seed(seed)
    fields = {
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "max_position_embeddings": 512,
        **sizes,
    }
    config = BertConfig(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id, **fields)
    out.mkdir(parents=True, exist_ok=True)
    BertModel(config).save_pretrained(out)
    _copy_tokenizer(tokenizer_dir, out)
    return out


def build_lora_adapter(out: Path, base_dir: Path, *, seed: int, rank: int = 8) -> Path:
    """A peft LoRA adapter over `base_dir` with random (non-zero) A and B, so it changes outputs."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(base_dir)
    torch.manual_seed(seed)
    config = LoraConfig(
        r=rank,
        lora_alpha=2 * rank,
        target_modules=["q_proj", "v_proj", "o_proj"],
        init_lora_weights=False,  # random B too: a zero B would make the adapter a no-op
        task_type="CAUSAL_LM",
    )
    model = get_peft_model(base, config)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    return out


def build_all(root: Path) -> LlmAssets:
    assets = _layout(root)
    build_tokenizer(assets.tokenizer)
    build_tiny_llama(assets.llama, assets.tokenizer)
    build_tiny_bert(assets.bert, assets.tokenizer)
    build_lora_adapter(assets.lora_doll, assets.llama, seed=1)
    build_lora_adapter(assets.lora_sheep, assets.llama, seed=2)
    return assets


def _layout(root: Path) -> LlmAssets:
    return LlmAssets(
        root=root,
        tokenizer=root / "tokenizer",
        llama=root / "tiny-llama",
        bert=root / "tiny-bert",
        lora_doll=root / "lora-doll",
        lora_sheep=root / "lora-sheep",
    )


def llm_assets(root: Path | None = None) -> LlmAssets:
    """Build (once, under a file lock) or reuse the assets; safe across parallel processes."""
    base = root or Path(os.environ.get("OPENINFER_LLM_ASSETS", tempfile.gettempdir()))
    root = base / f"openinfer-llm-assets-v{BUILD_VERSION}"
    root.parent.mkdir(parents=True, exist_ok=True)
    done = root / ".complete"
    with open(str(root) + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            build_all(root)
            done.write_text("ok")
    return _layout(root)


# ----------------------------------------------------------------- model repositories
def write_llm_model(
    repo: Path,
    name: str,
    model_dir: Path,
    *,
    backend: str = "transformers",
    decoupled: bool = True,
    lora: dict[str, Path] | None = None,
    model_json: dict | None = None,
    config_extra: str = "",
) -> Path:
    """A Triton vLLM-style model: `config.pbtxt` (backend only; inputs auto-completed) and
    `1/model.json` naming the weights; `1/multi_lora.json` when adapters are given."""
    directory = repo / name
    version = directory / "1"
    version.mkdir(parents=True, exist_ok=True)
    policy = f"model_transaction_policy {{ decoupled: {'true' if decoupled else 'false'} }}\n"
    (directory / "config.pbtxt").write_text(
        f'backend: "{backend}"\n{policy}' + textwrap.dedent(config_extra)
    )
    engine = {"model": str(model_dir)}
    if lora:
        engine["enable_lora"] = True
        (version / "multi_lora.json").write_text(
            json.dumps({key: str(path) for key, path in lora.items()})
        )
    engine.update(model_json or {})
    (version / "model.json").write_text(json.dumps(engine, indent=2))
    return directory

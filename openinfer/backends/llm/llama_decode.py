"""A Llama model's decode steps (and plain prefills), without transformers' generic forward.

A decode step feeds one token per running sequence. For the small models a CPU serves, the
matrix products are a small part of that step: transformers' `LlamaForCausalLM.forward` spends
most of it in Python (keyword and output plumbing, a 4-D mask built every step, hub-kernel and
checkpointing wrappers). The same arithmetic written out here, over the model's own weights and
the same `DynamicCache`, took 462 µs a step where transformers took 1,246 µs (best of two
rounds of 5 x 50 steps, tiny Llama: 2 layers, hidden size 64; 4 rows, one padded; logits equal
within 1.2e-6). A prefill of prompts that are neither padded nor continue a cached prefix (one
prompt, or several of one length) goes the same way: 1,073 µs through transformers for one
16-token prompt. Other prefills, LoRA adapters and every other architecture keep transformers'
forward.

Only a plain Llama qualifies (`decoder_for` checks), or a Mistral or Qwen2 without a sliding
window, whose layers compute the same: their own layer classes, SiLU, no tensor-parallel split of
the projections. Its numerics follow transformers' Llama: RMSNorm computed in
float32, rotary embeddings from the model's own `rotary_emb` (so rope scaling is its), scaled
dot-product attention over the cached keys, grouped-query heads shared. The attributes read here
are those of transformers 5's `modeling_llama`; where a release names them otherwise, the model
keeps transformers' forward, and `tests/llm/test_llama_decode.py` fails until this module follows.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch
import torch.nn.functional as F

#: The causal LMs whose decoder layer is Llama's, by the prefix of their module classes: Mistral
#: and Qwen2 differ only in a sliding window (refused below) and Qwen2's q/k/v biases (carried by
#: the projections themselves).
_FAMILIES = {"LlamaForCausalLM": "Llama", "MistralForCausalLM": "Mistral", "Qwen2ForCausalLM": "Qwen2"}
#: The module classes a layer must be made of exactly, after the family's prefix (a wrapper, such
#: as peft's, disqualifies).
_LAYER_CLASSES = {
    "input_layernorm": "RMSNorm",
    "post_attention_layernorm": "RMSNorm",
    "self_attn": "Attention",
    "mlp": "MLP",
}
#: The projections each of those holds, plain `torch.nn.Linear`s (a quantized one disqualifies).
_LINEARS = {"self_attn": ("q_proj", "k_proj", "v_proj", "o_proj"), "mlp": ("gate_proj", "up_proj", "down_proj")}


class _Layer(NamedTuple):
    norm_weight: torch.Tensor
    norm_eps: float
    q: torch.nn.Module
    k: torch.nn.Module
    v: torch.nn.Module
    o: torch.nn.Module
    head_dim: int
    scaling: float
    grouped: bool
    post_norm_weight: torch.Tensor
    post_norm_eps: float
    gate: torch.nn.Module
    up: torch.nn.Module
    down: torch.nn.Module


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """transformers' LlamaRMSNorm: the variance in float32, the weight applied in the input's dtype."""
    wide = x.to(torch.float32)
    wide = wide * torch.rsqrt(wide.pow(2).mean(-1, keepdim=True) + eps)
    return weight * wide.to(x.dtype)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


class LlamaDecoder:
    """Computes the next-token logits of one decode step, appending to the step's cache."""

    def __init__(self, model: Any) -> None:
        base = model.model
        self._embed = base.embed_tokens.weight
        self._rotary = base.rotary_emb
        self._norm_weight = base.norm.weight
        self._norm_eps = float(base.norm.variance_epsilon)
        self._head = model.lm_head
        self._layers = [
            _Layer(
                layer.input_layernorm.weight, float(layer.input_layernorm.variance_epsilon),
                layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj,
                layer.self_attn.o_proj, int(layer.self_attn.head_dim), float(layer.self_attn.scaling),
                int(layer.self_attn.num_key_value_groups) > 1,
                layer.post_attention_layernorm.weight,
                float(layer.post_attention_layernorm.variance_epsilon),
                layer.mlp.gate_proj, layer.mlp.up_proj, layer.mlp.down_proj,
            )
            for layer in base.layers
        ]

    def __call__(
        self, input_ids: torch.Tensor, positions: torch.Tensor, cache: Any, mask: torch.Tensor | None
    ) -> torch.Tensor:
        """Logits [rows, vocab] for `input_ids` [rows, 1] at `positions` [rows, 1]. `mask`
        [rows, cached + 1] marks the columns each row attends (None: all of them)."""
        attend = None if mask is None else mask.bool()[:, None, None, :]
        return self._run(input_ids, positions, cache, attend, causal=False)

    def prefill(self, input_ids: torch.Tensor, cache: Any) -> torch.Tensor:
        """The next-token logits [rows, vocab] of prompts of one length [rows, tokens], none of
        them padded, into an empty `cache`."""
        positions = torch.arange(input_ids.shape[1]).expand(input_ids.shape[0], -1)
        return self._run(input_ids, positions, cache, None, causal=input_ids.shape[1] > 1)

    def _run(
        self, input_ids: torch.Tensor, positions: torch.Tensor, cache: Any, attend: torch.Tensor | None,
        causal: bool,
    ) -> torch.Tensor:
        rows, tokens = input_ids.shape
        hidden = F.embedding(input_ids, self._embed)
        cos, sin = self._rotary(hidden, positions)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        for index, layer in enumerate(self._layers):
            x = _rms_norm(hidden, layer.norm_weight, layer.norm_eps)
            query = layer.q(x).view(rows, tokens, -1, layer.head_dim).transpose(1, 2)
            key = layer.k(x).view(rows, tokens, -1, layer.head_dim).transpose(1, 2)
            value = layer.v(x).view(rows, tokens, -1, layer.head_dim).transpose(1, 2)
            key, value = cache.update(_rotate(key, cos, sin), value, index)
            attended = F.scaled_dot_product_attention(
                _rotate(query, cos, sin), key, value, attn_mask=attend, is_causal=causal,
                scale=layer.scaling, enable_gqa=layer.grouped,
            )
            hidden = hidden + layer.o(attended.transpose(1, 2).reshape(rows, tokens, -1))
            x = _rms_norm(hidden, layer.post_norm_weight, layer.post_norm_eps)
            hidden = hidden + layer.down(F.silu(layer.gate(x)) * layer.up(x))
        return self._head(_rms_norm(hidden[:, -1, :], self._norm_weight, self._norm_eps))


def decoder_for(model: Any) -> LlamaDecoder | None:
    """A `LlamaDecoder` over `model`'s weights, or None where the model is not a plain Llama
    (or a Mistral or Qwen2 without a sliding window, which compute the same)."""
    family = _FAMILIES.get(type(model).__name__)
    if family is None:
        return None
    config = model.config
    if getattr(config, "hidden_act", None) != "silu" or getattr(config, "pretraining_tp", 1) != 1:
        return None
    if getattr(config, "sliding_window", None) is not None:  # Qwen2 sets it only when it is used
        return None
    base = getattr(model, "model", None)
    if base is None or type(getattr(base, "norm", None)).__name__ != family + "RMSNorm":
        return None
    if not isinstance(getattr(model, "lm_head", None), torch.nn.Linear):
        return None
    for layer in base.layers:
        for name, cls in _LAYER_CLASSES.items():
            if type(getattr(layer, name, None)).__name__ != family + cls:
                return None
        for part, names in _LINEARS.items():
            if not all(isinstance(getattr(getattr(layer, part), n, None), torch.nn.Linear) for n in names):
                return None
    try:
        return LlamaDecoder(model)
    except AttributeError:  # a transformers whose Llama names its parts otherwise: its own forward
        return None

"""Batched prefill: the prompts admitted together go through the model in one forward pass.

Why padded batches and not chunked prefill: the running batch keeps its keys and values in one
transformers `DynamicCache` whose rows are left padded to a common length (kv_cache.py), and a
forward pass appends the same number of columns to every row. A chunk of one prompt riding along
with the others' decode step would append a different number of columns per row; holding that
needs a paged cache and an attention kernel that reads one, which the CPU path of transformers
does not have. A padded prefill instead yields exactly the running batch's layout, so its rows join
through the same `kv_cache.merge`. The cost is the padding: a batch computes rows x longest new
part, which the engine bounds with its token budget (`max_num_batched_tokens`, vLLM's name).

Why a small budget per pass (512 tokens by default), several passes per step, and each pass's
first tokens sent as soon as it ends: on a CPU a pass costs a fixed overhead (the same few hundred
operator calls whatever the size) plus its tokens' compute, and past a few hundred tokens the
compute dominates. With the tiny test Llama and one thread a pass over 32 tokens takes 1.9 ms and
one over 8 x 32 2.5 ms: batching short prompts turns eight passes into about one. But one over 256
tokens takes 2.2 ms and one over 8 x 256 12.9 ms: batching long prompts saves little (against
8 x 2.2) and makes every one of them wait for the whole pass, where passes of a budget's size let
the first prompts' tokens leave early. A larger model has relatively less overhead, so the
budget matters less there; the total work is the same either way.

A row may start with keys and values from the prefix cache (prefix_cache.py). With row i holding
c_i cached tokens and r_i new ones, C = max c_i and R = max r_i, one prefill is laid out as

    cache columns 0 .. C:       padding (C - c_i), then the cached prefix (c_i)
    input columns C .. C + R:   padding (R - r_i), then the rest of the prompt (r_i)

with an attention mask over all C + R columns hiding the padding and each row's own positions.
`kv_cache.settle` then zeroes the padded columns and closes the gaps, so every row ends with its
prompt's keys and values, in order, at its right end.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from . import kv_cache
from .prefix_cache import LayerStates

#: forward(input_ids, cache, adapters, **model kwargs) -> the model's output
Forward = Callable[..., Any]


@dataclass
class PrefillRow:
    ids: list[int]  # the whole prompt
    adapter: str
    prefix: LayerStates | None = None  # states of the first `cached` tokens
    cached: int = 0

    @property
    def new_tokens(self) -> int:
        return len(self.ids) - self.cached


def padded_tokens(rows: list[PrefillRow]) -> int:
    """What a prefill of `rows` computes: every row as long as the longest new part."""
    return len(rows) * max(row.new_tokens for row in rows) if rows else 0


def run(
    forward: Forward, rows: list[PrefillRow], decoder: Any = None, **model_kwargs: Any
) -> tuple[torch.Tensor, Any, torch.Tensor | None]:
    """Each row's logits for its next token, and the batch's cache and mask in the running
    batch's layout (mask None when no row is padded). `decoder` (`llama_decode`) takes a batch
    with neither padding nor a cached prefix instead of `forward`."""
    from transformers import DynamicCache

    count = len(rows)
    longest_prefix = max(row.cached for row in rows)
    longest_new = max(row.new_tokens for row in rows)
    cache = DynamicCache()
    if longest_prefix:
        for index, layer in enumerate(_prefix_layers(rows, longest_prefix)):
            cache.update(*layer, index)
    input_ids = torch.zeros(count, longest_new, dtype=torch.long)
    for i, row in enumerate(rows):
        new = torch.tensor(row.ids[row.cached :], dtype=torch.long)
        input_ids[i, longest_new - row.new_tokens :] = new
    uniform = all(row.cached == longest_prefix and row.new_tokens == longest_new for row in rows)
    if decoder is not None and uniform and not longest_prefix:
        return decoder.prefill(input_ids, cache), cache, None
    mask = None
    if not uniform:  # else the model's own positions (cache length onwards) and no mask are right
        mask, positions = _mask_and_positions(rows, longest_prefix, longest_new)
        model_kwargs.update(attention_mask=mask, position_ids=positions)
    out = forward(input_ids, cache, [row.adapter for row in rows], **model_kwargs)
    cache = getattr(out, "past_key_values", None) or cache
    cache, mask = kv_cache.settle(cache, mask)
    return out.logits[:, -1, :], cache, mask


def _prefix_layers(rows: list[PrefillRow], width: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The cached prefixes as one left-padded (rows, heads, width, dim) pair per layer."""
    template = next(row.prefix for row in rows if row.prefix)
    layers = []
    for index, (keys, values) in enumerate(template):
        batch_keys = keys.new_zeros(len(rows), keys.shape[0], width, keys.shape[-1])
        batch_values = values.new_zeros(len(rows), values.shape[0], width, values.shape[-1])
        for i, row in enumerate(rows):
            if row.prefix:
                batch_keys[i, :, width - row.cached :] = row.prefix[index][0]
                batch_values[i, :, width - row.cached :] = row.prefix[index][1]
        layers.append((batch_keys, batch_values))
    return layers


def _mask_and_positions(
    rows: list[PrefillRow], width: int, longest_new: int
) -> tuple[torch.Tensor, torch.Tensor]:
    mask = torch.zeros(len(rows), width + longest_new, dtype=torch.long)
    positions = torch.zeros(len(rows), longest_new, dtype=torch.long)
    for i, row in enumerate(rows):
        mask[i, width - row.cached : width] = 1
        mask[i, width + longest_new - row.new_tokens :] = 1
        positions[i, longest_new - row.new_tokens :] = torch.arange(row.cached, len(row.ids))
    return mask, positions

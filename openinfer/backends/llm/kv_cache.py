"""The running batch's KV cache: join new sequences, drop finished ones, trim padding.

Sequences of different lengths share one transformers `DynamicCache` by left padding: each
row's keys/values end at the same column and an attention mask hides the padded columns
(positions are passed per row, so RoPE sees each sequence's true positions). Padded columns
are zeros we insert, never computed states, so no NaN from fully masked rows can leak in.
Only full-attention `DynamicLayer` caches can be joined this way; `mergeable()` says so.

A batched prefill (prefill.py) leaves padding inside rows too and computed states in padded
columns; `settle()` zeroes those columns and moves every row's columns to its right end, which
gives this layout again. Attention does not depend on the order of the keys (each key carries its
position already), so moving columns changes no result.

A mask of None means "no padding": every row uses every column. That is the state of a lone
request (and of equal-length ones); the model then builds no mask at all, which saves a good
part of a small model's decode step. A mask is made when rows of different lengths meet and
dropped again once the padding has been trimmed away.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F


def mergeable(cache: Any) -> bool:
    from transformers.cache_utils import DynamicLayer

    layers = getattr(cache, "layers", None)
    if not layers:
        return False
    return all(type(layer) is DynamicLayer for layer in layers)


def _pad_left(tensor: torch.Tensor, length: int) -> torch.Tensor:
    missing = length - tensor.shape[-2]
    return tensor if missing == 0 else F.pad(tensor, (0, 0, missing, 0))


def _full(cache: Any, mask: torch.Tensor | None) -> torch.Tensor:
    """`mask`, or the all-ones mask that None stands for."""
    if mask is not None:
        return mask
    keys = cache.layers[0].keys
    return torch.ones(keys.shape[0], keys.shape[-2], dtype=torch.long)


def merge(
    cache: Any | None, mask: torch.Tensor | None, new_cache: Any, new_mask: torch.Tensor | None
) -> tuple[Any, torch.Tensor | None]:
    """Append the rows of `new_cache` to `cache` (both left padded to a common length)."""
    if cache is None:
        return new_cache, new_mask
    same_length = cache.layers[0].keys.shape[-2] == new_cache.layers[0].keys.shape[-2]
    if mask is None and new_mask is None and same_length:
        for old, new in zip(cache.layers, new_cache.layers):
            old.keys = torch.cat([old.keys, new.keys], dim=0)
            old.values = torch.cat([old.values, new.values], dim=0)
        return cache, None
    mask, new_mask = _full(cache, mask), _full(new_cache, new_mask)
    length = max(mask.shape[1], new_mask.shape[1])
    for old, new in zip(cache.layers, new_cache.layers):
        old.keys = torch.cat([_pad_left(old.keys, length), _pad_left(new.keys, length)], dim=0)
        old.values = torch.cat([_pad_left(old.values, length), _pad_left(new.values, length)], dim=0)
    mask = torch.cat(
        [F.pad(mask, (length - mask.shape[1], 0)), F.pad(new_mask, (length - new_mask.shape[1], 0))],
        dim=0,
    )
    return cache, mask


def select(cache: Any, mask: torch.Tensor | None, keep: list[int]) -> tuple[Any, torch.Tensor | None]:
    """Keep only the rows in `keep` (a row listed twice is copied), then drop columns that are
    padding in every row."""
    index = torch.tensor(keep, dtype=torch.long)
    for layer in cache.layers:
        layer.keys = layer.keys.index_select(0, index)
        layer.values = layer.values.index_select(0, index)
    if mask is None:
        return cache, None
    return _trim(cache, mask.index_select(0, index))


def settle(cache: Any, mask: torch.Tensor | None) -> tuple[Any, torch.Tensor | None]:
    """After a padded prefill: zero the padded columns, move each row's own columns to its right
    end (in their order) and drop the columns that are then padding in every row."""
    if mask is None:
        return cache, None
    hidden = (mask == 0)[:, None, :, None]
    for layer in cache.layers:
        layer.keys = layer.keys.masked_fill(hidden, 0)
        layer.values = layer.values.masked_fill(hidden, 0)
    if bool((mask[:, 1:] < mask[:, :-1]).any()):  # padding after a row's first column
        order = torch.argsort(mask, dim=1, stable=True)  # padding first, the rest in order
        for layer in cache.layers:
            gather = order[:, None, :, None].expand_as(layer.keys)
            layer.keys = layer.keys.gather(2, gather)
            layer.values = layer.values.gather(2, gather)
        mask = mask.gather(1, order)
    return _trim(cache, mask)


def _trim(cache: Any, mask: torch.Tensor) -> tuple[Any, torch.Tensor | None]:
    used = mask.any(dim=0).nonzero()
    first = int(used[0]) if used.numel() else mask.shape[1]
    if first > 0:
        for layer in cache.layers:
            layer.keys = layer.keys[:, :, first:, :]
            layer.values = layer.values[:, :, first:, :]
        mask = mask[:, first:]
    return cache, (None if bool(mask.all()) else mask)


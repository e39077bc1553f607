"""Prefix caching: a prompt that opens like one seen lately reuses that opening's keys and values.

Chat prompts repeat themselves: one long system prompt opens every conversation, and each turn
resends the turns before it. A token's keys and values depend only on the tokens before it (and
the weights and LoRA adapter), so a prompt that starts like an earlier one needs only the rest
prefilled.

As in vLLM, prompts are cut into blocks of `BLOCK_TOKENS` tokens and a block is named by a hash of
the previous block's name and its own tokens (the first block's "previous name" is the adapter's):
one name stands for the whole prefix up to the block's end, and a lookup walks a prompt's names
until the first miss. Only whole blocks are kept. The hash is BLAKE2b, not Python's `hash`: a
collision would hand one client's prompt another's states, so it must not be something a client
can produce on purpose.

Memory is bounded: blocks sit in an LRU of at most `capacity_bytes`. Every use touches a prefix
from its last block to its first, so a prefix's first blocks (shared by the most prompts) are the
last to go and a prefix is evicted from its end, never left with a hole.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

BLOCK_TOKENS = 16

#: Per layer: keys and values, each (kv heads, tokens, head dim).
LayerStates = list[tuple[torch.Tensor, torch.Tensor]]


@dataclass(eq=False)
class Block:
    states: LayerStates  # BLOCK_TOKENS tokens
    nbytes: int


def block_names(adapter: str, ids: Sequence[int]) -> list[bytes]:
    """The name of every whole block of `ids`: each one hashes its predecessor's name."""
    name = adapter.encode()
    names = []
    tokens = np.asarray(ids, dtype=np.int64)
    for end in range(BLOCK_TOKENS, len(ids) + 1, BLOCK_TOKENS):
        block = tokens[end - BLOCK_TOKENS : end].tobytes()
        name = hashlib.blake2b(name + block, digest_size=16).digest()
        names.append(name)
    return names


def joined(blocks: list[Block]) -> LayerStates:
    """The states of consecutive blocks as one run of tokens per layer."""
    layers = zip(*(block.states for block in blocks))
    return [
        (torch.cat([k for k, _ in pairs], dim=1), torch.cat([v for _, v in pairs], dim=1))
        for pairs in layers
    ]


def prompt_states(cache: Any, row: int, length: int) -> LayerStates:
    """Row `row`'s last `length` columns of a batch cache: after a prefill (kv_cache.settle),
    that row's prompt in order."""
    return [(layer.keys[row, :, -length:], layer.values[row, :, -length:])
            for layer in cache.layers]


class PrefixCache:
    def __init__(self, capacity_bytes: int) -> None:
        self.capacity_bytes = max(0, capacity_bytes)
        self._blocks: OrderedDict[bytes, Block] = OrderedDict()
        self.nbytes = 0

    def __len__(self) -> int:
        return len(self._blocks)

    def match(self, names: list[bytes], prompt_tokens: int) -> list[Block]:
        """The longest run of cached blocks that opens the prompt, leaving its last token out:
        the model must see at least one token to give the first logits."""
        usable = names[: (prompt_tokens - 1) // BLOCK_TOKENS]
        found = []
        for name in usable:
            block = self._blocks.get(name)
            if block is None:
                break
            found.append(block)
        self._touch(usable[: len(found)])
        return found

    def store(self, names: list[bytes], states: LayerStates) -> None:
        """Keep the blocks of a prompt whose states (per layer, the prompt's tokens in order)
        were just computed; blocks already here are only touched."""
        size = BLOCK_TOKENS
        for index, name in enumerate(names):
            if name in self._blocks:
                continue
            start = index * size
            block_states = [(k[:, start : start + size].clone(), v[:, start : start + size].clone())
                            for k, v in states]
            nbytes = sum(k.nbytes + v.nbytes for k, v in block_states)
            if nbytes > self.capacity_bytes:
                return
            self._blocks[name] = Block(block_states, nbytes)
            self.nbytes += nbytes
        self._touch(names)
        self._evict()

    def _touch(self, names: list[bytes]) -> None:
        for name in reversed(names):  # the first block ends up the most recent
            if name in self._blocks:
                self._blocks.move_to_end(name)

    def _evict(self) -> None:
        while self.nbytes > self.capacity_bytes and self._blocks:
            _, block = self._blocks.popitem(last=False)
            self.nbytes -= block.nbytes

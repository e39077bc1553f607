"""Token ids -> text, one step at a time, and stop strings.

Decoding each new token alone breaks multi-byte characters and word-piece spacing, and
decoding everything every step is quadratic. The usual remedy (vLLM's and TGI's): decode a
short window twice, before and after the new tokens, and emit the difference once it no
longer ends in a replacement character.
"""

from __future__ import annotations

from typing import Any

_PROMPT_WINDOW = 5  # prompt tokens kept as context so the first word gets its leading space


class IncrementalDetokenizer:
    def __init__(
        self,
        tokenizer: Any,
        prompt_ids: list[int],
        *,
        skip_special_tokens: bool = True,
        spaces_between_special_tokens: bool = True,
    ) -> None:
        self.tokenizer = tokenizer
        self.ids: list[int] = list(prompt_ids[-_PROMPT_WINDOW:])
        self.prefix_offset = 0
        self.read_offset = len(self.ids)
        self.kwargs = {
            "skip_special_tokens": skip_special_tokens,
            "spaces_between_special_tokens": spaces_between_special_tokens,
        }
        self.backend = _backend(tokenizer)

    def _decode(self, ids: list[int]) -> str:
        if self.backend is not None:
            return self.backend.decode(ids, skip_special_tokens=self.kwargs["skip_special_tokens"])
        try:
            return self.tokenizer.decode(ids, **self.kwargs)
        except TypeError:  # tokenizers without spaces_between_special_tokens
            return self.tokenizer.decode(ids, skip_special_tokens=self.kwargs["skip_special_tokens"])

    def add(self, token_id: int) -> str:
        """The text the new token completes ("" while a character is still partial)."""
        self.ids.append(token_id)
        prefix = self._decode(self.ids[self.prefix_offset : self.read_offset])
        full = self._decode(self.ids[self.prefix_offset :])
        if len(full) > len(prefix) and not full.endswith("\ufffd"):
            delta = full.removeprefix(prefix)
            self.prefix_offset = self.read_offset
            self.read_offset = len(self.ids)
            return delta
        return ""


def _backend(tokenizer: Any) -> Any:
    """The Rust tokenizer behind a fast Hugging Face tokenizer, when decoding through it gives
    the same text (no clean-up pass; fast tokenizers ignore `spaces_between_special_tokens`):
    the Python wrapper costs more than the decoding, twice per generated token."""
    try:
        from transformers.tokenization_utils_tokenizers import TokenizersBackend
    except ImportError:
        return None
    own = getattr(type(tokenizer), "_decode", None)
    if own is not TokenizersBackend._decode or getattr(tokenizer, "clean_up_tokenization_spaces", True):
        return None
    return tokenizer.backend_tokenizer


def find_stop(text: str, new_from: int, stops: list[str]) -> tuple[int, str] | None:
    """The earliest stop string that ends in the new part of `text` (from `new_from` on)."""
    best: tuple[int, str] | None = None
    for stop in stops:
        start = max(0, new_from - len(stop) + 1)
        index = text.find(stop, start)
        if index != -1 and (best is None or index < best[0]):
            best = (index, stop)
    return best

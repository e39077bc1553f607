"""Guided decoding (JSON schema, regex, choice, grammar) with llguidance.

llguidance compiles the constraint against the tokenizer once per request and then, each
step, answers "which tokens may come next" as a bitmask; the engine masks the logits with it
and feeds the chosen token back. JSON is generated compactly (no free whitespace), as vLLM
does with `disable_any_whitespace`, so a model cannot pad forever with blanks.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import torch

from ...core.errors import InvalidArgumentError, UnavailableError
from .sampling import GuidedSpec


class GuidedFactory:
    """Per model: the llguidance view of its tokenizer; builds one matcher per sequence."""

    def __init__(self, tokenizer: Any, vocab_size: int, eos_token_ids: list[int]) -> None:
        try:
            import llguidance
            import llguidance.hf
        except ImportError as exc:  # pragma: no cover - a dependency of the llm extra
            raise UnavailableError(f"guided decoding needs the 'llguidance' package: {exc}") from None
        self._ll = llguidance
        eos = eos_token_ids[0] if len(eos_token_ids) == 1 else (eos_token_ids or None)
        self.tokenizer = llguidance.hf.from_tokenizer(tokenizer, n_vocab=vocab_size, eos_token=eos)
        self.vocab_size = vocab_size

    def grammar(self, spec: GuidedSpec) -> str:
        matcher = self._ll.LLMatcher
        try:
            if spec.kind in ("json", "json_object"):
                text = '{"type": "object"}' if spec.value is True else spec.schema_text()
                return matcher.grammar_from_json_schema(text, defaults={"whitespace_flexible": False})
            if spec.kind == "regex":
                return matcher.grammar_from_regex(spec.value)
            if spec.kind == "choice":
                return self._ll.grammar_from("choice", json.dumps(spec.value))
            return self._ll.grammar_from("grammar", spec.value)
        except (ValueError, TypeError, RuntimeError) as exc:
            raise InvalidArgumentError(f"invalid guided decoding {spec.kind}: {exc}") from None

    def matcher(self, spec: GuidedSpec) -> GuidedMatcher:
        inner = self._ll.LLMatcher(self.tokenizer, self.grammar(spec))
        if inner.is_error():
            raise InvalidArgumentError(f"invalid guided decoding {spec.kind}: {inner.get_error()}")
        return GuidedMatcher(inner, self.vocab_size)


class GuidedMatcher:
    """The constraint state of one sequence."""

    def __init__(self, inner: Any, vocab_size: int) -> None:
        self.inner = inner
        self.vocab_size = vocab_size

    def allowed(self) -> torch.Tensor:
        """Bool mask [vocab] of the tokens the constraint accepts next."""
        words = np.frombuffer(self.inner.compute_bitmask(), dtype=np.uint8)
        bits = np.unpackbits(words, bitorder="little")[: self.vocab_size]
        mask = np.zeros(self.vocab_size, dtype=bool)
        mask[: bits.shape[0]] = bits.astype(bool)
        return torch.from_numpy(mask)

    def accept(self, token_id: int) -> None:
        self.inner.consume_token(token_id)

    @property
    def done(self) -> bool:
        """The constraint is complete: nothing more may follow."""
        return bool(self.inner.is_stopped())

    @property
    def failed(self) -> str:
        return self.inner.get_error() if self.inner.is_error() else ""

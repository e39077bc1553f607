"""Synthetic prompts of a chosen token length, and token counting.

genai-perf counts tokens with the model's Hugging Face tokenizer. When ``--tokenizer`` points at
one (a ``tokenizer.json`` or a directory holding it) and the ``tokenizers`` or ``transformers``
package is installed, we do the same; otherwise the server's ``usage`` figures are used when it
reports them, and whitespace-separated words as the last resort.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

WORDS = (
    "the quick brown fox jumps over lazy dog while seven wise kings measure every golden river "
    "under northern stars and quiet engines hum through long winter nights near old stone "
    "bridges where patient builders carve simple stories into silver light"
).split()

Counter = Callable[[str], int]


def word_count(text: str) -> int:
    return len(text.split())


def load_tokenizer(path: str | None) -> tuple[Counter, str]:
    """A token counter and the name of what counts (for the report)."""
    if not path:
        return word_count, "words"
    p = Path(path)
    file = p / "tokenizer.json" if p.is_dir() else p
    try:
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(file))
        return (lambda text: len(tok.encode(text, add_special_tokens=False).ids)), str(file)
    except (ImportError, OSError, ValueError, Exception):  # noqa: BLE001 - any failure: try next
        pass
    try:
        from transformers import AutoTokenizer

        hf = AutoTokenizer.from_pretrained(path, local_files_only=True)
        return (lambda text: len(hf.encode(text, add_special_tokens=False))), path
    except Exception as exc:  # noqa: BLE001 - report what went wrong, in one line
        raise ValueError(f"cannot load tokenizer {path!r}: {exc}") from None


def synthetic_prompt(rng: random.Random, tokens: int, count: Counter) -> str:
    """Words from a fixed vocabulary until the counter says ``tokens``."""
    words: list[str] = []
    while True:
        words.append(rng.choice(WORDS))
        if count(" ".join(words)) >= tokens:
            return " ".join(words)


def sample_length(rng: random.Random, mean: int, stddev: float) -> int:
    return max(1, int(round(rng.gauss(mean, stddev)))) if stddev > 0 else max(1, mean)

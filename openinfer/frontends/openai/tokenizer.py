"""Tokenizers and chat templates: transformers' `AutoTokenizer` and `apply_chat_template`.

A tokenizer is found from `--tokenizer`, or from what the model's backend says of it
(`LoadedModel.text`, read from the model's folder; see INTERFACE.md);
each is loaded once, in a worker thread, and shared by every model that names the same path.
A model without a tokenizer (a Python model that tokenizes for itself) may still be chatted
with: its `chat_template.jinja`, or `--chat-template`, is rendered by transformers' own template
renderer, the one `apply_chat_template` calls.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from .errors import internal, invalid

log = logging.getLogger("openinfer.openai")

class TokenizerCache:
    """Loads each tokenizer path once; concurrent first uses wait for the same load."""

    def __init__(self) -> None:
        self._loaded: dict[str, Any] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def get(self, path: str) -> Any:
        tokenizer = self._loaded.get(path)
        if tokenizer is not None:
            return tokenizer
        lock = self._locks.setdefault(path, asyncio.Lock())
        async with lock:
            tokenizer = self._loaded.get(path)
            if tokenizer is None:
                tokenizer = await asyncio.to_thread(_load, path)
                self._loaded[path] = tokenizer
        return tokenizer


def _load(path: str) -> Any:
    try:
        from transformers import AutoTokenizer
    except ImportError as exc:  # pragma: no cover - transformers is an install requirement
        raise internal(f"Unknown tokenizer: transformers is not installed ({exc})") from exc
    try:
        return AutoTokenizer.from_pretrained(path, trust_remote_code=False)
    except Exception as exc:  # any loader failure is a configuration problem
        raise internal(f"Unknown tokenizer: cannot load '{path}': {exc}") from exc


#: `apply_chat_template` arguments about tokenizing, which a text prompt has no use for.
_TOKENIZING = frozenset(
    {"conversation", "return_dict", "return_tensors", "return_assistant_tokens_mask", "padding", "truncation",
     "max_length", "tokenizer_kwargs"}
)


def _render_without_tokenizer(conversation: list[dict[str, Any]], template: str, **options: Any) -> str:
    """The adapter to transformers' own template renderer (a module of its `utils`, not a top-level
    export: the tests that chat without a tokenizer catch a move), pinned below transformers 6."""
    from transformers.utils.chat_template_utils import render_jinja_template

    rendered, _ = render_jinja_template(conversations=[conversation], chat_template=template, **options)
    return rendered[0]


def render_chat(
    tokenizer: Any | None,
    conversation: list[dict[str, Any]],
    *,
    tools: list[dict[str, Any]] | None,
    add_generation_prompt: bool,
    continue_final_message: bool,
    template: str | None,
    kwargs: dict[str, Any] | None,
) -> str:
    """The prompt text for a conversation; template errors are the client's or the operator's.
    `kwargs` (the request's `chat_template_kwargs`, e.g. `enable_thinking`) become template
    variables; they may not set the server's own arguments of `apply_chat_template`. Without a
    tokenizer, `template` is required (the tokenizer's special tokens are then unknown to the
    template)."""
    options = {
        "tools": tools,
        "tokenize": False,
        "add_generation_prompt": add_generation_prompt,
        "continue_final_message": continue_final_message,
        "chat_template": template,
    }
    clash = sorted((kwargs or {}).keys() & (options.keys() | _TOKENIZING))
    if clash:
        raise invalid(
            f"chat_template_kwargs may not set {', '.join(repr(k) for k in clash)}: the server renders the "
            "template to text, with the request's own fields for its options",
            "chat_template_kwargs",
        )
    try:
        if tokenizer is None:
            del options["tokenize"], options["chat_template"]
            return _render_without_tokenizer(conversation, template or "", **options, **(kwargs or {}))
        return tokenizer.apply_chat_template(conversation, **options, **(kwargs or {}))
    except Exception as exc:
        message = str(exc)
        if type(exc).__name__ == "TemplateError" or "TemplateError" in type(exc).__mro__.__repr__():
            raise invalid(f"chat template error: {message}") from exc
        if "chat template" in message.lower() or "chat_template" in message.lower():
            raise internal(message) from exc
        raise invalid(f"cannot render the chat template: {message}") from exc

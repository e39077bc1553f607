"""What every endpoint shares: the core server, the model catalog, tokenizers and the options."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...core.server import InferenceServer
from .catalog import ModelCatalog, ModelInfo
from .errors import internal
from .options import OpenAIOptions
from .reasoning import ReasoningParser, get_reasoning_parser
from .tokenizer import TokenizerCache
from .tool_parsers import ToolParser, get_parser


@dataclass
class FrontendContext:
    server: InferenceServer
    options: OpenAIOptions
    catalog: ModelCatalog
    tokenizers: TokenizerCache
    chat_template: str | None = None

    @classmethod
    def create(cls, server: InferenceServer, options: OpenAIOptions) -> FrontendContext:
        template = Path(options.chat_template).read_text() if options.chat_template else None
        catalog = ModelCatalog(server, lora_separator=options.lora_separator, backend=options.backend)
        return cls(server, options, catalog, TokenizerCache(), template)

    def tool_parser(self) -> ToolParser | None:
        return get_parser(self.options.tool_call_parser) if self.options.tool_call_parser else None

    def reasoning_parser(self) -> ReasoningParser | None:
        return get_reasoning_parser(self.options.reasoning_parser) if self.options.reasoning_parser else None

    def tokenizer_path(self, info: ModelInfo) -> str | None:
        if self.options.tokenizer:
            return self.options.tokenizer
        return str(info.tokenizer_dir) if info.tokenizer_dir is not None else None

    async def tokenizer(self, info: ModelInfo, *, required: bool = True) -> Any:
        path = self.tokenizer_path(info)
        if path is None:
            if not required:
                return None
            raise internal(
                f"Unknown tokenizer: start the server with --tokenizer, or put the tokenizer files "
                f"next to model '{info.name}' (see INTERFACE.md)"
            )
        return await self.tokenizers.get(path)

    async def chat_renderer(self, info: ModelInfo) -> tuple[Any, str | None]:
        """The tokenizer to render a conversation with (None when the model has none) and the
        template that replaces the tokenizer's own: `--chat-template`, or, without a tokenizer,
        the model's `chat_template.jinja`."""
        tokenizer = await self.tokenizer(info, required=False)
        if tokenizer is not None:
            return tokenizer, self.chat_template
        template = self.chat_template or info.chat_template
        if template is None:
            raise internal(
                f"Unknown tokenizer: start the server with --tokenizer or --chat-template, or put the "
                f"tokenizer files or a chat_template.jinja next to model '{info.name}' (see INTERFACE.md)"
            )
        return None, template


def request_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


def now() -> int:
    return int(time.time())


def usage(prompt: int | None, completion: int | None, cached: int | None = None) -> dict[str, Any] | None:
    """OpenAI's usage object; `prompt_tokens_details.cached_tokens` when the model reports how
    much of the prompt its prefix cache served (INTERFACE.md: `num_cached_tokens`)."""
    if prompt is None or completion is None:
        return None
    doc: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    if cached is not None:
        doc["prompt_tokens_details"] = {"cached_tokens": cached}
    return doc


def count_tokens(tokenizer: Any, text: str) -> int | None:
    if tokenizer is None:
        return None
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


class CompletionTally:
    """The completion tokens of a stream's choices: the model's own counts (`num_output_tokens`),
    else, as for an answer that is not streamed, the tokenizer's count of each choice's text
    (kept only for a model without that output)."""

    def __init__(self, choices: int, info: ModelInfo, tokenizer: Any) -> None:
        self.counts = [0] * choices
        self.counted = [True] * choices
        self.tokenizer = tokenizer
        keep = tokenizer is not None and "num_output_tokens" not in info.outputs
        self.texts: list[list[str]] | None = [[] for _ in range(choices)] if keep else None

    def add(self, index: int, tokens: int | None, text: str) -> None:
        if tokens is not None:
            self.counts[index] += tokens
        else:
            self.counted[index] = False
        if self.texts is not None:
            self.texts[index].append(text)

    def total(self) -> int | None:
        if all(self.counted):
            return sum(self.counts)
        if self.texts is None:
            return None
        return sum(count_tokens(self.tokenizer, "".join(pieces)) or 0 for pieces in self.texts)

"""`POST /v1/completions` request schema (OpenAI's, plus the vLLM extensions)."""

from __future__ import annotations

from pydantic import Field

from ..protocol import SamplingFields


class CompletionRequest(SamplingFields):
    prompt: str | list[str] | list[int] | list[list[int]]
    max_tokens: int | None = Field(default=None, ge=0)
    echo: bool | None = False
    logprobs: int | None = Field(default=None, ge=0, le=5)
    best_of: int | None = Field(default=None, ge=0, le=20)
    suffix: str | None = None

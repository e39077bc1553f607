"""`POST /v1/embeddings` request schema: one text, many texts, or token ids."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ..protocol import RequestModel


class EmbeddingRequest(RequestModel):
    model: str
    input: str | list[str] | list[int] | list[list[int]] = Field(min_length=1)
    dimensions: int | None = Field(default=None, ge=1)
    encoding_format: Literal["float", "base64"] = "float"
    user: str | None = None

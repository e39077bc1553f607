"""Embeddings: one text, a batch of texts, or token ids; float lists or base64 float32."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import numpy as np

from ..catalog import EMBED
from ..context import FrontendContext, count_tokens, request_id
from ..engine import embed
from ..errors import invalid
from ..protocol import parse_request
from .protocol import EmbeddingRequest


def _items(value: Any) -> list[str | list[int]]:
    if isinstance(value, str):
        return [value]
    if value and all(isinstance(v, int) for v in value):
        return [list(value)]
    return list(value)


class EmbeddingServing:
    def __init__(self, ctx: FrontendContext) -> None:
        self.ctx = ctx

    async def create(self, body: Any) -> dict[str, Any]:
        req: EmbeddingRequest = parse_request(EmbeddingRequest, body)
        resolved = self.ctx.catalog.resolve(req.model, kinds=(EMBED,))
        items = _items(req.input)
        if any(len(item) == 0 for item in items):
            raise invalid("input must not contain empty strings or empty token lists", "input")
        rid = request_id("embd")
        results = await asyncio.gather(
            *(
                embed(self.ctx.server, resolved.info, item, req.dimensions, f"{rid}-{i}")
                for i, item in enumerate(items)
            )
        )
        data = []
        prompt_tokens = 0
        tokenizer = None
        for index, (item, result) in enumerate(zip(items, results)):
            vector = np.asarray(result.vector, dtype=np.float32)
            if req.encoding_format == "base64":
                embedding: Any = base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")
            else:
                embedding = vector.tolist()
            data.append({"object": "embedding", "embedding": embedding, "index": index})
            tokens = result.prompt_tokens
            if tokens is None:
                if isinstance(item, list):
                    tokens = len(item)
                else:
                    tokenizer = tokenizer or await self.ctx.tokenizer(resolved.info, required=False)
                    tokens = count_tokens(tokenizer, item) or 0
            prompt_tokens += tokens
        return {
            "id": rid,
            "object": "list",
            "data": data,
            "model": req.model,
            "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens},
        }

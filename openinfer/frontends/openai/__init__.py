"""The OpenAI-compatible frontend: `/v1/chat/completions`, `/v1/completions`, `/v1/embeddings`,
`/v1/models`, health, metrics, tokenize; Triton's `openai_frontend` flags and behaviour, with
OpenAI's and vLLM's shapes where Triton's would break clients.

Models are reached only through `InferenceServer.infer_stream` with the tensor interface
written down in INTERFACE.md. Importing this package is cheap: FastAPI is imported when the
frontend starts.
"""

from __future__ import annotations

from .feature import FEATURE

__all__ = ["FEATURE"]

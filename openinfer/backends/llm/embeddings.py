"""Embeddings from encoder models, batched: every waiting request joins the next forward pass.

Pooling follows the model's sentence-transformers config when it has one (CLS, mean or last
token), mean otherwise; vectors are L2-normalised (vLLM's default). `dimensions` keeps the
first d values and normalises again (Matryoshka embeddings).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import torch

from ...core.errors import InternalError, InvalidArgumentError, OpenInferError
from ...core.observability.stats import ExecutionTiming, ModelStats
from ...core.requests.responses import ResponseSender
from ...core.types import InferResponse
from .engine_thread import EngineThread, Outbox
from .hf_model import HFModel
from .interface import EmbedInputs, embedding_outputs


@dataclass(eq=False)
class EmbedJob:
    request_id: str
    inputs: EmbedInputs
    sender: ResponseSender


class EmbeddingEngine(EngineThread):
    def __init__(
        self,
        name: str,
        lm: HFModel,
        loop: asyncio.AbstractEventLoop,
        stats: ModelStats | None,
        *,
        max_num_seqs: int = 32,
    ) -> None:
        super().__init__(name, loop, stats)
        self.lm = lm
        self.max_num_seqs = max(1, max_num_seqs)
        self._queue: list[EmbedJob] = []
        self._current: list[EmbedJob] = []  # the batch in the forward pass (failed together)

    def busy(self) -> bool:
        return bool(self._queue)

    def _ids(self, job: EmbedJob) -> list[int]:
        value = job.inputs.input
        if isinstance(value, str):
            ids = self.lm.tokenizer(value, add_special_tokens=True)["input_ids"]
        else:
            ids = list(value)
            bad = [t for t in ids if not 0 <= t < self.lm.vocab_size]
            if bad:
                raise InvalidArgumentError(f"token id {bad[0]} is out of vocabulary (size {self.lm.vocab_size})")
        if len(ids) > self.lm.max_model_len:
            raise InvalidArgumentError(
                f"The input (length {len(ids)}) is longer than the maximum model length of "
                f"{self.lm.max_model_len}."
            )
        return ids

    def step(self, items: list[EmbedJob], outbox: Outbox) -> None:
        self._queue.extend(items)
        batch, self._queue = self._queue[: self.max_num_seqs], self._queue[self.max_num_seqs :]
        start = time.perf_counter_ns()
        jobs, rows = [], []
        for job in batch:
            try:
                rows.append(self._ids(job))
                jobs.append(job)
            except OpenInferError as exc:
                outbox.failures.append((job.sender, exc))
        if not jobs:
            return
        self._current = jobs
        width = max(len(r) for r in rows)
        pad = self.lm.tokenizer.pad_token_id or 0
        input_ids = torch.full((len(rows), width), pad, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, row in enumerate(rows):
            input_ids[i, : len(row)] = torch.tensor(row, dtype=torch.long)
            mask[i, : len(row)] = 1
        infer_start = time.perf_counter_ns()
        hidden = self.lm.model(input_ids=input_ids, attention_mask=mask).last_hidden_state
        infer_end = time.perf_counter_ns()
        vectors = self._pool(hidden.float(), mask)
        for job, row, vector in zip(jobs, rows, vectors):
            dims = job.inputs.dimensions
            if dims is not None:
                if dims > vector.shape[0]:
                    outbox.failures.append((job.sender, InvalidArgumentError(
                        f"dimensions {dims} is larger than the model's embedding size {vector.shape[0]}"
                    )))
                    continue
                vector = vector[:dims]
            if self.lm.normalize:
                vector = torch.nn.functional.normalize(vector, dim=0)
            outputs = embedding_outputs(job.inputs.returns, vector.tolist(), len(row))
            response = InferResponse(job.sender.request.model_name, "", job.request_id, outputs=outputs)
            outbox.sends.append((job.sender, response, True))
        self._current = []
        outbox.executions.append(
            (len(jobs), ExecutionTiming(infer_start - start, infer_end - infer_start, time.perf_counter_ns() - infer_end))
        )

    def _pool(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if self.lm.pooling == "cls":
            return hidden[:, 0]
        if self.lm.pooling == "last":
            last = mask.sum(dim=1) - 1
            return hidden[torch.arange(hidden.shape[0]), last]
        weights = mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)

    def fail_all(self, outbox: Outbox, error: Exception, extra: list[Any] = ()) -> None:  # type: ignore[assignment]
        if not isinstance(error, OpenInferError):
            error = InternalError(f"model '{self.name}' failed: {error}")
        for job in [*self._current, *self._queue, *extra]:
            outbox.failures.append((job.sender, error))
        self._queue, self._current = [], []

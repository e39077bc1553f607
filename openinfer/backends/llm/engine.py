"""Continuous batching for Hugging Face causal LMs on the CPU.

One thread runs the loop below for a model instance. Every iteration it
  1. ends the requests whose caller went away (`request.state.cancelled`),
  2. admits waiting requests while there is room (`max_num_seqs`): tokenise, look their
     openings up in the prefix cache, prefill them together, a token budget's worth per forward
     pass (`max_num_batched_tokens`; prefill.py says how and why), sample their first tokens,
     send them as soon as their pass ends, and join the running batch,
  3. runs ONE decode step for every running sequence together (one forward pass, each row
     with its own position, LoRA adapter and sampling parameters),
  4. sends what is new: a delta per streaming request, the whole text when one finishes.
     While the event loop has not yet processed the previous step's responses, streaming
     deltas stay in their sequences and leave merged with the next ones (fewer, larger
     responses for a consumer that lags, as vLLM does).
So a request arriving mid-generation waits at most one step to join, and a finished one
leaves at once; the batch grows and shrinks with the load. A burst of short requests gets its
first tokens after one batched prefill, not after one prefill per request.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from ...core.errors import InternalError, InvalidArgumentError, OpenInferError
from ...core.observability.stats import ExecutionTiming, ModelStats
from ...core.requests.responses import ResponseSender
from ...core.types import InferResponse
from . import kv_cache, prefill
from .detokenizer import IncrementalDetokenizer, find_stop
from .engine_thread import EngineThread, Outbox
from .guided import GuidedFactory, GuidedMatcher
from .hf_model import HFModel
from .interface import GenerateInputs, generation_outputs, generation_parameters
from .prefix_cache import BLOCK_TOKENS, Block, PrefixCache, block_names, joined, prompt_states
from .sampler import Choice, logprob_entry, sample
from .sampling import SamplingParams

log = logging.getLogger("openinfer.llm")

BASE_ADAPTER = "__base__"  # peft's name for "no adapter" in a mixed batch
#: Default budget of one prefill pass: rows x longest new part (a prompt longer than that goes
#: alone). Small, because on a CPU a pass of more tokens saves little and delays its first row.
MAX_NUM_BATCHED_TOKENS = 512


@dataclass(eq=False)
class Sequence:
    """One generated continuation (a request with n > 1 has n)."""

    group: Group
    index: int
    params: SamplingParams
    prompt_ids: list[int]
    detok: IncrementalDetokenizer
    generator: torch.Generator | None = None
    matcher: GuidedMatcher | None = None
    wants_logprobs: bool = False
    generated: list[int] = field(default_factory=list)
    text: str = ""
    emitted: int = 0  # characters of `text` already sent
    unsent_tokens: int = 0
    unsent_logprobs: list[dict[str, Any]] = field(default_factory=list)
    all_logprobs: list[dict[str, Any]] = field(default_factory=list)
    cumulative_logprob: float = 0.0
    position: int = 0  # tokens of this sequence in the cache
    finish_reason: str | None = None

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None

    def take_text(self) -> str:
        end = len(self.text)
        if not self.finished and self.params.stop and not self.params.include_stop_str_in_output:
            end -= max(len(s) for s in self.params.stop) - 1  # a stop string may be forming
        end = max(end, self.emitted)
        delta, self.emitted = self.text[self.emitted : end], end
        return delta


@dataclass(eq=False)
class Group:
    """One request: its inputs, parameters, sender and sequences."""

    request_id: str
    inputs: GenerateInputs
    params: SamplingParams
    sender: ResponseSender
    cancelled: threading.Event | None
    adapter: str = BASE_ADAPTER
    prompt_ids: list[int] = field(default_factory=list)
    sequences: list[Sequence] = field(default_factory=list)
    block_names: list[bytes] = field(default_factory=list)  # prefix-cache names of the prompt
    cached_tokens: int | None = None  # prompt tokens that came from the prefix cache

    @property
    def finished(self) -> bool:
        return bool(self.sequences) and all(s.finished for s in self.sequences)


class GenerationEngine(EngineThread):
    def __init__(
        self,
        name: str,
        lm: HFModel,
        loop: asyncio.AbstractEventLoop,
        stats: ModelStats | None,
        *,
        max_num_seqs: int = 16,
        max_num_batched_tokens: int = MAX_NUM_BATCHED_TOKENS,
        prefix_cache: PrefixCache | None = None,
    ) -> None:
        super().__init__(name, loop, stats)
        self.lm = lm
        self.max_num_seqs = max(1, max_num_seqs)
        self.max_num_batched_tokens = max(1, max_num_batched_tokens)
        self.prefix_cache = prefix_cache
        self._guided: GuidedFactory | None = None
        self._waiting: list[Group] = []
        self._rows: list[Sequence] = []  # running sequences, in cache row order
        self._cache: Any = None
        self._mask: torch.Tensor | None = None  # None: no row is padded (kv_cache)
        # Whether this model's caches can be joined (kv_cache.mergeable), known from the warm-up
        # or learnt from the first prefill. Until then and when not: one request at a time,
        # without the prefix cache.
        self._joinable: bool | None = lm.joinable_cache
        self.largest_batch = 0

    def busy(self) -> bool:
        return bool(self._rows or self._waiting)

    def takes_turns(self) -> bool:
        return len(self._rows) <= 1  # several streams: the loop delivers while the next step runs

    # ---------------------------------------------------------------------- step
    def step(self, items: list[Group], outbox: Outbox) -> None:
        self._waiting.extend(items)
        self._reap_cancelled(outbox)
        self._admit(outbox)
        if self._rows:
            self._decode(outbox)

    def _reap_cancelled(self, outbox: Outbox) -> None:
        for group in [g for g in self._waiting if g.cancelled is not None and g.cancelled.is_set()]:
            self._waiting.remove(group)
            outbox.sends.append((group.sender, None, True))
        gone = {s.group for s in self._rows if s.group.cancelled is not None and s.group.cancelled.is_set()}
        if gone:
            for group in gone:
                for seq in group.sequences:
                    if not seq.finished:
                        seq.finish_reason = "abort"
                self._respond(group, outbox)
            self._compact()

    # ----------------------------------------------------------------- admission
    def _admit(self, outbox: Outbox) -> None:
        """Prefill the waiting requests while there is room, a budget's worth per forward pass;
        each pass's first tokens leave as soon as it ends (prefill.py says why)."""
        while batch := self._plan(outbox):
            own = Outbox()
            try:
                self._prefill(batch, own)
            except OpenInferError as exc:
                own.failures.extend((group.sender, exc) for group, _ in batch)
            except Exception as exc:
                log.exception("prefill of model '%s' failed", self.name)
                error = InternalError(f"model '{self.name}' failed: {exc}")
                own.failures.extend((group.sender, error) for group, _ in batch)
            self.flush(own)

    def _plan(self, outbox: Outbox) -> list[tuple[Group, prefill.PrefillRow]]:
        """The waiting requests, in order of arrival, that this step prefills: while there is
        room for their sequences and the padded prefill stays within the token budget."""
        batch: list[tuple[Group, prefill.PrefillRow]] = []
        seqs = len(self._rows)
        while self._waiting:
            group = self._waiting[0]
            if seqs and (self._joinable is False or seqs + group.params.n > self.max_num_seqs):
                break
            if batch and not self._joinable:
                break
            if not group.prompt_ids:
                try:
                    self._prepare(group)
                except OpenInferError as exc:
                    self._waiting.pop(0)
                    outbox.failures.append((group.sender, exc))
                    continue
            blocks = self._cached_blocks(group)
            row = prefill.PrefillRow(group.prompt_ids, group.adapter, cached=len(blocks) * BLOCK_TOKENS)
            padded = prefill.padded_tokens([*(r for _, r in batch), row])
            if batch and padded > self.max_num_batched_tokens:
                break
            self._waiting.pop(0)
            row.prefix = joined(blocks) if blocks else None
            group.cached_tokens = row.cached
            batch.append((group, row))
            seqs += group.params.n
        return batch

    def _cached_blocks(self, group: Group) -> list[Block]:
        cache = self.prefix_cache
        if cache is None or not self._joinable:
            return []
        if not group.block_names:
            group.block_names = block_names(group.adapter, group.prompt_ids)
        return cache.match(group.block_names, len(group.prompt_ids))

    def _prepare(self, group: Group) -> None:
        lm, params = self.lm, group.params
        tokenizer = lm.tokenizer
        prompt = group.inputs.prompt
        bos = getattr(tokenizer, "bos_token", None)
        add_special = not (bos and prompt.startswith(bos))  # a chat template already added it
        ids = tokenizer(prompt, add_special_tokens=add_special)["input_ids"]
        if not ids:
            raise InvalidArgumentError("The decoder prompt cannot be empty")
        if len(ids) >= lm.max_model_len:
            raise InvalidArgumentError(
                f"The decoder prompt (length {len(ids)}) is longer than the maximum model length "
                f"of {lm.max_model_len}. Make sure that `max_model_len` is no smaller than the "
                f"number of text tokens."
            )
        group.prompt_ids = ids
        wants_logprobs = params.logprobs is not None or group.inputs.returns.logprobs or (
            group.inputs.returns.cumulative_logprob
        )
        for index in range(params.n):
            generator = None
            if params.seed is not None:
                generator = torch.Generator().manual_seed((params.seed + index) % (1 << 64))
            group.sequences.append(
                Sequence(
                    group=group,
                    index=index,
                    params=params,
                    prompt_ids=ids,
                    detok=IncrementalDetokenizer(
                        tokenizer,
                        ids,
                        skip_special_tokens=params.skip_special_tokens,
                        spaces_between_special_tokens=params.spaces_between_special_tokens,
                    ),
                    generator=generator,
                    matcher=self._matcher(params),
                    wants_logprobs=wants_logprobs,
                )
            )

    def _matcher(self, params: SamplingParams) -> GuidedMatcher | None:
        if params.guided is None:
            return None
        if self._guided is None:
            lm = self.lm
            self._guided = GuidedFactory(lm.tokenizer, lm.vocab_size, lm.eos_ids)
        return self._guided.matcher(params.guided)

    def _forward(self, input_ids: torch.Tensor, cache: Any, adapters: list[str], **kwargs: Any) -> Any:
        lm = self.lm
        kwargs[lm.cache_kwarg] = cache
        if lm.peft:
            kwargs["adapter_names"] = adapters
        return lm.model(input_ids=input_ids, use_cache=True, **kwargs)

    def _prefill(self, batch: list[tuple[Group, prefill.PrefillRow]], outbox: Outbox) -> None:
        start = time.perf_counter_ns()
        extra = {"logits_to_keep": 1} if self.lm.logits_to_keep else {}
        rows = [row for _, row in batch]
        logits, cache, mask = prefill.run(self._forward, rows, self.lm.decoder, **extra)
        infer_end = time.perf_counter_ns()
        if self._joinable is None:
            self._joinable = kv_cache.mergeable(cache)
            if not self._joinable and self._rows:
                raise InternalError(f"model '{self.name}': cannot join a running batch")
        if self.prefix_cache is not None and self._joinable:
            for i, (group, _) in enumerate(batch):
                names = group.block_names or block_names(group.adapter, group.prompt_ids)
                self.prefix_cache.store(names, prompt_states(cache, i, len(group.prompt_ids)))
        sequences = [seq for group, _ in batch for seq in group.sequences]
        row_of = [i for i, (group, _) in enumerate(batch) for _ in group.sequences]
        for seq in sequences:
            seq.position = len(seq.prompt_ids)
        self._accept(sequences, sample(logits[row_of], sequences, self.lm.eos_ids))
        for group, _ in batch:
            self._respond(group, outbox)
        alive = [row_of[i] for i, seq in enumerate(sequences) if not seq.finished]
        if alive:
            if alive != list(range(len(batch))):  # n > 1 copies, or rows already finished
                cache, mask = kv_cache.select(cache, mask, alive)
            self._cache, self._mask = kv_cache.merge(self._cache, self._mask, cache, mask)
            self._rows.extend(seq for seq in sequences if not seq.finished)
        outbox.executions.append(
            (len(batch), ExecutionTiming(0, infer_end - start, time.perf_counter_ns() - infer_end))
        )

    # -------------------------------------------------------------------- decode
    def _decode(self, outbox: Outbox) -> None:
        rows = self._rows
        start = time.perf_counter_ns()
        batch = len(rows)
        self.largest_batch = max(self.largest_batch, batch)
        input_ids = torch.tensor([[s.generated[-1]] for s in rows], dtype=torch.long)
        positions = torch.tensor([[s.position] for s in rows], dtype=torch.long)
        if self._mask is not None:  # rows of different lengths: hide the padded columns
            self._mask = torch.cat([self._mask, torch.ones(batch, 1, dtype=torch.long)], dim=1)
        infer_start = time.perf_counter_ns()
        decoder = self.lm.decoder
        if decoder is not None and self._joinable:
            logits = decoder(input_ids, positions, self._cache, self._mask)
        else:
            adapters = [s.group.adapter for s in rows]
            padding = {} if self._mask is None else {"attention_mask": self._mask}
            out = self._forward(input_ids, self._cache, adapters, position_ids=positions, **padding)
            logits = out.logits[:, -1, :]
        infer_end = time.perf_counter_ns()
        for seq in rows:
            seq.position += 1
        self._accept(rows, sample(logits, rows, self.lm.eos_ids))
        caught_up = self.loop_caught_up()  # else deltas wait in their sequences and go out merged
        for group in dict.fromkeys(s.group for s in rows):
            if caught_up or group.finished:
                self._respond(group, outbox)
        self._compact()
        outbox.executions.append(
            (batch, ExecutionTiming(infer_start - start, infer_end - infer_start, time.perf_counter_ns() - infer_end))
        )

    def _compact(self) -> None:
        keep = [i for i, s in enumerate(self._rows) if not s.finished]
        if len(keep) == len(self._rows):
            return
        self._rows = [self._rows[i] for i in keep]
        if not keep:
            self._cache, self._mask = None, None
            return
        self._cache, self._mask = kv_cache.select(self._cache, self._mask, keep)

    # ------------------------------------------------------------------- tokens
    def _accept(self, rows: list[Sequence], choices: list[Choice]) -> None:
        decode = self.lm.tokenizer.decode
        for seq, choice in zip(rows, choices):
            params, token = seq.params, choice.token
            seq.generated.append(token)
            seq.unsent_tokens += 1
            if seq.matcher is not None:
                seq.matcher.accept(token)
            if seq.wants_logprobs:
                seq.cumulative_logprob += choice.logprob
                if params.logprobs is not None or seq.group.inputs.returns.logprobs:
                    entry = logprob_entry(choice, lambda t: decode([t]))
                    seq.unsent_logprobs.append(entry)
                    seq.all_logprobs.append(entry)
            if (token in self.lm.eos_ids and not params.ignore_eos) or token in params.stop_token_ids:
                seq.finish_reason = "stop"
                continue
            before = len(seq.text)
            seq.text += seq.detok.add(token)
            if params.stop:
                found = find_stop(seq.text, before, params.stop)
                if found is not None:
                    index, stop = found
                    seq.text = seq.text[: index + len(stop)] if params.include_stop_str_in_output else seq.text[:index]
                    seq.finish_reason = "stop"
                    continue
            if seq.matcher is not None and seq.matcher.done:
                seq.finish_reason = "stop"
            elif len(seq.generated) >= params.max_tokens or seq.position + 1 >= self.lm.max_model_len:
                seq.finish_reason = "length"

    def _respond(self, group: Group, outbox: Outbox) -> None:
        """A streaming request gets every step's delta; others only the finished text."""
        final = group.finished
        inputs = group.inputs
        if not inputs.stream and not final:
            return
        seqs = group.sequences
        if inputs.stream:
            texts = [s.take_text() for s in seqs]
            counts = [s.unsent_tokens for s in seqs]
            logprobs = [s.unsent_logprobs for s in seqs]
        else:
            prefix = inputs.prompt if inputs.prepend_input else ""
            texts = [prefix + s.text for s in seqs]
            counts = [len(s.generated) for s in seqs]
            logprobs = [s.all_logprobs for s in seqs]
        for seq in seqs:
            seq.unsent_tokens = 0
            seq.unsent_logprobs = []
        outputs = generation_outputs(
            inputs.returns,
            texts,
            finish_reasons=[s.finish_reason for s in seqs],
            num_input_tokens=len(group.prompt_ids),
            num_output_tokens=counts,
            logprobs=logprobs if group.params.logprobs is not None or inputs.returns.logprobs else None,
            cumulative_logprobs=[s.cumulative_logprob for s in seqs],
        )
        response = InferResponse(
            group.sender.request.model_name, "", group.request_id, outputs=outputs,
            parameters=generation_parameters(inputs.returns, group.cached_tokens),
        )
        outbox.sends.append((group.sender, response, final))

    # ------------------------------------------------------------------ failure
    def fail_all(self, outbox: Outbox, error: Exception, extra: list[Any] = ()) -> None:  # type: ignore[assignment]
        if not isinstance(error, OpenInferError):
            error = InternalError(f"model '{self.name}' failed: {error}")
        groups = dict.fromkeys([*(s.group for s in self._rows), *self._waiting, *extra])
        for group in groups:
            outbox.failures.append((group.sender, error))
        self._rows, self._waiting = [], []
        self._cache, self._mask = None, None

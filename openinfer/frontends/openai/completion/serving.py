"""Text completions: one or several prompts (text or token ids), `n` choices each, echo, logprobs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from ..catalog import ResolvedModel
from ..context import CompletionTally, FrontendContext, count_tokens, now, request_id, usage
from ..engine import GenerateCall, generate_all, merge
from ..errors import invalid
from ..logprobs import completion_logprobs
from ..protocol import parse_request
from ..sampling import build_sampling, check_output_options, guided_from_request, token_limit
from .protocol import CompletionRequest


class CompletionServing:
    def __init__(self, ctx: FrontendContext) -> None:
        self.ctx = ctx

    async def _prompts(self, req: CompletionRequest, resolved: ResolvedModel) -> tuple[list[str], Any]:
        prompt = req.prompt
        if isinstance(prompt, str):
            prompts: list[Any] = [prompt]
        elif prompt and all(isinstance(p, int) for p in prompt):
            prompts = [prompt]
        else:
            prompts = list(prompt)
        if not prompts or any(len(p) == 0 for p in prompts):
            raise invalid("prompt must be non-empty", "prompt")
        tokenizer = None
        if any(not isinstance(p, str) for p in prompts):
            tokenizer = await self.ctx.tokenizer(resolved.info)
            prompts = [p if isinstance(p, str) else tokenizer.decode(p) for p in prompts]
        else:
            tokenizer = await self.ctx.tokenizer(resolved.info, required=False)
        return prompts, tokenizer

    def _validate(self, req: CompletionRequest, resolved: ResolvedModel) -> None:
        if req.suffix is not None:
            raise invalid("suffix is not currently supported", "suffix")
        if req.best_of is not None and req.best_of != req.n:
            raise invalid(
                f"Received best_of={req.best_of}, but best_of is only supported when equal to n (n={req.n})",
                "best_of",
            )
        if req.logit_bias:
            raise invalid("logit bias is not supported", "logit_bias")
        check_output_options(req, resolved.info)

    async def create(self, body: Any) -> dict[str, Any] | AsyncIterator[dict[str, Any]]:
        req: CompletionRequest = parse_request(CompletionRequest, body)
        resolved = self.ctx.catalog.resolve(req.model)
        self._validate(req, resolved)
        prompts, tokenizer = await self._prompts(req, resolved)
        info = resolved.info
        guided = guided_from_request(req)
        rid = request_id("cmpl")
        want_logprobs = bool(req.logprobs)
        calls = []
        for p_index, prompt in enumerate(prompts):
            counted = count_tokens(tokenizer, prompt) if info.max_model_len is not None else None
            limit = token_limit(req.max_tokens, self.ctx.options.default_max_tokens, info, counted, "prompt")
            for i in range(req.n):
                calls.append(
                    GenerateCall(
                        prompt,
                        build_sampling(
                            req,
                            info,
                            max_tokens=limit,
                            lora=resolved.lora,
                            logprobs=req.logprobs if want_logprobs else None,
                            guided=guided,
                            seed_offset=i,
                        ),
                        stream=bool(req.stream),
                        logprobs=want_logprobs,
                        request_id=rid if len(prompts) * req.n == 1 else f"{rid}-{p_index}-{i}",
                    )
                )
        echo_texts = [prompts[i // req.n] if req.echo else "" for i in range(len(calls))]
        base = {"id": rid, "object": "text_completion", "created": now(), "model": req.model, "system_fingerprint": None}
        if req.stream:
            include_usage = bool(req.stream_options and req.stream_options.include_usage)
            return self._stream(base, calls, resolved, echo_texts, tokenizer, req, include_usage)
        outcomes = await asyncio.gather(*(generate_all(self.ctx.server, info, c) for c in calls))
        choices = []
        for index, outcome in enumerate(outcomes):
            text = echo_texts[index] + outcome.text
            logprobs = None
            if want_logprobs and outcome.logprobs is not None:
                logprobs = completion_logprobs(outcome.logprobs, req.logprobs or 0, len(echo_texts[index]))
            choices.append({"index": index, "text": text, "logprobs": logprobs, "finish_reason": outcome.finish_reason})
        prompt_total = _prompt_total(
            [outcomes[i * req.n].prompt_tokens for i in range(len(prompts))], prompts, tokenizer
        )
        cached = _cached_total([outcomes[i * req.n].cached_tokens for i in range(len(prompts))])
        completion = None
        if all(o.completion_tokens is not None for o in outcomes):
            completion = sum(o.completion_tokens or 0 for o in outcomes)
        elif tokenizer is not None:
            completion = sum(count_tokens(tokenizer, o.text) or 0 for o in outcomes)
        return {**base, "choices": choices, "usage": usage(prompt_total, completion, cached)}

    async def _stream(
        self,
        base: dict[str, Any],
        calls: list[GenerateCall],
        resolved: ResolvedModel,
        echo_texts: list[str],
        tokenizer: Any,
        req: CompletionRequest,
        include_usage: bool,
    ) -> AsyncIterator[dict[str, Any]]:
        n = len(calls)
        sent = [0] * n
        reasons: list[str | None] = [None] * n
        prompt_tokens: dict[int, int] = {}
        cached_tokens: dict[int, int] = {}
        completion = CompletionTally(n, resolved.info, tokenizer)
        continuous = bool(req.stream_options and req.stream_options.continuous_usage_stats)
        prompts_count = n // req.n

        def usage_now() -> dict[str, Any] | None:
            firsts = [prompt_tokens.get(i * req.n) for i in range(prompts_count)]
            prompts = [calls[i * req.n].prompt for i in range(prompts_count)]
            total = _prompt_total(firsts, prompts, tokenizer)
            cached = _cached_total([cached_tokens.get(i * req.n) for i in range(prompts_count)])
            return usage(total, completion.total(), cached)

        def chunk(index: int, text: str, reason: str | None, logprobs: Any = None) -> dict[str, Any]:
            return {
                **base,
                "choices": [{"index": index, "text": text, "logprobs": logprobs, "finish_reason": reason}],
                "usage": usage_now() if continuous else None,
            }

        for index, echo in enumerate(echo_texts):
            if echo:
                sent[index] = len(echo)
                yield chunk(index, echo, None)
        merged = merge(self.ctx.server, resolved.info, calls)
        async for index, step in merged:
            if step is None:
                yield chunk(index, "", reasons[index] or "stop")
                continue
            if step.prompt_tokens is not None:
                prompt_tokens.setdefault(index, step.prompt_tokens)
            if step.cached_tokens is not None:
                cached_tokens.setdefault(index, step.cached_tokens)
            completion.add(index, step.completion_tokens, step.text)
            if step.finish_reason:
                reasons[index] = step.finish_reason
            logprobs = None
            if req.logprobs and step.logprobs is not None:
                logprobs = completion_logprobs(step.logprobs, req.logprobs, sent[index])
            if step.text or logprobs is not None:
                sent[index] += len(step.text)
                yield chunk(index, step.text, None, logprobs)
        if include_usage:
            yield {**base, "choices": [], "usage": usage_now()}


def _prompt_total(counts: list[int | None], prompts: list[str], tokenizer: Any) -> int | None:
    total = 0
    for count, prompt in zip(counts, prompts):
        if count is None:
            count = count_tokens(tokenizer, prompt)
        if count is None:
            return None
        total += count
    return total


def _cached_total(counts: list[int | None]) -> int | None:
    """Cached prompt tokens over the prompts, when the model reported them for each."""
    known = [count for count in counts if count is not None]
    return sum(known) if len(known) == len(counts) else None

"""Next-token choice for a batch of sequences, each with its own sampling parameters.

Rows that only want greedy decoding (the common case) share one argmax; every other row is
processed on its own: logit bias, allowed ids, penalties, min_tokens, the guided-decoding
mask, then temperature / top-k / top-p / min-p and a draw from the row's seeded generator.
Log-probabilities are those of the raw model output (vLLM's default), ranked 1-based.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from .guided import GuidedMatcher
from .sampling import SamplingParams


class Row(Protocol):
    params: SamplingParams
    generator: torch.Generator | None
    matcher: GuidedMatcher | None
    prompt_ids: list[int]
    generated: list[int]
    wants_logprobs: bool


@dataclass(slots=True)
class Choice:
    token: int
    logprob: float = 0.0
    rank: int = 1
    top: list[tuple[int, float, int]] | None = None  # (token, logprob, rank), best first


def _plain(row: Row) -> bool:
    """Greedy with nothing to process but min_tokens' blocked ids: the shared argmax serves it."""
    p = row.params
    return (
        p.greedy
        and row.matcher is None
        and not p.has_penalties
        and not p.logit_bias
        and p.allowed_token_ids is None
        and not row.wants_logprobs
    )


def _blocked(row: Row, eos_ids: list[int], vocab: int) -> list[int]:
    """The ids min_tokens forbids for this step (end of sequence and the stop token ids)."""
    p = row.params
    if not p.min_tokens or len(row.generated) >= p.min_tokens:
        return []
    return [i for i in [*eos_ids, *p.stop_token_ids] if 0 <= i < vocab]


def _process(logits: torch.Tensor, row: Row, eos_ids: list[int]) -> torch.Tensor:
    p = row.params
    out = logits.clone()
    if p.logit_bias:
        ids = torch.tensor(list(p.logit_bias), dtype=torch.long)
        valid = ids < out.shape[0]
        out[ids[valid]] += torch.tensor(list(p.logit_bias.values()), dtype=out.dtype)[valid]
    if p.allowed_token_ids is not None:
        keep = torch.full_like(out, float("-inf"))
        ids = torch.tensor([i for i in p.allowed_token_ids if 0 <= i < out.shape[0]], dtype=torch.long)
        keep[ids] = 0.0
        out += keep
    if p.repetition_penalty != 1.0:
        seen = torch.tensor(sorted(set(row.prompt_ids) | set(row.generated)), dtype=torch.long)
        seen = seen[seen < out.shape[0]]
        values = out[seen]
        out[seen] = torch.where(values > 0, values / p.repetition_penalty, values * p.repetition_penalty)
    if (p.presence_penalty or p.frequency_penalty) and row.generated:
        counts = torch.bincount(torch.tensor(row.generated, dtype=torch.long), minlength=out.shape[0])
        counts = counts[: out.shape[0]].to(out.dtype)
        out -= p.frequency_penalty * counts + p.presence_penalty * (counts > 0).to(out.dtype)
    blocked = _blocked(row, eos_ids, out.shape[0])
    if blocked:
        out[blocked] = float("-inf")
    if row.matcher is not None:
        out[~row.matcher.allowed()] = float("-inf")
    return out


def _draw(logits: torch.Tensor, p: SamplingParams, generator: torch.Generator | None) -> int:
    if p.greedy:
        return int(torch.argmax(logits))
    scores = logits / p.temperature
    if p.top_k > 0 and p.top_k < scores.shape[0]:
        kth = torch.topk(scores, p.top_k).values[-1]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    if p.top_p < 1.0:
        ordered, order = torch.sort(scores, descending=True)
        cumulative = torch.softmax(ordered, dim=-1).cumsum(dim=-1)
        drop = cumulative - torch.softmax(ordered, dim=-1) > p.top_p  # keep the token crossing top_p
        scores = scores.scatter(0, order[drop], float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    if p.min_p > 0.0:
        probs = probs.masked_fill(probs < p.min_p * probs.max(), 0.0)
    if not torch.isfinite(probs).all() or float(probs.sum()) <= 0.0:
        return int(torch.argmax(logits))
    return int(torch.multinomial(probs, 1, generator=generator))


def _logprobs(raw: torch.Tensor, token: int, top: int) -> Choice:
    logp = torch.log_softmax(raw.float(), dim=-1)
    chosen = float(logp[token])
    rank = int((logp > chosen).sum()) + 1
    best = None
    if top > 0:
        values, ids = torch.topk(logp, min(top, logp.shape[0]))
        best = [(int(i), float(v), r + 1) for r, (v, i) in enumerate(zip(values, ids))]
    return Choice(token, chosen, rank, best)


def sample(logits: torch.Tensor, rows: Sequence[Row], eos_ids: list[int]) -> list[Choice]:
    """One token per row of `logits` [rows, vocab]."""
    logits = logits.float()
    choices: list[Choice | None] = [None] * len(rows)
    plain = [i for i, row in enumerate(rows) if _plain(row)]
    if plain:
        scores = logits[plain] if len(plain) < len(rows) else logits
        tokens = torch.argmax(scores, dim=-1).tolist()
        for j, i in enumerate(plain):
            blocked = _blocked(rows[i], eos_ids, logits.shape[1])
            if blocked and tokens[j] in blocked:  # else masking them would change nothing
                row = scores[j].clone()  # never write into the model's output
                row[blocked] = float("-inf")
                tokens[j] = int(torch.argmax(row))
        for i, token in zip(plain, tokens):
            choices[i] = Choice(token)
    for i, row in enumerate(rows):
        if choices[i] is not None:
            continue
        processed = _process(logits[i], row, eos_ids)
        token = _draw(processed, row.params, row.generator)
        if row.wants_logprobs:
            choices[i] = _logprobs(logits[i], token, row.params.logprobs or 0)
        else:
            choices[i] = Choice(token)
    return choices  # type: ignore[return-value]


def logprob_entry(choice: Choice, decode: Any) -> dict[str, dict[str, Any]]:
    """Triton's per-token form: {token_id: {logprob, rank, decoded_token}}, the sampled token
    first and marked `"chosen": true` (under sampling it need not be rank 1)."""
    entry = {
        str(choice.token): {
            "logprob": choice.logprob, "rank": choice.rank, "decoded_token": decode(choice.token), "chosen": True
        }
    }
    for token, logprob, rank in choice.top or []:
        if str(token) not in entry:
            entry[str(token)] = {"logprob": logprob, "rank": rank, "decoded_token": decode(token)}
    return entry

"""Backend logprobs (one `{token_id: {logprob, rank, decoded_token}}` per token) -> OpenAI shapes."""

from __future__ import annotations

from typing import Any


def _ranked(entry: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    candidates = [value for value in entry.values() if isinstance(value, dict)]
    candidates.sort(key=lambda c: (c.get("rank") is None, c.get("rank", 0)))
    chosen = next((c for c in candidates if c.get("chosen")), candidates[0] if candidates else {})
    return chosen, candidates


def _token(candidate: dict[str, Any]) -> str:
    return str(candidate.get("decoded_token", ""))


def chat_logprobs(entries: list[dict[str, Any]], top: int) -> list[dict[str, Any]]:
    out = []
    for entry in entries:
        chosen, candidates = _ranked(entry)
        token = _token(chosen)
        out.append(
            {
                "token": token,
                "logprob": float(chosen.get("logprob", 0.0)),
                "bytes": list(token.encode("utf-8")),
                "top_logprobs": [
                    {"token": _token(c), "logprob": float(c.get("logprob", 0.0)), "bytes": list(_token(c).encode("utf-8"))}
                    for c in candidates[:top]
                ],
            }
        )
    return out


def completion_logprobs(entries: list[dict[str, Any]], top: int, offset: int) -> dict[str, Any]:
    """`text_offset` continues from `offset` (the text already sent) so streamed parts concatenate."""
    tokens, token_logprobs, top_logprobs, offsets = [], [], [], []
    for entry in entries:
        chosen, candidates = _ranked(entry)
        token = _token(chosen)
        offsets.append(offset)
        offset += len(token)
        tokens.append(token)
        token_logprobs.append(float(chosen.get("logprob", 0.0)))
        top_logprobs.append({_token(c): float(c.get("logprob", 0.0)) for c in candidates[:top]})
    return {"text_offset": offsets, "token_logprobs": token_logprobs, "tokens": tokens, "top_logprobs": top_logprobs}

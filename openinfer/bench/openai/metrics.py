"""genai-perf's LLM metrics from per-request records, and its statistics table."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..stats import describe
from .client import Record

COLUMNS = ("avg", "min", "max", "p99", "p90", "p75")
ROWS = [
    ("time_to_first_token", "Time to first token (ms)"),
    ("inter_token_latency", "Inter token latency (ms)"),
    ("request_latency", "Request latency (ms)"),
    ("output_sequence_length", "Output sequence length"),
    ("input_sequence_length", "Input sequence length"),
    ("output_token_throughput", "Output token throughput (per sec)"),
    ("request_throughput", "Request throughput (per sec)"),
]


def _output_tokens(
    r: Record, count: Callable[[str], int] | None, streaming: bool
) -> tuple[int, str]:
    if count is not None:
        return count(r.text), "tokenizer"
    if r.usage.get("completion_tokens") is not None:
        return int(r.usage["completion_tokens"]), "usage"
    if streaming:
        return len(r.chunk_ns), "stream events"
    return len(r.text.split()), "words"


def compute(records: list[Record], duration_s: float, count: Callable[[str], int] | None,
            endpoint: str, streaming: bool) -> dict[str, Any]:
    """Per-request distributions plus the two run-wide throughputs (genai-perf's definitions)."""
    lat = [r.end_ns / 1e6 for r in records]
    metrics: dict[str, Any] = {"request_latency": describe(lat)}
    counted_by = "words"
    samples: dict[str, list[float]] = {}
    if endpoint != "embeddings":
        outs = []
        for r in records:
            n, counted_by = _output_tokens(r, count, streaming)
            outs.append(n)
        metrics["output_sequence_length"] = describe(outs)
        if streaming:
            ttft = [r.first_ns / 1e6 for r in records]
            metrics["time_to_first_token"] = describe(ttft)
            itl = [(r.end_ns - r.first_ns) / 1e6 / (n - 1) for r, n in zip(records, outs) if n > 1]
            metrics["inter_token_latency"] = describe(itl)
            samples = {"time_to_first_token": ttft, "inter_token_latency": itl}
        tokens = sum(outs)
        metrics["output_token_throughput"] = {"avg": tokens / duration_s if duration_s else 0.0}
    ins = [r.usage["prompt_tokens"] if count is None and "prompt_tokens" in r.usage
           else r.input_tokens for r in records]
    metrics["input_sequence_length"] = describe(ins)
    metrics["request_throughput"] = {"avg": len(records) / duration_s if duration_s else 0.0}
    # Per-request values, for pictures of the distributions (`--plot`).
    return {"metrics": metrics, "duration_s": duration_s, "tokens_counted_by": counted_by, "samples": samples}


def table(doc: dict[str, Any]) -> str:
    """The box-drawn table genai-perf prints (N/A where a statistic does not apply)."""
    title = f"openinfer bench | LLM Metrics ({doc.get('model')}, {doc.get('endpoint_type')}" + (
        ", streaming)" if doc.get("streaming") else ")")
    metrics = doc["metrics"]
    rows = []
    for key, name in ROWS:
        if key not in metrics:
            continue
        m = metrics[key]
        rows.append([name] + [f"{m[c]:,.2f}" if c in m else "N/A" for c in COLUMNS])
    head = ["Statistic", *COLUMNS]
    w = [max(len(head[i]), *(len(r[i]) for r in rows)) for i in range(len(head))]

    def line(cells: list[str], left: str, mid: str, right: str) -> str:
        return left + mid.join(f" {c.rjust(w[i])} " for i, c in enumerate(cells)) + right

    def rule(left: str, mid: str, right: str, fill: str) -> str:
        return left + mid.join(fill * (x + 2) for x in w) + right

    out = [title.center(sum(w) + 3 * len(w) + 1),
           rule("┏", "┳", "┓", "━"), line(head, "┃", "┃", "┃"), rule("┡", "╇", "┩", "━")]
    out += [line(r, "│", "│", "│") for r in rows]
    out.append(rule("└", "┴", "┘", "─"))
    out.append(f"{doc.get('request_count', 0)} requests, concurrency {doc.get('concurrency')}, "
               f"{doc.get('duration_s', 0):.1f} s; tokens counted by "
               f"{doc.get('tokens_counted_by')}; client CPU "
               f"{doc.get('client_cpu_percent', 0):.0f}%")
    if doc.get("streams_without_done"):
        out.append(f"note: {doc['streams_without_done']} stream(s) ended without data: [DONE]; "
                   "each was taken as ended where its body ended")
    return "\n".join(out)

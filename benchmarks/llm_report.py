"""The LLM comparison's section of LLM_RESULTS.md (and so of RESULTS.md and the README): every
cell, openinfer / transformers serve per load generator, and where the two generators disagree."""

from __future__ import annotations

from typing import Any

from .llm_compare import DISAGREE

TITLE = "## LLM: openinfer against `transformers serve --continuous-batching`"


def _x(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}x"


def _cells(result: dict[str, Any]) -> list[str]:
    lines = [
        "| server | load generator | c | output tokens/s | TTFT p50 / p99 (ms) | ITL p50 / p99 (ms) "
        "| server CPU (cores · µs/token) | server RSS (MiB) |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for c in result["cells"]:
        head = f"| {c['server_label']} | {c['generator_label']} | {c['concurrency']} |"
        if "error" in c:
            lines.append(f"{head} not measured: {c['error'].replace('|', '/')} | | | | |")
            continue
        lines.append(
            f"{head} {c['tokens_per_s']:.1f} | {c['ttft_p50_ms']:.2f} / {c['ttft_p99_ms']:.2f} "
            f"| {c['itl_p50_ms']:.2f} / {c['itl_p99_ms']:.2f} | {c['server_cores']:.2f} · "
            f"{c['server_cpu_us_per_token']:,.0f} | {c['server_rss_mib']:,} |"
        )
    return lines


def _ratios(result: dict[str, Any]) -> list[str]:
    if not result["ratios"]:
        return []
    lines = [
        "",
        "**openinfer / transformers serve** (above 1 is better for tokens/s, below 1 for the rest):",
        "",
        "| load generator | c | output tokens/s | TTFT p50 | TTFT p99 | ITL p50 | ITL p99 | CPU per token | RSS |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    names = {c["generator"]: c["generator_label"] for c in result["cells"]}
    for r in result["ratios"]:
        keys = ("tokens_per_s", "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms",
                "server_cpu_us_per_token", "server_rss_mib")
        lines.append(f"| {names[r['generator']]} | {r['concurrency']} | " + " | ".join(_x(r[k]) for k in keys) + " |")
    return lines


def _disagreements(result: dict[str, Any]) -> list[str]:
    rows = result["disagreements"]
    if not rows:
        return []
    lines = [
        "",
        f"**aiperf / openinfer bench** on the same server (bold: more than {DISAGREE:.0%} apart):",
        "",
        "| server | c | output tokens/s | TTFT p50 | ITL p50 |",
        "|---|---:|---:|---:|---:|",
    ]
    for d in rows:
        cells = [f"**{_x(d[k])}**" if k in d["differ"] else _x(d[k]) for k in ("tokens_per_s", "ttft_p50_ms", "itl_p50_ms")]
        lines.append(f"| {result['servers'][d['server']]} | {d['concurrency']} | " + " | ".join(cells) + " |")
    apart = [d for d in rows if d["differ"]]
    lines.append("")
    if apart:
        names = {"tokens_per_s": "tokens/s", "ttft_p50_ms": "TTFT p50", "itl_p50_ms": "ITL p50"}
        where = "; ".join(f"{result['servers'][d['server']]} c={d['concurrency']}: "
                          + ", ".join(names[k] for k in d["differ"]) for d in apart)
        lines.append(f"- The generators disagree by more than {DISAGREE:.0%} on {where}.")
    else:
        lines.append(f"- The generators agree within {DISAGREE:.0%} on every cell measured by both.")
    return lines


def _notes(result: dict[str, Any]) -> list[str]:
    lines = []
    missing: dict[str, int] = {}
    for c in result["cells"]:
        if c.get("streams_without_done"):
            missing[c["server_label"]] = missing.get(c["server_label"], 0) + c["streams_without_done"]
    for label, count in missing.items():
        lines.append(f"- {label} ends its streams without `data: [DONE]` ({count} streams in the rounds kept); "
                     "`openinfer bench openai` takes the end of the body as the end of the stream.")
    for what, why in result["not_measured"].items():
        lines.append(f"- {what} not measured: {why}")
    return lines


def render(result: dict[str, Any], rounds: int, max_tokens: int, prompt_words: int) -> str:
    versions = result.get("versions", {})
    intro = (
        f"Both servers serve the tiny Llama from the same local folder (transformers "
        f"{versions.get('transformers', '?')}, one torch thread each, continuous batching), the same "
        f"{prompt_words}-word prompts, {max_tokens} greedy tokens per request (EOS ignored), streamed "
        f"completions after warm-up requests; best of {rounds} interleaved round(s) per cell. Load generators: "
        f"`openinfer bench openai` and aiperf {versions.get('aiperf', '?')}, each on the same cores as the server. "
        "Server CPU: the process tree's CPU per output token, and the cores that keeps busy at the measured rate; "
        "RSS: the tree's peak resident memory during the cell."
    )
    lines = [TITLE, "", intro, "", *_cells(result), *_ratios(result), *_disagreements(result)]
    notes = _notes(result)
    if notes:
        lines += ["", *notes]
    return "\n".join(lines) + "\n"

"""``openinfer bench openai``: load an OpenAI-compatible endpoint, print genai-perf's table."""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from ..control import split_url
from ..httpconn import HttpConnection
from ..progress import Progress
from .client import OpenAIError, Record, build_body, send
from .metrics import compute, table
from .prompts import load_tokenizer, sample_length, synthetic_prompt


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="openinfer bench openai",
        description="Measure an OpenAI-compatible endpoint (genai-perf's options and table).",
    )
    a = p.add_argument
    a("-m", "--model", required=True)
    a("-u", "--url", default="localhost:9000", help="HOST:PORT of the OpenAI frontend")
    a("--endpoint-type", default="chat", choices=["chat", "completions", "embeddings"])
    a("--streaming", action="store_true")
    a("--synthetic-input-tokens-mean", type=int, default=550)
    a("--synthetic-input-tokens-stddev", type=float, default=0.0)
    a("--output-tokens-mean", type=int, default=128)
    a("--output-tokens-stddev", type=float, default=0.0)
    a("--output-tokens-mean-deterministic", action="store_true",
      help="also send min_tokens and ignore_eos so every answer has the asked length")
    a("--concurrency", type=int, default=1)
    a("--request-count", type=int, default=0, help="default: max(10 x concurrency, 50)")
    a("--warmup-request-count", type=int, default=0)
    a("--num-prompts", type=int, default=100, help="distinct synthetic prompts")
    a("--num-prefix-prompts", type=int, default=0,
      help="prefixes to choose from, one prepended to every prompt (measures prefix caching)")
    a("--prefix-prompt-length", type=int, default=100, help="tokens of each prefix prompt")
    a("--random-seed", type=int, default=0)
    a("--tokenizer", default=None, help="tokenizer.json or a directory holding one")
    a("--extra-inputs", action="append", default=[], metavar="KEY:VALUE",
      help="extra request fields (value parsed as JSON when it can be)")
    a("--timeout", type=float, default=600.0, help="seconds per request")
    a("--json", nargs="?", const="-", default=None, metavar="FILE")
    a("--profile-export-file", default=None, help="per-request records as JSON")
    a("--no-progress", action="store_true")
    a("--plot", default=None, metavar="FILE.svg",
      help="draw the TTFT and inter-token latency distributions (streaming; needs matplotlib: the plot extra)")
    return p


def _extra(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        k, _, v = item.partition(":")
        try:
            out[k] = orjson.loads(v)
        except orjson.JSONDecodeError:
            out[k] = v
    return out


async def _run(ns: argparse.Namespace, count: Any, label: str, progress: Progress
               ) -> tuple[list[Record], list[str], float, float]:
    host, port = split_url(ns.url)
    rng = random.Random(ns.random_seed)
    prompts = [synthetic_prompt(rng, sample_length(rng, ns.synthetic_input_tokens_mean,
                                                   ns.synthetic_input_tokens_stddev), count)
               for _ in range(max(ns.num_prompts, 1))]
    prefixes = [synthetic_prompt(rng, ns.prefix_prompt_length, count) for _ in range(ns.num_prefix_prompts)]
    extra = _extra(ns.extra_inputs)
    total = ns.request_count or max(10 * ns.concurrency, 50)
    records: list[Record] = []
    errors: list[str] = []
    issued = [0]
    warm = [ns.warmup_request_count]

    def next_body() -> tuple[dict[str, Any], str]:
        prompt = prompts[issued[0] % len(prompts)]
        if prefixes:
            prompt = f"{rng.choice(prefixes)} {prompt}"
        n_out = sample_length(rng, ns.output_tokens_mean, ns.output_tokens_stddev)
        body = build_body(ns.endpoint_type, ns.model, prompt, n_out, ns.streaming, extra)
        if ns.output_tokens_mean_deterministic and ns.endpoint_type != "embeddings":
            body.update({"min_tokens": n_out, "ignore_eos": True})
        return body, prompt

    async def loop(conn: HttpConnection, measured: bool) -> None:
        while True:
            if measured:
                if issued[0] >= total:
                    break
                issued[0] += 1
            else:
                if warm[0] <= 0:
                    break
                warm[0] -= 1
            body, prompt = next_body()
            try:
                rec = await asyncio.wait_for(send(conn, f"{host}:{port}", ns.endpoint_type, body),
                                             ns.timeout)
            except (OpenAIError, ConnectionError, OSError, asyncio.TimeoutError,
                    asyncio.IncompleteReadError, ValueError) as exc:  # IncompleteRead: body cut off
                conn.close()
                if measured:
                    errors.append(f"{type(exc).__name__}: {exc}")
                continue
            if measured:
                rec.input_tokens = count(prompt)
                records.append(rec)
            progress.update(label, len(records) / total,
                            f"{len(records)}/{total} requests, {len(errors)} errors")

    # Warm-up requests run first, outside the measured window (as genai-perf's): the throughputs
    # divide the measured requests' tokens by the time those requests took, nothing else.
    conns = [HttpConnection(host, port) for _ in range(ns.concurrency)]
    try:
        await asyncio.gather(*(loop(conn, False) for conn in conns))
        t0, cpu0 = time.perf_counter(), time.process_time()
        await asyncio.gather(*(loop(conn, True) for conn in conns))
        return records, errors, time.perf_counter() - t0, time.process_time() - cpu0
    finally:
        for conn in conns:
            conn.close()


def main(argv: list[str]) -> int:
    parser = _parser()
    ns = parser.parse_args(argv)
    try:
        count, counted_by = load_tokenizer(ns.tokenizer)
    except ValueError as exc:
        parser.error(str(exc))
    label = f"c={ns.concurrency}"
    progress = Progress(enabled=not ns.no_progress)
    try:
        import uvloop

        run: Any = uvloop.run
    except ImportError:
        run = asyncio.run
    records, errors, duration, cpu = run(_run(ns, count, label, progress))
    doc = compute(records, duration, count if ns.tokenizer else None, ns.endpoint_type,
                  ns.streaming)
    doc.update({
        "model": ns.model, "url": ns.url, "endpoint_type": ns.endpoint_type,
        "streaming": ns.streaming, "concurrency": ns.concurrency,
        "request_count": len(records), "errors": len(errors),
        "first_error": errors[0] if errors else "",
        # A note, not an error: the stream ended with its body (client.py says why).
        "streams_without_done": (sum(not r.done_sentinel for r in records)
                                 if ns.streaming and ns.endpoint_type != "embeddings" else 0),
        "tokens_counted_by": (
            counted_by if ns.tokenizer else doc.get("tokens_counted_by", "words")),
        "client_cpu_percent": 100.0 * cpu / duration if duration else 0.0,
    })
    progress.done(label, f"{len(records)} requests in {duration:.1f} s, {len(errors)} errors")
    if ns.profile_export_file:
        Path(ns.profile_export_file).write_bytes(orjson.dumps(
            [r.__dict__ for r in records], option=orjson.OPT_INDENT_2))
    if ns.json:
        data = orjson.dumps(doc, option=orjson.OPT_INDENT_2)
        if ns.json == "-":
            sys.stdout.write(data.decode() + "\n")
        else:
            Path(ns.json).write_bytes(data)
    if ns.json != "-":
        print(table(doc))
        if errors:
            print(f"{len(errors)} failed requests; first: {errors[0]}")
    if ns.plot:
        from ..plot import PlotError, latency_distributions

        try:
            latency_distributions({f"{ns.model} c={ns.concurrency}": doc["samples"]}, ns.plot)
        except PlotError as exc:
            print(f"openinfer bench openai: --plot: {exc}", file=sys.stderr)
            return 1
    return 0 if records and not errors else 1

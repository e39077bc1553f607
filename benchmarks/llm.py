"""The LLM row of `make bench`: a tiny Llama through the OpenAI endpoint, against the same model
called in-process, and against another server.

Three figures, on the same prompts and the same 64 greedy tokens per request (EOS ignored):

* **direct**: `transformers` `model.generate`, one request at a time, in this process (what a user
  gets without a server), and our continuous-batching engine in-process (no HTTP at all);
* **served, concurrency 1**: `openinfer serve --openai-port` with the `transformers` backend,
  streamed completions measured by `openinfer bench openai` (time to first token to the first
  content event, output tokens per second over the run);
* **served, concurrency 8**: the same, eight requests in flight; the engine batches them;
* **frontend in-process**: the OpenAI frontend's serving code and the core, without HTTP.

The frontend's overhead is served c=1 against the in-process engine at c=1 (same engine, no
server), and against `model.generate`; batching is served c=8 against served c=1. Rounds are
interleaved and each row keeps its best round, so load from elsewhere biases no row; every
in-process round runs in a fresh process.

Then, in the same rounds, openinfer against `transformers serve --continuous-batching` at
concurrency 1, 4 and 8, each measured by `openinfer bench openai` and by NVIDIA's aiperf, with
the servers' CPU and memory (benchmarks/llm_compare.py); a peer or generator that cannot run is
reported as not measured.

    python -m benchmarks.llm [--requests 48] [--max-tokens 64] [--rounds 3] [--out benchmarks/LLM_RESULTS.md]
    python -m benchmarks.llm --requests 4 --max-tokens 8 --rounds 1 --same-process --out /tmp/llm.md  # smoke run
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from . import llm_compare, llm_report, llm_servers
from .llm_load import Load, openinfer_bench
from .llm_servers import MODEL, LlmServer

HERE = Path(__file__).resolve().parent
INPUT_WORDS = 12  # prompt length, in words of the bench client's vocabulary
#: Requests per level and round (twice as many from c=8): 48 keeps each cell a few seconds long,
#: so that one stall of either server (a full garbage collection) does not decide it.
REQUESTS = 48
DEFAULT_OUT = HERE / "LLM_RESULTS.md"


def prompts(count: int) -> list[str]:
    """The prompts `openinfer bench openai` sends (same generator, same seed, same order)."""
    from openinfer.bench.openai.prompts import sample_length, synthetic_prompt, word_count

    rng = random.Random(0)
    made = [synthetic_prompt(rng, sample_length(rng, INPUT_WORDS, 0.0), word_count) for _ in range(100)]
    return [made[(i + 1) % len(made)] for i in range(count)]


def served(server: LlmServer, concurrency: int, requests: int, max_tokens: int) -> dict[str, Any]:
    """A served row: `openinfer bench openai` against `server`, streamed completions."""
    load = Load(concurrency, requests, max(2, concurrency), max_tokens, tuple(prompts(requests)), INPUT_WORDS)
    return {"name": f"served c={concurrency}", "concurrency": concurrency, **openinfer_bench(server, load)}


def frontend_in_process(repo: Path, work: list[str], max_tokens: int, rounds: int) -> list[dict[str, Any]]:
    """Streamed completions through the OpenAI frontend's serving code and the core, in this
    process, without HTTP: isolates what the frontend itself costs per token."""
    import orjson

    from openinfer.backends.llm.baseline import run_like_the_server
    from openinfer.app.cli import serve_parser
    from openinfer.frontends.openai.completion.serving import CompletionServing
    from openinfer.frontends.openai.context import FrontendContext
    from openinfer.frontends.openai.options import OpenAIOptions
    from openinfer.frontends.openai.sse import EventStream
    from openinfer.app.compose import compose
    from openinfer.app.settings import Settings

    async def measure() -> list[dict[str, Any]]:
        args = Settings.from_args(serve_parser().parse_args(["--model-repository", str(repo), "--openai-port", "1"]))
        server = compose(args).server
        await server.start()
        serving = CompletionServing(FrontendContext.create(server, OpenAIOptions.from_settings(args)))
        body = {"model": MODEL, "max_tokens": max_tokens, "min_tokens": max_tokens, "ignore_eos": True,
                "temperature": 0, "stream": True, "stream_options": {"include_usage": True}}
        out = []

        async def receive() -> dict[str, Any]:
            """A client that stays until its stream ends. ASGI's `receive` answers
            `http.disconnect` only when the client has left, and the stream's guard watches it:
            answering at once would cancel every stream before its first token."""
            await asyncio.get_running_loop().create_future()
            return {"type": "http.disconnect"}

        async def one(prompt: str) -> tuple[int, float]:
            """One streamed completion: its tokens (the final usage) and time to first text."""
            began, first, tokens = time.perf_counter(), None, 0

            async def send(message: dict[str, Any]) -> None:  # what the HTTP server gets
                nonlocal first, tokens
                event = message.get("body", b"")
                if first is None and b'"text":"' in event and b'"text":""' not in event:
                    first = time.perf_counter()
                if b'"choices":[]' in event:
                    tokens += orjson.loads(event[6:])["usage"]["completion_tokens"]

            stream = EventStream(await serving.create({**body, "prompt": prompt}))
            await stream({"type": "http"}, receive, send)
            return tokens, ((first or time.perf_counter()) - began) * 1000

        try:
            await one(work[0])  # warm-up (the tokenizer loads), as the served runs get
            for _ in range(rounds):
                start = time.perf_counter()
                done = [await one(prompt) for prompt in work]
                seconds = time.perf_counter() - start
                tokens = sum(t for t, _ in done)
                out.append({"name": "frontend in-process (no HTTP) c=1", "concurrency": 1, "requests": len(work),
                            "output_tokens": tokens, "tokens_per_s": round(tokens / seconds, 1),
                            "ttft_p50_ms": round(statistics.median(ms for _, ms in done), 2)})
        finally:
            await server.stop()
        return out

    return run_like_the_server(measure())


def _alone(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`function(*args, **kwargs)` in a process of its own: models, threads and garbage left in a
    process by an earlier in-process run slow the next one down (by up to 15% here)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(function, *args, **kwargs).result()


def _best(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the highest throughput: on a shared machine noise only ever slows a run down."""
    best = dict(max(runs, key=lambda r: r["tokens_per_s"]))
    best["runs_tokens_per_s"] = [r["tokens_per_s"] for r in runs]
    return best


def _here(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return function(*args, **kwargs)


def _all_counted(runs: list[dict[str, Any]], max_tokens: int) -> list[dict[str, Any]]:
    """Every request streams all its tokens (EOS is ignored), so a run that counted fewer
    measured something else (a stream cut short, tokens not seen) and gives no figure."""
    for row in runs:
        expected = row["requests"] * max_tokens
        if row.get("output_tokens") != expected:
            raise RuntimeError(f"{row['name']}: {row.get('output_tokens')} output tokens counted, {expected} expected")
    return runs


def run(requests: int = REQUESTS, max_tokens: int = 64, rounds: int = 3, fresh: bool = True, *, peer: bool = True,
        use_aiperf: bool = True, install: bool = True,
        concurrency: tuple[int, ...] = llm_compare.CONCURRENCY) -> dict[str, Any]:
    """`rounds` interleaved rounds of every measurement; each row keeps its best round.
    `fresh=False` runs the in-process rows in this process instead of a fresh one each: a
    quicker smoke run, whose in-process figures are a little low. `peer` and `use_aiperf` bring
    in `transformers serve` and aiperf (installed into benchmarks/.venvs unless not `install`)."""
    from openinfer.backends.llm.baseline import engine_baseline, transformers_baseline
    from tests.llm_fixtures import llm_assets

    load = os.getloadavg()[0]  # before this run adds its own
    assets = llm_assets()
    work = prompts(requests)
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in ("direct", "engine", "frontend", "c1", "c8")}
    alone = _alone if fresh else _here
    with tempfile.TemporaryDirectory(prefix="openinfer-bench-llm-") as tmp, ExitStack() as stack:
        workdir = Path(tmp)
        ours = stack.enter_context(llm_servers.openinfer(assets.llama, workdir))
        comparison = llm_compare.setup(stack, ours, assets.llama, workdir, requests, max_tokens, prompts, INPUT_WORDS,
                                       peer=peer, use_aiperf=use_aiperf, install=install, concurrency=concurrency)
        for _ in range(rounds):
            generated = alone(transformers_baseline, assets.llama, work, max_tokens)
            runs["direct"].append(generated.as_dict())
            engine_run = alone(engine_baseline, assets.llama, work, max_tokens, concurrency=1)
            runs["engine"].append(engine_run.as_dict())
            runs["frontend"] += alone(frontend_in_process, workdir / "models", work, max_tokens, 1)
            runs["c1"].append(served(ours, 1, requests, max_tokens))
            runs["c8"].append(served(ours, 8, requests * 2, max_tokens))
            comparison.round()
        peers = comparison.result()
    direct, engine, one, eight, frontend = (_best(_all_counted(runs[k], max_tokens)) for k in ("direct", "engine", "c1", "c8", "frontend"))
    direct["name"] = "transformers generate, in-process"
    engine["name"] = "engine in-process c=1"
    ratios = {
        "served_c1_vs_generate_tokens_per_s": round(one["tokens_per_s"] / direct["tokens_per_s"], 3),
        "served_c1_vs_engine_tokens_per_s": round(one["tokens_per_s"] / engine["tokens_per_s"], 3),
        "frontend_vs_engine_tokens_per_s": round(frontend["tokens_per_s"] / engine["tokens_per_s"], 3),
        "served_c1_ttft_minus_engine_ms": round(one["ttft_p50_ms"] - engine["ttft_p50_ms"], 2),
        "served_c8_vs_c1_tokens_per_s": round(eight["tokens_per_s"] / one["tokens_per_s"], 2),
    }
    return {"rows": [direct, engine, frontend, one, eight], "ratios": ratios, "max_tokens": max_tokens,
            "prompt_words": INPUT_WORDS, "rounds": rounds, "load_at_start": load, "peers": peers}


def render(result: dict[str, Any]) -> str:
    lines = [
        "## LLM: tiny Llama through the OpenAI endpoint vs in-process",
        "",
        (
            f"{result['max_tokens']} greedy tokens per request (EOS ignored), {result['prompt_words']}-word "
            f"prompts, streamed completions; best of {result['rounds']} interleaved rounds; one machine, client "
            f"and server sharing its cores (load average {result['load_at_start']:.1f} at the start)."
        ),
        "",
        "| run | concurrency | requests | output tokens/s | TTFT p50 (ms) |",
        "|---|---:|---:|---:|---:|",
    ]
    for row in result["rows"]:
        lines.append(
            f"| {row['name']} | {row['concurrency']} | {row['requests']} | {row['tokens_per_s']:.1f} | {row['ttft_p50_ms']:.2f} |"
        )
    r = result["ratios"]
    lines += [
        "",
        f"- served c=1 / `model.generate`: **{r['served_c1_vs_generate_tokens_per_s']:.2f}x** tokens/s",
        (
            f"- frontend in-process (no HTTP) / engine in-process c=1: **{r['frontend_vs_engine_tokens_per_s']:.2f}x** "
            "tokens/s (the OpenAI serving code and the core)"
        ),
        (
            f"- served c=1 / in-process engine c=1: **{r['served_c1_vs_engine_tokens_per_s']:.2f}x** tokens/s "
            f"(frontend + HTTP + client cost; TTFT +{r['served_c1_ttft_minus_engine_ms']:.2f} ms)"
        ),
        f"- served c=8 / served c=1: **{r['served_c8_vs_c1_tokens_per_s']:.2f}x** tokens/s (batching)",
        "",
    ]
    if "peers" in result:  # results/llm.json written before the comparison existed has none
        lines += [llm_report.render(result["peers"], result["rounds"], result["max_tokens"], result["prompt_words"])]
    return "\n".join(lines)


def section(quick: bool = False, install: bool = True) -> str:
    """The LLM row for RESULTS.md (`make bench`); also writes LLM_RESULTS.md and results/llm.json."""
    try:
        result = run(12 if quick else REQUESTS, 64, 1 if quick else 3, install=install)
    except (ImportError, RuntimeError, OSError) as exc:
        return f"## LLM: tiny Llama through the OpenAI endpoint vs in-process\n\nnot measured: {exc}\n"
    save(result)
    return render(result)


def save(result: dict[str, Any], out: Path = DEFAULT_OUT) -> str:
    """The table to `out`, the whole result as JSON to results/llm.json (beside `out` when it
    is not the default, so a trial run leaves the recorded figures alone)."""
    text = render(result)
    out.write_text("# LLM benchmark\n\n" + text)
    data = HERE / "results" / "llm.json" if out.resolve() == DEFAULT_OUT else out.with_suffix(".json")
    data.parent.mkdir(exist_ok=True)
    data.write_text(json.dumps(result, indent=2))
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.llm", description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=REQUESTS)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    parser.add_argument("--same-process", action="store_true",
                        help="in-process rows in this process, not each in a fresh one (a quicker smoke run)")
    parser.add_argument("--concurrency", default=",".join(map(str, llm_compare.CONCURRENCY)),
                        help="levels of the comparison with transformers serve, comma-separated")
    parser.add_argument("--peer", action=argparse.BooleanOptionalAction, default=True,
                        help="compare with transformers serve --continuous-batching")
    parser.add_argument("--aiperf", action=argparse.BooleanOptionalAction, default=True,
                        help="also measure the comparison with aiperf (installed into benchmarks/.venvs/aiperf)")
    parser.add_argument("--no-install", action="store_true", help="leave aiperf out unless already installed")
    ns = parser.parse_args(argv)
    concurrency = tuple(int(c) for c in ns.concurrency.split(",") if c)
    result = run(ns.requests, ns.max_tokens, ns.rounds, fresh=not ns.same_process, peer=ns.peer,
                 use_aiperf=ns.aiperf, install=not ns.no_install, concurrency=concurrency)
    text = save(result, Path(ns.out))
    if Path(ns.out).resolve() == DEFAULT_OUT:
        publish(text)
    print(text)
    return 0


def publish(text: str) -> None:
    """RESULTS.md's LLM sections replaced by `text`, and the README's performance section after
    it, as `make bench` would leave them (`python -m benchmarks.charts` redraws the picture)."""
    from . import readme

    results = HERE / "RESULTS.md"
    if results.exists():
        updated = readme.with_llm_sections(results.read_text(), text)
        results.write_text(updated)
        readme.update(updated)


if __name__ == "__main__":
    sys.exit(main())

"""In-process baselines for the LLM benchmarks: the same model without any server around it.

`transformers_baseline` is what a user gets by calling `model.generate` directly, one request
at a time (time to first token measured with a streamer). `engine_baseline` runs our own
batching engine in-process, N requests at once, without HTTP/gRPC: the gap to the server
figures is the serving overhead, the gap between concurrency 1 and 8 is what batching buys.
Run each in a process of its own (as `main` does): a model left from an earlier run skews the next.

    from openinfer.backends.llm.baseline import transformers_baseline, engine_baseline
    solo = transformers_baseline("/path/to/model", ["Hello"] * 8, max_tokens=64)
    batched = engine_baseline("/path/to/model", ["Hello"] * 8, max_tokens=64, concurrency=8)
    print(solo.tokens_per_s, batched.tokens_per_s, batched.ttft_p50_ms)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class BaselineResult:
    name: str
    concurrency: int
    requests: int
    output_tokens: int
    seconds: float
    ttft_ms: list[float] = field(default_factory=list)

    @property
    def tokens_per_s(self) -> float:
        return self.output_tokens / self.seconds if self.seconds else 0.0

    @property
    def ttft_p50_ms(self) -> float:
        return statistics.median(self.ttft_ms) if self.ttft_ms else 0.0

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("ttft_ms")
        data.update(tokens_per_s=round(self.tokens_per_s, 1), ttft_p50_ms=round(self.ttft_p50_ms, 2))
        return data


def _threads(cpu_threads: int | None) -> None:
    if cpu_threads:
        import torch

        torch.set_num_threads(cpu_threads)


def transformers_baseline(
    model_dir: str | Path, prompts: list[str], max_tokens: int = 64, *, cpu_threads: int | None = 1
) -> BaselineResult:
    """`model.generate` greedily, one prompt after the other, EOS ignored (fixed lengths)."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.generation.streamers import BaseStreamer

    _threads(cpu_threads)
    transformers.utils.logging.disable_progress_bar()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()

    class FirstToken(BaseStreamer):
        def __init__(self) -> None:
            self.calls = 0
            self.first: float | None = None

        def put(self, value: Any) -> None:
            self.calls += 1
            if self.calls == 2 and self.first is None:  # call 1 is the prompt
                self.first = time.perf_counter()

        def end(self) -> None:
            pass

    ttft, tokens = [], 0
    with torch.inference_mode():  # warm-up, as the engine gets before READY
        model.generate(tokenizer("Hello", return_tensors="pt").input_ids, max_new_tokens=2, do_sample=False,
                       pad_token_id=tokenizer.pad_token_id)
    start = time.perf_counter()
    with torch.inference_mode():
        for prompt in prompts:
            ids = tokenizer(prompt, return_tensors="pt").input_ids
            streamer = FirstToken()
            began = time.perf_counter()
            out = model.generate(ids, max_new_tokens=max_tokens, min_new_tokens=max_tokens, do_sample=False,
                                 streamer=streamer, pad_token_id=tokenizer.pad_token_id)
            tokens += out.shape[1] - ids.shape[1]
            ttft.append(((streamer.first or time.perf_counter()) - began) * 1000)
    return BaselineResult("transformers.generate", 1, len(prompts), tokens, time.perf_counter() - start, ttft)


def engine_baseline(
    model_dir: str | Path,
    prompts: list[str],
    max_tokens: int = 64,
    *,
    concurrency: int = 8,
    cpu_threads: int | None = 1,
) -> BaselineResult:
    """Our continuous-batching engine in-process, `concurrency` requests in flight at a time."""
    return run_like_the_server(
        _engine_run(Path(model_dir), prompts, max_tokens, concurrency, cpu_threads)
    )


def run_like_the_server(coro: Any) -> Any:
    """Run `coro` on the event loop `openinfer serve` uses (uvloop when installed): the engine
    thread hands every step to that loop, so its wake-ups are part of what is measured."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


async def _engine_run(model_dir: Path, prompts: list[str], max_tokens: int, concurrency: int,
                      cpu_threads: int | None) -> BaselineResult:
    import numpy as np

    from ...core.requests.responses import StreamSender
    from ...core.types import InferRequest, Tensor
    from . import hf_model
    from .engine import GenerationEngine, Group
    from .interface import parse_generate
    from .model_files import ModelFiles
    from .sampling import parse_sampling

    files = ModelFiles(str(model_dir), str(model_dir), {"model": str(model_dir), "cpu_threads": cpu_threads or 1})
    lm = hf_model.load(files, "baseline")
    hf_model.warm_up(lm)
    engine = GenerationEngine("baseline", lm, asyncio.get_running_loop(), None, max_num_seqs=max(concurrency, 1))
    engine.start()
    params = {"max_tokens": max_tokens, "temperature": 0, "ignore_eos": True}

    async def one(prompt: str) -> tuple[int, float]:
        request = InferRequest("baseline", inputs=[
            Tensor("text_input", "BYTES", (1,), np.array([prompt.encode()], dtype=object)),
            Tensor("stream", "BOOL", (1,), np.array([True])),
            Tensor("sampling_parameters", "BYTES", (1,), np.array([json.dumps(params).encode()], dtype=object)),
            Tensor("return_num_output_tokens", "BOOL", (1,), np.array([True])),
        ])
        inputs = parse_generate(request)
        sender = StreamSender(request)
        began = time.perf_counter()
        engine.submit(Group("", inputs, parse_sampling(params), sender, None))
        first, count = None, 0
        async for response in sender:  # a response may carry several tokens when the loop lags
            first = first or time.perf_counter()
            for t in response.outputs:
                if t.name == "num_output_tokens":
                    assert t.data is not None
                    count += int(t.data.sum())
        return count, ((first or time.perf_counter()) - began) * 1000

    queue = list(prompts)
    results: list[tuple[int, float]] = []

    async def worker() -> None:
        while queue:
            results.append(await one(queue.pop()))

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(max(concurrency, 1))))
    seconds = time.perf_counter() - start
    await engine.stop()
    return BaselineResult("engine in-process", concurrency, len(prompts), sum(c for c, _ in results), seconds,
                          [t for _, t in results])


def main() -> None:
    parser = argparse.ArgumentParser(description="in-process LLM baselines")
    parser.add_argument("--model", required=True, help="a local Hugging Face causal-LM directory")
    parser.add_argument("--requests", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--cpu-threads", type=int, default=1)
    args = parser.parse_args()
    prompts = [f"Request {i}: tell me a story about a cat." for i in range(args.requests)]
    runs: list[tuple[Callable[..., BaselineResult], dict[str, Any]]] = (
        [(transformers_baseline, {})] + [(engine_baseline, {"concurrency": c}) for c in (1, 8)]
    )
    # each in a fresh process: a model left over from an earlier run skews the next one
    context = multiprocessing.get_context("spawn")
    for function, extra in runs:
        with ProcessPoolExecutor(1, mp_context=context) as pool:
            row = pool.submit(function, args.model, prompts, args.max_tokens, cpu_threads=args.cpu_threads,
                              **extra).result()
        print(json.dumps(row.as_dict()))


if __name__ == "__main__":
    main()

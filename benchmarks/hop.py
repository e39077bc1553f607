"""What the crossing to a Python model's worker process costs, without frontends or a client.

The example identity model is served by an `InferenceServer` in this process, once in the default
mode (a worker process per instance) and once `in_process`, and called through
`InferenceServer.infer` by CONCURRENCY tasks. The CPU of this process and of its workers per
request, in both modes, is what the hop costs on top of the model: no frontend, no load generator
and no network stack, whose own costs (and their noise on a shared machine) would swamp it.
Modes alternate round by round; the table keeps each cell's lowest CPU per request.

    python -m benchmarks.hop [--concurrency 1,16] [--sizes 16,65536] [--rounds 3] [--seconds 2] [--no-batching]

`--no-batching` serves the model without its dynamic batcher at every concurrency, as the grid
without batching of `make bench` does: every request then crosses alone.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from .proc_cpu import child_pids, tree_cpu_seconds

ROOT = Path(__file__).resolve().parents[1]
MODEL = "identity_fp32"


def _repository(folder: Path, mode: str, batching: bool) -> Path:
    repo = folder / f"{mode}_{int(batching)}"
    shutil.copytree(ROOT / "examples" / "model_repository" / MODEL, repo / MODEL)
    config = repo / MODEL / "config.pbtxt"
    text = config.read_text()
    if not batching:
        text = text.replace("dynamic_batching { }", "")
    if mode == "in_process":
        text += '\nparameters { key: "execution_mode" value { string_value: "in_process" } }\n'
    config.write_text(text)
    return repo


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _level(repo: Path, concurrency: int, size: int, seconds: float) -> dict[str, float]:
    from openinfer.backends.registry import BackendRegistry
    from openinfer.core.server import InferenceServer, ServerOptions
    from openinfer.core.types import InferRequest, Tensor

    me = os.getpid()
    others = child_pids(me)  # processes started before this level (a test runner's) are not its workers
    server = InferenceServer(ServerOptions([repo]), BackendRegistry())
    await server.start()
    values = np.random.default_rng(size).random((1, size), dtype=np.float32)
    done, stop = 0, False

    async def client() -> None:
        nonlocal done
        while not stop:
            data = values.copy()  # each request its own buffer, as from a network client
            request = InferRequest(model_name=MODEL, inputs=[Tensor("INPUT0", "FP32", (1, size), data)])
            response = await server.infer(request)
            if response.error is not None:
                raise RuntimeError(response.error.message)
            done += 1
            await asyncio.sleep(0)  # an in-process answer never suspends: let the others run

    tasks = [asyncio.ensure_future(client()) for _ in range(concurrency)]
    try:
        await asyncio.sleep(0.5)
        n0, own0, workers0, t0 = done, _own_cpu(), tree_cpu_seconds(me, False, others), time.monotonic()
        await asyncio.sleep(seconds)
        n1, own1, workers1, t1 = done, _own_cpu(), tree_cpu_seconds(me, False, others), time.monotonic()
    finally:
        stop = True
        await asyncio.gather(*tasks, return_exceptions=True)
        await server.stop()
    n = max(n1 - n0, 1)
    return {"rate": n / (t1 - t0), "server_us": (own1 - own0) / n * 1e6,
            "worker_us": (workers1 - workers0) / n * 1e6}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.hop", description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", default="1,16")
    parser.add_argument("--sizes", default="16,65536", help="FP32 elements per request ([1,N])")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--no-batching", action="store_true", help="no dynamic batcher at any concurrency")
    ns = parser.parse_args(argv)
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    cells: dict[tuple, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(ns.rounds):
            for concurrency in (int(c) for c in ns.concurrency.split(",")):
                # at concurrency 1 every batch holds one request anyway
                batching = concurrency > 1 and not ns.no_batching
                for size in (int(s) for s in ns.sizes.split(",")):
                    for mode in ("default", "in_process"):
                        repo = Path(tmp) / f"r{len(cells)}_{time.monotonic_ns()}"
                        result = asyncio.run(_level(_repository(repo, mode, batching), concurrency, size, ns.seconds))
                        key = (concurrency, size, mode)
                        best = cells.get(key)
                        if best is None or result["server_us"] + result["worker_us"] < best["server_us"] + best["worker_us"]:
                            cells[key] = result
    print("| conc. | shape | mode | infer/s | server µs/req | worker µs/req | total µs/req | hop µs/req |")
    print("|---:|---|---|---:|---:|---:|---:|---:|")
    for (concurrency, size, mode), r in sorted(cells.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] != "default")):
        total = r["server_us"] + r["worker_us"]
        base = cells.get((concurrency, size, "in_process"))
        hop = "" if mode != "default" or base is None else f"{total - base['server_us'] - base['worker_us']:.0f}"
        print(f"| {concurrency} | [1,{size}] | {mode} | {r['rate']:,.0f} | {r['server_us']:.0f} "
              f"| {r['worker_us']:.0f} | {total:.0f} | {hop} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

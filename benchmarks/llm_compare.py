"""openinfer against `transformers serve --continuous-batching`, measured by both load generators
(benchmarks/llm_load.py), at concurrency 1, 4 and 8.

Every round measures each (concurrency, server, generator) cell once, servers and generators
taking turns within a level so that drift on the shared machine hits all alike, and each cell
keeps its best round (the highest output tokens/s; noise only ever slows a run down). Around each
cell the server's process tree is read from /proc (benchmarks/proc_cpu.py): its CPU seconds, charged
per output token generated meanwhile (warm-up requests included, since they ran in the window),
and its peak resident memory.

A peer or a generator that cannot run leaves its cells out with the reason ("not measured: ..."),
and a cell that fails in every round says why; neither fails the bench.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import Any

from .llm_load import GENERATORS, Aiperf, Load, aiperf, openinfer_bench, prepare_aiperf
from .llm_servers import LlmServer, transformers_serve
from .proc_cpu import PeakRss, tree_cpu_seconds

CONCURRENCY = (1, 4, 8)
DISAGREE = 0.10  # generators whose figures differ by more than this fraction are listed
METRICS = ("tokens_per_s", "ttft_p50_ms", "itl_p50_ms")


def requests_at(requests: int, concurrency: int) -> int:
    """Measured requests per level: `requests`, twice as many from concurrency 8 (as the
    served c=8 row), so each connection sends a few."""
    return requests * max(1, concurrency // 4)


def measure_cell(server: LlmServer, run: Callable[[], dict[str, Any]], load: Load) -> dict[str, Any]:
    """`run()`'s figures plus the server's CPU per token, its cores busy at the measured rate and
    its peak RSS. Raises RuntimeError when not every token was counted."""
    cpu0 = tree_cpu_seconds(server.pid)
    with PeakRss(server.pid) as rss:
        row = run()
    cpu_s = tree_cpu_seconds(server.pid) - cpu0
    expected = load.requests * load.max_tokens
    if row["output_tokens"] != expected:
        raise RuntimeError(f"{row['output_tokens']} output tokens counted, {expected} expected")
    generated = (load.requests + load.warmup) * load.max_tokens
    per_token_s = cpu_s / generated
    row.update({
        "server_cpu_us_per_token": round(per_token_s * 1e6, 1),
        "server_cores": round(per_token_s * row["tokens_per_s"], 2),
        "server_rss_mib": round(rss.peak / 2**20),
    })
    return row


class Comparison:
    """The cells measured so far, round by round, and the reasons for those left out."""

    def __init__(self, servers: list[LlmServer], tool: Aiperf | None, requests: int, max_tokens: int,
                 prompts: Callable[[int], list[str]], prompt_words: int,
                 concurrency: tuple[int, ...] = CONCURRENCY) -> None:
        self.servers, self.tool, self.concurrency = servers, tool, concurrency
        self.requests, self.max_tokens, self.prompts, self.prompt_words = requests, max_tokens, prompts, prompt_words
        self.runs: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
        self.failures: dict[tuple[str, str, int], str] = {}
        self.not_measured: dict[str, str] = {}

    def generators(self) -> dict[str, Callable[[LlmServer, Load], dict[str, Any]]]:
        found: dict[str, Callable[[LlmServer, Load], dict[str, Any]]] = {"openinfer-bench": openinfer_bench}
        if self.tool is not None:
            tool = self.tool
            found["aiperf"] = lambda server, load: aiperf(tool, server, load)
        return found

    def round(self, progress: Callable[[str], None] = lambda _: None) -> None:
        for concurrency in self.concurrency:
            count = requests_at(self.requests, concurrency)
            load = Load(concurrency, count, max(2, concurrency), self.max_tokens, tuple(self.prompts(count)),
                        self.prompt_words)
            for server in self.servers:
                for key, generate in self.generators().items():
                    progress(f"{server.label} c={concurrency} ({GENERATORS[key]})")
                    cell = (server.key, key, concurrency)
                    try:
                        row = measure_cell(server, partial(generate, server, load), load)
                    except (RuntimeError, OSError, ValueError, KeyError) as exc:
                        self.failures[cell] = f"{type(exc).__name__}: {exc}"[:600]
                        continue
                    self.runs.setdefault(cell, []).append(row)

    def result(self) -> dict[str, Any]:
        labels = {s.key: s.label for s in self.servers}
        cells = []
        for server in self.servers:
            for key in GENERATORS:
                for concurrency in self.concurrency:
                    cell = (server.key, key, concurrency)
                    head = {"server": server.key, "server_label": server.label, "generator": key,
                            "generator_label": GENERATORS[key], "concurrency": concurrency}
                    if self.runs.get(cell):
                        best = dict(max(self.runs[cell], key=lambda r: r["tokens_per_s"]))
                        best["runs_tokens_per_s"] = [r["tokens_per_s"] for r in self.runs[cell]]
                        cells.append({**head, **best})
                    elif cell in self.failures:
                        cells.append({**head, "error": self.failures[cell]})
        return {"cells": cells, "servers": labels, "concurrency": list(self.concurrency), "versions": _versions(),
                "not_measured": self.not_measured, "ratios": ratios(cells), "disagreements": disagreements(cells)}


def setup(stack: ExitStack, ours: LlmServer, model_dir: Path, workdir: Path, requests: int, max_tokens: int,
          prompts: Callable[[int], list[str]], prompt_words: int, *, peer: bool = True, use_aiperf: bool = True,
          install: bool = True, concurrency: tuple[int, ...] = CONCURRENCY) -> Comparison:
    """The comparison against `ours` (running): `transformers serve` started on `stack` and aiperf
    made ready where they can be, each left out with its reason where not."""
    servers, why_not = [ours], {}
    if not peer:
        why_not["transformers serve"] = "left out (--no-peer)"
    else:
        theirs, why = transformers_serve(model_dir, workdir)
        try:
            if theirs is not None:
                servers.append(stack.enter_context(theirs))
        except RuntimeError as exc:
            why = str(exc)
        if why:
            why_not["transformers serve"] = why
    tool = None
    if not use_aiperf:
        why_not["aiperf"] = "left out (--no-aiperf)"
    else:
        tool, why = prepare_aiperf(model_dir, workdir, install)
        if tool is None:
            why_not["aiperf"] = why
    comparison = Comparison(servers, tool, requests, max_tokens, prompts, prompt_words, concurrency)
    comparison.not_measured.update(why_not)
    return comparison


def _versions() -> dict[str, str]:
    """transformers' (this interpreter's, which both servers run) and the aiperf pinned for the bench."""
    from importlib.metadata import PackageNotFoundError, version

    from .peers import PEERS

    found = {"aiperf": PEERS["aiperf"][0].partition("==")[2]}
    try:
        found["transformers"] = version("transformers")
    except PackageNotFoundError:
        pass
    return found


def _index(cells: list[dict[str, Any]]) -> dict[tuple[str, str, int], dict[str, Any]]:
    return {(c["server"], c["generator"], c["concurrency"]): c for c in cells if "error" not in c}


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 3) if b else None


def ratios(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """openinfer / transformers serve, per generator and concurrency, where both were measured."""
    found = _index(cells)
    out = []
    for (server, generator, concurrency), ours in sorted(found.items(), key=lambda kv: (kv[0][1], kv[0][2])):
        theirs = found.get(("transformers", generator, concurrency))
        if server != "openinfer" or theirs is None:
            continue
        keys = (*METRICS, "ttft_p99_ms", "itl_p99_ms", "server_cpu_us_per_token", "server_rss_mib")
        out.append({"generator": generator, "concurrency": concurrency,
                    **{k: _ratio(ours[k], theirs[k]) for k in keys}})
    return out


def disagreements(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """aiperf / openinfer bench, per server and concurrency, for tokens/s, TTFT p50 and ITL p50;
    `differ` names the figures more than DISAGREE apart."""
    found = _index(cells)
    out = []
    for (server, generator, concurrency), theirs in sorted(found.items(), key=lambda kv: (kv[0][0], kv[0][2])):
        ours = found.get((server, "openinfer-bench", concurrency))
        if generator != "aiperf" or ours is None:
            continue
        row = {k: _ratio(theirs[k], ours[k]) for k in METRICS}
        differ = [k for k, r in row.items() if r is not None and abs(r - 1) > DISAGREE]
        out.append({"server": server, "concurrency": concurrency, **row, "differ": differ})
    return out

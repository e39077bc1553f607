"""Runs the comparison matrix: servers × protocol × shape × concurrency, then writes RESULTS.md."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from openinfer.bench.cli import run_v2
from openinfer.bench.control import ControlError
from openinfer.bench.options import Options
from openinfer.bench.progress import RunProgress
from openinfer.bench.runner import RunError

from . import results, servers
from .proc_cpu import measured
from .peers import ensure_wrk

HERE = Path(__file__).resolve().parent


def _csv(text: str, conv: type = int) -> list[Any]:
    return [conv(x) for x in text.split(",") if x.strip()]


def write_data(size: int) -> tuple[Path, Path]:
    """A perf_analyzer data file (with validation_data) and the same request as a wrk body."""
    servers.RESULTS.mkdir(parents=True, exist_ok=True)
    values = np.random.default_rng(size).random(size, dtype=np.float32)
    data = servers.RESULTS / f"data_{size}.json"
    data.write_bytes(orjson.dumps({
        "data": [{"INPUT0": {"content": values, "shape": [size]}}],
        "validation_data": [{"OUTPUT0": {"content": values, "shape": [1, size]}}],
    }, option=orjson.OPT_SERIALIZE_NUMPY))
    body = servers.RESULTS / f"body_{size}.json"
    body.write_bytes(orjson.dumps({
        "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, size], "data": values}],
        "outputs": [{"name": "OUTPUT0"}],
    }, option=orjson.OPT_SERIALIZE_NUMPY))
    return data, body


def measure(server: servers.Server, proto: str, size: int, conc: int, data: Path,
            ns: argparse.Namespace) -> dict[str, Any]:
    opts = Options(
        model=servers.MODEL, url=server.url(proto), protocol="http" if proto == servers.BINARY else proto,
        binary=proto == servers.BINARY,
        shapes={"INPUT0": [size]}, input_data=str(data), concurrency=[conc],
        measurement_interval_ms=ns.interval_ms, max_trials=ns.max_trials,
        stability_percentage=ns.stability, warmup_ms=ns.warmup_ms,
        validate_every=1 if size <= 4096 else ns.validate_every_large,
    )
    doc = run_v2(opts)
    level = doc["levels"][0]
    srv = level.get("server") or {}
    return {
        "throughput": level["throughput"],
        "p50_ms": level["latency_us"]["p50"] / 1000, "p99_ms": level["latency_us"]["p99"] / 1000,
        "completed": level["completed"], "server_count": srv.get("success_count"),
        "client_cpu": level["client"]["cpu_percent"], "stable": level["stable"],
        "driver": "openinfer bench",
    }


def measure_wrk(wrk: str, server: servers.Server, size: int, conc: int, body: Path,
                ns: argparse.Namespace) -> dict[str, Any]:
    from .wrk import run

    r = run(wrk, server.url("http"), servers.MODEL, body, conc, ns.interval_ms / 1000 * 3,
            warmup_s=ns.warmup_ms / 1000)
    if r["errors"]:
        raise RunError(f"wrk: {r['errors']} failed or invalid responses")
    return {"throughput": r["throughput"], "p50_ms": r["latency_us"]["p50"] / 1000,
            "p99_ms": r["latency_us"]["p99"] / 1000, "completed": r["completed"],
            "server_count": None, "client_cpu": r["client"]["cpu_percent"], "stable": True,
            "driver": "wrk"}


def best_of_rounds(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One cell per server and point: the round with the highest throughput (errors lose)."""
    best: dict[tuple[Any, ...], dict[str, Any]] = {}
    for c in cells:
        key = (c["server"], c["protocol"], c["size"], c["concurrency"])
        old = best.get(key)
        if old is None or (old.get("error") and not c.get("error")) or (
            not c.get("error") and c["throughput"] > old.get("throughput", 0)
        ):
            best[key] = c
    return list(best.values())


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    p.add_argument("--servers", default=",".join(servers.ALL),
                   help=f"comma-separated subset of {','.join(servers.ALL)}")
    p.add_argument("--protocols", default="http,grpc")
    p.add_argument("--sizes", default="16,65536", help="FP32 elements per request ([1,N])")
    p.add_argument("--concurrency", default="1,16")
    p.add_argument("--binary-sizes", default="65536",
                   help="sizes of the HTTP cells with binary tensors (empty: none); servers "
                        "without the binary data extension sit them out")
    p.add_argument("--interval-ms", type=int, default=2000)
    p.add_argument("--max-trials", type=int, default=4)
    p.add_argument("--stability", type=float, default=15.0)
    p.add_argument("--warmup-ms", type=int, default=1000)
    p.add_argument("--validate-every-large", type=int, default=4,
                   help="check values of one large response in N (status always checked)")
    p.add_argument("--order", choices=["interleaved", "server"], default="interleaved",
                   help="interleaved: all servers up, each point measured on each in turn")
    p.add_argument("--rounds", type=int, default=2,
                   help="measure the whole grid this many times and keep each cell's best")
    p.add_argument("--tune-malloc", action="store_true",
                   help="raise glibc's mmap/trim thresholds for every server, not only the "
                        "ceilings")
    p.add_argument("--http-driver", choices=["openinfer", "wrk"], default="openinfer")
    p.add_argument("--client-cost", action=argparse.BooleanOptionalAction, default=True,
                   help="also measure what each HTTP client costs per request")
    p.add_argument("--no-install", action="store_true", help="skip peers not yet installed")
    p.add_argument("--out", default=str(HERE / "RESULTS.md"))
    p.add_argument("--llm", action=argparse.BooleanOptionalAction, default=True,
                   help="also the LLM row (bench/llm.py): the OpenAI endpoint against in-process")
    p.add_argument("--quick", action="store_true", help="short windows: a smoke run")
    p.add_argument("--charts", action=argparse.BooleanOptionalAction, default=True,
                   help="draw bench/charts/*.svg (matplotlib, the plot extra) and embed them in RESULTS.md")
    p.add_argument("--onnx-peers", action=argparse.BooleanOptionalAction, default=True,
                   help="then the ONNX comparison (bench/onnx_peers.py), under the same progress line")
    ns = p.parse_args(argv)
    if ns.quick:
        ns.interval_ms, ns.max_trials, ns.warmup_ms = 1000, 3, 300
    return ns


def main(argv: list[str]) -> int:
    ns = parse(argv)
    protocols, sizes, concs = _csv(ns.protocols, str), _csv(ns.sizes), _csv(ns.concurrency)
    load_at_start = os.getloadavg()[0]
    binary_sizes = _csv(ns.binary_sizes)
    files = {size: write_data(size) for size in {*sizes, *binary_sizes}}
    wrk = None
    if ns.http_driver == "wrk":
        wrk, why = ensure_wrk(not ns.no_install)
        if wrk is None:
            print(f"{why}; driving HTTP with openinfer bench instead", file=sys.stderr)
    cells: list[dict[str, Any]] = []
    skipped: dict[str, str] = {}
    started: list[servers.Server] = []

    def start(key: str) -> servers.Server | None:
        server = servers.make(key, install=not ns.no_install, tune_malloc=ns.tune_malloc)
        if not server.skip:
            print(f"== starting {server.label}", file=sys.stderr)
            try:
                server.start()
                started.append(server)
                return server
            except RuntimeError as exc:
                server.skip = str(exc)
        skipped[server.label] = server.skip
        print(f"skipping {server.label}: {server.skip}", file=sys.stderr)
        return None

    def cell(server: servers.Server, proto: str, size: int, conc: int) -> None:
        run.begin(f"{server.label} {proto} [1,{size}] c={conc}")
        c: dict[str, Any] = {"server": server.key, "label": server.label, "protocol": proto,
                             "size": size, "concurrency": conc}
        try:
            pid = server.proc.pid if server.proc is not None else None
            if wrk and proto == "http":  # wrk sends JSON only
                c.update(measured(pid, lambda: measure_wrk(wrk, server, size, conc, files[size][1], ns)))
            else:
                c.update(measured(pid, lambda: measure(server, proto, size, conc, files[size][0], ns)))
        except (RunError, ControlError, OSError) as exc:
            c["error"] = str(exc)
            print(f"\n   failed: {exc}", file=sys.stderr)
        cells.append(c)
        run.step_done()

    grid = [(p, size, conc) for p in protocols for size in sizes for conc in concs]
    grid += [(servers.BINARY, size, conc) for size in binary_sizes for conc in concs]
    keys = _csv(ns.servers, str)
    steps = ns.rounds * sum(1 for k in keys for proto, _, _ in grid if _speaks(k, proto))
    run = RunProgress(steps + int(ns.llm) + (_onnx_steps() if ns.onnx_peers else 0)).__enter__()
    try:
        if ns.order == "server":  # one server up at a time
            for key in keys:
                server = start(key)
                if server is None:
                    continue
                for _ in range(ns.rounds):
                    for proto, size, conc in grid:
                        if server.speaks(proto):
                            cell(server, proto, size, conc)
                server.stop()
        else:  # all up, every cell measured on each server in turn: drift hits all alike
            ups = [s for s in (start(k) for k in keys) if s is not None]
            for _ in range(ns.rounds):
                for proto, size, conc in grid:
                    for server in ups:
                        if server.speaks(proto):
                            cell(server, proto, size, conc)
    finally:
        for server in started:
            server.stop()
    cells = best_of_rounds(cells)
    order_note = ("all servers up, each point measured on every server in turn"
                  if ns.order == "interleaved" else "one server up at a time")
    if ns.rounds > 1:
        order_note += f", best of {ns.rounds} rounds per cell"
    settings = {"malloc_note": "every server" if ns.tune_malloc else "the ceilings only",
                "order_note": order_note, "load_at_start": load_at_start,
                "interval_ms": ns.interval_ms, "max_trials": ns.max_trials,
                "stability": ns.stability,
                "validation": f"every response up to [1,4096], one in "
                              f"{ns.validate_every_large} above; status always"}
    if ns.client_cost:
        from .client_cost import measure_all

        settings["client_cost"] = measure_all(install=not ns.no_install)
    (servers.RESULTS / "latest.json").write_bytes(
        orjson.dumps({"cells": cells, "skipped": skipped, "settings": settings},
                     option=orjson.OPT_INDENT_2))
    text = results.render(cells, skipped, settings)
    if ns.llm:
        from . import llm

        run.begin("LLM row (tiny Llama, OpenAI endpoint)")
        text += "\n" + llm.section(quick=ns.quick)
        run.step_done()
    if ns.charts:
        from . import charts

        llm = charts.llm_runs() if ns.llm else {}
        text = charts.embed(text, charts.draw(cells, llm, llm_caption=charts.llm_note() if llm else ""))
    Path(ns.out).write_text(text)
    if Path(ns.out).resolve() == (HERE / "RESULTS.md").resolve():
        from . import readme

        readme.update(text)  # README's performance section follows the committed results
    status = 0 if cells and not any(c.get("error") for c in cells) else 1
    if ns.onnx_peers:
        from . import onnx_peers

        status |= onnx_peers.main(["--quick"] * ns.quick + ["--no-install"] * ns.no_install)
    run.__exit__()
    print(text)
    return status


def _speaks(key: str, protocol: str) -> bool:
    """Whether a server key runs cells of `protocol`, for counting the run's steps before any
    server starts."""
    if protocol == servers.BINARY:
        return key in ("openinfer", "openinfer_inproc", "kserve")
    return protocol in {"asgi_echo": ("http",), "grpc_echo": ("grpc",)}.get(key, ("http", "grpc"))


def _onnx_steps() -> int:
    """The ONNX comparison's levels, so the run's time left counts them from the start."""
    from . import onnx_peers

    ns = onnx_peers.parse([])
    return (len(ns.servers.split(",")) * len(onnx_peers.MODELS) * len(ns.protocols.split(","))
            * len(ns.concurrency.split(",")))

"""Runs the comparison: each grid (one model configuration for all its servers) on each core
setting, servers × protocol × shape × concurrency, then writes RESULTS.md."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from openinfer.bench.cli import run_v2
from openinfer.bench.control import ControlError
from openinfer.bench.options import Options
from openinfer.bench.progress import RunProgress
from openinfer.bench.runner import RunError

from . import grids, results, servers
from .grids import BINARY, Phase
from .peers import ensure_wrk
from .proc_cpu import measured

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
    # Always [1,N] on the wire; `--shape` leaves the batch dimension out where the model has one.
    shape = [size] if server.batch_dim else [1, size]
    opts = Options(
        model=servers.MODEL, url=server.url(proto), protocol="http" if proto == BINARY else proto,
        binary=proto == BINARY,
        shapes={"INPUT0": shape}, input_data=str(data), concurrency=[conc],
        measurement_interval_ms=ns.interval_ms, max_trials=ns.max_trials,
        stability_percentage=ns.stability, warmup_ms=ns.warmup_ms,
        validate_every=1 if size <= 4096 else ns.validate_every_large,
    )
    doc = run_v2(opts)
    level = doc["levels"][0]
    if not level["throughput"]:
        raise RunError(f"no throughput ({level['completed']} requests completed)")
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
        key = (c.get("grid"), c.get("cores"), c["server"], c["protocol"], c["size"], c["concurrency"])
        old = best.get(key)
        if old is None or (old.get("error") and not c.get("error")) or (
            not c.get("error") and c["throughput"] > old.get("throughput", 0)
        ):
            best[key] = c
    return list(best.values())


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    p.add_argument("--servers", default=",".join(servers.ALL),
                   help=f"comma-separated subset of {','.join(servers.ALL)}")
    p.add_argument("--grids", default=",".join(grids.GRIDS),
                   help="plain: no batching anywhere; batching: max_batch_size 8 with dynamic "
                        "batching (Triton and openinfer)")
    p.add_argument("--cores", default="1,2",
                   help="server core settings: 1 = the server on one core, the load generator on "
                        "the others; 2 = the server on two (shared with the generator on a 2-core machine)")
    p.add_argument("--protocols", default="http,grpc")
    p.add_argument("--sizes", default="16,65536", help="FP32 elements per request ([1,N])")
    p.add_argument("--concurrency", default="1,16")
    p.add_argument("--binary-sizes", default="16,65536",
                   help="sizes of the HTTP cells with binary tensors (empty: none); servers "
                        "without the binary data extension sit them out")
    p.add_argument("--interval-ms", type=int, default=2000)
    p.add_argument("--max-trials", type=int, default=4)
    p.add_argument("--stability", type=float, default=15.0)
    p.add_argument("--warmup-ms", type=int, default=1000)
    p.add_argument("--validate-every-large", type=int, default=4,
                   help="check values of one large response in N (status always checked)")
    p.add_argument("--order", choices=["interleaved", "server"], default="interleaved",
                   help="interleaved: all servers of a grid up, each point measured on each in turn")
    p.add_argument("--rounds", type=int, default=2,
                   help="measure each grid this many times and keep each cell's best")
    p.add_argument("--tune-malloc", action="store_true",
                   help="raise glibc's mmap/trim thresholds for every server, not only the "
                        "ceilings")
    p.add_argument("--http-driver", choices=["openinfer", "wrk"], default="openinfer")
    p.add_argument("--client-cost", action=argparse.BooleanOptionalAction, default=True,
                   help="also measure what each HTTP client costs per request")
    p.add_argument("--no-install", action="store_true", help="skip peers not yet installed")
    p.add_argument("--out", default=None,
                   help="where the results go (default: benchmarks/RESULTS.md, which also updates the "
                        "README; with --quick benchmarks/results/RESULTS.quick.md)")
    p.add_argument("--llm", action=argparse.BooleanOptionalAction, default=True,
                   help="also the LLM row (benchmarks/llm.py): the OpenAI endpoint against in-process")
    p.add_argument("--quick", action="store_true",
                   help="short windows, one round: a smoke run, labelled as such")
    p.add_argument("--charts", action=argparse.BooleanOptionalAction, default=True,
                   help="draw benchmarks/charts/*.svg (matplotlib, the plot extra) and embed them in RESULTS.md")
    p.add_argument("--onnx-peers", action=argparse.BooleanOptionalAction, default=True,
                   help="then the ONNX comparison (benchmarks/onnx_peers.py), under the same progress line")
    ns = p.parse_args(argv)
    unknown = {*_csv(ns.grids, str)} - set(grids.GRIDS)
    if unknown:
        p.error(f"unknown grid(s) {', '.join(sorted(unknown))}; choose from {', '.join(grids.GRIDS)}")
    if ns.quick:
        ns.interval_ms, ns.max_trials, ns.warmup_ms, ns.rounds = 1000, 3, 300, 1
    if ns.out is None:
        ns.out = str(servers.RESULTS / "RESULTS.quick.md" if ns.quick else HERE / "RESULTS.md")
    return ns


@contextmanager
def client_on(cpus: tuple[int, ...]) -> Iterator[None]:
    """The load generator (this process and the workers it spawns) on `cpus` meanwhile."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


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
    phases = grids.plan(_csv(ns.grids, str), _csv(ns.cores), _csv(ns.servers, str),
                        grids.points(protocols, sizes, binary_sizes, concs))

    def start(key: str, phase: Phase) -> servers.Server | None:
        server = servers.make(key, phase.grid, phase.cores.server, install=not ns.no_install,
                              tune_malloc=ns.tune_malloc)
        if not server.skip:
            print(f"== starting {server.label} ({phase.grid.key}, {phase.cores.count} core(s))",
                  file=sys.stderr)
            try:
                server.start()
                started.append(server)
                return server
            except RuntimeError as exc:
                server.skip = str(exc)
        skipped[f"{server.label} ({phase.grid.key}, {phase.cores.count} core(s))"] = server.skip
        print(f"skipping {server.label}: {server.skip}", file=sys.stderr)
        return None

    def cell(phase: Phase, server: servers.Server, proto: str, size: int, conc: int) -> None:
        run.begin(f"{phase.grid.key} {phase.cores.count}c {server.label} {proto} [1,{size}] c={conc}")
        c: dict[str, Any] = {"grid": phase.grid.key, "cores": phase.cores.count,
                             "server": server.key, "label": server.label, "protocol": proto,
                             "size": size, "concurrency": conc}
        try:
            if not server.alive():  # it died in an earlier cell: the rest of the grid still runs
                c["restarted"] = server.restart()
            pid = server.proc.pid if server.proc is not None else None
            if wrk and proto == "http":  # wrk sends JSON only
                c.update(measured(pid, lambda: measure_wrk(wrk, server, size, conc, files[size][1], ns)))
            else:
                c.update(measured(pid, lambda: measure(server, proto, size, conc, files[size][0], ns)))
            if not server.alive():
                raise RunError(f"the server exited during the level; see {server.log}")
        except (RunError, ControlError, OSError, ValueError, RuntimeError) as exc:
            c["error"] = str(exc)
            print(f"\n   failed: {exc}", file=sys.stderr)
        cells.append(c)
        run.step_done()

    def measure_phase(phase: Phase, ups: list[servers.Server]) -> None:
        with client_on(phase.cores.client):
            for _ in range(ns.rounds):
                for proto, size, conc in phase.points:
                    for server in ups:
                        if server.speaks(proto):
                            cell(phase, server, proto, size, conc)

    steps = ns.rounds * sum(phase.cells() for phase in phases)
    run = RunProgress(steps + int(ns.llm) + (_onnx_steps() if ns.onnx_peers else 0)).__enter__()
    try:
        for phase in phases:
            if ns.order == "server":  # one server up at a time
                for key in phase.servers:
                    server = start(key, phase)
                    if server is not None:
                        measure_phase(phase, [server])
                        server.stop()
            else:  # all up, every cell measured on each server in turn: drift hits all alike
                ups = [s for s in (start(k, phase) for k in phase.servers) if s is not None]
                measure_phase(phase, ups)
                for server in ups:
                    server.stop()
    finally:
        for server in started:
            server.stop()
    cells = best_of_rounds(cells)
    order_note = ("all servers of a grid up, each point measured on every server in turn"
                  if ns.order == "interleaved" else "one server up at a time")
    if ns.rounds > 1:
        order_note += f", best of {ns.rounds} rounds per cell"
    settings = {"malloc_note": "every server" if ns.tune_malloc else "the ceilings only",
                "order_note": order_note, "load_at_start": load_at_start,
                "interval_ms": ns.interval_ms, "max_trials": ns.max_trials,
                "stability": ns.stability, "quick": ns.quick,
                "grids": {p.grid.key: p.grid.title for p in phases},
                "cores": {p.cores.count: p.cores.note for p in phases},
                "validation": f"every response up to [1,4096], one in "
                              f"{ns.validate_every_large} above; status always"}
    if ns.client_cost:
        from .client_cost import measure_all

        settings["client_cost"] = measure_all(install=not ns.no_install)
    (servers.RESULTS / ("latest.quick.json" if ns.quick else "latest.json")).write_bytes(
        orjson.dumps({"cells": cells, "skipped": skipped, "settings": settings},
                     option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS))
    text = results.render(cells, skipped, settings)
    if ns.llm:
        from . import llm

        run.begin("LLM row (tiny Llama, OpenAI endpoint)")
        text += "\n" + llm.section(quick=ns.quick, install=not ns.no_install)
        run.step_done()
    if ns.charts:
        from . import charts

        llm = charts.llm_runs() if ns.llm else {}
        base = Path(ns.out).resolve().parent  # benchmarks/charts/ only for the committed results
        shown = charts.charted(cells)
        text = charts.embed(text, charts.draw(shown, llm, out=base / "charts", note=charts.cores_note(shown),
                                              llm_caption=charts.llm_note() if llm else ""), base=base)
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


def _onnx_steps() -> int:
    """The ONNX comparison's levels, so the run's time left counts them from the start."""
    from . import onnx_peers

    ns = onnx_peers.parse([])
    return (len(ns.servers.split(",")) * len(onnx_peers.MODELS) * len(ns.protocols.split(","))
            * len(ns.concurrency.split(",")))

"""``openinfer bench``: command-line front of the load generator.

Two forms, each with the option names its users already know:

- ``openinfer bench -m MODEL -u HOST:PORT -i http|grpc ...`` measures a KServe v2 model with
  perf_analyzer's flags;
- ``openinfer bench openai --model M --url HOST:PORT --endpoint-type chat ...`` measures an
  OpenAI-compatible endpoint with genai-perf's flags and statistics table.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import orjson

from .options import Options, parse_range


def _v2_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="openinfer bench",
        description="Measure a KServe v2 model (perf_analyzer's options). "
        "'openinfer bench openai --help' measures an OpenAI-compatible endpoint.",
    )
    a = p.add_argument
    a("-m", "--model-name", dest="model", required=True, help="model to measure")
    a("-x", "--model-version", default="", help="version (default: the server's choice)")
    a("-u", "--url", default=None, help="HOST:PORT (default localhost:8000, or :8001 for grpc)")
    a("-i", "--protocol", default="http", type=str.lower, choices=["http", "grpc"])
    a("--shape", action="append", default=[], metavar="NAME:D1,D2",
      help="shape of a variable input, batch dimension excluded (repeatable)")
    a("--input-data", default="random",
      help="'random', 'zero', or a JSON file with 'data' (and optional 'validation_data')")
    a("-b", "--batch-size", type=int, default=1)
    a("--concurrency-range", default=None, metavar="START:END:STEP")
    a("--request-rate-range", default=None, metavar="START:END:STEP")
    a("-p", "--measurement-interval", type=int, default=5000, metavar="MS")
    a("-s", "--stability-percentage", type=float, default=10.0, metavar="P")
    a("-r", "--max-trials", type=int, default=10, help="windows per level before giving up")
    a("--request-count", type=int, default=0,
      help="send exactly this many requests per level instead of timed windows")
    a("--warmup-ms", type=int, default=500, help="discarded time at the start of each level")
    a("--percentile", type=int, default=0,
      help="judge stability on this latency percentile instead of the average")
    a("--binary", action="store_true", help="HTTP: binary tensor extension instead of JSON")
    a("--shared-memory", default="none", choices=["none", "system"])
    a("--output-shared-memory-size", type=int, default=102400,
      help="bytes reserved per output whose size metadata cannot tell")
    a("--streaming", action="store_true", help="gRPC: use the ModelStreamInfer stream")
    a("--sequence-length", type=int, default=0,
      help="requests per sequence (sequence-batched models; default 20 for those)")
    a("--workers", type=int, default=0, help="load-generating processes (default: automatic)")
    a("--max-connections", type=int, default=64,
      help="connections per worker in request-rate mode")
    a("--validate-every", type=int, default=1, metavar="N",
      help="fully decode and check one response in N (status is always checked)")
    a("--timeout", type=float, default=60.0, help="seconds per request")
    a("-f", "--filename", default=None, help="write perf_analyzer-style CSV here")
    a("--json", nargs="?", const="-", default=None, metavar="FILE",
      help="write results as JSON (to stdout when no file is given)")
    a("--no-progress", action="store_true")
    a("--plot", default=None, metavar="FILE.svg",
      help="draw throughput against p50 latency per concurrency level (needs matplotlib: the plot extra)")
    return p


def _options(ns: argparse.Namespace) -> Options:
    if ns.concurrency_range and ns.request_rate_range:
        raise ValueError("use either --concurrency-range or --request-rate-range")
    if ns.streaming and ns.protocol != "grpc":
        raise ValueError("--streaming needs -i grpc")
    from .tensors import parse_shapes

    return Options(
        model=ns.model,
        url=ns.url or ("localhost:8001" if ns.protocol == "grpc" else "localhost:8000"),
        protocol=ns.protocol,
        model_version=ns.model_version,
        shapes=parse_shapes(ns.shape),
        input_data=ns.input_data,
        batch_size=ns.batch_size,
        concurrency=[int(v) for v in parse_range(ns.concurrency_range or "1")],
        request_rates=parse_range(ns.request_rate_range, integer=False)
        if ns.request_rate_range else [],
        measurement_interval_ms=ns.measurement_interval,
        stability_percentage=ns.stability_percentage,
        max_trials=max(ns.max_trials, 1),
        request_count=ns.request_count,
        warmup_ms=ns.warmup_ms,
        binary=ns.binary,
        shared_memory=ns.shared_memory,
        output_shm_size=ns.output_shared_memory_size,
        streaming=ns.streaming,
        sequence_length=ns.sequence_length,
        workers=ns.workers,
        validate_every=max(ns.validate_every, 1),
        percentile=ns.percentile,
        max_connections=ns.max_connections,
        timeout_s=ns.timeout,
    )


def run_v2(opts: Options, progress_enabled: bool = True) -> dict[str, Any]:
    """Measure every level; returns the JSON document (also used by ``make bench``)."""
    from .control import connect
    from .plan import build
    from .progress import Progress
    from .runner import Runner

    control = connect(opts.protocol, opts.url)
    try:
        info = control.model_info(opts.model, opts.model_version)
        build(opts, info)  # fail here, once, on a bad shape or data file
        progress = Progress(enabled=progress_enabled)
        runner = Runner(opts, info, control, progress)
        try:
            if opts.request_rates:
                results = [runner.run_level("request_rate", r) for r in opts.request_rates]
            else:
                results = [runner.run_level("concurrency", c) for c in opts.concurrency]
        finally:
            runner.close()
    finally:
        control.close()
    server = info.server.get("name", "")
    if info.server.get("version"):
        server += f" {info.server['version']}"
    mode = ("binary" if opts.binary else "json") if opts.protocol == "http" else "raw"
    if opts.shared_memory == "system":
        mode = "system shared memory"
    return {
        "model": opts.model,
        "version": opts.model_version,
        "protocol": opts.protocol,
        "url": opts.url,
        "server": server,
        "batch_size": opts.batch_size,
        "mode_note": mode + (", streaming" if opts.streaming else ""),
        "input_shapes": {s.name: list(s.shape) for s in info.inputs},
        "levels": [r.to_dict() for r in results],
    }


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "openai":
        from .openai.cli import main as openai_main

        return openai_main(argv[1:])
    parser = _v2_parser()
    ns = parser.parse_args(argv)
    try:
        opts = _options(ns)
    except ValueError as exc:
        parser.error(str(exc))
    from .control import ControlError
    from .report import table, to_csv
    from .runner import LevelResult, RunError

    try:
        doc = run_v2(opts, progress_enabled=not ns.no_progress)
    except (ControlError, RunError, ValueError) as exc:
        print(f"openinfer bench: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # connection refused, unreachable host, grpc channel errors
        print(f"openinfer bench: cannot reach {opts.url} ({opts.protocol}): {exc}",
              file=sys.stderr)
        return 1
    results = [LevelResult(**level) for level in doc["levels"]]
    if ns.filename:
        Path(ns.filename).write_text(to_csv(results))
    if ns.json:
        data = orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY)
        if ns.json == "-":
            sys.stdout.write(data.decode() + "\n")
        else:
            Path(ns.json).write_bytes(data)
    if ns.json != "-":
        print(table(results, doc))
    if ns.plot:
        from .plot import PlotError, points_of_levels, throughput_latency

        try:
            panel = f"{doc['model']} · {doc['protocol']} ({doc['mode_note']})"
            throughput_latency({panel: {doc["server"] or opts.url: points_of_levels(doc["levels"])}}, ns.plot)
        except PlotError as exc:
            print(f"openinfer bench: --plot: {exc}", file=sys.stderr)
            return 1
    return 0 if all(r.errors == 0 for r in results) else 1

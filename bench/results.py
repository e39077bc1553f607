"""Renders a suite's cells as ``RESULTS.md``: a summary with ratios, then every run."""

from __future__ import annotations

import os
import platform
import time
from typing import Any

CEILING = {"http": "asgi_echo", "grpc": "grpc_echo"}
PROTOCOL_NAMES = {"http": "HTTP JSON", "grpc": "gRPC", "http-binary": "HTTP binary"}
#: Row order: the protocols in the order above.
ORDER = {name: rank for rank, name in enumerate(PROTOCOL_NAMES)}


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _cell(c: dict[str, Any] | None) -> str:
    if not c:
        return "–"
    if c.get("error"):
        return "failed"
    return f"{c['throughput']:,.0f}/s · {c['p50_ms']:.2f}/{c['p99_ms']:.2f} ms"


def _ratio(a: dict[str, Any] | None, b: dict[str, Any] | None) -> str:
    if not a or not b or a.get("error") or b.get("error") or not b["throughput"]:
        return "–"
    return f"{a['throughput'] / b['throughput']:.2f}×"


def _best(by: dict, keys: tuple[str, ...], proto: str, size: int, conc: int) -> dict[str, Any] | None:
    """The faster of a server's settings in one cell; a failed run only when none succeeded."""
    runs = [r for r in (by.get((k, proto, size, conc)) for k in keys) if r]
    ok = [r for r in runs if not r.get("error")]
    if ok:
        return max(ok, key=lambda r: r["throughput"])
    return runs[0] if runs else None


def _cpu(c: dict[str, Any] | None) -> str:
    if not c or c.get("error") or c.get("server_cpu_us") is None:
        return "–"
    return f"{c['server_cpu_us']:.0f}"


def _default_mode(by: dict, keys: list) -> list[str]:
    """openinfer as most users run it (a worker process per instance, as Triton) against its
    own in_process mode and against each peer's faster setting, with the server CPU of both."""
    lines = [
        "",
        "## The default mode: a worker process per instance",
        "",
        "Ratios of openinfer's default mode to its `in_process` mode and to each peer's "
        "faster setting; server CPU per request (µs, workers included) of both openinfer modes.",
        "",
        "| Protocol | Shape | Conc. | default | in_process | default / in_process "
        "| default / MLServer | default / KServe | CPU µs/req default | CPU µs/req in_process |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for proto, size, conc in keys:
        default = by.get(("openinfer", proto, size, conc))
        if default is None:
            continue
        inproc = by.get(("openinfer_inproc", proto, size, conc))
        ml = _best(by, ("mlserver", "mlserver_pw0"), proto, size, conc)
        ks = by.get(("kserve", proto, size, conc))
        lines.append(
            f"| {PROTOCOL_NAMES[proto]} | [1,{size}] | {conc} | {_cell(default)} | {_cell(inproc)} "
            f"| {_ratio(default, inproc)} | {_ratio(default, ml)} | {_ratio(default, ks)} "
            f"| {_cpu(default)} | {_cpu(inproc)} |")
    return lines


def render(cells: list[dict[str, Any]], skipped: dict[str, str], settings: dict[str, Any]) -> str:
    by = {(c["server"], c["protocol"], c["size"], c["concurrency"]): c for c in cells}
    keys = sorted({(c["protocol"], c["size"], c["concurrency"]) for c in cells},
                  key=lambda k: (ORDER[k[0]], k[1], k[2]))
    lines = [
        "# Benchmark results",
        "",
        f"`make bench` (`python -m bench`), {time.strftime('%Y-%m-%d %H:%M %Z')}, on "
        f"{os.cpu_count()} cores of {_cpu_model()}, Python {platform.python_version()}. "
        "Every server serves the same FP32 identity model (`identity_fp32`, INPUT0 → OUTPUT0) "
        "and is driven by the same generator, `openinfer bench`, on the same machine, one "
        f"server under load at a time ({settings.get('order_note', '')}); every counted "
        "response was checked against the input "
        f"({settings.get('validation')}). Each cell: throughput · p50/p99 latency. "
        "Windows of "
        f"{settings.get('interval_ms')} ms until three agree within "
        f"{settings.get('stability')} % (at most {settings.get('max_trials')}). Load average "
        f"before the run: {settings.get('load_at_start', 0):.2f} (anything else running on "
        "the machine shows up in these figures).",
        "",
        "MLServer runs twice, with its default worker process (`parallel_workers: 1`) and with "
        "`parallel_workers: 0` (model on the event loop); the faster of the two is the one "
        "compared. openinfer runs twice in the same way: as Triton runs a Python model, in a "
        "worker process per instance (the default), and with the model's `execution_mode: "
        "in_process` parameter (the model on the event loop, marked in-proc); both are listed "
        "under every run below. The ceilings are a bare ASGI app that parses and echoes the v2 JSON with "
        "orjson under uvicorn (uvloop, httptools), and a bare grpc.aio `ModelInfer` echo: what "
        "the stack itself costs before any server logic. They run with glibc's mmap and trim "
        "thresholds raised (`MALLOC_MMAP_THRESHOLD_`, `MALLOC_TRIM_THRESHOLD_`; here: "
        f"{settings.get('malloc_note', 'the ceilings only')}), which doubles a bare gRPC echo "
        "at [1,65536]; `--tune-malloc` gives every server the same.",
        "",
        "| Protocol | Shape | Conc. | openinfer (best) | MLServer (best) | KServe | ceiling "
        "| openinfer / MLServer | openinfer / ceiling |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for proto, size, conc in keys:
        oi = _best(by, ("openinfer", "openinfer_inproc"), proto, size, conc)
        oi_text = _cell(oi) + (" (in-proc)" if oi and oi["server"] == "openinfer_inproc" else "")
        ml = _best(by, ("mlserver", "mlserver_pw0"), proto, size, conc)
        ml_text = _cell(ml) + (" (pw0)" if ml and ml["server"] == "mlserver_pw0" else "")
        ks = by.get(("kserve", proto, size, conc))
        ceil = by.get((CEILING.get(proto, ""), proto, size, conc))
        lines.append(
            f"| {PROTOCOL_NAMES[proto]} | [1,{size}] | {conc} | {oi_text} | {ml_text} | "
            f"{_cell(ks)} | {_cell(ceil)} | {_ratio(oi, ml)} | {_ratio(oi, ceil)} |")
    lines += _default_mode(by, keys)
    lines += [
        "",
        "## Every run",
        "",
        "Server CPU: what the server's processes (workers included) spent per request, read "
        "from /proc over the level.",
        "",
        "| Server | Protocol | Shape | Conc. | infer/s | p50 ms | p99 ms | requests "
        "| server count | server CPU µs/req | client CPU | notes |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for c in sorted(cells, key=lambda c: (ORDER[c["protocol"]], c["size"], c["concurrency"],
                                          c["server"])):
        if c.get("error"):
            lines.append(f"| {c['label']} | {PROTOCOL_NAMES[c['protocol']]} | [1,{c['size']}] | "
                         f"{c['concurrency']} | – | – | – | – | – | – | – | {c['error'][:120]} |")
            continue
        notes = [] if c.get("stable", True) else ["not stable"]
        if c.get("driver") == "wrk":
            notes.append("wrk")
        srv = c.get("server_count")
        lines.append(
            f"| {c['label']} | {PROTOCOL_NAMES[c['protocol']]} | [1,{c['size']}] | "
            f"{c['concurrency']} | {c['throughput']:,.0f} | {c['p50_ms']:.2f} | "
            f"{c['p99_ms']:.2f} | {c['completed']:,} | {'–' if srv is None else f'{srv:,}'} | "
            f"{_cpu(c)} | {c['client_cpu']:.0f}% | {', '.join(notes)} |")
    if skipped:
        lines += ["", "## Not measured", ""]
        lines += [f"- {k}: {why}" for k, why in skipped.items()]
    if settings.get("client_cost"):
        lines += ["", "## What the load generator costs", "",
                  "CPU per request spent by each client against the bare ASGI echo, "
                  "[1,16] JSON, 16 connections:", "",
                  "| client | requests/s | CPU µs per request |", "|---|---:|---:|"]
        lines += [f"| {r['client']} | {r['throughput']:,.0f} | {r['cpu_us']:.0f} |"
                  for r in settings["client_cost"]]
    lines += ["", "Reproduce: `make bench` (all servers) or `python -m bench --help`.", ""]
    return "\n".join(lines)

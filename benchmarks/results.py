"""Renders a suite's cells as ``RESULTS.md``: openinfer against Triton first, grid by grid,
then the other servers, then every run."""

from __future__ import annotations

import os
import platform
import time
from typing import Any

CEILING = {"http": "asgi_echo", "grpc": "grpc_echo"}
GRID_ORDER = {"plain": 0, "batching": 1}
#: A cell counts as behind Triton below this ratio (above it, within a run's usual spread).
BEHIND = 0.95
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
    r = _ratio_value(a, b)
    return "–" if r is None else f"{r:.2f}×"


def _best(by: dict, servers: tuple[str, ...], key: tuple[Any, ...]) -> dict[str, Any] | None:
    """The faster of a server's settings in one cell; a failed run only when none succeeded."""
    runs = [r for r in (by.get((s, *key)) for s in servers) if r]
    ok = [r for r in runs if not r.get("error")]
    if ok:
        return max(ok, key=lambda r: r["throughput"])
    return runs[0] if runs else None


def _cpu(c: dict[str, Any] | None) -> str:
    if not c or c.get("error") or c.get("server_cpu_us") is None:
        return "–"
    return f"{c['server_cpu_us']:.0f}"


def _ratio_value(a: dict[str, Any] | None, b: dict[str, Any] | None) -> float | None:
    if not a or not b or a.get("error") or b.get("error") or not b["throughput"]:
        return None
    return a["throughput"] / b["throughput"]


def _where(c: dict[str, Any]) -> str:
    return f"{PROTOCOL_NAMES[c['protocol']]} [1,{c['size']}] c={c['concurrency']}"


def _sections(cells: list[dict[str, Any]]) -> list[tuple[Any, Any]]:
    """(grid, cores) pairs present, the plain grid and one core first."""
    return sorted({(c.get("grid"), c.get("cores")) for c in cells},
                  key=lambda k: (GRID_ORDER.get(k[0], 9), k[1] or 0))


def _points(cells: list[dict[str, Any]]) -> list[tuple[str, int, int]]:
    return sorted({(c["protocol"], c["size"], c["concurrency"]) for c in cells},
                  key=lambda k: (ORDER[k[0]], k[1], k[2]))


def _against_triton(by: dict, cells: list[dict[str, Any]], grid: Any, cores: Any,
                    settings: dict[str, Any]) -> list[str]:
    """One grid on one core setting: both openinfer modes as ratios of Triton, with the server
    CPU per request of all three, and a plain list of the cells where openinfer is behind."""
    mine = [c for c in cells if c.get("grid") == grid and c.get("cores") == cores]
    if not any(c["server"] == "triton" for c in mine):
        return []
    title = settings.get("grids", {}).get(grid, grid)
    where = settings.get("cores", {}).get(cores, "")
    lines = [
        "",
        f"### {str(grid).capitalize()} grid, server on {cores} core(s)",
        "",
        f"Model: {title}; {where}.",
        "",
        "| Protocol | Shape | Conc. | Triton | openinfer default | openinfer in_process "
        "| default / Triton | in_process / Triton | CPU µs/req Triton | CPU µs/req default "
        "| CPU µs/req in_process |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    behind = []
    counts = {"default": [0, 0], "in_process": [0, 0]}  # behind, compared
    for proto, size, conc in _points(mine):
        key = (grid, cores, proto, size, conc)
        tr, de, ip = (by.get((s, *key)) for s in ("triton", "openinfer", "openinfer_inproc"))
        if tr is None:
            continue
        lines.append(
            f"| {PROTOCOL_NAMES[proto]} | [1,{size}] | {conc} | {_cell(tr)} | {_cell(de)} "
            f"| {_cell(ip)} | {_ratio(de, tr)} | {_ratio(ip, tr)} | {_cpu(tr)} | {_cpu(de)} "
            f"| {_cpu(ip)} |")
        ratios = (("default", _ratio_value(de, tr)), ("in_process", _ratio_value(ip, tr)))
        for mode, r in ratios:
            if r is not None:
                counts[mode][0] += r < BEHIND
                counts[mode][1] += 1
        slow = [f"{mode} {r:.2f}×" for mode, r in ratios if r is not None and r < BEHIND]
        if slow:
            behind.append(f"- {_where(tr)}: {', '.join(slow)} of Triton's throughput")
    tally = "; ".join(f"{mode} in {n} of {of}" for mode, (n, of) in counts.items() if of)
    lines += ["", f"Where openinfer is behind Triton (below {BEHIND:.2f}×; {tally} cells):" if behind
              else f"openinfer is at least {BEHIND:.2f}× of Triton's throughput in every cell "
                   "measured here.", ""]
    lines += behind
    return lines


def _peers(by: dict, cells: list[dict[str, Any]], cores: Any) -> list[str]:
    """The plain grid's other servers: openinfer's faster mode against MLServer's faster
    setting, KServe and the bare-stack ceiling."""
    mine = [c for c in cells if c.get("grid") == "plain" and c.get("cores") == cores]
    if not any(c["server"] in ("mlserver", "mlserver_pw0", "kserve", "asgi_echo", "grpc_echo")
               for c in mine):
        return []
    lines = [
        "",
        f"### Server on {cores} core(s)",
        "",
        "| Protocol | Shape | Conc. | openinfer (best) | MLServer (best) | KServe | ceiling "
        "| openinfer / MLServer | openinfer / KServe | openinfer / ceiling |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for proto, size, conc in _points(mine):
        key = ("plain", cores, proto, size, conc)
        oi = _best(by, ("openinfer", "openinfer_inproc"), key)
        oi_text = _cell(oi) + (" (in-proc)" if oi and oi["server"] == "openinfer_inproc" else "")
        ml = _best(by, ("mlserver", "mlserver_pw0"), key)
        ml_text = _cell(ml) + (" (pw0)" if ml and ml["server"] == "mlserver_pw0" else "")
        ks = by.get(("kserve", *key))
        ceil = by.get((CEILING.get(proto, ""), *key))
        lines.append(
            f"| {PROTOCOL_NAMES[proto]} | [1,{size}] | {conc} | {oi_text} | {ml_text} | "
            f"{_cell(ks)} | {_cell(ceil)} | {_ratio(oi, ml)} | {_ratio(oi, ks)} | {_ratio(oi, ceil)} |")
    return lines


def _frontend_processes(by: dict, cells: list[dict[str, Any]]) -> list[str]:
    """The plain grid's HTTP cells with the frontends in processes of their own, against the
    same mode in one process on one core and on the same cores, with Triton on those cores."""
    fp = [c for c in cells if c.get("grid") == "plain" and c["server"].endswith("_fp")]
    if not fp:
        return []
    lines = [
        "",
        "## More than one core: HTTP frontend processes",
        "",
        "`--frontend-processes N` serves KServe HTTP from N processes (here one per server core) "
        "in front of the process that holds the model and its batchers "
        "([docs/multicore.md](../docs/multicore.md)). Each row: the same mode in one process on "
        "one core, in one process on N cores, with N frontend processes on N cores, and Triton on "
        "N cores; CPU µs per request in brackets.",
        "",
        "| Mode | Protocol | Shape | Conc. | Cores | 1 process, 1 core | 1 process, N cores "
        "| N frontend processes | N frontends / 1 core | Triton, N cores |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for c in sorted(fp, key=lambda c: (c["server"], ORDER[c["protocol"]], c["size"], c["concurrency"])):
        base = c["server"].removesuffix("_fp")
        point = (c["protocol"], c["size"], c["concurrency"])
        one = by.get((base, "plain", 1, *point))
        same = by.get((base, "plain", c.get("cores"), *point))
        triton = by.get(("triton", "plain", c.get("cores"), *point))
        mode = "in_process" if "inproc" in base else "default"
        lines.append(
            f"| {mode} | {PROTOCOL_NAMES[c['protocol']]} | [1,{c['size']}] | {c['concurrency']} | {c.get('cores')} "
            f"| {_with_cpu(one)} | {_with_cpu(same)} | {_with_cpu(c)} | {_ratio(c, one)} | {_with_cpu(triton)} |")
    return lines


def _with_cpu(c: dict[str, Any] | None) -> str:
    if not c or c.get("error"):
        return _cell(c)
    return f"{c['throughput']:,.0f}/s ({_cpu(c)})"


def render(cells: list[dict[str, Any]], skipped: dict[str, str], settings: dict[str, Any]) -> str:
    by = {(c["server"], c.get("grid"), c.get("cores"), c["protocol"], c["size"], c["concurrency"]): c
          for c in cells}
    sections = _sections(cells)
    lines = ["# Benchmark results", ""]
    if settings.get("quick"):
        lines += ["**Quick run** (`--quick`: one round of short windows), a smoke test of the "
                  "bench and not the full `make bench`; its figures are rougher.", ""]
    lines += [
        f"`python -m benchmarks`, {time.strftime('%Y-%m-%d %H:%M %Z')}, on "
        f"{os.cpu_count()} cores of {_cpu_model()}, Python {platform.python_version()}. "
        "Within a grid every server serves the same FP32 identity model (`identity_fp32`, "
        "INPUT0 → OUTPUT0, requests of shape [1,N]) with the same settings, and is driven by the "
        "same generator, `openinfer bench`, on the same machine, one server under load at a time "
        f"({settings.get('order_note', '')}); every counted response was checked against the "
        f"input ({settings.get('validation')}). Each cell: throughput · p50/p99 latency. "
        f"Windows of {settings.get('interval_ms')} ms until three agree within "
        f"{settings.get('stability')} % (at most {settings.get('max_trials')}). Load average "
        f"before the run: {settings.get('load_at_start', 0):.2f} (anything else running on "
        "the machine shows up in these figures). The server is pinned to its cores with every "
        "process it starts; its CPU per request (µs) sums them all (openinfer's worker "
        "processes, Triton's Python backend stubs, MLServer's workers), read from /proc.",
        "",
        "## openinfer against Triton",
        "",
        "Triton 2.51 (the CPU build in `nvidia-pytriton` 0.7.0, Python backend) and openinfer "
        "serve one repository written by the bench: the same `config.pbtxt` and `model.py` "
        "(openinfer's `in_process` mode adds its `execution_mode` parameter to that config). "
        "openinfer runs twice: by default, as Triton runs a Python model, in a worker process per "
        "instance; with `execution_mode: in_process`, the model on the server's event loop. "
        "Ratios are throughput over Triton's in the same run; above 1 openinfer is faster.",
    ]
    for grid, cores in sections:
        lines += _against_triton(by, cells, grid, cores, settings)
    lines += _frontend_processes(by, cells)
    peers = [line for grid, cores in sections if grid == "plain" for line in _peers(by, cells, cores)]
    if peers:
        lines += [
            "",
            "## Other servers, no batching",
            "",
            "MLServer runs with its default worker process (`parallel_workers: 1`) and with "
            "`parallel_workers: 0` (model on the event loop), KServe as its docs write a custom "
            "model; none of them batches here. The faster MLServer setting and openinfer's faster "
            "mode (marked in-proc) are compared. The ceilings are a bare ASGI app that parses and "
            "echoes the v2 JSON with orjson under uvicorn (uvloop, httptools), and a bare grpc.aio "
            "`ModelInfer` echo: what the stack itself costs before any server logic. They run "
            "with glibc's mmap and trim thresholds raised (`MALLOC_MMAP_THRESHOLD_`, "
            f"`MALLOC_TRIM_THRESHOLD_`; here: {settings.get('malloc_note', 'the ceilings only')}); "
            "`--tune-malloc` gives every server the same.",
        ] + peers
    lines += [
        "",
        "## Every run",
        "",
        "| Grid | Cores | Server | Protocol | Shape | Conc. | infer/s | p50 ms | p99 ms | requests "
        "| server count | server CPU µs/req | client CPU | notes |",
        "|---|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for c in sorted(cells, key=lambda c: (GRID_ORDER.get(c.get("grid"), 9), c.get("cores") or 0,
                                          ORDER[c["protocol"]], c["size"], c["concurrency"],
                                          c["server"])):
        head = (f"| {c.get('grid', '–')} | {c.get('cores', '–')} | {c['label']} | "
                f"{PROTOCOL_NAMES[c['protocol']]} | [1,{c['size']}] | {c['concurrency']} | ")
        if c.get("error"):
            lines.append(head + f"– | – | – | – | – | – | – | {c['error'][:120]} |")
            continue
        notes = [] if c.get("stable", True) else ["not stable"]
        if c.get("restarted"):
            notes.append("server " + c["restarted"])
        if c.get("driver") == "wrk":
            notes.append("wrk")
        srv = c.get("server_count")
        lines.append(
            head + f"{c['throughput']:,.0f} | {c['p50_ms']:.2f} | {c['p99_ms']:.2f} | "
            f"{c['completed']:,} | {'–' if srv is None else f'{srv:,}'} | {_cpu(c)} | "
            f"{c['client_cpu']:.0f}% | {', '.join(notes)} |")
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
    lines += ["", "Reproduce: `make bench` (everything) or `python -m benchmarks --help` (subsets: "
              "`--servers`, `--grids`, `--cores`, `--quick`).", ""]
    return "\n".join(lines)

"""The pictures of a bench run, and their place in RESULTS.md (hence in the README).

`make bench` draws them from the run it just made. `python -m benchmarks.charts` draws them again
from the stored results (the "Every run" table of RESULTS.md and results/llm.json), for when a
full run is too slow.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from openinfer.bench.plot import PlotError, Point, latency_distributions, throughput_latency

from .results import ORDER, PROTOCOL_NAMES

HERE = Path(__file__).resolve().parent
CHARTS = HERE / "charts"
LLM_JSON = HERE / "results" / "llm.json"
START = "<!-- charts:start -->"
END = "<!-- charts:end -->"


def panels(cells: list[dict[str, Any]]) -> dict[str, dict[str, list[Point]]]:
    """Workload ("HTTP JSON [1,16]") -> server label -> its measured levels."""
    out: dict[str, dict[str, list[Point]]] = {}
    for c in sorted(cells, key=lambda c: (ORDER.get(c["protocol"], len(ORDER)), c["size"])):
        if c.get("error"):
            continue
        panel = f"{PROTOCOL_NAMES.get(c['protocol'], c['protocol'])} [1,{c['size']}]"
        point = Point(c["concurrency"], c["throughput"], c["p50_ms"], c["p99_ms"])
        out.setdefault(panel, {}).setdefault(c["label"], []).append(point)
    return out


def charted(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The cells the throughput chart shows: the grid without batching (every server in it),
    on the fewest cores measured, so each line is one server under one setting."""
    plain = [c for c in cells if c.get("grid", "plain") == "plain"]
    fewest = min((c.get("cores") or 0 for c in plain), default=0)
    return [c for c in plain if (c.get("cores") or 0) == fewest]


def cores_note(cells: list[dict[str, Any]]) -> str:
    """The chart's title suffix: on how many cores its servers ran."""
    counts = {c.get("cores") for c in cells if c.get("cores")}
    return f" (server on {counts.pop()} core(s))" if len(counts) == 1 else ""


def cells_from_markdown(text: str) -> list[dict[str, Any]]:
    """The cells of a stored RESULTS.md, read back from its "Every run" table (with or without
    its grid and cores columns)."""
    protocols = {name: key for key, name in PROTOCOL_NAMES.items()}
    body = text.split("\n## Every run", 1)[1] if "\n## Every run" in text else ""
    cells = []
    skip = 0
    for line in body.split("\n## ", 1)[0].splitlines():
        cols = [c.strip() for c in line.strip().strip("|").split("|")]
        if cols[:2] == ["Grid", "Cores"]:
            skip = 2
        head, cols = cols[:skip], cols[skip:]
        if len(cols) < 7 or cols[1] not in protocols or cols[4] in ("–", ""):
            continue
        cell = {
            "label": cols[0], "server": cols[0], "protocol": protocols[cols[1]],
            "size": int(cols[2].strip("[]").split(",")[1]), "concurrency": int(cols[3]),
            "throughput": float(cols[4].replace(",", "")), "p50_ms": float(cols[5]), "p99_ms": float(cols[6]),
        }
        if head:
            cell.update(grid=head[0], cores=int(head[1]) if head[1].isdigit() else None)
        cells.append(cell)
    return cells


def llm_runs(path: Path = LLM_JSON) -> dict[str, dict[str, list[float]]]:
    """The served LLM rows' per-request TTFT and ITL samples, then transformers serve's at the
    same concurrency levels (measured by the same generator); empty when never measured."""
    if not path.exists():
        return {}
    result = json.loads(path.read_text())
    runs = {row["name"]: row["samples"] for row in result.get("rows", []) if row.get("samples")}
    levels = {row["concurrency"] for row in result.get("rows", []) if row.get("samples")}
    for cell in result.get("peers", {}).get("cells", []):
        if (cell["server"] == "transformers" and cell["generator"] == "openinfer-bench"
                and cell["concurrency"] in levels and cell.get("samples")):
            runs[f"{cell['server_label']} c={cell['concurrency']}"] = cell["samples"]
    return runs


def llm_note(path: Path = LLM_JSON) -> str:
    """How the LLM samples were taken (rounds, load), for the picture's title."""
    if not path.exists():
        return ""
    result = json.loads(path.read_text())
    return (f" ({result.get('rounds', '?')} round(s), {result.get('max_tokens', '?')} tokens per request, "
            f"load average {result.get('load_at_start', 0):.1f} at the start)")


def draw(cells: list[dict[str, Any]], llm: dict[str, dict[str, list[float]]], out: Path = CHARTS,
         note: str = "", llm_caption: str = "") -> list[tuple[str, Path]]:
    """Writes the SVGs; returns (caption, path) of each picture drawn."""
    drawn = []
    try:
        path = throughput_latency(panels(cells), out / "throughput_latency.svg",
                                  title="No batching: throughput against p50 latency per concurrency level" + note)
        drawn.append(("Throughput against p50 latency per concurrency level and server, no batching", path))
    except PlotError as exc:
        print(f"charts: throughput/latency not drawn: {exc}", file=sys.stderr)
    try:
        path = latency_distributions(llm, out / "llm_latency.svg", title="LLM row: TTFT and ITL distributions" + llm_caption)
        drawn.append(("The LLM row's time-to-first-token and inter-token latency distributions", path))
    except PlotError as exc:
        print(f"charts: LLM distributions not drawn: {exc}", file=sys.stderr)
    return drawn


def embed(results_text: str, drawn: list[tuple[str, Path]], base: Path = HERE, caption: str = "") -> str:
    """RESULTS.md with its picture block (before "## Every run") replaced by these pictures."""
    if START in results_text:
        before, rest = results_text.split(START, 1)
        results_text = before.rstrip("\n") + "\n" + rest.split(END, 1)[1].lstrip("\n")
    if not drawn:
        return results_text
    images = "\n\n".join(f"![{caption}]({path.relative_to(base).as_posix()})" for caption, path in drawn)
    block = f"{START}\n{images}\n" + (f"\n{caption}\n" if caption else "") + f"{END}\n"
    marker = "\n## Every run"
    if marker in results_text:
        head, tail = results_text.split(marker, 1)
        return f"{head.rstrip()}\n\n{block}{marker}{tail}"
    return results_text.rstrip() + "\n\n" + block


def main(argv: list[str] | None = None) -> int:
    """Redraw from the stored results and update RESULTS.md and the README's performance section."""
    from . import readme

    results = HERE / "RESULTS.md"
    text = results.read_text()
    cells = charted(cells_from_markdown(text))
    drawn = draw(cells, llm_runs(), note=cores_note(cells), llm_caption=llm_note())
    caption = ("Drawn by `python -m benchmarks.charts` from the stored results: the throughput chart from the "
               "table of this run, the LLM distributions from the latest `benchmarks/results/llm.json` (its title "
               "says how it was measured).")
    text = embed(text, drawn, caption=caption)
    results.write_text(text)
    readme.update(text)
    for _, path in drawn:
        print(f"wrote {path}")
    return 0 if drawn else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

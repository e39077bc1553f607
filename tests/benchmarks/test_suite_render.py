"""``make bench``'s RESULTS.md: openinfer against Triton first, per grid and core setting, then
the other servers of the grid without batching, then every run."""

from __future__ import annotations

from typing import Any

from benchmarks import charts, readme
from benchmarks.results import render

SETTINGS: dict[str, Any] = {"interval_ms": 2000, "stability": 15, "max_trials": 4,
                            "grids": {"plain": "no batching", "batching": "dynamic batching"},
                            "cores": {1: "server on CPU 0", 2: "server on CPU 0,1"}}


def _cell(server: str, tput: float, proto: str = "http", grid: str = "plain", cores: int = 1,
          cpu: float | None = None) -> dict[str, Any]:
    cell: dict[str, Any] = {
        "grid": grid, "cores": cores, "server": server, "label": server, "protocol": proto,
        "size": 16, "concurrency": 16, "throughput": tput, "p50_ms": 1.0, "p99_ms": 2.0,
        "completed": 100, "server_count": 100, "client_cpu": 10.0, "stable": True}
    if cpu is not None:
        cell["server_cpu_us"] = cpu
    return cell


def _section(text: str, start: str, end: str = "\n## ") -> str:
    return text.split(start, 1)[1].split(end, 1)[0]


def test_triton_comparison_leads_with_ratios_cpu_and_where_behind() -> None:
    cells = [_cell("triton", 4000, "grpc", cpu=100.0), _cell("openinfer", 3000, "grpc", cpu=150.0),
             _cell("openinfer_inproc", 4400, "grpc", cpu=90.0), _cell("mlserver", 500, "grpc")]
    text = render(cells, {}, SETTINGS)
    assert text.index("## openinfer against Triton") < text.index("## Other servers")
    section = _section(text, "### Plain grid, server on 1 core(s)", "\n### ")
    row = next(line for line in section.splitlines() if line.startswith("| gRPC | [1,16] | 16"))
    assert "| 0.75× | 1.10× | 100 | 150 | 90 |" in row
    assert "- gRPC [1,16] c=16: default 0.75× of Triton's throughput" in section
    assert "(below 0.95×; default in 1 of 1; in_process in 0 of 1 cells):" in section
    assert "in_process 1.10" not in section  # ahead: not listed as behind


def test_each_grid_and_core_setting_has_its_own_table() -> None:
    cells = [_cell(s, t, grid=g, cores=n) for g in ("plain", "batching") for n in (1, 2)
             for s, t in (("triton", 1000), ("openinfer", 1000), ("openinfer_inproc", 1000))]
    text = render(cells, {}, SETTINGS)
    heads = [line for line in text.splitlines() if line.startswith("### ")]
    assert heads == ["### Plain grid, server on 1 core(s)", "### Plain grid, server on 2 core(s)",
                     "### Batching grid, server on 1 core(s)", "### Batching grid, server on 2 core(s)"]
    assert "openinfer is at least 0.95× of Triton's throughput in every cell" in text
    assert "## Other servers" not in text  # no peer measured


def test_peers_compared_only_without_batching() -> None:
    cells = [_cell("openinfer", 2000), _cell("openinfer_inproc", 4000), _cell("mlserver_pw0", 1000),
             _cell("kserve", 500), _cell("asgi_echo", 10000),
             _cell("openinfer", 9000, grid="batching"), _cell("triton", 9000, grid="batching")]
    text = render(cells, {"KServe (plain, 1 core(s))": "did not install"}, SETTINGS)
    peers = _section(text, "## Other servers, no batching")
    row = next(line for line in peers.splitlines() if line.startswith("| HTTP JSON | [1,16] | 16"))
    assert "(in-proc)" in row and "(pw0)" in row
    assert row.endswith("| 4.00× | 8.00× | 0.40× |")
    assert "9,000" not in peers  # the batching grid is no peer's
    assert "| batching | 1 | openinfer | HTTP JSON |" in text and "did not install" in text


def test_rows_follow_protocol_order_and_failures_show() -> None:
    cells = [_cell("triton", 900, "http-binary"), _cell("openinfer", 1000, "http-binary"),
             _cell("triton", 2000, "grpc"), {**_cell("openinfer", 0, "grpc"), "error": "boom"},
             _cell("triton", 3000), _cell("openinfer", 3000)]
    text = render(cells, {}, SETTINGS)
    section = _section(text, "### Plain grid, server on 1 core(s)", "\n### ")
    rows = [r for r in section.splitlines() if r.startswith(("| HTTP", "| gRPC"))]
    assert [r.split(" | ")[0] for r in rows] == ["| HTTP JSON", "| gRPC", "| HTTP binary"]
    assert "failed" in rows[1] and "boom" in text


def test_quick_runs_say_so_and_readme_summary_keeps_the_lead() -> None:
    cells = [_cell("triton", 1000), _cell("openinfer", 800)]
    text = render(cells, {}, {**SETTINGS, "quick": True})
    assert "**Quick run**" in text
    summary = readme.summary(text)
    assert summary.lstrip().startswith("**Quick run**")
    assert "## openinfer against Triton" in summary and "## Every run" not in summary


def test_every_run_table_reads_back_for_the_charts() -> None:
    cells = [_cell("triton", 1000, cores=n) for n in (1, 2)] + [_cell("openinfer", 700, grid="batching")]
    back = charts.cells_from_markdown(render(cells, {}, SETTINGS))
    assert {(c["grid"], c["cores"], c["server"], c["throughput"]) for c in back} == {
        ("plain", 1, "triton", 1000.0), ("plain", 2, "triton", 1000.0), ("batching", 1, "openinfer", 700.0)}
    assert [(c["grid"], c["cores"]) for c in charts.charted(back)] == [("plain", 1)]
    assert charts.cores_note(charts.charted(back)) == " (server on 1 core(s))"


def test_frontend_processes_are_set_against_one_process_on_one_core() -> None:
    cells = [_cell("openinfer_inproc", 5000, cores=1, cpu=170.0), _cell("openinfer_inproc", 4800, cores=2, cpu=160.0),
             _cell("openinfer_inproc_fp", 6000, cores=2, cpu=240.0), _cell("triton", 9000, cores=2, cpu=120.0),
             _cell("triton", 5000, cores=1)]
    text = render(cells, {}, SETTINGS)
    section = _section(text, "## More than one core: HTTP frontend processes")
    row = next(line for line in section.splitlines() if line.startswith("| in_process |"))
    assert row == ("| in_process | HTTP JSON | [1,16] | 16 | 2 | 5,000/s (170) | 4,800/s (160) | 6,000/s (240) "
                   "| 1.20× | 9,000/s (120) |")
    assert "## More than one core" not in render(cells[:2], {}, SETTINGS)


def test_readme_summary_carries_the_llm_sections_that_follow_every_run() -> None:
    text = (render([_cell("triton", 1000), _cell("openinfer", 800)], {}, SETTINGS)
            + "\n## What the load generator costs\n\nclients\n"
            + "\n## LLM: in-process\n\n| served c=1 | 1 |\n"
            + "\n## LLM: openinfer against `transformers serve --continuous-batching`\n\n| openinfer | aiperf |\n")
    summary = readme.summary(text)
    assert "## Every run" not in summary and "What the load generator costs" not in summary
    assert summary.index("## openinfer against Triton") < summary.index("## LLM: in-process") < summary.index(
        "## LLM: openinfer against `transformers serve")
    assert "| served c=1 | 1 |" in summary and "| openinfer | aiperf |" in summary


def test_a_run_of_the_llm_row_alone_replaces_only_the_llm_sections() -> None:
    text = (render([_cell("triton", 1000)], {}, SETTINGS) + "\n## What the load generator costs\n\nclients\n"
            + "\n## LLM: in-process\n\nold rows\n\n## LLM: openinfer against peers\n\nold cells\n")
    updated = readme.with_llm_sections(text, "## LLM: in-process\n\nnew rows\n\n## LLM: openinfer against peers\n\nnew\n")
    assert updated.startswith(text.split("\n## LLM: ", 1)[0]) and "clients" in updated
    assert "old" not in updated and updated.endswith("## LLM: openinfer against peers\n\nnew\n")
    assert [s.split("\n", 1)[0] for s in readme.llm_sections(updated)] == [
        "## LLM: in-process", "## LLM: openinfer against peers"]


def test_readme_summary_links_from_the_repository_root() -> None:
    links = ("![chart](charts/a.svg) [design](../docs/multicore.md#the-design) [up](#every-run) "
             "[peer](https://example.org/x.md)")
    text = render([_cell("triton", 1000), _cell("openinfer", 800)], {}, SETTINGS)
    summary = readme.summary(text.replace("\n## Every run", f"\n{links}\n\n## Every run", 1))
    assert ("![chart](benchmarks/charts/a.svg) [design](docs/multicore.md#the-design) [up](#every-run) "
            "[peer](https://example.org/x.md)") in summary

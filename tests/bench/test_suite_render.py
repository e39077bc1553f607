"""``make bench``'s RESULTS.md: ratios against the faster MLServer and the stack ceiling."""

from __future__ import annotations

from bench.results import render


def _cell(server: str, tput: float, proto: str = "http") -> dict[str, object]:
    return {"server": server, "label": server, "protocol": proto, "size": 16, "concurrency": 16,
            "throughput": tput, "p50_ms": 1.0, "p99_ms": 2.0, "completed": 100,
            "server_count": 100, "client_cpu": 10.0, "stable": True}


def test_summary_ratios() -> None:
    cells = [_cell("openinfer", 3000), _cell("mlserver", 500), _cell("mlserver_pw0", 1000),
             _cell("kserve", 900), _cell("asgi_echo", 15000),
             {**_cell("openinfer", 0, "grpc"), "error": "boom"}]
    text = render(cells, {"KServe (gRPC)": "did not install"},
                  {"interval_ms": 2000, "stability": 15, "max_trials": 4})
    row = next(line for line in text.splitlines() if line.startswith("| HTTP JSON | [1,16] | 16"))
    assert "3.00×" in row  # against the faster MLServer (parallel_workers: 0)
    assert "0.20×" in row  # against the bare ASGI echo
    assert "(pw0)" in row
    assert "failed" in text and "did not install" in text


def test_openinfer_compared_by_its_faster_setting() -> None:
    cells = [_cell("openinfer", 2000), _cell("openinfer_inproc", 4000), _cell("mlserver_pw0", 1000),
             _cell("asgi_echo", 10000)]
    text = render(cells, {}, {"interval_ms": 2000, "stability": 15, "max_trials": 4})
    row = next(line for line in text.splitlines() if line.startswith("| HTTP JSON | [1,16] | 16"))
    assert "(in-proc)" in row and "4.00×" in row and "0.40×" in row
    assert "| openinfer | HTTP JSON |" in text and "| openinfer_inproc | HTTP JSON |" in text


def test_default_mode_against_in_process_and_each_peer_with_server_cpu() -> None:
    cells = [{**_cell("openinfer", 3000, "grpc"), "server_cpu_us": 120.0},
             {**_cell("openinfer_inproc", 4000, "grpc"), "server_cpu_us": 90.0},
             _cell("kserve", 2000, "grpc"), _cell("mlserver_pw0", 1500, "grpc")]
    text = render(cells, {}, {"interval_ms": 2000, "stability": 15, "max_trials": 4})
    section = text.split("## The default mode", 1)[1].split("## Every run", 1)[0]
    row = next(line for line in section.splitlines() if line.startswith("| gRPC | [1,16] | 16"))
    assert "| 0.75× | 2.00× | 1.50× | 120 | 90 |" in row
    assert "| openinfer | gRPC | [1,16] | 16 | 3,000 |" in text and "| 120 |" in text


def test_binary_rows_follow_json_and_grpc_without_a_ceiling() -> None:
    cells = [_cell("openinfer", 900, "http-binary"), _cell("openinfer_inproc", 1000, "http-binary"),
             _cell("kserve", 60, "http-binary"), _cell("openinfer", 2000, "grpc"), _cell("openinfer", 3000)]
    text = render(cells, {}, {"interval_ms": 2000, "stability": 15, "max_trials": 4})
    summary = text.split("## The default mode", 1)[0]
    rows = [line for line in summary.splitlines() if line.startswith("| HTTP") or line.startswith("| gRPC")]
    assert [r.split(" | ")[0] for r in rows] == ["| HTTP JSON", "| gRPC", "| HTTP binary"]
    assert rows[2].endswith("| – | – |")  # neither MLServer nor a ceiling speaks it
    section = text.split("## The default mode", 1)[1].split("## Every run", 1)[0]
    row = next(line for line in section.splitlines() if line.startswith("| HTTP binary"))
    assert "| 0.90× | – | 15.00× |" in row

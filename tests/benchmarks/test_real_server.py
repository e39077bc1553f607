"""The generator against the real ``openinfer serve``: its counts equal the server's statistics."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ._run import ROOT_HINT, bench, identity_data


@pytest.mark.parametrize("protocol,extra", [
    ("http", []), ("http", ["--binary"]), ("grpc", []),
])
def test_counts_match_server_statistics(tmp_path: Path, real_server, protocol: str,  # type: ignore[no-untyped-def]
                                        extra: list[str]) -> None:
    url = real_server.http_url if protocol == "http" else real_server.grpc_url
    code, doc = bench(tmp_path, "-m", "identity_fp32", "-u", url, "-i", protocol,
                      "--input-data", str(identity_data(tmp_path)), "--concurrency-range", "1:4:3",
                      "--request-count", "200", *extra)
    assert code == 0, doc
    for level in doc["levels"]:
        assert level["errors"] == 0 and level["completed"] == 200
        server = level["server"]
        assert server is not None, "the server reported no statistics"
        assert server["success_count"] == 200
        assert server["compute_infer_us"] > 0


def test_time_windows_count_everything(tmp_path: Path, real_server) -> None:  # type: ignore[no-untyped-def]
    code, doc = bench(tmp_path, "-m", "identity_fp32", "-u", real_server.http_url,
                      "--shape", "INPUT0:16", "--concurrency-range", "4", "-p", "300", "-r", "3",
                      "-s", "50", "--warmup-ms", "100")
    assert code == 0
    (level,) = doc["levels"]
    assert level["completed"] == level["server"]["success_count"] > 0


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_shared_memory(tmp_path: Path, real_server, protocol: str) -> None:  # type: ignore[no-untyped-def]
    url = real_server.http_url if protocol == "http" else real_server.grpc_url
    code, doc = bench(tmp_path, "-m", "identity_fp32", "-u", url, "-i", protocol,
                      "--input-data", str(identity_data(tmp_path)), "--shared-memory", "system",
                      "--request-count", "50")
    if code != 0 and not doc:
        pytest.skip("the server does not accept system shared-memory registration yet")
    assert code == 0 and doc["levels"][0]["server"]["success_count"] == 50


def test_server_cli_dispatches_bench(real_server) -> None:  # type: ignore[no-untyped-def]
    out = subprocess.run([sys.executable, "-m", "openinfer", "bench", "-m", "identity_fp32",
                          "-u", real_server.http_url, "--shape", "INPUT0:16",
                          "--request-count", "50"], cwd=ROOT_HINT, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "Infer/s" in out.stdout


def test_decoupled_streaming(tmp_path: Path, real_server) -> None:  # type: ignore[no-untyped-def]
    data = tmp_path / "repeat.json"
    data.write_text('{"data": [{"IN": [1, 2, 3], "DELAY_MS": [0]}]}')
    code, doc = bench(tmp_path, "-m", "repeat", "-u", real_server.grpc_url, "-i", "grpc",
                      "--streaming", "--input-data", str(data), "--request-count", "40",
                      "--concurrency-range", "2", "--timeout", "20")
    assert code == 0, doc
    assert doc["levels"][0]["completed"] == 40

"""The generator end to end against the bare echo servers: counts, modes, validation."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ._run import ROOT_HINT, bench, identity_data


@pytest.mark.parametrize("protocol,extra", [
    ("http", []), ("http", ["--binary"]), ("grpc", []), ("grpc", ["--streaming"]),
    ("http", ["--shared-memory", "system"]), ("grpc", ["--shared-memory", "system"]),
])
def test_request_count_matches_server(
    tmp_path: Path, http_echo: str, grpc_echo: str, protocol: str, extra: list[str]
) -> None:
    url = http_echo if protocol == "http" else grpc_echo
    code, doc = bench(tmp_path, "-m", "identity_fp32", "-u", url, "-i", protocol,
                      "--input-data", str(identity_data(tmp_path)), "--concurrency-range", "1:4:3",
                      "--request-count", "200", "--workers", "2", *extra)
    assert code == 0, doc
    for level in doc["levels"]:
        assert level["errors"] == 0
        assert level["completed"] == 200
        assert level["server"]["success_count"] == 200
        assert level["throughput"] > 0 and level["latency_us"]["p99"] > 0
    assert not [f for f in os.listdir("/dev/shm") if f.startswith("oibench_")
                and f.split("_")[1] == str(os.getpid())]


def test_time_windows_and_csv(tmp_path: Path, http_echo: str) -> None:
    csv = tmp_path / "out.csv"
    code, doc = bench(tmp_path, "-m", "identity_fp32", "-u", http_echo, "--shape", "INPUT0:16",
                      "--concurrency-range", "2", "-p", "300", "-r", "3", "-s", "50",
                      "--warmup-ms", "100", "-f", str(csv))
    assert code == 0
    (level,) = doc["levels"]
    assert 1 <= level["windows"] <= 3 and level["measured"] > 0
    # Warm-up and every window are counted, so the server saw exactly what we completed.
    assert level["completed"] == level["server"]["success_count"]
    assert csv.read_text().startswith("Concurrency,Inferences/Second")


def test_request_rate(tmp_path: Path, grpc_echo: str) -> None:
    code, doc = bench(tmp_path, "-m", "identity_fp32", "-u", grpc_echo, "-i", "grpc",
                      "--shape", "INPUT0:8", "--request-rate-range", "400",
                      "--request-count", "100", "-b", "2")
    assert code == 0
    (level,) = doc["levels"]
    assert level["mode"] == "request_rate" and level["completed"] == 100
    # 100 requests at 400/s take about a quarter of a second, batch 2 doubles inferences.
    assert level["throughput"] == pytest.approx(2 * level["request_throughput"])


def test_sequences_are_accepted(tmp_path: Path, http_echo: str) -> None:
    code, doc = bench(tmp_path, "-m", "identity_fp32", "-u", http_echo, "--shape", "INPUT0:4",
                      "--sequence-length", "5", "--request-count", "50", "--binary")
    assert code == 0 and doc["levels"][0]["completed"] == 50


@pytest.mark.parametrize("n", [16, 8192])  # 8192: a JSON body large enough to be read into numpy
def test_wrong_answers_are_errors(tmp_path: Path, http_echo: str, n: int) -> None:
    code, doc = bench(tmp_path, "-m", "identity_fp32", "-u", http_echo,
                      "--input-data", str(identity_data(tmp_path, n, wrong=True)),
                      "--request-count", "20")
    assert code == 1
    level = doc["levels"][0]
    assert level["errors"] == 20 and "differs" in level["client"]["first_error"]


def test_large_json_answers_are_checked_and_counted(tmp_path: Path, http_echo: str) -> None:
    code, doc = bench(tmp_path, "-m", "identity_fp32", "-u", http_echo,
                      "--input-data", str(identity_data(tmp_path, 8192)), "--request-count", "20")
    assert code == 0 and doc["levels"][0]["completed"] == 20 and doc["levels"][0]["errors"] == 0


def test_unknown_model_fails_cleanly(tmp_path: Path, http_echo: str) -> None:
    code = subprocess.run([sys.executable, "-m", "openinfer.bench", "-m", "x", "-u",
                           "127.0.0.1:1", "--request-count", "1"], cwd=ROOT_HINT,
                          capture_output=True, text=True)
    assert code.returncode == 1 and "openinfer bench:" in code.stderr


def test_module_entry_point_prints_table(http_echo: str) -> None:
    out = subprocess.run([sys.executable, "-m", "openinfer.bench", "-m", "identity_fp32", "-u",
                          http_echo, "--shape", "INPUT0:16", "--request-count", "100"],
                         cwd=ROOT_HINT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "Infer/s" in out.stdout and "p99 ms" in out.stdout

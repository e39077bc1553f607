"""Triton as a ``make bench`` peer: finding the server in the wheel, and (where the bench has
installed it) serving the bench's repository."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from benchmarks import grids, servers, triton
from benchmarks.peers import VENVS


def _wheel(site: Path, versions: tuple[str, ...]) -> Path:
    root = site / "pytriton" / "tritonserver"
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "tritonserver").write_text("")
    (root / "backends" / "python").mkdir(parents=True)
    for v in versions:
        (root / "python_backend_stubs" / v).mkdir(parents=True)
        (root / "python_backend_stubs" / v / "triton_python_backend_stub").write_text(v)
    return root


def _fake_python(monkeypatch, site: Path, version: str) -> Path:
    monkeypatch.setattr(triton, "_site_packages", lambda py: site)
    monkeypatch.setattr(triton, "_python_version", lambda py: version)
    return site / "venv" / "bin" / "python"


def test_the_stub_for_the_venvs_python_goes_beside_the_backend(tmp_path, monkeypatch) -> None:
    root = _wheel(tmp_path, ("3.11", "3.12"))
    py = _fake_python(monkeypatch, tmp_path, "3.12")
    layout, why = triton.prepare(py)
    assert layout is not None and why == ""
    assert (root / "backends" / "python" / "triton_python_backend_stub").read_text() == "3.12"
    assert layout.libs == tmp_path / "nvidia_pytriton.libs"  # no external_libs in this wheel
    env = triton.env(layout)
    assert env["PATH"].startswith(str(py.parent)) and env["LD_LIBRARY_PATH"].startswith(str(layout.libs))
    argv = triton.argv(layout, tmp_path / "repo", 1, 2, 3)
    assert argv[0] == str(root / "bin" / "tritonserver")
    addresses = [argv[i + 1] for i, a in enumerate(argv) if a.endswith("-address")]
    assert addresses == ["127.0.0.1"] * 3  # never beyond loopback


def test_a_python_without_a_stub_is_named(tmp_path, monkeypatch) -> None:
    _wheel(tmp_path, ("3.11",))
    layout, why = triton.prepare(_fake_python(monkeypatch, tmp_path, "3.14"))
    assert layout is None and "Python 3.14" in why


def test_without_the_wheel_triton_is_skipped_with_its_reason(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(servers, "RESULTS", tmp_path)
    monkeypatch.setattr("benchmarks.servers.ensure_peer", lambda name, install: (None, f"{name} did not install"))
    server = servers.make("triton", grids.GRIDS["plain"], install=False)
    assert server.skip == "triton did not install"


@pytest.fixture
def installed_triton(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    if not (VENVS / "triton.ok").exists():
        pytest.skip("Triton is not installed in benchmarks/.venvs/triton (python -m benchmarks installs it)")
    monkeypatch.setattr(servers, "RESULTS", tmp_path)
    return servers


@pytest.mark.parametrize("grid", ["plain", "batching"])
def test_triton_serves_the_benchs_repository(installed_triton, grid: str) -> None:
    server = servers.make("triton", grids.GRIDS[grid], install=False)
    if server.skip:
        pytest.skip(server.skip)
    server.start(timeout=60)
    try:
        body = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 4],
                            "data": [1.0, 2.5, -3.0, 4.0]}]}
        req = urllib.request.Request(f"http://{server.url('http')}/v2/models/{servers.MODEL}/infer",
                                     data=json.dumps(body).encode(), method="POST")
        with urllib.request.urlopen(req, timeout=10) as resp:
            out = json.loads(resp.read())["outputs"][0]
        assert out["name"] == "OUTPUT0" and out["shape"] == [1, 4]
        assert out["data"] == [1.0, 2.5, -3.0, 4.0]
    finally:
        server.stop()

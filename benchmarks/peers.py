"""Installs what the comparison needs, each peer in a venv of its own under ``benchmarks/.venvs``.

Peers pin their own framework versions (FastAPI, pydantic, grpcio), so they never share the
project's environment; a peer that fails to install is skipped with its reason, not fatal.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
VENVS = HERE / ".venvs"

PEERS = {
    # uvloop 0.22 made get_event_loop() raise outside a running loop, which kills MLServer
    # 1.7.1's parallel workers at start; 0.21 is what it was released against.
    "mlserver": ["mlserver==1.7.1", "uvloop<0.22"],
    "kserve": ["kserve"],
    # The wheel carries a complete CPU-only tritonserver (2.51) with its Python backend.
    "triton": ["nvidia-pytriton==0.7.0", "numpy"],
    # NVIDIA's LLM load generator (genai-perf's successor). It pins rich, orjson, psutil and
    # transformers below the project's, so it lives apart like the servers.
    "aiperf": ["aiperf==0.13.0"],
}


def venv_python(name: str) -> Path:
    return VENVS / name / "bin" / "python"


def ensure_peer(name: str, install: bool = True) -> tuple[Path | None, str]:
    """The peer's interpreter, or None and why not."""
    py = venv_python(name)
    marker = VENVS / f"{name}.ok"
    spec = " ".join(PEERS[name]) + "\n"
    if py.exists() and marker.exists() and marker.read_text() == spec:
        return py, ""
    if not install:
        return None, f"{name} is not installed (run without --no-install)"
    log = VENVS / f"{name}.log"
    VENVS.mkdir(parents=True, exist_ok=True)
    print(f"installing {name} into {py.parent.parent} (log: {log}) ...", file=sys.stderr)
    with log.open("w") as out:
        ok = py.exists() or subprocess.call(
            [sys.executable, "-m", "venv", str(py.parent.parent)], stdout=out, stderr=out) == 0
        ok = ok and subprocess.call([str(py), "-m", "pip", "install", "-q", *PEERS[name]],
                                    stdout=out, stderr=out) == 0
    if not ok:
        return None, f"{name} did not install; see {log}"
    marker.write_text(spec)
    return py, ""


def ensure_wrk(install: bool = True) -> tuple[str | None, str]:
    """wrk from the distribution's packages; None (and why) when it cannot be had."""
    found = shutil.which("wrk")
    if found or not install:
        return found, "" if found else "wrk is not installed"
    if shutil.which("apt-get") is None:
        return None, "wrk is not installed and apt-get is not available"
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    subprocess.call(["apt-get", "install", "-y", "-qq", "wrk"], **quiet)
    if not shutil.which("wrk"):
        subprocess.call(["apt-get", "update", "-qq"], **quiet)
        subprocess.call(["apt-get", "install", "-y", "-qq", "wrk"], **quiet)
    found = shutil.which("wrk")
    return found, "" if found else "wrk could not be installed with apt-get"

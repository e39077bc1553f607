"""Triton Inference Server as a peer: the CPU-only `tritonserver` that the nvidia-pytriton
wheel ships, run directly on a model repository (PyTriton's own Python API is not used).

The wheel keeps one Python backend stub per Python version beside the backend; the one that
matches the peer venv's Python has to sit in the backend's folder before the server starts.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Layout:
    """Where the wheel put the server, its backends, its libraries and the venv's Python."""

    root: Path  # <site-packages>/pytriton/tritonserver
    libs: Path
    venv_bin: Path

    @property
    def server(self) -> Path:
        return self.root / "bin" / "tritonserver"

    @property
    def backends(self) -> Path:
        return self.root / "backends"


def _python_version(py: Path) -> str:
    out = subprocess.run([str(py), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()


def _site_packages(py: Path) -> Path:
    out = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                         capture_output=True, text=True, check=True)
    return Path(out.stdout.strip())


def prepare(py: Path) -> tuple[Layout | None, str]:
    """The server ready to start from the peer venv whose interpreter is `py`, or None and why."""
    site = _site_packages(py)
    root = site / "pytriton" / "tritonserver"
    if not (root / "bin" / "tritonserver").exists():
        return None, f"no tritonserver under {root}"
    version = _python_version(py)
    stub = root / "python_backend_stubs" / version / "triton_python_backend_stub"
    if not stub.exists():
        return None, f"the wheel has no Python backend stub for Python {version}"
    target = root / "backends" / "python" / stub.name
    if not target.exists():
        shutil.copy2(stub, target)
    # Newer wheels keep the server's libraries beside it; older ones in the auditwheel folder.
    libs = root / "external_libs"
    if not libs.exists():
        libs = site / "nvidia_pytriton.libs"
    return Layout(root, libs, py.parent), ""


def argv(layout: Layout, repository: Path, http: int, grpc: int, metrics: int) -> list[str]:
    """The command line: every endpoint on the loopback address only."""
    return [str(layout.server), "--backend-directory", str(layout.backends),
            "--model-repository", str(repository),
            "--http-address", "127.0.0.1", "--http-port", str(http),
            "--grpc-address", "127.0.0.1", "--grpc-port", str(grpc),
            "--metrics-address", "127.0.0.1", "--metrics-port", str(metrics)]


def env(layout: Layout) -> dict[str, str]:
    """The libraries on the loader's path; the venv (with numpy, which the stub imports) first
    on PATH, which is where the stub finds its Python."""
    paths = [str(layout.libs), os.environ.get("LD_LIBRARY_PATH", "")]
    return {"LD_LIBRARY_PATH": os.pathsep.join(p for p in paths if p),
            "PATH": os.pathsep.join([str(layout.venv_bin), os.environ.get("PATH", "")])}

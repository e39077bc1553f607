"""One PyFlink 2.3 job against the real server: the same query in async and in pandas mode.

PyFlink (`apache-flink==2.3.0`, ~440 MB with its JVM jars) lives in its own virtual environment,
`.venv-flink` (built by `make flink-venv`), or in the interpreter named by
`OPENINFER_FLINK_PYTHON`; the job runs there as a subprocess. Without such an interpreter, or
without Java, the test is skipped and says why.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.flink.models import write_models
from tests.flink.pyflink_job import ROWS
from tests.helpers import ROOT, Server

SCORER = {
    "flink_scorer": {
        "config": """
            name: "flink_scorer"
            backend: "python"
            max_batch_size: 8
            dynamic_batching { max_queue_delay_microseconds: 1000 }
            input [ { name: "features" data_type: TYPE_FP32 dims: [ -1 ] } ]
            output [ { name: "score" data_type: TYPE_FP32 dims: [ 1 ] } ]
        """,
        "model_py": "sum",
    }
}


def flink_python() -> str | None:
    """An interpreter that can `import pyflink`, or None."""
    candidates = [os.environ.get("OPENINFER_FLINK_PYTHON"), str(ROOT / ".venv-flink/bin/python")]
    candidates.append(sys.executable)
    for candidate in filter(None, candidates):
        if Path(candidate).exists():
            probe = subprocess.run(
                [candidate, "-c", "import pyflink"], capture_output=True, timeout=60
            )
            if probe.returncode == 0:
                return candidate
    return None


PYTHON = flink_python()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        PYTHON is None,
        reason="pyflink is not importable: run `make flink-venv` (apache-flink==2.3.0 into "
        ".venv-flink) or set OPENINFER_FLINK_PYTHON",
    ),
    pytest.mark.skipif(shutil.which("java") is None, reason="PyFlink needs a Java runtime"),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    repo = tmp_path_factory.mktemp("flink-e2e")
    write_models(repo, SCORER)
    started = Server(repo).start(wait_for="ready")
    yield started
    started.stop()


def run_job(server: Server, out: Path, *args: str, timeout: float = 280) -> dict:
    assert PYTHON is not None
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    command = [PYTHON, "-m", "tests.flink.pyflink_job", "--out", str(out)]
    command += ["--endpoint", f"http://127.0.0.1:{server.http_port}", *args]
    done = subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"job failed:\n{done.stdout[-4000:]}\n{done.stderr[-8000:]}"
    return json.loads(out.read_text())


def f32(value: float) -> float:
    return struct.unpack("<f", struct.pack("<f", value))[0]


def test_same_query_in_every_mode(server: Server, tmp_path: Path) -> None:
    result = run_job(server, tmp_path / "result.json", "--modes", "async,pandas,row")
    # A NULL features row reaches the model as an empty tensor (as Triton takes it), whose sum is 0.
    expected = sorted(
        [i, name, 0.0 if features is None else f32(sum(f32(x) for x in features))]
        for i, features, name in ROWS
    )
    for mode in ("async", "pandas", "row"):
        got = sorted(result["modes"][mode]["rows"])
        assert len(got) == len(expected), mode
        for row, want in zip(got, expected):
            assert row[:2] == want[:2] and row[2] == pytest.approx(want[2]), (mode, row, want)
    ml = result["ml_predict"]
    assert ml["columns"] == ["id", "features", "name", "score"]
    assert sorted(ml["rows"]) == [[i, name, s] for i, name, s in expected]
    assert "input column 'd' has unsupported type DECIMAL(10, 2)" in result["bad_model_error"]
    assert "unsupported options for provider 'triton': max-retry" in result["descriptor_error"]
    assert result["typo_registered"] is False
    print(json.dumps({m: round(v["seconds"], 1) for m, v in result["modes"].items()}))

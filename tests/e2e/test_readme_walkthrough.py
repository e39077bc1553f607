"""README's "Your first model" walk-through, step by step, with the README's own code blocks:
a Python model, an ONNX model, an ensemble of the two, served and called as the README says."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys

import httpx
import pytest

from tests.helpers import ROOT, Server

README = (ROOT / "README.md").read_text()
WALK = README.split("## Your first model", 1)[1].split("\n## ", 1)[0]


def _blocks(section: str, language: str = "") -> list[str]:
    part = WALK.split(section, 1)[1].split("\n### ", 1)[0]
    return re.findall(rf"```{language}\n(.*?)```", part, re.DOTALL)


def _run(*args: str, cwd) -> str:
    env = dict(os.environ, PYTHONPATH=str(ROOT))  # this checkout's openinfer, from any folder
    out = subprocess.run(list(args), check=False, capture_output=True, text=True, cwd=cwd, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


@pytest.mark.skipif(importlib.util.find_spec("onnx") is None, reason="needs the onnx extra")
def test_first_model_walkthrough(tmp_path):
    cli = [sys.executable, "-m", "openinfer"]
    # 1. the Python model, with the README's one-line change
    assert "openinfer new-model doubler --backend python --repository models" in _blocks("### 1.", "bash")[0]
    _run(*cli, "new-model", "doubler", "--backend", "python", "--repository", "models", cwd=tmp_path)
    model_py = tmp_path / "models" / "doubler" / "1" / "model.py"
    changed = _blocks("### 1.", "python")[0].strip()
    original = "result = data.astype(np.float32)  # your computation"
    assert original in model_py.read_text()
    model_py.write_text(model_py.read_text().replace(original, changed))
    # 2. the ONNX model, replaced by the README's add-one graph
    assert "openinfer new-model add_one --backend onnx --repository models" in _blocks("### 2.", "bash")[0]
    _run(*cli, "new-model", "add_one", "--backend", "onnx", "--repository", "models", cwd=tmp_path)
    (tmp_path / "make_add_one.py").write_text(_blocks("### 2.", "python")[0])
    _run(sys.executable, "make_add_one.py", cwd=tmp_path)
    # 3. the ensemble, its config as printed
    ensemble = tmp_path / "models" / "double_then_add"
    (ensemble / "1").mkdir(parents=True)
    (ensemble / "config.pbtxt").write_text(_blocks("### 3.")[0])
    calls = _blocks("### 3.", "bash")[0]
    with Server(tmp_path / "models").start(wait_for="ready") as server:
        for model, expected in (("doubler", "[0. 2. 4. 6.]"), ("add_one", "[1. 2. 3. 4.]")):
            assert f"python models/{model}/client.py     # {expected}" in calls
            assert _run(sys.executable, f"models/{model}/client.py", server.http_url, cwd=tmp_path).strip() == expected
        body = re.search(r"-d '(.*?)'", calls).group(1)
        answer = httpx.post(f"http://{server.http_url}/v2/models/double_then_add/infer", content=body, timeout=60)
        printed = re.search(r"# (\{\"model_name\":\"double_then_add\".*)", calls).group(1)
        assert answer.status_code == 200
        assert answer.text == printed

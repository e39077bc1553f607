"""The model repositories of the Triton comparison, written at run time.

Triton and openinfer read the very same `config.pbtxt` and `model.py`, so a difference in the
figures is the servers' and not the models'. openinfer's `in_process` mode is that same config
with one parameter added, which Triton would ignore.
"""

from __future__ import annotations

import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: Our example identity model: INPUT0 returned as OUTPUT0, each request answered on its own.
MODEL_PY = HERE.parent / "examples" / "model_repository" / "identity_fp32" / "1" / "model.py"
MODEL = "identity_fp32"
IN_PROCESS = '\nparameters { key: "execution_mode" value { string_value: "in_process" } }\n'


def config_text(batching: bool) -> str:
    """One CPU instance; without batching the request's [1,N] is the model's own shape, with it
    the first dimension is the batch and requests arriving together share one `execute`."""
    dims = "[ -1 ]" if batching else "[ -1, -1 ]"
    lines = [
        f'name: "{MODEL}"',
        'backend: "python"',
        f"max_batch_size: {8 if batching else 0}",
        f'input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: {dims} }} ]',
        f'output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: {dims} }} ]',
        "instance_group [ { count: 1 kind: KIND_CPU } ]",
    ]
    if batching:
        lines.append("dynamic_batching { }")
    return "\n".join(lines) + "\n"


def write(folder: Path, batching: bool, in_process: bool = False) -> Path:
    """A one-model repository in `folder` (replaced if there); returns `folder`."""
    if folder.exists():
        shutil.rmtree(folder)
    version = folder / MODEL / "1"
    version.mkdir(parents=True)
    shutil.copyfile(MODEL_PY, version / "model.py")
    (folder / MODEL / "config.pbtxt").write_text(config_text(batching) + (IN_PROCESS if in_process else ""))
    return folder

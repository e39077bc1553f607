"""Loading and unloading other models from inside a model (explicit model control only)."""

from __future__ import annotations

from . import _host
from .errors import TritonModelException


def load_model(model_name: str, config: str = "", files: dict[str, bytes] | None = None) -> None:
    """Load (or reload) a model; `config` is JSON text, `files` override the repository's files
    (`"file:<version>/<name>"` keys, as the repository extension takes them). Anything but a
    dict for `files` is refused with Triton's words, not read as one."""
    if files is not None and not isinstance(files, dict):
        raise TritonModelException(
            f"failed to load model '{model_name}', files should be a dictionary of file paths and file contents"
        )
    _host.current().call("load_model", str(model_name), str(config or ""), dict(files or {}))


def unload_model(model_name: str, unload_dependents: bool = False) -> None:
    _host.current().call("unload_model", str(model_name), bool(unload_dependents))


def is_model_ready(model_name: str, model_version: str = "") -> bool:
    return bool(_host.current().call("is_model_ready", str(model_name), str(model_version)))

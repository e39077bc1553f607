"""LoRA adapters named `<model><separator><adapter>` (`--lora-separator`).

Adapters are listed per model version in `multi_lora.json` (`{"name": "path"}`); the frontend only
needs the names: the backend resolves the paths itself from the same file.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

log = logging.getLogger("openinfer.openai")


def split_name(requested: str, separator: str | None) -> tuple[str, str | None]:
    """`base<sep>lora` -> (base, lora); anything else (no separator, several) is a plain name."""
    if not separator:
        return requested, None
    parts = requested.split(separator)
    if len(parts) == 2 and parts[0] and parts[1]:
        return parts[0], parts[1]
    return requested, None


def _enabled(version_dir: Path) -> bool | None:
    """`model.json`'s `enable_lora` (vLLM engine args); None when the file does not say."""
    path = version_dir / "model.json"
    if not path.is_file():
        return None
    try:
        value = json.loads(path.read_text()).get("enable_lora")
    except (OSError, ValueError, AttributeError):
        return None
    if value is None:
        return None
    return str(value).strip().lower() == "true"


def adapter_names(version_dir: Path) -> list[str]:
    """The adapters of one model version; [] when it has none (or LoRA is switched off)."""
    if _enabled(version_dir) is False:
        return []
    path = version_dir / "multi_lora.json"
    if not path.is_file():
        return []
    try:
        table = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        log.warning("cannot read %s: %s", path, exc)
        return []
    if not isinstance(table, dict):
        log.warning("%s must map adapter names to paths", path)
        return []
    return [str(name) for name in table]

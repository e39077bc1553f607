"""LoRA adapters named `<model><separator><adapter>` (`--lora-separator`).

Adapters are listed per model version in `multi_lora.json` (`{"name": "path"}`); the frontend only
needs the names, which the model's backend gives (`LoadedModel.text.loras`).
"""

from __future__ import annotations


def split_name(requested: str, separator: str | None) -> tuple[str, str | None]:
    """`base<sep>lora` -> (base, lora); anything else (no separator, several) is a plain name."""
    if not separator:
        return requested, None
    parts = requested.split(separator)
    if len(parts) == 2 and parts[0] and parts[1]:
        return parts[0], parts[1]
    return requested, None

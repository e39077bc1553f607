"""The repository extension's request rules, for every frontend.

A load request carries parameters: `config` (a model configuration in JSON) and `file:<path>`
(the content of a model file). The frontends only turn their wire values into Python ones (HTTP
JSON strings, base64 for files; gRPC `string_param`/`bytes_param`); which keys exist and what
type each must have is decided here, with Triton's gRPC messages over both protocols.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..errors import InvalidArgumentError, UnsupportedError


@dataclass(frozen=True, slots=True)
class LoadOverrides:
    """What a load request replaces: the configuration and the model's files (may be empty)."""

    config: str | None = None
    files: dict[str, bytes] = field(default_factory=dict)


def check_repository_name(name: str) -> None:
    """Requests naming a repository are refused, as Triton refuses them (one repository set)."""
    if name:
        raise UnsupportedError("'repository_name' specification is not supported")


def load_overrides(parameters: Mapping[str, object]) -> LoadOverrides:
    """The overrides of a load request's parameters; an unknown key or wrong type is INVALID_ARG."""
    config: str | None = None
    files: dict[str, bytes] = {}
    for key, value in parameters.items():
        if key == "config":
            if not isinstance(value, str):
                raise InvalidArgumentError(
                    "invalid value type for load parameter 'config', expected string_param."
                )
            config = value
        elif key.startswith("file:"):
            if not isinstance(value, bytes):
                raise InvalidArgumentError(
                    f"invalid value type for load parameter '{key}', expected bytes_param."
                )
            files[key] = value
        else:
            raise InvalidArgumentError(f"unrecognized load parameter '{key}'.")
    return LoadOverrides(config, files)


def unload_dependents(parameters: Mapping[str, object]) -> bool:
    """The `unload_dependents` flag of an unload request (false when absent)."""
    value = parameters.get("unload_dependents", False)
    if not isinstance(value, bool):
        raise InvalidArgumentError(
            "invalid value type for unload parameter 'unload_dependents', expected bool_param."
        )
    return value

"""A model's versions as the repository keeps them: each version's state and the loaded model
serving it, and the answers requests get from them, in Triton's words."""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import NotFoundError, UnavailableError
from ..model import LoadedModel
from ..requests.versions import parse_version
from ..types import IndexRow


class State(enum.Enum):
    UNKNOWN = "UNKNOWN"
    READY = "READY"
    UNAVAILABLE = "UNAVAILABLE"
    LOADING = "LOADING"
    UNLOADING = "UNLOADING"


@dataclass
class VersionRecord:
    version: int
    state: State
    reason: str = ""
    model: LoadedModel | None = None


@dataclass
class ModelEntry:
    name: str
    versions: dict[int, VersionRecord] = field(default_factory=dict)
    fingerprint: str = ""
    override_dir: Path | None = None
    #: The config override the last successful load was given; a load without one keeps it.
    config_override: str | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    #: models loaded because this one (an ensemble) needs them; `unload_dependents` unloads them.
    composing: list[str] = field(default_factory=list)
    #: Why the last poll of this model failed ("" once one succeeds): no state comes of it.
    poll_error: str = ""
    #: The last successful load's configuration as polled, and its files' fingerprints (each
    #: version folder's, and "" for the rest but the configuration): a load keeps the versions
    #: whose files did not change (`instance_update`).
    polled: Any = None
    stamps: dict[str, str] = field(default_factory=dict)

    def ready_versions(self) -> list[int]:
        return sorted(v for v, r in self.versions.items() if r.state is State.READY)

    def steps(self) -> set[str]:
        """The models a loaded version runs as ensemble steps."""
        return {
            step.model_name
            for record in self.versions.values() if record.model is not None
            for step in record.model.config.ensemble_scheduling.step
        }

    def settled(self) -> bool:
        """Every version READY, or unloaded on purpose: what strict readiness asks of a model."""
        return all(
            r.state is State.READY or (r.state is State.UNAVAILABLE and r.reason == "unloaded")
            for r in self.versions.values()
        )


def serving_model(entry: ModelEntry | None, name: str, version: str) -> LoadedModel:
    """The model that serves a request for `name` (and `version`, "" for the newest)."""
    if entry is None or not entry.versions:
        raise NotFoundError(f"Request for unknown model: '{name}' is not found")
    number = parse_version(version)
    if number is None:  # the newest READY version (a loop: this runs for every request)
        newest: VersionRecord | None = None
        for record in entry.versions.values():
            if record.state is State.READY and (newest is None or record.version > newest.version):
                newest = record
        if newest is None or newest.model is None:
            raise NotFoundError(f"Request for unknown model: '{name}' has no available versions")
        return newest.model
    asked = entry.versions.get(number)
    if asked is None:
        raise NotFoundError(f"Request for unknown model: '{name}' version {number} is not found")
    if asked.state is not State.READY or asked.model is None:
        raise UnavailableError(f"Request for unknown model: '{name}' version {number} is not at ready state")
    return asked.model


def index_rows(names: set[str], entries: dict[str, ModelEntry], ready_only: bool) -> list[IndexRow]:
    """The repository index: a row per version with a state, a name-only row for a model that
    has none (never loaded, or its configuration could not be read)."""
    rows: list[IndexRow] = []
    for name in sorted(names):
        entry = entries.get(name)
        if entry is None or not entry.versions:
            if not ready_only:
                rows.append(IndexRow(name))
            continue
        for version in sorted(entry.versions):
            record = entry.versions[version]
            if ready_only and record.state is not State.READY:
                continue
            rows.append(IndexRow(name, str(version), record.state.value, record.reason or ""))
    return rows

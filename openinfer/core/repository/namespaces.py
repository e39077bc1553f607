"""`--model-namespacing`: every model repository is a namespace of its own.

Without it a model name is unique across all repositories (a name found in two is refused).
With it each repository keeps its own models, as Triton keeps them:
- a name that one namespace has is served by name as usual; a name that several have cannot
  be: requests for it are refused with Triton's "model namespace must be provided to resolve
  ambiguity";
- an ensemble's step runs the model of the ensemble's own namespace, or, when that has none of
  the name, the one other namespace that has it (so removing a composing model from one
  repository moves its ensembles to another's, and putting it back moves them home);
- a load or an unload by name acts in every namespace that has the name;
- per-model metrics carry the repository as a `namespace` label.

Each namespace is a `ModelRepository` over one path; this class gives the server the same
methods over all of them.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from pathlib import Path

from ..errors import InvalidArgumentError, OpenInferError
from ..model import LoadedModel
from ..types import IndexRow
from .repository import ModelRepository, RepositoryOptions
from .version_loader import VersionLoader


def ambiguity(name: str, count: int) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"There are {count} identifiers of model '{name}' in global map, model namespace must be "
        "provided to resolve ambiguity."
    )


class NamespacedRepository:
    """One `ModelRepository` per repository path, looked up as Triton's namespaces are."""

    def __init__(self, paths: list[Path], options: RepositoryOptions, loader: VersionLoader) -> None:
        self.namespaces: list[ModelRepository] = []
        for path in paths:
            local = Path(path).resolve()
            remotes = [r for r in options.remotes if Path(r.local).resolve() == local]
            child = ModelRepository([path], dataclasses.replace(options, remotes=remotes), loader)
            child.namespace = remotes[0].url if remotes else str(path)  # as the command line names it
            child.composing_owner = self._composing_owner(child)
            self.namespaces.append(child)
        self._by_path = {str(child.paths[0]): child for child in self.namespaces}

    # ------------------------------------------------------------------ lookup
    def _holders(self, name: str) -> list[ModelRepository]:
        return [child for child in self.namespaces if child.has(name)]

    def _holder(self, name: str) -> ModelRepository | None:
        """The one namespace that has the name; None when none has it (ambiguity raises)."""
        holders = self._holders(name)
        if len(holders) > 1:
            raise ambiguity(name, len(holders))
        return holders[0] if holders else None

    def _composing_owner(self, child: ModelRepository) -> Callable[[str], ModelRepository]:
        def owner(name: str) -> ModelRepository:
            if child.has(name):
                return child
            return self._holder(name) or child  # none: the namespace's own "not found"

        return owner

    def get(self, name: str, version: str = "", namespace: str | None = None) -> LoadedModel:
        """The model a request names; `namespace` (an ensemble's repository) is looked in first."""
        own = self._by_path.get(namespace) if namespace is not None else None
        if own is not None and own.has(name):
            return own.get(name, version)
        holder = self._holder(name)
        return (holder or self.namespaces[0]).get(name, version)

    def find_model_dir(self, name: str) -> Path | None:
        try:
            holder = self._holder(name)
        except OpenInferError:
            return None
        return holder.find_model_dir(name) if holder is not None else None

    def ready_versions(self, name: str) -> list[int]:
        holder = self._holder(name)
        return holder.ready_versions(name) if holder is not None else []

    def loaded_models(self) -> list[LoadedModel]:
        return [model for child in self.namespaces for model in child.loaded_models()]

    def all_ready(self) -> bool:
        return all(child.all_ready() for child in self.namespaces)

    def index(self, ready_only: bool = False) -> list[IndexRow]:
        rows = [row for child in self.namespaces for row in child.index(ready_only)]
        return sorted(rows, key=lambda row: (row.name, row.version))

    def poll_failed(self) -> list[str]:
        return sorted({name for child in self.namespaces for name in child.poll_failed()})

    # ---------------------------------------------------------------- lifecycle
    async def start(self) -> None:
        await asyncio.gather(*(child.start() for child in self.namespaces))

    async def stop(self) -> None:
        await asyncio.gather(*(child.stop() for child in self.namespaces))

    async def load(self, name: str, config_override: str | None = None,
                   files: dict[str, bytes] | None = None) -> None:
        """Loads the name in every namespace that has it (files a client sent: in the one that
        has the name, else the first)."""
        holders = [child for child in self.namespaces if child.find_model_dir(name) is not None]
        if files or len(holders) <= 1:
            await (holders[0] if holders else self.namespaces[0]).load(name, config_override, files)
            return
        results = await asyncio.gather(
            *(child.load(name, config_override) for child in holders), return_exceptions=True
        )
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def unload(self, name: str, unload_dependents: bool = False) -> None:
        for child in self.namespaces:
            await child.unload(name, unload_dependents)

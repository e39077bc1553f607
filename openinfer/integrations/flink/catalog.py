"""Reads `CREATE MODEL` definitions back from a PyFlink `TableEnvironment`'s catalog.

PyFlink 2.3 has no public Python getter for a model's options or schemas, so this goes through
the Java `CatalogManager` (via the environment's py4j handle). It is the only module that does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CatalogModel:
    """A model as the catalog stores it: columns as `(name, Flink type string)` and options."""

    name: str
    inputs: tuple[tuple[str, str], ...]
    outputs: tuple[tuple[str, str], ...]
    options: dict[str, str]
    temporary: bool


def list_catalog_models(t_env: Any, names: list[str] | None = None) -> list[CatalogModel]:
    """Models of the current catalog and database (permanent and temporary), or `names`."""
    from pyflink.java_gateway import get_gateway

    if names is None:
        names = sorted(set(t_env.list_models()) | set(t_env.list_temporary_models()))
    manager = t_env._j_tenv.getCatalogManager()
    object_identifier = get_gateway().jvm.org.apache.flink.table.catalog.ObjectIdentifier
    models = []
    for name in names:
        identifier = object_identifier.of(
            manager.getCurrentCatalog(), manager.getCurrentDatabase(), name
        )
        found = manager.getModel(identifier)
        if not found.isPresent():
            raise LookupError(f"model '{name}' is not in catalog {identifier.toString()}")
        resolved = found.get().getResolvedModel()
        models.append(
            CatalogModel(
                name=name,
                inputs=_columns(resolved.getResolvedInputSchema()),
                outputs=_columns(resolved.getResolvedOutputSchema()),
                options={str(k): str(v) for k, v in dict(resolved.getOptions()).items()},
                temporary=bool(found.get().isTemporary()),
            )
        )
    return models


def _columns(schema: Any) -> tuple[tuple[str, str], ...]:
    return tuple(
        (str(c.getName()), str(c.getDataType().getLogicalType().asSummaryString()))
        for c in schema.getColumns()
    )

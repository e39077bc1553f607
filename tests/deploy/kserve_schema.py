"""JSON Schemas for KServe's resources, derived at test time from KServe's own Python SDK.

The `kserve` wheel carries a generated model class per API type (`kserve/models/*.py`) whose
`openapi_types` and `attribute_map` name every field, its JSON key and its type, and whose setters
refuse None for required fields. The wheel is downloaded (without its server dependencies, which
would clash with ours) and its model files are read as text: nothing of it is imported. Kubernetes
types it refers to (V1Container, V1ObjectMeta, ...) resolve to kubernetes-validate's strict schemas,
so a misspelt field anywhere in a ServingRuntime or InferenceService fails validation.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

KSERVE = "kserve==0.21.0"
_K8S_REF = "/api/_definitions.json#/$defs/"


def download_kserve(target: Path) -> Path:
    """The kserve wheel in `target` (pip's own download, no dependencies)."""
    target.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--dest", str(target), KSERVE],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return next(target.glob("kserve-*.whl"))


def _models(wheel: Path) -> dict[str, tuple[dict[str, str], dict[str, str], set[str]]]:
    """Class name -> (openapi_types, attribute_map, required python names)."""
    found = {}
    with zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            if not re.fullmatch(r"kserve/models/\w+\.py", name):
                continue
            source = archive.read(name).decode()
            for node in ast.parse(source).body:
                if not isinstance(node, ast.ClassDef):
                    continue
                tables = {}
                for stmt in node.body:
                    target = stmt.targets[0] if isinstance(stmt, ast.Assign) else None
                    if isinstance(target, ast.Name) and target.id in ("openapi_types", "attribute_map"):
                        tables[target.id] = ast.literal_eval(stmt.value)
                if "openapi_types" in tables:
                    text = ast.get_source_segment(source, node) or ""
                    required = set(re.findall(r"Invalid value for `(\w+)`, must not be `None`", text))
                    found[node.name] = (tables["openapi_types"], tables["attribute_map"], required)
    return found


def _k8s_definitions() -> dict:
    import kubernetes_validate

    root = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
    newest = max(
        (p for p in root.iterdir() if p.name.endswith("-local-strict")),
        key=lambda p: tuple(int(x) for x in re.findall(r"\d+", p.name.split("-")[0])),
    )
    text = (newest / "_definitions.json").read_text().replace(_K8S_REF, "#/$defs/")
    return json.loads(text)["$defs"]


def _k8s_key(class_name: str, k8s: dict) -> str | None:
    """V1Container -> io.k8s.api.core.v1.Container; ResourceQuantity -> ...resource.Quantity."""
    if class_name == "ResourceQuantity":
        return "io.k8s.apimachinery.pkg.api.resource.Quantity"
    match = re.fullmatch(r"K8sIoApi([A-Z][a-z]+)(V\d\w*?)([A-Z]\w*)", class_name)
    if match:
        group, version, kind = match.groups()
        key = f"io.k8s.api.{group.lower()}.{version.lower()}.{kind}"
        return key if key in k8s else None
    match = re.fullmatch(r"V(\d+(?:alpha\d+|beta\d+)?)([A-Z]\w*)", class_name)
    if not match:
        return None
    suffix = f".v{match.group(1)}.{match.group(2)}"
    candidates = [key for key in k8s if key.endswith(suffix)]
    for preferred in ("io.k8s.api.core.", "io.k8s.apimachinery.pkg.apis.meta."):
        for key in candidates:
            if key.startswith(preferred):
                return key
    return candidates[0] if len(candidates) == 1 else None


def schema(wheel: Path) -> dict:
    """One JSON Schema for ServingRuntime, ClusterServingRuntime and InferenceService (by `kind`)."""
    models = _models(wheel)
    k8s = _k8s_definitions()
    defs = dict(k8s)

    def type_schema(spec: str) -> dict:
        spec = spec.strip()
        if spec in ("str", "datetime", "date"):
            return {"type": "string"}
        if spec == "int":
            return {"type": "integer"}
        if spec == "float":
            return {"type": "number"}
        if spec == "bool":
            return {"type": "boolean"}
        if spec == "object":
            return {}
        if spec.startswith("list[") and spec.endswith("]"):
            return {"type": "array", "items": type_schema(spec[5:-1])}
        if spec.startswith("dict(") and spec.endswith(")"):
            return {"type": "object", "additionalProperties": type_schema(spec[5:-1].split(",", 1)[1])}
        if spec in models:
            return {"$ref": f"#/$defs/kserve.{spec}"}
        key = _k8s_key(spec, k8s)
        return {"$ref": f"#/$defs/{key}"} if key else {}

    for name, (types, attributes, required) in models.items():
        defs[f"kserve.{name}"] = {
            "type": "object",
            "properties": {attributes[attr]: type_schema(kind) for attr, kind in types.items()},
            "required": sorted(attributes[attr] for attr in required),
            "additionalProperties": False,
        }
    kinds = (
        ("ServingRuntime", "v1alpha1", "V1alpha1ServingRuntime"),
        ("ClusterServingRuntime", "v1alpha1", "V1alpha1ClusterServingRuntime"),
        ("InferenceService", "v1beta1", "V1beta1InferenceService"),
    )
    schema: dict = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {"kind": {"enum": [kind for kind, _, _ in kinds]}},
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "allOf": [
            {
                "if": {"properties": {"kind": {"const": kind}}},
                "then": {
                    "$ref": f"#/$defs/kserve.{model}",
                    "properties": {"apiVersion": {"const": f"serving.kserve.io/{version}"}},
                },
            }
            for kind, version, model in kinds
        ],
    }
    schema["$defs"] = _reachable(schema, defs)
    return schema


def _reachable(root: dict, defs: dict) -> dict:
    """The definitions `root` refers to, directly or through each other (a schema of a useful size)."""
    keep: dict = {}
    pending = [root]
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                key = ref[len("#/$defs/") :]
                if key not in keep:
                    keep[key] = defs[key]
                    pending.append(defs[key])
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)
    return keep

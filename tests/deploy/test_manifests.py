"""deploy/: every Kustomization renders, every resource validates against its schema (Kubernetes'
strict schemas through kubernetes-validate, KServe's derived from its SDK through
check-jsonschema), and what the manifests promise agrees with the server: the probes' paths, the
ports, the KServe arguments openinfer's own command line accepts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from openinfer.app.cli import serve_parser
from tests.deploy import kserve_schema
from tests.deploy.manifests import DEPLOY, find, kustomizations, render, standalone

KSERVE_KINDS = {"ServingRuntime", "ClusterServingRuntime", "InferenceService"}
BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def rendered() -> dict[str, list[dict]]:
    """Every manifest by where it comes from: a Kustomization folder or a standalone file."""
    out = {str(folder.relative_to(DEPLOY)): render(folder) for folder in kustomizations()}
    out.update({str(path.relative_to(DEPLOY)): docs for path, docs in standalone().items()})
    return out


@pytest.fixture(scope="module")
def kserve_schema_file(tmp_path_factory) -> Path:
    try:
        wheel = kserve_schema.download_kserve(tmp_path_factory.mktemp("kserve-wheel"))
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"the kserve wheel could not be downloaded ({exc.stderr.decode()[-300:]})")
    path = tmp_path_factory.mktemp("kserve-schema") / "kserve.json"
    path.write_text(json.dumps(kserve_schema.schema(wheel)))
    return path


def _check_jsonschema(schema: Path, instances: list[Path]) -> subprocess.CompletedProcess:
    command = [str(BIN / "check-jsonschema"), "--schemafile", str(schema), *map(str, instances)]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)


def test_every_kustomization_renders(rendered):
    assert {"kserve", "kustomize/base", "kustomize/overlays/autoscaling"} <= set(rendered)
    assert all(rendered.values())


def test_kubernetes_resources_pass_strict_validation(rendered, tmp_path):
    files = []
    for source, docs in rendered.items():
        for index, doc in enumerate(d for d in docs if d["kind"] not in KSERVE_KINDS):
            files.append(tmp_path / f"{source.replace('/', '_')}-{index}.yaml")
            files[-1].write_text(yaml.safe_dump(doc))
    assert len(files) >= 6
    command = [str(BIN / "kubernetes-validate"), "--strict", *map(str, files)]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "WARN" not in result.stdout + result.stderr, result.stdout + result.stderr
    assert result.stdout.count("passed for resource") == len(files)


def test_kserve_resources_pass_their_schemas(rendered, kserve_schema_file, tmp_path):
    instances, kinds = [], set()
    for source, docs in rendered.items():
        for index, doc in enumerate(d for d in docs if d["kind"] in KSERVE_KINDS):
            instances.append(tmp_path / f"{source.replace('/', '_')}-{index}.yaml")
            instances[-1].write_text(yaml.safe_dump(doc))
            kinds.add(doc["kind"])
    assert kinds == KSERVE_KINDS
    result = _check_jsonschema(kserve_schema_file, instances)
    assert result.returncode == 0, result.stdout + result.stderr


def test_derived_kserve_schema_refuses_a_misspelt_field(kserve_schema_file, tmp_path):
    """The derived schema is strict where KServe's CRDs are: an unknown field fails."""
    runtime = yaml.safe_load((DEPLOY / "kserve" / "serving-runtime.yaml").read_text())
    runtime["spec"]["protocolVersion"] = runtime["spec"].pop("protocolVersions")
    runtime["spec"]["containers"][0]["arg"] = runtime["spec"]["containers"][0].pop("args")
    instance = tmp_path / "bad.yaml"
    instance.write_text(yaml.safe_dump(runtime))
    result = _check_jsonschema(kserve_schema_file, [instance])
    assert result.returncode == 1
    assert "protocolVersion" in result.stdout and "arg" in result.stdout


def _runtime_container(runtime: dict) -> dict:
    return runtime["spec"]["containers"][0]


def test_serving_runtimes_take_kserve_triton_arguments(rendered):
    namespaced = find(rendered["kserve"], "ServingRuntime")
    cluster = find(rendered["kserve/cluster-serving-runtime.yaml"], "ClusterServingRuntime")
    assert namespaced["spec"] == cluster["spec"]
    spec = namespaced["spec"]
    assert spec["protocolVersions"] == ["v2", "grpc-v2"]
    assert {f["name"] for f in spec["supportedModelFormats"]} == {"triton", "onnx", "pytorch", "python"}
    container = _runtime_container(namespaced)
    assert container["command"] == ["openinfer", "serve"]
    # The arguments KServe's Triton runtime passes, each under tritonserver's spelling.
    assert {"--model-store=/mnt/models", "--grpc-port=9000", "--http-port=8080", "--allow-grpc=true"} <= set(
        container["args"]
    )
    options = serve_parser().parse_args(container["args"])
    assert options.model_repository == ["/mnt/models"]
    assert (options.http_port, options.grpc_port) == (8080, 9000)
    assert options.allow_grpc is True and options.allow_http is True
    assert namespaced["spec"]["annotations"]["prometheus.kserve.io/port"] == str(options.metrics_port)


def test_inference_service_names_the_runtime_and_a_format_it_serves(rendered):
    service = find(rendered["kserve"], "InferenceService")
    runtime = find(rendered["kserve"], "ServingRuntime")
    model = service["spec"]["predictor"]["model"]
    assert model["runtime"] == runtime["metadata"]["name"]
    assert model["modelFormat"]["name"] in {f["name"] for f in runtime["spec"]["supportedModelFormats"]}


def test_base_deployment_probes_ports_service_and_budget(rendered):
    docs = rendered["kustomize/base"]
    deployment = find(docs, "Deployment", "openinfer")
    pod = deployment["spec"]["template"]
    labels = pod["metadata"]["labels"]
    container = pod["spec"]["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"http": 8000, "grpc": 8001, "metrics": 8002}
    assert container["livenessProbe"]["httpGet"] == {"path": "/v2/health/live", "port": "http"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/v2/health/ready", "port": "http"}
    assert container["startupProbe"]["httpGet"] == {"path": "/v2/health/ready", "port": "http"}
    options = serve_parser().parse_args(container["args"])
    assert (options.http_port, options.grpc_port, options.metrics_port) == (8000, 8001, 8002)
    assert pod["metadata"]["annotations"]["prometheus.io/port"] == "8002"
    service = find(docs, "Service", "openinfer")
    assert {p["name"]: p["targetPort"] for p in service["spec"]["ports"]} == {
        "http": "http",
        "grpc": "grpc",
        "metrics": "metrics",
    }
    budget = find(docs, "PodDisruptionBudget", "openinfer")
    for selector in (service["spec"]["selector"], budget["spec"]["selector"]["matchLabels"]):
        assert selector.items() <= labels.items()
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True


def test_autoscaling_overlay_scales_the_deployment_on_the_adapter_metric(rendered):
    docs = rendered["kustomize/overlays/autoscaling"]
    hpa = find(docs, "HorizontalPodAutoscaler")
    target = hpa["spec"]["scaleTargetRef"]
    assert find(docs, target["kind"], target["name"])
    adapter = yaml.safe_load(find(docs, "ConfigMap", "openinfer-prometheus-adapter")["data"]["config.yaml"])
    served = {rule["name"]["as"] for rule in adapter["rules"]}
    assert {m["pods"]["metric"]["name"] for m in hpa["spec"]["metrics"]} <= served
    query = " ".join(rule["metricsQuery"] for rule in adapter["rules"])
    assert "nv_inference_queue_duration_us" in query and "nv_inference_request_success" in query

"""Every PromQL expression we ship (the Grafana dashboard, its variables, the prometheus-adapter
rule) checked by Prometheus' own tools against a real scrape of a running openinfer.

The server is started with the exact arguments of the KServe ServingRuntime (paths and ports moved
to this machine); a real Prometheus scrapes it every second, labelling the target with namespace
and pod as Kubernetes service discovery would; `promtool check metrics` lints the exposition,
`promtool check rules` parses every expression and `promtool query instant` runs each one. An
expression over Triton's GPU families must come back empty on a host without a GPU, and name only
families openinfer reports there.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.request

import numpy as np
import pytest
import tritonclient.http as httpclient
import yaml

from openinfer.frontends.gpu_metrics import FAMILY_NAMES as GPU_FAMILIES
from tests.deploy.manifests import ADAPTER_RULES, DASHBOARD, DEPLOY
from tests.helpers import EXAMPLES, ROOT, Server, free_port, free_ports, http_status, stop_process

PROMTOOL = shutil.which("promtool")
PROMETHEUS = shutil.which("prometheus")
pytestmark = pytest.mark.skipif(
    PROMTOOL is None or PROMETHEUS is None,
    reason="needs Debian's `prometheus` package (promtool and prometheus; .ci/run installs it)",
)

NAMESPACE, POD = "default", "openinfer-0"
#: Grafana's and prometheus-adapter's template variables, as they expand for one pod.
SUBSTITUTIONS = {
    "$__rate_interval": "10s",
    "$namespace": NAMESPACE,
    "$pod": ".*",
    "$model": ".*",
    "<<.LabelMatchers>>": f'namespace="{NAMESPACE}",pod="{POD}"',
    "<<.GroupBy>>": "pod",
}
#: Lint findings that are Triton's naming, which openinfer keeps so Triton's dashboards work.
TRITON_NAMING = (
    'counter metrics should have "_total" suffix',
    "metric names should not contain abbreviated units",
    'non-histogram and non-summary metrics should not have "_count" suffix',
)


def _expand(expr: str) -> str:
    for variable, value in SUBSTITUTIONS.items():
        expr = expr.replace(variable, value)
    return expr


def expressions() -> dict[str, str]:
    """Every expression we ship, by where it comes from, template variables expanded."""
    out = {}
    dashboard = json.loads(DASHBOARD.read_text())
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            out[f"panel '{panel['title']}' {target['refId']}"] = _expand(target["expr"])
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            match = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", variable["query"]["query"])
            assert match, variable["query"]
            out[f"variable ${variable['name']}"] = _expand(match.group(1))
    for index, rule in enumerate(yaml.safe_load(ADAPTER_RULES.read_text())["rules"]):
        out[f"adapter rule {index} seriesQuery"] = _expand(rule["seriesQuery"])
        out[f"adapter rule {index} metricsQuery"] = _expand(rule["metricsQuery"])
    return out


def _metric_names(expr: str) -> set[str]:
    return set(re.findall(r"\b(nv_\w+)", expr))


@pytest.fixture(scope="module")
def kserve_server(tmp_path_factory):
    """`openinfer serve` with the ServingRuntime's command and arguments, its fixed ports and
    /mnt/models moved to free ports and the bundled repository."""
    runtime = yaml.safe_load((DEPLOY / "kserve" / "serving-runtime.yaml").read_text())
    container = runtime["spec"]["containers"][0]
    assert container["command"] == ["openinfer", "serve"]
    server = Server(EXAMPLES)
    server.http_port, server.grpc_port, server.metrics_port = free_ports(3)
    moved = {"8080": server.http_port, "9000": server.grpc_port}
    args = []
    for arg in container["args"]:
        arg = arg.replace("/mnt/models", str(EXAMPLES))
        for fixed, free in moved.items():
            arg = re.sub(rf"^(--\w+-port=){fixed}$", rf"\g<1>{free}", arg)
        args.append(arg)
    assert str(server.http_port) in " ".join(args) and str(server.grpc_port) in " ".join(args)
    server.log_path = tmp_path_factory.mktemp("kserve-server") / "serve.log"
    command = [sys.executable, "-m", "openinfer", "serve", *args, f"--metrics-port={server.metrics_port}"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with open(server.log_path, "wb") as log:
        server.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=env)
    deadline = time.monotonic() + 120
    while http_status(f"http://127.0.0.1:{server.http_port}/v2/health/ready") != 200:
        assert server.process.poll() is None and time.monotonic() < deadline, server.log()
        time.sleep(0.2)
    yield server
    assert server.stop() == 0, server.log()


def _traffic(server: Server, stop: threading.Event) -> None:
    client = httpclient.InferenceServerClient(server.http_url)
    inputs = [httpclient.InferInput(name, [4], "FP32") for name in ("INPUT0", "INPUT1")]
    for tensor in inputs:
        tensor.set_data_from_numpy(np.ones(4, dtype=np.float32))
    for _ in range(2000):  # bounded: stops on its own
        if stop.is_set():
            return
        client.infer("add_sub", inputs)
        time.sleep(0.02)


@pytest.fixture(scope="module")
def prometheus(kserve_server, tmp_path_factory):
    """A real Prometheus scraping the server each second, under traffic, until 5 scrapes are in."""
    folder = tmp_path_factory.mktemp("prometheus")
    target = f"127.0.0.1:{kserve_server.metrics_port}"
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [
            {
                "job_name": "openinfer",
                "static_configs": [{"targets": [target], "labels": {"namespace": NAMESPACE, "pod": POD}}],
            }
        ],
    }
    (folder / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = open(folder / "prometheus.log", "wb")
    process = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={folder / 'prometheus.yml'}",
            f"--storage.tsdb.path={folder / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    stop = threading.Event()
    traffic = threading.Thread(target=_traffic, args=(kserve_server, stop), daemon=True)
    traffic.start()
    try:
        deadline = time.monotonic() + 90
        while http_status(f"{url}/-/ready") != 200:
            assert process.poll() is None and time.monotonic() < deadline, (folder / "prometheus.log").read_text()
            time.sleep(0.2)
        while True:
            assert process.poll() is None, (folder / "prometheus.log").read_text()
            result = _query(url, 'count_over_time(up{job="openinfer"}[1m])')
            if result and float(result[0]["value"][1]) >= 5 and float(
                _query(url, "min_over_time(up[1m])")[0]["value"][1]
            ) == 1:
                break
            assert time.monotonic() < deadline, (folder / "prometheus.log").read_text()
            time.sleep(0.5)
        yield url
    finally:
        stop.set()
        traffic.join(30)
        stop_process(process)
        log.close()


def _query(url: str, expr: str) -> list[dict]:
    command = [PROMTOOL, "query", "instant", "-o", "json", url, expr]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, f"{expr}\n{result.stderr}"
    return json.loads(result.stdout) if result.stdout.strip() else []


def test_exposition_passes_promtool_check_metrics(kserve_server):
    text = urllib.request.urlopen(kserve_server.metrics_url, timeout=10).read()
    result = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, timeout=60, check=False)
    findings = [line for line in (result.stdout + result.stderr).decode().splitlines() if line.strip()]
    assert result.returncode in (0, 3), findings  # 3: lint findings only; 1: unparseable
    assert not [line for line in findings if "error" in line.lower()], findings
    assert [line for line in findings if not any(known in line for known in TRITON_NAMING)] == []


def test_every_expression_parses_as_a_rule(tmp_path):
    exprs = expressions()
    assert len(exprs) >= 20
    rules = {
        "groups": [
            {
                "name": "openinfer-shipped-expressions",
                "rules": [{"record": f"openinfer:check:{i}", "expr": expr} for i, expr in enumerate(exprs.values())],
            }
        ]
    }
    path = tmp_path / "rules.yml"
    path.write_text(yaml.safe_dump(rules))
    result = subprocess.run([PROMTOOL, "check", "rules", str(path)], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_expression_answers_over_the_scraped_server(prometheus, kserve_server):
    exposed = {line.split()[2] for line in urllib.request.urlopen(kserve_server.metrics_url).read().decode().splitlines()
               if line.startswith("# TYPE")}
    empty = []
    for where, expr in expressions().items():
        names = _metric_names(expr)
        assert names, f"{where}: names no openinfer metric"
        result = _query(prometheus, expr)
        if names <= set(GPU_FAMILIES) and not names & exposed:
            assert result == [], f"{where}: GPU series on a host without a GPU?"
            continue
        assert names <= exposed, f"{where}: {sorted(names - exposed)} not on /metrics"
        if not result:
            empty.append(where)
    assert empty == [], f"no series for: {empty}"


def test_request_rate_and_adapter_metric_see_the_traffic(prometheus):
    exprs = expressions()
    rate = _query(prometheus, exprs["panel 'Successful requests / s' A"])
    by_model = {sample["metric"]["model"]: float(sample["value"][1]) for sample in rate}
    assert by_model["add_sub"] > 0
    adapter = _query(prometheus, exprs["adapter rule 0 metricsQuery"])
    assert [sample["metric"] for sample in adapter] == [{"pod": POD}]
    assert float(adapter[0]["value"][1]) >= 0

"""The ONNX row: one ONNX model served by openinfer and by its Python peers, same run, ratios.

openinfer serves it with its onnxruntime backend; MLServer and KServe have no ONNX runtime of
their own, so each serves it through a custom model written the way their docs write one
(an `MLModel` / `kserve.Model` holding an onnxruntime `InferenceSession`). Every server gets
one session with one intra-op thread, so the frameworks around the session are what differ.
Two models, built with `onnx`: `mlp_onnx`, a small MLP on INPUT0 [1, 256] (per-request
overhead dominates), and `image_onnx`, global average pooling plus a linear layer on an image
INPUT0 [1, 3, 64, 64] (48 KiB per request: tensor handling dominates); both answer OUTPUT0
[1, 16] (FP32). Load comes from `openinfer bench` (perf_analyzer's method: stable windows).

    python -m benchmarks.onnx_peers [--protocols http,grpc] [--concurrency 1,8] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np

from openinfer.bench.cli import run_v2
from openinfer.bench.control import ControlError, connect
from openinfer.bench.options import Options
from openinfer.bench.runner import RunError

from .peers import ensure_peer
from .servers import RESULTS, ROOT, free_ports

CLASSES = 16
#: model name -> input shape (the output is always [1, CLASSES]).
MODELS: dict[str, list[int]] = {"mlp_onnx": [1, 256], "image_onnx": [1, 3, 64, 64]}


def openinfer_config(name: str) -> str:
    dims = ", ".join(str(d) for d in MODELS[name])
    return f"""
name: "{name}"
platform: "onnxruntime_onnx"
max_batch_size: 0
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ {dims} ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 1, {CLASSES} ] }} ]
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
parameters {{ key: "intra_op_thread_count" value: {{ string_value: "1" }} }}
"""


MLSERVER_RUNTIME = '''
"""An onnxruntime session behind MLServer's custom-runtime API."""

import onnxruntime as ort
from mlserver import MLModel
from mlserver.codecs import NumpyCodec
from mlserver.types import InferenceRequest, InferenceResponse
from mlserver.utils import get_model_uri


class OnnxModel(MLModel):
    async def load(self) -> bool:
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        uri = await get_model_uri(self._settings)
        self._session = ort.InferenceSession(uri, options, providers=["CPUExecutionProvider"])
        self._outputs = [o.name for o in self._session.get_outputs()]
        return True

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        feed = {i.name: NumpyCodec.decode_input(i) for i in payload.inputs}
        values = self._session.run(self._outputs, feed)
        outputs = [NumpyCodec.encode_output(name=n, payload=v) for n, v in zip(self._outputs, values)]
        return InferenceResponse(model_name=self.name, id=payload.id, outputs=outputs)
'''

KSERVE_MODEL = '''
"""onnxruntime sessions behind KServe's custom-model API."""

import argparse
import json

import onnxruntime as ort
from kserve import InferOutput, InferRequest, InferResponse, Model, ModelServer, model_server
from kserve.utils.utils import generate_uuid


class OnnxModel(Model):
    def __init__(self, name, path, input_shape, output_shape):
        super().__init__(name)
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        self.session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        self.outputs = [o.name for o in self.session.get_outputs()]
        self.shapes = (input_shape, output_shape)
        self.ready = True

    def get_input_types(self):
        return [{"name": "INPUT0", "datatype": "FP32", "shape": self.shapes[0]}]

    def get_output_types(self):
        return [{"name": "OUTPUT0", "datatype": "FP32", "shape": self.shapes[1]}]

    def predict(self, payload: InferRequest, headers=None, response_headers=None):
        feed = {i.name: i.as_numpy() for i in payload.inputs}
        values = self.session.run(self.outputs, feed)
        outputs = []
        for name, value in zip(self.outputs, values):
            out = InferOutput(name=name, shape=list(value.shape), datatype="FP32")
            out.set_data_from_numpy(value, binary_data=payload.from_grpc)
            outputs.append(out)
        return InferResponse(model_name=self.name, infer_outputs=outputs,
                             response_id=payload.id or generate_uuid())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(parents=[model_server.parser])
    parser.add_argument("--models", required=True, help="JSON: [[name, path, input_shape, output_shape]]")
    args, _ = parser.parse_known_args()
    ModelServer().start([OnnxModel(*spec) for spec in json.loads(args.models)])
'''


def build_model(name: str) -> bytes:
    """The named benchmark graph with fixed random weights."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    shape = MODELS[name]

    def weight(array: np.ndarray, tensor: str):
        return numpy_helper.from_array(array.astype(np.float32), tensor)

    if name == "mlp_onnx":
        hidden = 256
        nodes = [
            helper.make_node("Gemm", ["INPUT0", "W1", "B1"], ["H"]),
            helper.make_node("Relu", ["H"], ["R"]),
            helper.make_node("Gemm", ["R", "W2", "B2"], ["OUTPUT0"]),
        ]
        weights = [
            weight(rng.standard_normal((shape[1], hidden)), "W1"),
            weight(np.zeros(hidden), "B1"),
            weight(rng.standard_normal((hidden, CLASSES)), "W2"),
            weight(np.zeros(CLASSES), "B2"),
        ]
    else:  # image_onnx: per-channel mean, then a linear classifier
        nodes = [
            helper.make_node("GlobalAveragePool", ["INPUT0"], ["P"]),
            helper.make_node("Flatten", ["P"], ["F"]),
            helper.make_node("Gemm", ["F", "W", "B"], ["OUTPUT0"]),
        ]
        weights = [weight(rng.standard_normal((shape[1], CLASSES)), "W"), weight(np.zeros(CLASSES), "B")]
    graph = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, [1, CLASSES])],
        initializer=weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model.SerializeToString()


class Process:
    """A server under test: started on free ports, ready when the model is, stopped by group."""

    def __init__(self, key: str, label: str, argv: list[str], http: int, grpc: int, cwd: Path) -> None:
        self.key, self.label, self.argv, self.cwd = key, label, argv, cwd
        self.ports = {"http": http, "grpc": grpc}
        self.proc: subprocess.Popen[bytes] | None = None

    def url(self, protocol: str) -> str:
        return f"127.0.0.1:{self.ports[protocol]}"

    def start(self, timeout: float = 180.0) -> None:
        log = (RESULTS / f"onnx_{self.key}.log").open("wb")
        self.proc = subprocess.Popen(self.argv, cwd=self.cwd, stdout=log, stderr=log, start_new_session=True,
                                     env=dict(os.environ, PYTHONUNBUFFERED="1"))
        deadline = time.monotonic() + timeout
        for protocol in ("http", "grpc"):
            while True:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"{self.label} exited with {self.proc.returncode}; see {log.name}")
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"{self.label} not ready after {timeout:.0f} s; see {log.name}")
                try:
                    control = connect(protocol, self.url(protocol))
                    try:
                        if all(control.model_ready(name, "") for name in MODELS):
                            break
                    finally:
                        control.close()
                except (ControlError, OSError, ConnectionError):
                    pass
                time.sleep(0.3)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)


def _with_onnxruntime(name: str, install: bool) -> tuple[Path | None, str]:
    """The peer's interpreter with onnxruntime importable (installed into its venv if needed)."""
    py, why = ensure_peer(name, install)
    if py is None:
        return None, why
    if subprocess.call([str(py), "-c", "import onnxruntime"], stderr=subprocess.DEVNULL) == 0:
        return py, ""
    if not install:
        return None, f"onnxruntime is not installed in the {name} venv (run without --no-install)"
    if subprocess.call([str(py), "-m", "pip", "install", "-q", "onnxruntime"]) != 0:
        return None, f"onnxruntime did not install into the {name} venv"
    return py, ""


def make_servers(keys: list[str], work: Path, install: bool) -> tuple[list[Process], dict[str, str]]:
    servers: list[Process] = []
    skipped: dict[str, str] = {}
    files = {name: work / f"{name}.onnx" for name in MODELS}
    for key in keys:
        if key == "openinfer":
            repo = work / "openinfer"
            for name in MODELS:
                (repo / name / "1").mkdir(parents=True)
                (repo / name / "config.pbtxt").write_text(openinfer_config(name))
                (repo / name / "1" / "model.onnx").write_bytes(files[name].read_bytes())
            http, grpc, metrics = free_ports(3)
            argv = [sys.executable, "-m", "openinfer", "serve", "--model-repository", str(repo),
                    "--http-port", str(http), "--grpc-port", str(grpc), "--metrics-port", str(metrics),
                    "--http-address", "127.0.0.1", "--grpc-address", "127.0.0.1"]
            servers.append(Process(key, "openinfer (onnxruntime backend)", argv, http, grpc, ROOT))
        elif key in ("mlserver", "mlserver_pw0"):
            py, why = _with_onnxruntime("mlserver", install)
            label = "MLServer 1.7.1 custom runtime" + (" (parallel_workers: 0)" if key == "mlserver_pw0" else "")
            if py is None:
                skipped[label] = why
                continue
            folder = work / key
            for name, shape in MODELS.items():
                (folder / name).mkdir(parents=True)
                (folder / name / "onnx_runtime.py").write_text(textwrap.dedent(MLSERVER_RUNTIME))
                (folder / name / "model.onnx").write_bytes(files[name].read_bytes())
                (folder / name / "model-settings.json").write_text(json.dumps({
                    "name": name, "implementation": "onnx_runtime.OnnxModel",
                    "parameters": {"uri": "./model.onnx"},
                    "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": shape}],
                    "outputs": [{"name": "OUTPUT0", "datatype": "FP32", "shape": [1, CLASSES]}],
                }))
            http, grpc, metrics = free_ports(3)
            settings = {"http_port": http, "grpc_port": grpc, "metrics_port": metrics, "host": "127.0.0.1",
                        "debug": False}
            if key == "mlserver_pw0":
                settings["parallel_workers"] = 0
            (folder / "settings.json").write_text(json.dumps(settings))
            servers.append(Process(key, label, [str(py.parent / "mlserver"), "start", str(folder)], http, grpc,
                                   folder))
        elif key == "kserve":
            py, why = _with_onnxruntime("kserve", install)
            label = "KServe custom model"
            if py is None:
                skipped[label] = why
                continue
            script = work / "kserve_onnx.py"
            script.write_text(KSERVE_MODEL)
            specs = [[name, str(files[name]), shape, [1, CLASSES]] for name, shape in MODELS.items()]
            http, grpc = free_ports(2)
            argv = [str(py), str(script), "--models", json.dumps(specs), "--model_name", "unused",
                    "--http_port", str(http), "--grpc_port", str(grpc)]
            servers.append(Process(key, label, argv, http, grpc, work))
        else:
            raise SystemExit(f"unknown server {key!r}")
    return servers, skipped


def measure(server: Process, model: str, protocol: str, concurrency: int, ns: argparse.Namespace) -> dict[str, Any]:
    opts = Options(
        model=model, url=server.url(protocol), protocol=protocol,
        concurrency=[concurrency], measurement_interval_ms=ns.interval_ms, max_trials=ns.max_trials,
        stability_percentage=ns.stability, warmup_ms=ns.warmup_ms,
    )
    level = run_v2(opts, progress_enabled=False)["levels"][0]
    return {
        "throughput": level["throughput"],
        "p50_ms": level["latency_us"]["p50"] / 1000,
        "p99_ms": level["latency_us"]["p99"] / 1000,
        "stable": level["stable"],
    }


def render(cells: list[dict[str, Any]], skipped: dict[str, str]) -> str:
    """Markdown tables, one per model, with openinfer's throughput over each peer's."""
    ours = {
        (c["model"], c["protocol"], c["concurrency"]): c
        for c in cells
        if c["server"] == "openinfer" and "throughput" in c
    }
    load = os.getloadavg()[0]
    lines = [
        "# The ONNX row: openinfer's onnxruntime backend against MLServer and KServe",
        "",
        (
            f"Written by `python -m benchmarks.onnx_peers` on {time.strftime('%Y-%m-%d')} ({os.cpu_count()} cores, "
            f"load average {load:.1f} at the end). Every server runs one onnxruntime session with one "
            "intra-op thread per model. Ratio = openinfer's infer/s over the peer's for the same model, "
            "protocol and concurrency; `unstable` = its windows did not agree within the limit."
        ),
    ]
    for model, shape in MODELS.items():
        lines += [
            "",
            f"## {model}: INPUT0 {shape} -> OUTPUT0 [1, {CLASSES}] (FP32)",
            "",
            "| server | protocol | concurrency | infer/s | p50 ms | p99 ms | openinfer / this |",
            "|---|---|---:|---:|---:|---:|---:|",
        ]
        for c in (c for c in cells if c["model"] == model):
            if "error" in c:
                lines.append(f"| {c['label']} | {c['protocol']} | {c['concurrency']} | failed: {c['error']} | | | |")
                continue
            mine = ours.get((model, c["protocol"], c["concurrency"]))
            peer = c["server"] != "openinfer"
            ratio = f"{mine['throughput'] / c['throughput']:.2f}x" if peer and mine and c["throughput"] else ""
            stable = "" if c["stable"] else " (unstable)"
            lines.append(
                f"| {c['label']} | {c['protocol']} | {c['concurrency']} | {c['throughput']:.0f}{stable} | "
                f"{c['p50_ms']:.2f} | {c['p99_ms']:.2f} | {ratio} |"
            )
    if skipped:
        lines += ["", "Skipped:", ""] + [f"- {label}: {why}" for label, why in skipped.items()]
    return "\n".join(lines) + "\n"


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.onnx_peers", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    # MLServer twice, as in the main suite: its default worker process and `parallel_workers: 0`.
    p.add_argument("--servers", default="openinfer,mlserver,mlserver_pw0,kserve")
    p.add_argument("--protocols", default="http,grpc")
    p.add_argument("--concurrency", default="1,8")
    p.add_argument("--interval-ms", type=int, default=2000)
    p.add_argument("--max-trials", type=int, default=4)
    p.add_argument("--stability", type=float, default=15.0)
    p.add_argument("--warmup-ms", type=int, default=1000)
    p.add_argument("--no-install", action="store_true", help="skip peers not yet installed")
    p.add_argument("--out", default=str(Path(__file__).resolve().parent / "ONNX_RESULTS.md"))
    p.add_argument("--quick", action="store_true", help="short windows: a smoke run")
    ns = p.parse_args(argv)
    if ns.quick:
        ns.interval_ms, ns.max_trials, ns.warmup_ms = 1000, 3, 300
    return ns


def main(argv: list[str]) -> int:
    ns = parse(argv)
    RESULTS.mkdir(parents=True, exist_ok=True)
    cells: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="openinfer-onnx-bench-") as tmp:
        work = Path(tmp)
        for name in MODELS:
            (work / f"{name}.onnx").write_bytes(build_model(name))
        servers, skipped = make_servers(ns.servers.split(","), work, not ns.no_install)
        for server in servers:
            print(f"== {server.label}", file=sys.stderr)
            try:
                server.start()
            except RuntimeError as exc:
                skipped[server.label] = str(exc)
                print(f"skipping {server.label}: {exc}", file=sys.stderr)
                continue
            try:
                for model in MODELS:
                    for protocol in ns.protocols.split(","):
                        for concurrency in (int(c) for c in ns.concurrency.split(",")):
                            print(f"-- {server.label} {model} {protocol} c={concurrency}", file=sys.stderr)
                            cell: dict[str, Any] = {"server": server.key, "label": server.label, "model": model,
                                                    "protocol": protocol, "concurrency": concurrency}
                            try:
                                cell.update(measure(server, model, protocol, concurrency, ns))
                            except (RunError, ControlError, OSError) as exc:
                                cell["error"] = str(exc)
                            cells.append(cell)
            finally:
                server.stop()
    (RESULTS / "onnx.json").write_text(json.dumps({"cells": cells, "skipped": skipped}, indent=2))
    text = render(cells, skipped)
    Path(ns.out).write_text(text)
    print(text)
    return 0 if any(c["server"] == "openinfer" and "throughput" in c for c in cells) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""What the dynamic batcher buys: one model, with and without `dynamic_batching`.

The model's `execute` costs a fixed 2 ms per call whatever the number of requests in it, as
an accelerator roughly does. Driven at concurrency 64, the plain scheduler pays that cost
once per request; the dynamic batcher pays it once per batch. Both models run in the same
server, are measured with `openinfer bench` (perf_analyzer's method: stable windows), and
the throughput ratio is printed.

    python -m benchmarks.batching [--protocol grpc] [--concurrency 64] [--json results.json]
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
import urllib.error
import urllib.request
from pathlib import Path

from openinfer.bench.cli import run_v2
from openinfer.bench.options import Options

from .servers import free_ports, wait_http_ready

ROOT = Path(__file__).resolve().parents[1]
EXECUTE_COST_S = 0.002

MODEL_PY = f'''
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """A fixed cost per execute call, then every request gets its input back."""

    def execute(self, requests):
        time.sleep({EXECUTE_COST_S})
        return [
            pb_utils.InferenceResponse([
                pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())
            ])
            for r in requests
        ]
'''

CONFIG = """
backend: "python"
max_batch_size: 64
input {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] }}
output {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] }}
instance_group {{ kind: KIND_CPU count: 1 }}
{scheduling}
"""

MODELS = {
    "fixed_cost": "",
    "fixed_cost_batched": "dynamic_batching { }",
}


def write_repository(root: Path) -> None:
    for name, scheduling in MODELS.items():
        (root / name / "1").mkdir(parents=True)
        (root / name / "config.pbtxt").write_text(CONFIG.format(scheduling=scheduling))
        (root / name / "1" / "model.py").write_text(textwrap.dedent(MODEL_PY))


class ServerProcess:
    """`openinfer serve` on free ports, serving the two models."""

    def __init__(self, repository: Path, log_path: Path) -> None:
        self.http_port, self.grpc_port, self.metrics_port = free_ports(3)
        command = [
            sys.executable, "-m", "openinfer", "serve",
            "--model-repository", str(repository),
            "--http-port", str(self.http_port), "--grpc-port", str(self.grpc_port),
            "--metrics-port", str(self.metrics_port),
            "--http-address", "127.0.0.1", "--grpc-address", "127.0.0.1",
        ]
        self.log = log_path.open("wb")
        self.process = subprocess.Popen(command, cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT)

    def url(self, protocol: str) -> str:
        return f"127.0.0.1:{self.grpc_port if protocol == 'grpc' else self.http_port}"

    def wait_ready(self, timeout: float = 120) -> None:
        state = wait_http_ready(self.process, f"http://127.0.0.1:{self.http_port}/v2/health/ready", timeout)
        if state == "exited":
            raise RuntimeError(f"server exited with {self.process.returncode}; see {self.log.name}")
        if state == "timeout":
            raise RuntimeError(f"server not ready after {timeout}s; see {self.log.name}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.log.close()


def measure(server: ServerProcess, model: str, ns: argparse.Namespace) -> dict:
    options = Options(
        model=model,
        url=server.url(ns.protocol),
        protocol=ns.protocol,
        shapes={"INPUT0": [ns.elements]},
        concurrency=[ns.concurrency],
        measurement_interval_ms=ns.interval_ms,
        max_trials=ns.max_trials,
        warmup_ms=1000,
    )
    level = run_v2(options, progress_enabled=False)["levels"][0]
    server_side = level.get("server") or {}
    return {
        "model": model,
        "throughput": level["throughput"],
        "p50_ms": level["latency_us"]["p50"] / 1000,
        "p99_ms": level["latency_us"]["p99"] / 1000,
        "stable": level["stable"],
        "server": server_side,
    }


def batch_sizes(server: ServerProcess, model: str) -> tuple[int, int]:
    """Executions and inferences the server counted for a model (statistics extension)."""
    url = f"http://127.0.0.1:{server.http_port}/v2/models/{model}/stats"
    with urllib.request.urlopen(url, timeout=10) as reply:
        stats = json.loads(reply.read())["model_stats"][0]
    return int(stats["execution_count"]), int(stats["inference_count"])


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.batching", description=__doc__.split("\n\n")[0])
    p.add_argument("--protocol", choices=("http", "grpc"), default="grpc")
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--elements", type=int, default=16, help="FP32 values per request")
    p.add_argument("--interval-ms", type=int, default=4000, help="measurement window")
    p.add_argument("--max-trials", type=int, default=6)
    p.add_argument("--json", type=Path, help="also write the results here")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    ns = parse(sys.argv[1:] if argv is None else argv)
    with tempfile.TemporaryDirectory(prefix="openinfer-batching-") as tmp:
        repository = Path(tmp) / "models"
        write_repository(repository)
        server = ServerProcess(repository, Path(tmp) / "server.log")
        try:
            server.wait_ready()
            rows = []
            for model in MODELS:
                row = measure(server, model, ns)
                row["executions"], row["inferences"] = batch_sizes(server, model)
                rows.append(row)
        except BaseException:
            server.stop()
            sys.stderr.write((Path(tmp) / "server.log").read_text(errors="replace")[-4000:])
            raise
        server.stop()
    plain, batched = rows
    ratio = batched["throughput"] / plain["throughput"] if plain["throughput"] else float("inf")
    print(f"execute() costs {EXECUTE_COST_S * 1000:.0f} ms per call; {ns.protocol}, concurrency "
          f"{ns.concurrency}, {ns.elements} FP32 per request, {os.cpu_count()} CPUs")
    print(f"{'model':<22}{'infer/s':>10}{'p50 ms':>9}{'p99 ms':>9}{'req/execute':>13}")
    for row in rows:
        per_call = row["inferences"] / row["executions"] if row["executions"] else 0
        print(f"{row['model']:<22}{row['throughput']:>10.0f}{row['p50_ms']:>9.1f}{row['p99_ms']:>9.1f}"
              f"{per_call:>13.1f}")
    print(f"dynamic batching: {ratio:.1f}x the throughput")
    if ns.json:
        ns.json.write_text(json.dumps({"rows": rows, "ratio": ratio, "args": {
            k: str(v) for k, v in vars(ns).items()}}, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())

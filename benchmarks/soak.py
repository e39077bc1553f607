"""Soak: mixed HTTP, gRPC and OpenAI traffic for N minutes while a model is unloaded and
loaded again and again; reports requests served, errors, p99 latency and RSS over time.

    python -m benchmarks.soak --minutes 30                 # the long run (not in CI)
    python -m benchmarks.soak --minutes 2 --interval 10 --json soak.json

Every answer is checked (values, not just status). Healthy models must see zero errors; the
model being churned may refuse calls while it is unloaded ("churn refused", expected), but
must never answer wrongly. RSS is sampled for the server process and for the server plus its
model workers; after the warm-up window it must not grow past `--max-rss-growth-mib`.
Exit status 0 when both hold. A short run of the same code is in tests/hardening.
"""

from __future__ import annotations

import argparse
import json
import queue
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx
import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.helpers import EXAMPLES, Server, free_port, write_model
from tests.llm_fixtures import build_tokenizer
from tests.openai import mock_models

KINDS = ("http", "grpc", "grpc_stream", "openai", "churn")


@dataclass
class Window:
    """One reporting interval."""

    end_s: float
    served: dict[str, int]
    errors: dict[str, int]
    churn_refused: int
    p99_ms: dict[str, float]
    rss_server_mib: float
    rss_total_mib: float


@dataclass
class Report:
    seconds: float
    windows: list[Window] = field(default_factory=list)
    served: dict[str, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    error_samples: list[str] = field(default_factory=list)
    churn_cycles: int = 0
    churn_refused: int = 0
    rss_growth_mib: float = 0.0  # server process, after the warm-up window
    rss_total_growth_mib: float = 0.0  # server plus model workers, after warm-up

    @property
    def healthy_errors(self) -> int:
        return sum(self.errors.values())

    def table(self) -> str:
        head = "| t (s) | served | errors | churn refused | p99 http / grpc / stream / openai (ms) | RSS server / total (MiB) |"
        rows = [head, "|---:|---:|---:|---:|---|---|"]
        for w in self.windows:
            p99 = " / ".join(f"{w.p99_ms.get(k, 0):.1f}" for k in ("http", "grpc", "grpc_stream", "openai"))
            rows.append(
                f"| {w.end_s:.0f} | {sum(w.served.values())} | {sum(w.errors.values())} | {w.churn_refused} "
                f"| {p99} | {w.rss_server_mib:.0f} / {w.rss_total_mib:.0f} |"
            )
        return "\n".join(rows)


class Tally:
    """Counts and latencies per traffic kind, swapped out at the end of each window."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.latencies: dict[str, list[float]] = {}
        self.errors: dict[str, int] = {}
        self.served: dict[str, int] = {}
        self.refused = 0
        self.samples: list[str] = []
        self.reset()

    def reset(self) -> tuple[dict[str, list[float]], dict[str, int], dict[str, int], int]:
        """Start a new window; returns the last one's latencies, errors, served and refusals."""
        with self.lock:
            old = (self.latencies, self.errors, self.served, self.refused)
            self.latencies = {k: [] for k in KINDS}
            self.errors = {k: 0 for k in KINDS}
            self.served = {k: 0 for k in KINDS}
            self.refused = 0
        return old

    def ok(self, kind: str, seconds: float) -> None:
        with self.lock:
            self.served[kind] += 1
            self.latencies[kind].append(seconds * 1000)

    def error(self, kind: str, message: str) -> None:
        with self.lock:
            self.errors[kind] += 1
            if len(self.samples) < 20:
                self.samples.append(f"{kind}: {message[:300]}")

    def refuse(self) -> None:
        with self.lock:
            self.refused += 1


# ------------------------------------------------------------------------------ the server
def build_repository(root: Path) -> Path:
    repo = root / "repo"
    repo.mkdir(parents=True)
    for name in ("add_sub", "repeat", "identity_fp32"):
        (repo / name).mkdir()
        for path in (EXAMPLES / name).rglob("*"):
            target = repo / name / path.relative_to(EXAMPLES / name)
            if path.is_dir():
                target.mkdir(parents=True, exist_ok=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(path.read_bytes())
    # `churn` is identity_fp32 under another name: the model that is unloaded and loaded.
    config = (EXAMPLES / "identity_fp32" / "config.pbtxt").read_text().replace('"identity_fp32"', '"churn"')
    model_py = EXAMPLES / "identity_fp32" / "1" / "model.py"
    write_model(repo, "churn", config, model_py.read_text() if model_py.exists() else None)
    tokenizer = build_tokenizer(root / "tokenizer")
    write_model(repo, "mock_llm", mock_models.llm_config("mock_llm"), mock_models.LLM_MODEL)
    (repo / "mock_llm" / "1" / "model.json").write_text(json.dumps({"model": str(tokenizer)}))
    return repo


def _rss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _tree(pid: int) -> list[int]:
    pids, todo = [], [pid]
    while todo:
        current = todo.pop()
        pids.append(current)
        try:
            for task in Path(f"/proc/{current}/task").iterdir():
                todo.extend(int(c) for c in (task / "children").read_text().split())
        except OSError:
            continue
    return pids


# ------------------------------------------------------------------------------ the traffic
def _loop(stop: threading.Event, body: Callable[[], None]) -> None:
    while not stop.is_set():
        body()


def http_caller(server: Server, tally: Tally, stop: threading.Event) -> None:
    client = httpclient.InferenceServerClient(server.http_url)
    a, b = np.arange(16, dtype=np.float32).reshape(4, 4)[0], np.ones(4, np.float32)

    def once() -> None:
        inputs = [httpclient.InferInput("INPUT0", [4], "FP32"), httpclient.InferInput("INPUT1", [4], "FP32")]
        inputs[0].set_data_from_numpy(a)
        inputs[1].set_data_from_numpy(b)
        started = time.perf_counter()
        try:
            result = client.infer("add_sub", inputs)
            if result.as_numpy("OUTPUT0").tolist() != (a + b).tolist():
                tally.error("http", f"wrong answer {result.as_numpy('OUTPUT0')}")
                return
            tally.ok("http", time.perf_counter() - started)
        except Exception as exc:  # noqa: BLE001 - every failure is counted and sampled
            tally.error("http", repr(exc))

    _loop(stop, once)


def grpc_caller(server: Server, tally: Tally, stop: threading.Event) -> None:
    client = grpcclient.InferenceServerClient(server.grpc_url)
    a = np.array([1, 2, 3, 4], np.float32)

    def once() -> None:
        inputs = [grpcclient.InferInput("INPUT0", [4], "FP32"), grpcclient.InferInput("INPUT1", [4], "FP32")]
        inputs[0].set_data_from_numpy(a)
        inputs[1].set_data_from_numpy(a)
        started = time.perf_counter()
        try:
            result = client.infer("add_sub", inputs)
            if result.as_numpy("OUTPUT1").tolist() != [0, 0, 0, 0]:
                tally.error("grpc", f"wrong answer {result.as_numpy('OUTPUT1')}")
                return
            tally.ok("grpc", time.perf_counter() - started)
        except Exception as exc:  # noqa: BLE001
            tally.error("grpc", repr(exc))

    _loop(stop, once)


def stream_caller(server: Server, tally: Tally, stop: threading.Event) -> None:
    client = grpcclient.InferenceServerClient(server.grpc_url)
    answers: queue.Queue = queue.Queue()
    client.start_stream(callback=lambda result, error: answers.put((result, error)))
    values = np.array([5, 6, 7], np.int32)

    def once() -> None:
        tensor = grpcclient.InferInput("IN", [3], "INT32")
        tensor.set_data_from_numpy(values)
        started = time.perf_counter()
        client.async_stream_infer("repeat", [tensor])
        got = []
        try:
            for _ in values:
                result, error = answers.get(timeout=60)
                if error is not None:
                    tally.error("grpc_stream", error.message())
                    return
                got.append(int(result.as_numpy("OUT")[0]))
        except queue.Empty:
            tally.error("grpc_stream", "no answer within 60 s")
            return
        if got != values.tolist():
            tally.error("grpc_stream", f"wrong answer {got}")
            return
        tally.ok("grpc_stream", time.perf_counter() - started)

    try:
        _loop(stop, once)
    finally:
        client.stop_stream()


def openai_caller(base_url: str, tally: Tally, stop: threading.Event) -> None:
    client = httpx.Client(base_url=base_url, timeout=60)
    counter = 0

    def once() -> None:
        nonlocal counter
        counter += 1
        word = f"w{counter}"
        started = time.perf_counter()
        try:
            reply = client.post("/v1/chat/completions", json={
                "model": "mock_llm", "messages": [{"role": "user", "content": f"#say:{word}#"}]})
            text = reply.json()["choices"][0]["message"]["content"] if reply.status_code == 200 else reply.text
            if reply.status_code != 200 or text != word:
                tally.error("openai", f"{reply.status_code} {text[:200]}")
                return
            tally.ok("openai", time.perf_counter() - started)
        except Exception as exc:  # noqa: BLE001
            tally.error("openai", repr(exc))

    _loop(stop, once)


def churn_caller(server: Server, tally: Tally, stop: threading.Event, input_name: str, output_name: str) -> None:
    """Calls the churned model; a refusal while it is unloaded is expected, a wrong answer is not."""
    client = httpclient.InferenceServerClient(server.http_url)
    x = np.array([[0.5, -2.0]], np.float32)

    def once() -> None:
        tensor = httpclient.InferInput(input_name, list(x.shape), "FP32")
        tensor.set_data_from_numpy(x)
        started = time.perf_counter()
        try:
            out = client.infer("churn", [tensor]).as_numpy(output_name)
            if out.tolist() != x.tolist():
                tally.error("churn", f"wrong answer {out}")
                return
            tally.ok("churn", time.perf_counter() - started)
        except InferenceServerException as exc:
            if exc.status() in ("400", "404", "503"):  # unloaded or going away
                tally.refuse()
                time.sleep(0.05)
            else:
                tally.error("churn", exc.message())

    _loop(stop, once)


def churner(server: Server, tally: Tally, stop: threading.Event, every: float, cycles: list[int]) -> None:
    client = httpclient.InferenceServerClient(server.http_url)
    while not stop.wait(every):
        try:
            client.unload_model("churn")
            if stop.wait(every / 4):
                break
            client.load_model("churn")
            cycles[0] += 1
        except InferenceServerException as exc:
            tally.error("churn", f"load/unload failed: {exc.message()}")


# ------------------------------------------------------------------------------ the run
def run(seconds: float, interval: float = 30, clients: int = 1, churn_every: float = 10,
        warmup_windows: int = 1, log: Callable[[str], None] = print) -> Report:
    """Serve a fresh repository, drive it for `seconds`, return the report."""
    with tempfile.TemporaryDirectory(prefix="openinfer-soak-") as tmp:
        repo = build_repository(Path(tmp))
        openai_port = free_port()
        server = Server(repo, ["--model-control-mode", "explicit", "--load-model", "*",
                               "--openai-port", str(openai_port), "--openai-address", "127.0.0.1"])
        server.start(wait_for="ready", timeout=180)
        try:
            return _drive(server, f"http://127.0.0.1:{openai_port}", seconds, interval, clients, churn_every,
                          warmup_windows, log)
        finally:
            code = server.stop()
            if code != 0:
                log(f"server exited with {code}")


def _drive(server: Server, openai_url: str, seconds: float, interval: float, clients: int, churn_every: float,
           warmup_windows: int, log: Callable[[str], None]) -> Report:
    config = httpclient.InferenceServerClient(server.http_url).get_model_config("churn")
    tally = Tally()
    stop = threading.Event()
    cycles = [0]
    workers: list[threading.Thread] = []
    for _ in range(clients):
        workers += [
            threading.Thread(target=http_caller, args=(server, tally, stop)),
            threading.Thread(target=grpc_caller, args=(server, tally, stop)),
            threading.Thread(target=stream_caller, args=(server, tally, stop)),
            threading.Thread(target=openai_caller, args=(openai_url, tally, stop)),
        ]
    workers.append(threading.Thread(target=churn_caller, args=(server, tally, stop, config["input"][0]["name"],
                                                              config["output"][0]["name"])))
    workers.append(threading.Thread(target=churner, args=(server, tally, stop, churn_every, cycles)))
    report = Report(seconds=seconds)
    begin = time.monotonic()
    for worker in workers:
        worker.daemon = True
        worker.start()
    try:
        while time.monotonic() - begin < seconds:
            time.sleep(min(interval, max(0.0, seconds - (time.monotonic() - begin))))
            latencies, errors, served, refused = tally.reset()
            window = Window(
                end_s=time.monotonic() - begin,
                served=served,
                errors=errors,
                churn_refused=refused,
                p99_ms={k: float(np.percentile(v, 99)) for k, v in latencies.items() if v},
                rss_server_mib=_rss_mib(server.process.pid),
                rss_total_mib=sum(_rss_mib(p) for p in _tree(server.process.pid)),
            )
            report.windows.append(window)
            log(f"t={window.end_s:6.0f}s served={sum(served.values()):6d} errors={sum(errors.values())} "
                f"refused={refused} rss={window.rss_server_mib:.0f}/{window.rss_total_mib:.0f} MiB")
    finally:
        stop.set()
        for worker in workers:
            worker.join(60)
    latencies, errors, served, refused = tally.reset()  # what finished while stopping
    for window_counts in [w.served for w in report.windows] + [served]:
        for kind, count in window_counts.items():
            report.served[kind] = report.served.get(kind, 0) + count
    for window_errors in [w.errors for w in report.windows] + [errors]:
        for kind, count in window_errors.items():
            report.errors[kind] = report.errors.get(kind, 0) + count
    report.churn_refused = sum(w.churn_refused for w in report.windows) + refused
    report.churn_cycles = cycles[0]
    report.error_samples = list(tally.samples)
    settled = report.windows[_warm_up_end(report.windows, warmup_windows) :]
    report.rss_growth_mib = max(w.rss_server_mib for w in settled) - settled[0].rss_server_mib
    report.rss_total_growth_mib = max(w.rss_total_mib for w in settled) - settled[0].rss_total_mib
    return report


def _warm_up_end(windows: list[Window], warmup_windows: int) -> int:
    """The window memory growth is measured from: the end of the warm-up windows, and not before
    every kind of traffic has been served once (a path's first use loads what it needs; on a
    busy machine the OpenAI client may not get its first answer within the first window)."""
    seen: set[str] = set()
    start = len(windows) - 1
    for index, window in enumerate(windows):
        seen.update(kind for kind, count in window.served.items() if count)
        if seen.issuperset(KINDS):
            start = index
            break
    return min(max(start, warmup_windows - 1), len(windows) - 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.soak", description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--interval", type=float, default=30, help="seconds per reporting window")
    parser.add_argument("--clients", type=int, default=1, help="callers per traffic kind")
    parser.add_argument("--churn-secs", type=float, default=10, help="seconds between unload/load cycles")
    parser.add_argument("--warmup-windows", type=int, default=1, help="windows before RSS growth is measured")
    parser.add_argument("--max-rss-growth-mib", type=float, default=64)
    parser.add_argument("--json", type=Path, default=None, help="write the full report here")
    args = parser.parse_args(argv)
    report = run(args.minutes * 60, args.interval, args.clients, args.churn_secs, args.warmup_windows)
    print()
    print(report.table())
    print()
    print(f"served {sum(report.served.values())} requests {report.served}; healthy-model errors "
          f"{report.healthy_errors}; churn cycles {report.churn_cycles}, refused while unloaded "
          f"{report.churn_refused}; RSS growth after warm-up {report.rss_growth_mib:.1f} MiB (server), "
          f"{report.rss_total_growth_mib:.1f} MiB (with workers)")
    for sample in report.error_samples:
        print("  error:", sample)
    if args.json is not None:
        args.json.write_text(json.dumps(asdict(report), indent=2))
    ok = report.healthy_errors == 0 and report.rss_growth_mib <= args.max_rss_growth_mib
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""Steady mixed load through the balancer: HTTP and gRPC clients in threads, every request
recorded (when it started, how long it took, its error if any)."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field

import httpx
import numpy as np

#: gRPC's own retry policy for UNAVAILABLE (a replica refusing new work while it shuts down
#: answers in-band, where a balancer cannot see it): the client tries the balancer again. gRPC
#: allows at most 5 attempts and draws each wait at random up to the current backoff, so the
#: backoffs must add up to more than the balancer takes to mark a replica down (`fall` checks
#: `inter` apart in `cluster.HAPROXY_CONFIG`); shorter ones let a call spend all its attempts
#: on the replica that is shutting down.
GRPC_RETRY = json.dumps({
    "methodConfig": [{
        "name": [{"service": "inference.GRPCInferenceService"}],
        "retryPolicy": {"maxAttempts": 5, "initialBackoff": "0.2s", "maxBackoff": "1s",
                        "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]},
    }]
})


@dataclass
class Outcome:
    protocol: str
    start: float
    seconds: float
    error: str = ""


@dataclass
class Load:
    http_url: str
    grpc_url: str
    model: str
    expected_add: float
    threads_per_protocol: int = 3
    outcomes: list[Outcome] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> Load:
        for i in range(self.threads_per_protocol):
            self._threads.append(threading.Thread(target=self._http, args=(i,), daemon=True))
            self._threads.append(threading.Thread(target=self._grpc, args=(i,), daemon=True))
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> list[Outcome]:
        self._stop.set()
        for thread in self._threads:
            thread.join(60)
        return self.outcomes

    def _record(self, protocol: str, start: float, error: str) -> None:
        with self._lock:
            self.outcomes.append(Outcome(protocol, start, time.monotonic() - start, error))

    def _check(self, got: list[float], x: np.ndarray) -> str:
        return "" if got == (x + self.expected_add).tolist() else f"wrong answer {got}"

    def _http(self, seed: int) -> None:
        rng = np.random.default_rng(seed)
        with httpx.Client(base_url=f"http://{self.http_url}", timeout=30) as client:
            while not self._stop.is_set():
                x = rng.integers(0, 100, 4).astype(np.float32)
                body = {"inputs": [{"name": "INPUT0", "shape": [4], "datatype": "FP32", "data": x.tolist()}]}
                start = time.monotonic()
                try:
                    reply = client.post(f"/v2/models/{self.model}/infer", json=body)
                    if reply.status_code != 200:
                        error = f"HTTP {reply.status_code}: {reply.text[:200]}"
                    else:
                        error = self._check(reply.json()["outputs"][0]["data"], x)
                except httpx.HTTPError as exc:
                    error = f"{type(exc).__name__}: {exc}"
                self._record("http", start, error)

    def _grpc(self, seed: int) -> None:
        import tritonclient.grpc as grpcclient
        from tritonclient.utils import InferenceServerException

        rng = np.random.default_rng(100 + seed)
        client = grpcclient.InferenceServerClient(
            self.grpc_url, channel_args=[("grpc.enable_retries", 1), ("grpc.service_config", GRPC_RETRY)]
        )
        try:
            while not self._stop.is_set():
                x = rng.integers(0, 100, 4).astype(np.float32)
                tensor = grpcclient.InferInput("INPUT0", [4], "FP32")
                tensor.set_data_from_numpy(x)
                start = time.monotonic()
                try:
                    result = client.infer(self.model, [tensor], client_timeout=30)
                    error = self._check(result.as_numpy("OUTPUT0").tolist(), x)
                except InferenceServerException as exc:
                    error = f"gRPC {exc.status()}: {exc.message()}"
                self._record("grpc", start, error)
        finally:
            client.close()


def summary(outcomes: list[Outcome], since: float = 0.0, until: float = float("inf")) -> dict[str, float]:
    """Requests, errors and latency percentiles (ms) of the requests started in [since, until)."""
    window = [o for o in outcomes if since <= o.start < until]
    latencies = sorted(o.seconds * 1000 for o in window if not o.error)
    p = (lambda q: round(latencies[min(len(latencies) - 1, int(q * len(latencies)))], 1)) if latencies else (lambda q: 0.0)
    return {
        "requests": len(window),
        "errors": sum(1 for o in window if o.error),
        "http": sum(1 for o in window if o.protocol == "http"),
        "grpc": sum(1 for o in window if o.protocol == "grpc"),
        "p50_ms": p(0.50),
        "p99_ms": p(0.99),
        "max_ms": round(latencies[-1], 1) if latencies else 0.0,
    }

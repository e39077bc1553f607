"""The control plane of a run: metadata, config, statistics and shared-memory registration.

These calls happen a few times per run, outside the measured path, so they use plain blocking
clients (``http.client`` and a synchronous gRPC channel) and never share a connection with the
load.
"""

from __future__ import annotations

import http.client
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import quote

import orjson

from .tensors import TensorSpec

STAT_KEYS = ("success", "fail", "queue", "compute_input", "compute_infer", "compute_output")


class ControlError(RuntimeError):
    """A control call failed; the message says which call and what the server answered."""


@dataclass
class ModelInfo:
    """What a run needs to know about the model before it starts sending."""

    name: str
    version: str
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]
    max_batch_size: int | None = None  # None: the server has no config extension
    decoupled: bool = False
    sequence: bool = False
    server: dict[str, Any] = field(default_factory=dict)  # name, version, extensions


class Control(Protocol):
    def server_metadata(self) -> dict[str, Any]: ...
    def model_info(self, model: str, version: str) -> ModelInfo: ...
    def model_ready(self, model: str, version: str) -> bool: ...
    def stats(self, model: str, version: str) -> dict[str, list[int]] | None: ...
    def register_shm(self, name: str, key: str, byte_size: int) -> None: ...
    def unregister_shm(self, name: str) -> None: ...
    def close(self) -> None: ...


def split_url(url: str) -> tuple[str, int]:
    """``HOST:PORT`` (an ``http://`` prefix is accepted) into host and port."""
    url = url.split("://", 1)[-1].rstrip("/")
    host, _, port = url.rpartition(":")
    if not host:
        raise ValueError(f"expected HOST:PORT, got {url!r}")
    return host.strip("[]"), int(port)


def _sum_stats(entries: list[dict[str, Any]]) -> dict[str, list[int]]:
    total = {k: [0, 0] for k in STAT_KEYS}
    for e in entries:
        inf = e.get("inference_stats") or {}
        for k in STAT_KEYS:
            d = inf.get(k) or {}
            total[k][0] += int(d.get("count", 0))
            total[k][1] += int(d.get("ns", 0))
    return total


class HttpControl:
    """Control calls over the v2 HTTP API."""

    def __init__(self, url: str, timeout: float = 30.0) -> None:
        self.host, self.port = split_url(url)
        self.conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def _call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = orjson.dumps(body) if body is not None else None
        headers = {"Content-Type": "application/json"} if data is not None else {}
        for attempt in (0, 1):  # the server may have closed an idle keep-alive connection
            try:
                self.conn.request(method, path, body=data, headers=headers)
                resp = self.conn.getresponse()
                raw = resp.read()
                break
            except (ConnectionError, http.client.HTTPException):
                self.conn.close()
                if attempt:
                    raise
        try:
            return resp.status, orjson.loads(raw) if raw else None
        except orjson.JSONDecodeError:
            return resp.status, raw.decode("utf-8", "replace")

    def _model_path(self, model: str, version: str) -> str:
        path = f"/v2/models/{quote(model, safe='')}"
        return path + (f"/versions/{version}" if version else "")

    def server_metadata(self) -> dict[str, Any]:
        status, body = self._call("GET", "/v2")
        return body if status == 200 and isinstance(body, dict) else {}

    def model_info(self, model: str, version: str) -> ModelInfo:
        status, meta = self._call("GET", self._model_path(model, version))
        if status != 200:
            raise ControlError(f"model metadata for {model!r}: HTTP {status}: {meta}")
        info = ModelInfo(
            name=model,
            version=version,
            inputs=[_spec(t) for t in meta.get("inputs", [])],
            outputs=[_spec(t) for t in meta.get("outputs", [])],
            server=self.server_metadata(),
        )
        status, cfg = self._call("GET", self._model_path(model, version) + "/config")
        if status == 200 and isinstance(cfg, dict):
            cfg = cfg.get("config", cfg)  # some servers wrap it
            info.max_batch_size = int(cfg.get("max_batch_size", 0))
            info.decoupled = bool((cfg.get("model_transaction_policy") or {}).get("decoupled"))
            info.sequence = "sequence_batching" in cfg
        return info

    def model_ready(self, model: str, version: str) -> bool:
        return self._call("GET", self._model_path(model, version) + "/ready")[0] == 200

    def stats(self, model: str, version: str) -> dict[str, list[int]] | None:
        status, body = self._call("GET", self._model_path(model, version) + "/stats")
        if status != 200 or not isinstance(body, dict) or "model_stats" not in body:
            return None
        return _sum_stats(body["model_stats"])

    def register_shm(self, name: str, key: str, byte_size: int) -> None:
        status, body = self._call(
            "POST",
            f"/v2/systemsharedmemory/region/{quote(name, safe='')}/register",
            {"key": key, "offset": 0, "byte_size": byte_size},
        )
        if status != 200:
            raise ControlError(f"register shared memory {name!r}: HTTP {status}: {body}")

    def unregister_shm(self, name: str) -> None:
        self._call("POST", f"/v2/systemsharedmemory/region/{quote(name, safe='')}/unregister")

    def close(self) -> None:
        self.conn.close()


def _spec(t: dict[str, Any]) -> TensorSpec:
    return TensorSpec(t["name"], t["datatype"], tuple(int(d) for d in t.get("shape", [])))


class GrpcControl:
    """Control calls over the v2 gRPC API (``inference.GRPCInferenceService``)."""

    def __init__(self, url: str, timeout: float = 30.0) -> None:
        import grpc

        from openinfer._proto import grpc_service_pb2 as pb
        from openinfer._proto import grpc_service_pb2_grpc as pb_grpc

        self.pb, self.grpc, self.timeout = pb, grpc, timeout
        host, port = split_url(url)
        self.channel = grpc.insecure_channel(f"{host}:{port}", options=_channel_options())
        self.stub = pb_grpc.GRPCInferenceServiceStub(self.channel)

    def server_metadata(self) -> dict[str, Any]:
        try:
            r = self.stub.ServerMetadata(self.pb.ServerMetadataRequest(), timeout=self.timeout)
        except self.grpc.RpcError:
            return {}
        return {"name": r.name, "version": r.version, "extensions": list(r.extensions)}

    def model_info(self, model: str, version: str) -> ModelInfo:
        try:
            meta = self.stub.ModelMetadata(
                self.pb.ModelMetadataRequest(name=model, version=version), timeout=self.timeout
            )
        except self.grpc.RpcError as exc:
            raise ControlError(f"model metadata for {model!r}: {exc.code().name}: {exc.details()}")
        info = ModelInfo(
            name=model,
            version=version,
            inputs=[TensorSpec(t.name, t.datatype, tuple(t.shape)) for t in meta.inputs],
            outputs=[TensorSpec(t.name, t.datatype, tuple(t.shape)) for t in meta.outputs],
            server=self.server_metadata(),
        )
        try:
            cfg = self.stub.ModelConfig(
                self.pb.ModelConfigRequest(name=model, version=version), timeout=self.timeout
            ).config
        except self.grpc.RpcError:
            return info
        info.max_batch_size = cfg.max_batch_size
        info.decoupled = cfg.model_transaction_policy.decoupled
        info.sequence = cfg.HasField("sequence_batching")
        return info

    def model_ready(self, model: str, version: str) -> bool:
        try:
            return self.stub.ModelReady(
                self.pb.ModelReadyRequest(name=model, version=version), timeout=self.timeout
            ).ready
        except self.grpc.RpcError:
            return False

    def stats(self, model: str, version: str) -> dict[str, list[int]] | None:
        try:
            r = self.stub.ModelStatistics(
                self.pb.ModelStatisticsRequest(name=model, version=version), timeout=self.timeout
            )
        except self.grpc.RpcError:
            return None
        total = {k: [0, 0] for k in STAT_KEYS}
        for ms in r.model_stats:
            for k in STAT_KEYS:
                d = getattr(ms.inference_stats, k)
                total[k][0] += d.count
                total[k][1] += d.ns
        return total

    def register_shm(self, name: str, key: str, byte_size: int) -> None:
        try:
            self.stub.SystemSharedMemoryRegister(
                self.pb.SystemSharedMemoryRegisterRequest(
                    name=name, key=key, offset=0, byte_size=byte_size
                ),
                timeout=self.timeout,
            )
        except self.grpc.RpcError as exc:
            raise ControlError(f"register shared memory {name!r}: {exc.details()}") from None

    def unregister_shm(self, name: str) -> None:
        try:
            self.stub.SystemSharedMemoryUnregister(
                self.pb.SystemSharedMemoryUnregisterRequest(name=name), timeout=self.timeout
            )
        except self.grpc.RpcError:
            pass

    def close(self) -> None:
        self.channel.close()


def _channel_options() -> list[tuple[str, int]]:
    """No message size cap: large tensors are the point of some runs."""
    return [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]


def connect(protocol: str, url: str) -> Control:
    return GrpcControl(url) if protocol == "grpc" else HttpControl(url)


def stats_delta(
    before: dict[str, list[int]] | None, after: dict[str, list[int]] | None
) -> dict[str, Any] | None:
    """Server-side split of the requests served between two snapshots (per-request µs)."""
    if before is None or after is None:
        return None
    d = {k: (after[k][0] - before[k][0], after[k][1] - before[k][1]) for k in STAT_KEYS}
    n = d["success"][0]

    def per_req(k: str) -> float:
        count = d[k][0]
        return d[k][1] / count / 1000.0 if count else 0.0

    return {
        "success_count": n,
        "fail_count": d["fail"][0],
        "avg_request_us": per_req("success"),
        "queue_us": per_req("queue"),
        "compute_input_us": per_req("compute_input"),
        "compute_infer_us": per_req("compute_infer"),
        "compute_output_us": per_req("compute_output"),
    }

"""Requests as both servers get them, and answers reduced to what the protocol fixes: status,
error message, output values and the metadata fields, tensors decoded wherever they travel."""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Callable
from typing import Any

import grpc
import httpx
import numpy as np
from google.protobuf.json_format import MessageToDict

#: numpy types of the protocol's fixed-size datatypes (BF16 has none: compared as bytes).
NUMPY = {"BOOL": np.bool_, "UINT8": np.uint8, "UINT16": np.uint16, "UINT32": np.uint32, "UINT64": np.uint64,
         "INT8": np.int8, "INT16": np.int16, "INT32": np.int32, "INT64": np.int64, "FP16": np.float16,
         "FP32": np.float32, "FP64": np.float64}

View = Callable[[Any], Any]


def decode(datatype: str, blob: bytes) -> list:
    """Tensor bytes as a list: strings for BYTES, hex for BF16, numbers otherwise."""
    if datatype == "BYTES":
        items, offset = [], 0
        while offset + 4 <= len(blob):
            (size,) = struct.unpack_from("<I", blob, offset)
            items.append(blob[offset + 4 : offset + 4 + size].decode(errors="replace"))
            offset += 4 + size
        return items
    if datatype not in NUMPY:
        return [blob.hex()]
    return np.frombuffer(blob, dtype=NUMPY[datatype]).tolist()


def encode(datatype: str, values: list) -> bytes:
    """A tensor's values as the binary extension and gRPC's raw contents carry them."""
    if datatype == "BYTES":
        return b"".join(struct.pack("<I", len(v)) + v for v in (str(x).encode() for x in values))
    if datatype == "BF16":
        return (np.array(values, np.float32).view(np.uint32) >> 16).astype(np.uint16).tobytes()
    return np.array(values, dtype=NUMPY.get(datatype, np.float32)).tobytes()  # an unknown type: 4-byte values


def binary_body(doc: dict, blobs: list[bytes]) -> tuple[bytes, dict[str, str]]:
    """A request in the binary tensor extension: the JSON header, then the tensors' bytes."""
    header = json.dumps(doc).encode()
    return header + b"".join(blobs), {"Inference-Header-Content-Length": str(len(header))}


def events(text: str) -> list:
    """Server-sent events, each `data:` payload read as JSON (a JSON object's order is no part of it)."""
    out: list[Any] = []
    for event in text.split("\n\n"):
        data = "\n".join(line[5:].strip() for line in event.splitlines() if line.startswith("data:"))
        if data:
            try:
                out.append(json.loads(data))
            except ValueError:
                out.append(data)
    return out


def http_answer(reply: httpx.Response, view: View | None) -> dict:
    """Status and body; binary outputs decoded into `data`; `view` picks from a 200's body."""
    length = reply.headers.get("Inference-Header-Content-Length")
    if length is not None:
        body: Any = json.loads(reply.content[: int(length)])
        blob = reply.content[int(length) :]
        for output in body.get("outputs", []):
            size = output.get("parameters", {}).get("binary_data_size")
            if size is not None:
                output["data"], blob = decode(output["datatype"], blob[:size]), blob[size:]
    elif reply.headers.get("content-type", "").startswith("text/event-stream"):
        body = events(reply.text)
    else:
        try:
            body = reply.json() if reply.content else ""
        except ValueError:
            body = reply.text
    if reply.status_code == 200 and view is not None:
        body = view(body)
    return {"status": reply.status_code, "body": body}


def grpc_stream_answer(call: Callable[[], Any], count: int) -> dict:
    """The first `count` responses of a stream, each a response or an error message."""
    answers: list[Any] = []
    try:
        for reply in call():
            answers.append({"error": reply.error_message} if reply.error_message else
                           grpc_answer(lambda r=reply: r.infer_response, None)["body"])
            if len(answers) == count:
                break
    except grpc.RpcError as exc:
        return {"code": exc.code().name, "details": exc.details(), "responses": answers}
    return {"code": "OK", "responses": answers}


def grpc_answer(call: Callable[[], Any], view: View | None) -> dict:
    """Status code and details, or the response as a dict (raw outputs decoded into `data`)."""
    try:
        response = call()
    except grpc.RpcError as exc:
        return {"code": exc.code().name, "details": exc.details()}
    body = MessageToDict(response, preserving_proto_field_name=True)
    raw = list(getattr(response, "raw_output_contents", []))
    if raw:
        body.pop("raw_output_contents", None)
        for output, blob in zip(body.get("outputs", []), raw):
            output["data"] = decode(output["datatype"], blob)
    return {"code": "OK", "body": view(body) if view is not None else body}


# ------------------------------------------------------------------------------- views
def only(*keys: str) -> View:
    """The named fields alone (what the protocol fixes; versions and timings are each server's)."""
    return lambda body: {k: body.get(k) for k in keys}


def keys(body: Any) -> Any:
    """Field names alone, for answers whose values are each server's own (timings, counters)."""
    if isinstance(body, dict):
        return {k: keys(v) for k, v in sorted(body.items())}
    if isinstance(body, list):
        return [keys(body[0])] if body else []
    return type(body).__name__


def stats(body: dict) -> Any:
    """Which model versions have statistics, and which fields each carries."""
    entries = body.get("model_stats", [])
    return {"models": sorted((e.get("name"), e.get("version")) for e in entries),
            "fields": keys(entries[0]) if entries else None}


def counts(body: dict) -> Any:
    """The counters of each model version's statistics (timings are each server's own)."""
    return [{"name": e.get("name"), "version": e.get("version"), "inference_count": e.get("inference_count"),
             "execution_count": e.get("execution_count"),
             "success": e.get("inference_stats", {}).get("success", {}).get("count"),
             "fail": e.get("inference_stats", {}).get("fail", {}).get("count")}
            for e in body.get("model_stats", [])]


def metric_families(text: str) -> dict[str, str]:
    """Each metric family's name and type, from the Prometheus text."""
    return dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))


def metric_samples(*families: str) -> View:
    """The samples of `families` for the labelled model (its counts follow the cases before)."""
    def view(text: str) -> list[str]:
        return sorted(line for line in text.splitlines()
                      if line.split("{", 1)[0] in families and 'model="labelled"' in line)
    return view


def index(body: list) -> list:
    """The repository index, in name order."""
    return sorted(body, key=lambda e: (e.get("name", ""), e.get("version", "")))

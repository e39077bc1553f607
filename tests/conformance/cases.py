"""The requests both servers get, in order (some change what later ones see: loads, settings).

Each case is one request over HTTP (`httpx`, JSON or the binary extension) or gRPC (Triton's
own `tritonclient.grpc` messages and stub), and the view of a success that is compared.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
from tritonclient.grpc import service_pb2 as pb

from . import wire
from .wire import View


@dataclass(frozen=True)
class Clients:
    """One server's clients."""

    http: httpx.Client
    stub: Any  # service_pb2_grpc.GRPCInferenceServiceStub
    metrics_url: str


@dataclass(frozen=True)
class Case:
    id: str  # pytest's id, and the key of known.KNOWN
    request: str  # what is sent, for the list of differences
    send: Callable[[Clients], dict]


def http(label: str, method: str, path: str, doc: Any = None, *, content: bytes | None = None,
         blobs: list[bytes] | None = None, view: View | None = None, headers: dict[str, str] | None = None) -> Case:
    """One HTTP request: `doc` as JSON, with `blobs` after it (binary extension), or raw bytes."""
    headers = dict(headers or {})
    if blobs is not None:
        content, binary_headers = wire.binary_body(doc, blobs)
        headers.update(binary_headers)
    elif doc is not None:
        content = json.dumps(doc).encode()
    shown = f"{method} {path}" + (f" {headers}" if headers else "") + (f" {content[:300]!r}" if content else "")

    def send(clients: Clients) -> dict:
        reply = clients.http.request(method, path, content=content, headers=headers)
        return wire.http_answer(reply, view)

    return Case(label, shown, send)


def metrics(label: str, view: View) -> Case:
    """The metrics endpoint's text, through `view` (values are each server's own)."""
    def send(clients: Clients) -> dict:
        reply = clients.http.get(clients.metrics_url)
        return {"status": reply.status_code, "body": view(reply.text)}

    return Case(label, "GET /metrics", send)


def rpc(label: str, method: str, message: Any, *, view: View | None = None) -> Case:
    """One unary gRPC call."""
    shown = f"gRPC {method} {type(message).__name__}({str(message).strip()[:300]!r})"

    def send(clients: Clients) -> dict:
        return wire.grpc_answer(lambda: getattr(clients.stub, method)(message, timeout=60), view)

    return Case(label, shown, send)


def stream(label: str, message: Any, count: int) -> Case:
    """One request on ModelStreamInfer, and its first `count` responses."""
    shown = f"gRPC ModelStreamInfer ModelInferRequest({str(message).strip()[:300]!r})"

    def send(clients: Clients) -> dict:
        return wire.grpc_stream_answer(lambda: clients.stub.ModelStreamInfer(iter([message]), timeout=60), count)

    return Case(label, shown, send)


def tensor(name: str, datatype: str, shape: list[int], data: Any, **parameters: Any) -> dict:
    out: dict[str, Any] = {"name": name, "datatype": datatype, "shape": shape, "data": data}
    if parameters:
        out["parameters"] = parameters
    return out


def infer(label: str, model: str, inputs: list[dict], *, outputs: list[dict] | None = None, version: str = "",
          **extra: Any) -> Case:
    doc: dict[str, Any] = {"inputs": inputs, **extra}
    if outputs is not None:
        doc["outputs"] = outputs
    path = f"/v2/models/{model}" + (f"/versions/{version}" if version else "") + "/infer"
    return http(label, "POST", path, doc)


def binary_infer(label: str, model: str, inputs: list[dict], *, outputs: list[dict] | None = None,
                 **extra: Any) -> Case:
    """The inputs' `data` sent as binary tensors (binary_data_size), not JSON."""
    blobs, header = [], []
    for t in inputs:
        blob = wire.encode(t["datatype"], t["data"])
        blobs.append(blob)
        header.append({k: v for k, v in t.items() if k != "data"} | {"parameters": {"binary_data_size": len(blob)}})
    doc: dict[str, Any] = {"inputs": header, **extra}
    if outputs is not None:
        doc["outputs"] = outputs
    return http(label, "POST", f"/v2/models/{model}/infer", doc, blobs=blobs)


def grpc_message(model: str, inputs: list[dict], *, version: str = "", outputs: tuple[str, ...] = (),
                 raw: bool = True, parameters: dict[str, Any] | None = None) -> Any:
    """A ModelInferRequest with raw_input_contents (or the typed contents when `raw` is false)."""
    message = pb.ModelInferRequest(model_name=model, model_version=version)
    for t in inputs:
        entry = message.inputs.add(name=t["name"], datatype=t["datatype"], shape=t["shape"])
        if raw:
            message.raw_input_contents.append(wire.encode(t["datatype"], t["data"]))
        else:
            _contents(entry.contents, t["datatype"], t["data"])
    for name in outputs:
        message.outputs.add(name=name)
    for key, value in (parameters or {}).items():
        _param(message.parameters[key], value)
    return message


def grpc_infer(label: str, model: str, inputs: list[dict], **options: Any) -> Case:
    """One ModelInfer call."""
    return rpc(label, "ModelInfer", grpc_message(model, inputs, **options))


def _classification(k: int) -> Any:
    """labelled's OUTPUT0 asked with `classification: k`."""
    message = grpc_message("labelled", [tensor("INPUT0", "FP32", [4], [0.1, 0.9, 0.3, 0.2])])
    _param(message.outputs.add(name="OUTPUT0").parameters["classification"], k)
    return message


def _raw_and_typed() -> Any:
    message = grpc_message("add_sub", add_sub())
    message.inputs[0].contents.fp32_contents.extend(FOUR)
    return message


def _extra_raw() -> Any:
    message = grpc_message("add_sub", add_sub())
    message.raw_input_contents.append(b"\0" * 16)
    return message


def _with_id(message: Any, request_id: str) -> Any:
    message.id = request_id
    return message


def _contents(contents: Any, datatype: str, data: list) -> None:
    field = {"BOOL": "bool_contents", "BYTES": "bytes_contents", "FP32": "fp32_contents", "FP64": "fp64_contents",
             "INT64": "int64_contents", "UINT64": "uint64_contents"}.get(datatype)
    if field is None:
        field = "uint_contents" if datatype.startswith("UINT") else "int_contents"
    getattr(contents, field).extend(str(v).encode() if datatype == "BYTES" else v for v in data)


def _param(param: Any, value: Any) -> None:
    if isinstance(value, bool):
        param.bool_param = value
    elif isinstance(value, int):
        param.int64_param = value
    else:
        param.string_param = str(value)


FOUR = [1.0, 2.0, 3.0, 4.0]
ONES = [1.0, 1.0, 1.0, 1.0]


def add_sub(first: str = "INPUT0", second: str = "INPUT1", shape: list[int] | None = None,
            datatype: str = "FP32") -> list[dict]:
    return [tensor(first, datatype, shape or [4], FOUR), tensor(second, "FP32", [4], ONES)]


#: One value pair per datatype, with each type's extremes.
VALUES = {
    "BOOL": [True, False], "UINT8": [0, 255], "UINT16": [0, 65535], "UINT32": [0, 4294967295],
    "UINT64": [0, 18446744073709551615], "INT8": [-128, 127], "INT16": [-32768, 32767],
    "INT32": [-2147483648, 2147483647], "INT64": [-9223372036854775808, 9223372036854775807],
    "FP16": [0.5, -2.0], "FP32": [1.5, -2.25], "FP64": [1e300, -0.1], "BYTES": ["ab", ""],
}


def _any(datatype: str) -> dict:
    """identity_any's input for a datatype (its BYTES input is INPUT_STRING)."""
    name = "INPUT_STRING" if datatype == "BYTES" else f"INPUT_{datatype}"
    return tensor(name, datatype, [2], VALUES[datatype])


def _server_cases() -> list[Case]:
    return [
        http("health live", "GET", "/v2/health/live"),
        http("health ready", "GET", "/v2/health/ready"),
        http("server metadata", "GET", "/v2", view=wire.only("name", "version")),
        http("server extensions", "GET", "/v2", view=lambda b: sorted(b.get("extensions", []))),
        http("model metadata", "GET", "/v2/models/add_sub"),
        http("model metadata of a version", "GET", "/v2/models/add_sub/versions/1"),
        http("model metadata, every datatype", "GET", "/v2/models/identity_any"),
        http("model metadata, batching", "GET", "/v2/models/batched"),
        http("model metadata, unknown model", "GET", "/v2/models/nope"),
        http("model metadata, unknown version", "GET", "/v2/models/add_sub/versions/9"),
        http("model metadata, version 'latest'", "GET", "/v2/models/add_sub/versions/latest"),
        http("model metadata, version not a number", "GET", "/v2/models/add_sub/versions/abc"),
        http("model ready", "GET", "/v2/models/add_sub/ready"),
        http("model ready, unknown model", "GET", "/v2/models/nope/ready"),
        http("model ready, unknown version", "GET", "/v2/models/add_sub/versions/9/ready"),
        http("model config", "GET", "/v2/models/add_sub/config"),
        http("model config, batching", "GET", "/v2/models/batched/config"),
        http("model config, sequence", "GET", "/v2/models/sequence/config"),
        http("model config, decoupled", "GET", "/v2/models/repeat/config"),
        http("model config, dynamic batching", "GET", "/v2/models/identity_fp32/config"),
        http("model config, labels", "GET", "/v2/models/labelled/config"),
        http("model config, warm-up", "GET", "/v2/models/no_inputs/config"),
        http("model config, optional inputs", "GET", "/v2/models/identity_any/config"),
        http("model config of a version", "GET", "/v2/models/add_sub/versions/1/config"),
        http("model config, unknown version", "GET", "/v2/models/add_sub/versions/9/config"),
        http("model config, unknown model", "GET", "/v2/models/nope/config"),
    ]


def _infer_cases() -> list[Case]:
    return [
        infer("infer JSON", "add_sub", add_sub()),
        infer("infer JSON, request id echoed", "add_sub", add_sub(), id="req-1"),
        infer("infer JSON, named output", "add_sub", add_sub(), outputs=[{"name": "OUTPUT1"}]),
        infer("infer JSON, outputs []", "add_sub", add_sub(), outputs=[]),
        infer("infer JSON, one binary output", "add_sub", add_sub(),
              outputs=[{"name": "OUTPUT0", "parameters": {"binary_data": True}}, {"name": "OUTPUT1"}]),
        infer("infer JSON, binary_data_output", "add_sub", add_sub(), parameters={"binary_data_output": True}),
        infer("infer JSON, classification with labels", "labelled", [tensor("INPUT0", "FP32", [4], [0.1, 0.9, 0.3, 0.2])],
              outputs=[{"name": "OUTPUT0", "parameters": {"classification": 2}}]),
        infer("infer JSON, classification without labels", "add_sub", add_sub(),
              outputs=[{"name": "OUTPUT0", "parameters": {"classification": 3}}]),
        infer("infer JSON, request parameters", "add_sub", add_sub(), parameters={"custom": "x", "n": 3, "flag": True}),
        infer("infer JSON, input parameters", "add_sub",
              [tensor("INPUT0", "FP32", [4], FOUR, custom="x"), tensor("INPUT1", "FP32", [4], ONES)]),
        infer("infer JSON, timeout parameter", "add_sub", add_sub(), parameters={"timeout": 10000000}),
        infer("infer JSON, nested data", "batched", [tensor("INPUT0", "FP32", [2, 2], [[1, 2], [3, 4]])]),
        infer("infer JSON, batch", "batched", [tensor("INPUT0", "FP32", [3, 2], [1, 2, 3, 4, 5, 6])]),
        infer("infer JSON, batch over max_batch_size", "batched", [tensor("INPUT0", "FP32", [5, 2], [0] * 10)]),
        infer("infer JSON, batching model without batch dimension", "batched", [tensor("INPUT0", "FP32", [2], [1, 2])]),
        infer("infer JSON, empty tensor", "identity_fp32", [tensor("INPUT0", "FP32", [1, 0], [])]),
        infer("infer JSON, empty BYTES tensor", "identity_bytes", [tensor("INPUT0", "BYTES", [1, 0], [])]),
        infer("infer JSON, NULL array as nulls", "identity_fp32", [tensor("INPUT0", "FP32", [1, 0], [None])]),
        infer("infer JSON, data null", "identity_fp32", [tensor("INPUT0", "FP32", [1, 0], None)]),
        infer("infer JSON, values for an empty shape", "identity_fp32", [tensor("INPUT0", "FP32", [1, 0], [1.0])]),
        infer("infer JSON, BYTES, unicode and empty strings", "identity_bytes", [tensor("INPUT0", "BYTES", [1, 3], ["a", "", "ü"])]),
        infer("infer JSON, BF16", "identity_any", [tensor("INPUT_BF16", "BF16", [2], [1.0, 2.0])]),
        infer("infer JSON, several datatypes at once", "identity_any", [_any("INT8"), _any("FP64"), _any("BYTES")]),
        infer("infer JSON, no inputs to optional inputs", "identity_any", []),
    ]


def _refused_cases() -> list[Case]:
    """Requests the v2 rules refuse (or, where Triton takes them, that it takes)."""
    return [
        infer("infer JSON, wrong datatype", "add_sub", add_sub(datatype="INT32")),
        infer("infer JSON, wrong shape", "add_sub", add_sub(shape=[2, 2])),
        infer("infer JSON, wrong rank on -1 dims", "identity_fp32", [tensor("INPUT0", "FP32", [4], FOUR)]),
        infer("infer JSON, unknown input name", "add_sub", add_sub(first="INPUTX")),
        infer("infer JSON, input name in the wrong case", "add_sub", add_sub(first="input0")),
        infer("infer JSON, input name matching two inputs but for case", "two_cases",
              [tensor("Input0", "FP32", [1], [1.0])]),
        infer("infer JSON, both inputs named alike but for case", "two_cases",
              [tensor("INPUT0", "FP32", [1], [1.0]), tensor("input0", "FP32", [1], [2.0])]),
        infer("infer JSON, output name in the wrong case", "add_sub", add_sub(), outputs=[{"name": "output0"}]),
        infer("infer JSON, unknown output", "add_sub", add_sub(), outputs=[{"name": "OUTPUT9"}]),
        infer("infer JSON, output asked twice", "add_sub", add_sub(), outputs=[{"name": "OUTPUT0"}, {"name": "OUTPUT0"}]),
        infer("infer JSON, missing input", "add_sub", add_sub()[:1]),
        infer("infer JSON, extra input", "add_sub", [*add_sub(), tensor("INPUT2", "FP32", [4], FOUR)]),
        infer("infer JSON, input twice", "add_sub", [add_sub()[0], add_sub()[0]]),
        infer("infer JSON, too few values", "add_sub", [tensor("INPUT0", "FP32", [4], [1, 2, 3]), add_sub()[1]]),
        infer("infer JSON, too many values", "add_sub", [tensor("INPUT0", "FP32", [4], [1, 2, 3, 4, 5]), add_sub()[1]]),
        infer("infer JSON, a string for a number", "add_sub", [tensor("INPUT0", "FP32", [4], ["a", 2, 3, 4]), add_sub()[1]]),
        infer("infer JSON, a number for a string", "identity_bytes", [tensor("INPUT0", "BYTES", [1, 1], [5])]),
        infer("infer JSON, unknown datatype", "add_sub", add_sub(datatype="FP8")),
        infer("infer JSON, no inputs to a model that needs them", "add_sub", []),
        infer("infer JSON, model without inputs", "no_inputs", []),
        infer("infer JSON, an input to a model without inputs", "no_inputs", [tensor("INPUT0", "FP32", [1], [1.0])]),
        infer("infer JSON, unknown model", "nope", add_sub()),
        infer("infer JSON, unknown version", "add_sub", add_sub(), version="9"),
        infer("infer JSON, version 'latest'", "add_sub", add_sub(), version="latest"),
        infer("infer JSON, version not a number", "add_sub", add_sub(), version="abc"),
        infer("infer JSON, decoupled model", "repeat", [tensor("IN", "INT32", [2], [1, 2])]),
        http("infer, malformed JSON", "POST", "/v2/models/add_sub/infer", content=b'{"inputs": ['),
        http("infer, inputs not an array", "POST", "/v2/models/add_sub/infer", {"inputs": {}}),
        http("infer, no inputs field", "POST", "/v2/models/add_sub/infer", {}),
        http("infer, body an array", "POST", "/v2/models/add_sub/infer", []),
        http("infer, invalid UTF-8", "POST", "/v2/models/add_sub/infer", content=b'{"id": "\xff", "inputs": []}'),
        http("infer, body null", "POST", "/v2/models/add_sub/infer", content=b"null"),
        http("infer, empty body", "POST", "/v2/models/add_sub/infer", content=b""),
        http("infer, NaN in data", "POST", "/v2/models/add_sub/infer",
             content=b'{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[4],"data":[NaN,1,2,3]},'
                     b'{"name":"INPUT1","datatype":"FP32","shape":[4],"data":[1,1,1,1]}]}'),
        http("infer, gzip body", "POST", "/v2/models/add_sub/infer",
             content=gzip.compress(json.dumps({"inputs": add_sub()}).encode(), mtime=0),
             headers={"Content-Encoding": "gzip"}),
        http("infer, unknown Content-Encoding", "POST", "/v2/models/add_sub/infer",
             content=json.dumps({"inputs": add_sub()}).encode(), headers={"Content-Encoding": "br"}),
        http("infer, gzip answer asked for", "POST", "/v2/models/add_sub/infer", {"inputs": add_sub()},
             headers={"Accept-Encoding": "gzip"}),
        infer("infer JSON, ragged nested data", "batched", [tensor("INPUT0", "FP32", [2, 2], [[1, 2], [3]])]),
        infer("infer JSON, negative dimension", "identity_fp32", [tensor("INPUT0", "FP32", [1, -1], [1.0])]),
        infer("infer JSON, shape not an array", "add_sub", [tensor("INPUT0", "FP32", 4, FOUR), add_sub()[1]]),
        infer("infer JSON, binary_data not a boolean", "add_sub", add_sub(),
              outputs=[{"name": "OUTPUT0", "parameters": {"binary_data": "yes"}}]),
        infer("infer JSON, binary_data_output not a boolean", "add_sub", add_sub(),
              parameters={"binary_data_output": "yes"}),
        infer("infer JSON, classification 0", "labelled", [tensor("INPUT0", "FP32", [4], FOUR)],
              outputs=[{"name": "OUTPUT0", "parameters": {"classification": 0}}]),
        infer("infer JSON, classification of a batch", "identity_fp32",
              [tensor("INPUT0", "FP32", [2, 3], [1, 3, 2, 6, 5, 4])],
              outputs=[{"name": "OUTPUT0", "parameters": {"classification": 2}}]),
        # (Classification of a BYTES output is left out: Triton 2.51 exits on it.)
        infer("infer JSON, classification negative", "labelled", [tensor("INPUT0", "FP32", [4], FOUR)],
              outputs=[{"name": "OUTPUT0", "parameters": {"classification": -1}}]),
        http("infer, empty body to a one-input model", "POST", "/v2/models/identity_fp32/infer", content=b""),
        infer("infer JSON, priority on a model without priority levels", "add_sub", add_sub(),
              parameters={"priority": 1}),
        infer("infer JSON, timeout of the wrong type", "add_sub", add_sub(), parameters={"timeout": "soon"}),
        infer("infer JSON, request id not a string", "add_sub", add_sub(), id=5),
        infer("infer JSON, BYTES batch", "identity_bytes", [tensor("INPUT0", "BYTES", [2, 1], ["x", "yz"])]),
    ]


def _datatype_cases() -> list[Case]:
    """Every datatype, in JSON and in the binary extension, and binary framing."""
    cases = [infer(f"infer JSON, {dt}", "identity_any", [_any(dt)]) for dt in VALUES]
    cases += [binary_infer(f"infer binary, {dt}", "identity_any", [_any(dt)],
                           outputs=[{"name": _any(dt)["name"].replace("INPUT", "OUTPUT"), "parameters": {"binary_data": True}}])
              for dt in VALUES]
    cases += [
        binary_infer("infer binary", "add_sub", add_sub()),
        binary_infer("infer binary, BF16", "identity_any", [tensor("INPUT_BF16", "BF16", [2], [1.0, -2.0])],
                     parameters={"binary_data_output": True}),
        binary_infer("infer binary, empty tensor", "identity_fp32", [tensor("INPUT0", "FP32", [1, 0], [])],
                     parameters={"binary_data_output": True}),
        binary_infer("infer binary, wrong datatype", "add_sub", add_sub(datatype="INT32")),
        http("infer binary, fewer bytes than binary_data_size", "POST", "/v2/models/add_sub/infer",
             {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [4], "parameters": {"binary_data_size": 16}},
                         tensor("INPUT1", "FP32", [4], ONES)]}, blobs=[b"\0" * 8]),
        http("infer binary, 4 of 16 bytes", "POST", "/v2/models/add_sub/infer",
             {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [4], "parameters": {"binary_data_size": 16}},
                         tensor("INPUT1", "FP32", [4], ONES)]}, blobs=[b"\0" * 4]),
        http("infer binary, bytes left over", "POST", "/v2/models/add_sub/infer",
             {"inputs": add_sub()}, blobs=[b"\0" * 8]),
        http("infer binary, size not matching the shape", "POST", "/v2/models/add_sub/infer",
             {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [4], "parameters": {"binary_data_size": 8}},
                         tensor("INPUT1", "FP32", [4], ONES)]}, blobs=[b"\0" * 8]),
    ]
    return cases


def _python_cases() -> list[Case]:
    """A Python model's mistakes, BLS calls and an ensemble, as the client sees them."""
    def faulty(how: int) -> list[dict]:
        return [tensor("INPUT0", "FP32", [1], [float(how)])]

    what = ["raises", "answers an error with a code", "answers an error without a code",
            "answers an output it does not declare", "answers an output of the wrong datatype",
            "answers an output of the wrong shape", "answers NOT_FOUND", "answers no outputs",
            "returns no responses", "raises TritonModelException", "raises in a function it calls"]
    cases = [infer(f"Python model {text}", "faulty", faulty(i)) for i, text in enumerate(what)]
    cases += [grpc_infer(f"gRPC Python model {text}", "faulty", faulty(i)) for i, text in enumerate(what)]
    calls = ["a model", "an unknown model", "a model with a wrong shape", "a model without an input"]
    cases += [infer(f"BLS call to {text}", "bls", faulty(i)) for i, text in enumerate(calls)]
    cases += [
        http("model metadata, ensemble", "GET", "/v2/models/ensemble"),
        http("model config, ensemble", "GET", "/v2/models/ensemble/config"),
        infer("infer, ensemble", "ensemble", [tensor("IN", "FP32", [4], FOUR)]),
        infer("infer, ensemble with a wrong shape", "ensemble", [tensor("IN", "FP32", [2], [1, 2])]),
        infer("infer, ensemble's inner tensor asked for", "ensemble", [tensor("IN", "FP32", [4], FOUR)],
              outputs=[{"name": "twice"}]),
        grpc_infer("gRPC infer, ensemble", "ensemble", [tensor("IN", "FP32", [4], FOUR)]),
    ]
    return cases


def _sequence_cases() -> list[Case]:
    one = [tensor("INPUT0", "FP32", [1], [1.0])]
    return [
        infer("sequence, first request without START", "sequence", one, parameters={"sequence_id": 7}),
        infer("sequence, no correlation id", "sequence", one),
        infer("sequence, START", "sequence", one, parameters={"sequence_id": 7, "sequence_start": True}),
        infer("sequence, next request", "sequence", one, parameters={"sequence_id": 7}),
        infer("sequence, END", "sequence", one, parameters={"sequence_id": 7, "sequence_end": True}),
        infer("sequence, after END", "sequence", one, parameters={"sequence_id": 7}),
        infer("sequence, string correlation id", "sequence", one,
              parameters={"sequence_id": "abc", "sequence_start": True, "sequence_end": True}),
        infer("sequence, flags to a model without sequences", "add_sub", add_sub(),
              parameters={"sequence_id": 5, "sequence_start": True}),
        infer("sequence, sequence_id of the wrong type", "sequence", one, parameters={"sequence_id": 1.5}),
    ]


#: System shared-memory regions the run creates before the first case (conftest): an input
#: region holding FOUR then ONES as FP32, and an output region of 32 bytes.
SHM_IN = (f"/openinfer_conformance_in_{os.getpid()}", 32)
SHM_OUT = (f"/openinfer_conformance_out_{os.getpid()}", 32)


def _shm_input(name: str, region: str, offset: int = 0, size: int = 16) -> dict:
    return {"name": name, "datatype": "FP32", "shape": [4], "parameters": {
        "shared_memory_region": region, "shared_memory_offset": offset, "shared_memory_byte_size": size}}


def _shm_cases() -> list[Case]:
    """A real region registered, read, written and unregistered, over HTTP and gRPC."""
    region = "/v2/systemsharedmemory/region"
    return [
        http("shm register", "POST", f"{region}/in/register", {"key": SHM_IN[0], "byte_size": SHM_IN[1]}),
        http("shm register, name taken", "POST", f"{region}/in/register", {"key": SHM_IN[0], "byte_size": SHM_IN[1]}),
        http("shm register, larger than the region", "POST", f"{region}/big/register",
             {"key": SHM_IN[0], "byte_size": 1 << 30}),
        http("shm register, offset past the region", "POST", f"{region}/past/register",
             {"key": SHM_IN[0], "offset": 64, "byte_size": 16}),
        http("shm register output region", "POST", f"{region}/out/register", {"key": SHM_OUT[0], "byte_size": SHM_OUT[1]}),
        http("shm status of a region", "GET", f"{region}/in/status"),
        infer("shm infer, inputs from a region", "add_sub", [_shm_input("INPUT0", "in"), _shm_input("INPUT1", "in", 16)]),
        infer("shm infer, output to a region", "add_sub", add_sub(), outputs=[
            {"name": "OUTPUT0", "parameters": {"shared_memory_region": "out", "shared_memory_byte_size": 16}},
            {"name": "OUTPUT1", "parameters": {"shared_memory_region": "out", "shared_memory_offset": 16,
                                               "shared_memory_byte_size": 16}}]),
        infer("shm infer, output region too small", "add_sub", add_sub(), outputs=[
            {"name": "OUTPUT0", "parameters": {"shared_memory_region": "out", "shared_memory_byte_size": 8}}]),
        infer("shm infer, input past the region's end", "add_sub",
              [_shm_input("INPUT0", "in", 24), _shm_input("INPUT1", "in")]),
        infer("shm infer, input size not matching the shape", "add_sub",
              [_shm_input("INPUT0", "in", 0, 8), _shm_input("INPUT1", "in")]),
        infer("shm infer, input with data and a region", "add_sub",
              [{**_shm_input("INPUT0", "in"), "data": FOUR}, _shm_input("INPUT1", "in")]),
        rpc("gRPC shm infer, inputs from a region", "ModelInfer", _grpc_shm_request()),
        http("shm unregister", "POST", f"{region}/in/unregister"),
        http("shm status after unregister", "GET", f"{region}/in/status"),
        rpc("gRPC shm register", "SystemSharedMemoryRegister",
            pb.SystemSharedMemoryRegisterRequest(name="g", key=SHM_IN[0], byte_size=SHM_IN[1])),
        rpc("gRPC shm status of a region", "SystemSharedMemoryStatus", pb.SystemSharedMemoryStatusRequest(name="g")),
        rpc("gRPC shm register, name taken", "SystemSharedMemoryRegister",
            pb.SystemSharedMemoryRegisterRequest(name="g", key=SHM_IN[0], byte_size=SHM_IN[1])),
        rpc("gRPC shm unregister", "SystemSharedMemoryUnregister", pb.SystemSharedMemoryUnregisterRequest(name="g")),
        http("shm unregister all", "POST", "/v2/systemsharedmemory/unregister"),
        http("shm status after unregistering all", "GET", "/v2/systemsharedmemory/status"),
    ]


def _grpc_shm_request() -> Any:
    """add_sub's inputs read from the region `in` (registered over HTTP before)."""
    message = pb.ModelInferRequest(model_name="add_sub")
    for name, offset in (("INPUT0", 0), ("INPUT1", 16)):
        entry = message.inputs.add(name=name, datatype="FP32", shape=[4])
        _param(entry.parameters["shared_memory_region"], "in")
        _param(entry.parameters["shared_memory_offset"], offset)
        _param(entry.parameters["shared_memory_byte_size"], 16)
    return message


def _extension_cases() -> list[Case]:
    return [
        http("repository index", "POST", "/v2/repository/index", view=wire.index),
        http("repository index, ready only", "POST", "/v2/repository/index", {"ready": True}, view=wire.index),
        http("repository unload", "POST", "/v2/repository/models/spare/unload"),
        infer("infer on an unloaded model", "spare", [tensor("INPUT0", "FP32", [1], [1.0])]),
        http("model ready, unloaded model", "GET", "/v2/models/spare/ready"),
        http("repository load", "POST", "/v2/repository/models/spare/load"),
        http("repository load, unknown model", "POST", "/v2/repository/models/nope/load"),
        http("repository unload, unknown model", "POST", "/v2/repository/models/nope/unload"),
        http("repository load, config not JSON", "POST", "/v2/repository/models/spare/load",
             {"parameters": {"config": "{not json"}}),
        http("repository load, unknown parameter", "POST", "/v2/repository/models/spare/load",
             {"parameters": {"colour": "red"}}),
        *[http(f"repository load, {name.replace('_', ' ')}", "POST", f"/v2/repository/models/{name}/load")
          for name in ("broken_config", "broken_code", "broken_init", "broken_warmup", "skipped_warmup", "wrong_name", "no_versions",
                       "versioned")],
        http("repository index with failed loads", "POST", "/v2/repository/index", view=wire.index),
        http("model metadata, specific versions", "GET", "/v2/models/versioned"),
        http("model ready, a version the policy leaves out", "GET", "/v2/models/versioned/versions/2/ready"),
        http("model metadata, a version the policy leaves out", "GET", "/v2/models/versioned/versions/2"),
        infer("infer, a version the policy leaves out", "versioned", [tensor("INPUT0", "FP32", [1], [1.0])], version="2"),
        infer("infer, the newest version of several", "versioned", [tensor("INPUT0", "FP32", [1], [1.0])]),
        http("repository load, config override", "POST", "/v2/repository/models/spare/load", {"parameters": {
            "config": json.dumps({"name": "spare", "backend": "python", "max_batch_size": 2,
                                  "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [1]}],
                                  "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [1]}]})}}),
        http("model config after an override", "GET", "/v2/models/spare/config"),
        http("repository load, config override with another name", "POST", "/v2/repository/models/spare/load",
             {"parameters": {"config": json.dumps({"name": "other", "backend": "python"})}}),
        http("repository load, back to the repository's config", "POST", "/v2/repository/models/spare/load"),
        http("model config after a plain load", "GET", "/v2/models/spare/config"),
        rpc("gRPC repository load, broken code", "RepositoryModelLoad", pb.RepositoryModelLoadRequest(model_name="broken_code")),
        http("statistics, every model", "GET", "/v2/models/stats", view=wire.stats),
        http("statistics, one model", "GET", "/v2/models/add_sub/stats", view=wire.stats),
        http("statistics, one version", "GET", "/v2/models/add_sub/versions/1/stats", view=wire.stats),
        http("statistics, unknown model", "GET", "/v2/models/nope/stats"),
        http("statistics, unknown version", "GET", "/v2/models/add_sub/versions/9/stats"),
        http("repository load, a model already loaded", "POST", "/v2/repository/models/add_sub/load"),
        http("repository unload, unload_dependents", "POST", "/v2/repository/models/spare/unload",
             {"parameters": {"unload_dependents": True}}),
        http("repository load after an unload with dependents", "POST", "/v2/repository/models/spare/load"),
        http("repository unload, unload_dependents not a boolean", "POST", "/v2/repository/models/spare/unload",
             {"parameters": {"unload_dependents": "yes"}}),
        http("repository load after the unload Triton took", "POST", "/v2/repository/models/spare/load"),
        http("repository index, ready not a boolean", "POST", "/v2/repository/index", {"ready": "yes"}),
        http("repository load, body not JSON", "POST", "/v2/repository/models/spare/load", content=b"{"),
        http("infer, header length not a number", "POST", "/v2/models/add_sub/infer",
             content=json.dumps({"inputs": add_sub()}).encode(), headers={"Inference-Header-Content-Length": "x"}),
        http("infer, header length past the body", "POST", "/v2/models/add_sub/infer",
             content=json.dumps({"inputs": add_sub()}).encode(), headers={"Inference-Header-Content-Length": "99999"}),
        http("system shared memory status", "GET", "/v2/systemsharedmemory/status"),
        http("system shared memory status, unknown region", "GET", "/v2/systemsharedmemory/region/none/status"),
        http("system shared memory register, key that does not exist", "POST",
             "/v2/systemsharedmemory/region/r/register", {"key": "/openinfer_conformance_none", "byte_size": 16}),
        http("system shared memory register, no key", "POST", "/v2/systemsharedmemory/region/r/register",
             {"byte_size": 16}),
        http("system shared memory unregister, unknown region", "POST", "/v2/systemsharedmemory/region/none/unregister"),
        http("system shared memory unregister all", "POST", "/v2/systemsharedmemory/unregister"),
        http("cuda shared memory status", "GET", "/v2/cudasharedmemory/status"),
        http("cuda shared memory register", "POST", "/v2/cudasharedmemory/region/c/register",
             {"raw_handle": {"b64": "AAAA"}, "device_id": 0, "byte_size": 16}),
        http("cuda shared memory unregister, unknown region", "POST", "/v2/cudasharedmemory/region/none/unregister"),
        infer("infer, input from an unknown shared-memory region", "add_sub",
              [{"name": "INPUT0", "datatype": "FP32", "shape": [4],
                "parameters": {"shared_memory_region": "none", "shared_memory_byte_size": 16}}, add_sub()[1]]),
        http("trace settings", "GET", "/v2/trace/setting"),
        http("trace settings of a model", "GET", "/v2/models/add_sub/trace/setting"),
        http("trace settings, unknown model", "GET", "/v2/models/nope/trace/setting"),
        http("trace settings update", "POST", "/v2/trace/setting", {"trace_rate": "2"}),
        http("trace settings update of a model", "POST", "/v2/models/add_sub/trace/setting", {"trace_count": "5"}),
        http("trace settings, a model's setting cleared", "POST", "/v2/models/add_sub/trace/setting", {"trace_count": None}),
        http("trace settings restored", "POST", "/v2/trace/setting", {"trace_rate": "1000"}),
        http("trace settings, unknown setting", "POST", "/v2/trace/setting", {"colour": "red"}),
        http("trace settings, rate not a number", "POST", "/v2/trace/setting", {"trace_rate": "often"}),
        http("trace settings, unknown level", "POST", "/v2/trace/setting", {"trace_level": ["EVIL"]}),
        http("trace settings, trace_file changed", "POST", "/v2/trace/setting", {"trace_file": "/tmp/openinfer-trace"}),
        http("trace settings, trace_mode", "POST", "/v2/trace/setting", {"trace_mode": "opentelemetry"}),
        http("log settings", "GET", "/v2/logging"),
        http("log settings update", "POST", "/v2/logging", {"log_verbose_level": 0, "log_info": True}),
        http("log settings, unknown setting", "POST", "/v2/logging", {"colour": "red"}),
        http("log settings, wrong type", "POST", "/v2/logging", {"log_info": "yes"}),
        http("log settings, unknown format", "POST", "/v2/logging", {"log_format": "xml"}),
        http("log settings, log_file changed", "POST", "/v2/logging", {"log_file": "/tmp/openinfer-log"}),
        http("log settings, verbose level negative", "POST", "/v2/logging", {"log_verbose_level": -1}),
        http("statistics, counts of a model used once", "GET", "/v2/models/labelled/stats", view=wire.counts),
        http("generate", "POST", "/v2/models/add_sub/generate", {"INPUT0": FOUR, "INPUT1": ONES}),
        http("generate, missing input", "POST", "/v2/models/add_sub/generate", {"INPUT0": FOUR}),
        http("generate, decoupled model", "POST", "/v2/models/repeat/generate", {"IN": [1, 2]}),
        http("generate_stream, decoupled model", "POST", "/v2/models/repeat/generate_stream", {"IN": [1, 2]}),
        http("generate, unknown model", "POST", "/v2/models/nope/generate", {"IN": [1]}),
        infer("infer, output to an unknown shared-memory region", "add_sub", add_sub(), outputs=[
            {"name": "OUTPUT0", "parameters": {"shared_memory_region": "none", "shared_memory_byte_size": 16}}]),
        metrics("metrics, families and their types", wire.metric_families),
        metrics("metrics, a model's request counters", wire.metric_samples("nv_inference_request_success",
                                                                          "nv_inference_request_failure",
                                                                          "nv_inference_count", "nv_inference_exec_count")),
        http("HTTP, unknown path", "GET", "/v2/nothing"),
        http("HTTP, GET on infer", "GET", "/v2/models/add_sub/infer"),
        http("HTTP, POST on health", "POST", "/v2/health/live"),
    ]


def _grpc_cases() -> list[Case]:
    return [
        rpc("gRPC server live", "ServerLive", pb.ServerLiveRequest()),
        rpc("gRPC server ready", "ServerReady", pb.ServerReadyRequest()),
        rpc("gRPC server metadata", "ServerMetadata", pb.ServerMetadataRequest(), view=wire.only("name")),
        rpc("gRPC model metadata", "ModelMetadata", pb.ModelMetadataRequest(name="add_sub")),
        rpc("gRPC model metadata, unknown model", "ModelMetadata", pb.ModelMetadataRequest(name="nope")),
        rpc("gRPC model metadata, unknown version", "ModelMetadata", pb.ModelMetadataRequest(name="add_sub", version="9")),
        rpc("gRPC model ready", "ModelReady", pb.ModelReadyRequest(name="add_sub")),
        rpc("gRPC model ready, unknown model", "ModelReady", pb.ModelReadyRequest(name="nope")),
        rpc("gRPC model config", "ModelConfig", pb.ModelConfigRequest(name="add_sub")),
        rpc("gRPC model config, sequence", "ModelConfig", pb.ModelConfigRequest(name="sequence")),
        rpc("gRPC model config, dynamic batching", "ModelConfig", pb.ModelConfigRequest(name="identity_fp32")),
        rpc("gRPC model config, warm-up", "ModelConfig", pb.ModelConfigRequest(name="no_inputs")),
        rpc("gRPC model config, unknown model", "ModelConfig", pb.ModelConfigRequest(name="nope")),
        grpc_infer("gRPC infer, raw contents", "add_sub", add_sub()),
        grpc_infer("gRPC infer, typed contents", "add_sub", add_sub(), raw=False),
        grpc_infer("gRPC infer, named output", "add_sub", add_sub(), outputs=("OUTPUT1",)),
        grpc_infer("gRPC infer, parameters", "add_sub", add_sub(), parameters={"custom": "x", "n": 3}),
        *[grpc_infer(f"gRPC infer, {dt}", "identity_any", [_any(dt)]) for dt in VALUES],
        *[grpc_infer(f"gRPC infer typed, {dt}", "identity_any", [_any(dt)], raw=False) for dt in VALUES if dt != "FP16"],
        grpc_infer("gRPC infer, BF16", "identity_any", [tensor("INPUT_BF16", "BF16", [2], [1.0, -2.0])]),
        grpc_infer("gRPC infer, empty tensor", "identity_fp32", [tensor("INPUT0", "FP32", [1, 0], [])]),
        grpc_infer("gRPC infer, wrong datatype", "add_sub", add_sub(datatype="INT32")),
        grpc_infer("gRPC infer, wrong shape", "add_sub", add_sub(shape=[2, 2])),
        grpc_infer("gRPC infer, unknown input name", "add_sub", add_sub(first="INPUTX")),
        grpc_infer("gRPC infer, input name in the wrong case", "add_sub", add_sub(first="input0")),
        grpc_infer("gRPC infer, input name matching two inputs but for case", "two_cases",
                   [tensor("Input0", "FP32", [1], [1.0])]),
        grpc_infer("gRPC infer, output name in the wrong case", "add_sub", add_sub(), outputs=("output0",)),
        rpc("gRPC infer, classification 0", "ModelInfer", _classification(0)),
        rpc("gRPC infer, classification 2", "ModelInfer", _classification(2)),
        grpc_infer("gRPC infer, output asked twice", "add_sub", add_sub(), outputs=("OUTPUT0", "OUTPUT0")),
        grpc_infer("gRPC infer, unknown datatype", "add_sub", add_sub(datatype="FP8")),
        grpc_infer("gRPC infer, version not a number", "add_sub", add_sub(), version="abc"),
        rpc("gRPC infer, raw contents not matching the shape", "ModelInfer",
            pb.ModelInferRequest(model_name="identity_fp32", inputs=[pb.ModelInferRequest.InferInputTensor(
                name="INPUT0", datatype="FP32", shape=[1, 4])], raw_input_contents=[b"\0" * 8])),
        grpc_infer("gRPC infer, missing input", "add_sub", add_sub()[:1]),
        grpc_infer("gRPC infer, unknown model", "nope", add_sub()),
        grpc_infer("gRPC infer, unknown version", "add_sub", add_sub(), version="9"),
        grpc_infer("gRPC infer, decoupled model", "repeat", [tensor("IN", "INT32", [2], [1, 2])]),
        grpc_infer("gRPC infer, batch over max_batch_size", "batched", [tensor("INPUT0", "FP32", [5, 2], [0] * 10)]),
        grpc_infer("gRPC sequence, first request without START", "sequence", [tensor("INPUT0", "FP32", [1], [1.0])],
                   parameters={"sequence_id": 8}),
        grpc_infer("gRPC sequence, START and END", "sequence", [tensor("INPUT0", "FP32", [1], [1.0])],
                   parameters={"sequence_id": 8, "sequence_start": True, "sequence_end": True}),
        rpc("gRPC infer, raw and typed contents", "ModelInfer", _raw_and_typed()),
        rpc("gRPC infer, more raw contents than inputs", "ModelInfer", _extra_raw()),
        grpc_infer("gRPC infer, too few typed values", "add_sub",
                   [tensor("INPUT0", "FP32", [4], [1.0, 2.0]), tensor("INPUT1", "FP32", [4], ONES)], raw=False),
        grpc_infer("gRPC infer, version 'latest'", "add_sub", add_sub(), version="latest"),
        grpc_infer("gRPC infer, sequence id of a model without sequences", "add_sub", add_sub(),
                   parameters={"sequence_id": 3}),
        grpc_infer("gRPC infer, string sequence id", "sequence", [tensor("INPUT0", "FP32", [1], [1.0])],
                   parameters={"sequence_id": "s-1", "sequence_start": True, "sequence_end": True}),
        grpc_infer("gRPC infer, priority", "add_sub", add_sub(), parameters={"priority": 1}),
        grpc_infer("gRPC infer, timeout of the wrong type", "add_sub", add_sub(), parameters={"timeout": "soon"}),
        rpc("gRPC model metadata, version 'latest'", "ModelMetadata", pb.ModelMetadataRequest(name="add_sub", version="latest")),
        rpc("gRPC statistics, unknown version", "ModelStatistics", pb.ModelStatisticsRequest(name="add_sub", version="9")),
        rpc("gRPC repository index, ready only", "RepositoryIndex", pb.RepositoryIndexRequest(ready=True),
            view=lambda b: wire.index(b.get("models", []))),
        rpc("gRPC repository index", "RepositoryIndex", pb.RepositoryIndexRequest(), view=lambda b: wire.index(b.get("models", []))),
        rpc("gRPC repository load, unknown model", "RepositoryModelLoad", pb.RepositoryModelLoadRequest(model_name="nope")),
        rpc("gRPC repository unload, unknown model", "RepositoryModelUnload", pb.RepositoryModelUnloadRequest(model_name="nope")),
        rpc("gRPC statistics, one model", "ModelStatistics", pb.ModelStatisticsRequest(name="add_sub"), view=wire.stats),
        rpc("gRPC statistics, unknown model", "ModelStatistics", pb.ModelStatisticsRequest(name="nope")),
        rpc("gRPC system shared memory status", "SystemSharedMemoryStatus", pb.SystemSharedMemoryStatusRequest()),
        rpc("gRPC system shared memory status, unknown region", "SystemSharedMemoryStatus",
            pb.SystemSharedMemoryStatusRequest(name="none")),
        rpc("gRPC system shared memory register, key that does not exist", "SystemSharedMemoryRegister",
            pb.SystemSharedMemoryRegisterRequest(name="r", key="/openinfer_conformance_none", byte_size=16)),
        rpc("gRPC system shared memory unregister, unknown region", "SystemSharedMemoryUnregister",
            pb.SystemSharedMemoryUnregisterRequest(name="none")),
        rpc("gRPC cuda shared memory status", "CudaSharedMemoryStatus", pb.CudaSharedMemoryStatusRequest()),
        rpc("gRPC trace settings", "TraceSetting", pb.TraceSettingRequest()),
        rpc("gRPC trace settings, unknown model", "TraceSetting", pb.TraceSettingRequest(model_name="nope")),
        rpc("gRPC log settings", "LogSettings", pb.LogSettingsRequest()),
        rpc("gRPC log settings update", "LogSettings", pb.LogSettingsRequest(settings={
            "log_verbose_level": pb.LogSettingsRequest.SettingValue(uint32_param=0)})),
        rpc("gRPC log settings, wrong type", "LogSettings", pb.LogSettingsRequest(settings={
            "log_info": pb.LogSettingsRequest.SettingValue(string_param="yes")})),
        rpc("gRPC log settings, unknown format", "LogSettings", pb.LogSettingsRequest(settings={
            "log_format": pb.LogSettingsRequest.SettingValue(string_param="xml")})),
        rpc("gRPC trace settings, unknown level", "TraceSetting", pb.TraceSettingRequest(settings={
            "trace_level": pb.TraceSettingRequest.SettingValue(value=["EVIL"])})),
        rpc("gRPC trace settings update", "TraceSetting", pb.TraceSettingRequest(settings={
            "trace_rate": pb.TraceSettingRequest.SettingValue(value=["2"])})),
        rpc("gRPC trace settings restored", "TraceSetting", pb.TraceSettingRequest(settings={
            "trace_rate": pb.TraceSettingRequest.SettingValue(value=["1000"])})),
        rpc("gRPC repository unload", "RepositoryModelUnload", pb.RepositoryModelUnloadRequest(model_name="spare")),
        rpc("gRPC repository load", "RepositoryModelLoad", pb.RepositoryModelLoadRequest(model_name="spare")),
        rpc("gRPC infer, request id echoed", "ModelInfer", _with_id(grpc_message("add_sub", add_sub()), "req-2")),
        stream("gRPC stream, decoupled model", grpc_message("repeat", [tensor("IN", "INT32", [2], [1, 2])]), 2),
        stream("gRPC stream, unknown model", grpc_message("nope", add_sub()), 1),
        stream("gRPC stream, wrong shape", grpc_message("add_sub", add_sub(shape=[2, 2])), 1),
        stream("gRPC stream, sequence START and END", grpc_message(
            "sequence", [tensor("INPUT0", "FP32", [1], [1.0])],
            parameters={"sequence_id": 11, "sequence_start": True, "sequence_end": True}), 1),
    ]


CASES: list[Case] = [*_server_cases(), *_infer_cases(), *_refused_cases(), *_datatype_cases(), *_python_cases(), *_sequence_cases(),
                     *_shm_cases(), *_extension_cases(), *_grpc_cases()]

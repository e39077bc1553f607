"""Hostile input over the KServe HTTP frontend: every answer is `{"error": ...}` in Triton's
statuses, memory stays bounded, nothing escapes the repository or a registered region, and a
healthy request right after succeeds.

Property-based cases (Hypothesis, fixed seed) plus hand-written ones for the named attacks.
"""

from __future__ import annotations

import base64
import gzip
import json
import socket
import struct
import zlib
from pathlib import Path
from urllib.parse import quote

import httpx
import numpy as np
import pytest
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from hypothesis import given, settings
from hypothesis import strategies as st
from tritonclient.utils import InferenceServerException

from tests.hardening import models
from tests.hardening.oracle import check_http_answer, healthy_http, rss_mib
from tests.helpers import Server

LIMIT = 1024 * 1024  # --http-max-input-size for this module: bombs and big bodies stay cheap
CLIENT_TIMEOUT = 2  # --http-client-timeout-secs
INFER = "/v2/models/identity_any/infer"
DATATYPES = ["BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64",
             "FP16", "FP32", "FP64", "BYTES", "BF16"]
INPUT_NAMES = [f"INPUT_{t if t != 'BYTES' else 'STRING'}" for t in DATATYPES]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = models.copy_examples(tmp_path_factory.mktemp("http_corpus") / "repo")
    server = Server(
        repo,
        [
            "--model-control-mode", "explicit", "--load-model", "*",
            "--allow-client-shm", "true",
            "--http-max-input-size", str(LIMIT),
            "--http-client-timeout-secs", str(CLIENT_TIMEOUT),
        ],
    ).start(wait_for="ready")
    server.baseline_rss = rss_mib(server.process.pid)
    yield server
    assert server.stop() == 0, server.log()


@pytest.fixture(scope="module")
def http(server):
    with httpx.Client(base_url=f"http://127.0.0.1:{server.http_port}", timeout=30) as client:
        yield client


def post(http: httpx.Client, path: str, body: bytes, headers: dict | None = None) -> httpx.Response:
    return http.post(path, content=body, headers=headers or {})


# ----------------------------------------------------------------------------- strategies
leaf = (
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=6)
)
json_value = st.recursive(leaf, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=10)
tensor_data = st.recursive(leaf, lambda inner: st.lists(inner, max_size=4), max_leaves=16)
dims = (
    st.integers(min_value=-3, max_value=5)
    | st.sampled_from([0, 2**31, 2**32 + 1, 2**62, 2**63, 2**64 + 7, -(2**63)])
    | st.floats(allow_nan=True) | st.text(max_size=2) | st.booleans() | st.none()
)
shapes = st.lists(dims, max_size=5) | st.none() | st.integers() | st.text(max_size=3)
names = st.sampled_from(INPUT_NAMES + ["nope", "", "INPUT_FP32 ", "input_fp32"]) | st.text(max_size=8) | st.integers()
datatypes = st.sampled_from(DATATYPES + ["STRING", "fp32", "", "FP33", "INT128"]) | st.integers() | st.none()
param_keys = st.sampled_from([
    "binary_data_size", "shared_memory_region", "shared_memory_byte_size", "shared_memory_offset",
    "classification", "binary_data", "binary_data_output", "priority", "timeout", "sequence_id",
    "sequence_start", "sequence_end", "triton_enable_empty_final_response", "headers", "custom",
])
parameters = st.dictionaries(param_keys | st.text(max_size=5), json_value, max_size=4) | json_value
tensor = st.fixed_dictionaries(
    {"name": names, "datatype": datatypes, "shape": shapes},
    optional={"data": tensor_data, "parameters": parameters},
)
outputs = st.lists(
    st.fixed_dictionaries({"name": st.sampled_from(["OUTPUT_FP32", "OUTPUT_STRING", "nope"]) | names},
                          optional={"parameters": parameters}),
    max_size=3,
)
documents = st.fixed_dictionaries(
    {"inputs": st.lists(tensor, max_size=3) | json_value},
    optional={"id": st.text(max_size=6) | st.integers(), "parameters": parameters, "outputs": outputs | json_value},
)


@settings(max_examples=400)
@given(doc=documents)
def test_hostile_infer_documents(http, doc):
    reply = post(http, INFER, json.dumps(doc).encode())  # json.dumps writes NaN / Infinity too
    check_http_answer(reply.status_code, reply.content)


# A valid-looking binary request whose framing lies: sizes, header length, trailing bytes.
@settings(max_examples=200)
@given(
    sizes=st.lists(st.integers(min_value=-2, max_value=2**40) | st.sampled_from([0, 4, 8, 12]), min_size=1, max_size=3),
    shape=st.lists(st.integers(min_value=0, max_value=2**33), min_size=1, max_size=2),
    datatype=st.sampled_from(["FP32", "BYTES", "INT8", "BOOL"]),
    tail=st.binary(max_size=64),
    header_delta=st.integers(min_value=-10, max_value=200) | st.sampled_from([None, "x", "-1", "1e3", "+5", "0x10", str(2**70)]),
)
def test_lying_binary_framing(http, sizes, shape, datatype, tail, header_delta):
    name = "INPUT_STRING" if datatype == "BYTES" else f"INPUT_{datatype}"
    inputs = [{"name": name if i == 0 else f"{name}_{i}", "datatype": datatype, "shape": shape,
               "parameters": {"binary_data_size": size}} for i, size in enumerate(sizes)]
    header = json.dumps({"inputs": inputs}).encode()
    body = header + tail
    if header_delta is None:
        length = None
    elif isinstance(header_delta, int):
        length = str(len(header) + header_delta)
    else:
        length = header_delta
    reply = post(http, INFER, body, {"Inference-Header-Content-Length": length} if length is not None else {})
    check_http_answer(reply.status_code, reply.content)


@settings(max_examples=80)
@given(
    body=st.binary(max_size=600),
    encoding=st.sampled_from([None, "gzip", "deflate", "identity", "br", "gzip, deflate", ""]),
    header_length=st.none() | st.integers(min_value=-1, max_value=700).map(str),
)
def test_arbitrary_bytes(http, body, encoding, header_length):
    headers = {}
    if encoding is not None:
        headers["Content-Encoding"] = encoding
    if header_length is not None:
        headers["Inference-Header-Content-Length"] = header_length
    reply = post(http, INFER, body, headers)
    check_http_answer(reply.status_code, reply.content, allow_ok=False)


segment = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="/?#"), max_size=12)


@settings(max_examples=80)
@given(
    parts=st.lists(st.sampled_from(["v2", "models", "identity_any", "versions", "1", "-1", "infer", "ready",
                                    "config", "stats", "repository", "index", "load", "unload", "..", "."]) | segment,
                   max_size=6),
    method=st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"]),
    body=st.binary(max_size=64),
)
def test_arbitrary_paths_and_methods(http, parts, method, body):
    path = "/" + "/".join(quote(p, safe="") or "_" for p in parts)
    reply = http.request(method, path, content=body)
    if method == "HEAD":
        assert reply.status_code in {200, 400, 403, 404, 405, 501, 503}
        return
    # 501: `repository_name` in a repository path (Triton's UNSUPPORTED).
    check_http_answer(reply.status_code, reply.content, allow=(501,))


# ------------------------------------------------------------------- values survive the trip
def _arrays(datatype: str, finite: bool = False):
    count = st.integers(min_value=0, max_value=6)
    if datatype == "BOOL":
        return count.flatmap(lambda n: st.lists(st.booleans(), min_size=n, max_size=n)).map(lambda v: np.array(v, bool))
    if datatype == "BYTES":
        return st.lists(st.binary(max_size=12), max_size=6).map(lambda v: np.array(v, dtype=np.object_))
    if datatype in ("FP16", "FP32", "FP64"):
        width = {"FP16": 16, "FP32": 32, "FP64": 64}[datatype]
        dtype = {"FP16": np.float16, "FP32": np.float32, "FP64": np.float64}[datatype]
        return st.lists(st.floats(width=width, allow_nan=not finite, allow_infinity=not finite), max_size=6).map(
            lambda v: np.array(v, dtype=dtype))
    info = np.iinfo(getattr(np, datatype.lower()))
    return st.lists(st.integers(min_value=int(info.min), max_value=int(info.max)), max_size=6).map(
        lambda v: np.array(v, dtype=getattr(np, datatype.lower())))


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    if a.dtype.kind == "f":
        return a.shape == b.shape and bool(np.all((a == b) | (np.isnan(a) & np.isnan(b))))
    if a.dtype == np.object_:
        return [bytes(x) if not isinstance(x, str) else x.encode() for x in b.reshape(-1)] == list(a.reshape(-1))
    return a.shape == b.shape and bool(np.all(a == b))


@settings(max_examples=60)
@given(data=st.data(), datatype=st.sampled_from([t for t in DATATYPES if t != "BF16"]), binary=st.booleans())
def test_values_round_trip_exactly(server, data, datatype, binary):
    """Edge values (NaN, +-Infinity, extremes, empty, arbitrary bytes) come back unchanged.
    (NaN and Infinity travel in binary: request JSON refuses them.)"""
    if datatype == "FP16":
        binary = True  # FP16 cannot travel as JSON
    if datatype == "BYTES" and not binary:
        array = data.draw(st.lists(st.text(max_size=8), max_size=5)).copy()
        array = np.array([s.encode() for s in array], dtype=np.object_)
    else:
        array = data.draw(_arrays(datatype, finite=not binary))
    name = "STRING" if datatype == "BYTES" else datatype
    client = httpclient.InferenceServerClient(server.http_url)
    tensor = httpclient.InferInput(f"INPUT_{name}", list(array.shape), datatype)
    tensor.set_data_from_numpy(array, binary_data=binary)
    result = client.infer("identity_any", [tensor], outputs=[httpclient.InferRequestedOutput(f"OUTPUT_{name}", binary_data=binary)])
    out = result.as_numpy(f"OUTPUT_{name}")
    assert _same(array, out), (array, out)


# ------------------------------------------------------------------------- hand-written cases
def _infer_body(inputs: list[dict], **extra) -> bytes:
    return json.dumps({"inputs": inputs, **extra}).encode()


FP32 = {"name": "INPUT_FP32", "datatype": "FP32", "shape": [1], "data": [1.0]}
HAND = [
    # (label, body, headers, status, message fragment)
    ("malformed json", b'{"inputs": [', {}, 400, "failed to parse the request JSON"),
    ("not an object", b"[1, 2, 3]", {}, 400, "Unable to parse 'inputs': attempt to access non-existing object member 'inputs'"),
    ("empty body", b"", {}, 400, "Raw request must only have 1 input"),  # as Triton: a raw request
    ("deep nesting", b"[" * 100_000 + b"]" * 100_000, {}, 400, "failed to parse"),
    ("deep object nesting", b'{"a":' * 50_000 + b"1" + b"}" * 50_000, {}, 400, "failed to parse"),
    ("data nested 150 levels", _infer_body([{**FP32, "data": json.loads("[" * 150 + "1" + "]" * 150)}]), {}, 400,
     "JSON nesting depth exceeds maximum allowed limit (100)"),
    ("huge number token", b'{"inputs":[{"name":"INPUT_INT64","datatype":"INT64","shape":[1],"data":[' + b"9" * 5000 + b"]}]}", {}, 400, "failed to parse"),
    ("unknown datatype", _infer_body([{**FP32, "datatype": "FP33"}]), {}, 400, "invalid datatype for input INPUT_FP32"),
    ("wrong datatype", _infer_body([{**FP32, "datatype": "INT32", "data": [1]}]), {}, 400, "expects 'FP32'"),
    ("negative dim", _infer_body([{**FP32, "shape": [-1]}]), {}, 400, "negative dimension"),
    ("overflowing dim", _infer_body([{**FP32, "shape": [2**64]}]), {}, 400, "non-unsigned-integer"),
    ("overflowing product", _infer_body([{**FP32, "shape": [2**40, 2**40]}]), {}, 400, "Shape does not match"),
    ("zero dim with data", _infer_body([{**FP32, "shape": [0], "data": [1.0]}]), {}, 400, "Shape does not match"),
    ("shape/data disagree", _infer_body([{**FP32, "shape": [3]}]), {}, 400, "Shape does not match"),
    ("duplicate input", _infer_body([FP32, FP32]), {}, 400, "already exists in request"),
    ("data and binary", _infer_body([{**FP32, "parameters": {"binary_data_size": 4}}]), {}, 400, "only one of"),
    ("no data at all", _infer_body([{"name": "INPUT_FP32", "datatype": "FP32", "shape": [1]}]), {}, 400, "no field is set"),
    ("fp16 as json", _infer_body([{"name": "INPUT_FP16", "datatype": "FP16", "shape": [1], "data": [1.0]}]), {}, 400, "FP16"),
    ("bool as number", _infer_body([{"name": "INPUT_BOOL", "datatype": "BOOL", "shape": [1], "data": [1]}]), {}, 400, "boolean"),
    ("absurd classification", _infer_body([FP32], outputs=[{"name": "OUTPUT_FP32", "parameters": {"classification": 2**200}}]), {}, 400, "classification"),
    ("negative classification", _infer_body([FP32], outputs=[{"name": "OUTPUT_FP32", "parameters": {"classification": -1}}]), {}, 400, "classification"),
    ("unknown output", _infer_body([FP32], outputs=[{"name": "NOPE"}]), {}, 400, "unexpected inference output"),
    # identity_any answers only for the inputs it is given: the model's doing, so 500.
    ("output the model did not produce", _infer_body([FP32], outputs=[{"name": "OUTPUT_INT8"}]), {}, 500, "did not produce requested output"),
    ("reserved parameter", _infer_body([FP32], parameters={"triton_x": 1}), {}, 400, "triton_"),
    ("object parameter", _infer_body([FP32], parameters={"p": {"a": 1}}), {}, 400, "parameter"),
    ("shm region with slash", _infer_body([{"name": "INPUT_FP32", "datatype": "FP32", "shape": [1], "parameters": {"shared_memory_region": "../../etc/passwd", "shared_memory_byte_size": 4}}]), {}, 404, "Unable to find shared memory region"),
    ("header length beyond body", _infer_body([FP32]), {"Inference-Header-Content-Length": "100000"}, 400, "inference header size"),
    ("header length not a number", _infer_body([FP32]), {"Inference-Header-Content-Length": "ten"}, 400, "Unable to parse Inference-Header-Content-Length"),
    ("unknown encoding", _infer_body([FP32]), {"Content-Encoding": "br"}, 415, "Unsupported compression type"),
    ("garbage gzip", b"\x1f\x8b\x08\x00garbage", {"Content-Encoding": "gzip"}, 400, "decompress"),
    # Every client mistake is a 4xx, even where Triton answers 500 or 501.
    ("body null", b"null", {}, 400, "Unable to parse 'inputs': attempt to access non-existing object member 'inputs'"),
    ("body a number", b"3", {}, 400, "Unable to parse 'inputs': attempt to access non-existing object member 'inputs'"),
    ("body a string", b'"inputs"', {}, 400, "Unable to parse 'inputs': attempt to access non-existing object member 'inputs'"),
    ("invalid utf-8", b'{"id": "\xff\xfe", "inputs": []}', {}, 400, "failed to parse"),
    ("lone surrogate", b'{"id": "\\ud800", "inputs": []}', {}, 400, "failed to parse"),
    ("lone surrogate in data", b'{"inputs": [{"name": "INPUT_STRING", "datatype": "BYTES", "shape": [1], "data": ["\\udfff"]}]}', {}, 400, "failed to parse"),
    ("NaN literal", b'{"inputs": [{"name": "INPUT_FP32", "datatype": "FP32", "shape": [1], "data": [NaN]}]}', {}, 400, "'NaN' is not a JSON number"),
    ("Infinity literal", b'{"inputs": [{"name": "INPUT_FP64", "datatype": "FP64", "shape": [2], "data": [1, -Infinity]}]}', {}, 400, "'-Infinity' is not a JSON number"),
    ("overflow to infinity", b'{"inputs": [{"name": "INPUT_FP64", "datatype": "FP64", "shape": [1], "data": [1e999]}]}', {}, 400, "failed to parse"),
    ("inputs an object", _infer_body({"name": "INPUT_FP32"}), {}, 400, "Unable to parse 'inputs'"),
    ("inputs a string", json.dumps({"inputs": "INPUT_FP32"}).encode(), {}, 400, "Unable to parse 'inputs'"),
    ("input not an object", _infer_body([["INPUT_FP32"]]), {}, 400, "Unable to parse 'inputs'"),
    ("name a number", _infer_body([{**FP32, "name": 5}]), {}, 400, "Unable to parse 'name'"),
    ("datatype a list", _infer_body([{**FP32, "datatype": ["FP32"]}]), {}, 400, "Unable to parse 'datatype'"),
    ("id a number", _infer_body([FP32], id=7), {}, 400, "Unable to parse 'id'"),
    ("fractional dim", _infer_body([{**FP32, "shape": [1.5]}]), {}, 400, "non-unsigned-integer"),
    ("string dim", _infer_body([{**FP32, "shape": ["1"]}]), {}, 400, "non-unsigned-integer"),
    ("bool dim", _infer_body([{**FP32, "shape": [True]}]), {}, 400, "non-unsigned-integer"),
    ("shape a number", _infer_body([{**FP32, "shape": 1}]), {}, 400, "non-array as array"),
    ("parameters a list", _infer_body([FP32], parameters=[1]), {}, 400, "'parameters'"),
    ("parameters a string", _infer_body([FP32], parameters="binary"), {}, 400, "'parameters'"),
    ("input parameters a list", _infer_body([{**FP32, "parameters": [1]}]), {}, 400, "'parameters'"),
    ("outputs an object", _infer_body([FP32], outputs={"name": "OUTPUT_FP32"}), {}, 400, "Unable to parse 'outputs'"),
    ("output name a number", _infer_body([FP32], outputs=[{"name": 3}]), {}, 400, "Unable to parse 'outputs'"),
    ("output parameters a list", _infer_body([FP32], outputs=[{"name": "OUTPUT_FP32", "parameters": []}]), {}, 400, "'parameters'"),
    ("unknown encoding x-evil", _infer_body([FP32]), {"Content-Encoding": "x-evil"}, 415, "Unsupported compression type"),
    ("encoding gzip twice", gzip.compress(gzip.compress(_infer_body([FP32]))), {"Content-Encoding": "gzip, gzip"}, 415, "Unsupported compression type"),
]


@pytest.mark.parametrize("label,body,headers,status,fragment", HAND, ids=[c[0] for c in HAND])
def test_hand_written_hostile_input(http, label, body, headers, status, fragment):
    reply = post(http, INFER, body, headers)
    assert reply.status_code == status, reply.text[:300]
    doc = check_http_answer(reply.status_code, reply.content, allow_ok=False)
    assert fragment in doc["error"], doc["error"]
    if status == 415:  # the encodings the server does take, as Triton lists them
        assert reply.headers["accept-encoding"] == "gzip, deflate"


CONFIG = json.dumps({"backend": "python", "max_batch_size": 0,
                     "input": [{"name": "IN", "data_type": "TYPE_FP32", "dims": [1]}],
                     "output": [{"name": "OUT", "data_type": "TYPE_FP32", "dims": [1]}]})
SETTINGS = [
    # (label, path, body, status, message fragment): mistakes outside infer, also 4xx.
    ("load: body a list", "/v2/repository/models/identity_any/load", b"[]", 400, "expected a JSON object"),
    ("load: body null", "/v2/repository/models/identity_any/load", b"null", 400, "expected a JSON object"),
    ("load: not JSON", "/v2/repository/models/identity_any/load", b"{config", 400, "failed to parse"),
    ("load: parameters a list", "/v2/repository/models/identity_any/load", b'{"parameters": []}', 400, "'parameters'"),
    ("load: config a number", "/v2/repository/models/identity_any/load", b'{"parameters": {"config": 5}}', 400, "'config'"),
    ("load: config an object", "/v2/repository/models/identity_any/load", b'{"parameters": {"config": {"backend": "python"}}}', 400, "'config'"),
    ("load: config not JSON", "/v2/repository/models/identity_any/load", b'{"parameters": {"config": "{backend"}}', 400, "failed to poll from model repository: Invalid config override"),
    ("load: config wrong field type", "/v2/repository/models/identity_any/load", json.dumps({"parameters": {"config": '{"max_batch_size": "many"}'}}).encode(), 400, "failed to poll from model repository: Invalid config override"),
    ("load: unknown parameter", "/v2/repository/models/identity_any/load", b'{"parameters": {"colour": "red"}}', 400, "unrecognized load parameter 'colour'"),
    ("load: file not base64", "/v2/repository/models/escape/load", json.dumps({"parameters": {"config": CONFIG, "file:1/model.py": "%%%"}}).encode(), 400, "file:1/model.py"),
    ("load: file a number", "/v2/repository/models/escape/load", json.dumps({"parameters": {"config": CONFIG, "file:1/model.py": 5}}).encode(), 400, "file:1/model.py"),
    ("load: unknown model", "/v2/repository/models/no_such_model/load", b"", 404, "failed to poll from model repository"),
    ("unload: parameters a list", "/v2/repository/models/identity_any/unload", b'{"parameters": [1]}', 400, "'parameters'"),
    ("unload: dependents a string", "/v2/repository/models/nothing/unload", b'{"parameters": {"unload_dependents": "yes"}}', 400, "unload_dependents"),
    ("index: body a list", "/v2/repository/index", b"[]", 400, "expected a JSON object"),
    ("index: ready a string", "/v2/repository/index", b'{"ready": "yes"}', 400, "non-boolean as boolean"),  # Triton's words
    ("trace: unknown level", "/v2/trace/setting", b'{"trace_level": ["EVIL"]}', 400, "unknown trace level 'EVIL'"),
    ("trace: unknown mode", "/v2/trace/setting", b'{"trace_mode": "evil"}', 400, "unsupported trace mode 'evil'"),
    ("trace: level a string", "/v2/trace/setting", b'{"trace_level": "TIMESTAMPS"}', 400, "'trace_level'"),
    ("trace: rate a list", "/v2/trace/setting", b'{"trace_rate": [1]}', 400, "'trace_rate'"),
    ("trace: rate not a number", "/v2/trace/setting", b'{"trace_rate": "often"}', 400, "'trace_rate'"),
    ("trace: body a list", "/v2/trace/setting", b"[]", 400, "expected a JSON object"),
    ("trace: empty body", "/v2/trace/setting", b"", 400, "empty"),
    ("log: info a string", "/v2/logging", b'{"log_info": "yes"}', 400, "non-boolean as boolean"),  # Triton names no key
    ("log: level negative", "/v2/logging", b'{"log_verbose_level": -1}', 400, "non-unsigned-integer"),
    ("log: level a float", "/v2/logging", b'{"log_verbose_level": 1.5}', 400, "non-unsigned-integer"),
    ("log: unknown format", "/v2/logging", b'{"log_format": "xml"}', 400, "log_format"),
    ("log: body a number", "/v2/logging", b"1", 400, "expected a JSON object"),
    ("shm: key a number", "/v2/systemsharedmemory/region/r/register", b'{"key": 5, "byte_size": 4}', 400, "'key'"),
    ("shm: size a string", "/v2/systemsharedmemory/region/r/register", b'{"key": "/k", "byte_size": "4"}', 400, "'byte_size'"),
    ("shm: size negative", "/v2/systemsharedmemory/region/r/register", b'{"key": "/k", "byte_size": -4}', 400, "'byte_size'"),
    ("shm: offset a float", "/v2/systemsharedmemory/region/r/register", b'{"key": "/k", "offset": 0.5, "byte_size": 4}', 400, "'offset'"),
    ("shm: unknown key", "/v2/systemsharedmemory/region/r/register", b'{"key": "/oi_no_such_key", "byte_size": 4}', 400, "Unable to open shared memory region"),
    ("shm: body a list", "/v2/systemsharedmemory/region/r/register", b"[]", 400, "expected a JSON object"),
    ("cuda shm: handle a string", "/v2/cudasharedmemory/region/r/register", b'{"raw_handle": "abc", "byte_size": 4}', 400, "'b64'"),
    ("cuda shm: device a string", "/v2/cudasharedmemory/region/r/register", b'{"raw_handle": {"b64": "AA=="}, "device_id": "0", "byte_size": 4}', 400, "'device_id'"),
]


@pytest.mark.parametrize("label,path,body,status,fragment", SETTINGS, ids=[c[0] for c in SETTINGS])
def test_hostile_settings_loads_and_registrations(http, label, path, body, status, fragment):
    reply = post(http, path, body)
    assert reply.status_code == status, reply.text[:300]
    doc = check_http_answer(reply.status_code, reply.content, allow_ok=False)
    assert fragment in doc["error"], doc["error"]


def test_bytes_length_prefixes_that_lie(http):
    header = json.dumps({"inputs": [{"name": "INPUT_STRING", "datatype": "BYTES", "shape": [2],
                                     "parameters": {"binary_data_size": 9}}]}).encode()
    hdr = {"Inference-Header-Content-Length": str(len(header))}
    for payload, fragment in [
        (struct.pack("<I", 2**31) + b"abcde", "incomplete string"),  # prefix claims 2 GiB
        (struct.pack("<I", 1) + b"a" + struct.pack("<I", 0)[:3] + b"x", "incomplete string"),
        (struct.pack("<I", 0) + struct.pack("<I", 0) + b"x", "unexpected number of string elements"),
    ]:
        reply = post(http, INFER, header + payload, hdr)
        assert reply.status_code == 400, reply.text
        assert fragment in reply.json()["error"]
    # A count no buffer can hold is refused before anything is allocated for it.
    header = json.dumps({"inputs": [{"name": "INPUT_STRING", "datatype": "BYTES", "shape": [2**40],
                                     "parameters": {"binary_data_size": 4}}]}).encode()
    reply = post(http, INFER, header + b"\0\0\0\0", {"Inference-Header-Content-Length": str(len(header))})
    assert reply.status_code == 400 and "elements need at least" in reply.json()["error"], reply.text
    healthy_http(f"127.0.0.1:{http.base_url.port}")


def test_binary_data_size_larger_and_smaller_than_body(http):
    header = json.dumps({"inputs": [{"name": "INPUT_FP32", "datatype": "FP32", "shape": [2],
                                     "parameters": {"binary_data_size": 8}}]}).encode()
    hdr = {"Inference-Header-Content-Length": str(len(header))}
    short = post(http, INFER, header + b"\0" * 4, hdr)
    assert short.status_code == 400 and "expecting 4 additional bytes" in short.json()["error"]
    long = post(http, INFER, header + b"\0" * 12, hdr)
    assert long.status_code == 400 and "unexpected additional input data" in long.json()["error"]


def test_decompression_bombs_stop_at_the_limit(server, http):
    bomb = gzip.compress(b"\0" * (64 * LIMIT))  # 64 MiB of zeros in ~64 KiB
    assert len(bomb) < LIMIT
    for body, encoding in [(bomb, "gzip"), (zlib.compress(b" " * (64 * LIMIT)), "deflate")]:
        reply = post(http, INFER, body, {"Content-Encoding": encoding})
        assert reply.status_code == 400, reply.text
        assert "--http-max-input-size" in reply.json()["error"]
    assert rss_mib(server.process.pid) < server.baseline_rss + 100
    healthy_http(server.http_url)


def test_bodies_over_the_limit(server, http):
    big = b"x" * (LIMIT + 1)
    reply = post(http, INFER, big)
    assert reply.status_code == 400 and "--http-max-input-size" in reply.json()["error"]
    # Without a Content-Length (chunked), the limit holds while the body streams in.
    reply = http.post(INFER, content=iter([b"y" * 65536] * (LIMIT // 65536 + 2)))
    assert reply.status_code == 400 and "--http-max-input-size" in reply.json()["error"]
    healthy_http(server.http_url)


def _raw_http(port: int, head: bytes, chunks: list[bytes]) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head)
        for chunk in chunks:
            sock.sendall(chunk)
        reply = b""
        while b"\r\n\r\n" not in reply or len(reply) < reply.index(b"\r\n\r\n") + 4 + _content_length(reply):
            data = sock.recv(65536)
            if not data:
                break
            reply += data
        return reply


def _content_length(reply: bytes) -> int:
    for line in reply.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return int(line.split(b":")[1])
    return 0


def test_a_chunked_body_that_arrives_whole_is_held_to_the_limit(server):
    """No content-length, and the whole body in the socket before the server reads it."""
    body = b"z" * (LIMIT + 1)
    head = b"POST " + INFER.encode() + b" HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    reply = _raw_http(server.http_port, head + b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n", [])
    assert reply.startswith(b"HTTP/1.1 400"), reply[:300]
    assert b"--http-max-input-size" in reply
    healthy_http(server.http_url)

def test_many_tiny_chunks(server):
    """A body sent as thousands of 1-byte chunks is assembled once and answered."""
    body = _infer_body([{"name": "INPUT_INT32", "datatype": "INT32", "shape": [2000], "data": list(range(2000))}],
                       outputs=[{"name": "OUTPUT_INT32", "parameters": {"binary_data": False}}])
    head = (b"POST " + INFER.encode() + b" HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
    chunks = [b"1\r\n" + body[i : i + 1] + b"\r\n" for i in range(len(body))]
    stream = [b"".join(chunks[i : i + 500]) for i in range(0, len(chunks), 500)] + [b"0\r\n\r\n"]
    reply = _raw_http(server.http_port, head, stream)
    assert reply.startswith(b"HTTP/1.1 200"), reply[:200]
    doc = json.loads(reply.split(b"\r\n\r\n", 1)[1])
    assert doc["outputs"][0]["data"] == list(range(2000))


def test_slow_loris_clients_do_not_hold_the_server(server):
    """Clients trickling headers or stalling a body are served no one's time and are dropped."""
    trickling = []
    for _ in range(64):
        sock = socket.create_connection(("127.0.0.1", server.http_port))
        sock.sendall(b"POST /v2/models/identity_any/infer HTTP/1.1\r\nHost: x\r\nContent-Le")
        trickling.append(sock)
    stalled = socket.create_connection(("127.0.0.1", server.http_port))
    stalled.sendall(b"POST " + INFER.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"inputs\"")
    idle = socket.create_connection(("127.0.0.1", server.http_port))  # connects, says nothing
    healthy_http(server.http_url)  # served while they trickle
    for sock in [*trickling, stalled, idle]:
        sock.settimeout(CLIENT_TIMEOUT * 10)
        assert sock.recv(100) == b"", "a slow client kept its connection"
        sock.close()
    healthy_http(server.http_url)


def test_a_served_connection_that_then_trickles_is_dropped(server):
    """The deadline applies to every request of a keep-alive connection, not only its first."""
    with socket.create_connection(("127.0.0.1", server.http_port)) as sock:
        sock.settimeout(CLIENT_TIMEOUT * 10)
        sock.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
        assert sock.recv(1000).startswith(b"HTTP/1.1 200")
        sock.sendall(b"GET /v2/health/li")  # the next request stalls in its request line
        assert sock.recv(100) == b"", "a stalled second request kept its connection"


def test_connection_close_is_answered_then_closed(server):
    """A request asking to close gets its whole answer, then the connection ends."""
    body = _infer_body([{"name": "INPUT_INT32", "datatype": "INT32", "shape": [3], "data": [1, 2, 3]}],
                       outputs=[{"name": "OUTPUT_INT32", "parameters": {"binary_data": False}}])
    with socket.create_connection(("127.0.0.1", server.http_port)) as sock:
        sock.settimeout(CLIENT_TIMEOUT * 10)
        sock.sendall(b"POST " + INFER.encode() + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                     b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    head, payload = reply.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 200") and b"connection: close" in head.lower()
    assert json.loads(payload)["outputs"][0]["data"] == [1, 2, 3]


def test_shared_memory_offsets_sizes_and_names(server, http):
    client = httpclient.InferenceServerClient(server.http_url)
    handle = shm.create_shared_memory_region("hardening_in", "/hardening_in", 16)
    try:
        shm.set_shared_memory_region(handle, [np.arange(4, dtype=np.float32)])
        client.register_system_shared_memory("hardening_in", "/hardening_in", 16)
        for offset, size, fragment in [(16, 4, "Invalid offset"), (12, 8, "Invalid offset + byte size"),
                                       (2**62, 4, "Invalid offset"), (0, 2**40, "Invalid offset + byte size")]:
            tensor = httpclient.InferInput("INPUT_FP32", [1], "FP32")
            tensor.set_shared_memory("hardening_in", size, offset)
            with pytest.raises(InferenceServerException) as info:
                client.infer("identity_any", [tensor])
            assert fragment in info.value.message()
        # Registration bounds are checked against the object itself.
        with pytest.raises(InferenceServerException) as info:
            client.register_system_shared_memory("too_big", "/hardening_in", 64)
        assert info.value.status() == "400"
        for key in ["/../../etc/passwd", "../etc/hostname", "/hardening_in/../x", "/proc/self/mem"]:
            reply = post(http, "/v2/systemsharedmemory/region/evil/register",
                         json.dumps({"key": key, "offset": 0, "byte_size": 4}).encode())
            doc = check_http_answer(reply.status_code, reply.content, allow_ok=False)
            assert "Unable to open shared memory region" in doc["error"], doc
        # Region names are path segments: a slash or dot-dot in one cannot reach another route.
        for path in ["/v2/systemsharedmemory/region/a%2F..%2Fb/register", "/v2/systemsharedmemory/region/../status"]:
            reply = post(http, path, json.dumps({"key": "/hardening_in", "byte_size": 4}).encode())
            check_http_answer(reply.status_code, reply.content)
        tensor = httpclient.InferInput("INPUT_FP32", [4], "FP32")
        tensor.set_shared_memory("hardening_in", 16)
        assert client.infer("identity_any", [tensor]).as_numpy("OUTPUT_FP32").tolist() == [0, 1, 2, 3]
    finally:
        client.unregister_system_shared_memory()
        shm.destroy_shared_memory_region(handle)


def test_load_overrides_cannot_escape_the_model_directory(server, http, tmp_path):
    config = json.dumps({"backend": "python", "max_batch_size": 0,
                         "input": [{"name": "IN", "data_type": "TYPE_FP32", "dims": [1]}],
                         "output": [{"name": "OUT", "data_type": "TYPE_FP32", "dims": [1]}]})
    marker = base64.b64encode(b"escaped").decode()
    target = Path("/tmp") / "openinfer_hardening_escape"
    names = ["../../openinfer_hardening_escape", "/tmp/openinfer_hardening_escape", "1/../../../openinfer_hardening_escape",
             "..", ".", "", "1/../..", "a\x00b", "../" * 30 + "tmp/openinfer_hardening_escape"]
    for name in names:
        body = json.dumps({"parameters": {"config": config, f"file:{name}": marker}}).encode()
        reply = post(http, "/v2/repository/models/escape/load", body)
        doc = check_http_answer(reply.status_code, reply.content, allow_ok=False)
        assert reply.status_code == 400, doc
    assert not target.exists()
    for model in ["..", ".", "..%2F..%2Ftmp", "%2e%2e"]:
        reply = post(http, f"/v2/repository/models/{model}/load", b"{}")
        check_http_answer(reply.status_code, reply.content, allow_ok=False)
    rows = {row["name"]: row for row in httpclient.InferenceServerClient(server.http_url).get_model_repository_index()}
    assert not rows.keys() & {"..", "."}, rows
    # "file:/tmp/..." lands under the model folder, as Triton joins it: the load then fails for
    # want of a model file, so the model may be listed, but never as READY.
    assert rows.get("escape", {}).get("state") != "READY", rows
    healthy_http(server.http_url)


def test_memory_stayed_bounded_and_the_server_serves(server):
    """Last in the module: after the whole corpus, the server's memory is near where it began."""
    grown = rss_mib(server.process.pid) - server.baseline_rss
    assert grown < 150, f"server RSS grew by {grown:.0f} MiB over the hostile corpus"
    healthy_http(server.http_url)
    assert "Traceback" not in server.log(), server.log()[-3000:]

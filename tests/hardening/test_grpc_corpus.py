"""Hostile input over the KServe gRPC frontend: every bad message gets a proper status (never
the catch-all), streams keep serving after in-band errors, nothing is allocated for sizes the
message cannot back, and a healthy call right after succeeds.
"""

from __future__ import annotations

import queue
import socket

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from hypothesis import given, settings
from hypothesis import strategies as st

from openinfer._proto import grpc_service_pb2 as pb
from openinfer._proto import grpc_service_pb2_grpc as pb_grpc
from tests.hardening import models
from tests.hardening.oracle import check_grpc_error, healthy_grpc, rss_mib
from tests.helpers import Server

DATATYPES = ["BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64",
             "FP16", "FP32", "FP64", "BYTES", "BF16"]
CONTENT_FIELDS = ["bool_contents", "int_contents", "int64_contents", "uint_contents", "uint64_contents",
                  "fp32_contents", "fp64_contents", "bytes_contents"]
INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = models.copy_examples(tmp_path_factory.mktemp("grpc_corpus") / "repo")
    server = Server(
        repo, ["--model-control-mode", "explicit", "--load-model", "*", "--allow-client-shm", "true"]
    ).start(wait_for="ready")
    server.baseline_rss = rss_mib(server.process.pid)
    yield server
    assert server.stop() == 0, server.log()


@pytest.fixture(scope="module")
def stub(server):
    options = [("grpc.max_send_message_length", 2**31 - 1), ("grpc.max_receive_message_length", 2**31 - 1)]
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}", options=options) as channel:
        yield pb_grpc.GRPCInferenceServiceStub(channel)


def _param(target: pb.InferParameter, kind: str, value) -> None:
    try:
        setattr(target, kind, value)
    except (ValueError, TypeError):
        target.string_param = str(value)


param_values = st.one_of(
    st.tuples(st.just("bool_param"), st.booleans()),
    st.tuples(st.just("int64_param"), INT64),
    st.tuples(st.just("uint64_param"), st.integers(min_value=0, max_value=2**64 - 1)),
    st.tuples(st.just("string_param"), st.text(max_size=12)),
    st.tuples(st.just("double_param"), st.floats(allow_nan=True)),
)
param_keys = st.sampled_from([
    "shared_memory_region", "shared_memory_byte_size", "shared_memory_offset", "classification",
    "priority", "timeout", "sequence_id", "sequence_start", "sequence_end",
    "triton_enable_empty_final_response", "triton_x", "binary_data_size", "custom",
]) | st.text(max_size=6)
parameter_maps = st.dictionaries(param_keys, param_values, max_size=3)
names = st.sampled_from([f"INPUT_{t if t != 'BYTES' else 'STRING'}" for t in DATATYPES] + ["nope", ""]) | st.text(max_size=6)
shapes = st.lists(st.integers(min_value=-3, max_value=6) | st.sampled_from([2**31, 2**40, 2**62, -(2**63)]), max_size=4)
contents = st.dictionaries(
    st.sampled_from(CONTENT_FIELDS),
    st.lists(st.integers(min_value=-(2**31), max_value=2**31 - 1), max_size=6),
    max_size=2,
)
tensors = st.fixed_dictionaries({
    "name": names,
    "datatype": st.sampled_from(DATATYPES + ["STRING", "fp32", "", "X"]),
    "shape": shapes,
    "parameters": parameter_maps,
    "contents": contents,
})
requests = st.fixed_dictionaries({
    "model_name": st.sampled_from(["identity_any", "add_sub", "repeat", "nope", ""]),
    "model_version": st.sampled_from(["", "1", "2", "-1", "abc", "99999999999999999999"]),
    "id": st.text(max_size=8),
    "parameters": parameter_maps,
    "inputs": st.lists(tensors, max_size=3),
    "raw": st.lists(st.binary(max_size=40), max_size=3),
    "outputs": st.lists(st.tuples(st.sampled_from(["OUTPUT_FP32", "OUTPUT_STRING", "nope"]), parameter_maps), max_size=2),
})


def build(spec: dict) -> pb.ModelInferRequest:
    message = pb.ModelInferRequest(model_name=spec["model_name"], model_version=spec["model_version"], id=spec["id"])
    for key, (kind, value) in spec["parameters"].items():
        _param(message.parameters[key], kind, value)
    for t in spec["inputs"]:
        tensor = message.inputs.add(name=t["name"], datatype=t["datatype"], shape=t["shape"])
        for key, (kind, value) in t["parameters"].items():
            _param(tensor.parameters[key], kind, value)
        for field, values in t["contents"].items():
            target = getattr(tensor.contents, field)
            if field == "bool_contents":
                target.extend(bool(v) for v in values)
            elif field == "bytes_contents":
                target.extend(str(v).encode() for v in values)
            elif field in ("fp32_contents", "fp64_contents"):
                target.extend(float(v) for v in values)
            elif field in ("uint_contents", "uint64_contents"):
                target.extend(abs(v) for v in values)
            else:
                target.extend(values)
    message.raw_input_contents.extend(spec["raw"])
    for name, params in spec["outputs"]:
        out = message.outputs.add(name=name)
        for key, (kind, value) in params.items():
            _param(out.parameters[key], kind, value)
    return message


@settings(max_examples=400)
@given(spec=requests)
def test_hostile_infer_messages(stub, spec):
    try:
        stub.ModelInfer(build(spec), timeout=30)
    except grpc.RpcError as exc:
        # `repeat` is decoupled: unary ModelInfer does not offer it (Triton's UNIMPLEMENTED).
        check_grpc_error(exc, allow=("UNIMPLEMENTED",) if spec["model_name"] == "repeat" else ())


@settings(max_examples=60)
@given(blob=st.binary(max_size=300))
def test_undecodable_messages(server, blob):
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        call = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer")  # bytes in, bytes out
        try:
            call(blob, timeout=30)
        except grpc.RpcError as exc:
            # grpcio answers a message it cannot parse with UNKNOWN, before any handler runs.
            assert exc.code() in (grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL,
                                  grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND,
                                  grpc.StatusCode.UNIMPLEMENTED), exc


def _raw(name: str, datatype: str, shape: list[int], raw: bytes, model: str = "identity_any") -> pb.ModelInferRequest:
    message = pb.ModelInferRequest(model_name=model)
    message.inputs.add(name=name, datatype=datatype, shape=shape)
    message.raw_input_contents.append(raw)
    return message


HAND = [
    ("negative dim", _raw("INPUT_FP32", "FP32", [-1], b"\0" * 4), "INVALID_ARGUMENT", "negative"),
    ("huge BYTES count", _raw("INPUT_STRING", "BYTES", [2**40], b"\0" * 4), "INVALID_ARGUMENT", "elements need at least"),
    ("lying BYTES prefix", _raw("INPUT_STRING", "BYTES", [1], b"\xff\xff\xff\x7fabc"), "INVALID_ARGUMENT", "incomplete string"),
    ("overflowing product", _raw("INPUT_FP32", "FP32", [2**40, 2**40], b"\0" * 4), "INVALID_ARGUMENT", "byte size mismatch"),
    ("short raw", _raw("INPUT_FP32", "FP32", [4], b"\0" * 4), "INVALID_ARGUMENT", "byte size mismatch"),
    ("unknown datatype", _raw("INPUT_FP32", "FP99", [1], b"\0" * 4), "INVALID_ARGUMENT", "FP99"),
    ("wrong datatype", _raw("INPUT_FP32", "INT32", [1], b"\0" * 4), "INVALID_ARGUMENT", "expects 'FP32'"),
    ("unknown model", _raw("INPUT_FP32", "FP32", [1], b"\0" * 4, model="nope"), "NOT_FOUND", "unknown model"),
    ("decoupled over unary", _raw("IN", "INT32", [1], b"\1\0\0\0", model="repeat"), "UNIMPLEMENTED", "decoupled"),
]


@pytest.mark.parametrize("label,message,code,fragment", HAND, ids=[c[0] for c in HAND])
def test_hand_written_hostile_messages(stub, label, message, code, fragment):
    with pytest.raises(grpc.RpcError) as info:
        stub.ModelInfer(message, timeout=30)
    assert info.value.code().name == code, info.value
    # UNIMPLEMENTED where the case says so: unary infer does not offer decoupled models.
    assert fragment in check_grpc_error(info.value, allow=("UNIMPLEMENTED",) if code == "UNIMPLEMENTED" else ())


def test_more_raw_contents_than_inputs(stub):
    message = _raw("INPUT_FP32", "FP32", [1], b"\0" * 4)
    message.raw_input_contents.append(b"extra")
    with pytest.raises(grpc.RpcError) as info:
        stub.ModelInfer(message, timeout=30)
    assert "unexpected additional input data" in check_grpc_error(info.value)


def test_duplicate_inputs_and_absurd_classification(stub):
    message = _raw("INPUT_FP32", "FP32", [1], b"\0" * 4)
    message.inputs.add(name="INPUT_FP32", datatype="FP32", shape=[1])
    message.raw_input_contents.append(b"\0" * 4)
    with pytest.raises(grpc.RpcError) as info:
        stub.ModelInfer(message, timeout=30)
    assert "already exists in request" in check_grpc_error(info.value)
    # K far beyond the output's size is clamped to it, as in Triton.
    message = _raw("INPUT_FP32", "FP32", [3], np.array([1, 3, 2], np.float32).tobytes())
    message.outputs.add(name="OUTPUT_FP32").parameters["classification"].int64_param = 2**62
    reply = stub.ModelInfer(message, timeout=30)
    assert list(reply.outputs[0].shape) == [3]
    for bad in (0, -5):
        message.outputs[0].parameters["classification"].int64_param = bad
        with pytest.raises(grpc.RpcError) as info:
            stub.ModelInfer(message, timeout=30)
        assert "classification" in check_grpc_error(info.value)


def test_shared_memory_bounds_over_grpc(server, stub):
    import tritonclient.utils.shared_memory as shm

    handle = shm.create_shared_memory_region("hardening_grpc", "/hardening_grpc", 16)
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        client.register_system_shared_memory("hardening_grpc", "/hardening_grpc", 16)
        for offset, size, fragment in [(16, 4, "Invalid offset"), (8, 16, "Invalid offset + byte size"),
                                       (2**62, 4, "Invalid offset"), (-8, 4, "")]:
            message = pb.ModelInferRequest(model_name="identity_any")
            tensor = message.inputs.add(name="INPUT_FP32", datatype="FP32", shape=[1])
            tensor.parameters["shared_memory_region"].string_param = "hardening_grpc"
            tensor.parameters["shared_memory_byte_size"].int64_param = size
            tensor.parameters["shared_memory_offset"].int64_param = offset
            with pytest.raises(grpc.RpcError) as info:
                stub.ModelInfer(message, timeout=30)
            assert fragment in check_grpc_error(info.value)
        # An output region too small for the result is the client's mistake too.
        message = _raw("INPUT_FP32", "FP32", [8], b"\0" * 32)
        output = message.outputs.add(name="OUTPUT_FP32")
        output.parameters["shared_memory_region"].string_param = "hardening_grpc"
        output.parameters["shared_memory_byte_size"].int64_param = 16
        with pytest.raises(grpc.RpcError) as info:
            stub.ModelInfer(message, timeout=30)
        assert "should be at least 32 bytes" in check_grpc_error(info.value)
        for key in ["/../../etc/passwd", "../x", "/proc/self/mem"]:
            with pytest.raises(Exception) as info:
                client.register_system_shared_memory("evil", key, 4)
            assert "Unable to open shared memory region" in str(info.value)
    finally:
        client.unregister_system_shared_memory()
        shm.destroy_shared_memory_region(handle)


def test_streams_survive_hostile_messages(server):
    """Bad requests on a stream are answered in band; the stream then serves a good one."""
    client = grpcclient.InferenceServerClient(server.grpc_url)
    answers: queue.Queue = queue.Queue()
    client.start_stream(callback=lambda result, error: answers.put((result, error)))
    bad = [
        ("nope", [grpcclient.InferInput("IN", [1], "INT32")]),
        ("repeat", [grpcclient.InferInput("WRONG", [1], "INT32")]),
        ("repeat", [grpcclient.InferInput("IN", [2, 2], "INT32")]),
    ]
    for model, inputs in bad:
        inputs[0].set_data_from_numpy(np.ones(inputs[0].shape(), np.int32))
        client.async_stream_infer(model, inputs)
    for _ in bad:
        result, error = answers.get(timeout=30)
        assert error is not None and not error.message().startswith("internal error"), error
    good = grpcclient.InferInput("IN", [3], "INT32")
    good.set_data_from_numpy(np.array([7, 8, 9], np.int32))
    client.async_stream_infer("repeat", [good])
    values = []
    while len(values) < 3:
        result, error = answers.get(timeout=30)
        assert error is None, error
        values.append(int(result.as_numpy("OUT")[0]))
    client.stop_stream()
    assert values == [7, 8, 9]


def test_memory_stayed_bounded_and_the_server_serves(server):
    grown = rss_mib(server.process.pid) - server.baseline_rss
    assert grown < 150, f"server RSS grew by {grown:.0f} MiB over the hostile corpus"
    healthy_grpc(server.grpc_url)
    assert "Traceback" not in server.log(), server.log()[-3000:]


# ------------------------------------------------------------------ messages over the max size
def test_grpc_message_declared_over_the_max_size_is_refused_without_waiting(server):
    """A gRPC message whose length prefix exceeds the 2 GiB receive limit ends the call at once
    (nothing is buffered for it); one under the limit that never arrives is the client's stall,
    not the server's: other calls are served meanwhile."""
    from tests.hardening import h2raw

    with socket.create_connection(("127.0.0.1", server.grpc_port), timeout=30) as sock:
        sock.sendall(h2raw.PREFACE + h2raw.frame(h2raw.SETTINGS, 0, 0))
        sock.sendall(h2raw.grpc_headers("/inference.GRPCInferenceService/ModelInfer", f"127.0.0.1:{server.grpc_port}"))
        prefix = b"\x00" + (2**31 + 16).to_bytes(4, "big")  # uncompressed, 2 GiB + 16 bytes
        sock.sendall(h2raw.frame(h2raw.DATA, 0, 1, prefix + b"\x0a\x03abc"))
        assert h2raw.call_ends(sock) in ("trailers", "reset")
    healthy_grpc(server.grpc_url)
    assert rss_mib(server.process.pid) - server.baseline_rss < 150


def test_http2_prior_knowledge_on_the_http_port(server):
    """The HTTP port speaks HTTP/1.1: an HTTP/2 preface is refused and the port keeps serving."""
    from tests.hardening import h2raw
    from tests.hardening.oracle import healthy_http

    with socket.create_connection(("127.0.0.1", server.http_port), timeout=30) as sock:
        sock.sendall(h2raw.PREFACE + h2raw.frame(h2raw.SETTINGS, 0, 0))
        reply = b""
        while True:
            chunk = sock.recv(4096)
            if not chunk:
                break
            reply += chunk
    assert reply == b"" or reply.startswith(b"HTTP/1.1 4"), reply[:100]
    healthy_http(server.http_url)


def _load(name: str, **params) -> pb.RepositoryModelLoadRequest:
    request = pb.RepositoryModelLoadRequest(model_name=name)
    for key, (kind, value) in params.items():
        setattr(request.parameters[key], kind, value)
    return request


def _trace(**values) -> pb.TraceSettingRequest:
    request = pb.TraceSettingRequest()
    for key, items in values.items():
        request.settings[key].value.extend(items)
    return request


def _log(**values) -> pb.LogSettingsRequest:
    request = pb.LogSettingsRequest()
    for key, (kind, value) in values.items():
        setattr(request.settings[key], kind, value)
    return request


SETTINGS = [
    # (label, rpc, message, code, fragment): mistakes outside infer blame the request too.
    ("load: unknown model", "RepositoryModelLoad", _load("no_such_model"), "NOT_FOUND", "failed to poll from model repository"),
    ("load: config an int", "RepositoryModelLoad", _load("identity_any", config=("int64_param", 1)), "INVALID_ARGUMENT", "'config'"),
    ("load: config not JSON", "RepositoryModelLoad", _load("identity_any", config=("string_param", "{x")), "INVALID_ARGUMENT", "failed to poll from model repository: Invalid config override"),
    ("load: file a string", "RepositoryModelLoad", _load("identity_any", **{"config": ("string_param", "{}"), "file:1/model.py": ("string_param", "x")}), "INVALID_ARGUMENT", "expected bytes_param"),
    ("load: unknown parameter", "RepositoryModelLoad", _load("identity_any", colour=("string_param", "red")), "INVALID_ARGUMENT", "unrecognized load parameter"),
    ("trace: unknown level", "TraceSetting", _trace(trace_level=["EVIL"]), "INVALID_ARGUMENT", "unknown trace level 'EVIL'"),
    ("trace: unknown mode", "TraceSetting", _trace(trace_mode=["evil"]), "INVALID_ARGUMENT", "unsupported trace mode 'evil'"),
    ("trace: rate not a number", "TraceSetting", _trace(trace_rate=["often"]), "INVALID_ARGUMENT", "'trace_rate'"),
    ("log: info a string", "LogSettings", _log(log_info=("string_param", "yes")), "INVALID_ARGUMENT", "'log_info'"),
    ("log: unknown format", "LogSettings", _log(log_format=("string_param", "xml")), "INVALID_ARGUMENT", "log_format"),
    ("version not a number", "ModelInfer", pb.ModelInferRequest(model_name="identity_any", model_version="abc"), "INVALID_ARGUMENT", "version string 'abc'"),
]


@pytest.mark.parametrize("label,rpc,message,code,fragment", SETTINGS, ids=[c[0] for c in SETTINGS])
def test_hostile_settings_and_loads(stub, label, rpc, message, code, fragment):
    with pytest.raises(grpc.RpcError) as info:
        getattr(stub, rpc)(message, timeout=60)
    assert info.value.code().name == code, info.value
    assert fragment in check_grpc_error(info.value)


def test_narrow_integers_in_typed_contents_keep_their_low_order_bytes(stub):
    """INT8/INT16 (UINT8/UINT16) travel in 32-bit `contents` fields; out-of-range values wrap
    as Triton's copy does, instead of failing inside numpy."""
    message = pb.ModelInferRequest(model_name="identity_any")
    message.inputs.add(name="INPUT_INT8", datatype="INT8", shape=[3]).contents.int_contents.extend([128, -129, 5])
    message.inputs.add(name="INPUT_UINT16", datatype="UINT16", shape=[1]).contents.uint_contents.extend([70000])
    reply = stub.ModelInfer(message, timeout=60)
    outputs = {o.name: i for i, o in enumerate(reply.outputs)}
    assert np.frombuffer(reply.raw_output_contents[outputs["OUTPUT_INT8"]], np.int8).tolist() == [-128, 127, 5]
    assert np.frombuffer(reply.raw_output_contents[outputs["OUTPUT_UINT16"]], np.uint16).tolist() == [70000 % 65536]

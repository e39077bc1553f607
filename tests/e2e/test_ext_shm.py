"""System and CUDA shared memory through tritonclient.http, tritonclient.grpc and tritonclient.utils.shared_memory."""

from __future__ import annotations

import base64
import os
import re
import threading
import time
import urllib.request

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException, serialize_byte_tensor

from tests.e2e import ext_models
from tests.helpers import Server

PROTOCOLS = {"http": httpclient, "grpc": grpcclient}
DISABLED = (
    "Client shared memory is disabled. Start the server with '--allow-client-shm=true' to enable."
)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = tmp_path_factory.mktemp("shm_repo")
    ext_models.add_sub(repo)
    ext_models.identity(repo, "identity_bytes", "TYPE_STRING")
    ext_models.slow(repo)
    srv = Server(repo, ["--allow-client-shm=true"]).start(wait_for="ready")
    yield srv
    assert srv.stop() == 0, srv.log()


@pytest.fixture(params=sorted(PROTOCOLS))
def proto(request, server):
    module = PROTOCOLS[request.param]
    url = server.http_url if request.param == "http" else server.grpc_url
    client = module.InferenceServerClient(url)
    client.unregister_system_shared_memory()
    yield request.param, module, client
    client.unregister_system_shared_memory()
    client.close()


@pytest.fixture
def regions():
    """Client-side regions; each test names its own keys so nothing leaks between tests."""
    made = []

    def make(key: str, size: int):
        handle = shm.create_shared_memory_region(key.strip("/"), key, size)
        made.append(handle)
        return handle

    yield make
    for handle in made:
        shm.destroy_shared_memory_region(handle)


def _status(client, proto_name):
    status = client.get_system_shared_memory_status()
    if proto_name == "http":
        return {r["name"]: (r["key"], int(r["offset"]), int(r["byte_size"])) for r in status}
    return {name: (r.key, r.offset, r.byte_size) for name, r in status.regions.items()}


def _error(call) -> InferenceServerException:
    with pytest.raises(InferenceServerException) as info:
        call()
    return info.value


def _code(proto_name: str, http: str, grpc: str) -> str:
    return http if proto_name == "http" else f"StatusCode.{grpc}"


def test_register_status_unregister(proto, regions):
    name, _, client = proto
    regions(f"/oi_reg_{name}", 64)
    client.register_system_shared_memory("r0", f"/oi_reg_{name}", 32)
    client.register_system_shared_memory("r1", f"/oi_reg_{name}", 32, offset=32)
    assert _status(client, name) == {
        "r0": (f"/oi_reg_{name}", 0, 32),
        "r1": (f"/oi_reg_{name}", 32, 32),
    }
    one = client.get_system_shared_memory_status("r1")
    assert (len(one) if name == "http" else len(one.regions)) == 1

    err = _error(lambda: client.get_system_shared_memory_status("nope"))
    assert err.status() == _code(name, "404", "NOT_FOUND")
    assert "Unable to find system shared memory region: 'nope'" in err.message()
    err = _error(lambda: client.register_system_shared_memory("r0", f"/oi_reg_{name}", 8))
    assert err.status() == _code(name, "400", "ALREADY_EXISTS")
    assert "shared memory region 'r0' already in manager" in err.message()

    client.unregister_system_shared_memory("r0")
    client.unregister_system_shared_memory("never_registered")  # a no-op success, as in Triton
    assert set(_status(client, name)) == {"r1"}
    client.unregister_system_shared_memory()
    assert _status(client, name) == {}


def test_infer_inputs_and_outputs_in_shared_memory(proto, regions):
    name, module, client = proto
    inputs_region = regions(f"/oi_in_{name}", 64)
    outputs_region = regions(f"/oi_out_{name}", 64)
    a, b = np.arange(4, dtype=np.float32), np.full(4, 10, dtype=np.float32)
    shm.set_shared_memory_region(inputs_region, [a, b], offset=16)  # inputs at 16 and 32
    client.register_system_shared_memory("in", f"/oi_in_{name}", 64)
    client.register_system_shared_memory("out", f"/oi_out_{name}", 48, offset=16)  # a window

    inputs = [module.InferInput("INPUT0", [4], "FP32"), module.InferInput("INPUT1", [4], "FP32")]
    inputs[0].set_shared_memory("in", 16, offset=16)
    inputs[1].set_shared_memory("in", 16, offset=32)
    outputs = [module.InferRequestedOutput("OUTPUT0"), module.InferRequestedOutput("OUTPUT1")]
    outputs[0].set_shared_memory("out", 16)
    outputs[1].set_shared_memory("out", 16, offset=16)
    result = client.infer("add_sub", inputs, outputs=outputs)

    # The window starts at byte 16 of the object: OUTPUT0 at 16, OUTPUT1 at 32.
    np.testing.assert_array_equal(
        shm.get_contents_as_numpy(outputs_region, np.float32, [4], offset=16), a + b
    )
    np.testing.assert_array_equal(
        shm.get_contents_as_numpy(outputs_region, np.float32, [4], offset=32), a - b
    )
    out0 = result.get_output("OUTPUT0")
    if name == "http":
        assert out0 == {
            "name": "OUTPUT0",
            "datatype": "FP32",
            "shape": [4],
        }  # no data, no binary size
    else:
        assert (out0.datatype, list(out0.shape)) == ("FP32", [4])
        assert result.get_response().raw_output_contents[0] == b""


def test_bytes_tensors_through_shared_memory(proto, regions):
    name, module, client = proto
    values = np.array([b"shared", b"", b"memoria"], dtype=np.object_)
    wire = serialize_byte_tensor(values)
    size = len(wire.item())
    region_in = regions(f"/oi_bin_{name}", size)
    region_out = regions(f"/oi_bout_{name}", 64)
    shm.set_shared_memory_region(region_in, [wire])  # BYTES travel serialized
    client.register_system_shared_memory("bin", f"/oi_bin_{name}", size)
    client.register_system_shared_memory("bout", f"/oi_bout_{name}", 64)
    tensor = module.InferInput("INPUT0", [3], "BYTES")
    tensor.set_shared_memory("bin", size)
    output = module.InferRequestedOutput("OUTPUT0")
    output.set_shared_memory("bout", 64)
    client.infer("identity_bytes", [tensor], outputs=[output])
    got = shm.get_contents_as_numpy(region_out, np.object_, [3])
    assert list(got) == [b"shared", b"", b"memoria"]


def test_request_errors_keep_the_server_serving(proto, regions):
    name, module, client = proto
    regions(f"/oi_err_{name}", 32)
    client.register_system_shared_memory("small", f"/oi_err_{name}", 32)

    def infer(region_in="small", in_size=16, in_offset=0, out_size=16):
        inputs = [
            module.InferInput("INPUT0", [4], "FP32"),
            module.InferInput("INPUT1", [4], "FP32"),
        ]
        inputs[0].set_shared_memory(region_in, in_size, offset=in_offset)
        inputs[1].set_shared_memory("small", 16, offset=16)
        output = module.InferRequestedOutput("OUTPUT0")
        output.set_shared_memory("small", out_size)
        return client.infer("add_sub", inputs, outputs=[output])

    err = _error(lambda: infer(region_in="missing"))
    assert err.status() == _code(name, "404", "NOT_FOUND")
    assert "Unable to find shared memory region: 'missing'" in err.message()
    err = _error(lambda: infer(in_offset=32))
    assert err.status() == _code(name, "400", "INVALID_ARGUMENT")
    assert "Invalid offset for shared memory region: 'small'" in err.message()
    err = _error(lambda: infer(in_offset=24))
    assert "Invalid offset + byte size for shared memory region: 'small'" in err.message()
    err = _error(lambda: infer(in_size=12))
    assert (
        "input byte size mismatch for input 'INPUT0' for model 'add_sub'. Expected 16, got 12"
        in err.message()
    )
    err = _error(lambda: infer(out_size=8))  # the client's mistake: 400 (Triton answers 500)
    assert err.status() == _code(name, "400", "INVALID_ARGUMENT")
    assert (
        "shared memory size specified with the request for output 'OUTPUT0' (8 bytes) should be at "
        "least 16 bytes to hold the results" in err.message()
    )
    assert client.is_server_live() and client.is_model_ready("add_sub")


def test_truncated_region_fails_the_request_not_the_server(proto, regions):
    """Reading a mapping past the end of its file would kill the server (SIGBUS)."""
    name, module, client = proto
    key = f"/oi_trunc_{name}"
    regions(key, 64)
    client.register_system_shared_memory("trunc", key, 64)
    os.truncate(f"/dev/shm{key}", 16)
    inputs = [module.InferInput("INPUT0", [4], "FP32"), module.InferInput("INPUT1", [4], "FP32")]
    inputs[0].set_shared_memory("trunc", 16)
    inputs[1].set_shared_memory("trunc", 16, offset=32)
    err = _error(lambda: client.infer("add_sub", inputs))
    assert err.status() == _code(name, "400", "INVALID_ARGUMENT")
    assert (
        f"shared memory region 'trunc' is smaller than when it was registered: its object '{key}' "
        f"now holds 16 bytes" in err.message()
    )
    inputs[1].set_data_from_numpy(np.ones(4, np.float32))  # INPUT0 still fits: outputs go there
    output = module.InferRequestedOutput("OUTPUT0")
    output.set_shared_memory("trunc", 16, offset=48)
    err = _error(lambda: client.infer("add_sub", inputs, outputs=[output]))
    assert "is smaller than when it was registered" in err.message()
    result = client.infer("add_sub", inputs)  # the server is up and serves the rest of the region
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), np.ones(4, np.float32))
    assert client.is_server_live()


def test_registration_errors(proto, regions, tmp_path):
    name, _, client = proto
    regions(f"/oi_bad_{name}", 16)
    err = _error(lambda: client.register_system_shared_memory("big", f"/oi_bad_{name}", 17))
    assert err.status() == _code(name, "400", "INVALID_ARGUMENT")
    assert err.message() == f"Invalid shared memory region: '/oi_bad_{name}'"  # Triton's words
    err = _error(
        lambda: client.register_system_shared_memory("late", f"/oi_bad_{name}", 8, offset=12)
    )
    assert "Invalid shared memory region" in err.message()
    err = _error(lambda: client.register_system_shared_memory("ghost", "/oi_does_not_exist", 8))
    assert err.status() == _code(name, "400", "INVALID_ARGUMENT")
    assert "Unable to open shared memory region: '/oi_does_not_exist'" in err.message()
    err = _error(
        lambda: client.register_system_shared_memory("py", "/triton_python_backend_shm_region_x", 8)
    )
    assert "reserved prefix 'triton_python_backend_shm_region_'" in err.message()
    # Keys that would leave /dev/shm, or follow a link planted there, are refused.
    for key in ("/../etc/passwd", "/oi_dir/../../etc/passwd", "/..", "/"):
        err = _error(lambda key=key: client.register_system_shared_memory("escape", key, 1))
        assert err.status() == _code(name, "400", "INVALID_ARGUMENT")
        assert "Unable to open shared memory region" in err.message()
    secret = tmp_path / "secret"
    secret.write_bytes(b"x" * 64)
    link = f"/dev/shm/oi_link_{name}"
    os.symlink(secret, link)
    try:
        err = _error(lambda: client.register_system_shared_memory("link", f"/oi_link_{name}", 8))
        assert "Unable to open shared memory region" in err.message()
    finally:
        os.unlink(link)
    assert _status(client, name) == {}


def _pending(server, model: str) -> int:
    text = urllib.request.urlopen(server.metrics_url, timeout=5).read().decode()
    match = re.search(
        rf'nv_inference_pending_request_count{{model="{model}",version="1"}} (\d+)', text
    )
    return int(match.group(1)) if match else 0


def test_region_in_use_is_unregistered_after_the_request(server, regions):
    grpc = grpcclient.InferenceServerClient(server.grpc_url)
    http = httpclient.InferenceServerClient(server.http_url)
    region = regions("/oi_busy", 4)
    shm.set_shared_memory_region(
        region, [np.array([1500], dtype=np.int32)]
    )  # the model sleeps 1.5 s
    grpc.register_system_shared_memory("busy", "/oi_busy", 4)
    tensor = grpcclient.InferInput("INPUT0", [1], "INT32")
    tensor.set_shared_memory("busy", 4)
    done = threading.Event()
    outcome: dict = {}

    def callback(result, error):
        outcome.update(result=result, error=error)
        done.set()

    grpc.async_infer("slow", [tensor], callback=callback)
    deadline = time.monotonic() + 30
    while _pending(server, "slow") == 0 and not done.is_set() and time.monotonic() < deadline:
        time.sleep(0.05)
    http.unregister_system_shared_memory()
    # Still listed while the request holds it (Triton's lazy unregister) ...
    assert [r["name"] for r in http.get_system_shared_memory_status()] == ["busy"]
    assert done.wait(30) and outcome["error"] is None
    assert outcome["result"].as_numpy("OUTPUT0").tolist() == [1500]
    # ... and gone once the request is over.
    assert http.get_system_shared_memory_status() == []
    grpc.close()


def test_disabled_unless_allowed(example_server):
    http = httpclient.InferenceServerClient(example_server.http_url)
    grpc = grpcclient.InferenceServerClient(example_server.grpc_url)
    for client, code in ((http, "501"), (grpc, "StatusCode.UNIMPLEMENTED")):
        for call in (
            lambda c=client: c.register_system_shared_memory("r", "/oi_any", 8),
            lambda c=client: c.unregister_system_shared_memory(),
            lambda c=client: c.register_cuda_shared_memory(
                "c", base64.b64encode(bytes(64)).decode(), 0, 8
            ),
            lambda c=client: c.unregister_cuda_shared_memory(),
        ):
            err = _error(call)
            assert (err.status(), err.message()) == (code, DISABLED)
    assert (
        http.get_system_shared_memory_status() == [] and http.get_cuda_shared_memory_status() == []
    )
    assert not grpc.get_system_shared_memory_status().regions
    assert not grpc.get_cuda_shared_memory_status().regions


def _gpu() -> bool:
    return os.path.exists("/dev/nvidiactl")


@pytest.mark.skipif(_gpu(), reason="checks the answer of a machine without a GPU")
def test_cuda_shared_memory_without_gpu(proto):
    name, _, client = proto
    handle = base64.b64encode(bytes(64)).decode()
    assert (
        client.get_cuda_shared_memory_status()
        if name == "http"
        else list(client.get_cuda_shared_memory_status().regions)
    ) == []
    err = _error(lambda: client.register_cuda_shared_memory("c0", handle, 0, 64))
    assert err.status() == _code(name, "501", "UNIMPLEMENTED")
    assert "failed to register CUDA shared memory region: 'c0', GPUs not supported" in err.message()
    short = base64.b64encode(bytes(10)).decode()
    err = _error(lambda: client.register_cuda_shared_memory("c0", short, 0, 64))
    assert "'raw_handle' must be a valid base64 encoded cudaIpcMemHandle_t" in err.message()
    client.unregister_cuda_shared_memory()  # nothing registered: a no-op success
    err = _error(lambda: client.get_cuda_shared_memory_status("c0"))
    assert "Unable to find cuda shared memory region: 'c0'" in err.message()


@pytest.mark.gpu
@pytest.mark.skipif(
    not _gpu(), reason="needs an NVIDIA GPU and tritonclient's CUDA shared memory helpers"
)
def test_cuda_shared_memory_round_trip(proto):
    cudashm = pytest.importorskip("tritonclient.utils.cuda_shared_memory")
    name, module, client = proto
    a, b = np.arange(4, dtype=np.float32), np.full(4, 2, dtype=np.float32)
    region_in = cudashm.create_shared_memory_region(f"cin_{name}", 32, 0)
    region_out = cudashm.create_shared_memory_region(f"cout_{name}", 32, 0)
    try:
        cudashm.set_shared_memory_region(region_in, [a, b])
        client.register_cuda_shared_memory("cin", cudashm.get_raw_handle(region_in), 0, 32)
        client.register_cuda_shared_memory("cout", cudashm.get_raw_handle(region_out), 0, 32)
        inputs = [
            module.InferInput("INPUT0", [4], "FP32"),
            module.InferInput("INPUT1", [4], "FP32"),
        ]
        inputs[0].set_shared_memory("cin", 16)
        inputs[1].set_shared_memory("cin", 16, offset=16)
        outputs = [module.InferRequestedOutput("OUTPUT0"), module.InferRequestedOutput("OUTPUT1")]
        outputs[0].set_shared_memory("cout", 16)
        outputs[1].set_shared_memory("cout", 16, offset=16)
        client.infer("add_sub", inputs, outputs=outputs)
        np.testing.assert_array_equal(
            cudashm.get_contents_as_numpy(region_out, np.float32, [4]), a + b
        )
        status = client.get_cuda_shared_memory_status()
        names = [r["name"] for r in status] if name == "http" else list(status.regions)
        assert sorted(names) == ["cin", "cout"]
    finally:
        client.unregister_cuda_shared_memory()
        cudashm.destroy_shared_memory_region(region_in)
        cudashm.destroy_shared_memory_region(region_out)


def test_an_output_region_too_small_counts_as_a_success_of_the_model(proto, regions):
    """The model answered; only placing its output failed: Triton's statistics count a success."""
    name, module, client = proto
    regions(f"/oi_small_{name}", 8)
    client.register_system_shared_memory("small", f"/oi_small_{name}", 8)
    before = _success_count(client, name)
    inputs = [module.InferInput(n, [4], "FP32") for n in ("INPUT0", "INPUT1")]
    for tensor in inputs:
        tensor.set_data_from_numpy(np.ones(4, np.float32))
    output = module.InferRequestedOutput("OUTPUT0")
    output.set_shared_memory("small", 8)
    err = _error(lambda: client.infer("add_sub", inputs, outputs=[output]))
    assert "should be at least 16 bytes to hold the results" in err.message()
    assert _success_count(client, name) == before + 1


def _success_count(client, proto_name: str) -> int:
    stats = client.get_inference_statistics("add_sub")
    if proto_name == "http":
        return int(stats["model_stats"][0]["inference_stats"]["success"]["count"])
    return stats.model_stats[0].inference_stats.success.count

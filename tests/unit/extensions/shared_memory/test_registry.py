"""The shared-memory registry on its own: registration rules, bounds, holds and lazy unregistration."""

from __future__ import annotations

import mmap
import os
import uuid

import numpy as np
import pytest

from openinfer.core import datatypes
from openinfer.core.errors import (
    AlreadyExistsError,
    InvalidArgumentError,
    NotFoundError,
    UnsupportedError,
)
from openinfer.extensions.shared_memory.registry import DISABLED, SharedMemoryManager, shm_key_path
from openinfer.core.types import InferRequest, RequestedOutput, Tensor


@pytest.fixture
def key():
    """A fresh 64-byte POSIX shm object holding 0..15 as float32."""
    name = f"oi_unit_{uuid.uuid4().hex[:8]}"
    path = f"/dev/shm/{name}"
    with open(path, "wb") as f:
        f.write(np.arange(16, dtype=np.float32).tobytes())
    yield "/" + name
    os.unlink(path)


def test_disabled_gate_answers_triton_message(key):
    manager = SharedMemoryManager(allow_client=False)
    with pytest.raises(UnsupportedError, match="Client shared memory is disabled"):
        manager.register_system("r", key, 0, 64)
    with pytest.raises(UnsupportedError) as info:
        manager.unregister_system()
    assert info.value.message == DISABLED
    assert manager.system_status() == []


def test_register_and_read_zero_copy(key):
    manager = SharedMemoryManager(allow_client=True)
    manager.register_system("r", key, 16, 48)
    assert [(s.name, s.key, s.offset, s.byte_size) for s in manager.system_status()] == [
        ("r", key, 16, 48)
    ]
    array = manager.read_input(
        "X", "FP32", (4,), {"shared_memory_region": "r", "shared_memory_byte_size": 16}, "m"
    )
    assert array.tolist() == [4, 5, 6, 7]  # the registered window starts at byte 16
    with open(f"/dev/shm{key}", "r+b") as f:  # the array is a view of the client's memory
        f.seek(16)
        f.write(np.float32(42).tobytes())
    assert array[0] == 42
    with pytest.raises(AlreadyExistsError, match="shared memory region 'r' already in manager"):
        manager.register_system("r", key, 0, 8)


@pytest.mark.parametrize(
    "offset, size, message",
    [
        (48, 4, "Invalid offset for shared memory region: 'r'"),
        (40, 16, "Invalid offset \\+ byte size"),
    ],
)
def test_bounds(key, offset, size, message):
    manager = SharedMemoryManager(allow_client=True)
    manager.register_system("r", key, 16, 48)
    params = {
        "shared_memory_region": "r",
        "shared_memory_offset": offset,
        "shared_memory_byte_size": size,
    }
    with pytest.raises(InvalidArgumentError, match=message):
        manager.read_input("X", "UINT8", (size,), params, "m")


def test_registration_errors(key):
    manager = SharedMemoryManager(allow_client=True)
    with pytest.raises(InvalidArgumentError, match="Invalid shared memory region"):
        manager.register_system("r", key, 32, 64)
    with pytest.raises(
        InvalidArgumentError, match="Unable to open shared memory region: '/oi_unit_missing'"
    ):
        manager.register_system("r", "/oi_unit_missing", 0, 1)
    with pytest.raises(InvalidArgumentError, match="reserved prefix 'openinfer-ipc-'"):
        manager.register_system("r", "/openinfer-ipc-1-2", 0, 1)
    for bad in ("", "/", "/..", "../x", "/a/b", "/x\x00y"):
        with pytest.raises(InvalidArgumentError):
            shm_key_path(bad)
    assert shm_key_path("//ok") == "/dev/shm/ok"
    assert manager.system_status() == []


def test_held_region_is_unregistered_when_released(key):
    manager = SharedMemoryManager(allow_client=True)
    manager.register_system("in", key, 0, 32)
    manager.register_system("out", key, 32, 32)
    request = InferRequest(
        "m",
        inputs=[Tensor("X", "FP32", (4,), None, {"shared_memory_region": "in", "shared_memory_byte_size": 16})],
    )
    request.outputs = [RequestedOutput("Y", shm_region="out", shm_byte_size=16, shm_offset=0)]
    manager.pin(request)
    assert request.inputs[0].data.tolist() == [0, 1, 2, 3]  # admission reads inputs in regions
    manager.unregister_system()
    assert sorted(s.name for s in manager.system_status()) == ["in", "out"]  # still in use
    manager.write_output(
        request.outputs[0],
        Tensor("Y", "FP32", (4,), np.full(4, 7, np.float32)),
        request.state.shm_outputs,
    )
    manager.release(request)
    assert manager.system_status() == []
    with open(f"/dev/shm{key}", "rb") as f:
        f.seek(32)
        assert np.frombuffer(f.read(16), dtype=np.float32).tolist() == [7, 7, 7, 7]


def test_output_too_small_and_unknown_region(key):
    manager = SharedMemoryManager(allow_client=True)
    manager.register_system("out", key, 0, 64)
    requested = RequestedOutput("Y", shm_region="out", shm_byte_size=8)
    with pytest.raises(
        InvalidArgumentError, match=r"\(8 bytes\) should be at least 16 bytes to hold the results"
    ):
        manager.write_output(requested, Tensor("Y", "FP32", (4,), np.zeros(4, np.float32)))
    request = InferRequest("m", outputs=[RequestedOutput("Y", shm_region="nope", shm_byte_size=4)])
    with pytest.raises(NotFoundError, match="Unable to find shared memory region: 'nope'"):
        manager.pin(request)


def test_status_kinds_and_cuda_without_gpu(key, monkeypatch):
    manager = SharedMemoryManager(allow_client=True)
    manager.register_system("sys", key, 0, 8)
    with pytest.raises(NotFoundError, match="registered as system shared memory, not CUDA"):
        manager.cuda_status("sys")
    with pytest.raises(NotFoundError, match="Unable to find cuda shared memory region: 'c'"):
        manager.cuda_status("c")
    monkeypatch.setattr("openinfer.extensions.shared_memory.cuda_ipc.gpu_present", lambda: False)
    with pytest.raises(InvalidArgumentError, match="valid base64 encoded cudaIpcMemHandle_t"):
        manager.register_cuda("c", b"short", 0, 8)
    with pytest.raises(UnsupportedError, match="'c', GPUs not supported"):
        manager.register_cuda("c", bytes(64), 0, 8)


def test_misaligned_binary_gets_one_aligned_copy():
    raw = bytearray(17)
    raw[1:17] = np.arange(4, dtype=np.float32).tobytes()
    misaligned = datatypes.from_wire_bytes(memoryview(raw)[1:], "FP32", (4,))
    assert misaligned.flags.aligned and misaligned.tolist() == [0, 1, 2, 3]
    buffer = mmap.mmap(-1, 16)
    buffer[:] = np.arange(4, dtype=np.float32).tobytes()
    aligned = datatypes.from_wire_bytes(memoryview(buffer), "FP32", (4,))
    buffer[0:4] = np.float32(9).tobytes()
    assert aligned[0] == 9  # aligned bytes stay a zero-copy view


def test_truncated_object_is_refused_instead_of_read(key):
    manager = SharedMemoryManager(allow_client=True)
    manager.register_system("r", key, 16, 48)
    params = {"shared_memory_region": "r", "shared_memory_byte_size": 16}
    os.truncate(f"/dev/shm{key}", 24)  # the client shrinks its object behind the server's back
    with pytest.raises(InvalidArgumentError, match=f"region 'r' is smaller than when it was registered: its object '{key}' now holds 24 bytes"):
        manager.read_input("X", "FP32", (4,), params, "m")
    out = RequestedOutput("Y", shm_region="r", shm_byte_size=16)
    data = np.zeros(4, np.float32)
    with pytest.raises(InvalidArgumentError, match="smaller than when it was registered"):
        manager.write_output(out, Tensor("Y", "FP32", (4,), data))
    os.truncate(f"/dev/shm{key}", 64)  # grown back: served again (bytes past 24 read as zeros)
    assert manager.read_input("X", "FP32", (4,), params, "m").tolist() == [4, 5, 0, 0]
    manager.unregister_system("r")

"""Client shared memory: system (POSIX /dev/shm) and CUDA IPC regions that tensors travel through.

Clients register a region by name; requests then name the region, an offset and a byte size
instead of carrying tensor bytes. Inputs are read as zero-copy numpy views over the mapping and
outputs are written straight into it. Every rule and message is Triton's
(`shared_memory_manager.cc`), and one registry serves HTTP and gRPC alike.

A region still used by an in-flight request is unregistered lazily: it stays listed (as in
Triton) until the last request holding it lets go, and only then is it unmapped.

Touching a mapping past the end of its file kills the process (SIGBUS), and so does touching a
page of a sparse object that a full /dev/shm cannot supply. So every read and write first checks
that the client has not truncated the object since it registered it, and reserves the pages it
will touch where the object lacks some; the request fails with a message instead. (An object truncated while a model is reading its input view still
takes the server down, as it does Triton.)
"""

from __future__ import annotations

import mmap
import os
import stat
import threading
from typing import Any

import numpy as np

from ...core import datatypes
from ...core.errors import AlreadyExistsError, InvalidArgumentError, NotFoundError, UnsupportedError
from ...core.requests.requested_outputs import shm_placement
from ...core.types import InferRequest, RequestedOutput, Tensor
from .regions import (
    CudaRegion,
    CudaRegionStatus,
    Region,
    SystemRegion,
    SystemRegionStatus,
    shm_key_path,
)

#: key prefixes clients may not register: Triton's python-backend regions and our own IPC files.
RESERVED_KEY_PREFIXES = ("triton_python_backend_shm_region_", "openinfer-ipc-")
CUDA_IPC_HANDLE_SIZE = 64
DISABLED = (
    "Client shared memory is disabled. Start the server with '--allow-client-shm=true' to enable."
)


class _Hold:
    """Keeps a region registered until `release()` (or, failing that, until garbage collection)."""

    __slots__ = ("manager", "region", "released")

    def __init__(self, manager: SharedMemoryManager, region: Region) -> None:
        self.manager = manager
        self.region = region
        self.released = False
        manager._acquire(region)

    def release(self) -> None:
        if not self.released:
            self.released = True
            self.manager._release(self.region)

    def __del__(self) -> None:
        self.release()


class SharedMemoryManager:
    """The registry of client regions, shared by every frontend.

    `allow_client` mirrors `--allow-client-shm`: when false, register and unregister answer
    Triton's "disabled" error (status still answers, with nothing registered).
    """

    def __init__(self, allow_client: bool = False, cuda: Any = None) -> None:
        self.allow_client = allow_client
        self._regions: dict[str, Region] = {}
        self._lock = threading.RLock()
        self._cuda = cuda  # a CUDA runtime adapter; found lazily on first CUDA registration

    # ------------------------------------------------------------ registration
    def require_client_access(self) -> None:
        if not self.allow_client:
            raise UnsupportedError(DISABLED)

    def register_system(self, name: str, key: str, offset: int, byte_size: int) -> None:
        self.require_client_access()
        if not name:
            raise InvalidArgumentError(
                "'region name' is necessary to register system shared memory region"
            )
        stripped = key.lstrip("/")
        for prefix in RESERVED_KEY_PREFIXES:
            if key.startswith(prefix) or stripped.startswith(prefix):
                raise InvalidArgumentError(
                    f"cannot register shared memory region '{name}' with key '{key}' as the key "
                    f"contains the reserved prefix '{prefix}'"
                )
        path = shm_key_path(key)
        with self._lock:
            if name in self._regions:
                raise AlreadyExistsError(f"shared memory region '{name}' already in manager")
            try:
                # O_NOFOLLOW as glibc's shm_open: a symlink planted in /dev/shm is refused.
                fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
            except OSError:  # no such object (or not ours): the client's key, 400 (Triton: 500)
                raise InvalidArgumentError(f"Unable to open shared memory region: '{key}'") from None
            try:
                info = os.fstat(fd)
                if not stat.S_ISREG(info.st_mode):
                    raise InvalidArgumentError(f"Invalid shared memory region: '{key}'")
                if offset < 0 or byte_size < 0 or offset + byte_size > info.st_size:
                    raise InvalidArgumentError(f"Invalid shared memory region: '{key}'")
                length = offset + byte_size
                mapping = mmap.mmap(fd, length) if length > 0 else None
            except BaseException:
                os.close(fd)
                raise
            self._regions[name] = SystemRegion(name, key, offset, byte_size, mapping, fd)

    def register_cuda(self, name: str, raw_handle: bytes, device_id: int, byte_size: int) -> None:
        self.require_client_access()
        if not name:
            raise InvalidArgumentError(
                "'region name' is necessary to register cuda shared memory region"
            )
        if len(raw_handle) != CUDA_IPC_HANDLE_SIZE:
            raise InvalidArgumentError(
                "'raw_handle' must be a valid base64 encoded cudaIpcMemHandle_t"
            )
        runtime = self._cuda_runtime(name)
        with self._lock:
            if name in self._regions:
                raise AlreadyExistsError(f"shared memory region '{name}' already in manager")
            try:
                pointer = runtime.open(raw_handle, device_id)
            except Exception as exc:
                raise InvalidArgumentError(
                    f"failed to register shared memory region '{name}': invalid args ({exc})"
                ) from None
            self._regions[name] = CudaRegion(name, device_id, byte_size, pointer, runtime)

    def _cuda_runtime(self, name: str) -> Any:
        if self._cuda is None:
            from . import cuda_ipc

            self._cuda = cuda_ipc.find_runtime()
        if self._cuda is False or self._cuda is None:
            self._cuda = False
            raise UnsupportedError(
                f"failed to register CUDA shared memory region: '{name}', GPUs not supported"
            )
        return self._cuda

    def unregister_system(self, name: str = "") -> None:
        self._unregister(name, SystemRegion)

    def unregister_cuda(self, name: str = "") -> None:
        self._unregister(name, CudaRegion)

    def _unregister(self, name: str, kind: type[Region]) -> None:
        self.require_client_access()
        with self._lock:
            names = [name] if name else [n for n, r in self._regions.items() if isinstance(r, kind)]
            for region_name in names:
                region = self._regions.get(region_name)
                if region is None or not isinstance(region, kind):
                    continue  # unknown names are a no-op success, as in Triton
                if region.users > 0:
                    region.awaiting_unregister = True
                    continue
                self._drop(region)

    def _drop(self, region: Region) -> None:
        if self._regions.get(region.name) is region:
            del self._regions[region.name]
        region.close()

    # ------------------------------------------------------------------ status
    def system_status(self, name: str = "") -> list[SystemRegionStatus]:
        return [r.status() for r in self._status(name, SystemRegion)]  # type: ignore[attr-defined]

    def cuda_status(self, name: str = "") -> list[CudaRegionStatus]:
        return [r.status() for r in self._status(name, CudaRegion)]  # type: ignore[attr-defined]

    def _status(self, name: str, kind: type[Region]) -> list[Region]:
        with self._lock:
            if not name:
                return [r for r in list(self._regions.values()) if isinstance(r, kind)]
            region = self._regions.get(name)
            label = "cuda" if kind is CudaRegion else "system"
            if region is None:
                raise NotFoundError(f"Unable to find {label} shared memory region: '{name}'")
            if not isinstance(region, kind):
                if isinstance(region, CudaRegion):
                    raise NotFoundError(
                        f"The region named '{name}' is registered as CUDA shared memory, not system "
                        f"shared memory"
                    )
                raise NotFoundError(
                    f"The region named '{name}' is registered as system shared memory, not CUDA "
                    f"shared memory"
                )
            return [region]

    # ------------------------------------------------------------- in-flight use
    def _acquire(self, region: Region) -> None:
        with self._lock:
            region.users += 1

    def _release(self, region: Region) -> None:
        with self._lock:
            region.users -= 1
            if region.users <= 0 and region.awaiting_unregister:
                self._drop(region)

    def _lookup(self, name: str, offset: int, byte_size: int) -> Region:
        with self._lock:
            region = self._regions.get(name)
            if region is None:
                raise NotFoundError(f"Unable to find shared memory region: '{name}'")
            region.check_bounds(offset, byte_size)
            return region

    # ---------------------------------------------------------- inference hooks
    def read_input(
        self, name: str, datatype: str, shape: tuple[int, ...], params: dict[str, Any], model: str
    ) -> np.ndarray:
        """An input tensor read from the region its parameters name (zero-copy for system shm).

        A view outliving its region is safe: the mapping is only closed once no view exports it.
        """
        region_name, offset, byte_size = shm_placement(params, name)
        region = self._lookup(region_name, offset, byte_size)
        return datatypes.from_wire_bytes(
            region.read(offset, byte_size), datatype, shape, name=name, model=model
        )

    def pin(self, request: InferRequest) -> None:
        """Read the inputs that name a region and hold every region the request uses until
        `release` (output regions are checked here, so a bad one fails before the model runs)."""
        holds: list[_Hold] = []
        outputs: dict[str, _Hold] = {}
        try:
            for tensor in request.inputs:
                if tensor.data is None:  # the codec left it to us: it lives in a region
                    name, offset, byte_size = shm_placement(tensor.parameters, tensor.name)
                    hold = _Hold(self, self._lookup(name, offset, byte_size))
                    holds.append(hold)
                    tensor.data = datatypes.from_wire_bytes(
                        hold.region.read(offset, byte_size),
                        tensor.datatype,
                        tensor.shape,
                        name=tensor.name,
                        model=request.model_name,
                    )
            for output in request.outputs or ():
                if output.shm_region is not None:
                    region = self._lookup(
                        output.shm_region, output.shm_offset, output.shm_byte_size
                    )
                    outputs[output.name] = _Hold(self, region)
                    holds.append(outputs[output.name])
        except BaseException:
            for hold in holds:
                hold.release()
            raise
        if holds:
            request.state.shm_holds = holds
            request.state.shm_outputs = outputs

    def release(self, request: InferRequest) -> None:
        """The request is over: let go of its regions (unregistering those that wait for it)."""
        holds, request.state.shm_holds = request.state.shm_holds, None
        if holds:
            for hold in holds:
                hold.release()

    def write_output(
        self, requested: RequestedOutput, tensor: Tensor, holds: dict[str, Any] | None = None
    ) -> None:
        """Write an output's wire bytes into its region. Too small a region is the client's
        mistake (400), where Triton answers INTERNAL."""
        assert requested.shm_region is not None and tensor.data is not None
        data = datatypes.to_wire_bytes(tensor.data, tensor.datatype)
        size = len(data) if isinstance(data, bytes) else data.nbytes
        if size > requested.shm_byte_size:
            raise InvalidArgumentError(
                f"shared memory size specified with the request for output '{tensor.name}' "
                f"({requested.shm_byte_size} bytes) should be at least {size} bytes to hold the results"
            )
        hold = holds.get(requested.name) if holds else None
        region = (
            hold.region
            if hold is not None
            else self._lookup(requested.shm_region, requested.shm_offset, requested.shm_byte_size)
        )
        if size:
            region.write(requested.shm_offset, data)

    def close(self) -> None:
        """Unmap everything (server shutdown)."""
        with self._lock:
            for region in list(self._regions.values()):
                self._drop(region)

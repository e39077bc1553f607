"""SystemSharedMemory* and CudaSharedMemory* RPCs: protobuf in and out of the core."""

from __future__ import annotations

from typing import Any

from ..._proto import grpc_service_pb2 as pb
from ...core.errors import UnsupportedError
from ...core.server import InferenceServer


class SharedMemoryRpcs:
    """A mixin of the gRPC servicer (which guards every RPC it finds)."""

    server: InferenceServer

    def _shm(self) -> Any:
        if self.server.shm is None:
            raise UnsupportedError("shared memory is not available on this server")
        return self.server.shm

    async def SystemSharedMemoryStatus(self, request, context):
        response = pb.SystemSharedMemoryStatusResponse()
        for region in self._shm().system_status(request.name):
            response.regions[region.name].CopyFrom(
                pb.SystemSharedMemoryStatusResponse.RegionStatus(
                    name=region.name, key=region.key, offset=region.offset, byte_size=region.byte_size
                )
            )
        return response

    async def SystemSharedMemoryRegister(self, request, context):
        self._shm().register_system(request.name, request.key, request.offset, request.byte_size)
        return pb.SystemSharedMemoryRegisterResponse()

    async def SystemSharedMemoryUnregister(self, request, context):
        self._shm().unregister_system(request.name)
        return pb.SystemSharedMemoryUnregisterResponse()

    async def CudaSharedMemoryStatus(self, request, context):
        response = pb.CudaSharedMemoryStatusResponse()
        for region in self._shm().cuda_status(request.name):
            response.regions[region.name].CopyFrom(
                pb.CudaSharedMemoryStatusResponse.RegionStatus(
                    name=region.name, device_id=region.device_id, byte_size=region.byte_size
                )
            )
        return response

    async def CudaSharedMemoryRegister(self, request, context):
        self._shm().register_cuda(request.name, bytes(request.raw_handle), request.device_id, request.byte_size)
        return pb.CudaSharedMemoryRegisterResponse()

    async def CudaSharedMemoryUnregister(self, request, context):
        self._shm().unregister_cuda(request.name)
        return pb.CudaSharedMemoryUnregisterResponse()

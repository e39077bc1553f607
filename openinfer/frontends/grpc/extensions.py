"""gRPC RPCs of the shared-memory, trace and logging extensions.

A mixin of `InferenceServicer`, so the one guard (restrictions, error mapping) wraps these
RPCs like every other. Only protobuf translation lives here; the rules are in the core.
"""

from __future__ import annotations

from typing import Any

from ..._proto import grpc_service_pb2 as pb
from ...core import trace as traces
from ...core.errors import InvalidArgumentError, UnsupportedError
from ...core.server import InferenceServer

_SINGLE_VALUE = ("trace_rate", "trace_count", "log_frequency")
_LOG_KINDS = {
    "log_info": ("bool_param", "boolean"),
    "log_warning": ("bool_param", "boolean"),
    "log_error": ("bool_param", "boolean"),
    "log_verbose_level": ("uint32_param", "int32"),
    "log_format": ("string_param", "string"),
}


class ExtensionRpcs:
    """SystemSharedMemory*, CudaSharedMemory*, TraceSetting and LogSettings over the core."""

    server: InferenceServer

    def _shm(self) -> Any:
        if self.server.shm is None:
            raise UnsupportedError("shared memory is not available on this server")
        return self.server.shm

    # ------------------------------------------------------------ system shm
    async def SystemSharedMemoryStatus(self, request, context):
        response = pb.SystemSharedMemoryStatusResponse()
        for region in self._shm().system_status(request.name):
            response.regions[region.name].CopyFrom(
                pb.SystemSharedMemoryStatusResponse.RegionStatus(
                    name=region.name,
                    key=region.key,
                    offset=region.offset,
                    byte_size=region.byte_size,
                )
            )
        return response

    async def SystemSharedMemoryRegister(self, request, context):
        self._shm().register_system(request.name, request.key, request.offset, request.byte_size)
        return pb.SystemSharedMemoryRegisterResponse()

    async def SystemSharedMemoryUnregister(self, request, context):
        self._shm().unregister_system(request.name)
        return pb.SystemSharedMemoryUnregisterResponse()

    # -------------------------------------------------------------- cuda shm
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
        self._shm().register_cuda(
            request.name, bytes(request.raw_handle), request.device_id, request.byte_size
        )
        return pb.CudaSharedMemoryRegisterResponse()

    async def CudaSharedMemoryUnregister(self, request, context):
        self._shm().unregister_cuda(request.name)
        return pb.CudaSharedMemoryUnregisterResponse()

    # ----------------------------------------------------------------- trace
    async def TraceSetting(self, request, context):
        model = request.model_name
        if model and not self.server.model_ready(model):
            raise InvalidArgumentError(f"Request for unknown model : {model}")
        if request.settings:
            values: dict[str, list[str] | None] = {}
            for key, setting in request.settings.items():
                items = list(setting.value)
                if key in _SINGLE_VALUE and len(items) > 1:
                    raise InvalidArgumentError(f"expect only 1 value for '{key}'")
                values[key] = items or None  # an empty list clears the setting
            new, clear = traces.parse_update(values)
            current = self.server.trace.update(model, new, clear)
        else:
            current = self.server.trace.settings(model)
        response = pb.TraceSettingResponse()
        for key, value in current.items():
            response.settings[key].value.extend(value if isinstance(value, list) else [value])
        return response

    # --------------------------------------------------------------- logging
    async def LogSettings(self, request, context):
        settings = self.server.log_settings
        if request.settings:
            if "log_file" in request.settings:
                raise UnsupportedError(
                    "log file location can not be updated through network protocol"
                )
            values: dict[str, Any] = {}
            for key, (field, expected) in _LOG_KINDS.items():
                if key not in request.settings:
                    continue
                setting = request.settings[key]
                if setting.WhichOneof("parameter_choice") != field:
                    raise InvalidArgumentError(f"expect {expected} for '{key}'")
                values[key] = getattr(setting, field)
            settings.update(values)
        response = pb.LogSettingsResponse()
        for key, value in settings.as_dict().items():
            target = response.settings[key]
            if isinstance(value, bool):
                target.bool_param = value
            elif isinstance(value, int):
                target.uint32_param = value
            else:
                target.string_param = value
        return response

"""The LogSettings RPC."""

from __future__ import annotations

from typing import Any

from ..._proto import grpc_service_pb2 as pb
from ...core.errors import InvalidArgumentError, UnsupportedError
from ...core.server import InferenceServer
from .settings import log_settings

#: Each setting's protobuf field and the type named when another one is sent.
_LOG_KINDS = {
    "log_info": ("bool_param", "boolean"),
    "log_warning": ("bool_param", "boolean"),
    "log_error": ("bool_param", "boolean"),
    "log_verbose_level": ("uint32_param", "int32"),
    "log_format": ("string_param", "string"),
}


class LoggingRpcs:
    """A mixin of the gRPC servicer (which guards every RPC it finds)."""

    server: InferenceServer

    async def LogSettings(self, request, context):
        settings = log_settings(self.server)
        if request.settings:
            if "log_file" in request.settings:
                raise UnsupportedError("log file location can not be updated through network protocol")
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

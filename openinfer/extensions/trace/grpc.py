"""The TraceSetting RPC."""

from __future__ import annotations

from ..._proto import grpc_service_pb2 as pb
from ...core.errors import InvalidArgumentError
from ...core.server import InferenceServer
from . import manager as traces

_SINGLE_VALUE = ("trace_rate", "trace_count", "log_frequency")


class TraceRpcs:
    """A mixin of the gRPC servicer (which guards every RPC it finds)."""

    server: InferenceServer

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
            current = traces.of(self.server).update(model, new, clear)
        else:
            current = traces.of(self.server).settings(model)
        response = pb.TraceSettingResponse()
        for key, value in current.items():
            response.settings[key].value.extend(value if isinstance(value, list) else [value])
        return response

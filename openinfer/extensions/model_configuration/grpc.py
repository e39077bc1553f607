"""The ModelConfig RPC."""

from __future__ import annotations

from ..._proto import grpc_service_pb2 as pb
from ...core.server import InferenceServer


class ModelConfigRpcs:
    """A mixin of the gRPC servicer (which guards every RPC it finds)."""

    server: InferenceServer

    async def ModelConfig(self, request, context):
        return pb.ModelConfigResponse(config=self.server.model_config(request.name, request.version))

"""RepositoryIndex, RepositoryModelLoad and RepositoryModelUnload."""

from __future__ import annotations

from ..._proto import grpc_service_pb2 as pb
from ...core.server import InferenceServer
from ...frontends.grpc import convert


class ModelRepositoryRpcs:
    """A mixin of the gRPC servicer (which guards every RPC it finds). The load and unload
    parameters are read by the core (`InferenceServer.load_request`), as HTTP's are."""

    server: InferenceServer

    async def RepositoryIndex(self, request, context):
        response = pb.RepositoryIndexResponse()
        for row in self.server.repository_index(request.ready, request.repository_name):
            response.models.add(name=row.name, version=row.version, state=row.state, reason=row.reason)
        return response

    async def RepositoryModelLoad(self, request, context):
        parameters = {key: convert.param_value(param) for key, param in request.parameters.items()}
        await self.server.load_request(request.model_name, parameters, request.repository_name)
        return pb.RepositoryModelLoadResponse()

    async def RepositoryModelUnload(self, request, context):
        parameters = {key: convert.param_value(param) for key, param in request.parameters.items()}
        await self.server.unload_request(request.model_name, parameters, request.repository_name)
        return pb.RepositoryModelUnloadResponse()

"""A bare grpc.aio ``ModelInfer`` echo: raw inputs come back as raw outputs.

Protobuf parsing and serialisation on a single grpc.aio event loop, nothing else: the ceiling for
a Python gRPC frontend.
"""

from __future__ import annotations

import time
from typing import Any

import orjson
from grpc import aio

from openinfer._proto import grpc_service_pb2 as pb
from openinfer._proto import grpc_service_pb2_grpc as pb_grpc

from .model import MAX_BATCH_SIZE, Counter, output_name
from .shm_regions import ShmRegions


def _params(params: Any) -> dict[str, Any]:
    return {k: getattr(v, v.WhichOneof("parameter_choice")) for k, v in params.items()}


class EchoServicer(pb_grpc.GRPCInferenceServiceServicer):
    def __init__(self) -> None:
        self.counters: dict[str, Counter] = {}
        self.shm = ShmRegions()

    async def SystemSharedMemoryRegister(self, request: Any, context: Any) -> Any:
        self.shm.handle(f"/v2/systemsharedmemory/region/{request.name}/register", orjson.dumps(
            {"key": request.key, "offset": request.offset, "byte_size": request.byte_size}))
        return pb.SystemSharedMemoryRegisterResponse()

    async def SystemSharedMemoryUnregister(self, request: Any, context: Any) -> Any:
        path = (f"/v2/systemsharedmemory/region/{request.name}/unregister" if request.name
                else "/v2/systemsharedmemory/unregister")
        self.shm.handle(path, b"")
        return pb.SystemSharedMemoryUnregisterResponse()

    async def ServerLive(self, request: Any, context: Any) -> pb.ServerLiveResponse:
        return pb.ServerLiveResponse(live=True)

    async def ServerReady(self, request: Any, context: Any) -> pb.ServerReadyResponse:
        return pb.ServerReadyResponse(ready=True)

    async def ModelReady(self, request: Any, context: Any) -> pb.ModelReadyResponse:
        return pb.ModelReadyResponse(ready=True)

    async def ServerMetadata(self, request: Any, context: Any) -> pb.ServerMetadataResponse:
        return pb.ServerMetadataResponse(name="echo", version="0", extensions=["statistics"])

    async def ModelMetadata(self, request: Any, context: Any) -> pb.ModelMetadataResponse:
        r = pb.ModelMetadataResponse(name=request.name, versions=["1"], platform="echo")
        r.inputs.add(name="INPUT0", datatype="FP32", shape=[-1, -1])
        r.outputs.add(name="OUTPUT0", datatype="FP32", shape=[-1, -1])
        return r

    async def ModelConfig(self, request: Any, context: Any) -> pb.ModelConfigResponse:
        r = pb.ModelConfigResponse()
        r.config.name = request.name
        r.config.max_batch_size = MAX_BATCH_SIZE
        return r

    async def ModelStatistics(self, request: Any, context: Any) -> pb.ModelStatisticsResponse:
        c = self.counters.setdefault(request.name, Counter())
        r = pb.ModelStatisticsResponse()
        s = r.model_stats.add(name=request.name, version="1", inference_count=c.count,
                              execution_count=c.count)
        s.inference_stats.success.count = c.count
        s.inference_stats.success.ns = c.ns
        s.inference_stats.queue.count = c.count
        s.inference_stats.compute_input.count = c.count
        s.inference_stats.compute_infer.count = c.count
        s.inference_stats.compute_infer.ns = c.ns
        s.inference_stats.compute_output.count = c.count
        return r

    async def ModelInfer(self, request: Any, context: Any) -> pb.ModelInferResponse:
        t0 = time.perf_counter_ns()
        r = pb.ModelInferResponse(model_name=request.model_name, model_version="1", id=request.id)
        out_shm = {o.name: _params(o.parameters) for o in request.outputs
                   if "shared_memory_region" in o.parameters}
        for t in request.inputs:
            out = r.outputs.add(name=output_name(t.name), datatype=t.datatype, shape=t.shape)
            if "shared_memory_region" in t.parameters:
                data = self.shm.read(_params(t.parameters))
                if out.name in out_shm:
                    self.shm.write(out_shm[out.name], data)
                    out.parameters["shared_memory_region"].string_param = (
                        out_shm[out.name]["shared_memory_region"])
                    out.parameters["shared_memory_byte_size"].int64_param = len(data)
                else:
                    r.raw_output_contents.append(data)
        r.raw_output_contents.extend(request.raw_input_contents)
        self.counters.setdefault(request.model_name, Counter()).add(time.perf_counter_ns() - t0)
        return r

    async def ModelStreamInfer(self, request_iterator: Any, context: Any) -> Any:
        async for request in request_iterator:
            response = await self.ModelInfer(request, context)
            yield pb.ModelStreamInferResponse(infer_response=response)


async def serve(host: str, port: int) -> None:
    server = aio.server(options=[("grpc.max_send_message_length", -1),
                                 ("grpc.max_receive_message_length", -1)])
    pb_grpc.add_GRPCInferenceServiceServicer_to_server(EchoServicer(), server)
    server.add_insecure_port(f"{host}:{port}")
    await server.start()
    await server.wait_for_termination()


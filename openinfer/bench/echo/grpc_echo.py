"""A bare grpc.aio ``ModelInfer`` echo: raw inputs come back as raw outputs.

Protobuf parsing and serialisation on a single grpc.aio event loop, nothing else: the ceiling for
a Python gRPC frontend.
"""

from __future__ import annotations

import time
from typing import Any

from grpc import aio

from openinfer._proto import grpc_service_pb2 as pb
from openinfer._proto import grpc_service_pb2_grpc as pb_grpc

from .model import MAX_BATCH_SIZE, Counter, output_name


class EchoServicer(pb_grpc.GRPCInferenceServiceServicer):
    def __init__(self) -> None:
        self.counters: dict[str, Counter] = {}

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
        for t in request.inputs:
            r.outputs.add(name=output_name(t.name), datatype=t.datatype, shape=t.shape)
        r.raw_output_contents.extend(request.raw_input_contents)
        self.counters.setdefault(request.model_name, Counter()).add(time.perf_counter_ns() - t0)
        return r

    async def ModelStreamInfer(self, request_iterator: Any, context: Any) -> Any:
        async for request in request_iterator:
            yield pb.ModelStreamInferResponse(infer_response=await self.ModelInfer(request, context))


async def serve(host: str, port: int) -> None:
    server = aio.server(options=[("grpc.max_send_message_length", -1),
                                 ("grpc.max_receive_message_length", -1)])
    pb_grpc.add_GRPCInferenceServiceServicer_to_server(EchoServicer(), server)
    server.add_insecure_port(f"{host}:{port}")
    await server.start()
    await server.wait_for_termination()


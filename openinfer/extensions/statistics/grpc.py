"""The ModelStatistics RPC."""

from __future__ import annotations

from ..._proto import grpc_service_pb2 as pb
from ...core.server import InferenceServer


class StatisticsRpcs:
    """A mixin of the gRPC servicer (which guards every RPC it finds)."""

    server: InferenceServer

    async def ModelStatistics(self, request, context):
        stats = self.server.statistics(request.name, request.version)
        response = pb.ModelStatisticsResponse()
        for entry in stats:
            item = response.model_stats.add(
                name=entry["name"],
                version=entry["version"],
                last_inference=entry["last_inference"],
                inference_count=entry["inference_count"],
                execution_count=entry["execution_count"],
            )
            for key, value in entry["inference_stats"].items():
                getattr(item.inference_stats, key).count = value["count"]
                getattr(item.inference_stats, key).ns = value["ns"]
            for batch in entry["batch_stats"]:
                b = item.batch_stats.add(batch_size=batch["batch_size"])
                for key in ("compute_input", "compute_infer", "compute_output"):
                    getattr(b, key).count = batch[key]["count"]
                    getattr(b, key).ns = batch[key]["ns"]
        return response

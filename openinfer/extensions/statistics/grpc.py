"""The ModelStatistics RPC."""

from __future__ import annotations

from ..._proto import grpc_service_pb2 as pb
from ...core.observability.stats import INFERENCE_KEYS, Counted
from ...core.server import InferenceServer


class StatisticsRpcs:
    """A mixin of the gRPC servicer (which guards every RPC it finds)."""

    server: InferenceServer

    async def ModelStatistics(self, request, context):
        response = pb.ModelStatisticsResponse()
        for stats in self.server.statistics(request.name, request.version):
            item = response.model_stats.add(
                name=stats.name,
                version=stats.version,
                last_inference=stats.last_inference,
                inference_count=stats.inference_count,
                execution_count=stats.execution_count,
            )
            for key in INFERENCE_KEYS:
                _fill(getattr(item.inference_stats, key), getattr(stats.inference, key))
            for batch in stats.batches:
                b = item.batch_stats.add(batch_size=batch.batch_size)
                for key in ("compute_input", "compute_infer", "compute_output"):
                    _fill(getattr(b, key), getattr(batch, key))
        return response


def _fill(duration: pb.StatisticDuration, counted: Counted) -> None:
    duration.count = counted.count
    duration.ns = counted.ns

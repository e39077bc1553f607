"""The one model every echo server pretends to serve: FP32 identity with a batch dimension."""

from __future__ import annotations

from typing import Any

MAX_BATCH_SIZE = 8


def metadata(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "versions": ["1"],
        "platform": "echo",
        "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [-1, -1]}],
        "outputs": [{"name": "OUTPUT0", "datatype": "FP32", "shape": [-1, -1]}],
    }


def config(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "platform": "echo",
        "max_batch_size": MAX_BATCH_SIZE,
        "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [-1]}],
        "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [-1]}],
    }


def output_name(input_name: str) -> str:
    """INPUT0 -> OUTPUT0 (any other name echoes under its own name)."""
    return "OUTPUT" + input_name[5:] if input_name.startswith("INPUT") else input_name


class Counter:
    """Just enough of the statistics extension for the bench to compare request counts."""

    def __init__(self) -> None:
        self.count = 0
        self.ns = 0

    def add(self, ns: int) -> None:
        self.count += 1
        self.ns += ns

    def stats(self, name: str) -> dict[str, Any]:
        d = {"count": self.count, "ns": self.ns}
        zero = {"count": self.count, "ns": 0}
        return {"model_stats": [{
            "name": name, "version": "1", "last_inference": 0,
            "inference_count": self.count, "execution_count": self.count,
            "inference_stats": {
                "success": d, "fail": {"count": 0, "ns": 0}, "queue": zero,
                "compute_input": zero, "compute_infer": d, "compute_output": zero,
                "cache_hit": {"count": 0, "ns": 0}, "cache_miss": {"count": 0, "ns": 0},
            },
            "response_stats": {}, "batch_stats": [], "memory_usage": [],
        }]}

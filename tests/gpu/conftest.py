"""GPU-only tests (vLLM): skipped, with the reason, where vLLM or a CUDA GPU is missing."""

from __future__ import annotations

import pytest

from openinfer.backends.llm.vllm_backend import unavailable_reason


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = unavailable_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=f"needs vLLM and an NVIDIA GPU: {reason} (run tests/gpu/run_gpu_checks.sh there)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)

"""Triton's per-GPU families on /metrics: present with a GPU, absent (and harmless) without one.

The `gpu` tests need an NVIDIA GPU and its driver (NVML) and are skipped elsewhere with the reason;
tests/gpu/run_gpu_checks.sh runs them on a GPU machine.
"""

from __future__ import annotations

import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from openinfer.frontends.gpu_metrics import FAMILY_NAMES, GpuSampler
from tests.helpers import EXAMPLES, Server


def _nvml_reason() -> str | None:
    """Why the GPU tests cannot run here, or None when NVML sees a GPU."""
    try:
        import pynvml
    except ImportError:
        return "nvidia-ml-py is not installed (the `gpu` extra)"
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return f"no NVIDIA driver (NVML: {exc})"
    try:
        if pynvml.nvmlDeviceGetCount() == 0:
            return "NVML sees no GPU"
    finally:
        pynvml.nvmlShutdown()
    return None


NO_GPU = _nvml_reason()
needs_gpu = pytest.mark.skipif(NO_GPU is not None, reason=f"needs an NVIDIA GPU: {NO_GPU}")


def _families(url: str) -> dict:
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    return {family.name: family for family in text_string_to_metric_families(text)}


@pytest.mark.skipif(NO_GPU is None, reason="this host has a GPU: the CPU-only behaviour is not observable")
def test_without_a_gpu_no_gpu_family_appears_and_metrics_still_serve(example_server):
    assert GpuSampler.open() is None
    families = _families(example_server.metrics_url)
    assert "nv_inference_request_success" in families
    assert "nv_cpu_utilization" in families
    assert not [name for name in families if name.startswith(("nv_gpu_", "nv_energy_"))]


@pytest.mark.gpu
@needs_gpu
def test_every_gpu_reports_triton_families():
    import pynvml

    pynvml.nvmlInit()
    try:
        uuids = set()
        for index in range(pynvml.nvmlDeviceGetCount()):
            uuid = pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(index))
            uuids.add(uuid.decode() if isinstance(uuid, bytes) else uuid)
    finally:
        pynvml.nvmlShutdown()
    with Server(EXAMPLES) as server:
        families = _families(server.metrics_url)
    for name in ("nv_gpu_utilization", "nv_gpu_memory_total_bytes", "nv_gpu_memory_used_bytes"):
        assert families[name].type == "gauge"
        assert {s.labels["gpu_uuid"] for s in families[name].samples} == uuids
    for sample in families["nv_gpu_utilization"].samples:
        assert 0.0 <= sample.value <= 1.0
    total = {s.labels["gpu_uuid"]: s.value for s in families["nv_gpu_memory_total_bytes"].samples}
    for sample in families["nv_gpu_memory_used_bytes"].samples:
        assert 0 < sample.value <= total[sample.labels["gpu_uuid"]]
    if "nv_gpu_power_limit" in families:  # boards without power management leave it out
        assert all(s.value > 0 for s in families["nv_gpu_power_limit"].samples)
    if "nv_energy_consumption" in families:
        assert families["nv_energy_consumption"].type == "counter"
        assert all(s.value >= 0 for s in families["nv_energy_consumption"].samples)
    assert set(FAMILY_NAMES) >= {name for name in families if name.startswith(("nv_gpu_", "nv_energy_"))}


@pytest.mark.gpu
@needs_gpu
def test_allow_gpu_metrics_false_leaves_them_out():
    with Server(EXAMPLES, args=["--allow-gpu-metrics=false"]) as server:
        families = _families(server.metrics_url)
    assert "nv_inference_request_success" in families
    assert not [name for name in families if name.startswith(("nv_gpu_", "nv_energy_"))]

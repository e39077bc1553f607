"""GPU discovery from the driver's device list and CUDA_VISIBLE_DEVICES."""

from __future__ import annotations

import pytest

from openinfer.core.memory import gpus


@pytest.mark.parametrize(
    "listed, mask, expected",
    [
        (0, None, ()),
        (2, None, (0, 1)),
        (2, "1", (0,)),
        (2, "", ()),
        (4, "0,2,9,1", (0, 1)),  # CUDA stops at the first entry it cannot resolve
        (2, "GPU-8d1e,GPU-33aa", (0, 1)),
        (1, "-1", ()),
    ],
)
def test_visible_gpus(tmp_path, monkeypatch, listed, mask, expected):
    for index in range(listed):
        (tmp_path / f"0000:0{index}:00.0").mkdir()
    monkeypatch.setattr(gpus, "_DRIVER_GPUS", str(tmp_path))
    if mask is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", mask)
    gpus.visible_gpus.cache_clear()
    try:
        assert gpus.visible_gpus() == expected
    finally:
        gpus.visible_gpus.cache_clear()

"""The soak of benchmarks/soak.py, short: mixed HTTP, gRPC, streaming and OpenAI traffic while a
model is unloaded and loaded every few seconds. Healthy models see no error, the churned
model never answers wrongly, and the server's memory does not grow after warm-up."""

from __future__ import annotations

from benchmarks import soak


def test_short_soak_serves_everything_and_holds_its_memory():
    report = soak.run(seconds=20, interval=5, churn_every=2, warmup_windows=1, log=lambda line: None)
    assert report.healthy_errors == 0, report.error_samples
    assert all(report.served[kind] > 0 for kind in soak.KINDS), report.served
    assert report.churn_cycles >= 2
    assert report.rss_growth_mib < 32, report.table()

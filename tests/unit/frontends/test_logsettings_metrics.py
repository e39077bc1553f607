"""Log settings applied to Python logging, and the metrics configuration and exposition."""

from __future__ import annotations

import logging
import re

import pytest
from prometheus_client.core import Metric
from prometheus_client.samples import Sample

from openinfer.core.errors import InvalidArgumentError, UnsupportedError
from openinfer.extensions.logging.settings import LogSettings, TritonFormatter
from openinfer.core.observability.stats import ExecutionTiming, ModelStats
from openinfer.frontends import metrics
from openinfer.frontends.latency import LatencyObserver, MetricsConfig, latency_observers


def _record(level: int, name: str = "openinfer.test") -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, "hello %s", ("world",), None)


def test_triton_line_formats():
    assert re.fullmatch(
        r"I\d{4} \d\d:\d\d:\d\d\.\d{6} \d+ openinfer\.test\] hello world",
        TritonFormatter("default").format(_record(logging.INFO)),
    )
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ W \d+ openinfer\.test\] hello world",
        TritonFormatter("ISO8601").format(_record(logging.WARNING)),
    )


def test_updates_switch_severities_live():
    root = logging.getLogger()
    saved = (list(root.handlers), root.level, logging.getLogger("openinfer").level)
    settings = LogSettings()
    settings.apply()
    handler = root.handlers[0]
    try:
        assert handler.filter(_record(logging.INFO)) and not handler.filter(_record(logging.DEBUG))
        assert settings.update({"log_info": False, "log_verbose_level": 1, "log_error": None}) == {
            "log_file": "",
            "log_info": False,
            "log_warning": True,
            "log_error": True,
            "log_verbose_level": 1,
            "log_format": "default",
        }
        assert not handler.filter(_record(logging.INFO)) and handler.filter(_record(logging.DEBUG))
        assert logging.getLogger("openinfer").level == logging.DEBUG
        settings.update({"log_format": "ISO8601"})
        assert (
            isinstance(handler.formatter, TritonFormatter)
            and handler.formatter.log_format == "ISO8601"
        )
        with pytest.raises(UnsupportedError, match="log file location can not be updated"):
            settings.update({"log_file": "/tmp/x"})
        with pytest.raises(InvalidArgumentError, match="invalid argument for log_format, got: xml"):
            settings.update({"log_format": "xml", "log_info": True})
        assert settings.log_info is False  # a refused update changes nothing
    finally:
        root.handlers[:], level, own = saved
        root.setLevel(level)
        logging.getLogger("openinfer").setLevel(own)


def test_metrics_config_parsing():
    config = MetricsConfig.parse(
        [
            "counter_latencies=false",
            "summary_latencies=true",
            'summary_quantiles="0.5:0.05,0.99:0.001"',
        ]
    )
    assert (config.counter_latencies, config.summary_latencies, config.histogram_latencies) == (
        False,
        True,
        False,
    )
    assert config.summary_quantiles == ((0.5, 0.05), (0.99, 0.001))
    for bad in ("colour=blue", "summary_latencies=maybe", "summary_quantiles=half", "no_equals"):
        with pytest.raises(ValueError):
            MetricsConfig.parse([bad])


def test_observers_attach_only_when_configured():
    observe = latency_observers(MetricsConfig(summary_latencies=True, histogram_latencies=True))
    assert observe is not None
    stats = ModelStats("m", "1")
    stats.observer = observe(stats)
    assert isinstance(stats.observer, LatencyObserver)
    stats.record_execution(2, 2, ExecutionTiming(1000, 2000, 3000))
    stats.record_request(True, 1_500_000_000, 10_000)
    stats.record_request(False, 9, 9)
    values, total, count = stats.observer.quantiles("nv_inference_compute_infer_summary_us")
    assert (count, total) == (2, 4.0) and values[0] == (0.5, 2.0)
    assert stats.observer.histogram_count == 1 and stats.observer.buckets == [0, 0, 1, 0]
    assert latency_observers(MetricsConfig()) is None
    assert ModelStats("m", "1").observer is None


def test_exposition_keeps_triton_names():
    family = Metric("nv_inference_count", "Number of inferences", "counter")
    family.samples.append(Sample("nv_inference_count", {"model": 'a"b', "version": "1"}, 3.0))
    empty = Metric("nv_cache_num_hits_per_model", "hits", "counter")
    text = metrics.render(iter([family, empty])).decode()
    assert text == (
        "# HELP nv_inference_count Number of inferences\n"
        "# TYPE nv_inference_count counter\n"
        'nv_inference_count{model="a\\"b",version="1"} 3\n'
    )

"""The registry behind `pb_utils.MetricFamily`: Triton's rules, messages and text format."""

from __future__ import annotations

import asyncio
import json
import math
import textwrap
import threading
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from openinfer.core.backend import Backend, ModelContext, ModelInstance
from openinfer.core.errors import InvalidArgumentError, OpenInferError, UnsupportedError
from openinfer.core.observability import custom_metrics as cm
from openinfer.core.observability.custom_metrics import CustomMetrics
from openinfer.core.repository.repository import ControlMode, RepositoryOptions
from openinfer.core.server import InferenceServer, ServerOptions
from openinfer.frontends.metrics import metrics_app

OWNER = "custom_metrics:1#1"


@pytest.fixture
def reg() -> CustomMetrics:
    return CustomMetrics()


def _raises(exc_type: type[OpenInferError], message: str, fn, *args) -> None:
    with pytest.raises(exc_type) as info:
        fn(*args)
    assert info.value.message == message
    assert str(info.value) == message


def _parse(text: str) -> dict:
    return {family.name: family for family in text_string_to_metric_families(text)}


# ---------------------------------------------------------------------- kinds
def test_counter_counts_up_only(reg):
    fid = reg.create_family(OWNER, "test_counter_e2e", "test metric counter kind end to end", "COUNTER")
    mid = reg.create_metric(fid, {"example1": "counter_label1", "example2": "counter_label2"})
    assert reg.value(mid) == 0.0
    reg.increment(mid, 2023.0)
    assert reg.value(mid) == 2023.0
    _raises(InvalidArgumentError, cm.NEGATIVE_COUNTER, reg.increment, mid, -23.5)
    assert cm.NEGATIVE_COUNTER == (
        "TRITONSERVER_METRIC_KIND_COUNTER can only be incremented monotonically by non-negative values."
    )
    _raises(UnsupportedError, "TRITONSERVER_METRIC_KIND_COUNTER does not support Set", reg.set, mid, 999.9)
    _raises(UnsupportedError, "TRITONSERVER_METRIC_KIND_COUNTER does not support Observe", reg.observe, mid, 0.05)
    reg.increment(mid, 0.0)
    assert reg.value(mid) == 2023.0


def test_gauge_moves_both_ways_and_is_set(reg):
    fid = reg.create_family(OWNER, "test_gauge_e2e", "test metric gauge kind end to end", "GAUGE")
    mid = reg.create_metric(fid, {"example1": "gauge_label1", "example2": "gauge_label2"})
    assert reg.value(mid) == 0.0
    reg.increment(mid, 2023.0)
    reg.increment(mid, -23.5)
    assert reg.value(mid) == 1999.5
    reg.set(mid, 999.9)
    assert reg.value(mid) == 999.9
    _raises(UnsupportedError, "TRITONSERVER_METRIC_KIND_GAUGE does not support Observe", reg.observe, mid, 0.05)


def test_histogram_only_observes(reg):
    fid = reg.create_family(OWNER, "h", "d", "HISTOGRAM")
    mid = reg.create_metric(fid, {}, [0.1, 1.0])
    _raises(UnsupportedError, "TRITONSERVER_METRIC_KIND_HISTOGRAM does not support Value", reg.value, mid)
    _raises(UnsupportedError, "TRITONSERVER_METRIC_KIND_HISTOGRAM does not support Increment", reg.increment, mid, 1)
    _raises(UnsupportedError, "TRITONSERVER_METRIC_KIND_HISTOGRAM does not support Set", reg.set, mid, 1)
    reg.observe(mid, 0.1)  # a value on a bound falls in that bucket (le)
    assert 'h_bucket{le="0.1"} 1' in reg.exposition()


def test_unknown_kind_and_bad_names(reg):
    _raises(InvalidArgumentError, "Unsupported kind passed to MetricFamily constructor.",
            reg.create_family, OWNER, "x", "d", "SUMMARY")
    for name in ("", "1abc", "__reserved", "has-dash", "has space"):
        _raises(InvalidArgumentError, "Invalid metric name", reg.create_family, OWNER, name, "d", "COUNTER")
    assert reg.create_family(OWNER, "ok:name_1", "d", "counter") > 0  # lower case kinds are taken too


def test_values_must_be_numbers(reg):
    mid = reg.create_metric(reg.create_family(OWNER, "g", "d", "GAUGE"), {})
    with pytest.raises(InvalidArgumentError):
        reg.set(mid, "high")
    reg.set(mid, 3)  # ints are numbers
    assert reg.value(mid) == 3.0


# ------------------------------------------------------------------ families
def test_same_name_same_kind_is_the_same_family(reg):
    first = reg.create_family(OWNER, "test_dup_metric_family", "dup description", "COUNTER")
    second = reg.create_family(OWNER, "test_dup_metric_family", "dup description", "COUNTER")
    assert first == second
    reg.create_metric(first, {"custom_metric_key": "label1"})
    reg.create_metric(second, {"custom_metric_key": "label2"})
    text = reg.exposition()
    assert text.count("# HELP test_dup_metric_family dup description\n") == 1
    assert text.count("# TYPE test_dup_metric_family counter\n") == 1
    assert 'test_dup_metric_family{custom_metric_key="label1"} 0\n' in text
    assert 'test_dup_metric_family{custom_metric_key="label2"} 0\n' in text


def test_same_name_other_kind_is_refused(reg):
    reg.create_family(OWNER, "test_dup_metric_family_diff_kind", "d", "COUNTER")
    _raises(InvalidArgumentError, "Family name already exists with different type",
            reg.create_family, OWNER, "test_dup_metric_family_diff_kind", "d", "GAUGE")
    _raises(InvalidArgumentError, "Family name already exists with different type",
            reg.create_family, "other:1#9", "test_dup_metric_family_diff_kind", "d", "HISTOGRAM")


def test_other_description_keeps_the_first(reg):
    name = "test_dup_metric_family_diff_description"
    first = reg.create_family(OWNER, name, "first description", "COUNTER")
    second = reg.create_family(OWNER, name, "second description", "COUNTER")
    mid = reg.create_metric(second, None)
    assert reg.value(mid) == 0
    reg.release_family(first)  # the second reference keeps family and metric
    text = reg.exposition()
    assert f"{name} first description" in text
    assert f"{name} second description" not in text
    assert reg.value(mid) == 0


def test_family_reference_counting(reg):
    fid = reg.create_family(OWNER, "rc", "d", "GAUGE")
    assert reg.create_family(OWNER, "rc", "d", "GAUGE") == fid
    mid = reg.create_metric(fid, {})
    reg.release_family(fid)
    reg.set(mid, 5)  # one reference left
    reg.release_family(fid)
    with pytest.raises(InvalidArgumentError, match="unknown or released metric family id"):
        reg.release_family(fid)
    with pytest.raises(InvalidArgumentError, match="unknown or released metric family id"):
        reg.create_metric(fid, {})
    assert reg.exposition() == ""
    again = reg.create_family(OWNER, "rc", "d", "GAUGE")  # a fresh reference, a fresh series
    assert again != fid
    assert reg.value(reg.create_metric(again, {})) == 0.0


def test_owners_share_the_family_and_its_series(reg):
    a = reg.create_family("a:1#1", "shared", "d", "COUNTER")
    b = reg.create_family("b:1#2", "shared", "other", "COUNTER")
    assert a != b  # each owner holds its own references
    ma = reg.create_metric(a, {"k": "v"})
    mb = reg.create_metric(b, {"k": "v"})
    reg.increment(ma, 2)
    assert reg.value(mb) == 2
    reg.release_owner("a:1#1")
    with pytest.raises(InvalidArgumentError):
        reg.value(ma)
    assert reg.value(mb) == 2  # b still references the series
    assert reg.exposition() == '# HELP shared d\n# TYPE shared counter\nshared{k="v"} 2\n'


def test_released_family_keeps_its_kind_and_description(reg):
    """Triton never removes a family from its registry: the first kind and description stay."""
    fid = reg.create_family("m:1#1", "kept", "old text", "COUNTER")
    reg.create_metric(fid, {})
    reg.release_owner("m:1#1")
    assert reg.exposition() == ""  # no series, nothing printed
    _raises(InvalidArgumentError, cm.KIND_CONFLICT, reg.create_family, "m:1#2", "kept", "d", "GAUGE")
    reg.create_metric(reg.create_family("m:1#2", "kept", "new text", "COUNTER"), {})
    assert reg.exposition() == "# HELP kept old text\n# TYPE kept counter\nkept 0\n"


# ------------------------------------------------------------------- metrics
@pytest.mark.parametrize("labels", [{"example1": "label1", "example2": "label2"}, {}, None])
def test_same_labels_share_one_series(reg, labels):
    fid = reg.create_family(OWNER, "test_dup_metric", "dup metric", "COUNTER")
    m1 = reg.create_metric(fid, labels)
    m2 = reg.create_metric(fid, dict(labels or {}))
    assert m1 != m2
    assert reg.value(m1) == reg.value(m2) == 0.0
    reg.increment(m1, 7.5)
    assert reg.value(m2) == 7.5
    reg.release_metric(m1)
    assert "dup metric" in reg.exposition()  # the other reference keeps the series
    reg.increment(m2, 1)
    assert reg.value(m2) == 8.5
    reg.release_metric(m2)
    assert reg.exposition() == ""
    with pytest.raises(InvalidArgumentError, match="unknown or released metric id"):
        reg.release_metric(m2)


def test_label_rules(reg):
    fid = reg.create_family(OWNER, "labels", "d", "GAUGE")
    for bad in ({"": "v"}, {"1a": "v"}, {"__x": "v"}, {"a-b": "v"}, {"a:b": "v"}):
        _raises(InvalidArgumentError, "Invalid label name", reg.create_metric, fid, bad)
    _raises(InvalidArgumentError, "attempt to access JSON non-string as string", reg.create_metric, fid, {"a": 1})
    # the value check comes first, as Triton parses the labels before it builds the series
    _raises(InvalidArgumentError, "attempt to access JSON non-string as string",
            reg.create_metric, fid, {"-": "v", "a": None})
    assert reg.exposition() == ""


def test_buckets_rules(reg):
    counter = reg.create_family(OWNER, "c", "d", "COUNTER")
    gauge = reg.create_family(OWNER, "g", "d", "GAUGE")
    hist = reg.create_family(OWNER, "test_histogram_args", "test metric histogram args", "HISTOGRAM")
    _raises(InvalidArgumentError, "Unexpected args found in counter Metric constructor.",
            reg.create_metric, counter, {}, [1.0])
    _raises(InvalidArgumentError, "Unexpected args found in gauge Metric constructor.",
            reg.create_metric, gauge, {}, [])
    _raises(InvalidArgumentError, "Bucket boundaries not found in Metric args.", reg.create_metric, hist, {})
    _raises(InvalidArgumentError, "Bucket boundaries not found in Metric args.", reg.create_metric, hist, {}, None)
    _raises(InvalidArgumentError, "Bucket Boundaries must be strictly sorted",
            reg.create_metric, hist, {}, [2.5, 0.1, 1.0, 10.0, 5.0])
    _raises(InvalidArgumentError, "Bucket Boundaries must be strictly sorted",
            reg.create_metric, hist, {}, [1, 1, 2, 5, 5])
    mid = reg.create_metric(hist, {}, [])  # no bounds: only +Inf
    reg.observe(mid, 3)
    assert reg.exposition().endswith(
        "test_histogram_args_count 1\ntest_histogram_args_sum 3\ntest_histogram_args_bucket{le=\"+Inf\"} 1\n"
    )


def test_existing_histogram_series_keeps_its_buckets(reg):
    fid = reg.create_family(OWNER, "h", "", "HISTOGRAM")
    first = reg.create_metric(fid, {"a": "b"}, [1.0, 2.0])
    # bad buckets are refused even for a series that exists (prometheus-cpp builds first)
    _raises(InvalidArgumentError, cm.UNSORTED_BUCKETS, reg.create_metric, fid, {"a": "b"}, [3.0, 3.0])
    second = reg.create_metric(fid, {"a": "b"}, [5.0])
    reg.observe(second, 1.5)
    reg.observe(first, 7)
    assert reg.exposition() == textwrap.dedent(
        """\
        # TYPE h histogram
        h_count{a="b"} 2
        h_sum{a="b"} 8.5
        h_bucket{a="b",le="1"} 0
        h_bucket{a="b",le="2"} 1
        h_bucket{a="b",le="+Inf"} 2
        """
    )


def test_releasing_the_family_first_invalidates_its_metrics(reg):
    """The Python backend clears a family's metrics before deleting it; using one afterwards
    fails with the stub's message."""
    for kind in ("COUNTER", "GAUGE"):
        fid = reg.create_family(OWNER, f"test_metric_lifetime_error_{kind.lower()}", "test metric lifetime error", kind)
        mid = reg.create_metric(fid, {"example1": "counter_label1"})
        reg.release_family(fid)
        for op, args in ((reg.increment, (10,)), (reg.set, (10,)), (reg.value, ()), (reg.observe, (1,))):
            _raises(InvalidArgumentError, cm.FAMILY_DELETED, op, mid, *args)
        assert cm.FAMILY_DELETED.startswith(
            "Invalid metric operation as the corresponding 'MetricFamily' has been deleted."
        )
        assert reg.exposition() == ""
        reg.release_metric(mid)  # the model's Metric object goes away later: accepted once
        with pytest.raises(InvalidArgumentError, match="unknown or released metric id"):
            reg.value(mid)


def test_release_owner_releases_everything_it_made(reg):
    fid = reg.create_family("m:1#1", "own", "d", "GAUGE")
    reg.create_family("m:1#1", "own", "d", "GAUGE")
    mids = [reg.create_metric(fid, {"i": str(i)}) for i in range(3)]
    orphan_family = reg.create_family("m:1#1", "gone", "d", "COUNTER")
    orphan = reg.create_metric(orphan_family, {})
    reg.release_family(orphan_family)
    keep = reg.create_metric(reg.create_family("n:1#2", "own", "d", "GAUGE"), {"i": "0"})
    reg.release_owner("m:1#1")
    reg.release_owner("never-seen")  # nothing to do
    for mid in [*mids, orphan]:
        with pytest.raises(InvalidArgumentError, match="unknown or released metric id"):
            reg.value(mid)
    with pytest.raises(InvalidArgumentError):
        reg.release_family(fid)
    assert reg.exposition() == '# HELP own d\n# TYPE own gauge\nown{i="0"} 0\n'
    reg.release_metric(keep)
    assert reg.exposition() == ""


def test_unknown_ids(reg):
    for op, args in (
        (reg.create_metric, ({},)),
        (reg.release_family, ()),
    ):
        with pytest.raises(InvalidArgumentError, match="unknown or released metric family id 42"):
            op(42, *args)
    for op, args in (
        (reg.increment, (1,)), (reg.set, (1,)), (reg.observe, (1,)), (reg.value, ()), (reg.release_metric, ()),
    ):
        with pytest.raises(InvalidArgumentError, match="unknown or released metric id 42"):
            op(42, *args)
    fid = reg.create_family(OWNER, "f", "d", "GAUGE")
    with pytest.raises(InvalidArgumentError):
        reg.value(fid)  # a family id is not a metric id


def test_server_family_names_are_taken(reg):
    reg.reserve({"nv_inference_count": "counter", "nv_inference_request_summary_us": "summary"})
    _raises(InvalidArgumentError, cm.KIND_CONFLICT, reg.create_family, OWNER, "nv_inference_count", "d", "GAUGE")
    _raises(InvalidArgumentError, cm.KIND_CONFLICT,
            reg.create_family, OWNER, "nv_inference_request_summary_us", "d", "HISTOGRAM")
    with pytest.raises(InvalidArgumentError, match="one of the server's own families"):
        reg.create_family(OWNER, "nv_inference_count", "d", "COUNTER")


def test_concurrent_updates_are_not_lost(reg):
    mid = reg.create_metric(reg.create_family(OWNER, "busy", "d", "COUNTER"), {})

    def work():
        for _ in range(2000):
            reg.increment(mid, 1)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert reg.value(mid) == 16000


# ---------------------------------------------------------------- exposition
def _qa_scenario(reg: CustomMetrics) -> None:
    """What Triton's custom_metrics QA model does, in the order it does it."""
    c = reg.create_metric(
        reg.create_family(OWNER, "test_counter_e2e", "test metric counter kind end to end", "COUNTER"),
        {"example2": "counter_label2", "example1": "counter_label1"},
    )
    reg.increment(c, 2023.0)
    h = reg.create_metric(
        reg.create_family(OWNER, "test_histogram_e2e", "test metric histogram kind end to end", "HISTOGRAM"),
        {"example1": "histogram_label1", "example2": "histogram_label2"},
        [0.1, 1.0, 2.5, 5.0, 10.0],
    )
    for datum in (0.05, 1.5, 6.0):
        reg.observe(h, datum)
    g = reg.create_metric(
        reg.create_family(OWNER, "test_gauge_e2e", "test metric gauge kind end to end", "GAUGE"),
        {"example1": "gauge_label1", "example2": "gauge_label2"},
    )
    reg.increment(g, 2023.0)
    reg.increment(g, -23.5)
    reg.set(g, 999.9)


EXPECTED = """\
# HELP test_counter_e2e test metric counter kind end to end
# TYPE test_counter_e2e counter
test_counter_e2e{example1="counter_label1",example2="counter_label2"} 2023
# HELP test_gauge_e2e test metric gauge kind end to end
# TYPE test_gauge_e2e gauge
test_gauge_e2e{example1="gauge_label1",example2="gauge_label2"} 999.9
# HELP test_histogram_e2e test metric histogram kind end to end
# TYPE test_histogram_e2e histogram
test_histogram_e2e_count{example1="histogram_label1",example2="histogram_label2"} 3
test_histogram_e2e_sum{example1="histogram_label1",example2="histogram_label2"} 7.55
test_histogram_e2e_bucket{example1="histogram_label1",example2="histogram_label2",le="0.1"} 1
test_histogram_e2e_bucket{example1="histogram_label1",example2="histogram_label2",le="1"} 1
test_histogram_e2e_bucket{example1="histogram_label1",example2="histogram_label2",le="2.5"} 2
test_histogram_e2e_bucket{example1="histogram_label1",example2="histogram_label2",le="5"} 2
test_histogram_e2e_bucket{example1="histogram_label1",example2="histogram_label2",le="10"} 3
test_histogram_e2e_bucket{example1="histogram_label1",example2="histogram_label2",le="+Inf"} 3
"""


def test_exposition_exact_text(reg):
    """Counters, then gauges, then histograms (prometheus-cpp's registry order); histogram
    lines _count, _sum, then the buckets; labels sorted; numbers as prometheus-cpp prints them."""
    _qa_scenario(reg)
    assert reg.exposition() == EXPECTED


def test_exposition_satisfies_the_triton_qa_patterns(reg):
    _qa_scenario(reg)
    text = reg.exposition()
    name, labels = "test_histogram_e2e", 'example1="histogram_label1",example2="histogram_label2"'
    assert f"{name}_count{{{labels}}} 3" in text
    assert f"{name}_sum{{{labels}}} {sum([0.05, 1.5, 6.0])}" in text
    for le, n in (("0.1", 1), ("1", 1), ("2.5", 2), ("5", 2), ("10", 3), ("+Inf", 3)):
        assert f'{name}_bucket{{{labels},le="{le}"}} {n}' in text
    assert text.count(f"{name}_bucket{{{labels}") == 6
    assert 'test_counter_e2e{example1="counter_label1",example2="counter_label2"}' in text
    assert 'test_gauge_e2e{example1="gauge_label1",example2="gauge_label2"}' in text


def test_exposition_parses(reg):
    _qa_scenario(reg)
    families = _parse(reg.exposition())
    assert families["test_counter_e2e"].type == "counter"
    assert families["test_counter_e2e"].documentation == "test metric counter kind end to end"
    (sample,) = families["test_counter_e2e"].samples
    assert sample.labels == {"example1": "counter_label1", "example2": "counter_label2"}
    assert sample.value == 2023.0
    assert families["test_gauge_e2e"].samples[0].value == 999.9
    hist = families["test_histogram_e2e"]
    assert hist.type == "histogram"
    by_name = {}
    for s in hist.samples:
        by_name.setdefault(s.name, []).append(s)
    assert by_name["test_histogram_e2e_count"][0].value == 3
    assert by_name["test_histogram_e2e_sum"][0].value == pytest.approx(7.55)
    assert [(s.labels["le"], s.value) for s in by_name["test_histogram_e2e_bucket"]] == [
        ("0.1", 1), ("1", 1), ("2.5", 2), ("5", 2), ("10", 3), ("+Inf", 3),
    ]


def test_numbers_and_escaping(reg):
    fid = reg.create_family(OWNER, "odd", 'quotes " and \\ stay; a line\nbreak does not', "GAUGE")
    values = {
        "third": 0.1 + 0.2,  # %.16g: 0.3, not Python's 0.30000000000000004
        "big": 1e16,
        "tiny": 1.5e-7,
        "neg": -2.0,
        "nan": math.nan,
        "inf": math.inf,
        "ninf": -math.inf,
        "esc": 1.0,
    }
    for key, value in values.items():
        labels = {"k": key} if key != "esc" else {"k": 'a"b\\c\nd'}
        reg.set(reg.create_metric(fid, labels), value)
    text = reg.exposition()
    assert text == textwrap.dedent(
        """\
        # HELP odd quotes " and \\ stay; a line\\nbreak does not
        # TYPE odd gauge
        odd{k="third"} 0.3
        odd{k="big"} 1e+16
        odd{k="tiny"} 1.5e-07
        odd{k="neg"} -2
        odd{k="nan"} Nan
        odd{k="inf"} +Inf
        odd{k="ninf"} -Inf
        odd{k="a\\"b\\\\c\\nd"} 1
        """
    )
    parsed = {s.labels["k"]: s.value for s in _parse(text)["odd"].samples}
    assert parsed['a"b\\c\nd'] == 1.0
    assert math.isnan(parsed["nan"]) and parsed["inf"] == math.inf and parsed["third"] == 0.3


def test_no_help_line_for_an_empty_description(reg):
    reg.create_metric(reg.create_family(OWNER, "quiet", "", "COUNTER"), {})
    assert reg.exposition() == "# TYPE quiet counter\nquiet 0\n"


# ------------------------------------------------------------ server wiring
class _Instance(ModelInstance):
    def __init__(self, ctx: ModelContext) -> None:
        registry = ctx.server.custom_metrics  # type: ignore[union-attr]
        self.family = registry.create_family(ctx.metrics_owner, "loads_seen", "Loads", "COUNTER")
        self.metric = registry.create_metric(self.family, {"model": ctx.name})
        registry.increment(self.metric, 1)

    async def execute(self, requests, senders):  # pragma: no cover - never called
        raise NotImplementedError


class _Backend(Backend):
    name = "fake"

    async def create_instance(self, ctx, spec):
        return _Instance(ctx)


CONFIG = """
name: "counting"
backend: "fake"
max_batch_size: 0
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 1 ] } ]
instance_group [ { count: 2 kind: KIND_CPU } ]
"""


RELOAD = json.dumps(
    {
        "backend": "fake",
        "max_batch_size": 0,
        "input": [{"name": "IN", "data_type": "TYPE_FP32", "dims": [1]}],
        "output": [{"name": "OUT", "data_type": "TYPE_FP32", "dims": [1]}],
        "instance_group": [{"count": 1, "kind": "KIND_CPU"}],
        # more than the instance count changes: a new copy replaces the model (not an update in place)
        "parameters": {"copy": {"string_value": "reloaded"}},
    }
)


def _server(tmp_path: Path) -> InferenceServer:
    (tmp_path / "counting" / "1").mkdir(parents=True)
    (tmp_path / "counting" / "config.pbtxt").write_text(CONFIG)
    options = ServerOptions(
        model_repositories=[tmp_path], repository=RepositoryOptions(control_mode=ControlMode.EXPLICIT)
    )
    backend = _Backend()
    return InferenceServer(options, lambda name: backend if name == "fake" else None)


async def _scrape(app) -> str:
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    await app({"type": "http", "method": "GET", "path": "/metrics", "headers": [], "query_string": b""}, receive, send)
    return b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body").decode()


def test_server_owns_a_registry_and_unload_releases_a_version(tmp_path):
    server = _server(tmp_path)
    assert isinstance(server.custom_metrics, CustomMetrics)
    app = metrics_app(server, cpu=False)

    async def scenario() -> list[str]:
        await server.start()
        texts = []
        await server.load_model("counting")
        texts.append(await _scrape(app))
        old = server.model("counting")
        await server.load_model("counting", RELOAD)  # a new copy with one instance replaces it
        assert server.model("counting").ctx.metrics_owner != old.ctx.metrics_owner
        for _ in range(200):  # the replaced copy is retired in the background
            if not old.instances:
                break
            await asyncio.sleep(0.01)
        texts.append(await _scrape(app))
        await server.unload_model("counting")
        texts.append(await _scrape(app))
        await server.load_model("counting")
        texts.append(await _scrape(app))
        await server.stop()
        texts.append(server.custom_metrics.exposition())
        return texts

    loaded, reloaded, unloaded, again, stopped = asyncio.run(scenario())
    # two instances of one version share the series; nv_* families come first
    assert loaded.index("nv_inference_count") < loaded.index("# HELP loads_seen Loads")
    assert 'loads_seen{model="counting"} 2\n' in loaded
    assert _parse(loaded)["loads_seen"].samples[0].value == 2
    # releasing the replaced copy left the new copy's reference on the shared series
    assert 'loads_seen{model="counting"} 3\n' in reloaded
    assert "loads_seen" not in unloaded
    assert 'loads_seen{model="counting"} 2\n' in again  # loaded again after an unload: from zero
    assert stopped == ""


def test_metrics_endpoint_reserves_its_own_family_names(tmp_path):
    server = _server(tmp_path)
    metrics_app(server, cpu=False)
    _raises(InvalidArgumentError, cm.KIND_CONFLICT,
            server.custom_metrics.create_family, OWNER, "nv_inference_request_success", "d", "GAUGE")

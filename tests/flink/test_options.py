"""Option names, types, defaults and validation of `'provider'='triton'` models."""

from __future__ import annotations

import pytest

from openinfer.integrations.flink import TritonConfigError, TritonOptions, parse_options
from openinfer.integrations.flink.options import (
    EXTENSIONS,
    PROVIDER_OPTIONS,
    SUPPORTED_KEYS,
    parse_duration,
    parse_map,
)

BASE = {"provider": "triton", "endpoint": "http://triton:8000", "model-name": "m"}


def parse(**extra: str) -> TritonOptions:
    return parse_options({**BASE, **{k.replace("_", "-"): v for k, v in extra.items()}})


def test_defaults_are_the_providers() -> None:
    o = parse()
    assert (o.endpoint, o.model_name, o.model_version) == ("http://triton:8000", "m", "latest")
    assert o.timeout == 30.0 and o.flatten_batch_dim is False and o.priority is None
    assert o.sequence_id is None and not o.sequence_start and not o.sequence_end
    assert not o.sequence_id_auto_increment
    assert o.compression is None and o.auth_token is None and o.custom_headers == ()
    assert (o.max_retries, o.retry_initial_backoff, o.retry_max_backoff) == (0, 0.1, 30.0)
    assert o.default_value is None
    assert (o.health_check_enabled, o.health_check_interval) == (False, 30.0)
    assert o.circuit_breaker_enabled is False
    assert o.circuit_breaker_failure_threshold == 0.5
    assert o.circuit_breaker_timeout == 60.0 and o.circuit_breaker_half_open_requests == 3
    assert (o.mode, o.batch_size, o.tensor_name_case) == ("async", None, "preserve")


def test_every_seed_option() -> None:
    o = parse(
        model_version="1", timeout="10s", flatten_batch_dim="TRUE", priority="255",
        compression="gzip", auth_token="tok", custom_headers="X-Trace-Id:abc,Authorization:token",
        sequence_id="s-1", sequence_start="true", sequence_end="false",
    )  # fmt: skip
    assert o.model_version == "1" and o.timeout == 10.0 and o.flatten_batch_dim
    assert o.priority == 255 and o.compression == "gzip" and o.auth_token == "tok"
    assert o.custom_headers == (("X-Trace-Id", "abc"), ("Authorization", "token"))
    assert o.sequence_id == "s-1" and o.sequence_start and not o.sequence_end


def test_provider_retry_health_and_breaker_options() -> None:
    o = parse(
        max_retries="3", retry_initial_backoff="50ms", retry_max_backoff="2 s",
        default_value="-1", health_check_enabled="true", health_check_interval="PT5S",
        circuit_breaker_enabled="true", circuit_breaker_failure_threshold="0.25",
        circuit_breaker_timeout="1 min", circuit_breaker_half_open_requests="2",
        sequence_id="s", sequence_id_auto_increment="true",
    )  # fmt: skip
    assert (o.max_retries, o.retry_initial_backoff, o.retry_max_backoff) == (3, 0.05, 2.0)
    assert o.default_value == "-1" and o.health_check_interval == 5.0
    assert o.circuit_breaker_failure_threshold == 0.25 and o.circuit_breaker_timeout == 60.0
    assert o.circuit_breaker_half_open_requests == 2 and o.sequence_id_auto_increment


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("10s", 10), ("30000ms", 30), ("30000", 30), ("1 min", 60), ("2h", 7200), ("1d", 86400),
     ("500 milliseconds", 0.5), ("PT1M30S", 90), ("pt0.5s", 0.5), (" 3 SECONDS ", 3)],
)  # fmt: skip
def test_durations_parse_like_flink(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "ten seconds", "10 parsecs", "-5s", "1.5s", "P", "s"])
def test_bad_durations(text: str) -> None:
    assert parse_duration(text) is None


def test_map_syntax_with_quotes() -> None:
    assert parse_map("A:1,B:2") == [("A", "1"), ("B", "2")]
    assert parse_map("'X-Url':'http://a:1/b',Y:'c,d'") == [("X-Url", "http://a:1/b"), ("Y", "c,d")]
    assert parse_map("Q:'it''s'") == [("Q", "it's")]
    assert parse_map("Authorization:Basic a:b") == [("Authorization", "Basic a:b")]
    assert parse_map(" A : 1 , ") == [("A", "1")]
    for bad in ("NoColon", "A:1,B", "'unterminated:x"):
        with pytest.raises(ValueError):
            parse_map(bad)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("priority", "256", "between 0 and 255"),
        ("priority", "-1", "between 0 and 255"),
        ("priority", "high", "an integer"),
        ("compression", "zstd", "'gzip'"),
        ("timeout", "soon", "a duration"),
        ("timeout", "0s", "a positive duration"),
        ("flatten-batch-dim", "yes", "'true' or 'false'"),
        ("model-version", "v2", "'latest' or a version number"),
        ("model-version", "0", "'latest' or a version number"),
        ("max-retries", "-1", ">= 0"),
        ("custom-headers", "NoColon", "Key:Value"),
        ("custom-headers", "Bad Name:x", "valid HTTP header names"),
        ("endpoint", "triton:8000", "http:// or https://"),
        ("endpoint", "http://h:port", "numeric port"),
        ("mode", "batch", "'async', 'pandas', 'row'"),
        ("batch-size", "0", ">= 1"),
        ("circuit-breaker-failure-threshold", "half", "a number"),
    ],
)
def test_invalid_values_name_model_option_and_expectation(
    key: str, value: str, message: str
) -> None:
    with pytest.raises(TritonConfigError) as info:
        parse_options({**BASE, key: value}, model="clf")
    text = str(info.value)
    assert "'clf'" in text and f"'{key}'" in text and message in text


def test_unknown_keys_are_rejected_with_the_supported_list() -> None:
    with pytest.raises(TritonConfigError) as info:
        parse_options({**BASE, "binary-data": "true", "modelname": "x"}, model="clf")
    text = str(info.value)
    assert "unsupported options" in text and "binary-data, modelname" in text
    assert "model-name" in text.split("Supported options:")[1]


def test_required_options() -> None:
    with pytest.raises(TritonConfigError, match="missing required option.*endpoint.*model-name"):
        parse_options({"provider": "triton"}, model="clf")


def test_other_providers_are_refused() -> None:
    with pytest.raises(TritonConfigError, match="'provider' is 'openai'"):
        parse_options({**BASE, "provider": "openai"})


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"sequence-id-auto-increment": "true"}, "requires 'sequence-id'"),
        ({"max-retries": "2", "retry-initial-backoff": "0ms"}, "positive duration"),
        ({"max-retries": "2", "retry-initial-backoff": "2s", "retry-max-backoff": "1s"}, ">="),
        ({"circuit-breaker-enabled": "true", "circuit-breaker-failure-threshold": "1.5"}, "(0.0"),
        (
            {"circuit-breaker-enabled": "true", "circuit-breaker-half-open-requests": "0"},
            "positive",
        ),
        ({"health-check-enabled": "true", "health-check-interval": "0s"}, "positive"),
    ],
)
def test_cross_option_rules(extra: dict[str, str], message: str) -> None:
    with pytest.raises(TritonConfigError, match=message.replace("(", r"\(")):
        parse_options({**BASE, **extra})


def test_backoffs_are_not_checked_without_retries() -> None:
    """As in the provider: with max-retries=0 the (unused) backoff values are not validated."""
    assert parse(retry_initial_backoff="0ms").retry_initial_backoff == 0.0


def test_latest_is_normalised_and_versions_are_canonical() -> None:
    assert parse(model_version="LATEST").model_version == "latest"
    assert parse(model_version="007").model_version == "7"


def test_supported_keys_cover_the_provider_and_the_extensions() -> None:
    assert {"endpoint", "model-name", "default-value", "circuit-breaker-timeout"} <= SUPPORTED_KEYS
    assert {"mode", "batch-size", "tensor-name-case"} <= SUPPORTED_KEYS


def test_provider_options_are_the_java_providers() -> None:
    """The optional keys of flink-model-triton 2.3's options class, no more, no fewer; every
    other key is an extension of this package."""
    assert set(PROVIDER_OPTIONS) == {
        "model-version", "timeout", "flatten-batch-dim", "priority", "sequence-id",
        "sequence-start", "sequence-end", "compression", "auth-token", "custom-headers",
    }  # fmt: skip
    assert not set(PROVIDER_OPTIONS) & set(EXTENSIONS)
    assert SUPPORTED_KEYS == {"provider", "endpoint", "model-name", *PROVIDER_OPTIONS, *EXTENSIONS}

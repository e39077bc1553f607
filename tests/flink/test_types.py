"""The seed's type table, shapes, coercions and default values."""

from __future__ import annotations

import pytest

from openinfer.integrations.flink import TritonConfigError
from openinfer.integrations.flink.types import (
    decode_value,
    empty_result,
    encode_value,
    parse_default,
    parse_flink_type,
    row_shape,
    shortest_float32,
)


@pytest.mark.parametrize(
    ("text", "datatype", "is_array"),
    [
        ("BOOLEAN", "BOOL", False),
        ("TINYINT", "INT8", False),
        ("SMALLINT", "INT16", False),
        ("INT", "INT32", False),
        ("INT NOT NULL", "INT32", False),
        ("BIGINT", "INT64", False),
        ("FLOAT", "FP32", False),
        ("DOUBLE", "FP64", False),
        ("STRING", "BYTES", False),
        ("VARCHAR(2147483647)", "BYTES", False),
        ("VARCHAR(10) NOT NULL", "BYTES", False),
        ("ARRAY<FLOAT>", "FP32", True),
        ("ARRAY<BIGINT NOT NULL> NOT NULL", "INT64", True),
        ("ARRAY<VARCHAR(2147483647)>", "BYTES", True),
    ],
)
def test_seed_type_table(text: str, datatype: str, is_array: bool) -> None:
    ftype = parse_flink_type(text)
    assert (ftype.datatype, ftype.is_array) == (datatype, is_array)


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        ("DECIMAL(10, 2)", "DOUBLE"),
        ("TIMESTAMP(3)", "BIGINT"),
        ("DATE", "BIGINT"),
        ("ROW<`a` INT>", "flatten the ROW"),
        ("MAP<STRING, INT>", "ARRAY<T> instead of MAP"),
        ("BYTES", "STRING"),
        ("CHAR(3)", "STRING"),
        ("ARRAY<DECIMAL(5, 1)>", "DOUBLE"),
    ],
)
def test_other_types_are_rejected_with_a_suggestion(text: str, hint: str) -> None:
    with pytest.raises(TritonConfigError) as info:
        parse_flink_type(text, column="c", role="input")
    assert "input column 'c' has unsupported type" in str(info.value) and hint in str(info.value)


def test_nested_arrays_are_rejected() -> None:
    with pytest.raises(TritonConfigError, match="nested array"):
        parse_flink_type("ARRAY<ARRAY<FLOAT>>", column="x")


def test_shapes_follow_the_provider() -> None:
    scalar, array = parse_flink_type("INT"), parse_flink_type("ARRAY<INT>")
    assert row_shape(5, scalar, False) == [1] and row_shape(5, scalar, True) == [1]
    assert row_shape([1, 2, 3], array, False) == [1, 3]
    assert row_shape([1, 2, 3], array, True) == [3]
    assert row_shape(None, array, False) == [1, 0] and row_shape(None, array, True) == [0]


def test_nulls_are_sent_as_the_provider_sends_them() -> None:
    assert encode_value(None, parse_flink_type("INT")) == [None]
    assert encode_value(None, parse_flink_type("ARRAY<INT>")) == [None]
    assert encode_value([1, None], parse_flink_type("ARRAY<INT>")) == [1, None]


def test_float32_values_are_sent_in_their_short_form() -> None:
    widened = 0.10000000149011612  # how PyFlink hands a FLOAT 0.1 to Python
    assert encode_value(widened, parse_flink_type("FLOAT")) == [0.1]
    assert shortest_float32(3.4028234663852886e38) == 3.4028235e38
    assert encode_value(widened, parse_flink_type("DOUBLE")) == [widened]


def test_strings_and_bytes() -> None:
    assert encode_value("wörld", parse_flink_type("STRING")) == ["wörld"]
    assert encode_value(b"abc", parse_flink_type("STRING")) == ["abc"]


def test_response_values_are_coerced_like_jackson() -> None:
    assert decode_value([300], parse_flink_type("TINYINT")) == 44  # (byte) 300
    assert decode_value([2.9], parse_flink_type("INT")) == 2
    assert decode_value(["17"], parse_flink_type("BIGINT")) == 17
    assert decode_value([1], parse_flink_type("BOOLEAN")) is True
    assert decode_value(["TRUE"], parse_flink_type("BOOLEAN")) is True
    assert decode_value([1.100000023841858], parse_flink_type("FLOAT")) == pytest.approx(1.1)
    assert decode_value([1.0], parse_flink_type("STRING")) == "1.0"
    assert decode_value([True], parse_flink_type("STRING")) == "true"
    assert decode_value([1, 2, 3], parse_flink_type("INT")) == 1  # a scalar takes data[0]
    assert decode_value([1, None, 3], parse_flink_type("ARRAY<DOUBLE>")) == [1.0, None, 3.0]


def test_empty_results() -> None:
    assert empty_result(parse_flink_type("STRING")) == ""
    assert empty_result(parse_flink_type("INT")) is None
    assert empty_result(parse_flink_type("ARRAY<STRING>")) is None


@pytest.mark.parametrize(
    ("text", "ftype", "value"),
    [
        ("null", "INT", None),
        ("null", "STRING", None),
        ("FAILED", "STRING", "FAILED"),
        ("NULL", "STRING", "NULL"),
        ("-1", "INT", -1),
        ("-1", "DOUBLE", -1.0),
        ("true", "BOOLEAN", True),
        ("[0.0, 0.5]", "ARRAY<FLOAT>", [0.0, 0.5]),
        ('["a", "b"]', "ARRAY<STRING>", ["a", "b"]),
    ],
)
def test_default_values(text: str, ftype: str, value: object) -> None:
    assert parse_default(text, parse_flink_type(ftype)) == value


@pytest.mark.parametrize(("text", "ftype"), [("abc", "INT"), ("1", "ARRAY<INT>"), ("[1]", "INT")])
def test_bad_default_values_fail_at_registration(text: str, ftype: str) -> None:
    with pytest.raises(TritonConfigError, match="cannot parse default-value"):
        parse_default(text, parse_flink_type(ftype), model="m")

"""The acceptance cases for Flink's Java `triton` provider: DDL options, input rows, expectations.

Every case is one `CREATE MODEL m ... WITH ('provider'='triton', ...)` (or several, for
sequences and restricted servers) and one `ML_PREDICT` query per step. The models use
upper-case tensor names, as a server meant for this provider must (it upper-cases column
names), except `tensor_names_lowercase`, which shows what happens otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: (Flink type, Triton config type, scalar SQL, scalar value, array SQL, array value)
TYPES: dict[str, tuple[str, str, str, Any, str, list[Any]]] = {
    "bool": ("BOOLEAN", "TYPE_BOOL", "TRUE", True, "ARRAY[TRUE, FALSE, TRUE]", [True, False, True]),
    "int8": ("TINYINT", "TYPE_INT8", "CAST(-7 AS TINYINT)", -7, "ARRAY[1, -2, 127]", [1, -2, 127]),
    "int16": (
        "SMALLINT", "TYPE_INT16", "CAST(-300 AS SMALLINT)", -300, "ARRAY[1, -2, 32767]",
        [1, -2, 32767],
    ),
    "int32": ("INT", "TYPE_INT32", "42", 42, "ARRAY[1, 2, 3]", [1, 2, 3]),
    "int64": (
        "BIGINT", "TYPE_INT64", "9007199254740993", 9007199254740993,
        "ARRAY[1, -2, 9007199254740993]", [1, -2, 9007199254740993],
    ),
    "fp32": ("FLOAT", "TYPE_FP32", "0.5", 0.5, "ARRAY[0.5, -1.25, 3.0]", [0.5, -1.25, 3.0]),
    "fp64": ("DOUBLE", "TYPE_FP64", "2.25", 2.25, "ARRAY[0.1, 2.5, -3.75]", [0.1, 2.5, -3.75]),
    "bytes": (
        "STRING", "TYPE_STRING", "'hello wörld'", "hello wörld", "ARRAY['a', 'bc', 'déf']",
        ["a", "bc", "déf"],
    ),
}  # fmt: skip

RESTRICTED_TOKEN = "--http-restricted-api=inference:Authorization=Bearer s3cret"
RESTRICTED_HEADER = "--http-restricted-api=inference:X-Api-Key=k1"


@dataclass
class Step:
    """One DDL and query. `expect` is the output value, or `error` a text the failure holds."""

    label: str
    options: dict[str, str] = field(default_factory=dict)
    source: str = "42"
    expect: Any = None
    error: str | None = None
    #: for the golden file: what the server's error message must say.
    error_contains: tuple[str, ...] = ()
    many_rows: bool = False


@dataclass
class Case:
    name: str
    description: str
    model: str
    input_type: str = "INT"
    output_type: str = "INT"
    steps: list[Step] = field(default_factory=list)
    server_args: tuple[str, ...] = ()
    column: str = "input"
    output_column: str = "output"
    config: str = ""
    #: Triton has no `/versions/latest` URL, the provider's default: every case but the
    #: version cases names version 1, so the other differences show.
    pin_version: bool = True


def model_config(
    name: str, dtype: str, dims: str, max_batch: int, extra: str = "", lower: bool = False
) -> str:
    i, o = ("input", "output") if lower else ("INPUT", "OUTPUT")
    return (
        f'name: "{name}"\nbackend: "python"\nmax_batch_size: {max_batch}\n{extra}'
        f'input [ {{ name: "{i}" data_type: {dtype} dims: {dims} }} ]\n'
        f'output [\n  {{ name: "{o}" data_type: {dtype} dims: {dims} }},\n'
        f'  {{ name: "EXTRA" data_type: {dtype} dims: {dims} }}\n]\n'
    )


MODELS: dict[str, dict[str, Any]] = {}
for _t, (_, _dtype, *_rest) in TYPES.items():
    MODELS[f"flink_{_t}"] = {"config": model_config(f"flink_{_t}", _dtype, "[1]", 0)}
    MODELS[f"flink_{_t}_batched"] = {
        "config": model_config(f"flink_{_t}_batched", _dtype, "[-1]", 8, "dynamic_batching { }\n")
    }
    MODELS[f"flink_{_t}_flat"] = {"config": model_config(f"flink_{_t}_flat", _dtype, "[-1]", 0)}
for _m in MODELS.values():
    _m["model_py"] = "echo"
MODELS.update({
    "flink_lower": {
        "config": model_config("flink_lower", "TYPE_INT32", "[1]", 0, lower=True),
        "model_py": "echo",
    },
    "flink_exact": {
        "config": 'name: "flink_exact"\nbackend: "python"\nmax_batch_size: 0\n'
        'input [ { name: "INPUT__0" data_type: TYPE_INT32 dims: [1] } ]\n'
        'output [ { name: "OUTPUT__0" data_type: TYPE_INT32 dims: [1] }, '
        '{ name: "output__0" data_type: TYPE_INT32 dims: [1] } ]\n',
        "model_py": "exact",
    },
    "flink_versions": {
        "config": 'name: "flink_versions"\nbackend: "python"\nmax_batch_size: 0\n'
        "version_policy: { all { } }\n"
        'input [ { name: "INPUT" data_type: TYPE_INT32 dims: [1] } ]\n'
        'output [ { name: "OUTPUT" data_type: TYPE_INT32 dims: [1] } ]\n',
        "model_py": "versioned",
        "versions": [1, 2],
    },
    "flink_sequence": {
        "config": 'name: "flink_sequence"\nbackend: "python"\nmax_batch_size: 2\n'
        "sequence_batching { max_sequence_idle_microseconds: 60000000 }\n"
        'input [ { name: "INPUT" data_type: TYPE_INT32 dims: [-1] } ]\n'
        'output [ { name: "OUTPUT" data_type: TYPE_INT32 dims: [-1] } ]\n',
        "model_py": "sequence",
    },
    "flink_sleepy": {
        "config": model_config("flink_sleepy", "TYPE_FP64", "[1]", 0),
        "model_py": "sleepy",
    },
    "flink_broken": {
        "config": model_config("flink_broken", "TYPE_INT32", "[1]", 0),
        "model_py": "broken",
    },
})


def _cases() -> list[Case]:
    cases: list[Case] = []
    for t, (flink, _, scalar_sql, scalar, array_sql, array) in TYPES.items():
        array_source = f"CAST({array_sql} AS ARRAY<{flink}>)"
        for flat in (False, True):
            suffix, options = ("_flat", {"flatten-batch-dim": "true"}) if flat else ("", {})
            cases.append(Case(
                f"{t}_scalar{suffix}",
                f"{flink} column -> {t.upper()} shape [1]"
                + (" (flatten-batch-dim leaves scalars alone)" if flat else ""),
                f"flink_{t}", flink, flink,
                [Step("1", options, f"CAST({scalar_sql} AS {flink})", scalar)],
            ))  # fmt: skip
            cases.append(Case(
                f"{t}_array{suffix}",
                f"ARRAY<{flink}> column -> {t.upper()} shape " + ("[3]" if flat else "[1, 3]"),
                f"flink_{t}_flat" if flat else f"flink_{t}_batched",
                f"ARRAY<{flink}>", f"ARRAY<{flink}>",
                [Step("1", options, array_source, array)],
            ))  # fmt: skip
    arr = "ARRAY<INT>"
    cases += [
        Case("null_array", "a NULL ARRAY<INT> is sent as shape [1, 0], data [null]: an empty "
             "tensor, so the row's output is NULL", "flink_int32_batched", arr, arr,
             [Step("1", {}, f"CAST(NULL AS {arr})", None)]),
        Case("many_rows", "five rows, one request each, answers in row order", "flink_int32",
             steps=[Step("1", {}, "", [1, 2, 3, 4, 5], many_rows=True)]),
        Case("error_null_scalar", "a NULL INT is sent as data [null]: a client error",
             "flink_int32", steps=[Step("1", {}, "CAST(NULL AS INT)", error="HTTP 400")]),
        Case("error_wrong_type", "a DOUBLE column sent to an INT32 model: 400",
             "flink_int32", "DOUBLE", "DOUBLE",
             [Step("1", {}, "CAST(2.5 AS DOUBLE)", error="HTTP 400",
                   error_contains=("INT32",))]),
        Case("error_shape_needs_flatten", "[1, N] sent to a model that expects [N]: 400 about the "
             "shape", "flink_int32_flat", arr, arr,
             [Step("1", {}, "CAST(ARRAY[1, 2, 3] AS ARRAY<INT>)", error="HTTP 400",
                   error_contains=("shape",))]),
        Case("error_shape_scalar_to_array_model", "a scalar [1] sent to a batching model whose "
             "input is [-1]: 400 about the shape", "flink_int32_batched",
             steps=[Step("1", {}, "42", error="HTTP 400", error_contains=("shape",))]),
        Case("error_unknown_model", "an unknown model-name: 4xx naming the model",
             "flink_missing", steps=[Step("1", {}, "42", error="HTTP 4",
                                          error_contains=("flink_missing",))]),
        Case("error_unknown_version", "an unknown model-version: 4xx", "flink_int32",
             steps=[Step("1", {"model-version": "7"}, "42", error="HTTP 4",
                         error_contains=("flink_int32",))]),
        Case("error_model_failure", "the model fails: 5xx, a TritonServerException",
             "flink_broken", steps=[Step("1", {}, "42", error="HTTP 5")]),
        Case("error_timeout", "'timeout'='1s' against a model that takes 3 s: a network error",
             "flink_sleepy", "DOUBLE", "DOUBLE",
             [Step("1", {"timeout": "1s"}, "CAST(3.0 AS DOUBLE)", error="Failed to connect")]),
        Case("error_compression_unsupported", "'compression'='deflate' fails the row before any "
             "request", "flink_int32",
             steps=[Step("1", {"compression": "deflate"}, "42", error="Unsupported compression")]),
    ]
    for key, value in (
        ("max-retries", "2"), ("default-value", "-1"), ("health-check-enabled", "true"),
        ("sequence-id-auto-increment", "true"),
    ):  # fmt: skip
        cases.append(Case(
            f"option_absent_{key.replace('-', '_')}",
            f"'{key}' is not an option of this provider version: refused at planning",
            "flink_int32", steps=[Step("1", {key: value}, "42", error="Unsupported options")],
        ))  # fmt: skip
    cases += [
        Case("option_timeout", "'timeout'='5s' with a fast model", "flink_int32",
             steps=[Step("1", {"timeout": "5s"}, "42", 42)]),
        Case("option_priority", "'priority'='200' goes to parameters.priority", "flink_int32",
             steps=[Step("1", {"priority": "200"}, "42", 42)]),
        Case("option_compression_gzip", "'compression'='gzip': gzip body, Content-Encoding: gzip",
             "flink_int32", steps=[Step("1", {"compression": "gzip"}, "42", 42)]),
        Case("option_auth_token", "'auth-token' adds Authorization: Bearer <token>",
             "flink_int32", steps=[Step("1", {"auth-token": "s3cret"}, "42", 42)]),
        Case("option_custom_headers", "'custom-headers'='X-Trace-Id:abc,X-Tenant:blue'",
             "flink_int32",
             steps=[Step("1", {"custom-headers": "X-Trace-Id:abc,X-Tenant:blue"}, "42", 42)]),
        Case("option_all_headers", "gzip, token and custom headers together", "flink_int32",
             steps=[Step("1", {"compression": "gzip", "auth-token": "s3cret",
                               "custom-headers": "X-Trace-Id:abc"}, "42", 42)]),
        Case("endpoint_v2", "'endpoint' ending in /v2", "flink_int32",
             steps=[Step("1", {"endpoint": "{base}/v2"}, "42", 42)]),
        Case("endpoint_v2_models", "'endpoint' ending in /v2/models", "flink_int32",
             steps=[Step("1", {"endpoint": "{base}/v2/models"}, "42", 42)]),
        Case("endpoint_trailing_slash", "'endpoint' with trailing slashes", "flink_int32",
             steps=[Step("1", {"endpoint": "{base}//"}, "42", 42)]),
        Case("version_default_latest", "no 'model-version': the provider sends "
             "/versions/latest; the newest ready version (2) answers", "flink_versions",
             pin_version=False, steps=[Step("1", {}, "42", 2042)]),
        Case("version_latest_explicit", "'model-version'='latest'", "flink_versions",
             pin_version=False, steps=[Step("1", {"model-version": "latest"}, "42", 2042)]),
        Case("version_explicit_1", "'model-version'='1'", "flink_versions",
             pin_version=False, steps=[Step("1", {"model-version": "1"}, "42", 1042)]),
        Case("version_explicit_2", "'model-version'='2'", "flink_versions",
             pin_version=False, steps=[Step("1", {"model-version": "2"}, "42", 2042)]),
        Case("tensor_names_exact", "INPUT__0 / OUTPUT__0 match exactly; output__0 is another "
             "output", "flink_exact", column="input__0", output_column="output__0",
             steps=[Step("1", {}, "42", 42)]),
        Case("tensor_names_lowercase", "a model whose tensors are named input/output: the "
             "provider sends INPUT/OUTPUT", "flink_lower", steps=[Step("1", {}, "42", 42)]),
        Case("restricted_auth_token", f"a server started with {RESTRICTED_TOKEN}: the token "
             "passes, a request without it is refused", "flink_int32",
             steps=[Step("with_token", {"auth-token": "s3cret"}, "42", 42),
                    Step("without_token", {}, "42", error="HTTP 4")],
             server_args=(RESTRICTED_TOKEN,)),
        Case("restricted_custom_header", f"a server started with {RESTRICTED_HEADER}: the "
             "header passes, a request without it is refused", "flink_int32",
             steps=[Step("with_header", {"custom-headers": "X-Api-Key:k1"}, "42", 42),
                    Step("without_header", {}, "42", error="HTTP 4")],
             server_args=(RESTRICTED_HEADER,)),
    ]
    seq = [
        ("a_start", "1001", "start", 5, 5), ("b_start", "1002", "start", 100, 100),
        ("a_continue", "1001", "", 7, 12), ("b_continue", "1002", "", 1, 101),
        ("a_end", "1001", "end", 1, 13), ("b_end", "1002", "end", 2, 103),
    ]  # fmt: skip
    steps = []
    for label, sid, flag, value, total in seq:
        options = {"sequence-id": sid}
        if flag:
            options[f"sequence-{flag}"] = "true"
        steps.append(Step(label, options, f"CAST(ARRAY[{value}] AS ARRAY<INT>)", [total]))
    steps.append(Step("a_after_end", {"sequence-id": "1001"}, "CAST(ARRAY[1] AS ARRAY<INT>)",
                      error="HTTP 4", error_contains=("1001",)))
    cases.append(Case("sequence_interleaved", "two sequences (ids 1001 and 1002) interleaved: "
                      "start, continue, end each, then a request after the end",
                      "flink_sequence", arr, arr, steps))
    return cases


CASES = _cases()


def ddl(case: Case, step: Step, base: str) -> str:
    options = {"provider": "triton", "endpoint": base, "model-name": case.model}
    if case.pin_version:
        options["model-version"] = "1"
    options.update({k: v.replace("{base}", base) for k, v in step.options.items()})
    with_ = ", ".join(f"'{k}' = '{v}'" for k, v in options.items())
    return (
        f"CREATE TEMPORARY MODEL m INPUT (`{case.column}` {case.input_type}) "
        f"OUTPUT (`{case.output_column}` {case.output_type}) WITH ({with_})"
    )


def source(case: Case, step: Step) -> str:
    if step.many_rows:
        return f"SELECT * FROM (VALUES (1), (2), (3), (4), (5)) AS t(`{case.column}`)"
    return f"SELECT {step.source} AS `{case.column}`"


def models_for(case: Case) -> dict[str, dict[str, Any]]:
    return {case.model: MODELS[case.model]} if case.model in MODELS else {}

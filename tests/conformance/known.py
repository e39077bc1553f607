"""Where openinfer answers otherwise than Triton 2.51 on purpose: case id -> the README words
(in "Differences from Triton") that list it, and why. `make conformance` fails on a difference
that is not listed here, and on a listed one that has gone; a unit test checks that every
README phrase is still in README."""

from __future__ import annotations

from typing import NamedTuple


class Listed(NamedTuple):
    readme: str  # words of README's "Differences from Triton" that list this difference
    why: str


FOUR_XX = Listed("Client mistakes answered 4xx where Triton answers 500",
                 "a client's mistake is 4xx, so retrying clients (Flink's provider) stop retrying")
DATA_WORDS = Listed("the messages of JSON data errors name the input",
                    "a client's mistake is 4xx, and the message says which input and why")
NOT_JSON = Listed("those of bodies that are not JSON come from another parser",
                  "a client's mistake is 4xx; the JSON parser is not Triton's, nor are its words")
NAN = Listed("request JSON refuses `NaN`/`Infinity`", "strict JSON; such values travel exactly in binary")
UTF8 = Listed("and invalid UTF-8", "strict JSON; an id that is not text cannot be written back in a JSON answer")
TRACE_LEVEL = Listed("unknown trace levels and trace modes other than `triton` are refused", "a setting that cannot be applied is not answered as applied")
LOG_FORMAT = Listed("Client mistakes answered 4xx where Triton answers 500", "an unknown format is the client's mistake, 400 (Triton's HTTP: 503)")
ENCODING = Listed("415 for an unknown `Content-Encoding`", "the client's encoding, not the server's failure")
RESERVED = Listed("reserved parameters of the wrong type", "one rule for both protocols, in the words of Triton's gRPC frontend")
NOT_FOUND = Listed("404 for a load of an unknown model", "a model the repository lacks is NOT_FOUND, not the server's fault")
ANY_CASE = Listed("an input or output name in the wrong case is taken",
                  "Flink's provider upper-cases names; one match is unambiguous")
EMPTY_VALUES = Listed("values sent for a tensor whose shape holds no element are refused",
                      "values that cannot belong to the tensor are a client's mistake, not data to drop")
COUNT_LISTS = Listed("the input-count message lists the names it got in sorted order",
                     "a fixed order; Triton's order is its hash map's, and its `]` a slip")
VERSION = Listed("`GET /v2` reports version `2.73.0`", "openinfer follows the protocol of Triton 2.73")
NEWER_CONFIG = Listed("model configurations carry that release's fields",
                      "the configuration schema is Triton 2.73's, which has fields 2.51 lacks")
NO_VERSIONS = Listed("a model without a version to load is listed in the repository index",
                     "the index names every model the repository holds, with why it is not served")
METRIC_FAMILIES = Listed("the metrics carry `nv_model_load_duration_secs` of later releases",
                         "a later release's metric; no pinned memory pool to report")
UNREADABLE_CONFIG = Listed("a load whose configuration cannot be read or names another model is refused with 400",
                           "a failed load is 400 whatever failed, and says why")
LATEST = Listed("the version `latest` in HTTP paths and gRPC requests", "Flink's provider puts `latest` in its URLs")
IGNORED_PART = Listed("what Triton takes while ignoring part of it is refused",
                      "a request is served as sent or refused, never in part")
GRPC_DATATYPE = Listed("over gRPC an unknown datatype is refused as",
                       "the datatype is read where the request is decoded, before the model is known")
BLS_UNKNOWN = Listed("a BLS call to a model the repository lacks is refused as an unknown model",
                     "the words Triton's current Python-backend QA suite expects; 2.51 says the model is not ready")
GENERATE_COUNT = Listed("`generate` on a model that sends other than one response is refused with 400",
                        "an error is never answered 200; the client should have used generate_stream")

KNOWN: dict[str, Listed] = {
    "BLS call to an unknown model": BLS_UNKNOWN,
    "generate, decoupled model": GENERATE_COUNT,
    "server metadata": VERSION,
    "model config, ensemble": NEWER_CONFIG,
    "metrics, families and their types": METRIC_FAMILIES,
    "model metadata, version 'latest'": LATEST,
    "infer JSON, version 'latest'": LATEST,
    "gRPC infer, version 'latest'": LATEST,
    "gRPC model metadata, version 'latest'": LATEST,
    "repository unload, unload_dependents not a boolean": IGNORED_PART,
    "infer, header length not a number": IGNORED_PART,
    "gRPC infer, more raw contents than inputs": IGNORED_PART,
    "repository index, ready not a boolean": FOUR_XX,
    "repository load, body not JSON": NOT_JSON,
    "infer JSON, values for an empty shape": EMPTY_VALUES,
    "infer JSON, wrong datatype": DATA_WORDS,
    "infer JSON, too few values": DATA_WORDS,
    "infer JSON, too many values": DATA_WORDS,
    "infer JSON, a string for a number": DATA_WORDS,
    "infer JSON, a number for a string": DATA_WORDS,
    "infer JSON, input name in the wrong case": ANY_CASE,
    "infer JSON, output name in the wrong case": ANY_CASE,
    "gRPC infer, input name in the wrong case": ANY_CASE,
    "gRPC infer, output name in the wrong case": ANY_CASE,
    "infer JSON, extra input": COUNT_LISTS,
    "infer JSON, an input to a model without inputs": COUNT_LISTS,
    "infer, malformed JSON": NOT_JSON,
    "infer, inputs not an array": FOUR_XX,
    "infer, no inputs field": FOUR_XX,
    "infer, body an array": FOUR_XX,
    "infer, body null": FOUR_XX,
    "infer, NaN in data": NAN,
    "infer, invalid UTF-8": UTF8,
    "trace settings, unknown level": TRACE_LEVEL,
    "trace settings, trace_mode": TRACE_LEVEL,
    "gRPC trace settings, unknown level": TRACE_LEVEL,
    "log settings, unknown format": LOG_FORMAT,
    "log settings, verbose level negative": FOUR_XX,
    "infer, unknown Content-Encoding": ENCODING,
    "infer JSON, ragged nested data": DATA_WORDS,
    "infer JSON, negative dimension": DATA_WORDS,
    "infer JSON, shape not an array": FOUR_XX,
    "infer JSON, binary_data not a boolean": FOUR_XX,
    "infer JSON, binary_data_output not a boolean": FOUR_XX,
    "infer JSON, classification negative": FOUR_XX,
    "infer JSON, timeout of the wrong type": RESERVED,
    "infer JSON, request id not a string": FOUR_XX,
    "shm infer, output region too small": FOUR_XX,
    "shm register, larger than the region": FOUR_XX,
    "shm register, offset past the region": FOUR_XX,
    "sequence, sequence_id of the wrong type": RESERVED,
    "repository load, unknown model": NOT_FOUND,
    "repository load, broken config": UNREADABLE_CONFIG,
    "repository load, wrong name": UNREADABLE_CONFIG,
    "repository load, config override with another name": UNREADABLE_CONFIG,
    "repository index with failed loads": NO_VERSIONS,
    "gRPC repository index": NO_VERSIONS,
    "gRPC repository load, unknown model": NOT_FOUND,
    "repository load, config not JSON": FOUR_XX,
    "repository load, unknown parameter": FOUR_XX,
    "system shared memory register, key that does not exist": FOUR_XX,
    "gRPC system shared memory register, key that does not exist": FOUR_XX,
    "log settings, wrong type": FOUR_XX,
    "gRPC infer, unknown datatype": GRPC_DATATYPE,
}

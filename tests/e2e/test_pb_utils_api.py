"""Triton's Python model API, end to end, on both execution paths.

Every test runs twice: against models in worker processes (Triton's way) and against the
same models with `execution_mode: in_process`. One server per path, with explicit model
control, serves the models of `pb_api_models`; clients are tritonclient over HTTP and gRPC.
Where the in-process path refuses something on purpose (blocking BLS, model loading), the
test asserts the refusal instead; where a worker process is the subject (its death, its
command line), the in-process run checks that there is none. One more small server, without
explicit model control, shows Triton's refusal of model loading there.
"""

from __future__ import annotations

import json
import os
import shutil
import signal

import ml_dtypes
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tests.e2e import pb_api_models as models
from tests.e2e.pb_api_client import (
    Stream, ask, error_of, failure, infer, log_lines, metrics_text, notes, wait_for, worker_commands,
)
from tests.helpers import ROOT, Server

REFUSED = "cannot be called by a model running in the server process"


@pytest.fixture(scope="module", params=["process", "in_process"])
def server(request, tmp_path_factory):
    in_process = request.param == "in_process"
    repo = tmp_path_factory.mktemp(f"pb_api_{request.param}")
    startup = models.build(repo, in_process)
    args = ["--model-control-mode=explicit", "--exit-on-error=false", *(f"--load-model={m}" for m in startup)]
    srv = Server(repo, args).start()
    srv.in_process = in_process  # type: ignore[attr-defined]
    yield srv
    assert srv.stop() == 0, srv.log()


# ------------------------------------------------------------------- module and tensors
def test_module_functions_and_constants_have_tritons_values(server):
    found = ask(server, "api", "constants", request_id="r-1", parameters={"k": "v", "n": 3},
                outputs=[httpclient.InferRequestedOutput("OUT")])
    assert found["decoupled"] == [False, True, False]
    assert found["string_to_numpy"] == {
        "TYPE_BOOL": "bool", "TYPE_UINT8": "uint8", "TYPE_UINT16": "uint16", "TYPE_UINT32": "uint32",
        "TYPE_UINT64": "uint64", "TYPE_INT8": "int8", "TYPE_INT16": "int16", "TYPE_INT32": "int32",
        "TYPE_INT64": "int64", "TYPE_FP16": "float16", "TYPE_FP32": "float32", "TYPE_FP64": "float64",
        "TYPE_STRING": "object",
    }
    assert found["string_to_numpy_fn"] == "uint16"
    assert found["input_config"]["name"] == "CASE" and found["input_config"]["data_type"] == "TYPE_STRING"
    assert found["output_config"]["name"] == "TENSOR" and found["output_config"]["dims"] == [-1]
    assert found["missing_config"] == [None, None]
    numbered = ["bool", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64", "float16",
                "float32", "float64", "object"]  # TRITONSERVER_DataType 1..13
    assert found["to_numpy"] == {str(n): name for n, name in enumerate(numbered, start=1)}
    assert found["to_triton"] == {name: n for n, name in enumerate(numbered, start=1)}
    assert found["bytes_to_triton"] == 13
    # Length-prefixed (little-endian uint32) elements in row-major order; str elements as UTF-8.
    assert bytes.fromhex(found["serialized"]) == (
        b"\x02\x00\x00\x00ab" + b"\x00\x00\x00\x00" + b"\x02\x00\x00\x00\xc3\xa9" + b"\x03\x00\x00\x00xyz")
    assert found["deserialized"] == ["ab", "", "\u00e9", "xyz"]
    assert found["serialized_kinds"] == ["bytes", [], None]  # bytes, () when empty, None for numbers
    assert found["memory"] == [0, 1]
    assert found["preferred_memory"] == "PreferredMemory"
    assert found["flags"] == [1, 2, 1, 1, 2]
    assert found["log_levels"] == [0, 1, 2, 3]
    assert found["metric_kinds"] == [0, 1, 2]
    assert found["error_codes"] == {"UNKNOWN": 0, "INTERNAL": 1, "NOT_FOUND": 2, "INVALID_ARG": 3,
                                    "UNAVAILABLE": 4, "UNSUPPORTED": 5, "ALREADY_EXISTS": 6, "CANCELLED": 7}
    assert found["default_error"] == ["plain", 1]
    assert found["request"] == {"id": "r-1", "correlation_id": 0, "flags": 0,
                                "parameters": {"k": "v", "n": 3}, "requested": ["OUT"]}


def test_tensor_api_and_dlpack_round_trips_with_torch(server):
    result = infer(server, "api", "tensor", data=[1.5, -2.0, 3.0])
    found = json.loads(result.as_numpy("OUT")[0])
    assert found["name"] == "DATA" and found["shape"] == [3] and found["dtype"] == 11
    assert found["is_cpu"] is True and found["values"] == [1.5, -2.0, 3.0]
    assert found["device"] == [1, 0]  # kDLCPU, device 0
    assert found["torch"] == ["torch.float32", [1.5, -2.0, 3.0]]
    assert found["from_torch"] == ["TENSOR", 11, [3.0, -4.0, 6.0]]
    assert found["from_capsule"] == [2.5, -1.0, 4.0]
    assert found["from_numpy"] == [0, 1, 2]
    assert found["round_trips"] == {
        "bool": [1, [True, False, True]], "uint8": [2, [1, 0, 1]], "int8": [6, [1, 0, 1]],
        "int32": [8, [1, 0, 1]], "int64": [9, [1, 0, 1]], "float16": [10, [1, 0, 1]], "float64": [12, [1, 0, 1]],
    }
    assert found["string_dtype"] == 13
    errors = found["errors"]
    assert errors["string_to_dlpack"] == error_of("DLPack does not have support for string tensors.")
    assert errors["string_protocol"]["message"] == "DLPack does not have support for string tensors."
    assert errors["not_contiguous"] == error_of(
        "DLPack tensor is not contiguous. Only contiguous DLPack tensors that are stored in C-Order are supported.")
    assert errors["not_dlpack"]["type"] == "TritonModelException"
    assert errors["not_dlpack"]["message"].startswith(
        "Provided tensor is not supported. Tensor must be a DLPack capsule")
    assert errors["empty_name"] == error_of("Tensor name cannot be an empty string.")
    assert errors["empty_name_dlpack"] == error_of("Tensor name cannot be an empty string.")
    np.testing.assert_array_equal(result.as_numpy("TENSOR"), [3.0, -4.0, 6.0])


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_bf16_reaches_torch_through_dlpack_and_refuses_numpy(server, protocol):
    kwargs = {"outputs": [httpclient.InferRequestedOutput("OUT"), httpclient.InferRequestedOutput(
        "BF16_OUT", binary_data=True)]} if protocol == "http" else {}
    result = infer(server, "api", "bf16", protocol, bf16=[1.5, -2.0, 0.25], **kwargs)
    found = json.loads(result.as_numpy("OUT")[0])
    assert found["dtype"] == 14 and found["out_dtype"] == 14 and found["shape"] == [3]
    message = "Tensor dtype is BF16 and cannot be converted to NumPy. Use to_dlpack() and from_dlpack() instead."
    assert found["as_numpy"] == error_of(message) and found["out_as_numpy"] == error_of(message)
    assert found["torch"] == ["torch.bfloat16", [1.5, -2.0, 0.25]]
    doubled = result.as_numpy("BF16_OUT")
    assert doubled.dtype == ml_dtypes.bfloat16 and doubled.astype(np.float32).tolist() == [3.0, -4.0, 0.5]


# ------------------------------------------------------------------- responses, errors
def test_response_parameters_are_checked_and_reach_both_protocols(server):
    http = infer(server, "api", "params")
    found = json.loads(http.as_numpy("OUT")[0])
    for key, kind in (("not_dict", "str"), ("list", "list")):
        assert found[key]["type"] == "TritonModelException"
        message = found[key]["message"]  # Triton names the dict type as its C++ compiler spells it
        assert message.startswith("Expect ") and message.endswith(f", got <class '{kind}'>")
    assert found["key"] == error_of("Expect parameters keys to have type str, found type <class 'int'>")
    value_error = "Expect parameters values to have type bool/int/str, found type <class '{}'>"
    assert found["float"] == error_of(value_error.format("float"))
    assert found["nested"] == error_of(value_error.format("dict"))
    assert found["request_value"] == error_of(value_error.format("float"))
    assert found["correlation_id"] == error_of("Correlation ID must be integer or string")
    assert found["read_back"] == {"text": "hello", "count": 7, "flag": True}
    assert http.get_response()["parameters"] == {"text": "hello", "count": 7, "flag": True}
    grpc = infer(server, "api", "params", "grpc").get_response().parameters
    assert (grpc["text"].string_param, grpc["count"].int64_param, grpc["flag"].bool_param) == ("hello", 7, True)


TRITON_STATUSES = [  # TritonError code -> (HTTP status, gRPC status), as Triton's frontends map them
    ("UNKNOWN", "400", "StatusCode.UNKNOWN"),
    ("INTERNAL", "500", "StatusCode.INTERNAL"),
    ("NOT_FOUND", "404", "StatusCode.NOT_FOUND"),
    ("INVALID_ARG", "400", "StatusCode.INVALID_ARGUMENT"),
    ("UNAVAILABLE", "503", "StatusCode.UNAVAILABLE"),
    ("UNSUPPORTED", "501", "StatusCode.UNIMPLEMENTED"),
    ("ALREADY_EXISTS", "400", "StatusCode.ALREADY_EXISTS"),
    ("CANCELLED", "400", "StatusCode.CANCELLED"),
]


def test_triton_error_codes_map_to_http_and_grpc_statuses(server):
    for code, http_status, grpc_status in TRITON_STATUSES:
        http = failure(server, "api", "error:" + code)
        assert (http.status(), http.message()) == (http_status, "model error " + code)
        grpc = failure(server, "api", "error:" + code, "grpc")
        assert (grpc.status(), grpc.message()) == (grpc_status, "model error " + code)
    assert failure(server, "api", "error:default").status() == "500"  # INTERNAL unless given
    raised = failure(server, "api", "raise:now", "grpc")
    assert raised.status() == "StatusCode.INTERNAL"
    # What the model raised is named with its type and the model's frames, innermost first, as Triton's stub does.
    head, frames = raised.message().split("\n\nAt:\n")
    assert head == "Failed to process the request(s) for model 'api_0', message: TritonModelException: the model gave up: now"
    assert [line.rsplit(": ", 1)[1] for line in frames.splitlines()] == ["case_raise", "execute"]
    assert all(line.startswith("  ") and "/api/1/model.py(" in line for line in frames.splitlines())
    pid = ask(server, "api", "world")["pid"]
    exited = failure(server, "api", "exit:3")  # sys.exit() fails the batch, not the process
    assert exited.message().startswith("Failed to process the request(s) for model 'api_0', message: SystemExit: 3\n\nAt:\n")
    assert ask(server, "api", "world")["pid"] == pid


# ------------------------------------------------------------------- response senders
def test_decoupled_sender_streams_then_sends_final_from_a_thread(server):
    stream = Stream(server)
    try:
        stream.send("stream", "many")
        assert stream.until_final() == [
            ("data", {"n": 0}, False), ("data", {"n": 1}, False),
            ("data", {"n": 2, "after_return": True}, False), ("empty", None, True),
        ]
        stream.send("stream", "last")
        assert stream.until_final() == [("data", {"n": 0, "last": True}, True)]
    finally:
        stream.close()


def test_decoupled_sender_misuse_errors_and_a_returning_execute(server):
    stream = Stream(server)
    try:
        stream.send("stream", "misuse", request_id="dm-1")
        (kind, found, final), = stream.until_final()
        assert kind == "data" and final
        assert found == {"bad_flag": error_of("Unable to send response. Unsupported flag provided."),
                         "no_response": error_of("Inference Response object must be provided when the response "
                                                 "flags is set to zero.")}
        closed = error_of("Unable to send response. Response sender has been closed.")
        assert wait_for(lambda: notes(server, "stream", "dm-1")) == {
            "id": "dm-1", "after_final": closed, "final_again": closed}
        stream.send("stream", "returns")
        kind, message, _ = stream.next()
        assert kind == "error" and message == (
            "Failed to process the request(s) for model 'stream_0', message: Python model 'stream_0' is using "
            "the decoupled mode and the execute function must return None.")
    finally:
        stream.close()


def test_an_error_sent_by_a_decoupled_model_arrives_as_an_error(server):
    stream = Stream(server)
    try:
        stream.send("stream", "error")
        assert stream.until_final() == [("data", {"n": 0}, False), ("error", "streamed failure", False),
                                        ("empty", None, True)]
    finally:
        stream.close()


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_non_decoupled_sender_answers_after_execute_returned(server, protocol):
    assert ask(server, "api", "later:once", protocol) == {"after_return": True}
    assert ask(server, "api", "later:split", protocol) == {"after_return": True}


def test_non_decoupled_sender_misuse_and_error_responses(server):
    found = ask(server, "api", "misuse", request_id="nm-1")
    assert found == {
        "final_first": error_of("Unable to send response. Non-decoupled model cannot send complete final before "
                                "sending a response."),
        "no_response": error_of("Inference Response object must be provided when the response flags is set to zero."),
        "bad_flag": error_of("Unable to send response. Unsupported flag provided."),
    }
    assert wait_for(lambda: notes(server, "api", "nm-1")) == {
        "id": "nm-1",
        "second": error_of("Unable to send response. Non-decoupled model cannot send more than one response."),
        "after_final": error_of("Unable to send response. Response sender has been closed."),
    }
    for protocol, status in (("http", "400"), ("grpc", "StatusCode.INVALID_ARGUMENT")):
        error = failure(server, "api", "sent_error", protocol)
        assert (error.status(), error.message()) == (status, "sent through the sender")


# ------------------------------------------------------------------------- cancellation
def test_closing_a_grpc_stream_cancels_the_request_and_its_sender(server):
    stream = Stream(server)
    stream.send("stream", "until_cancelled:3000", request_id="sc-1")
    assert [stream.next()[1] for _ in range(2)] == [{"n": 0}, {"n": 1}]
    stream.close(cancel=True)
    assert wait_for(lambda: notes(server, "stream", "sc-1")) == {
        "id": "sc-1", "sender_cancelled": True, "request_cancelled": True}


def test_a_grpc_client_timeout_cancels_the_request(server):
    error = failure(server, "async_api", "wait_cancel", "grpc", request_id="to-1", client_timeout=1.0)
    assert error.status() == "StatusCode.DEADLINE_EXCEEDED"
    assert wait_for(lambda: notes(server, "async_api", "to-1")) == {"id": "to-1", "request_cancelled": True}


# ------------------------------------------------------------------------- rescheduling
def test_rescheduled_requests_come_back_to_execute(server):
    assert ask(server, "api", "reschedule", request_id="rs-1") == {"attempts": 3}
    stream = Stream(server)
    try:
        stream.send("stream", "reschedule", request_id="rs-2")
        assert stream.until_final() == [
            ("data", {"n": 1}, False), ("data", {"n": 2}, False), ("data", {"n": 3}, True)]
    finally:
        stream.close()
    error = failure(server, "api", "reschedule:bad", request_id="rs-3")
    assert error.message().startswith(
        "Failed to process the request(s) for model 'api_0', message: Expected a None object in the execute "
        "function return list for reschduled request, found type")


# ---------------------------------------------------------------------------------- BLS
def test_bls_takes_model_names_as_str_and_bytes(server):
    found = ask(server, "async_api", "names")
    for label in ("str", "bytes", "object", "numpy"):
        expected = {"OUT": {"request_id": "names-" + label, "parameters": {"hop": 1},
                            "requested": ["OUT", "TENSOR"]},
                    "TENSOR": [2.0, 3.0], "parameters": {"answered_by": "api"}}
        assert found["async_" + label] == expected
        if server.in_process:
            assert found["exec_" + label]["type"] == "TritonModelException"
            assert "must use 'await request.async_exec()'" in found["exec_" + label]["message"]
        else:
            assert found["exec_" + label] == {"value": expected}


def test_bls_decoupled_responses_end_with_an_empty_final_one(server):
    found = ask(server, "async_api", "stream")
    expected = [{"OUT": {"n": 0}, "parameters": {}}, {"OUT": {"n": 1}, "parameters": {}},
                {"OUT": {"n": 2, "after_return": True}, "parameters": {}}, {"parameters": {}}]
    assert found["async"] == expected
    if server.in_process:
        assert "must use 'await request.async_exec()'" in found["exec"]["message"]
    else:
        assert found["exec"] == {"value": expected}


def test_bls_async_exec_unary_and_decoupled_together(server):
    found = ask(server, "async_api", "together")
    assert found["unary"]["TENSOR"] == [2.0, 3.0] and found["unary"]["OUT"]["request_id"] == "together"
    assert [r.get("OUT") for r in found["stream"]] == [{"n": 0}, {"n": 1}, {"n": 2, "after_return": True}, None]


def test_bls_cancel_of_a_decoupled_stream_reaches_the_callee(server, request):
    if server.in_process:
        request.applymarker(pytest.mark.xfail(strict=True, reason=(
            "in the server process async_exec(decoupled=True) collects the whole stream before it returns, "
            "so responses.cancel() comes too late to reach the callee")))
    limit = 60 if server.in_process else 3000  # the callee stops by itself after `limit` responses
    found = ask(server, "async_api", f"cancel:bc-1,{limit}")
    assert found["last"] == {"parameters": {}}  # the stream still ends with its final response
    assert wait_for(lambda: notes(server, "stream", "bc-1"))["sender_cancelled"] is True
    assert found["seen"] < limit


def test_bls_to_an_unknown_model_is_an_error_response(server):
    found = ask(server, "async_api", "unknown")
    expected = {"error": "Model no_such_model - Error when running inference: Request for unknown model: "
                         "'no_such_model' is not found", "code": 2}
    assert found["async"] == expected
    if not server.in_process:
        assert found["exec"] == {"value": expected}


def test_models_that_cannot_load_say_why(server):
    client = httpclient.InferenceServerClient(server.http_url)
    index = {row["name"]: row for row in client.get_model_repository_index()}
    assert index["init_bls"]["state"] == "UNAVAILABLE"
    assert "BLS is only supported during the 'execute' function." in index["init_bls"]["reason"]
    assert index["auto_bad"]["state"] == "UNAVAILABLE"
    assert ("auto_complete_config function in model 'auto_bad' must return a valid pb.ModelConfig object."
            in index["auto_bad"]["reason"])


# ------------------------------------------------------------------------ model loading
def test_a_model_loads_and_unloads_models(server):
    found = ask(server, "api", "loading")
    client = httpclient.InferenceServerClient(server.http_url)
    if server.in_process:  # loading waits for the event loop the model runs on: refused
        for key in ("load", "reload_with_config", "load_files", "unload"):
            assert found[key]["type"] == "TritonModelException" and REFUSED in found[key]["message"], key
        assert found["before"] == {"value": False} and found["ready_self"] == {"value": True}
        assert found["bad_version"]["message"].startswith("Failed to check model readiness: ")
        assert not client.is_model_ready("loadee")
        return
    assert found["before"] == {"value": False}
    assert found["load"] is None and found["reload_with_config"] is None and found["load_files"] is None
    assert found["ready"] == [{"value": True}, {"value": True}, {"value": False}]
    assert found["ready_self"] == {"value": True}
    bad = found["bad_version"]["message"]
    assert bad.startswith("Failed to check model readiness: failed to get model version from specified version "
                          "string 'abc' (details: ") and bad.endswith("), version should be an integral value > 0")
    assert found["zero_version"] == error_of(
        "Failed to check model readiness: failed to get model version from specified version string '0', version "
        "should be an integral value > 0")
    assert found["files_answer"]["value"]["marker"] == "from files"
    assert found["files_not_dict"] == error_of(
        "failed to load model 'loadee_files', files should be a dictionary of file paths and file contents")
    # A config alone cannot make a model the repository does not have (Triton polls for it).
    assert found["config_without_model"]["message"].startswith("Failed to load model: ")
    assert found["unload"] is None
    wait_for(lambda: not client.is_model_ready("loadee_files"))
    assert ask(server, "loadee", "x")["marker"] == "from config"
    assert client.get_model_config("loadee")["parameters"]["marker"]["string_value"] == "from config"


def test_loading_outside_explicit_mode_is_tritons_error(tmp_path):
    repo = tmp_path / "repo"
    models.build(repo, in_process=False)
    for name in os.listdir(repo):
        if name not in ("api", "loadee"):
            shutil.rmtree(repo / name)
    with Server(repo) as running:
        found = ask(running, "api", "loading")
    refused = "explicit model load / unload is not allowed if polling is enabled"
    assert found["load"] == error_of("Failed to load model: " + refused)
    assert found["unload"] == error_of("Failed to unload model: " + refused)
    assert found["before"] == {"value": True} and found["ready_self"] == {"value": True}


# ----------------------------------------------------------------------- custom metrics
def test_custom_metrics_api_errors_and_prometheus_text(server):
    found = ask(server, "api", "metrics")
    assert found["values"] == [5.0, 20.0]
    errors = {key: value["message"] for key, value in found["errors"].items()}
    assert {value["type"] for value in found["errors"].values()} == {"TritonModelException"}
    assert errors == {
        "negative_increment": "Failed to increment metric value: TRITONSERVER_METRIC_KIND_COUNTER can only be "
                              "incremented monotonically by non-negative values.",
        "counter_set": "Failed to set metric value: TRITONSERVER_METRIC_KIND_COUNTER does not support Set",
        "counter_observe": "Failed to observe metric value: TRITONSERVER_METRIC_KIND_COUNTER does not support "
                           "Observe",
        "gauge_observe": "Failed to observe metric value: TRITONSERVER_METRIC_KIND_GAUGE does not support Observe",
        "histogram_value": "Failed to get metric value: TRITONSERVER_METRIC_KIND_HISTOGRAM does not support Value",
        "histogram_increment": "Failed to increment metric value: TRITONSERVER_METRIC_KIND_HISTOGRAM does not "
                               "support Increment",
        "missing_buckets": "Failed to create metric. Missing required buckets.",
        "unexpected_buckets": "Failed to create metric. Unexpected buckets found.",
        "labels_not_dict": "Failed to create metric. Labels must be a dictionary.",
        "buckets_not_list": "Failed to create metric. Buckets must be a list.",
        "kind_clash": "Error when creating MetricFamily: Family name already exists with different type",
    }
    text = metrics_text(server)
    assert ("# HELP pbapi_requests requests seen\n# TYPE pbapi_requests counter\n"
            'pbapi_requests{alpha="2",zeta="1"} 5\n') in text
    assert '# TYPE pbapi_temperature gauge\npbapi_temperature{room="lab"} 20\n' in text
    assert "# HELP pbapi_temperature" not in text  # no description, no HELP line
    assert ("# HELP pbapi_latency latency seen\n# TYPE pbapi_latency histogram\n"
            'pbapi_latency_count{case="metrics"} 3\npbapi_latency_sum{case="metrics"} 13.5\n'
            'pbapi_latency_bucket{case="metrics",le="1"} 1\npbapi_latency_bucket{case="metrics",le="5"} 2\n'
            'pbapi_latency_bucket{case="metrics",le="+Inf"} 3\n') in text


def test_two_instances_add_into_one_series_released_on_unload(server):
    series = 'pbapi_instances{model="metered"}'
    assert f"{series} 2\n" in metrics_text(server)  # each instance counted its own start
    assert ask(server, "metered", "x")["value"] == 3.0
    assert ask(server, "metered", "x", "grpc")["value"] == 4.0
    assert f"{series} 4\n" in metrics_text(server)
    client = httpclient.InferenceServerClient(server.http_url)
    client.unload_model("metered")
    wait_for(lambda: series not in metrics_text(server))
    assert not client.is_model_ready("metered")


# --------------------------------------------------------------------------- lifecycle
def test_is_ready_answers_both_protocols_and_finalize_errors_are_logged(server):
    http = httpclient.InferenceServerClient(server.http_url)
    grpc = grpcclient.InferenceServerClient(server.grpc_url)
    reasons = {"false": "Model 'ready_0' is not ready (user-defined check failed).",
               "raise": "RuntimeError: readiness probe failed on purpose",
               "nonbool": "is_ready() must return a boolean value"}
    for state in ("true", "false", "raise", "nonbool", "true"):
        assert ask(server, "ready", "state:" + state) == {"state": state}
        expected = state == "true"
        assert http.is_model_ready("ready") is expected and grpc.is_model_ready("ready") is expected
        if not expected:
            assert server.log().count(f"Model 'ready' version 1 is not ready: {reasons[state]}\n") == 2
    # Many readiness checks at once, from both protocols, each get their own answer.
    from concurrent.futures import ThreadPoolExecutor

    def check(index: int) -> bool:
        client = httpclient.InferenceServerClient(server.http_url) if index % 2 else \
            grpcclient.InferenceServerClient(server.grpc_url)
        return client.is_model_ready("ready")

    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(check, range(16))) == [True] * 16
    http.unload_model("ready")
    wait_for(lambda: "finalize failed on purpose" in server.log())
    wait_for(lambda: not http.is_model_ready("ready"))


def test_auto_complete_config_methods_and_their_refusals(server):
    config = httpclient.InferenceServerClient(server.http_url).get_model_config("auto")
    assert config["max_batch_size"] == 4 and "dynamic_batching" in config
    assert [(i["name"], i["data_type"], i["dims"], i.get("optional", False)) for i in config["input"]] == [
        ("X", "TYPE_FP32", [2], False), ("Y", "TYPE_FP32", [2], True)]
    assert [(o["name"], o["data_type"], o["dims"]) for o in config["output"]] == [("Z", "TYPE_FP32", [2])]
    assert config.get("model_transaction_policy", {}).get("decoupled", False) is False
    refusals = json.loads(config["parameters"]["refusals"]["string_value"])
    assert {value["type"] for value in refusals.values()} == {"ValueError"}
    where = "in auto-complete-config function for model 'auto'"
    assert {key: value["message"] for key, value in refusals.items()} == {
        "max_batch_size": "configuration specified max_batch_size 8, but in auto-complete-config function for "
                          "model 'auto' specified max_batch_size 2",
        "scheduler": "Configuration specified scheduling_choice as 'sequence_batching', but auto-complete-config "
                     "function for model 'auto' tries to set scheduling_choice as 'dynamic_batching'",
        "input_property": f"input 'A' {where} contains property other than 'name', 'data_type', 'dims' and "
                          "'optional'.",
        "input_name": f"input {where} is missing 'name' property.",
        "input_type": f"input 'A' {where} is missing 'data_type' property.",
        "input_dims": f"input 'A' {where} is missing 'dims' property.",
        "input_type_clash": "unable to load model 'auto', configuration expects datatype TYPE_INT32 for input 'A', "
                            "model provides TYPE_FP32",
        "input_dims_clash": "model 'auto', tensor 'A': the model expects dims [1] but the model configuration "
                            "specifies dims [2]",
        "input_optional_clash": "model 'auto', tensor 'A': the model expects optional False but the model "
                                "configuration specifies optional True",
        "output_property": f"output 'A' {where} contains property other than 'name', 'data_type' and 'dims'.",
        "output_name": f"output {where} is missing 'name' property.",
        "output_type": f"output 'A' {where} is missing 'data_type' property.",
        "output_dims": f"output 'A' {where} is missing 'dims' property.",
        "output_type_clash": "unable to load model 'auto', configuration expects datatype TYPE_INT8 for output "
                             "'A', model provides TYPE_FP32",
        "output_dims_clash": "model 'auto', tensor 'A': the model expects dims [1] but the model configuration "
                             "specifies dims [3]",
        "policy_property": "model transaction property in auto-complete-config function for model 'auto' contains "
                           "property other than 'decoupled'.",
        "policy_change": "trying to change decoupled property in auto-complete-config for model 'auto', which is "
                         "already set to 'True'.",
    }
    client = grpcclient.InferenceServerClient(server.grpc_url)
    x, y = grpcclient.InferInput("X", [1, 2], "FP32"), grpcclient.InferInput("Y", [1, 2], "FP32")
    x.set_data_from_numpy(np.array([[1, 2]], np.float32))
    y.set_data_from_numpy(np.array([[10, 20]], np.float32))
    assert client.infer("auto", [x]).as_numpy("Z").tolist() == [[1, 2]]
    assert client.infer("auto", [x, y]).as_numpy("Z").tolist() == [[11, 22]]


def test_async_execute_of_a_decoupled_model_overlaps(server):
    stream = Stream(server)
    try:
        stream.send("overlap", "first")
        assert stream.next() == ("data", ["start first"], False)
        stream.send("overlap", "second")
        answers = [stream.next() for _ in range(2)]
    finally:
        stream.close()
    assert [answer[1] for answer in answers] == [
        ["start first", "start second", "end second"],
        ["start first", "start second", "end second", "end first"],
    ]


def test_logger_reaches_the_server_log_at_the_enabled_levels(server):
    client = httpclient.InferenceServerClient(server.http_url)

    def check(token: str, expected: list[str]) -> None:
        ask(server, "api", "log:" + token)  # every variant, in this order
        wait_for(lambda: len(log_lines(server, token)) >= len(expected))
        assert log_lines(server, token) == expected

    check("quiet", ["I info", "W warn", "E error", "I default", "I level-info", "W level-warning", "E level-error"])
    client.update_log_settings({"log_verbose_level": 1})
    try:
        check("verbose", ["I info", "W warn", "E error", "V verbose", "I default", "I level-info",
                          "W level-warning", "E level-error", "V level-verbose"])
        client.update_log_settings({"log_verbose_level": 0, "log_info": False})
        check("noinfo", ["W warn", "E error", "W level-warning", "E level-error"])
    finally:
        client.update_log_settings({"log_verbose_level": 0, "log_info": True})


def test_the_world_a_model_lives_in(server):
    found = ask(server, "api", "world")
    assert found["cwd"] == str(ROOT)  # the server's working directory
    assert found["helper"] == "hello from helper.py"  # `from . import helper` beside model.py
    if server.in_process:
        assert found["pid"] == server.process.pid and "serve" in found["argv"]
    else:
        assert found["pid"] != server.process.pid
        assert found["argv_at_initialize"] == [""] and found["argv"] == [""]
    if server.in_process:  # unittest.main() parses sys.argv: here the server's own command line
        assert "message: SystemExit: 2\n\nAt:\n" in failure(server, "selftest", "run").message()
    else:
        assert ask(server, "selftest", "run") == {"ok": True, "ran": 2}


def test_a_dead_worker_makes_the_model_not_ready_until_the_next_request_restarts_it(server):
    pid = ask(server, "plain", "x")["pid"]
    if server.in_process:
        assert pid == server.process.pid and not any("plain" in c for c in worker_commands(server).values())
        return
    assert pid in worker_commands(server)
    os.kill(pid, signal.SIGKILL)
    http = httpclient.InferenceServerClient(server.http_url)
    grpc = grpcclient.InferenceServerClient(server.grpc_url)
    wait_for(lambda: not http.is_model_ready("plain"))
    assert not grpc.is_model_ready("plain")
    assert "Model 'plain' version 1 is not ready: Stub process 'plain_0' is not healthy.\n" in server.log()
    error = failure(server, "plain", "x")
    assert "Stub process 'plain_0' is not healthy." in error.message()
    assert ask(server, "plain", "x")["pid"] not in (pid, server.process.pid)
    assert http.is_model_ready("plain")


def test_a_name_a_shell_would_act_on_is_refused_as_tritons_stub_name(server):
    """Triton refuses a worker (stub) name with shell metacharacters; a plain name loads."""
    if server.in_process:
        pytest.skip("no worker process, so no stub name, in the server process")
    source = b"""
import triton_python_backend_utils as pb_utils
class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.get_input_tensor_by_name(r, "INPUT0")]) for r in requests]
"""
    client = httpclient.InferenceServerClient(server.http_url)
    for name, refused in (("model;test", True), ("model\\test", True), ("plain_name_123", False)):
        config = json.dumps({
            "name": name, "backend": "python", "max_batch_size": 0,
            "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [-1]}],
            "output": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [-1]}],
        })
        if refused:
            with pytest.raises(Exception) as info:
                client.load_model(name, config=config, files={"file:/1/model.py": source})
            assert "Invalid stub name: contains invalid characters" in str(info.value)
            assert not client.is_model_ready(name)
        else:
            client.load_model(name, config=config, files={"file:/1/model.py": source})
            assert client.is_model_ready(name)
            client.unload_model(name)

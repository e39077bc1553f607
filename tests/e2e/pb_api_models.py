"""Models for the end-to-end tests of Triton's Python model API (`test_pb_utils_*.py`).

Few models, each serving many cases: every worker process costs a start-up, so one model
answers a `CASE` input ("name" or "name:argument") with a method of its own. Findings come
back as JSON in the `OUT` output; what a model learns after its response has gone (a send
after FINAL, a cancellation seen by a thread) is appended to `notes.jsonl` in its folder.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import write_model

IN_PROCESS = 'parameters { key: "execution_mode" value { string_value: "in_process" } }'

IO = """
backend: "python"
max_batch_size: 0
input [
  { name: "CASE" data_type: TYPE_STRING dims: [ 1 ] },
  { name: "DATA" data_type: TYPE_FP32 dims: [ -1 ] optional: true },
  { name: "BF16_IN" data_type: TYPE_BF16 dims: [ -1 ] optional: true }
]
output [
  { name: "OUT" data_type: TYPE_STRING dims: [ 1 ] },
  { name: "TENSOR" data_type: TYPE_FP32 dims: [ -1 ] },
  { name: "BF16_OUT" data_type: TYPE_BF16 dims: [ -1 ] }
]
"""
DECOUPLED = "model_transaction_policy { decoupled: true }\n"

# Shared by every model below (each model file gets its own copy).
COMMON = r'''
import json, os, threading
import numpy as np
import triton_python_backend_utils as pb_utils

_LOCK = threading.Lock()
FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


def report(data):
    return pb_utils.Tensor("OUT", np.array([json.dumps(data).encode()], dtype=np.object_))


def reply(data, **kwargs):
    return pb_utils.InferenceResponse([report(data)], **kwargs)


def caught(call):
    """What `call` raised (type and message), or None."""
    try:
        call()
    except Exception as exc:
        return {"type": type(exc).__name__, "message": str(exc)}
    return None


def attempt(call):
    try:
        return {"value": call()}
    except Exception as exc:
        return {"type": type(exc).__name__, "message": str(exc)}


def case_of(request):
    text = pb_utils.get_input_tensor_by_name(request, "CASE").as_numpy().reshape(-1)[0].decode()
    name, _, arg = text.partition(":")
    return name, arg


def note(folder, **entry):
    with _LOCK, open(os.path.join(folder, "notes.jsonl"), "a") as f:
        f.write(json.dumps(entry) + "\n")
'''

# Non-decoupled, plain `def execute`: the module API, tensors, responses, errors, response
# senders, rescheduling, metrics, logging, model loading and the worker's world.
API = COMMON + r'''
import sys
from . import helper

NUMPY_TYPES = (np.bool_, np.uint8, np.uint16, np.uint32, np.uint64, np.int8, np.int16, np.int32,
               np.int64, np.float16, np.float32, np.float64, np.object_)


class TritonPythonModel:
    def initialize(self, args):
        self.args = args
        self.config = json.loads(args["model_config"])
        self.folder = args["model_repository"]
        self.argv = list(sys.argv)
        self.attempts = {}
        self.kept = []

    def execute(self, requests):
        returned = threading.Event()
        responses = []
        for request in requests:
            name, arg = case_of(request)
            responses.append(getattr(self, "case_" + name)(request, arg, returned))
        returned.set()
        return responses

    def case_echo(self, request, arg, returned):
        data = pb_utils.get_input_tensor_by_name(request, "DATA")
        found = {"request_id": request.request_id(), "parameters": json.loads(request.parameters()),
                 "requested": sorted(request.requested_output_names())}
        outputs = [report(found)]
        if data is not None:
            outputs.append(pb_utils.Tensor("TENSOR", data.as_numpy() + 1))
        return pb_utils.InferenceResponse(outputs, parameters={"answered_by": "api"})

    def case_constants(self, request, arg, returned):
        c = self.config
        serialized = pb_utils.serialize_byte_tensor(np.array([[b"ab", b""], ["\u00e9", b"xyz"]], dtype=np.object_))
        error = pb_utils.TritonError("plain")
        return reply({
            "decoupled": [pb_utils.using_decoupled_model_transaction_policy(config) for config in
                          (c, {"model_transaction_policy": {"decoupled": True}}, {})],
            "string_to_numpy": {k: np.dtype(v).name for k, v in pb_utils.TRITON_STRING_TO_NUMPY.items()},
            "string_to_numpy_fn": np.dtype(pb_utils.triton_string_to_numpy("TYPE_UINT16")).name,
            "input_config": pb_utils.get_input_config_by_name(c, "CASE"),
            "output_config": pb_utils.get_output_config_by_name(c, "TENSOR"),
            "missing_config": [pb_utils.get_input_config_by_name(c, "NOPE"),
                               pb_utils.get_output_config_by_name(c, "CASE")],
            "to_numpy": {n: np.dtype(pb_utils.triton_to_numpy_type(n)).name for n in range(1, 14)},
            "to_triton": {np.dtype(t).name: pb_utils.numpy_to_triton_type(t) for t in NUMPY_TYPES},
            "bytes_to_triton": pb_utils.numpy_to_triton_type(np.bytes_),
            "serialized": bytes(serialized).hex(),
            "serialized_kinds": [type(serialized).__name__,
                                 pb_utils.serialize_byte_tensor(np.array([], dtype=np.object_)),
                                 pb_utils.serialize_byte_tensor(np.array([1, 2], dtype=np.int32))],
            "deserialized": [b.decode() for b in pb_utils.deserialize_bytes_tensor(bytes(serialized))],
            "memory": [pb_utils.TRITONSERVER_MEMORY_GPU, pb_utils.TRITONSERVER_MEMORY_CPU],
            "preferred_memory": type(pb_utils.PreferredMemory(pb_utils.TRITONSERVER_MEMORY_CPU, 0)).__name__,
            "flags": [pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_START,
                      pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_END,
                      pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
                      pb_utils.TRITONSERVER_REQUEST_RELEASE_ALL,
                      pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE],
            "log_levels": [int(pb_utils.Logger.INFO), int(pb_utils.Logger.WARNING), int(pb_utils.Logger.ERROR),
                           int(pb_utils.Logger.VERBOSE)],
            "metric_kinds": [int(pb_utils.MetricFamily.COUNTER), int(pb_utils.MetricFamily.GAUGE),
                             int(pb_utils.MetricFamily.HISTOGRAM)],
            "error_codes": {n: int(getattr(pb_utils.TritonError, n)) for n in
                            ("UNKNOWN", "INTERNAL", "NOT_FOUND", "INVALID_ARG", "UNAVAILABLE", "UNSUPPORTED",
                             "ALREADY_EXISTS", "CANCELLED")},
            "default_error": [error.message(), int(error.code())],
            "request": {"id": request.request_id(), "correlation_id": request.correlation_id(),
                        "flags": request.flags(), "parameters": json.loads(request.parameters()),
                        "requested": sorted(request.requested_output_names())},
        })

    def case_tensor(self, request, arg, returned):
        import torch

        t = pb_utils.get_input_tensor_by_name(request, "DATA")
        found = {"name": t.name(), "shape": t.shape(), "dtype": t.triton_dtype(), "is_cpu": t.is_cpu(),
                 "values": t.as_numpy().tolist(), "device": list(t.__dlpack_device__())}
        from_capsule = torch.utils.dlpack.from_dlpack(t.to_dlpack())
        from_protocol = torch.from_dlpack(t)
        found["torch"] = [str(from_capsule.dtype), from_protocol.tolist()]
        doubled = pb_utils.Tensor.from_dlpack("TENSOR", from_capsule * 2)
        plus_one = pb_utils.Tensor.from_dlpack("P", torch.utils.dlpack.to_dlpack(from_protocol + 1))
        found["from_torch"] = [doubled.name(), doubled.triton_dtype(), doubled.as_numpy().tolist()]
        found["from_capsule"] = plus_one.as_numpy().tolist()
        found["from_numpy"] = pb_utils.Tensor.from_dlpack("N", np.arange(3, dtype=np.int16)).as_numpy().tolist()
        found["round_trips"] = {}
        for dtype in (np.bool_, np.uint8, np.int8, np.int32, np.int64, np.float16, np.float64):
            source = pb_utils.Tensor("R", np.array([1, 0, 1], dtype=dtype))
            back = pb_utils.Tensor.from_dlpack("R", torch.from_dlpack(source))
            found["round_trips"][np.dtype(dtype).name] = [back.triton_dtype(), back.as_numpy().tolist()]
        strings = pb_utils.Tensor("S", np.array(["a", "b"], dtype=np.object_))
        found["string_dtype"] = strings.triton_dtype()
        found["errors"] = {
            "string_to_dlpack": caught(strings.to_dlpack),
            "string_protocol": caught(lambda: torch.from_dlpack(strings)),
            "not_contiguous": caught(lambda: pb_utils.Tensor.from_dlpack("Z", torch.arange(6).reshape(2, 3).t())),
            "not_dlpack": caught(lambda: pb_utils.Tensor.from_dlpack("Z", [1, 2])),
            "empty_name": caught(lambda: pb_utils.Tensor("", np.zeros(1))),
            "empty_name_dlpack": caught(lambda: pb_utils.Tensor.from_dlpack("", torch.zeros(1))),
        }
        return pb_utils.InferenceResponse([report(found), doubled])

    def case_bf16(self, request, arg, returned):
        import torch

        t = pb_utils.get_input_tensor_by_name(request, "BF16_IN")
        as_torch = torch.from_dlpack(t.to_dlpack())
        doubled = pb_utils.Tensor.from_dlpack("BF16_OUT", as_torch * 2)
        found = {"dtype": t.triton_dtype(), "shape": t.shape(), "as_numpy": caught(t.as_numpy),
                 "torch": [str(as_torch.dtype), as_torch.float().tolist()],
                 "out_dtype": doubled.triton_dtype(), "out_as_numpy": caught(doubled.as_numpy)}
        return pb_utils.InferenceResponse([report(found), doubled])

    def case_params(self, request, arg, returned):
        Response = pb_utils.InferenceResponse
        found = {
            "not_dict": caught(lambda: Response(parameters="a=1")),
            "list": caught(lambda: Response(parameters=[])),
            "key": caught(lambda: Response(parameters={1: "x"})),
            "float": caught(lambda: Response(parameters={"f": 1.5})),
            "nested": caught(lambda: Response(parameters={"d": {"a": 1}})),
            "request_value": caught(lambda: pb_utils.InferenceRequest(
                model_name="api", inputs=[], requested_output_names=[], parameters={"f": 0.5})),
            "correlation_id": caught(lambda: pb_utils.InferenceRequest(
                model_name="api", inputs=[], requested_output_names=[], correlation_id=1.5)),
        }
        kept = Response([], parameters={"text": "hello", "count": 7, "flag": True})
        found["read_back"] = json.loads(kept.parameters())
        return Response([report(found)], parameters={"text": "hello", "count": 7, "flag": True})

    def case_error(self, request, arg, returned):
        if arg == "default":
            return pb_utils.InferenceResponse(error=pb_utils.TritonError("error without a code"))
        code = getattr(pb_utils.TritonError, arg)
        return pb_utils.InferenceResponse(error=pb_utils.TritonError("model error " + arg, code))

    def case_raise(self, request, arg, returned):
        raise pb_utils.TritonModelException("the model gave up: " + arg)

    def case_exit(self, request, arg, returned):
        sys.exit(int(arg))

    # -- response senders of a non-decoupled model
    def case_later(self, request, arg, returned):
        sender = request.get_response_sender()

        def answer():
            returned.wait(30)
            found = {"after_return": returned.is_set()}
            if arg == "split":  # the response, then a flag-only FINAL
                sender.send(reply(found))
                sender.send(flags=FINAL)
            else:
                sender.send(reply(found), flags=FINAL)

        threading.Thread(target=answer).start()
        return None

    def case_misuse(self, request, arg, returned):
        sender = request.get_response_sender()

        def answer():
            returned.wait(30)
            found = {"final_first": caught(lambda: sender.send(flags=FINAL)),
                     "no_response": caught(lambda: sender.send()),
                     "bad_flag": caught(lambda: sender.send(reply({}), flags=2))}
            sender.send(reply(found))
            late = {"second": caught(lambda: sender.send(reply({})))}
            sender.send(flags=FINAL)
            late["after_final"] = caught(lambda: sender.send(flags=FINAL))
            note(self.folder, id=request.request_id(), **late)

        threading.Thread(target=answer).start()
        return None

    def case_sent_error(self, request, arg, returned):
        error = pb_utils.TritonError("sent through the sender", pb_utils.TritonError.INVALID_ARG)
        request.get_response_sender().send(pb_utils.InferenceResponse(error=error), flags=FINAL)
        return None

    # -- rescheduling
    def case_reschedule(self, request, arg, returned):
        key = request.request_id()
        self.attempts[key] = self.attempts.get(key, 0) + 1
        if arg == "bad" or self.attempts[key] < 3:
            request.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
            return reply({}) if arg == "bad" else None
        return reply({"attempts": self.attempts[key]})

    # -- custom metrics
    def case_metrics(self, request, arg, returned):
        Family = pb_utils.MetricFamily
        counter_family = Family("pbapi_requests", "requests seen", Family.COUNTER)
        gauge_family = Family("pbapi_temperature", "", Family.GAUGE)
        histogram_family = Family("pbapi_latency", "latency seen", Family.HISTOGRAM)
        counter = counter_family.Metric(labels={"zeta": "1", "alpha": "2"})
        gauge = gauge_family.Metric(labels={"room": "lab"})
        histogram = histogram_family.Metric(labels={"case": "metrics"}, buckets=[1.0, 5.0])
        counter.increment(2)
        counter.increment(3)
        gauge.set(21.5)
        gauge.increment(-1.5)
        for value in (0.5, 3, 10):
            histogram.observe(value)
        self.kept += [counter_family, gauge_family, histogram_family, counter, gauge, histogram]
        found = {"values": [counter.value(), gauge.value()], "errors": {
            "negative_increment": caught(lambda: counter.increment(-1)),
            "counter_set": caught(lambda: counter.set(1)),
            "counter_observe": caught(lambda: counter.observe(1)),
            "gauge_observe": caught(lambda: gauge.observe(1)),
            "histogram_value": caught(histogram.value),
            "histogram_increment": caught(lambda: histogram.increment(1)),
            "missing_buckets": caught(lambda: histogram_family.Metric(labels={"a": "b"})),
            "unexpected_buckets": caught(lambda: counter_family.Metric(labels={}, buckets=[1.0])),
            "labels_not_dict": caught(lambda: counter_family.Metric(labels=[("a", "b")])),
            "buckets_not_list": caught(lambda: histogram_family.Metric(labels={}, buckets=(1.0,))),
            "kind_clash": caught(lambda: Family("pbapi_requests", "requests seen", Family.GAUGE)),
        }}
        return reply(found)

    # -- logging
    def case_log(self, request, arg, returned):
        Logger = pb_utils.Logger
        Logger.log_info(arg + " info")
        Logger.log_warn(arg + " warn")
        Logger.log_error(arg + " error")
        Logger.log_verbose(arg + " verbose")
        Logger.log(arg + " default")
        Logger.log(arg + " level-info", Logger.INFO)
        Logger.log(arg + " level-warning", Logger.WARNING)
        Logger.log(arg + " level-error", Logger.ERROR)
        Logger.log(arg + " level-verbose", Logger.VERBOSE)
        return reply({})

    # -- the world a model lives in
    def case_world(self, request, arg, returned):
        return reply({"argv_at_initialize": self.argv, "argv": list(sys.argv), "cwd": os.getcwd(),
                      "helper": helper.greeting(), "pid": os.getpid()})

    # -- loading models from a model
    def case_loading(self, request, arg, returned):
        repository = os.path.dirname(self.folder)
        with open(os.path.join(repository, "loadee", "1", "model.py"), "rb") as f:
            source = f.read()
        with open(os.path.join(repository, "loadee", "config.json")) as f:
            config = json.load(f)
        with_marker = json.dumps(dict(config, parameters={"marker": {"string_value": "from config"}}))
        from_files = json.dumps(dict(config, parameters={"marker": {"string_value": "from files"}}))
        found = {"before": attempt(lambda: pb_utils.is_model_ready("loadee"))}
        found["load"] = caught(lambda: pb_utils.load_model("loadee"))
        found["ready"] = [attempt(lambda v=v: pb_utils.is_model_ready("loadee", v)) for v in ("", "1", "2")]
        found["ready_self"] = attempt(lambda: pb_utils.is_model_ready(model_name="api", model_version="1"))
        found["bad_version"] = caught(lambda: pb_utils.is_model_ready("loadee", "abc"))
        found["zero_version"] = caught(lambda: pb_utils.is_model_ready("loadee", "0"))
        found["reload_with_config"] = caught(lambda: pb_utils.load_model("loadee", config=with_marker))
        found["load_files"] = caught(lambda: pb_utils.load_model(
            "loadee_files", config=from_files, files={"file:1/model.py": source}))
        found["files_answer"] = attempt(lambda: json.loads(pb_utils.get_output_tensor_by_name(
            pb_utils.InferenceRequest(model_name="loadee_files", inputs=[pb_utils.get_input_tensor_by_name(
                request, "CASE")], requested_output_names=["OUT"]).exec(), "OUT").as_numpy()[0]))
        found["files_not_dict"] = caught(lambda: pb_utils.load_model(
            "loadee_files", config=from_files, files=[("file:1/model.py", source)]))
        found["config_without_model"] = caught(lambda: pb_utils.load_model("no_such_model", config=with_marker))
        found["unload"] = caught(lambda: pb_utils.unload_model("loadee_files"))
        return reply(found)
'''

HELPER = '''
def greeting():
    return "hello from helper.py"
'''

# Non-decoupled, `async def execute`: business logic scripting and cancellation.
ASYNC_API = COMMON + r'''
import asyncio


def case_tensor(text):
    return pb_utils.Tensor("CASE", np.array([text.encode()], dtype=np.object_))


def echo_request(model_name, request_id):
    return pb_utils.InferenceRequest(
        model_name=model_name, request_id=request_id, parameters={"hop": 1},
        inputs=[case_tensor("echo"), pb_utils.Tensor("DATA", np.array([1.0, 2.0], np.float32))],
        requested_output_names=["OUT", "TENSOR"],
        preferred_memory=pb_utils.PreferredMemory(pb_utils.TRITONSERVER_MEMORY_CPU, 0))


def stream_request(case, request_id=""):
    return pb_utils.InferenceRequest(model_name="stream", request_id=request_id, inputs=[case_tensor(case)],
                                     requested_output_names=["OUT"])


def summary(response):
    if response.has_error():
        return {"error": response.error().message(), "code": int(response.error().code())}
    found = {"parameters": json.loads(response.parameters())}
    for tensor in response.output_tensors():
        value = tensor.as_numpy()
        found[tensor.name()] = json.loads(value[0]) if tensor.name() == "OUT" else value.tolist()
    return found


class TritonPythonModel:
    def initialize(self, args):
        self.folder = args["model_repository"]

    async def execute(self, requests):
        responses = []
        for request in requests:
            name, arg = case_of(request)
            responses.append(reply(await getattr(self, "case_" + name)(request, arg)))
        return responses

    async def case_names(self, request, arg):
        found = {}
        names = {"str": "api", "bytes": b"api", "object": np.array([b"api"], dtype=np.object_)[0],
                 "numpy": np.array([b"api"])[0]}
        for label, model_name in names.items():
            call = echo_request(model_name, "names-" + label)
            found["exec_" + label] = attempt(lambda: summary(call.exec()))
            found["async_" + label] = summary(await call.async_exec())
        return found

    async def case_stream(self, request, arg):
        found = {"exec": attempt(lambda: [summary(r) for r in stream_request("many").exec(decoupled=True)])}
        found["async"] = [summary(r) for r in await stream_request("many").async_exec(decoupled=True)]
        return found

    async def case_cancel(self, request, arg):
        responses = await stream_request("until_cancelled:" + arg.split(",")[1], arg.split(",")[0]).async_exec(
            decoupled=True)
        seen = []
        for response in responses:
            seen.append(summary(response))
            if len(seen) == 2:
                responses.cancel()
        return {"seen": len(seen), "last": seen[-1]}

    async def case_together(self, request, arg):
        unary, stream = await asyncio.gather(echo_request("api", "together").async_exec(),
                                             stream_request("many").async_exec(decoupled=True))
        return {"unary": summary(unary), "stream": [summary(r) for r in stream]}

    async def case_unknown(self, request, arg):
        call = echo_request("no_such_model", "unknown")
        return {"async": summary(await call.async_exec()), "exec": attempt(lambda: summary(call.exec()))}

    async def case_wait_cancel(self, request, arg):
        for _ in range(3000):
            if request.is_cancelled():
                break
            await asyncio.sleep(0.01)
        note(self.folder, id=request.request_id(), request_cancelled=request.is_cancelled())
        return {}
'''

# Decoupled, plain `def execute`: everything a response sender does in a streaming model.
STREAM = COMMON + r'''
import time


def numbered(n, **extra):
    return reply(dict(n=n, **extra))


class TritonPythonModel:
    def initialize(self, args):
        self.folder = args["model_repository"]
        self.attempts = {}

    def execute(self, requests):
        returned = threading.Event()
        for request in requests:
            name, arg = case_of(request)
            if name == "returns":
                return [numbered(0)]
            getattr(self, "case_" + name)(request, arg, returned)
        returned.set()
        return None

    def case_many(self, request, arg, returned):
        sender = request.get_response_sender()
        sender.send(numbered(0))
        sender.send(numbered(1))

        def rest():
            returned.wait(30)
            sender.send(numbered(2, after_return=returned.is_set()))
            sender.send(flags=FINAL)

        threading.Thread(target=rest).start()

    def case_last(self, request, arg, returned):
        request.get_response_sender().send(numbered(0, last=True), flags=FINAL)

    def case_misuse(self, request, arg, returned):
        sender = request.get_response_sender()
        found = {"bad_flag": caught(lambda: sender.send(numbered(0), flags=2)),
                 "no_response": caught(lambda: sender.send())}
        sender.send(reply(found), flags=FINAL)
        note(self.folder, id=request.request_id(), after_final=caught(lambda: sender.send(numbered(1))),
             final_again=caught(lambda: sender.send(flags=FINAL)))

    def case_error(self, request, arg, returned):
        sender = request.get_response_sender()
        sender.send(numbered(0))
        sender.send(pb_utils.InferenceResponse(
            error=pb_utils.TritonError("streamed failure", pb_utils.TritonError.INVALID_ARG)))
        sender.send(flags=FINAL)

    def case_until_cancelled(self, request, arg, returned):
        sender = request.get_response_sender()

        def run():
            sent = 0
            while not sender.is_cancelled() and sent < int(arg):
                sender.send(numbered(sent))
                sent += 1
                time.sleep(0.01)
            note(self.folder, id=request.request_id(), sender_cancelled=sender.is_cancelled(),
                 request_cancelled=request.is_cancelled())
            caught(lambda: sender.send(flags=FINAL))

        threading.Thread(target=run).start()

    def case_reschedule(self, request, arg, returned):
        key = request.request_id()
        attempt = self.attempts[key] = self.attempts.get(key, 0) + 1
        sender = request.get_response_sender()
        if attempt < 3:
            sender.send(numbered(attempt))
            request.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
        else:
            sender.send(numbered(attempt), flags=FINAL)
'''

# Decoupled, `async def execute`: "first" waits until "second" has started, which only
# happens if the two calls run at the same time.
OVERLAP = COMMON + r'''
import asyncio


class TritonPythonModel:
    def initialize(self, args):
        self.order = []
        self.second_started = None

    async def execute(self, requests):
        for request in requests:
            name, _ = case_of(request)
            sender = request.get_response_sender()
            if self.second_started is None:
                self.second_started = asyncio.Event()
            self.order.append("start " + name)
            if name == "first":
                sender.send(reply(list(self.order)))
                try:
                    await asyncio.wait_for(self.second_started.wait(), 20)
                except asyncio.TimeoutError:
                    self.order.append("gave up waiting")
            else:
                self.second_started.set()
            self.order.append("end " + name)
            sender.send(reply(list(self.order)), flags=FINAL)
        return None
'''

READY = COMMON + r'''
class TritonPythonModel:
    def initialize(self, args):
        self.state = "true"

    def is_ready(self):
        if self.state == "raise":
            raise RuntimeError("readiness probe failed on purpose")
        if self.state == "nonbool":
            return "yes"
        return self.state == "true"

    def execute(self, requests):
        for request in requests:
            self.state = case_of(request)[1]
        return [reply({"state": self.state}) for _ in requests]

    def finalize(self):
        raise RuntimeError("finalize failed on purpose")
'''

AUTO_CONFIG = """
backend: "python"
input [ { name: "X" data_type: TYPE_FP32 dims: [ 2 ] } ]
"""

# Every ModelConfig method used as Triton documents it, and each of its refusals (tried on
# copies, their messages kept in the config's parameters for the test to read).
AUTO = COMMON + r'''
class TritonPythonModel:
    @staticmethod
    def auto_complete_config(config):
        base = config.as_dict()

        def copy(**changes):
            return pb_utils.ModelConfig(json.dumps(dict(base, **changes)))

        fp32 = {"name": "A", "data_type": "TYPE_FP32", "dims": [1]}
        refusals = {
            "max_batch_size": caught(lambda: copy(max_batch_size=8).set_max_batch_size(2)),
            "scheduler": caught(lambda: copy(sequence_batching={}).set_dynamic_batching()),
            "input_property": caught(lambda: copy().add_input(dict(fp32, format="FORMAT_NCHW"))),
            "input_name": caught(lambda: copy().add_input({"data_type": "TYPE_FP32", "dims": [1]})),
            "input_type": caught(lambda: copy().add_input({"name": "A", "dims": [1]})),
            "input_dims": caught(lambda: copy().add_input({"name": "A", "data_type": "TYPE_FP32"})),
            "input_type_clash": caught(lambda: copy(input=[dict(fp32, data_type="TYPE_INT32")]).add_input(fp32)),
            "input_dims_clash": caught(lambda: copy(input=[dict(fp32, dims=[2])]).add_input(fp32)),
            "input_optional_clash": caught(lambda: copy(input=[dict(fp32, optional=True)]).add_input(
                dict(fp32, optional=False))),
            "output_property": caught(lambda: copy().add_output(dict(fp32, optional=True))),
            "output_name": caught(lambda: copy().add_output({"data_type": "TYPE_FP32", "dims": [1]})),
            "output_type": caught(lambda: copy().add_output({"name": "A", "dims": [1]})),
            "output_dims": caught(lambda: copy().add_output({"name": "A", "data_type": "TYPE_FP32"})),
            "output_type_clash": caught(lambda: copy(output=[dict(fp32, data_type="TYPE_INT8")]).add_output(fp32)),
            "output_dims_clash": caught(lambda: copy(output=[dict(fp32, dims=[3])]).add_output(fp32)),
            "policy_property": caught(lambda: copy().set_model_transaction_policy({"batching": True})),
            "policy_change": caught(lambda: copy(model_transaction_policy={"decoupled": True})
                                    .set_model_transaction_policy({"decoupled": False})),
        }
        config.set_max_batch_size(4)
        config.set_dynamic_batching()
        config.add_input({"name": "X", "data_type": "TYPE_FP32", "dims": [2]})
        config.add_input({"name": "Y", "data_type": "TYPE_FP32", "dims": [2], "optional": True})
        config.add_output({"name": "Z", "data_type": "TYPE_FP32", "dims": [2]})
        config.set_model_transaction_policy({"decoupled": False})
        config.as_dict().setdefault("parameters", {})["refusals"] = {"string_value": json.dumps(refusals)}
        return config

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            y = pb_utils.get_input_tensor_by_name(request, "Y")
            z = x + (y.as_numpy() if y is not None else 0)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("Z", z)]))
        return responses
'''

AUTO_BAD = r'''
class TritonPythonModel:
    @staticmethod
    def auto_complete_config(config):
        return None

    def execute(self, requests):
        return []
'''

INIT_BLS = COMMON + r'''
class TritonPythonModel:
    def initialize(self, args):
        pb_utils.InferenceRequest(model_name="api", inputs=[pb_utils.Tensor("CASE", np.array([b"echo"], np.object_))],
                                  requested_output_names=["OUT"]).exec()

    def execute(self, requests):
        return []
'''

# Two instances add into one counter series: each counts its own start and each request.
METERED = COMMON + r'''
class TritonPythonModel:
    def initialize(self, args):
        self.family = pb_utils.MetricFamily("pbapi_instances", "instances and requests",
                                            pb_utils.MetricFamily.COUNTER)
        self.counter = self.family.Metric(labels={"model": "metered"})
        self.counter.increment(1)

    def execute(self, requests):
        for _ in requests:
            self.counter.increment(1)
        return [reply({"value": self.counter.value()}) for _ in requests]
'''

# `unittest.main("model", exit=False)`, as Triton's own test models check themselves.
SELFTEST = COMMON + r'''
import unittest


class ModelApiTest(unittest.TestCase):
    def test_tensor(self):
        self.assertEqual(pb_utils.Tensor("T", np.arange(3, dtype=np.int32)).as_numpy().tolist(), [0, 1, 2])

    def test_error_default_code(self):
        self.assertEqual(pb_utils.TritonError("x").code(), pb_utils.TritonError.INTERNAL)


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for _ in requests:
            test = unittest.main("model", exit=False)
            responses.append(reply({"ok": test.result.wasSuccessful(), "ran": test.result.testsRun}))
        return responses
'''

# Answers with its process id; the dead-worker test kills its worker.
PLAIN = COMMON + r'''
class TritonPythonModel:
    def execute(self, requests):
        return [reply({"pid": os.getpid(), "marker": self.marker}) for _ in requests]

    def initialize(self, args):
        parameters = json.loads(args["model_config"]).get("parameters", {})
        self.marker = parameters.get("marker", {}).get("string_value", "repository")
'''

LOADEE_PBTXT = """
backend: "python"
input [ { name: "CASE" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_STRING dims: [ 1 ] } ]
"""
LOADEE_CONFIG = {
    "backend": "python",
    "max_batch_size": 0,
    "input": [{"name": "CASE", "data_type": "TYPE_STRING", "dims": [1]}],
    "output": [{"name": "OUT", "data_type": "TYPE_STRING", "dims": [1]}],
}


def build(repo: Path, in_process: bool) -> list[str]:
    """Write every model; the names the server should load at start (the loadee waits for a
    model to load it)."""
    mode = IN_PROCESS if in_process else ""

    def add(name: str, source: str, config: str = IO, extra: str = "") -> None:
        write_model(repo, name, config + extra + mode, source)

    add("api", API)
    (repo / "api" / "1" / "helper.py").write_text(HELPER)
    add("async_api", ASYNC_API)
    add("stream", STREAM, extra=DECOUPLED)
    add("overlap", OVERLAP, extra=DECOUPLED)
    add("ready", READY)
    add("auto", AUTO, config=AUTO_CONFIG)
    add("auto_bad", AUTO_BAD, config=AUTO_CONFIG)
    add("init_bls", INIT_BLS)
    add("metered", METERED, extra="instance_group [ { count: 2 kind: KIND_CPU } ]\n")
    add("selftest", SELFTEST)
    add("plain", PLAIN)
    # Loaded by `api` (in a worker process, whatever the mode), which reads its config.json.
    write_model(repo, "loadee", LOADEE_PBTXT, PLAIN, files={"config.json": json.dumps(LOADEE_CONFIG).encode()})
    return [p.name for p in sorted(repo.iterdir()) if p.name != "loadee"]

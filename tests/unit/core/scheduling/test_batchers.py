"""Scheduling logic of the dynamic and sequence batchers, with an in-process fake instance.

The fake instance records which requests each `execute` call received and answers every
request with its own input (plus the sequence state), so batching and splitting are visible.
Instances can be held on a gate, which is how these tests make requests queue up.
"""

from __future__ import annotations

import asyncio
import gc
import time
import weakref
from pathlib import Path

import numpy as np
import pytest
from google.protobuf import text_format

from openinfer._proto import model_config_pb2 as mc
from openinfer.core.backend import InstanceSpec, ModelContext, ModelInstance
from openinfer.core.errors import InternalError, InvalidArgumentError, UnavailableError
from openinfer.core.model import LoadedModel
from openinfer.core.observability.stats import ExecutionTiming, ModelStats
from openinfer.core.requests.responses import UnarySender
from openinfer.core.scheduling import (
    DirectScheduler,
    DynamicBatcher,
    InstancePool,
    SequenceBatcher,
    make_scheduler,
)
from openinfer.core.types import InferRequest, InferResponse, Tensor

pytestmark = pytest.mark.timeout(30)


class FakeInstance(ModelInstance):
    """Answers OUTPUT = INPUT (+ STATE_IN when present); echoes control inputs as outputs."""

    def __init__(self, name: str = "fake_0", fail: bool = False) -> None:
        self.spec = InstanceSpec(name, mc.ModelInstanceGroup.KIND_CPU, 0, mc.ModelInstanceGroup())
        self.batches: list[list[str]] = []
        self.gate: asyncio.Event | None = None
        self.fail = fail

    async def execute(self, requests, senders):
        self.batches.append([r.id for r in requests])
        if self.gate is not None:
            await self.gate.wait()
        await asyncio.sleep(0)
        if self.fail:
            raise RuntimeError("boom")
        for request, sender in zip(requests, senders):
            data = request.input("INPUT").data
            state = request.input("STATE_IN")
            out = data + state.data if state is not None else data
            outputs = [Tensor("OUTPUT", "INT32", out.shape, out)]
            if state is not None:
                outputs.append(Tensor("STATE_OUT", "INT32", out.shape, out))
            for name in ("START", "END", "READY", "CORRID"):
                tensor = request.input(name)
                if tensor is not None:
                    outputs.append(Tensor(name, tensor.datatype, tensor.shape, tensor.data))
            sender.send(InferResponse(request.model_name, "1", request.id, outputs))
        return ExecutionTiming(1, 2, 3)


def config(text: str) -> mc.ModelConfig:
    cfg = mc.ModelConfig()
    text_format.Parse(text, cfg)
    cfg.name = cfg.name or "m"
    return cfg


BATCHING = """
max_batch_size: 8
input { name: "INPUT" data_type: TYPE_INT32 dims: [ -1 ] }
output { name: "OUTPUT" data_type: TYPE_INT32 dims: [ -1 ] }
"""


def request(rid: str, value: int = 0, size: int = 1, width: int = 1, **fields) -> InferRequest:
    data = np.full((size, width), value, dtype=np.int32)
    req = InferRequest("m", id=rid, inputs=[Tensor("INPUT", "INT32", data.shape, data)], **fields)
    req.batch_size = size
    return req


_scheduling: set[asyncio.Task] = set()


async def submit(scheduler, req: InferRequest) -> UnarySender:
    """Hand a request over as the core does. A scheduler may run it in the caller's task, so
    that is a task of its own here; it starts at the test's next yield, submissions in order."""
    sender = UnarySender(req)
    task = asyncio.ensure_future(scheduler.schedule(req, sender))
    _scheduling.add(task)
    task.add_done_callback(_scheduling.discard)
    return sender


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def dynamic(text: str, instances: list[FakeInstance] | None = None) -> tuple[DynamicBatcher, list[FakeInstance], ModelStats]:
    instances = instances or [FakeInstance()]
    stats = ModelStats("m", "1")
    return DynamicBatcher(config(text), InstancePool(list(instances)), stats), instances, stats


# ------------------------------------------------------------------ dynamic batcher
async def test_concurrent_requests_become_one_execute_and_split_back():
    batcher, [inst], stats = dynamic(BATCHING + "dynamic_batching {}")
    inst.gate = asyncio.Event()
    first = await submit(batcher, request("r0", 100))
    await settle()
    senders = [await submit(batcher, request(f"r{i}", i, size=1 + i % 2)) for i in range(1, 6)]
    await settle()
    assert inst.batches == [["r0"]]
    inst.gate.set()
    results = await asyncio.gather(first.future, *(s.future for s in senders))
    assert inst.batches == [["r0"], ["r1", "r2", "r3", "r4", "r5"]]
    for i, response in enumerate(results):
        out = response.outputs[0].data
        assert response.id == f"r{i}"
        assert out.shape == ((1 + i % 2 if i else 1), 1)
        assert (out == (i if i else 100)).all()
    # one execution per batch; batch_size is the summed batch dimension (2+1+2+1+2)
    assert stats.execution_count == 2
    assert stats.inference_count == 1 + 8
    assert sorted(stats.batches) == [1, 8]
    assert stats.compute_infer.count == 6


async def test_a_batch_is_let_go_once_answered_though_no_other_batch_follows():
    """The batch loop waits for the next batch with nothing of the last one held: a model
    in a worker keeps its ring pinned under every answer still alive."""
    batcher, [inst], _ = dynamic(BATCHING + "dynamic_batching {}")
    inst.gate = asyncio.Event()
    senders = [await submit(batcher, request(f"r{i}", i)) for i in range(4)]
    await settle()
    inst.gate.set()
    answers = [await s.future for s in senders]
    assert len(inst.batches) == 2  # r0 alone, then r1..r3 batched by the loop
    alive = [weakref.ref(a.outputs[0].data) for a in answers]
    del answers, senders
    await settle()
    gc.collect()
    assert [ref() for ref in alive] == [None] * 4


async def test_a_request_cancelled_while_queued_never_runs():
    batcher, [inst], _ = dynamic(BATCHING + "dynamic_batching { default_queue_policy { max_queue_size: 2 } }")
    inst.gate = asyncio.Event()
    first = await submit(batcher, request("r0"))
    await settle()
    gone, kept = await submit(batcher, request("r1")), await submit(batcher, request("r2"))
    await settle()
    assert batcher.queue.size == 2
    gone.cancel()  # what the core does when the caller disconnects
    assert batcher.queue.size == 1
    third = await submit(batcher, request("r3"))  # the freed place in the queue is usable
    await settle()
    inst.gate.set()
    await asyncio.gather(first.future, kept.future, third.future)
    assert inst.batches == [["r0"], ["r2", "r3"]]
    assert gone.result is None and gone.error is None  # nothing was delivered to it


async def test_batch_stops_at_max_batch_size():
    batcher, [inst], _ = dynamic(BATCHING.replace("max_batch_size: 8", "max_batch_size: 4") + "dynamic_batching {}")
    inst.gate = asyncio.Event()
    senders = [await submit(batcher, request(f"r{i}", i, size=2)) for i in range(5)]
    inst.gate.set()
    await asyncio.gather(*(s.future for s in senders))
    # r0 found the instance free and ran alone; the rest gathered meanwhile, two per batch
    assert inst.batches == [["r0"], ["r1", "r2"], ["r3", "r4"]]


async def test_preferred_batch_sizes_are_sent_first():
    batcher, [inst], _ = dynamic(BATCHING + "dynamic_batching { preferred_batch_size: [ 2, 4 ] }")
    inst.gate = asyncio.Event()
    senders = [await submit(batcher, request("r0"))]
    await settle()
    senders += [await submit(batcher, request(f"r{i}", i)) for i in range(1, 8)]
    inst.gate.set()
    await asyncio.gather(*(s.future for s in senders))
    # r0 alone (the instance was free), then the largest preferred size, then what is left
    assert [len(b) for b in inst.batches] == [1, 4, 2, 1]


async def test_queue_delay_waits_for_a_preferred_batch():
    batcher, [inst], _ = dynamic(
        BATCHING + "dynamic_batching { preferred_batch_size: [ 3 ] max_queue_delay_microseconds: 30000000 }"
    )
    a = await submit(batcher, request("a"))
    b = await submit(batcher, request("b"))
    await asyncio.sleep(0.05)
    assert inst.batches == []  # two requests: not preferred, and the 30 s delay has not run out
    c = await submit(batcher, request("c"))
    await asyncio.gather(a.future, b.future, c.future)
    assert inst.batches == [["a", "b", "c"]]


async def test_queue_delay_sends_what_it_has_when_it_runs_out():
    batcher, [inst], _ = dynamic(
        BATCHING + "dynamic_batching { preferred_batch_size: [ 4 ] max_queue_delay_microseconds: 20000 }"
    )
    a = await submit(batcher, request("a"))
    b = await submit(batcher, request("b"))
    await asyncio.gather(a.future, b.future)
    assert inst.batches == [["a", "b"]]


async def test_variable_shapes_must_match_within_a_batch():
    batcher, [inst], _ = dynamic(BATCHING + "dynamic_batching {}")
    inst.gate = asyncio.Event()
    first = await submit(batcher, request("r0"))
    await settle()
    senders = [await submit(batcher, request(f"r{i}", width=w)) for i, w in ((1, 2), (2, 2), (3, 3))]
    inst.gate.set()
    await asyncio.gather(first.future, *(s.future for s in senders))
    assert inst.batches == [["r0"], ["r1", "r2"], ["r3"]]


async def test_ragged_inputs_batch_across_shapes():
    ragged = BATCHING.replace("dims: [ -1 ] }", "dims: [ -1 ] allow_ragged_batch: true }", 1)
    batcher, [inst], _ = dynamic(ragged + "dynamic_batching {}")
    inst.gate = asyncio.Event()
    first = await submit(batcher, request("r0"))
    await settle()
    senders = [await submit(batcher, request(f"r{i}", width=i)) for i in (1, 2, 3)]
    inst.gate.set()
    await asyncio.gather(first.future, *(s.future for s in senders))
    assert inst.batches == [["r0"], ["r1", "r2", "r3"]]


async def test_priority_levels_order_the_queue():
    text = BATCHING.replace("max_batch_size: 8", "max_batch_size: 1")
    batcher, [inst], _ = dynamic(text + "dynamic_batching { priority_levels: 3 default_priority_level: 2 }")
    inst.gate = asyncio.Event()
    senders = [await submit(batcher, request("busy"))]
    await settle()
    for rid, priority in (("low", 3), ("default", 0), ("high", 1), ("out_of_range", 9)):
        senders.append(await submit(batcher, request(rid, priority=priority)))
    inst.gate.set()
    await asyncio.gather(*(s.future for s in senders))
    assert [b[0] for b in inst.batches] == ["busy", "high", "default", "out_of_range", "low"]


async def test_full_queue_is_rejected_with_tritons_error():
    batcher, [inst], _ = dynamic(BATCHING + "dynamic_batching { default_queue_policy { max_queue_size: 2 } }")
    inst.gate = asyncio.Event()
    running = await submit(batcher, request("run"))
    await settle()
    queued = [await submit(batcher, request(f"q{i}")) for i in range(2)]
    rejected = await submit(batcher, request("extra"))
    with pytest.raises(UnavailableError, match=r"^\[request id: extra\] Exceeds maximum queue size$"):
        await rejected.future
    assert rejected.request.state.failure_reason == "REJECTED"
    inst.gate.set()
    await asyncio.gather(running.future, *(s.future for s in queued))


async def test_per_level_queue_policy_overrides_the_default():
    text = BATCHING + """dynamic_batching {
        priority_levels: 2 default_priority_level: 2
        default_queue_policy { max_queue_size: 1 }
        priority_queue_policy { key: 1 value: { max_queue_size: 3 } }
    }"""
    batcher, [inst], _ = dynamic(text)
    inst.gate = asyncio.Event()
    senders = [await submit(batcher, request("run"))]
    await settle()
    senders += [await submit(batcher, request(f"hi{i}", priority=1)) for i in range(3)]
    senders.append(await submit(batcher, request("lo0", priority=2)))
    lo1 = await submit(batcher, request("lo1", priority=2))
    with pytest.raises(UnavailableError, match="Exceeds maximum queue size"):
        await lo1.future
    inst.gate.set()
    await asyncio.gather(*(s.future for s in senders))


async def test_request_timeout_expires_in_the_queue():
    text = BATCHING + "dynamic_batching { default_queue_policy { allow_timeout_override: true } }"
    batcher, [inst], _ = dynamic(text)
    inst.gate = asyncio.Event()
    running = await submit(batcher, request("run"))
    await settle()
    late = await submit(batcher, request("late", timeout_us=20_000))
    patient = await submit(batcher, request("patient"))
    with pytest.raises(UnavailableError, match=r"Request timeout expired"):
        await late.future
    assert late.request.state.failure_reason == "REJECTED"
    inst.gate.set()
    await asyncio.gather(running.future, patient.future)
    assert ["late"] not in inst.batches and "late" not in inst.batches[-1]


async def test_a_request_past_its_deadline_before_it_could_run_is_rejected_not_run():
    """Triton checks the deadline as the batch forms: a free instance does not save a request
    whose timeout ran out on its way in (REJECT); under DELAY it still runs."""
    text = BATCHING + "dynamic_batching { default_queue_policy { allow_timeout_override: true } }"
    batcher, [inst], _ = dynamic(text)
    late = request("late", timeout_us=5)
    late.arrival_ns = time.perf_counter_ns() - 1_000_000  # arrived a millisecond ago
    sender = await submit(batcher, late)
    with pytest.raises(UnavailableError, match=r"^\[request id: late\] Request timeout expired$"):
        await sender.future
    assert late.state.failure_reason == "REJECTED" and inst.batches == []
    on_time = request("on_time", timeout_us=5_000_000)
    on_time.arrival_ns = time.perf_counter_ns()
    assert (await (await submit(batcher, on_time)).future).id == "on_time"

    delayed, [inst], _ = dynamic(BATCHING + """dynamic_batching { default_queue_policy {
        timeout_action: DELAY allow_timeout_override: true } }""")
    late = request("late", timeout_us=5)
    late.arrival_ns = time.perf_counter_ns() - 1_000_000
    assert (await (await submit(delayed, late)).future).id == "late"


async def test_request_timeout_is_ignored_without_override():
    text = BATCHING + "dynamic_batching { }"
    batcher, [inst], _ = dynamic(text)
    inst.gate = asyncio.Event()
    running = await submit(batcher, request("run"))
    await settle()
    waiting = await submit(batcher, request("w", timeout_us=1_000))
    await asyncio.sleep(0.03)
    inst.gate.set()
    response = await waiting.future
    await running.future
    assert response.id == "w"


async def test_default_timeout_with_delay_action_moves_requests_back():
    text = BATCHING.replace("max_batch_size: 8", "max_batch_size: 1") + """dynamic_batching {
        default_queue_policy { timeout_action: DELAY default_timeout_microseconds: 10000 }
    }"""
    batcher, [inst], _ = dynamic(text)
    inst.gate = asyncio.Event()
    running = await submit(batcher, request("run"))
    await settle()
    old = await submit(batcher, request("old"))
    await asyncio.sleep(0.05)  # "old" times out and is delayed behind later requests
    new = await submit(batcher, request("new"))
    inst.gate.set()
    await asyncio.gather(running.future, old.future, new.future)
    assert [b[0] for b in inst.batches] == ["run", "new", "old"]


async def test_override_may_only_shorten_the_default_timeout():
    from openinfer.core.scheduling.queues import QueuePolicy

    policy = QueuePolicy(default_timeout_us=1000, allow_timeout_override=True)
    assert policy.timeout_us(request("a", timeout_us=500)) == 500
    assert policy.timeout_us(request("a", timeout_us=5000)) == 1000
    assert policy.timeout_us(request("a")) == 1000
    assert QueuePolicy(allow_timeout_override=True).timeout_us(request("a", timeout_us=7)) == 7
    assert QueuePolicy().timeout_us(request("a", timeout_us=7)) == 0


async def test_failed_execute_fails_every_request_of_the_batch():
    batcher, _, stats = dynamic(BATCHING + "dynamic_batching {}", [FakeInstance(fail=True)])
    senders = [await submit(batcher, request(f"r{i}")) for i in range(3)]
    for sender in senders:
        with pytest.raises(InternalError, match="model 'm' failed: boom"):
            await sender.future
    assert stats.execution_count == 0


async def test_preserve_ordering_holds_younger_batches():
    fast, slow = FakeInstance("fast"), FakeInstance("slow")
    text = BATCHING.replace("max_batch_size: 8", "max_batch_size: 1")
    batcher, _, _ = dynamic(text + "dynamic_batching { preserve_ordering: true }", [slow, fast])
    slow.gate = asyncio.Event()
    done: list[str] = []
    first = await submit(batcher, request("first"))
    second = await submit(batcher, request("second"))
    for sender in (first, second):
        sender.future.add_done_callback(lambda f: done.append(f.result().id))
    await settle()
    assert slow.batches == [["first"]] and fast.batches == [["second"]]
    await asyncio.sleep(0.02)
    assert done == []  # "second" has finished on the fast instance but waits for "first"
    slow.gate.set()
    await asyncio.gather(first.future, second.future)
    assert done == ["first", "second"]


async def test_without_preserve_ordering_fast_batches_answer_first():
    fast, slow = FakeInstance("fast"), FakeInstance("slow")
    text = BATCHING.replace("max_batch_size: 8", "max_batch_size: 1")
    batcher, _, _ = dynamic(text + "dynamic_batching { }", [slow, fast])
    slow.gate = asyncio.Event()
    first = await submit(batcher, request("first"))
    second = await submit(batcher, request("second"))
    await second.future
    assert not first.future.done()
    slow.gate.set()
    await first.future


async def test_non_batching_model_runs_one_request_per_execute():
    text = """
        max_batch_size: 0
        input { name: "INPUT" data_type: TYPE_INT32 dims: [ -1, -1 ] }
        output { name: "OUTPUT" data_type: TYPE_INT32 dims: [ -1, -1 ] }
        dynamic_batching { }
    """
    batcher, [inst], _ = dynamic(text)
    inst.gate = asyncio.Event()
    senders = [await submit(batcher, request(f"r{i}")) for i in range(3)]
    inst.gate.set()
    await asyncio.gather(*(s.future for s in senders))
    assert inst.batches == [["r0"], ["r1"], ["r2"]]


@pytest.mark.parametrize(
    "text, message",
    [
        ("dynamic_batching { preferred_batch_size: [ 16 ] }", "preferred size must be <= max batch size for m"),
        ("dynamic_batching { preferred_batch_size: [ 0 ] }", "preferred size must be positive for m"),
        ("dynamic_batching { priority_levels: 2 default_priority_level: 3 }", r"default priority level must be in range \[1, 2\]"),
        (
            (
                "dynamic_batching { priority_levels: 2 default_priority_level: 1 "
                "priority_queue_policy { key: 5 value: {} } }"
            ),
            r"priority queue policy must have priority level in range \[1, 2\]",
        ),
    ],
)
async def test_bad_dynamic_batching_config_is_refused(text, message):
    with pytest.raises(InvalidArgumentError, match=message):
        dynamic(BATCHING + text)


async def test_stop_fails_queued_requests():
    batcher, _, _ = dynamic(
        BATCHING + "dynamic_batching { max_queue_delay_microseconds: 30000000 preferred_batch_size: 4 }"
    )
    sender = await submit(batcher, request("r0"))
    await settle()
    await batcher.stop()
    with pytest.raises(UnavailableError, match="unloaded"):
        await sender.future
    after = await submit(batcher, request("r1"))
    with pytest.raises(UnavailableError):
        await after.future


# ------------------------------------------------------------------ sequence batcher
SEQUENCE = """
max_batch_size: {mbs}
input {{ name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] }}
output {{ name: "OUTPUT" data_type: TYPE_INT32 dims: [ 1 ] }}
sequence_batching {{
  max_sequence_idle_microseconds: {idle}
  {strategy}
  control_input [
    {{ name: "START" control [ {{ kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] }} ] }},
    {{ name: "END" control [ {{ kind: CONTROL_SEQUENCE_END fp32_false_true: [ 0, 1 ] }} ] }},
    {{ name: "READY" control [ {{ kind: CONTROL_SEQUENCE_READY bool_false_true: [ false, true ] }} ] }},
    {{ name: "CORRID" control [ {{ kind: CONTROL_SEQUENCE_CORRID data_type: {corrid} }} ] }}
  ]
  state [ {{ input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_INT32 dims: [ 1 ]
             initial_state: {{ data_type: TYPE_INT32 dims: [ 1 ] zero_data: true name: "zero" }} }} ]
}}
"""


def sequencer(
    mbs: int = 2, instances: int = 1, idle: int = 30_000_000, strategy: str = "direct { }", corrid: str = "TYPE_UINT64"
) -> tuple[SequenceBatcher, list[FakeInstance], ModelStats]:
    fakes = [FakeInstance(f"fake_{i}") for i in range(instances)]
    stats = ModelStats("m", "1")
    cfg = config(SEQUENCE.format(mbs=mbs, idle=idle, strategy=strategy, corrid=corrid))
    return SequenceBatcher(cfg, list(fakes), InstancePool(list(fakes)), stats, Path(".")), fakes, stats


def seq_request(rid: str, seq: int | str, value: int, start: bool = False, end: bool = False, batching: bool = True):
    shape = (1, 1) if batching else (1,)
    data = np.full(shape, value, dtype=np.int32)
    req = InferRequest("m", id=rid, inputs=[Tensor("INPUT", "INT32", shape, data)])
    req.sequence_id, req.sequence_start, req.sequence_end = seq, start, end
    return req


def value(response: InferResponse, name: str = "OUTPUT"):
    return next(t.data for t in response.outputs if t.name == name).reshape(-1)[0]


async def test_sequence_state_and_controls_flow_between_requests():
    batcher, _, _ = sequencer()
    outs = []
    for i, (start, end) in enumerate([(True, False), (False, False), (False, True)]):
        sender = await submit(batcher, seq_request(f"r{i}", 7, 10 * (i + 1), start, end))
        outs.append(await sender.future)
    assert [value(r) for r in outs] == [10, 30, 60]  # running sum kept as implicit state
    assert [int(value(r, "START")) for r in outs] == [1, 0, 0]
    assert [float(value(r, "END")) for r in outs] == [0.0, 0.0, 1.0]
    assert all(bool(value(r, "READY")) for r in outs)
    assert [int(value(r, "CORRID")) for r in outs] == [7, 7, 7]
    first = outs[0]
    assert {t.name for t in first.outputs} == {"OUTPUT", "START", "END", "READY", "CORRID"}  # no STATE_OUT
    start = next(t for t in first.outputs if t.name == "START")
    assert start.datatype == "INT32" and start.shape == (1, 1)
    corrid = next(t for t in first.outputs if t.name == "CORRID")
    assert corrid.datatype == "UINT64"
    # the sequence has ended: a request without START is refused
    sender = await submit(batcher, seq_request("late", 7, 1))
    with pytest.raises(
        InvalidArgumentError,
        match=r"^inference request for sequence 7 to model 'm' must specify the START flag on the first "
        r"request of the sequence$",
    ):
        await sender.future


async def test_sequence_errors_match_triton():
    batcher, _, _ = sequencer()
    sender = await submit(batcher, seq_request("x", 99, 1))
    with pytest.raises(InvalidArgumentError, match="for sequence 99 to model 'm' must specify the START flag"):
        await sender.future
    sender = await submit(batcher, seq_request("", 0, 1, start=True))
    with pytest.raises(InvalidArgumentError, match="must specify a non-zero or non-empty correlation ID"):
        await sender.future
    big = seq_request("b", 5, 1, start=True)
    big.batch_size = 2
    sender = await submit(batcher, big)
    with pytest.raises(InvalidArgumentError, match="must specify batch-size 1 due to requirements of sequence batcher"):
        await sender.future
    sender = await submit(batcher, seq_request("s", "text-id", 1, start=True))
    with pytest.raises(InvalidArgumentError, match="expects a unsigned integer correlation ID"):
        await sender.future


async def test_request_id_is_the_sequence_id_when_the_parameter_is_absent():
    batcher, _, _ = sequencer()
    r1 = await submit(batcher, seq_request("42", 0, 5, start=True))
    assert value(await r1.future, "CORRID") == 42
    r2 = await submit(batcher, seq_request("42", 0, 6))
    assert value(await r2.future) == 11
    r3 = await submit(batcher, seq_request("43", 0, 6))  # no START for 43
    with pytest.raises(InvalidArgumentError, match="sequence 43 to model 'm' must specify the START flag"):
        await r3.future


async def test_string_correlation_ids():
    batcher, _, _ = sequencer(corrid="TYPE_STRING")
    r1 = await submit(batcher, seq_request("a", "user-1", 2, start=True))
    assert value(await r1.future, "CORRID") == b"user-1"
    r2 = await submit(batcher, seq_request("b", "user-1", 3, end=True))
    assert value(await r2.future) == 5


async def test_direct_batches_across_slots_and_backlogs_extra_sequences():
    batcher, [inst], _ = sequencer(mbs=2)
    inst.gate = asyncio.Event()
    a0 = await submit(batcher, seq_request("a0", 1, 1, start=True))
    await settle()
    b0 = await submit(batcher, seq_request("b0", 2, 2, start=True))
    a1 = await submit(batcher, seq_request("a1", 1, 10))
    c0 = await submit(batcher, seq_request("c0", 3, 3, start=True))  # both slots taken: backlog
    inst.gate.set()
    await asyncio.gather(a0.future, b0.future, a1.future)
    assert inst.batches == [["a0"], ["a1", "b0"]] or inst.batches == [["a0"], ["b0", "a1"]]
    assert value(a1.future.result()) == 11
    assert not c0.future.done()
    end = await submit(batcher, seq_request("b1", 2, 0, end=True))  # frees a slot
    await end.future
    assert value(await c0.future) == 3


async def test_requests_of_one_sequence_never_share_a_batch():
    batcher, [inst], _ = sequencer(mbs=4)
    inst.gate = asyncio.Event()
    senders = [await submit(batcher, seq_request("r0", 1, 1, start=True))]
    await settle()
    senders += [await submit(batcher, seq_request(f"r{i}", 1, 1)) for i in range(1, 4)]
    inst.gate.set()
    results = await asyncio.gather(*(s.future for s in senders))
    assert inst.batches == [["r0"], ["r1"], ["r2"], ["r3"]]
    assert [value(r) for r in results] == [1, 2, 3, 4]


async def test_idle_sequences_expire():
    batcher, _, _ = sequencer(idle=20_000)
    first = await submit(batcher, seq_request("a", 5, 1, start=True))
    await first.future
    await asyncio.sleep(0.1)
    late = await submit(batcher, seq_request("b", 5, 1))
    with pytest.raises(InvalidArgumentError, match="sequence 5 to model 'm' must specify the START flag"):
        await late.future
    assert batcher.active == {}


async def test_restarting_a_sequence_resets_its_state():
    batcher, _, _ = sequencer()
    for rid, start, v in (("a", True, 4), ("b", False, 4), ("c", True, 1)):
        sender = await submit(batcher, seq_request(rid, 9, v, start=start))
        last = await sender.future
    assert value(last) == 1


async def test_oldest_batches_across_sequences_and_keeps_each_in_order():
    batcher, fakes, stats = sequencer(mbs=4, instances=2, strategy="oldest { max_candidate_sequences: 8 }")
    for fake in fakes:
        fake.gate = asyncio.Event()
    starts = [await submit(batcher, seq_request(f"s{n}", n, n, start=True)) for n in (1, 2, 3)]
    follow = [await submit(batcher, seq_request(f"f{n}", n, 100)) for n in (1, 2, 3)]
    await settle()
    for fake in fakes:
        fake.gate.set()
    await asyncio.gather(*(s.future for s in starts + follow))
    batches = [b for f in fakes for b in f.batches]
    assert sorted(batches) == [["f1", "f2", "f3"], ["s1", "s2", "s3"]]
    assert [value(s.future.result()) for s in follow] == [101, 102, 103]
    assert stats.execution_count == 2 and stats.inference_count == 6


async def test_oldest_respects_max_candidate_sequences():
    batcher, _, _ = sequencer(mbs=4, strategy="oldest { max_candidate_sequences: 1 }")
    a = await submit(batcher, seq_request("a", 1, 1, start=True))
    b = await submit(batcher, seq_request("b", 2, 1, start=True))
    await a.future
    await asyncio.sleep(0.02)
    assert not b.future.done()  # waits for sequence 1 to end
    end = await submit(batcher, seq_request("a_end", 1, 1, end=True))
    await asyncio.gather(end.future, b.future)


async def test_bad_control_config_is_refused():
    text = SEQUENCE.format(mbs=1, idle=0, strategy="", corrid="TYPE_FP32")
    with pytest.raises(InvalidArgumentError, match="CORRID' for model 'm' of kind CONTROL_SEQUENCE_CORRID must have data type"):
        SequenceBatcher(config(text), [], InstancePool([]), ModelStats("m", "1"), Path("."))
    text = SEQUENCE.format(mbs=1, idle=0, strategy="", corrid="TYPE_UINT64").replace("int32_false_true: [ 0, 1 ]", "")
    with pytest.raises(InvalidArgumentError, match="'START' for model 'm' of kind CONTROL_SEQUENCE_START must specify exactly one"):
        SequenceBatcher(config(text), [], InstancePool([]), ModelStats("m", "1"), Path("."))


async def test_non_batching_sequence_model_gets_unbatched_controls():
    batcher, _, _ = sequencer(mbs=0)
    sender = await submit(batcher, seq_request("a", 3, 2, start=True, batching=False))
    response = await sender.future
    start = next(t for t in response.outputs if t.name == "START")
    assert start.shape == (1,)
    assert value(response) == 2


# ------------------------------------------------------------------ factory and validation
def loaded(text: str, instances: list[FakeInstance]) -> LoadedModel:
    cfg = config(text)
    ctx = ModelContext("m", 1, cfg, Path("."), Path("1"), "fake")
    model = LoadedModel(ctx, backend=None)  # type: ignore[arg-type]
    model.instances = list(instances)
    return model


async def test_make_scheduler_follows_the_config():
    inst = [FakeInstance()]
    assert isinstance(make_scheduler(loaded(BATCHING, inst), InstancePool(inst)), DirectScheduler)
    dyn = loaded(BATCHING + "dynamic_batching {}", inst)
    assert isinstance(make_scheduler(dyn, InstancePool(inst)), DynamicBatcher)
    seq = loaded(SEQUENCE.format(mbs=2, idle=0, strategy="", corrid="TYPE_UINT64"), inst)
    assert isinstance(make_scheduler(seq, InstancePool(inst)), SequenceBatcher)


async def test_injected_inputs_are_not_required_from_clients():
    text = SEQUENCE.format(mbs=2, idle=0, strategy="", corrid="TYPE_UINT64") + """
        input { name: "START" data_type: TYPE_INT32 dims: [ 1 ] }
    """
    model = loaded(text, [FakeInstance()])
    req = seq_request("a", 1, 1, start=True)
    model.validate(req)  # START is listed as an input but comes from the batcher
    assert req.batch_size == 1
    with pytest.raises(InvalidArgumentError, match="unexpected inference input 'STATE_IN'"):
        bad = seq_request("b", 1, 1)
        bad.inputs.append(Tensor("STATE_IN", "INT32", (1, 1), np.zeros((1, 1), np.int32)))
        model.validate(bad)


async def test_a_crashed_batch_loop_fails_waiting_requests_and_restarts():
    batcher, [inst], _ = dynamic(BATCHING + "dynamic_batching {}")
    real = batcher.shape.compatible
    calls = []

    def broken(first, other):
        calls.append(1)
        raise RuntimeError("bad shape logic")

    inst.gate = asyncio.Event()
    first = await submit(batcher, request("r0"))
    await settle()
    batcher.shape.compatible = broken  # the next batch with two requests trips it
    waiting = [await submit(batcher, request(f"r{i}")) for i in (1, 2)]
    inst.gate.set()
    await first.future
    for sender in waiting:
        with pytest.raises(InternalError, match="the batcher of model 'm' failed: bad shape logic"):
            await sender.future
    batcher.shape.compatible = real
    again = await submit(batcher, request("r3"))
    assert (await again.future).id == "r3"

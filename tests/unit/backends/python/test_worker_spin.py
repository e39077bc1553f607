"""The worker's wait for its next request: polls only while requests come back to back."""

from __future__ import annotations

import asyncio
import os
import select
import socket
import subprocess
import sys
import threading

import pytest

from openinfer.backends.python import ipc, spin
from openinfer.backends.python import ring as shared_ring
from openinfer.backends.python.wire import Done


@pytest.fixture
def pair():
    ours, theirs = socket.socketpair()
    yield ours, theirs
    ours.close()
    theirs.close()


def _readable(sock: socket.socket) -> select.poll:
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLIN)
    return poller


def test_a_worker_that_has_seen_no_request_yet_sleeps_at_once():
    assert spin.Spinner().budget_ns == 0


def test_requests_that_come_back_to_back_earn_a_polling_budget_of_twice_their_gap(pair):
    ours, theirs = pair
    spinner = spin.Spinner(limit_ns=10_000_000)
    theirs.send(b"x")  # already there: every wait below returns at once
    for _ in range(20):
        spinner.wait(_readable(ours))
    assert 0 < spinner.mean_gap_ns < 1_000_000
    assert spinner.budget_ns == int(2 * spinner.mean_gap_ns)


def test_the_budget_never_passes_the_limit():
    spinner = spin.Spinner(limit_ns=1_000_000)
    spinner.mean_gap_ns = 900_000
    assert spinner.budget_ns == 1_000_000


def test_requests_further_apart_than_the_limit_stop_the_polling(pair):
    ours, theirs = pair
    spinner = spin.Spinner(limit_ns=1_000)
    spinner.mean_gap_ns = 100  # it was polling
    assert spinner.budget_ns > 0
    for _ in range(8):  # each request comes 5 ms after the worker began to wait
        timer = threading.Timer(0.005, theirs.send, (b"x",))
        timer.start()
        spinner.wait(_readable(ours))
        timer.join()
        ours.recv(16)
    assert spinner.budget_ns == 0


def test_a_limit_of_zero_never_polls():
    spinner = spin.Spinner(limit_ns=0)
    spinner.mean_gap_ns = 0
    assert spinner.budget_ns == 0


def _waiting(sock: socket.socket, gap_ns: int) -> tuple[spin.Spinner, ipc.BlockingChannel]:
    """A channel and a spinner that has seen gaps of `gap_ns` (0: long ones, so it sleeps)."""
    spinner = spin.Spinner()
    spinner.mean_gap_ns = gap_ns or spinner.limit_ns
    return spinner, ipc.BlockingChannel(sock)


@pytest.mark.parametrize("gap_ns", [0, 200_000], ids=["sleeping", "polling"])
def test_a_request_that_arrives_during_the_wait_is_received(pair, gap_ns):
    ours, theirs = pair
    spinner, channel = _waiting(ours, gap_ns)
    sender = ipc.BlockingChannel(theirs)
    timer = threading.Timer(0.002, sender.send, (Done("late"),))
    timer.start()
    assert channel.receive(spinner.wait) == Done("late")
    timer.join()


@pytest.mark.parametrize("gap_ns", [0, 200_000], ids=["sleeping", "polling"])
def test_the_server_closing_the_channel_ends_the_wait(pair, gap_ns):
    ours, theirs = pair
    spinner, channel = _waiting(ours, gap_ns)
    threading.Timer(0.002, theirs.shutdown, (socket.SHUT_RDWR,)).start()
    with pytest.raises(EOFError):
        channel.receive(spinner.wait)


@pytest.mark.parametrize(("text", "expected"), [(None, None), ("0", 0), (" 250 ", 250)])
def test_a_model_may_set_the_polling_limit_or_leave_the_default(text, expected):
    assert spin.poll_limit_us(text) == expected


@pytest.mark.parametrize("text", ["-5", "1.5", "fast", ""])
def test_a_polling_limit_that_is_not_whole_microseconds_is_refused_with_its_value(text):
    with pytest.raises(ValueError, match=f"worker_poll_us.*'{text}'"):
        spin.poll_limit_us(text)


def test_the_worker_reads_the_limit_the_server_passed_and_keeps_the_default_otherwise():
    assert spin.limit_from_env({spin.POLL_ENV: "0"}, cpus=4) == 0
    assert spin.limit_from_env({spin.POLL_ENV: "250"}, cpus=4) == 250_000
    assert spin.limit_from_env({}, cpus=4) == spin.LIMIT_NS


def test_on_one_cpu_nothing_polls_unless_the_model_asks():
    assert spin.limit_from_env({}, cpus=1) == 0
    assert spin.limit_from_env({spin.POLL_ENV: "250"}, cpus=1) == 250_000


def test_a_process_pinned_to_one_cpu_counts_one():
    """The count a server pinned with `taskset -c 0` (or a container's cpuset) reads."""
    code = "import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); " \
           "from openinfer.backends.python import spin; print(spin.usable_cpus(), spin.limit_from_env({}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["1", "0"]
    assert spin.usable_cpus() <= len(os.sched_getaffinity(0))



# ------------------------------------------------------------------ the server's side


async def _turns(turns: int = 5) -> None:
    """Let the loop turn a few times."""
    for _ in range(turns):
        await asyncio.sleep(0)


async def test_a_server_that_has_seen_no_answer_yet_lets_its_loop_sleep():
    poller = spin.LoopPoller()
    poller.sent()
    assert not poller.turning


async def test_answers_that_come_quickly_earn_the_loop_a_budget_of_twice_their_wait():
    poller = spin.LoopPoller(limit_ns=10_000_000)
    for _ in range(20):
        poller.sent()
        poller.answered()
    assert 0 < poller.mean_gap_ns < 1_000_000
    assert poller.budget_ns == int(2 * poller.mean_gap_ns)


async def test_the_loop_keeps_turning_while_an_answer_is_due_and_serves_other_work():
    poller = spin.LoopPoller(limit_ns=10_000_000)
    poller.mean_gap_ns = 4_000_000  # a budget of 8 ms
    poller.sent()
    assert poller.turning
    other = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().call_later(0.001, other.set_result, "served")
    assert await asyncio.wait_for(other, 1) == "served"
    assert poller.turning  # still within budget, the batch still out
    poller.answered()
    await _turns()
    assert not poller.turning
    assert poller.outstanding == 0


async def test_the_loop_stops_turning_once_the_budget_is_spent():
    poller = spin.LoopPoller(limit_ns=1_000_000)
    poller.mean_gap_ns = 100_000  # a budget of 0.2 ms
    poller.sent()
    await asyncio.sleep(0.01)
    await _turns()
    assert not poller.turning
    assert poller.outstanding == 1  # the answer is still awaited, asleep


async def test_answers_slower_than_the_limit_stop_the_turning():
    poller = spin.LoopPoller(limit_ns=1_000)
    poller.mean_gap_ns = 100  # it was turning
    for _ in range(8):
        poller.sent()
        await asyncio.sleep(0.002)
        poller.answered()
    assert poller.budget_ns == 0


async def test_a_limit_of_zero_never_turns_the_loop():
    poller = spin.LoopPoller(limit_ns=0)
    poller.mean_gap_ns = 0
    poller.sent()
    assert not poller.turning


class _RecordedPoll:
    """A `select.poll` stand-in that records how it was asked: with a zero timeout (polling)
    or with none (sleeping); it reports input at once either way."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def poll(self, *timeout: int) -> list[tuple[int, int]]:
        self.calls.append(timeout)
        return [(0, select.POLLIN)]


@pytest.mark.parametrize(("told", "first_call"), [(False, (0,)), (True, ())], ids=["polls", "sleeps"])
def test_a_worker_told_to_sleep_sleeps_whatever_its_budget(told, first_call):
    spinner = spin.Spinner(limit_ns=10_000_000, told_to_sleep=lambda: told)
    spinner.mean_gap_ns = 100_000  # a budget of 0.2 ms
    readable = _RecordedPoll()
    spinner.wait(readable)
    assert readable.calls == [first_call]


def test_the_hint_crosses_in_the_rings_header():
    sender = shared_ring.Arena.create(ipc.shm_prefix())
    receiver = shared_ring.Arena(sender.name)
    try:
        assert not receiver.told_to_sleep()  # a new ring: poll as the budget says
        sender.tell_to_sleep(True)
        assert receiver.told_to_sleep()
        # The header's other field, what the receiver has released, is not disturbed by it.
        payload = bytes(range(256)) * 400
        assert receiver.take(sender.put(memoryview(payload)), len(payload)) == payload
        assert sender.free() == shared_ring.ARENA_SIZE
        assert receiver.told_to_sleep()
        sender.tell_to_sleep(False)
        assert not receiver.told_to_sleep()
    finally:
        receiver.close()
        sender.close(unlink=True)


async def test_a_loop_not_to_poll_sleeps_whatever_its_budget():
    poller = spin.LoopPoller(limit_ns=10_000_000)
    poller.mean_gap_ns = 4_000_000
    poller.sent(poll=False)
    assert not poller.turning
    assert poller.outstanding == 1  # the answer is still awaited and counted
    poller.sent()
    assert poller.turning

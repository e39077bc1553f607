"""openinfer and Triton 2.51 on one repository; the differences listed after the run.

Runs with `make conformance` (OPENINFER_CONFORMANCE=1): Triton is installed on first use, which
takes minutes and needs the package index, so the ordinary test run skips this directory.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass

import grpc
import httpx
import numpy as np
import pytest
import tritonclient.utils.shared_memory as shm
from tritonclient.grpc import service_pb2_grpc

from . import repository, servers
from .cases import FOUR, ONES, SHM_IN, SHM_OUT, Clients
from .known import KNOWN

ENABLE = "OPENINFER_CONFORMANCE"


@dataclass(frozen=True)
class Difference:
    case: str
    request: str
    ours: dict
    triton: dict


#: Filled by the test as it runs, printed at the end.
DIFFERENCES: list[Difference] = []


@dataclass(frozen=True)
class Peers:
    ours: Clients
    triton: Clients
    triton_process: servers.TritonProcess


def _clients(stack: ExitStack, endpoint: servers.Endpoint) -> Clients:
    http = stack.enter_context(httpx.Client(base_url=endpoint.http_base, timeout=60))
    channel = stack.enter_context(grpc.insecure_channel(endpoint.grpc_target))
    return Clients(http, service_pb2_grpc.GRPCInferenceServiceStub(channel), endpoint.metrics_url)


@pytest.fixture(scope="session")
def peers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Peers]:
    if os.environ.get(ENABLE) != "1":
        pytest.skip(f"the comparison with Triton 2.51 runs with `make conformance` ({ENABLE}=1)")
    work = tmp_path_factory.mktemp("conformance")
    repo = repository.write(work / "repository")
    try:
        ours, triton = servers.start_both(repo, work)
    except LookupError as exc:
        pytest.skip(f"Triton 2.51 cannot run here: {exc}")
    repository.write_later(repo)
    with ExitStack() as stack:
        stack.callback(triton.stop)
        stack.callback(ours.stop)
        _regions(stack)
        yield Peers(_clients(stack, servers.Endpoint("openinfer", ours.http_port, ours.grpc_port, ours.metrics_port)),
                    _clients(stack, triton.endpoint), triton)


def _regions(stack: ExitStack) -> None:
    """The system shared-memory regions the shm cases register (FOUR then ONES in the input one)."""
    for (key, size), values in ((SHM_IN, FOUR + ONES), (SHM_OUT, [0.0] * 8)):
        handle = shm.create_shared_memory_region(key.strip("/"), key, size)
        stack.callback(shm.destroy_shared_memory_region, handle)
        shm.set_shared_memory_region(handle, [np.array(values, np.float32)])


def _show(answer: dict) -> str:
    return json.dumps(answer, ensure_ascii=False, sort_keys=True)[:1500]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Every difference: the request, both answers, and why (or that it is not listed)."""
    if not DIFFERENCES:
        return
    write = terminalreporter.write_line
    terminalreporter.section(f"openinfer and Triton 2.51 answer differently ({len(DIFFERENCES)})")
    for diff in DIFFERENCES:
        write(f"* {diff.case}")
        write(f"  request:   {diff.request}")
        write(f"  openinfer: {_show(diff.ours)}")
        write(f"  Triton:    {_show(diff.triton)}")
        listed = KNOWN.get(diff.case)
        write(f"  why:       {listed.why} (README: {' '.join(listed.readme.split())!r})" if listed else
              "  why:       NOT LISTED: fix openinfer, or list it in README and known.py")

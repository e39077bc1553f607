"""What a run measures: the grids (model settings every server in them shares), the cores the
server may use, and the points of each.

Servers are only compared inside one grid: each grid serves one configuration to all of its
servers, so no server is measured batching against a peer that cannot batch.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

#: The HTTP cells with binary tensors (the binary data extension) instead of JSON.
BINARY = "http-binary"

Point = tuple[str, int, int]  # protocol, FP32 elements per request ([1,N]), concurrency


@dataclass(frozen=True)
class Grid:
    key: str
    title: str
    batching: bool  # max_batch_size 8 and dynamic_batching, else max_batch_size 0
    servers: tuple[str, ...]  # those that can serve this configuration


#: openinfer with its KServe HTTP in one frontend process per server core
#: (`--frontend-processes`): HTTP cells only, on two cores or more.
FRONTEND_PROCESSES = ("openinfer_fp", "openinfer_inproc_fp")

GRIDS = {
    "plain": Grid("plain", "no batching anywhere (max_batch_size: 0, one CPU instance)", False,
                  ("triton", "openinfer", "openinfer_inproc", *FRONTEND_PROCESSES, "mlserver",
                   "mlserver_pw0", "kserve", "asgi_echo", "grpc_echo")),
    # MLServer's adaptive batching waits a fixed time for a batch to fill, which Triton's and
    # openinfer's dynamic batcher (no queue delay) do not: it is left out rather than compared.
    "batching": Grid("batching", "dynamic batching (max_batch_size: 8, dynamic_batching { }, "
                     "one CPU instance)", True, ("triton", "openinfer", "openinfer_inproc")),
}


@dataclass(frozen=True)
class Cores:
    """Which CPUs the server (its workers and stubs included) and the load generator run on."""

    count: int
    server: tuple[int, ...]
    client: tuple[int, ...]  # the same as `server` when they have to share

    @property
    def note(self) -> str:
        shared = set(self.client) & set(self.server)
        where = "sharing them with the load generator" if shared else (
            f"load generator on CPU {','.join(map(str, self.client))}")
        return f"server on CPU {','.join(map(str, self.server))}, {where}"


def cores(count: int, available: list[int] | None = None) -> Cores:
    """The server on the first `count` CPUs this process may use, the client on the rest (on
    all of them when none are left over)."""
    cpus = sorted(os.sched_getaffinity(0)) if available is None else sorted(available)
    if count > len(cpus):
        raise ValueError(f"{count} cores asked for, {len(cpus)} available")
    server = tuple(cpus[:count])
    return Cores(count, server, tuple(cpus[count:]) or tuple(cpus))


def speaks(key: str, protocol: str) -> bool:
    """Whether a server runs cells of `protocol`, known before any server starts."""
    if protocol == BINARY:
        return key in ("triton", "openinfer", "openinfer_inproc", *FRONTEND_PROCESSES, "kserve")
    if key in FRONTEND_PROCESSES:
        return protocol == "http"
    return protocol in {"asgi_echo": ("http",), "grpc_echo": ("grpc",)}.get(key, ("http", "grpc"))


@dataclass(frozen=True)
class Phase:
    """One grid on one core setting: its servers are all up while its points are measured."""

    grid: Grid
    cores: Cores
    servers: tuple[str, ...]
    points: tuple[Point, ...]

    def cells(self) -> int:
        return sum(1 for k in self.servers for p, _, _ in self.points if speaks(k, p))


def points(protocols: list[str], sizes: list[int], binary_sizes: list[int],
           concurrency: list[int]) -> tuple[Point, ...]:
    grid = [(p, size, conc) for p in protocols for size in sizes for conc in concurrency]
    grid += [(BINARY, size, conc) for size in binary_sizes for conc in concurrency]
    return tuple(grid)


def plan(grids: list[str], core_counts: list[int], servers: list[str],
         pts: tuple[Point, ...], available: list[int] | None = None) -> list[Phase]:
    """Every grid on every core setting, each with the asked-for servers that can serve it."""
    phases = []
    for key in grids:
        grid = GRIDS[key]
        chosen = tuple(s for s in servers if s in grid.servers)
        for n in core_counts:
            here = tuple(s for s in chosen if n > 1 or s not in FRONTEND_PROCESSES)
            if here:
                phases.append(Phase(grid, cores(n, available), here, pts))
    return phases

"""What each HTTP client costs per request, measured against the bare ASGI echo.

On a small machine the load generator shares the CPU with the server it measures, so the
cheapest client that still validates answers is the one to use: this is the evidence for the
raw-stream client in ``openinfer.bench.httpconn``.
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

from openinfer.bench.cli import run_v2
from openinfer.bench.options import Options

from . import servers
from .grids import GRIDS
from .peers import ensure_wrk

CONCURRENCY = 16
SECONDS = 3.0


async def _python_client(kind: str, url: str, body: bytes) -> tuple[int, float, float]:
    """Requests done, wall and CPU seconds for httpx or aiohttp with CONCURRENCY tasks."""
    target = f"http://{url}/v2/models/{servers.MODEL}/infer"
    headers = {"Content-Type": "application/json"}
    done = [0]
    stop = time.perf_counter() + SECONDS
    if kind == "httpx":
        import httpx

        client: Any = httpx.AsyncClient(limits=httpx.Limits(max_connections=CONCURRENCY))

        async def one() -> None:
            r = await client.post(target, content=body, headers=headers)
            r.raise_for_status()
            r.json()
    else:
        import aiohttp

        client = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=CONCURRENCY))

        async def one() -> None:
            async with client.post(target, data=body, headers=headers) as r:
                r.raise_for_status()
                await r.json()

    async def loop() -> None:
        while time.perf_counter() < stop:
            await one()
            done[0] += 1

    t0, c0 = time.perf_counter(), time.process_time()
    await asyncio.gather(*(loop() for _ in range(CONCURRENCY)))
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    await (client.aclose() if kind == "httpx" else client.close())
    return done[0], wall, cpu


def measure_all(install: bool = True) -> list[dict[str, Any]]:
    from .suite import write_data

    data, body = write_data(16)
    server = servers.make("asgi_echo", GRIDS["plain"])
    server.start()
    rows: list[dict[str, Any]] = []
    try:
        url = server.url("http")
        opts = Options(model=servers.MODEL, url=url, shapes={"INPUT0": [16]},
                       input_data=str(data), concurrency=[CONCURRENCY], workers=1,
                       measurement_interval_ms=int(SECONDS * 1000), max_trials=1, warmup_ms=300)
        level = run_v2(opts, progress_enabled=False)["levels"][0]
        rows.append({"client": "openinfer bench (raw asyncio streams, uvloop, validating)",
                     "throughput": level["request_throughput"],
                     "cpu_us": level["client"]["cpu_us_per_request"]})
        for kind in ("httpx", "aiohttp"):
            try:
                n, wall, cpu = asyncio.run(_python_client(kind, url, body.read_bytes()))
            except ImportError:
                continue
            rows.append({"client": f"{kind} (asyncio, parses JSON)", "throughput": n / wall,
                         "cpu_us": 1e6 * cpu / max(n, 1)})
        wrk, why = ensure_wrk(install)
        if wrk:
            from .wrk import run

            r = run(wrk, url, servers.MODEL, body, CONCURRENCY, SECONDS, warmup_s=0.5)
            rows.append({"client": "wrk + Lua (validating)", "throughput": r["throughput"],
                         "cpu_us": r["client"]["cpu_us_per_request"]})
        else:
            print(f"client cost: {why}", file=sys.stderr)
    finally:
        server.stop()
    return rows


if __name__ == "__main__":
    for row in measure_all():
        print(f"{row['client']:<60} {row['throughput']:>10,.0f}/s {row['cpu_us']:>8.1f} µs")

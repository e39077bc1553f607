"""Drives the workers through the levels of a run and measures each level.

A level runs until three consecutive measurement windows agree within the stability percentage
(perf_analyzer's rule) or ``max_trials`` windows have passed; with ``--request-count`` it sends
exactly that many requests instead. Server statistics are read before the level starts and after
every in-flight request has finished, so the server's request count must equal ours.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from . import worker as worker_mod
from .control import Control, ModelInfo, stats_delta
from .options import Options
from .progress import Progress
from .stats import is_stable, summarize_ns
from .worker import LevelCommand, Snapshot


class RunError(RuntimeError):
    """The run cannot go on (a worker failed, or the server answered with errors)."""


@dataclass
class LevelResult:
    mode: str  # "concurrency" | "request_rate"
    value: float
    throughput: float = 0.0  # infer/s (requests/s times batch size)
    request_throughput: float = 0.0
    latency_us: dict[str, float] = field(default_factory=dict)
    measured: int = 0  # requests inside the measured windows
    completed: int = 0  # every successful request of the level (warm-up included)
    errors: int = 0
    delayed: int = 0
    windows: int = 0
    stable: bool = False
    client: dict[str, Any] = field(default_factory=dict)
    server: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def auto_workers(opts: Options) -> int:
    """Enough processes that none runs near a full core, leaving a core to a local server.

    Each extra process brings its own gRPC threads and event loop; on a small machine shared
    with the server they cost more than they add (measured on 2 cores: one gRPC worker at 16
    streams beat two), so processes are added per 16 gRPC streams or 32 HTTP connections.
    """
    if opts.workers > 0:
        return opts.workers
    peak = max(opts.concurrency) if not opts.request_rates else max(opts.request_rates) / 2000
    per_worker = 16 if opts.protocol == "grpc" else 32
    cap = max(1, (os.cpu_count() or 1) - 1)
    return max(1, min(cap, math.ceil(peak / per_worker)))


def split(total: float, parts: int, integer: bool = True) -> list[float]:
    if integer:
        t = int(total)
        return [t // parts + (1 if i < t % parts else 0) for i in range(parts)]
    return [total / parts] * parts


class Runner:
    def __init__(self, opts: Options, info: ModelInfo, control: Control, progress: Progress):
        self.opts, self.info, self.control, self.progress = opts, info, control, progress
        self.n = auto_workers(opts)
        if opts.request_rates:
            slots = [opts.max_connections] * self.n
        else:
            slots = [max(1, int(s)) for s in split(max(opts.concurrency), self.n)]
        ctx = mp.get_context("spawn")
        self.counter = ctx.Array("q", self.n, lock=False)
        self._windows_seen: list[list[Snapshot]] = []
        self.pipes = []
        self.procs = []
        for i in range(self.n):
            parent, child = ctx.Pipe()
            p = ctx.Process(target=worker_mod.main, daemon=True,
                            args=(child, opts, info, i, slots[i], self.counter))
            p.start()
            child.close()
            self.pipes.append(parent)
            self.procs.append(p)
        for i, pipe in enumerate(self.pipes):
            self._expect(i, "ready", timeout=60)

    def _expect(self, i: int, kind: str, timeout: float = 120) -> Any:
        pipe = self.pipes[i]
        if not pipe.poll(timeout):
            raise RunError(f"worker {i} did not answer {kind!r} within {timeout:.0f} s")
        try:
            got, arg = pipe.recv()
        except EOFError:
            raise RunError(f"worker {i} exited") from None
        if got == "error":
            raise RunError(arg)
        if got != kind:
            raise RunError(f"worker {i}: expected {kind!r}, got {got!r}")
        return arg

    def _all(self, kind: str, arg: Any = None, reply: str | None = None) -> list[Any]:
        for pipe in self.pipes:
            pipe.send((kind, arg))
        return [self._expect(i, reply) for i in range(self.n)] if reply else []

    def _count(self) -> int:
        return int(sum(self.counter[:]))

    def run_level(self, mode: str, value: float) -> LevelResult:
        opts = self.opts
        label = f"{'c' if mode == 'concurrency' else 'rate'}={value:g}"
        res = LevelResult(mode, value)
        before = self.control.stats(opts.model, opts.model_version)
        shares = split(value, self.n, integer=mode == "concurrency")
        active = [i for i in range(self.n) if shares[i] > 0]
        counts = [0] * self.n
        if opts.request_count > 0:  # only workers with a share of the load get a budget
            for i, c in zip(active, split(opts.request_count, len(active))):
                counts[i] = int(c)
        for i in range(self.n):
            self.counter[i] = 0
        for i, pipe in enumerate(self.pipes):
            cmd = LevelCommand(request_count=int(counts[i]))
            if mode == "concurrency":
                cmd.concurrency = int(shares[i])
            else:
                cmd.rate = float(shares[i])
            if opts.request_count > 0 and not cmd.request_count:
                cmd.concurrency, cmd.rate = 0, 0.0
            pipe.send(("run", cmd))  # idle workers too: every clock restarts together
        t0 = time.perf_counter()
        cpu: list[float] = []
        if opts.request_count > 0:
            snaps = self._count_mode(label, res)
        else:
            snaps = self._window_mode(label, res, cpu)
        wall = time.perf_counter() - t0
        final = self._all("stop", reply="stopped")
        for s in final:
            res.completed += s.count
            res.errors += s.errors
            cpu.append(s.cpu_s)
        if opts.request_count > 0:
            snaps = [final]
        res.completed += sum(s.count for group in self._windows_seen for s in group)
        after = self.control.stats(opts.model, opts.model_version)
        res.server = stats_delta(before, after)
        lat = np.concatenate([s.latencies_ns for g in snaps for s in g] or [np.zeros(0, np.int64)])
        res.latency_us = summarize_ns(lat)
        res.measured = int(lat.size)
        res.delayed = sum(s.delayed for g in snaps for s in g)
        seconds = sum(max(s.wall_s for s in g) for g in snaps) or wall
        res.request_throughput = res.measured / seconds if seconds else 0.0
        res.throughput = res.request_throughput * opts.batch_size
        res.client = {
            "workers": self.n,
            "cpu_percent": 100.0 * sum(cpu) / wall if wall else 0.0,
            "cpu_us_per_request": 1e6 * sum(cpu) / max(res.completed + res.errors, 1),
        }
        first = next((s.first_error for g in snaps for s in g if s.first_error), "")
        first = first or next((s.first_error for s in final if s.first_error), "")
        if res.errors:
            res.client["first_error"] = first
        self.progress.done(label, _line(res))
        return res

    def _count_mode(self, label: str, res: LevelResult) -> list[list[Snapshot]]:
        self._windows_seen = []
        target = self.opts.request_count
        last, last_t = -1, time.monotonic()
        while (done := self._count()) < target:
            if done != last:
                last, last_t = done, time.monotonic()
            elif time.monotonic() - last_t > self.opts.timeout_s:  # stalled: never wait forever
                raise RunError(f"{label}: only {done} of {target} requests finished")
            self.progress.update(label, done / target, f"{done}/{target} requests")
            if any(not p.is_alive() for p in self.procs):
                raise RunError("a worker exited during the run")
            time.sleep(0.05)
        res.stable = True
        return []

    def _window_mode(self, label: str, res: LevelResult, cpu: list[float]) -> list[list[Snapshot]]:
        opts = self.opts
        self._windows_seen = []
        self._sleep(label, opts.warmup_ms / 1000.0, -1, "warming up")
        warm = self._all("snap", reply="snap")
        cpu.extend(s.cpu_s for s in warm)
        self._windows_seen.append(warm)
        windows: list[list[Snapshot]] = []
        tput: list[float] = []
        lats: list[float] = []
        for trial in range(opts.max_trials):
            self._sleep(label, opts.measurement_interval_ms / 1000.0, trial,
                        f"window {trial + 1}" + (f"  {tput[-1]:,.0f} infer/s" if tput else ""))
            snaps = self._all("snap", reply="snap")
            windows.append(snaps)
            cpu.extend(s.cpu_s for s in snaps)
            errors = sum(s.errors for s in snaps)
            if errors:
                msg = next(s.first_error for s in snaps if s.first_error)
                self._all("stop", reply="stopped")
                raise RunError(f"{label}: {errors} failed requests; first: {msg}")
            n = sum(s.count for s in snaps)
            tput.append(sum(s.count / s.wall_s for s in snaps if s.wall_s) * opts.batch_size)
            lat = np.concatenate([s.latencies_ns for s in snaps])
            if opts.percentile:
                lats.append(float(np.percentile(lat, opts.percentile)) if lat.size else 0.0)
            else:
                lats.append(float(lat.mean()) if n else 0.0)
            res.windows = trial + 1
            if n and is_stable(tput, opts.stability_percentage) and is_stable(
                lats, opts.stability_percentage
            ):
                res.stable = True
                break
        self._windows_seen.extend(windows)
        return windows[-3:]

    def _sleep(self, label: str, seconds: float, trial: int, text: str) -> None:
        end = time.perf_counter() + seconds
        start_count = self._count()
        t_start = time.perf_counter()
        while (left := end - time.perf_counter()) > 0:
            if trial < 0:  # warm-up: the bar starts filling with the first window
                frac = 0.0
            else:
                frac = (trial + 1 - left / seconds) / max(self.opts.max_trials, 1)
            rate = (self._count() - start_count) / max(time.perf_counter() - t_start, 1e-6)
            self.progress.update(label, frac, f"{text}  ~{rate * self.opts.batch_size:,.0f}/s")
            time.sleep(min(left, 0.1))

    def close(self) -> None:
        for i, pipe in enumerate(self.pipes):
            try:
                pipe.send(("exit", None))
                if pipe.poll(30):
                    pipe.recv()
            except (BrokenPipeError, EOFError, OSError):
                pass
        for p in self.procs:
            p.join(10)
            if p.is_alive():
                p.terminate()


def _line(r: LevelResult) -> str:
    lat = r.latency_us
    text = (f"{r.throughput:>10,.1f} infer/s  p50 {lat.get('p50', 0) / 1000:.2f} ms  "
            f"p99 {lat.get('p99', 0) / 1000:.2f} ms")
    if not r.stable:
        text += "  (not stable)"
    if r.errors:
        text += f"  {r.errors} errors"
    return text

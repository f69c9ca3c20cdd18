"""Sandbox figures: per-call latency (warm, cold) and batched throughput against in-process calls.

Run with ``make bench`` (all benchmarks) or ``python -m tests.bench sandbox``. Goals from the
issue: p95 <= 50 ms for a warm single call; batched time <= 2x in-process at >= 256 questions.

Besides wall time it prints the CPU one batch costs in each process (this one, the worker, and
the worker's forked children, including their fork and exit) and how much two busy processes slow
each other down here: a batch's fixed process costs only overlap with its work when the machine
has a free core.
"""

from __future__ import annotations

import os
import resource
import statistics
import time
from collections.abc import Callable, Sequence

import numpy as np

from tsevo.library.context import ToolInput
from tsevo.library.sandbox import Sandbox, SandboxLimits, ToolContext, build_base_namespace

SIMPLE = """
def simple():
    if ctx.n_primary() == 0:
        return None
    y = ctx.primary()
    d = np.diff(y)
    return {
        "mean": float(np.mean(y)),
        "std": float(np.std(y)),
        "slope": float((y[-1] - y[0]) / (len(y) - 1)),
        "mad": float(np.mean(np.abs(d))),
    }
"""
LENGTH = 256
SIZES = (1, 32, 256, 2048)


def make_inputs(n: int, length: int = LENGTH) -> list[ToolInput]:
    """``n`` questions with one random-walk primary series each."""
    rng = np.random.default_rng(0)
    return [
        ToolInput(
            f"q{i}",
            f"fp{i}",
            "Is the series rising?",
            {"y": np.cumsum(rng.normal(size=length))},
            ("y",),
        )
        for i in range(n)
    ]


def in_process(source: str) -> Callable[[Sequence[ToolInput]], list[object]]:
    """The same tool called directly in this process (same facades, no limits, no contract)."""
    ns = build_base_namespace()
    exec(compile(source, "<bench>", "exec"), ns)
    fn = ns["simple"]

    def call(inputs: Sequence[ToolInput]) -> list[object]:
        out = []
        for inp in inputs:
            ns["ctx"] = ToolContext(inp)
            out.append(fn())
        return out

    return call


def pct(xs: Sequence[float], q: float) -> float:
    """The q-th percentile (nearest rank)."""
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q / 100 * len(s)) - 1))]


def best_time(fn: Callable[[], object], reps: int) -> float:
    """Median wall time of ``reps`` calls, in seconds."""
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def _worker_cpu(pid: int) -> tuple[float, float]:
    """(CPU seconds of the worker itself, of its reaped children) from ``/proc``."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    utime, stime, cutime, cstime = (int(x) / tick for x in fields[11:15])
    return utime + stime, cutime + cstime


def _self_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def cpu_split(sb: Sandbox, inputs: Sequence[ToolInput], reps: int = 40) -> tuple[float, ...]:
    """Mean CPU ms per batch: (this process, worker, worker's children), and wall ms."""
    pid = int(sb.start()["pid"])
    sb.run(SIMPLE, inputs)
    p0, (w0, c0), t0 = _self_cpu(), _worker_cpu(pid), time.perf_counter()
    for _ in range(reps):
        sb.run(SIMPLE, inputs)
    wall = time.perf_counter() - t0
    time.sleep(0.2)
    sb.run(SIMPLE, inputs[:1])  # reaps the finished children
    time.sleep(0.2)
    p1, (w1, c1) = _self_cpu(), _worker_cpu(pid)
    return tuple(x * 1e3 / reps for x in (p1 - p0, w1 - w0, c1 - c0, wall))


def parallel_slowdown() -> float:
    """Wall time of two busy processes at once over one alone (1.0: two free cores)."""

    def spin() -> None:
        x = 0
        for i in range(2_000_000):
            x += i

    t0 = time.perf_counter()
    spin()
    one = time.perf_counter() - t0
    t0 = time.perf_counter()
    pids = []
    for _ in range(2):
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the forked spinner
            spin()
            os._exit(0)
        pids.append(pid)
    for pid in pids:
        os.waitpid(pid, 0)
    return (time.perf_counter() - t0) / one


def main() -> None:
    """Measure and print the sandbox figures."""
    lim = SandboxLimits()
    one = make_inputs(1)

    cold = []
    for _ in range(3):
        t0 = time.perf_counter()
        with Sandbox(lim) as sb:
            r = sb.run_one(SIMPLE, one[0])
            cold.append(time.perf_counter() - t0)
            assert r.ok, r
    print(
        f"cold call (worker start + first call), {len(cold)} runs: "
        f"p50 {statistics.median(cold) * 1e3:.0f} ms, max {max(cold) * 1e3:.0f} ms"
    )

    with Sandbox(lim) as sb:
        sb.start()
        first = time.perf_counter()
        sb.run_one(SIMPLE, one[0])
        first_ms = (time.perf_counter() - first) * 1e3
        warm = []
        for i in range(200):
            t0 = time.perf_counter()
            r = sb.run_one(SIMPLE, one[0])
            warm.append(time.perf_counter() - t0)
            if i % 50 == 0:
                time.sleep(0.02)  # idle gaps, as between agent steps
        assert r.ok
        print(f"first call on a started worker: {first_ms:.1f} ms")
        print(
            f"warm single call, {len(warm)} runs: p50 {pct(warm, 50) * 1e3:.1f} ms, "
            f"p95 {pct(warm, 95) * 1e3:.1f} ms (goal p95 <= 50 ms)"
        )

        direct = in_process(SIMPLE)
        print(f"batched, simple numpy tool on {LENGTH}-point series:")
        print(f"{'batch':>6} {'sandbox ms':>11} {'evals/s':>9} {'in-proc ms':>11} {'ratio':>6}")
        for n in SIZES:
            inputs = make_inputs(n)
            reps = 9 if n <= 256 else 5
            res = sb.run(SIMPLE, inputs)
            assert all(x.ok for x in res)
            t_sb = best_time(lambda inputs=inputs: sb.run(SIMPLE, inputs), reps)
            t_ip = best_time(lambda inputs=inputs: direct(inputs), reps)
            print(
                f"{n:>6} {t_sb * 1e3:>11.2f} {n / t_sb:>9.0f} {t_ip * 1e3:>11.2f} "
                f"{t_sb / t_ip:>6.2f}"
            )
        t_det = best_time(lambda: sb.run(SIMPLE, make_inputs(256), check_determinism=True), 5)
        print(f"batch 256 with check_determinism=True: {t_det * 1e3:.1f} ms")
        batch = make_inputs(256)
        t_ip = best_time(lambda: direct(batch), 9)
        own, worker, children, wall = cpu_split(sb, batch)
        print(
            f"CPU per batch of 256 (back to back, wall {wall:.1f} ms): this process {own:.1f} ms, "
            f"worker {worker:.1f} ms, its children {children:.1f} ms "
            f"(in-process run: {t_ip * 1e3:.1f} ms)"
        )
    print(f"two busy processes take {parallel_slowdown():.2f}x the time of one on this machine")


if __name__ == "__main__":
    main()

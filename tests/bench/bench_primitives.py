"""Primitives: microseconds per call of every primitive at n = 256 and n = 2048, what importing the
catalog costs, and the sandbox worker's start-up time and memory (``python -m tests.bench primitives``).

The catalog's libraries (numpy, scipy, ruptures, PyWavelets, pycatch22) are imported once by the
sandbox's warm worker, before it forks the children that run tools; their import time is paid at
every worker start and their resident memory is shared by the children (copy-on-write).
``--group NAME`` times one catalog group only; ``--no-worker`` skips the worker measurement.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

import numpy as np

from tsevo.library.primitives import CATALOG
from tsevo.library.sandbox import Sandbox

_IMPORT_COST = """
import time, numpy, scipy.fft, scipy.linalg, scipy.signal, scipy.special, scipy.stats
def status(key):
    for line in open('/proc/self/status'):
        if line.startswith(key):
            return int(line.split()[1]) // 1024
r0, v0 = status('VmRSS'), status('VmSize')
t0 = time.perf_counter()
import tsevo.library.primitives
print(time.perf_counter() - t0, status('VmRSS') - r0, status('VmSize') - v0)
"""


def _series(seed: int, n: int) -> np.ndarray:
    g = np.random.default_rng(seed)
    t = np.arange(n)
    return np.cumsum(g.normal(size=n)) * 0.3 + np.sin(2 * np.pi * t / 24) + g.normal(size=n)


def time_call(name: str, n: int, budget_s: float = 0.2) -> float:
    """Median microseconds per call over repeated calls within about ``budget_s``."""
    spec = CATALOG[name]
    a, b = _series(0, n), _series(1, n)
    args = (a,) if spec.arity == "single" else (a, b)
    spec.fn(*args)
    times = []
    t_end = time.perf_counter() + budget_s
    while len(times) < 3 or (time.perf_counter() < t_end and len(times) < 200):
        t0 = time.perf_counter()
        spec.fn(*args)
        times.append(time.perf_counter() - t0)
    return float(np.median(times) * 1e6)


def import_cost(reps: int = 3) -> tuple[float, int, int]:
    """Median (seconds, MB resident, MB address space) of importing the catalog after numpy/scipy."""
    runs = []
    for _ in range(reps):
        out = subprocess.run(
            [sys.executable, "-c", _IMPORT_COST], capture_output=True, text=True, check=True
        ).stdout.split()
        runs.append((float(out[0]), int(out[1]), int(out[2])))
    return (
        statistics.median(r[0] for r in runs),
        int(statistics.median(r[1] for r in runs)),
        int(statistics.median(r[2] for r in runs)),
    )


def _status_mb(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) // 1024
    return 0


def worker_cost(reps: int = 3) -> tuple[float, int, int]:
    """Median (seconds to a started worker, its MB resident, its MB address space)."""
    runs = []
    for _ in range(reps):
        t0 = time.perf_counter()
        with Sandbox() as sb:
            info = sb.start()
            wall = time.perf_counter() - t0
            pid = int(info["pid"])
            runs.append((wall, _status_mb(pid, "VmRSS"), _status_mb(pid, "VmSize")))
    return (
        statistics.median(r[0] for r in runs),
        int(statistics.median(r[1] for r in runs)),
        int(statistics.median(r[2] for r in runs)),
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m tests.bench primitives")
    ap.add_argument("--group", default=None, help="time only this catalog group")
    ap.add_argument("--no-worker", action="store_true", help="skip the worker start-up figures")
    args = ap.parse_args([] if argv is None else argv)
    names = sorted(
        n
        for n, s in CATALOG.items()
        if s.group != "forecast" and (args.group is None or s.group == args.group)
    )
    rows = [(n, time_call(n, 256), time_call(n, 2048)) for n in names]
    print(f"{'primitive':28s} {'group':14s} {'us n=256':>10s} {'us n=2048':>11s}")
    for n, t1, t2 in sorted(rows, key=lambda r: -r[2]):
        print(f"{n:28s} {CATALOG[n].group:14s} {t1:10.0f} {t2:11.0f}")
    slow = max(rows, key=lambda r: r[2])
    print(
        f"{len(rows)} primitives; slowest at n=2048: {slow[0]} ({slow[2] / 1000:.1f} ms); total per "
        f"series {sum(r[1] for r in rows) / 1000:.1f} ms at n=256, "
        f"{sum(r[2] for r in rows) / 1000:.1f} ms at n=2048"
    )
    t, rss, vm = import_cost()
    print(f"importing the catalog after numpy/scipy: {t:.2f} s, +{rss} MB resident, +{vm} MB VM")
    if not args.no_worker:
        t, rss, vm = worker_cost()
        print(f"sandbox worker started and warm: {t:.2f} s, {rss} MB resident, {vm} MB VM")


if __name__ == "__main__":
    main(sys.argv[1:])

"""Microseconds per call of every primitive at n = 256 and n = 2048 (``python -m tests.bench primitives``)."""

from __future__ import annotations

import time

import numpy as np

from tsevo.library.primitives import CATALOG


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


def main() -> None:
    names = sorted(n for n, s in CATALOG.items() if s.group != "forecast")
    rows = [(n, time_call(n, 256), time_call(n, 2048)) for n in names]
    print(f"{'primitive':28s} {'group':14s} {'us n=256':>10s} {'us n=2048':>11s}")
    for n, t1, t2 in sorted(rows, key=lambda r: -r[2]):
        print(f"{n:28s} {CATALOG[n].group:14s} {t1:10.0f} {t2:11.0f}")
    slow = max(rows, key=lambda r: r[2])
    print(
        f"slowest at n=2048: {slow[0]} ({slow[2] / 1000:.1f} ms); total per series "
        f"{sum(r[2] for r in rows) / 1000:.1f} ms"
    )


if __name__ == "__main__":
    main()

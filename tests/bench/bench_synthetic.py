"""Synthetic suite benchmark: generation time per family and oracle/naive accuracy.

Run with ``python -m tests.bench synthetic``.
"""

from __future__ import annotations

import time

import numpy as np

from tsevo.data.synthetic import FAMILIES, make_suite, solver_report, summary_text

SEED = 20_251  # not a development seed


def main() -> None:
    """Print generation time per family (default size) and the solver report."""
    print(f"{'family':<16}{'ms/question':>12}{'mean attempts':>15}")
    total = 0.0
    for name in FAMILIES:
        t0 = time.perf_counter()
        s = make_suite("default", seed=SEED, families=[name])
        dt = time.perf_counter() - t0
        total += dt
        attempts = np.mean([q.metadata["attempts"] for q in s])
        print(f"{name:<16}{1000 * dt / len(s):>12.2f}{attempts:>15.2f}")
    print(f"default size, all families: {total:.2f} s (sum of per-family runs)")
    t0 = time.perf_counter()
    suite = make_suite("default", seed=SEED)
    print(f"make_suite('default') in one call: {time.perf_counter() - t0:.2f} s, {len(suite)} q")
    t0 = time.perf_counter()
    solver_report(suite)
    print(f"solver_report: {time.perf_counter() - t0:.2f} s")
    print(summary_text(suite))


if __name__ == "__main__":
    main()

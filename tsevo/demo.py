"""``make demo``: the main job, offline, on the embedded synthetic suite.

Until the round engine lands this generates the default synthetic suite, saves it and prints its
summary: families, sizes, splits and what the oracle and the naive global-summary solver score.
"""

from __future__ import annotations

import time
from pathlib import Path

__all__ = ["run_demo"]


def run_demo(out: Path = Path("runs/demo"), size: str | int = "default", seed: int = 0) -> int:
    """Generate the synthetic suite into ``out`` and print its summary; returns an exit status."""
    from tsevo.data.synthetic import make_suite, summary_text

    t0 = time.perf_counter()
    suite = make_suite(size=size, seed=seed)
    gen_s = time.perf_counter() - t0
    out = Path(out)
    path = suite.save(out / "suite.parquet")
    print(f"tsevo demo: synthetic suite {suite.name!r}, seed {seed}, size {size!r}")
    print(f"generated {len(suite)} questions in {gen_s:.1f} s -> {path}\n")
    print(summary_text(suite))
    return 0

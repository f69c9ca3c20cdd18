"""``make demo``: the main job, offline, on the embedded synthetic suite.

It generates the default synthetic suite, prints its summary (families, sizes, splits, what the
oracle and the naive solver score), runs one evolution round with the builtin backend into a run
folder, and prints the round summary: the funnel, the gate decision and the report-only test delta
per task. Rerunning resumes from the run folder.
"""

from __future__ import annotations

import time
from pathlib import Path

from tsevo.analysis import run_summary
from tsevo.analysis import summary_text as round_text
from tsevo.data.synthetic import make_suite, summary_text
from tsevo.evolve import ProtocolConfig, evolve
from tsevo.roles import RoleSet

__all__ = ["run_demo"]


def run_demo(out: Path = Path("runs/demo"), size: str | int = "default", seed: int = 0) -> int:
    """Generate the suite, run one round into ``out`` and print the summaries; returns an exit status."""
    t0 = time.perf_counter()
    suite = make_suite(size=size, seed=seed)
    print(f"tsevo demo: synthetic suite {suite.name!r}, seed {seed}, size {size!r}")
    print(f"generated {len(suite)} questions in {time.perf_counter() - t0:.1f} s\n")
    print(summary_text(suite))
    print("\nrunning one evolution round with the builtin backend (offline) ...")
    t1 = time.perf_counter()
    evolve(
        suite,
        roles=RoleSet.builtin(),
        config=ProtocolConfig(rounds=1, seed=seed),
        out=out,
        suite_ref=f"synthetic:{size}:seed={seed}",
    )
    print(f"\nround finished in {time.perf_counter() - t1:.1f} s; run folder: {out}\n")
    print(round_text(run_summary(out)))
    print(f"\nreprint with: tsevo report {out}   (JSON: tsevo report {out} --json)")
    return 0

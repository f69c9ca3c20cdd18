"""Mara chains, paired study (issue 13): which work groups does the gate admit under each arm?

``python -m tests.bench.marachain_paired [--preset mixed|nearmiss] [--seeds S ...] [--out DIR]``

Three arms on the same suite, split and seed, differing only in synthesis:

* ``discard``: TimeEvo's K = 3 direct attempts, a group whose attempts all miss the bar is dropped;
* ``chain``: the same K = 3 attempts, then a builtin Mara chain of depth d = 3 from the strongest
  rejected attempt (``marachain.depth = 3``, every other chain setting at its default);
* ``discard_k_plus_d``: K + d = 6 direct attempts, chains off (the same number of attempts).

Per seed and arm: the work groups whose artifact **the gate admits** (not merely the prefilter),
the gate's verdict, the report-only test gain with helped/harmed, and the cost (direct attempts;
chain steps and rollouts beside the analytic bound the chains recorded). The seeds below were fixed
in this file before any of them was run; the builtin chain was developed on tiny seeds 1-5 and
mixed seeds 101-103 only. Writes ``runs/bench/marachain-paired.json``; runs are kept under
``--out`` (default ``runs/bench/marachain-paired``) so a rerun resumes instead of recomputing.

The issue's check, reported either way: the chain admits more groups than discard in total and on
at least 3 of the 5 seeds.

``--preset nearmiss`` runs the same arms on the near-miss family (design §8.14,
:mod:`tsevo.data.synthetic.nearmiss`) with its own held-out seeds (:data:`SEEDS_BY_PRESET`), fixed
here, with the family and the chain's move order, before any of them was run; the family and the
support-row lead of a harmful parent's step were developed on seeds 101-103. The family's second
version (each series its own noise, so the direction is not readable from noise level) got new
held-out seeds, fixed here before they were run. Output:
``runs/bench/marachain-<preset>.json`` (``marachain-paired.json`` for ``mixed``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from tests.bench import git_commit
from tsevo.analysis.chain_arms import (
    CHAIN_ARMS,
    chain_arm_params,
    chain_arm_row,
    chain_arms_summary,
)
from tsevo.evolve import ProtocolConfig, evolve
from tsevo.fileio import atomic_write_text
from tsevo.notebook import make_synthetic_suite

ROOT = Path(__file__).resolve().parents[2]
#: Held-out seeds, fixed before the study ran (never used for development).
SEEDS: tuple[int, ...] = (10111, 10223, 10337, 10453, 10567)
#: Held-out seeds per preset (the near-miss seeds were fixed with the family, before any run).
SEEDS_BY_PRESET: dict[str, tuple[int, ...]] = {
    # fresh seeds for the chain whose edits re-read the output (1752020); SEEDS measured the one before
    "mixed": (14503, 14519, 14533, 14549, 14563),
    "nearmiss": (14011, 14107, 14221, 14327, 14437),
}
#: The near-miss seeds of the family's first version (follower-only noise, which leaked the
#: direction); its results are in the git history of ``runs/bench/marachain-nearmiss.json``.
NEARMISS_V1_SEEDS: tuple[int, ...] = (12011, 12107, 12203, 12301, 12409)
#: The seeds of its second version (lag options whose magnitude gave the answer away: the option
#: nearest one number was right ~68% of the time, ``tests.bench.option_leak``); results at d05f752.
#: The third version's seeds above were fixed with it and have not been run.
NEARMISS_V2_SEEDS: tuple[int, ...] = (13007, 13109, 13217, 13331, 13441)
K, D = 3, 3
#: Each arm's loose protocol parameters (the study notebook ``97_study_marachain`` uses the same).
ARMS: dict[str, dict[str, Any]] = {arm: chain_arm_params(arm, K, D) for arm in CHAIN_ARMS}


def run_arm(preset: str, seed: int, arm: str, out: Path) -> dict[str, Any]:
    """Evolve one round of ``arm`` (resuming a finished run) and read its groups' fate."""
    cfg = ProtocolConfig.from_params(ARMS[arm], base=ProtocolConfig(rounds=1, seed=seed))
    run_dir = out / str(seed) / arm
    t = time.perf_counter()
    evolve(make_synthetic_suite(preset, seed), config=cfg, out=run_dir, log=lambda _: None)
    row: dict[str, Any] = {"seed": seed, "arm": arm, "seconds": round(time.perf_counter() - t, 1)}
    row.update(chain_arm_row(run_dir))
    return row


def summarize(rows: list[dict[str, Any]], seeds: list[int]) -> dict[str, Any]:
    """Totals, per-seed comparisons and mean ± sd of the test gain per arm."""
    return chain_arms_summary(rows, seeds)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.bench.marachain_paired", description=__doc__)
    p.add_argument("--seeds", type=int, nargs="+", default=None)
    p.add_argument("--preset", default="mixed", choices=sorted(SEEDS_BY_PRESET))
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    name = "marachain-paired" if args.preset == "mixed" else f"marachain-{args.preset}"
    args.seeds = args.seeds or list(SEEDS_BY_PRESET[args.preset])
    args.out = args.out or ROOT / "runs" / "bench" / name
    args.json = args.json or ROOT / "runs" / "bench" / f"{name}.json"
    rows = []
    print(f"{'seed':>6} {'arm':>17} {'status':>9} {'admitted':>8} {'chain':>5} "
          f"{'attempts':>8} {'steps':>5} {'gain pp':>7} {'harmed':>6} {'s':>6}", flush=True)  # fmt: skip
    for seed in args.seeds:
        for arm in ARMS:
            r = run_arm(args.preset, seed, arm, args.out)
            rows.append(r)
            gain = "-" if r["gain"] is None else f"{100 * r['gain']:+.1f}"
            print(
                f"{seed:>6} {arm:>17} {r['status']:>9} {r['n_admitted']:>8} "
                f"{len(r['chain_admitted']):>5} {r['attempts']:>8} {r['chain_steps']:>5} "
                f"{gain:>7} {r['harmed']:>6} {r['seconds']:>6}",
                flush=True,
            )
    doc = {
        "bench": "marachain-paired",
        "commit": git_commit(),
        "preset": args.preset,
        "seeds": args.seeds,
        "K": K,
        "d": D,
        "rows": rows,
        **summarize(rows, args.seeds),
    }
    atomic_write_text(args.json, json.dumps(doc, indent=1, default=str) + "\n")
    print(json.dumps({k: doc[k] for k in ("arms", "chain_more_than_discard_seeds")}, indent=1))
    print(f"check (chain admits more than discard, in total and on >= 3 seeds): "
          f"{doc['check_chain_beats_discard']} -> {args.json}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

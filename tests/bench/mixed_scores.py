"""Base, naive and oracle scores of the ``mixed`` preset on the test split, as JSON.

``python -m tests.bench.mixed_scores --seeds 101,202,303 --out runs/bench/mixed-scores.json``
generates ``make_suite("mixed", seed)`` for each seed and scores its test split with

* ``base``: the builtin base answerer (``tsevo.roles.builtin.GlobalSummaryAnswerer``) on the
  questions' views, as a round's base pass would;
* ``naive``: ``tsevo.data.synthetic.naive_answer`` (the suite's global-summary reference solver);
* ``oracle``: each kind's solver (``oracle_answer``), which must be 1.0;
* ``chance``: the mean of ``1 / n_options``;

overall and per category, per seed and as mean and sample sd over seeds. Each seed also records
the suite's digest (a hash of every question's fingerprint, gold and split), so a later run can
show the generator has not changed. The seeds named here are development seeds: report learner
results on other seeds.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from tsevo.data import QuestionView, Suite
from tsevo.data.synthetic import make_suite, naive_answer, oracle_answer
from tsevo.data.synthetic.mixed import CATEGORIES, KINDS
from tsevo.roles.builtin.answerer import GlobalSummaryAnswerer

SOLVERS = ("base", "naive", "oracle", "chance")


def suite_digest(suite: Suite) -> str:
    """Hash of every question's id, content fingerprint, gold and split, in suite order."""
    h = hashlib.sha256()
    for q in suite:
        h.update(f"{q.id}\x00{q.fingerprint}\x00{q.gold}\x00{suite.splits.get(q.id)}\n".encode())
    return h.hexdigest()


def score_seed(seed: int) -> dict[str, Any]:
    """Scores of one seed's test split, overall and per category."""
    t0 = time.perf_counter()
    suite = make_suite("mixed", seed=seed)
    gen_s = time.perf_counter() - t0
    base = GlobalSummaryAnswerer()
    test = [q for q in suite if suite.splits.get(q.id) == "test"]
    hits: dict[str, dict[str, list[float]]] = {s: {} for s in SOLVERS}
    for q in test:
        got = {
            "base": float(base.answer(QuestionView.of(q, "q")).option == q.gold),
            "naive": float(naive_answer(q) == q.gold),
            "oracle": float(oracle_answer(q) == q.gold),
            "chance": 1.0 / q.n_options,
        }
        for solver, v in got.items():
            for key in ("all", str(q.metadata["category"])):
                hits[solver].setdefault(key, []).append(v)
    order = ["all", *CATEGORIES]
    splits = Counter(suite.splits.values())
    return {
        "seed": seed,
        "questions": len(suite),
        "splits": {sp: splits[sp] for sp in ("train", "val", "test")},
        "test_per_category": {c: len(hits["base"].get(c, [])) for c in order},
        "generate_s": round(gen_s, 2),
        "digest": suite_digest(suite),
        **{
            s: {c: round(statistics.fmean(hits[s][c]), 4) for c in order if c in hits[s]}
            for s in SOLVERS
        },
    }


def aggregate(rows: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, float]]]:
    """Mean and sample sd over seeds, per solver and category."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for s in SOLVERS:
        out[s] = {}
        for c in ["all", *CATEGORIES]:
            xs = [r[s][c] for r in rows if c in r[s]]
            out[s][c] = {
                "mean": round(statistics.fmean(xs), 4),
                "sd": round(statistics.stdev(xs), 4) if len(xs) > 1 else 0.0,
            }
    return out


def main(argv: list[str] | None = None) -> int:
    """Score the seeds and write the JSON."""
    ap = argparse.ArgumentParser(prog="python -m tests.bench.mixed_scores")
    ap.add_argument("--seeds", default="101,202,303", help="comma-separated development seeds")
    ap.add_argument("--out", type=Path, default=Path("runs/bench/mixed-scores.json"))
    args = ap.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    rows = [score_seed(s) for s in seeds]
    kinds = Counter(k.category for k in KINDS.values())
    shared = Counter(k.option_set for k in KINDS.values() if not k.option_set.startswith("num"))
    result = {
        "command": "python -m tests.bench.mixed_scores "
        + " ".join(sys.argv[1:] if argv is None else argv),
        "preset": "mixed",
        "split": "test",
        "development_seeds": seeds,
        "kinds": len(KINDS),
        "kinds_per_category": {c: kinds[c] for c in CATEGORIES},
        "option_sets_shared": {k: v for k, v in sorted(shared.items()) if v > 1},
        "kinds_not_direct": sorted(k.name for k in KINDS.values() if not k.direct),
        "per_seed": rows,
        "mean": aggregate(rows),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    for s in SOLVERS:
        cells = "  ".join(
            f"{c} {result['mean'][s][c]['mean']:.3f}±{result['mean'][s][c]['sd']:.3f}"
            for c in ["all", *CATEGORIES]
        )
        print(f"{s:<7}{cells}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The builtin planner's selection against a permutation null (a diagnostic for issue 11), into JSON.

``python -m tests.bench.planner_null [--preset mixed] [--seeds S ...] [--perms P] [--evolve]``

The builtin planner ranks every (measurement, output) pair of the catalog by train accuracy,
cross-validates the top ones and takes the best. On a few dozen rows the best of thousands of
cross-validated accuracies is high whether or not any measurement carries signal. This bench asks
how high: per option set of the preset's train split (kinds that share an option set, the rows the
pooled reading rules see; at most 40 rows each, groups of at least 12), the best cross-validated
accuracy with the true gold against the best with gold permuted among those rows (``--perms``
times, seeded).

``--evolve`` also runs one builtin round per seed twice: as shipped, and with a planner that drops a
ranking whose best accuracy does not beat the best of two permuted-gold rankings (:class:`NullPlanner`,
an experiment, not a shipped role), and records each round's verdict, groups, admitted groups and
report-only test gain with helped / harmed.

Development seeds only (mixed 101-103 by default): this measures the learner, it claims nothing
about held-out performance. Writes ``runs/bench/planner-null.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from tests.bench import git_commit
from tsevo.analysis.chain_arms import chain_arm_row
from tsevo.data import QuestionView
from tsevo.data.synthetic import make_suite
from tsevo.evolve import ProtocolConfig, evolve
from tsevo.fileio import atomic_write_text
from tsevo.notebook import make_synthetic_suite
from tsevo.roles.builtin.planner import MeasurementPlanner
from tsevo.roles.protocols import Example
from tsevo.roles.roleset import RoleSet

ROOT = Path(__file__).resolve().parents[2]
#: Development seeds of the ``mixed`` preset (named as such everywhere).
DEV_SEEDS: tuple[int, ...] = (101, 102, 103)
MIN_ROWS, MAX_ROWS = 12, 40


def permuted(examples: Sequence[Example], rng: np.random.Generator) -> list[Example]:
    """The labelled examples with their gold option texts shuffled among them.

    Each question gets the option of its own that carries the shuffled text (a random option when
    it has none), so the class balance of the rows stays and any tie to the series is cut.
    """
    lab = [e for e in examples if e.gold is not None]
    texts = [e.question.options[int(e.gold)].strip().lower() for e in lab]  # type: ignore[arg-type]
    out = []
    for e, j in zip(lab, rng.permutation(len(lab)), strict=True):
        opts = [o.strip().lower() for o in e.question.options]
        g = opts.index(texts[j]) if texts[j] in opts else int(rng.integers(len(opts)))
        out.append(replace(e, gold=g))
    return out


def null_bests(
    rank: Callable[[Sequence[Example]], tuple[str, str, list[Any]]],
    examples: Sequence[Example],
    perms: int,
) -> list[float | None]:
    """The best cv accuracy of ``rank`` on ``perms`` permutations of the examples' gold.

    The permutations are seeded by the examples' question ids (``None``: nothing ranked).
    """
    key = "|".join(sorted(e.question.id for e in examples))
    rng = np.random.default_rng(int(hashlib.sha256(key.encode()).hexdigest()[:8], 16))
    out: list[float | None] = []
    for _ in range(perms):
        _, _, ranked = rank(permuted(examples, rng))
        out.append(ranked[0].cv_acc if ranked else None)
    return out


class NullPlanner(MeasurementPlanner):
    """The builtin planner keeping a ranking only when it beats its permuted-gold rankings."""

    perms = 2

    def rank(
        self,
        examples: Sequence[Example],
        exclude: Sequence[str] = (),
        groups: frozenset[str] | None = None,
        few: bool = False,
        words: frozenset[str] = frozenset(),
    ) -> tuple[str, str, list[Any]]:
        okind, arity, ranked = super().rank(examples, exclude, groups, few, words)
        if not ranked:
            return okind, arity, ranked
        nulls = null_bests(
            lambda ex: super(NullPlanner, self).rank(ex, exclude, groups, few, words),
            examples,
            self.perms,
        )
        if ranked[0].cv_acc <= max(n or 0.0 for n in nulls) + 1e-9:
            return okind, arity, []
        return okind, arity, ranked


def option_set_rows(preset: str, seed: int, perms: int) -> list[dict[str, Any]]:
    """Per option set of the train split: best cv accuracy with true and with permuted gold."""
    suite = make_suite(preset, seed)
    by: dict[str, list[Any]] = defaultdict(list)
    for q in suite.train:
        by[str(q.metadata.get("option_set") or "/".join(q.options))].append(q)
    planner = MeasurementPlanner()
    rows = []
    for name, qs in sorted(by.items()):
        if len(qs) < MIN_ROWS:
            continue
        qs = qs[:MAX_ROWS]
        ex = [Example(QuestionView.of(q, q.id), q.gold, None) for q in qs]
        t = time.perf_counter()
        _, _, ranked = planner.rank(ex)
        nulls = [None if n is None else round(n, 4) for n in null_bests(planner.rank, ex, perms)]
        rows.append(
            {
                "seed": seed,
                "option_set": name,
                "rows": len(qs),
                "chance": round(float(np.mean([1 / len(q.options) for q in qs])), 4),
                "true_best": round(ranked[0].cv_acc, 4) if ranked else None,
                "true_top": ranked[0].spec.describe(ranked[0].key) if ranked else None,
                "null_best": nulls,
                "seconds": round(time.perf_counter() - t, 1),
            }
        )
    return rows


def evolve_rows(preset: str, seed: int, work: Path) -> list[dict[str, Any]]:
    """One builtin round as shipped and one with :class:`NullPlanner`, same suite and seed."""
    out = []
    for arm, planner in (("shipped", MeasurementPlanner()), ("null", NullPlanner())):
        run = work / f"{preset}-{seed}-{arm}"
        t = time.perf_counter()
        evolve(
            make_synthetic_suite(preset, seed),
            roles=RoleSet.builtin(local_planner=planner),
            config=ProtocolConfig(rounds=1, seed=seed),
            out=run,
            log=lambda _: None,
        )
        r = chain_arm_row(run)
        keep = ("status", "groups", "n_admitted", "gain", "helped", "harmed", "attempts")
        out.append({"seed": seed, "arm": arm, "seconds": round(time.perf_counter() - t, 1)})
        out[-1].update({k: r[k] for k in keep})
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.bench.planner_null", description=__doc__)
    p.add_argument("--preset", default="mixed")
    p.add_argument("--seeds", type=int, nargs="+", default=list(DEV_SEEDS))
    p.add_argument("--perms", type=int, default=3)
    p.add_argument("--evolve", action="store_true")
    p.add_argument("--json", type=Path, default=ROOT / "runs" / "bench" / "planner-null.json")
    args = p.parse_args(argv)
    rows = []
    for seed in args.seeds:
        for r in option_set_rows(args.preset, seed, args.perms):
            rows.append(r)
            print(json.dumps(r), flush=True)
    gaps = [
        r["true_best"] - max(n for n in r["null_best"] if n is not None)
        for r in rows
        if r["true_best"] is not None and any(n is not None for n in r["null_best"])
    ]
    doc: dict[str, Any] = {
        "bench": "planner-null",
        "commit": git_commit(),
        "preset": args.preset,
        "seeds": args.seeds,
        "development_seeds": True,
        "perms": args.perms,
        "option_sets": rows,
        "true_minus_null_best": {
            "n": len(gaps),
            "mean": round(statistics.fmean(gaps), 4) if gaps else None,
            "sd": round(statistics.stdev(gaps), 4) if len(gaps) > 1 else None,
        },
    }
    if args.evolve:
        with tempfile.TemporaryDirectory(prefix="tsevo-planner-null-") as tmp:
            doc["rounds"] = []
            for seed in args.seeds:
                for r in evolve_rows(args.preset, seed, Path(tmp)):
                    doc["rounds"].append(r)
                    print(json.dumps(r), flush=True)
    atomic_write_text(args.json, json.dumps(doc, indent=1) + "\n")
    print(f"true best minus permuted best: {doc['true_minus_null_best']} -> {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""How much a question's numeric options say without the series: a constant reader, as JSON.

``python -m tests.bench.option_leak [--presets default mixed nearmiss] [--seeds S ...] [--json FILE]``

For each preset, seed and generator subtask whose options are all numbers (``"12 steps"``,
``"0.4"``), the *constant reader* answers every question with the option nearest (in log) one
fixed number, the number chosen on half of the subtask's questions and scored on the other half
(both ways). It never looks at a series, so its accuracy beyond chance (one over the number of options) is what the
options' magnitudes alone give away: a fitted reading rule on any measurement can reach it without
measuring anything. This is an audit of the generators, read from their metadata (subtask, gold);
no role sees it. Writes ``runs/bench/option-leak.json`` (per subtask: questions, options, chance,
constant-reader accuracy mean ± sd over the seeds, and the excess over chance).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tests.bench import REPO, git_commit
from tsevo.data.question import Question
from tsevo.data.synthetic import make_suite
from tsevo.fileio import atomic_write_text

#: Development seeds (the suites' own; nothing here evaluates a learner).
SEEDS: tuple[int, ...] = (101, 102, 103)
_NUM = re.compile(r"^\s*([-+]?\d+(?:\.\d+)?)(?:\s+[A-Za-z%]+)?\s*$")


def option_values(q: Question) -> list[float] | None:
    """The options as positive numbers, or ``None`` when any option is not one."""
    out = []
    for o in q.options:
        m = _NUM.match(o)
        if m is None or float(m.group(1)) <= 0:
            return None
        out.append(float(m.group(1)))
    return out


def _best(vals: Sequence[np.ndarray], gold: np.ndarray) -> float:
    """The log-number whose nearest option is right most often on these questions."""
    best = (-1.0, 0.0)
    for c in np.unique(np.concatenate(vals)):
        hits = float(
            np.mean([int(np.argmin(np.abs(v - c))) == g for v, g in zip(vals, gold, strict=True)])
        )
        best = max(best, (hits, -float(c)))
    return -best[1]


def constant_reader(qs: Sequence[Question]) -> tuple[float, float]:
    """The constant reader's cross-fitted accuracy on ``qs`` and the number fitted on all of them.

    The number is chosen on every other question and scored on the rest, both ways, so choosing
    it adds no optimism (on ten questions the in-sample best would).
    """
    vals = [np.log(option_values(q) or []) for q in qs]
    gold = np.array([q.gold for q in qs])
    hits = 0
    for part in (0, 1):
        fit = [i for i in range(len(qs)) if i % 2 == part]
        c = _best([vals[i] for i in fit], gold[fit])
        hits += sum(
            int(np.argmin(np.abs(vals[i] - c))) == gold[i] for i in range(len(qs)) if i % 2 != part
        )
    return hits / len(qs), float(math.exp(_best(vals, gold)))


def main(argv: list[str] | None = None) -> int:
    """Run the audit and write the JSON."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--presets", nargs="+", default=["default", "mixed", "nearmiss"])
    p.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    p.add_argument("--json", type=Path, default=REPO / "runs" / "bench" / "option-leak.json")
    args = p.parse_args(argv)
    rows: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for preset in args.presets:
        for seed in args.seeds:
            by_sub: dict[str, list[Question]] = defaultdict(list)
            for q in make_suite(preset, seed):
                if option_values(q) is not None:
                    fam = q.metadata.get("family", q.task)
                    by_sub[f"{fam}/{q.subtask}"].append(q)
            for sub, qs in sorted(by_sub.items()):
                if len(qs) < 10:
                    continue
                acc, at = constant_reader(qs)
                chance = float(np.mean([1 / len(q.options) for q in qs]))
                rows[(preset, sub)].append(
                    {"seed": seed, "n": len(qs), "chance": chance, "acc": acc, "at": round(at, 4)}
                )
    out = []
    for (preset, sub), rs in sorted(rows.items()):
        accs = [r["acc"] for r in rs]
        chance = statistics.mean(r["chance"] for r in rs)
        row = {
            "preset": preset,
            "subtask": sub,
            "seeds": [r["seed"] for r in rs],
            "questions": statistics.mean(r["n"] for r in rs),
            "chance": round(chance, 4),
            "constant_acc_mean": round(statistics.mean(accs), 4),
            "constant_acc_sd": round(statistics.stdev(accs), 4) if len(accs) > 1 else None,
            "excess_pp": round(100 * (statistics.mean(accs) - chance), 1),
            "per_seed": rs,
        }
        out.append(row)
        print(
            f"{preset:>9} {sub:<40} n={row['questions']:>5.0f} chance {chance:.2f} "
            f"constant {row['constant_acc_mean']:.2f} ± {row['constant_acc_sd'] or 0:.2f} "
            f"(+{row['excess_pp']:.0f} pp)"
        )
    doc = {"bench": "option-leak", "commit": git_commit(), "seeds": args.seeds, "rows": out}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(args.json, json.dumps(doc, indent=1) + "\n")
    print(f"-> {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

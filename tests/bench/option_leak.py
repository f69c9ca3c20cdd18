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
from tsevo.data.synthetic._base import nearest_option_log, option_number
from tsevo.fileio import atomic_write_text

#: Development seeds (the suites' own; nothing here evaluates a learner).
SEEDS: tuple[int, ...] = (101, 102, 103)
_NUM = re.compile(r"^\s*([-+]?\d+(?:\.\d+)?)(?:\s+[A-Za-z%]+)?\s*$")


def option_values(q: Question) -> list[float] | None:
    """The options as positive numbers, or ``None`` when any option is more than a number and unit."""
    if not all(_NUM.match(o) for o in q.options):
        return None
    vals = [v for v in map(option_number, q.options) if v is not None and v > 0]
    return vals if len(vals) == len(q.options) else None


def _hits(qs: Sequence[Question], c: float) -> int:
    """How often the option nearest ``c`` (in log, the generators' own reading) is right."""
    return sum(nearest_option_log(q, c) == q.gold for q in qs)


def _best(qs: Sequence[Question]) -> float:
    """The options' value whose nearest option is right most often on ``qs`` (the smallest on ties)."""
    grid = sorted({v for q in qs for v in option_values(q) or ()})
    return max(grid, key=lambda c: (_hits(qs, c), -c))


def constant_reader(qs: Sequence[Question]) -> tuple[float, float]:
    """The constant reader's cross-fitted accuracy on ``qs`` and the number fitted on all of them.

    The number is chosen on every other question and scored on the rest, both ways, so choosing
    it adds no optimism (on ten questions the in-sample best would).
    """
    halves = (qs[0::2], qs[1::2])
    hits = sum(_hits(test, _best(fit)) for fit, test in (halves, halves[::-1]))
    return hits / len(qs), _best(qs)


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

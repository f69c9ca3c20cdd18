"""The kind planner's own search per true question kind of ``mixed``, kinds given, as JSON (fast).

``python -m tests.bench.mixed_given [--fit-seeds 104,105,106,107] [--eval-seeds 108,109,110,111]
[--cache DIR] [--against runs/bench/OLD.json] [--out runs/bench/mixed-given.json]``

A diagnostic for issue 11 (development seeds only; it claims nothing about held-out performance):
``mixed_ceiling``'s ``perfect_dispatch`` level alone, on measurements cached by ``mixed_ties``'
``--cache`` (about a minute on 2 cores once cached, where the ceiling bench runs rounds too). Per fit
seed and true kind (the generator's label, which no role sees), the shipped few-shot search
(:func:`tsevo.roles.builtin.kindplan._search`: rules the options fix, test verdicts, the concept
groups the words point at, then the whole catalog) reads that seed's 3-6 train rows of the kind, and
its branch (the measurement and its peers' vote) answers the eval seeds' questions of the kind; the
base answer stays where the search serves nothing. A change to reading rules or the search shows
here kind by kind before a round, whose recovered kinds, buckets and gate add their own noise:
``--against`` prints every kind whose accuracy moved on some fit seed.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from tests.bench import git_commit
from tests.bench import mixed_ties as mt
from tests.bench.mixed_ceiling import _base_acc, perfect_dispatch
from tsevo.fileio import atomic_write_text
from tsevo.procs import forked_pool
from tsevo.roles.builtin.kindplan import KindPlanSettings

#: ``--against``'s help.
AGAINST = "an earlier run's JSON: list every kind and fit seed whose accuracy moved"


def changes(
    old: dict[str, Any], new: dict[str, Any], seeds: list[int]
) -> list[tuple[str, str, dict[str, Any], dict[str, Any]]]:
    """(kind, fit seed, old entry, new entry) wherever a kind's accuracy moved between two runs."""
    return [
        (kind, str(s), old[kind][str(s)], v[str(s)])
        for kind, v in sorted(new.items())
        if kind in old
        for s in seeds
        if str(s) in old[kind] and old[kind][str(s)]["acc"] != v[str(s)]["acc"]
    ]


def _kind(kind: str) -> tuple[str, dict[str, Any]]:
    ev = mt._STATE["ev"].get(kind, [])
    out: dict[str, Any] = {"eval_questions": len(ev), "base": round(_base_acc(ev), 4)}
    for s, rows in mt._STATE["train"].items():
        train = [r for r in rows if r["kind"] == kind]
        acc, what = perfect_dispatch(train, ev, KindPlanSettings())
        out[str(s)] = {"acc": round(acc, 4), "rows": len(train), "measurement": what}
    return kind, out


def main(argv: list[str] | None = None) -> int:
    t0 = time.perf_counter()
    args, fit, evs, data = mt.measured_seeds(
        argv, __doc__.splitlines()[0], "mixed-given.json", options=(("--against", AGAINST),)
    )
    mt.split_state(data, fit, evs)
    kinds = sorted({r["kind"] for s in fit for r in data[s]})
    with forked_pool(args.workers) as pool:
        per_kind = dict(pool.map(_kind, kinds))
    n = sum(v["eval_questions"] for v in per_kind.values())
    base = sum(v["base"] * v["eval_questions"] for v in per_kind.values()) / n
    accs = [sum(v[str(s)]["acc"] * v["eval_questions"] for v in per_kind.values()) / n for s in fit]
    doc = {
        "bench": "mixed_given",
        "label": "development",
        "commit": git_commit(),
        "fit_seeds": fit,
        "eval_seeds": evs,
        "eval_questions": n,
        "base": round(base, 4),
        "given": {"mean": round(statistics.fmean(accs), 4), "sd": round(statistics.stdev(accs), 4)},
        "given_per_fit_seed": [round(a, 4) for a in accs],
        "gain_pp": round(100 * (statistics.fmean(accs) - base), 2),
        "kinds": per_kind,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    atomic_write_text(Path(args.out), json.dumps(doc, indent=1, sort_keys=True) + "\n")
    print(
        f"base {100 * base:.1f}%, kinds given {100 * doc['given']['mean']:.1f} ± "
        f"{100 * doc['given']['sd']:.1f}% ({doc['gain_pp']:+.1f} pp) -> {args.out}"
    )
    if args.against:
        old = json.loads(Path(args.against).read_text())
        print(f"against {args.against}: {100 * old['given']['mean']:.1f}%")
        for kind, s, was, now in changes(old["kinds"], per_kind, fit):
            print(
                f"  {kind:28s} {s} {was['acc']:.3f} -> {now['acc']:.3f}  "
                f"{was['measurement'][:40]} => {now['measurement'][:40]}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Per question kind on the ``mixed`` preset: counts of what a round did to each kind, as JSON.

``python -m tests.bench.mixed_kinds runs/bench/mixed-dev-on.json [--out FILE]``

Reads a JSON written by :mod:`tests.bench.seeds` (``--preset mixed``) and, for each seed's run
folder beside it, the round's report-only test table. Evaluation is the one place the suite's
metadata is read: the generator's kind name (``subtask``) groups the test questions. Per kind and
seed it counts the training questions, the test questions, the test questions answered right before
and after the round, and the test questions a deployed tool ran on (``tools_ok``), split by whether
that tool is a composite (one branch per recovered question kind). A kind *gained* when more of its
test questions are right after the round than before; a kind has two or three test questions, so
these are counts, not rates. From the round's ``buckets.json`` it also counts each kind's train
errors in buckets, how many buckets hold them and how many lie outside the bucket holding most of
them (``bucket_spread``): whether the triage keeps a kind's errors together for one planner.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from tests.bench.seeds import ONE_WORDING
from tsevo.data.synthetic import make_suite
from tsevo.library.library import Library


def composite_tools(run: Path) -> set[str]:
    """Ids of the deployed tools whose contract names a composite (branch list) measurement."""
    lib = Library.load(run / "library")
    return {
        a.id
        for a in lib.all_artifacts()
        if a.kind == "tool" and a.contract.measurement.startswith("composite(")
    }


def bucket_spread(
    buckets: Sequence[dict[str, Any]], kind_of: dict[str, str]
) -> dict[str, dict[str, int]]:
    """Per kind: its bucketed errors, the buckets holding them, and those outside its main bucket.

    ``buckets``: a round's ``buckets.json`` entries (``id``, ``members``); ``kind_of``: question id
    to the generator's kind.
    """
    held: dict[str, Counter[str]] = defaultdict(Counter)
    for b in buckets:
        for m in b["members"]:
            held[kind_of[m]][b["id"]] += 1
    return {
        k: {
            "errors_bucketed": sum(c.values()),
            "buckets": len(c),
            "outside_main_bucket": sum(c.values()) - max(c.values()),
        }
        for k, c in sorted(held.items())
    }


def kinds_of_seed(seed: int, run: Path) -> dict[str, dict[str, int]]:
    """Per kind: train and test counts, right before/after, questions a (composite) tool ran on,
    and how the round's buckets hold its train errors (:func:`bucket_spread`)."""
    suite = make_suite("mixed", seed=seed)
    test = pd.read_parquet(run / "rounds" / "r1" / "test.parquet").set_index("qid")
    comp = composite_tools(run)
    out: dict[str, dict[str, int]] = defaultdict(Counter)  # type: ignore[arg-type]
    for q in suite:
        split = suite.splits.get(q.id)
        row = out[q.subtask]
        if split == "train":
            row["train"] += 1
        elif split == "test" and q.id in test.index:
            r = test.loc[q.id]
            row["test"] += 1
            row["before"] += int(bool(r["before_correct"]))
            row["after"] += int(bool(r["after_correct"]))
            ran = list(r["tools_ok"])
            row["tool_ran"] += int(bool(ran))
            row["composite_ran"] += int(any(t in comp for t in ran))
    buckets = json.loads((run / "rounds" / "r1" / "buckets.json").read_text())["buckets"]
    for k, spread in bucket_spread(buckets, {q.id: q.subtask for q in suite}).items():
        out[k].update(spread)
    return {k: dict(v) for k, v in sorted(out.items())}


def summarize(per_kind: dict[str, dict[str, int]]) -> dict[str, int]:
    """Kinds gained / lost / unchanged, and served by a composite branch or by any tool."""
    return {
        "kinds": len(per_kind),
        "gained": sum(v.get("after", 0) > v.get("before", 0) for v in per_kind.values()),
        "lost": sum(v.get("after", 0) < v.get("before", 0) for v in per_kind.values()),
        "served_by_composite": sum(v.get("composite_ran", 0) > 0 for v in per_kind.values()),
        "served_by_any_tool": sum(v.get("tool_ran", 0) > 0 for v in per_kind.values()),
        "gained_served_by_composite": sum(
            v.get("after", 0) > v.get("before", 0) and v.get("composite_ran", 0) > 0
            for v in per_kind.values()
        ),
        "split_over_buckets": sum(v.get("buckets", 0) > 1 for v in per_kind.values()),
        "errors_bucketed": sum(v.get("errors_bucketed", 0) for v in per_kind.values()),
        "errors_outside_main_bucket": sum(
            v.get("outside_main_bucket", 0) for v in per_kind.values()
        ),
    }


def mixed_runs(src: Path) -> tuple[dict[str, Any], Path]:
    """A JSON of :mod:`tests.bench.seeds` on ``mixed`` and the folder of its runs (exits otherwise)."""
    doc = json.loads(src.read_text())
    if doc.get("preset") not in ("mixed", "mixed" + ONE_WORDING):
        sys.exit(f"{src}: preset {doc.get('preset')!r}, not 'mixed'")
    return doc, src.with_suffix("")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("seeds_json", help="a JSON written by tests.bench.seeds --preset mixed")
    ap.add_argument("--out", default="", help="JSON file (default: <seeds_json>-kinds.json)")
    args = ap.parse_args(argv)
    src = Path(args.seeds_json)
    doc, runs = mixed_runs(src)
    seeds: dict[str, Any] = {}
    for s in doc["seeds"]:
        per_kind = kinds_of_seed(int(s), runs / str(s))
        seeds[str(s)] = {"summary": summarize(per_kind), "kinds": per_kind}
        sm = seeds[str(s)]["summary"]
        print(
            f"seed {s}: {sm['gained']} of {sm['kinds']} kinds gained, {sm['lost']} lost; "
            f"{sm['served_by_composite']} served by a composite branch "
            f"({sm['gained_served_by_composite']} of them gained), "
            f"{sm['served_by_any_tool']} by any tool; {sm['split_over_buckets']} kinds' errors "
            f"in more than one bucket ({sm['errors_outside_main_bucket']} of "
            f"{sm['errors_bucketed']} errors outside their kind's main bucket)"
        )
    trains = [v["train"] for sd in seeds.values() for v in sd["kinds"].values()]
    agg = {
        k: {
            "mean": round(statistics.mean(sd["summary"][k] for sd in seeds.values()), 3),
            "sd": round(statistics.stdev([sd["summary"][k] for sd in seeds.values()]), 3)
            if len(seeds) > 1
            else 0.0,
        }
        for k in next(iter(seeds.values()))["summary"]
    }
    result = {
        "source": str(src),
        "label": doc.get("label", ""),
        "kinds_setting": doc.get("kinds", ""),
        "train_questions_per_kind": dict(sorted(Counter(trains).items())),
        "aggregate": agg,
        "seeds": seeds,
    }
    out = Path(args.out) if args.out else src.with_name(src.stem + "-kinds.json")
    out.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    print(f"train questions per kind: {result['train_questions_per_kind']} -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

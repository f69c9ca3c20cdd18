"""Whether train labels can tell two phrasings of one question apart from two questions, as JSON.

``python -m tests.bench.mixed_merge_test [--seeds 60011,...] [--cache DIR] [--out
runs/bench/mixed-merge-test.json]``

A diagnostic for issue 11 (development seeds only; it claims nothing about held-out performance).
The phrasings of one ``mixed`` question are recovered from wording as separate kinds of one to six
train rows each (:class:`~tsevo.roles.builtin.kinds.KindIndex` on a seed's whole train split), and
merging them is worth about four points of test gain when few merges are false (the log, session
39). This bench measures the label test session 39 left as the lead: **fit on one kind's rows, read
the other's**. For every recovered kind ``a`` with at least three rows (the fewest a few-row search
ranks) and every other recovered kind ``b`` of the same option shape, the measurements that tie at
the top of ``a``'s search over the whole catalog (few-row leave-one-out, ``a``'s words breaking
ties) read ``b``'s rows with their own rules; the pair's **score** is the share of those ties that
read every row of ``b`` right, averaged over both directions where both kinds have three rows. A
pair is **true** when most members of both kinds are of one generator kind (a label no role sees).

Reported, over all candidate pairs and apart for generic option shapes (Yes / No, which of two
series: :func:`~tsevo.roles.builtin.kinds.generic_shape`) and specific ones:

* ``auc``: the chance a true pair scores above a false one (ties count half);
* ``mutual_best``: merging each pair that is each kind's best-scoring partner (score above
  ``min_score``): merges, true merges, precision and recall of the true pairs;
* ``partner_first``: of the kinds with ``a``'s role that have a true partner, the share whose best
  candidate is one.

A merge the round could use needs few false merges: a random merge of 57% of the true pairs with
about 4% false keeps +3.9 pp, the series-signature merge (91% precise) +0.7 (the log).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sklearn.metrics import roc_auc_score

from tests.bench import git_commit
from tests.bench import mixed_ties as ties_bench
from tests.bench.kind_search import full_planner, ties_of, with_questions, write_doc
from tests.bench.mixed_ceiling import ROOT, _examples, _ms
from tsevo.procs import forked_pool
from tsevo.roles.builtin.kinds import KindIndex, generic_shape

#: Development seeds (session 39's round arms ran on them).
SEEDS = (60011, 60149, 60263, 60389, 60521, 61011, 61147, 61263, 61387, 61529)
#: A few-row search ranks a kind of at least this many rows.
MIN_ROWS = 3
#: ``mutual_best`` merges a pair above these scores.
MIN_SCORES = (0.0, 0.2, 0.4, 0.6)
SUBSETS = ("all", "generic", "specific")


def auc(pos: Sequence[float], neg: Sequence[float]) -> float | None:
    """The chance a ``pos`` value exceeds a ``neg`` one (ties half); ``None`` if either is empty."""
    if not pos or not neg:
        return None
    return float(roc_auc_score([1] * len(pos) + [0] * len(neg), [*pos, *neg]))


def mutual_best(pairs: Sequence[Mapping[str, Any]], min_score: float) -> list[Mapping[str, Any]]:
    """The pairs (``seed``, ``a``, ``b``, ``score``) that are both kinds' best partner, above ``min_score``.

    Each kind's best partner is its highest-scoring pair (the first listed on equal scores).
    """
    best: dict[tuple[Any, str], Mapping[str, Any]] = {}
    for p in pairs:
        for k in (p["a"], p["b"]):
            key = (p["seed"], k)
            if key not in best or p["score"] > best[key]["score"]:
                best[key] = p
    return [
        p
        for p in pairs
        if p["score"] > min_score
        and best[(p["seed"], p["a"])] is p
        and best[(p["seed"], p["b"])] is p
    ]


def one_seed(seed: int) -> dict[str, Any]:
    """Every same-shape pair of recovered kinds on one seed's train rows, with its score."""
    rows = with_questions(seed, ties_bench._measured(seed))
    train = [r for r in rows if r["split"] == "train"]
    by_id = {r["id"]: r for r in train}
    index = KindIndex([r["q"] for r in train])
    planner = full_planner(train)
    kinds = {k.id: k for k in index.kinds}
    members = {k.id: [by_id[m] for m in k.members] for k in index.kinds}
    top = {kid: Counter(r["kind"] for r in rs).most_common(1)[0][0] for kid, rs in members.items()}
    tied: dict[str, list[Any]] = {}
    for kid, rs in members.items():
        if len(rs) < MIN_ROWS:
            continue
        found = ties_of(planner.rank(_examples(rs), few=True, words=kinds[kid].anchor)[2])
        if found:
            tied[kid] = found
    scores: dict[tuple[str, str], list[float]] = {}
    read_first: Counter[str] = Counter()
    for a, found in sorted(tied.items()):
        cands = []
        for b in sorted(kinds):
            if b == a or kinds[b].shape != kinds[a].shape:
                continue
            rb = members[b]
            preds = ties_bench._readings(found, rb)
            share = statistics.fmean(
                all(p[i] == r["gold"] for i, r in enumerate(rb)) for p in preds
            )
            scores.setdefault((min(a, b), max(a, b)), []).append(share)
            cands.append((share, b))
        if cands and any(top[b] == top[a] for _, b in cands):
            best = max(range(len(cands)), key=lambda i: (cands[i][0], -i))  # first on ties
            read_first["with_partner"] += 1
            read_first["first"] += int(top[cands[best][1]] == top[a])
    pairs = [
        {
            "seed": seed,
            "a": a,
            "b": b,
            "score": statistics.fmean(s),
            "true": top[a] == top[b],
            "generic": generic_shape(kinds[a].shape),
            "rows": sorted((len(members[a]), len(members[b]))),
        }
        for (a, b), s in sorted(scores.items())
    ]
    return {"seed": seed, "kinds": len(kinds), "ranked": len(tied), "pairs": pairs, **read_first}


def summarize(pairs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """AUC and mutual-best merges per subset of pairs (all, generic shapes, specific shapes)."""
    out: dict[str, Any] = {}
    for subset in SUBSETS:
        sel = [p for p in pairs if subset == "all" or p["generic"] == (subset == "generic")]
        pos = [p["score"] for p in sel if p["true"]]
        neg = [p["score"] for p in sel if not p["true"]]
        a = auc(pos, neg)
        merges = {}
        for m in MIN_SCORES:
            got = mutual_best(sel, m)
            hits = sum(p["true"] for p in got)
            merges[str(m)] = {
                "merges": len(got),
                "true": hits,
                "precision": round(hits / len(got), 3) if got else None,
                "recall": round(hits / len(pos), 3) if pos else None,
            }
        out[subset] = {
            "pairs": len(sel),
            "true_pairs": len(pos),
            "auc": round(a, 3) if a is not None else None,
            "mutual_best": merges,
        }
    return out


def main(argv: list[str] | None = None) -> int:
    t0 = time.perf_counter()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default=",".join(map(str, SEEDS)))
    ap.add_argument("--cache", default="", help="folder for the measurements (reused when present)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "runs" / "bench" / "mixed-merge-test.json"))
    args = ap.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    ties_bench._STATE["cache"] = Path(args.cache) if args.cache else None
    with forked_pool(args.workers) as pool:
        results = list(pool.map(one_seed, seeds))
    pairs = [p for r in results for p in r["pairs"]]
    with_partner = sum(r.get("with_partner", 0) for r in results)
    first = sum(r.get("first", 0) for r in results)
    doc = {
        "bench": "mixed_merge_test",
        "label": "development",
        "commit": git_commit(),
        "seeds": seeds,
        "recovered_kinds": _ms([r["kinds"] for r in results], digits=1),
        "ranked_kinds": _ms([r["ranked"] for r in results], digits=1),
        "partner_first": {
            "kinds": with_partner,
            "first": first,
            "share": round(first / with_partner, 3) if with_partner else None,
        },
        **summarize(pairs),
        "seconds": round(time.perf_counter() - t0, 1),
    }
    for subset in SUBSETS:
        s = doc[subset]
        print(f"{subset:8s} pairs {s['pairs']:5d} true {s['true_pairs']:4d} AUC {s['auc']}")
        for m, v in s["mutual_best"].items():
            print(f"   mutual best above {m}: {v}")
    print(f"true partner scored first for {first} of {with_partner} kinds")
    write_doc(args.out, doc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""What a round's admission costs on ``mixed``: one composite of every train row against the round.

``python -m tests.bench.mixed_round_gap [--seeds 104,...,111] [--rounds runs/bench/X.json]
[--cache DIR] [--out runs/bench/mixed-round-gap.json]``

A diagnostic for issue 11 (development seeds only; it claims nothing about held-out performance).
A round plans a composite per bucket on the bucket's support errors and some background, holds
errors out for the prefilter, drops branches that harmed validation questions (reconcile) and gates
the library. Per seed this bench plans one composite of kinds recovered from wording on *every*
train row of the seed (:func:`~tests.bench.mixed_ceiling.plan_all`: no buckets, nothing held out)
and answers the same seed's test questions with it, as planned (``one_dossier``) and after the
round's reconcile rule applied on the seed's validation questions (``reconciled``: a branch that
harmed at least one validation question and helped no more is dropped). Two more arms plan the one
dossier on the generator's kinds (which no role sees): ``given_kinds`` sends each test question to
its own kind's branch, ``given_per_phrasing`` copies each branch once per phrasing recovered from
the kind's train rows, dispatched on that phrasing's words (what a round could do if it merged the
phrasings of one question perfectly). ``given_unserved`` adds, after those copies, the recovered
branches of phrasings whose true kind got no branch on the given kinds (merging cost them their own
plan); ``given_fill`` puts the recovered branches first and the copies after them, so the given plan
only serves phrasings no recovered branch reads. Gains and harm are pp of
the seed's test questions over the base answerer, paired per seed with the round's own figures from
a :mod:`tests.bench.seeds` JSON of the same seeds (``--rounds``).

The gap says whether a round loses gain to its admission steps, and whether what it loses buys
harm back at the rate the learner's other knobs trade them (the question for any change that
would plan rounds on more rows).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.bench import git_commit
from tests.bench.kind_search import with_questions, write_doc
from tests.bench.mixed_ceiling import ROOT, _ms, answer, dispatched, plan_all
from tests.bench.mixed_dispatch import RecoveredKind, per_phrasing, recovered_kinds
from tests.bench.mixed_ties import _STATE, _measured, _score
from tsevo.procs import forked_pool
from tsevo.roles.builtin.composite import Branch

SEEDS = (104, 105, 106, 107, 108, 109, 110, 111)


#: The round, and one dossier of all train rows planned on recovered kinds (as it is, and after the
#: round's reconcile rule on validation) or on the generator's kinds (each question sent to its own
#: kind's branch, or one branch copy per recovered phrasing dispatched on its words).
ARMS = (
    "round",
    "one_dossier",
    "reconciled",
    "given_kinds",
    "given_per_phrasing",
    "given_unserved",
    "given_fill",
)


def unserved(
    given: Sequence[Branch],
    recovered: Sequence[Branch],
    kinds: Sequence[RecoveredKind],
) -> list[Branch]:
    """The recovered branches whose phrasing's true kind got no branch of its own in ``given``.

    ``kinds``: :func:`~tests.bench.mixed_dispatch.recovered_kinds` of the same train rows.
    """
    served = {b.kinds[0] for b in given}
    top = {kid: t for kid, _, _, t in kinds}
    return [b for b in recovered if not any(top.get(k) in served for k in b.kinds)]


def score(
    branches: Sequence[Branch], rows: Sequence[dict[str, Any]], given: bool = False
) -> tuple[float, float]:
    """(gain, harmed) in pp of ``rows`` of the branches' answers over the base answerer.

    ``given``: each question goes to its own true kind's branch (no wording involved).
    """
    gain, harmed = _score([answer(branches, r, given) for r in rows], rows)
    n = max(len(rows), 1)
    return 100 * gain / n, 100 * harmed / n


def reconciled(branches: Sequence[Branch], val: Sequence[dict[str, Any]]) -> list[Branch]:
    """The branches the round's reconcile keeps: none that harmed and helped no more on ``val``."""
    helped: dict[int, int] = {}
    harmed: dict[int, int] = {}
    for r in val:
        b = dispatched(branches, r)
        if b is None:
            continue
        a = answer([b], r)  # the branch the question went to, not a second dispatch
        helped[id(b)] = helped.get(id(b), 0) + int(a == r["gold"] and r["base"] != r["gold"])
        harmed[id(b)] = harmed.get(id(b), 0) + int(a != r["gold"] and r["base"] == r["gold"])
    return [b for b in branches if harmed.get(id(b), 0) < max(helped.get(id(b), 0), 1)]


def one_seed(seed: int) -> dict[str, Any]:
    rows = with_questions(seed, _measured(seed))
    split = {s: [r for r in rows if r["split"] == s] for s in ("train", "val", "test")}
    branches, index, _ = plan_all(split["train"])
    kept = reconciled(branches, split["val"])
    given, _, _ = plan_all(split["train"], given=True)
    kinds = recovered_kinds(index, {r["id"]: r["kind"] for r in split["train"]})
    copies = per_phrasing(given, kinds)
    return {
        "seed": seed,
        "branches": len(branches),
        "branches_reconciled": len(kept),
        "one_dossier": score(branches, split["test"]),
        "reconciled": score(kept, split["test"]),
        "given_kinds": score(given, split["test"], given=True),
        "given_per_phrasing": score(copies, split["test"]),
        # the phrasings of a kind the given plan left unserved, planned on their own rows
        "given_unserved": score([*copies, *unserved(given, branches, kinds)], split["test"]),
        # the recovered plan as it is, the given plan's copies only where no recovered branch reads
        "given_fill": score([*branches, *copies], split["test"]),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default=",".join(map(str, SEEDS)))
    ap.add_argument("--rounds", default=str(ROOT / "runs" / "bench" / "mixed-dev8-weighted.json"))
    ap.add_argument("--cache", default="", help="folder for the measurements (reused when present)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "runs" / "bench" / "mixed-round-gap.json"))
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    seeds = [int(s) for s in args.seeds.split(",")]
    rounds = {r["seed"]: r for r in json.loads(Path(args.rounds).read_text())["rows"]}
    if missing := sorted(set(seeds) - set(rounds)):
        ap.error(f"{args.rounds} holds no round of seeds {missing}")
    _STATE["cache"] = Path(args.cache) if args.cache else None
    with forked_pool(args.workers) as pool:
        results = list(pool.map(one_seed, seeds))
    for res in results:
        r = rounds[res["seed"]]
        res["round"] = (100 * r["gain"], 100 * r["harmed_pct"])
    arms = {}
    for arm in ARMS:
        arms[arm] = {
            name: _ms([res[arm][i] for res in results], digits=2)
            for i, name in enumerate(("gain_pp", "harmed_pct"))
        }
        if arm != "round":
            dg = [res[arm][0] - res["round"][0] for res in results]
            dh = [res[arm][1] - res["round"][1] for res in results]
            arms[arm]["minus_round"] = {
                "gain_pp": round(statistics.fmean(dg), 2),
                "harmed_pct": round(statistics.fmean(dh), 2),
            }
    doc = {
        "bench": "mixed_round_gap",
        "label": "development",
        "commit": git_commit(),
        "seeds": seeds,
        "rounds": Path(args.rounds).name,
        "arms": arms,
        "per_seed": results,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    print(json.dumps(arms, indent=1))
    write_doc(args.out, doc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

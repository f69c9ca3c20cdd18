"""Where recovering question kinds from wording loses on ``mixed``, question by question, as JSON.

``python -m tests.bench.mixed_dispatch [--fit-seeds 104,105,106,107] [--eval-seeds 108,109,110,111]
[--cache DIR] [--out runs/bench/mixed-dispatch.json]``

A diagnostic for issue 11 (development seeds only; it claims nothing about held-out performance).
:mod:`tests.bench.mixed_ceiling` shows that the builtin learner planned on one dossier of all a
seed's train rows gains much more with the generator's kinds given (``kinds_given``) than with
kinds recovered from wording (``unsupervised_kinds``). This bench says why. Per fit seed, both
plans are made (:func:`~tests.bench.mixed_ceiling.plan_all`); every eval question is answered by
each, and where one is right and the other wrong, the recovered plan's side is classified:

* ``unseen_phrasing``: no kind recovered from the train split holds the question's words (no train
  question of the kind was asked in this phrasing), so no branch can reach it;
* ``phrasing_without_errors``: its phrasing is a recovered kind, but none of that kind's train
  rows was an error, so nothing was planned for it (a branch is planned for kinds with errors);
* ``too_few_rows``, ``no_rule``, ``kept_base``: its phrasing's kind was considered and left out
  for that reason (fewer than ``min_rows`` rows, pooled or not; no rule clears the bar; the rule
  recovers no more rows than the agent);
* ``other_kind``: the only recovered kinds whose words it holds are mostly of other true kinds
  (the recovered kind merged questions the generator tells apart);
* ``both_served``: a branch answers it under both plans, with different rules (the recovered kind
  has fewer rows, other pooling partners, or another branch's words caught it first);
* ``other``: anything else (its phrasing's kind has a branch that no longer reaches it).

Reported per cause: how many questions each plan gets right that the other does not, and the net in
pp of all eval questions; and per true kind the same net. Two more arms read the plan made on the
given kinds as a composite built on wording would have to dispatch it (gain and share harmed of
every arm in ``gain_pp`` and ``harmed_pct``): ``given_words``, each branch dispatched on the words
all its kind's train phrasings share; ``given_per_phrasing``, one copy of each branch per phrasing
recovered from the kind's train rows, on that phrasing's own words (:func:`per_phrasing`).
"""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from tests.bench import git_commit
from tests.bench.mixed_ceiling import _ms, answer, dispatched, plan_all
from tests.bench.mixed_ties import _STATE, measured_seeds
from tsevo.fileio import atomic_write_text
from tsevo.library.tool import Matcher, question_tokens
from tsevo.procs import forked_pool
from tsevo.roles.builtin.composite import Branch
from tsevo.roles.builtin.kinds import KindIndex

#: The plans and dispatches compared (``<arm>_right`` per eval row).
ARMS = ("given", "recovered", "given_words", "given_per_phrasing")

#: A recovered kind: its id, dispatch words (require, forbid) and the true kind most members are.
RecoveredKind = tuple[str, tuple[str, ...], tuple[str, ...], str]

CAUSES = (
    "unseen_phrasing",
    "phrasing_without_errors",
    "too_few_rows",
    "no_rule",
    "kept_base",
    "other_kind",
    "both_served",
    "other",
)


def _outcome_cause(outcome: str) -> str:
    """The cause a kind's plan outcome names (the report's ``outcome`` text)."""
    if outcome.startswith("too few rows"):
        return "too_few_rows"
    if outcome.startswith("recovers"):
        return "kept_base"
    if outcome.startswith("no rule") or "fewer than" in outcome:
        return "no_rule"
    return "other"


def cause(
    r: dict[str, Any],
    kinds: Sequence[RecoveredKind],
    report: dict[str, Any],
    served: bool,
) -> str:
    """Why the recovered plan answers question ``r`` differently from the plan with kinds given.

    ``kinds``: each recovered kind's id, dispatch words (require, forbid) and the true kind most
    of its members are.
    """
    if served:
        return "both_served"
    toks = question_tokens(r["text"])
    held = [
        (kid, top)
        for kid, require, forbid, top in kinds
        if Matcher(require=require, forbid=forbid).matches(toks)
    ]
    if not held:
        return "unseen_phrasing"
    own = [kid for kid, top in held if top == r["kind"]]
    if not own:
        return "other_kind"
    entry = report.get(own[0])
    if entry is None:
        return "phrasing_without_errors"
    return _outcome_cause(str(entry.get("outcome", "")))


def recovered_kinds(index: KindIndex, true_kind: dict[str, str]) -> list[RecoveredKind]:
    """Per recovered kind: its id, dispatch words (require, forbid) and the true kind most members are."""
    out = []
    for k in index.kinds:
        require, forbid = index.dispatch(k.id)
        top = Counter(true_kind[m] for m in k.members).most_common(1)[0][0]
        out.append((k.id, require, forbid, top))
    return out


def per_phrasing(branches: Sequence[Branch], kinds: Sequence[RecoveredKind]) -> list[Branch]:
    """Each given kind's branch copied once per recovered phrasing of it, on that phrasing's words.

    ``kinds``: the kinds recovered from the same train rows' wording (:func:`recovered_kinds`).
    """
    return [
        replace(b, require=require, forbid=forbid)
        for b in branches
        for _, require, forbid, top in kinds
        if top == b.kinds[0]
    ]


def one_seed(seed: int) -> dict[str, Any]:
    """Both plans on one fit seed's train rows; every eval question's answers and cause."""
    train = _STATE["train"][seed]
    given, _, _ = plan_all(train, given=True)
    recovered, index, report = plan_all(train)
    kinds = recovered_kinds(index, {r["id"]: r["kind"] for r in train})
    copies = per_phrasing(given, kinds)
    rows = []
    for r in _STATE["ev"]:
        a_given = answer(given, r, given=True)
        a_rec = answer(recovered, r)
        right_g, right_r = a_given == r["gold"], a_rec == r["gold"]
        c = None
        if right_g != right_r:
            served = dispatched(recovered, r) is not None
            c = cause(r, kinds, report, served)
        rows.append(
            {
                "kind": r["kind"],
                "base_right": r["base"] == r["gold"],
                "given_right": right_g,
                "recovered_right": right_r,
                "given_words_right": answer(given, r) == r["gold"],
                "given_per_phrasing_right": answer(copies, r) == r["gold"],
                "cause": c,
            }
        )
    return {"seed": seed, "rows": rows, "branches": [len(given), len(recovered)]}


def summarize(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per cause and per true kind: questions each plan alone gets right, and the net in pp."""
    n = sum(len(res["rows"]) for res in results)
    per_cause: dict[str, Counter[str]] = {c: Counter() for c in CAUSES}
    per_kind: dict[str, int] = defaultdict(int)
    gains: dict[str, list[float]] = {arm: [] for arm in ARMS}
    harms: dict[str, list[float]] = {arm: [] for arm in ARMS}
    for res in results:
        rows = res["rows"]
        for arm in gains:
            won = sum(int(x[f"{arm}_right"]) - int(x["base_right"]) for x in rows)
            gains[arm].append(100 * won / len(rows))
            lost = sum(int(x["base_right"] and not x[f"{arm}_right"]) for x in rows)
            harms[arm].append(100 * lost / len(rows))
        for x in rows:
            if x["cause"] is None:
                continue
            side = "given_only" if x["given_right"] else "recovered_only"
            per_cause[x["cause"]][side] += 1
            per_kind[x["kind"]] += 1 if x["given_right"] else -1
    causes = {
        c: {
            "given_only": cnt["given_only"],
            "recovered_only": cnt["recovered_only"],
            "net_pp": round(100 * (cnt["given_only"] - cnt["recovered_only"]) / n, 2),
        }
        for c, cnt in per_cause.items()
    }
    return {
        "eval_answers": n,
        "gain_pp": {arm: _ms(v, 2) for arm, v in gains.items()},
        "harmed_pct": {arm: _ms(v, 2) for arm, v in harms.items()},
        "gap_pp": round(sum(c["net_pp"] for c in causes.values()), 2),
        "causes": causes,
        "kinds_net_questions": dict(sorted(per_kind.items(), key=lambda kv: (-kv[1], kv[0]))),
    }


def main(argv: list[str] | None = None) -> int:
    t0 = time.perf_counter()
    args, fit, evs, parts = measured_seeds(argv, __doc__.splitlines()[0], "mixed-dispatch.json")
    _STATE["train"] = {s: [r for r in parts[s] if r["split"] == "train"] for s in fit}
    _STATE["ev"] = [r for s in evs for r in parts[s]]
    with forked_pool(args.workers) as pool:
        results = list(pool.map(one_seed, fit))
    doc = {
        "bench": "mixed_dispatch",
        "label": "development",
        "commit": git_commit(),
        "fit_seeds": fit,
        "eval_seeds": evs,
        **summarize(results),
        "branches": {str(res["seed"]): res["branches"] for res in results},
        "seconds": round(time.perf_counter() - t0, 1),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, json.dumps(doc, indent=1) + "\n")
    print(json.dumps({k: doc[k] for k in ("gain_pp", "harmed_pct", "gap_pp", "causes")}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

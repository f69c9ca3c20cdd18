"""What recovering kinds from wording costs on ``mixed``, split by where a question goes, as JSON.

``python -m tests.bench.mixed_phrasings [--fit-seeds 104,105,106,107] [--eval-seeds 108,...]
[--cache DIR] [--out runs/bench/mixed-phrasings.json]``

A diagnostic for issue 11 (development seeds only). :mod:`tests.bench.mixed_ceiling` found that one
dossier of all of a seed's train rows gains far more with the generator's kinds given
(``kinds_given``) than with kinds recovered from wording (``unsupervised_kinds``). A generator kind
has two phrasings, and wording recovers each as a kind of its own. This bench reads the same
dossiers (:func:`tests.bench.mixed_ceiling.plan_all`) on the eval seeds' questions and says where
the difference lies:

* ``levels``: gain (pp of all eval questions) and share harmed, mean ± sd over fit seeds, for
  ``unsupervised`` (recovered kinds, dispatch by each kind's words), ``given`` (the generator's
  kinds, each question sent to its own kind's branch: no wording involved), ``given_words`` (the
  generator's kinds planned, dispatch by the words all of a kind's phrasings share, as a composite
  built on such kinds would do) and ``given_per_phrasing`` (the generator's kinds planned, one copy
  of each branch per recovered phrasing of the kind, dispatched on that phrasing's own words);
* ``losses``: eval questions right under ``given`` and wrong under ``unsupervised`` (and the
  reverse, ``wins``), by what happened under ``unsupervised``: no branch fired (``none``), its
  branch abstained (``abst``) or read another option (``read``); and, for ``none``, whether the
  question's phrasing was seen in train and why its recovered kind has no branch (the planner's
  report outcome, numbers masked).

About 5 minutes on 2 cores with the measurements cached (``--cache``, shared with ``mixed_ties``).
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from tests.bench import git_commit
from tests.bench.kind_search import with_questions, write_doc
from tests.bench.mixed_ceiling import _branch_option, _examples, _ms, dispatched, plan_all
from tests.bench.mixed_ties import measured_seeds
from tsevo.data import QuestionView
from tsevo.roles.builtin.composite import Branch
from tsevo.roles.builtin.kinds import KindIndex, masked_tokens, option_shape

LEVELS = ("unsupervised", "given", "given_words", "given_per_phrasing")


def _answer(branches: Sequence[Branch], r: dict[str, Any], given: bool = False) -> tuple[int, str]:
    """The option left on a measured question and what happened (``none``, ``abst``, ``read``)."""
    b = dispatched(branches, r, given)
    if b is None:
        return int(r["base"]), "none"
    o = _branch_option(b, r)
    return (int(r["base"]), "abst") if o is None else (int(o), "read")


def per_phrasing(branches: Sequence[Branch], train: Sequence[dict[str, Any]]) -> list[Branch]:
    """Each given kind's branch copied once per recovered phrasing of it, on that phrasing's words."""
    ex = _examples(train)
    words = KindIndex(e.question for e in ex)
    kind_of = {e.question.id: r["kind"] for e, r in zip(ex, train, strict=True)}
    out = []
    for b in branches:
        for w in words.kinds:
            if Counter(kind_of[m] for m in w.members).most_common(1)[0][0] == b.kinds[0]:
                require, forbid = words.dispatch(w.id)
                out.append(replace(b, require=require, forbid=forbid))
    return out


def _why_none(r: dict[str, Any], index: KindIndex, report: dict[str, Any]) -> str:
    """Why no recovered kind's branch fired on ``r``: its phrasing unseen, or its kind's outcome."""
    v = QuestionView.of(r["q"], r["id"])
    toks, shape = masked_tokens(v), option_shape(v)
    for k in index.kinds:
        if (
            k.shape == shape
            and len(k.template) == len(toks)
            and all(a in (b, "*") for a, b in zip(k.template, toks, strict=True))
        ):
            outcome = report.get(k.id, {}).get("outcome", "no error in train")
            return "seen: " + re.sub(r"\d+", "N", outcome.split(":")[0])
    return "phrasing unseen in train"


def one_seed(train: Sequence[dict[str, Any]], ev: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The four levels' (right, harmed) counts and the tallies of differing answers, for one fit seed."""
    unsup, index, report = plan_all(train)
    given, _, _ = plan_all(train, given=True)
    copies = per_phrasing(given, train)
    counts = {lv: [0, 0] for lv in LEVELS}
    losses: Counter[str] = Counter()
    wins: Counter[str] = Counter()
    for r in ev:
        u, how = _answer(unsup, r)
        answers = {
            "unsupervised": u,
            "given": _answer(given, r, given=True)[0],
            "given_words": _answer(given, r)[0],
            "given_per_phrasing": _answer(copies, r)[0],
        }
        for lv, a in answers.items():
            counts[lv][0] += int(a == r["gold"])
            counts[lv][1] += int(r["base"] == r["gold"] and a != r["gold"])
        if (u == r["gold"]) == (answers["given"] == r["gold"]):
            continue
        tally = wins if u == r["gold"] else losses
        tally[how] += 1
        if how == "none":
            tally["none, " + _why_none(r, index, report)] += 1
    return {"counts": counts, "losses": dict(losses), "wins": dict(wins)}


def main(argv: list[str] | None = None) -> int:
    t0 = time.perf_counter()
    args, fit, evs, parts = measured_seeds(argv, __doc__.splitlines()[0], "mixed-phrasings.json")
    ev = [r for s in evs for r in with_questions(s, parts[s])]
    n, base = len(ev), sum(int(r["base"] == r["gold"]) for r in ev)
    results = {s: one_seed([r for r in parts[s] if r["split"] == "train"], ev) for s in fit}
    levels = {
        lv: {
            "gain_pp": _ms(
                [100 * (res["counts"][lv][0] - base) / n for res in results.values()], 2
            ),
            "harmed_pct": _ms([100 * res["counts"][lv][1] / n for res in results.values()], 2),
        }
        for lv in LEVELS
    }
    for lv, gh in levels.items():
        print(f"{lv:20s} gain {gh['gain_pp']} harmed {gh['harmed_pct']}")

    def pp(key: str) -> dict[str, float]:
        tot: Counter[str] = Counter()
        for res in results.values():
            tot.update(res[key])
        return {k: round(100 * v / n / len(fit), 2) for k, v in tot.most_common()}

    doc = {
        "bench": "mixed_phrasings",
        "label": "development",
        "commit": git_commit(),
        "fit_seeds": fit,
        "eval_seeds": evs,
        "eval_questions": n,
        "levels": levels,
        "losses_pp": pp("losses"),
        "wins_pp": pp("wins"),
        "seconds": round(time.perf_counter() - t0, 1),
        "per_seed": {str(s): res for s, res in results.items()},
    }
    for key in ("losses_pp", "wins_pp"):
        print(key, doc[key])
    write_doc(args.out, doc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

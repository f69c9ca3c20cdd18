"""A tie-break learned across question kinds on one seed's train rows, as JSON.

``python -m tests.bench.mixed_ties_learned [--fit-seeds ...] [--eval-seeds ...] [--cache DIR]
[--primitives] [--planned] [--out runs/bench/mixed-ties-learned.json]``

A diagnostic for issue 11 (development seeds only). :mod:`tests.bench.mixed_ties` compares
hand-made tie-breaks among the measurements that read a kind's 3-6 train rows equally well. This
bench asks whether the round's own train split can *teach* a tie-break: across all kinds of one fit
seed, each kind's rows are left out one at a time, the planner ranks the catalog on the others, and
every tie is labelled by whether it reads the left-out row right. A logistic model of that label on
each tie's features (word relevance, class separation, stability under noise and its square, its
place in the shipped order, the share of ties sharing its primitive, its parameter count; with
``--primitives`` also its primitive and catalog group, a prior over the catalog learned from this
benchmark) then orders the ties of every served kind fitted on all its rows. Only that seed's train
rows are read to fit; the order is scored as :mod:`tests.bench.mixed_ties` scores its levels, on
the eval seeds' questions of the kind (gain in pp of all eval questions and the share harmed, mean ±
sd over fit seeds): ``first`` and ``quorum`` (the shipped order's first tie, the shipped branch),
``learned_first`` (the model's first tie) and ``learned`` votes of its first ``k`` ties answering
where ``share`` of them agree (the points of ``mixed_ties``' ``frontier``, to compare with it).

``--planned``: the ties of the kind planner's own search (concept groups first, the planner's
screen; :func:`tests.bench.kind_search.kind_ties`), for every kind and every left-out row, instead
of the whole catalog's: the search a round runs (``mixed_ties --planned``).

About 10 minutes on 2 cores with the measurements cached (``--cache``, shared with
``mixed_ties``): every kind is ranked once per train row (``--planned``: about 2-6 minutes).
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from sklearn.feature_extraction import DictVectorizer
from sklearn.linear_model import LogisticRegression

from tests.bench import git_commit
from tests.bench.kind_search import by_kind, full_planner, kind_ties, search, ties_of, write_doc
from tests.bench.mixed_ceiling import _ms
from tests.bench.mixed_ties import (
    _STATE,
    FRONTIER,
    PLANNED,
    QUORUM,
    _frontier,
    _readings,
    _score,
    _stability,
    measured_seeds,
    split_state,
)
from tsevo.library.primitives import CATALOG
from tsevo.procs import forked_pool
from tsevo.roles.builtin.concepts import relevance
from tsevo.roles.builtin.kindplan import KindPlanSettings

#: The learned order's votes scored: the frontier points of ``mixed_ties`` with 1-17 members.
POINTS = tuple(p for p, (k, share) in FRONTIER.items() if k <= 17 and 0.6 <= share <= 0.8)


def _features(
    ties: Sequence[Any], ex: Sequence[Any], words: frozenset[str], tag: str, primitives: bool
) -> list[dict[str, float]]:
    """Each tie's features: what a planner knows of it from the kind's train rows and words."""
    stab = _stability(ties, ex, tag)
    per = Counter(t.spec.primitive for t in ties)
    out = []
    for i, t in enumerate(ties):
        entry = CATALOG[t.spec.primitive]
        f = {
            "relevance": float(relevance(words, t.spec.describe(t.key), entry.summary)),
            "separation": min(float(t.separation), 5.0),
            "stability": stab[i],
            "stability_sq": stab[i] ** 2,
            "position": i / max(1, len(ties) - 1),
            "variants": per[t.spec.primitive] / len(ties),
            "params": float(len(t.spec.params)),
        }
        if primitives:
            f[f"primitive={t.spec.primitive}"] = f[f"group={entry.group}"] = 1.0
        out.append(f)
    return out


def one_seed(seed: int) -> dict[str, Any]:
    """Fit the tie model on the seed's left-out train rows; score its order on the eval seeds."""
    train, ev, primitives = _STATE["train"][seed], _STATE["ev"], _STATE["primitives"]
    planned = bool(_STATE.get("planned"))
    settings = KindPlanSettings()
    planner = full_planner(train, whole=not planned)
    x: list[dict[str, float]] = []
    y: list[int] = []
    w: list[float] = []
    served = {}
    for kind, rows in by_kind(train).items():
        got = kind_ties(planner, rows, settings, planned=planned)
        if got is None:
            continue
        if got.served and ev.get(kind):
            feats = _features(got.ties, got.ex, got.words, f"{seed}:{kind}", primitives)
            served[kind] = (feats, _readings(got.ties, ev[kind]))
        for j in range(len(got.ex) if len(got.ex) >= 4 else 0):
            rest = [*got.ex[:j], *got.ex[j + 1 :]]
            inner = ties_of(search(planner, rest, got.words, settings, planned)[0])
            right = [int(p[0] == rows[j]["gold"]) for p in _readings(inner, [rows[j]])]
            if len(set(right)) < 2:
                continue  # every tie reads the row alike: nothing to learn from it
            x += _features(inner, rest, got.words, f"{seed}:{kind}:{j}", primitives)
            y += right
            w += [1.0 / len(inner)] * len(inner)
    vec = DictVectorizer()
    model = LogisticRegression(max_iter=2000).fit(vec.fit_transform(x), y, sample_weight=w)
    levels: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for kind, (feats, preds) in served.items():
        score = model.decision_function(vec.transform(feats))
        order = [preds[i] for i in sorted(range(len(preds)), key=lambda i: (-score[i], i))]
        got_levels = {
            "first": _score(preds[0], ev[kind]),
            "quorum": _frontier(preds, ev[kind], [QUORUM])[QUORUM],
            "learned_first": _score(order[0], ev[kind]),
            **{f"learned {p}": gh for p, gh in _frontier(order, ev[kind], POINTS).items()},
        }
        for level, (gain, harmed) in got_levels.items():
            levels[level][0] += gain
            levels[level][1] += harmed
    coefs = sorted(zip(model.coef_[0], vec.feature_names_, strict=True), key=lambda c: -abs(c[0]))
    return {
        "seed": seed,
        "levels": dict(levels),
        "folds_rows": len(y),
        "coefficients": {name: round(float(c), 3) for c, name in coefs[:12]},
    }


def main(argv: list[str] | None = None) -> int:
    t0 = time.perf_counter()
    args, fit, evs, parts = measured_seeds(
        argv,
        __doc__.splitlines()[0],
        "mixed-ties-learned.json",
        flags=[
            ("--primitives", "each tie's primitive and catalog group as features too"),
            ("--planned", PLANNED),
        ],
    )
    _STATE.update(primitives=args.primitives, planned=args.planned)
    ev = split_state(parts, fit, evs)
    with forked_pool(args.workers) as pool:
        results = list(pool.map(one_seed, fit))
    n_ev = sum(len(v) for v in ev.values())
    levels = {
        level: {
            name: _ms([100 * r["levels"][level][i] / n_ev for r in results], digits=2)
            for i, name in enumerate(("gain_pp", "harmed_pct"))
        }
        for level in results[0]["levels"]
    }
    for level, gh in levels.items():
        print(f"{level:16s} gain {gh['gain_pp']} harmed {gh['harmed_pct']}")
    doc = {
        "bench": "mixed_ties_learned",
        "label": "development",
        "commit": git_commit(),
        "fit_seeds": fit,
        "eval_seeds": evs,
        "eval_questions": n_ev,
        "primitives": _STATE["primitives"],
        "search": "planned" if args.planned else "whole catalog",
        "levels": levels,
        "seconds": round(time.perf_counter() - t0, 1),
        "per_seed": {str(r["seed"]): {k: v for k, v in r.items() if k != "seed"} for r in results},
    }
    write_doc(args.out, doc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

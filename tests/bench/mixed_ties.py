"""How a few-row search chooses among equally good measurements on ``mixed``, as JSON.

``python -m tests.bench.mixed_ties [--fit-seeds 104,105,106,107] [--eval-seeds 108,109,110,111]
[--cache DIR] [--crop] [--planned] [--out runs/bench/mixed-ties.json]``

A diagnostic for issue 11 (development seeds only; it claims nothing about held-out performance).
Per fit seed and true question kind (the generator's label, which no role sees), the planner's
ranking (:meth:`~tsevo.roles.builtin.planner.MeasurementPlanner.rank`, few-row leave-one-out, the
kind's words breaking ties) is computed over the *whole* catalog on that seed's 3-6 train rows of
the kind. The measurements whose leave-one-out accuracy equals the best are its **ties**. Reported:

* ``ties``: how many measurements tie at the top (median and quartiles over kind-seeds);
* ``right_at_top``: of the kind-seeds where the capacity measurement (the best on about 36 rows of
  all fit seeds, :func:`tests.bench.mixed_ceiling._capacity_pick`) is ranked at all, the share
  where it ties at the top, and its position there in the shipped order (0: chosen);
* per selection level, the gain on the eval seeds' questions of the kind over the base answerer
  (pp of all eval questions) and the share of them harmed, the base answer kept where a level
  abstains or the kind is not served (best leave-one-out below the search's bar, or recovering
  fewer than ``min_gain`` rows beyond the base answerer):
  ``first`` (the shipped order's first tie alone), ``quorum`` (it and its first ``peers`` ties,
  answering where ``quorum`` of them agree: the shipped branch), ``vote_all`` (the plurality of
  every tie), ``random`` (the mean over ties: a pick that knows nothing), three tie-breaks that
  might tell a real signal from a fluke: ``widest_gap`` (the widest class separation on the rows),
  ``most_variants`` (the primitive with the most tied variants), ``most_central`` (the tie that
  agrees most with the others on the kind's eval questions, read without their labels),
  ``most_central_train`` (the same on about 60 train series of the seed, every kind's, read as if
  asked the kind's question: inputs a planner has), ``most_shared`` (the tie that also ties on
  most of the kind's related kinds, those whose tie sets overlap its own far beyond chance: kinds
  that ask about one property in other words or options share its measurement, see
  :func:`_shared_ties`), ``most_stable`` (the tie that reads the
  kind's own train rows right most often when each row's series get small added noise, three
  copies each at ``NOISE`` times the series' noise level estimated from first differences: a
  reading that holds under a perturbation the answer does not depend on, from train inputs
  alone), ``stable_quorum`` (the shipped branch's vote, its peers drawn first from the most
  stable ties), and
  ``best_on_eval``
  (the tie that reads the eval questions best: chosen on the eval labels, so an optimistic bound
  on what any tie-break could reach, inflated by picking among many on a few dozen questions), and
  ``best_cross_eval`` (the tie chosen on the questions of half the eval seeds and scored on the
  other half, both ways: what a tie-break that knew the right tie would reach, without that
  optimism; where a kind's eval questions all come from one seed half, it is not scored).

``frontier`` holds the same (gain, harmed) for unweighted votes of the shipped order's first ``k``
ties answering where at least ``share`` of them agree (:data:`FRONTIER_VOTES` x
:data:`FRONTIER_SHARES`; ``quorum`` is the point 9:0.7): whether any size and agreement of a vote
gains more at less harm than the shipped branch. ``frontier_stable`` holds the same votes with the
ties in stability order (most stable first, the shipped order breaking ties): whether choosing a
vote's members by stability, rather than weighting them by it, moves the line.

``--crop``: stability also reads each row without its last 2.5, 5 and 10% of points. ``--planned``:
the ties of the kind planner's own search (concept groups first; :func:`.kind_search.kind_ties`)
instead of the whole catalog's; ``right_*`` and ``most_shared`` then read only those ties.

The gap between ``quorum`` and ``right_measurement_judged`` of ``mixed_ceiling`` is the search's
selection loss; this bench shows whether it lies among the ties (a tie-break problem) or below
them (the right measurement does not read the few rows best).
"""

from __future__ import annotations

import argparse
import hashlib
import pickle
import statistics
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import hypergeom

from tests.bench import git_commit
from tests.bench.kind_search import (
    CROP_STEPS,
    KindTies,
    by_kind,
    cropped_copy,
    full_planner,
    kind_ties,
    with_questions,
    write_doc,
)
from tests.bench.mixed_ceiling import (
    EVAL_SEEDS,
    FIT_SEEDS,
    ROOT,
    _capacity_pick,
    _ms,
    measure_seed,
)
from tsevo.library.reading import apply_rule
from tsevo.procs import forked_pool
from tsevo.roles.builtin.kindplan import KindPlanSettings
from tsevo.roles.builtin.measure import SpecCache
from tsevo.roles.builtin.stability import noisy_copy, read_right

LEVELS = (
    "first",
    "quorum",
    "vote_all",
    "random",
    "widest_gap",
    "most_variants",
    "most_central",
    "most_central_train",
    "most_shared",
    "most_stable",
    "stable_quorum",
    "best_on_eval",
    "best_cross_eval",
)
#: The vote frontier: the first ``k`` ties in the shipped order (unweighted), answering where at
#: least ``share`` of them name one option (``k`` of 10**6: every tie).
FRONTIER_VOTES = (1, 3, 5, 9, 17, 33, 65, 10**6)
FRONTIER_SHARES = (0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
FRONTIER = {f"{k}:{share}": (k, share) for k in FRONTIER_VOTES for share in FRONTIER_SHARES}
#: The shipped branch (its measurement, ``peers`` ties and ``quorum``) as a frontier point.
QUORUM = f"{KindPlanSettings().peers + 1}:{KindPlanSettings().quorum}"
#: Added noise, in units of a series' noise level (robust sd of first differences / sqrt 2).
NOISE = 0.5
#: Noisy copies of each train row.
COPIES = 3
#: ``--crop``: stability also reads copies without the last ``CROP`` x ``CROP_STEPS`` of the points.
CROP = 0.05
#: Two kinds' tie sets overlapping with a hypergeometric tail below this make them related.
RELATED_P = 1e-3
#: ``--planned``'s help.
PLANNED = "ties of the kind planner's own search (concept groups first), not of the whole catalog"
#: Filled before a pool forks: its workers inherit it, nothing is pickled.
_STATE: dict[str, Any] = {}


def _measured(seed: int) -> list[dict[str, Any]]:
    """One seed's measurements (:func:`~tests.bench.mixed_ceiling.measure_seed`), cached if asked."""
    cache = _STATE.get("cache")
    path = cache / f"meas_{seed}.pkl" if cache else None
    if path is not None and path.exists():
        with path.open("rb") as fh:
            rows: list[dict[str, Any]] = pickle.load(fh)
        return rows
    rows = measure_seed(seed)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as fh:
            pickle.dump(rows, fh)
    return rows


def _vote(preds: Sequence[Sequence[int]], share: float) -> list[int]:
    """Per question, the option at least ``share`` of ``preds`` name (-1: none, or abstain)."""
    out = []
    for i in range(len(preds[0])):
        c = Counter(p[i] for p in preds if p[i] >= 0)
        top = c.most_common(1)
        out.append(top[0][0] if top and top[0][1] >= share * len(preds) else -1)
    return out


def _score(answers: Sequence[int], ev: Sequence[dict[str, Any]]) -> tuple[int, int]:
    """(gain, harmed) in questions of ``answers`` (-1: the base answer) over the base answerer."""
    gain = harmed = 0
    for a, r in zip(answers, ev, strict=True):
        final = a if a >= 0 else r["base"]
        gain += int(final == r["gold"]) - int(r["base"] == r["gold"])
        harmed += int(r["base"] == r["gold"] and final != r["gold"])
    return gain, harmed


def one_seed(seed: int) -> dict[str, Any]:
    """Ties, the capacity measurement's place among them and each level's (gain, harmed) per kind."""
    train, ev, picks = _STATE["train"][seed], _STATE["ev"], _STATE["picks"]
    settings = KindPlanSettings()
    planned = bool(_STATE.get("planned"))
    ranker = full_planner(train, whole=not planned)
    out: dict[str, Any] = {}
    tied: dict[str, KindTies] = {}
    for kind, rows in by_kind(train).items():
        got = kind_ties(ranker, rows, settings, planned=planned)
        if got is None:
            continue
        names = [r.spec.describe(r.key) for r in got.ranked]
        pick = picks.get(kind)
        pos = names.index(pick) if pick in names else None
        top = got.ties[0].cv_acc
        out[kind] = {
            "rows": len(got.ex),
            "top_cv": round(top, 4),
            "ties": len(got.ties),
            "ranked": len(got.ranked),
            "right_ranked": pos is not None,
            "right_at_top": pos is not None and got.ranked[pos].cv_acc >= top - 1e-9,
            "right_position": pos,
            "served": got.served,
            "source": got.source,
        }
        tied[kind] = got
    shared = _shared_ties({k: (t.ties, len(t.ranked)) for k, t in tied.items()})
    for kind, t in tied.items():
        evk = ev.get(kind, [])
        if t.served and evk:
            out[kind].update(
                _levels(t.ties, t.ex, t.rows, evk, shared[kind], f"{seed}:{kind}", settings)
            )
    return {"seed": seed, "kinds": out}


def _levels(
    ties: Sequence[Any],
    ex: Sequence[Any],
    rows: Sequence[dict[str, Any]],
    evk: Sequence[dict[str, Any]],
    shared: Sequence[float],
    tag: str,
    settings: KindPlanSettings,
) -> dict[str, Any]:
    """One served kind's (gain, harmed) per level and per frontier point, in both tie orders."""
    preds = _readings(ties, evk)
    stab = _stability(ties, ex, tag)
    steady = sorted(range(len(ties)), key=lambda i: (-stab[i], i))
    by_stability = [preds[i] for i in steady]
    frontier, frontier_stable = _frontier(preds, evk), _frontier(by_stability, evk)
    scores = [_score(p, evk) for p in preds]
    levels: dict[str, tuple[float, float]] = {
        "first": _score(preds[0], evk),
        "quorum": frontier[QUORUM],
        "vote_all": _score(_vote(preds, 0.0), evk),
        "random": (
            statistics.fmean(g for g, _ in scores),
            statistics.fmean(h for _, h in scores),
        ),
        "widest_gap": _score(preds[_argmax([t.separation for t in ties])], evk),
        "most_variants": _score(preds[_argmax(_variants(ties))], evk),
        "most_central": _score(preds[_argmax(_centrality(preds))], evk),
        "most_central_train": _score(preds[_argmax(_centrality(_on_others(ties, rows)))], evk),
        "most_shared": _score(preds[_argmax(shared)], evk),
        "most_stable": _score(by_stability[0], evk),
        "stable_quorum": frontier_stable[QUORUM],
        "best_on_eval": max(scores, key=lambda gh: (gh[0], -gh[1])),
        "best_cross_eval": _cross(preds, evk),
    }
    return {"levels": levels, "frontier": frontier, "frontier_stable": frontier_stable}


def _frontier(
    preds: Sequence[Sequence[int]],
    evk: Sequence[dict[str, Any]],
    points: Sequence[str] = tuple(FRONTIER),
) -> dict[str, Any]:
    """(gain, harmed) of the vote of the first ``k`` of ``preds`` at each :data:`FRONTIER` point."""
    out = {}
    for point in points:
        k, share = FRONTIER[point]
        out[point] = _score(_vote(preds[:k], share if min(k, len(preds)) > 1 else 1.0), evk)
    return out


def _shared_ties(tied: dict[str, tuple[Sequence[Any], int]]) -> dict[str, list[float]]:
    """Per kind and tie, the share of the kind's related kinds where the same measurement ties too.

    Two kinds are related when their tie sets overlap far beyond chance (hypergeometric tail below
    :data:`RELATED_P`, out of the larger of their ranked catalogs): kinds asking about one property
    in other words or options tie on its measurement, while a fluke ties on a kind by chance.
    Legitimate at planning time: only train rows are read.
    """
    names = {k: {t.spec.describe(t.key) for t in ties} for k, (ties, _) in tied.items()}
    out = {}
    for a, (ties, n_a) in tied.items():
        related = [
            b
            for b, (_, n_b) in tied.items()
            if b != a
            and hypergeom.sf(
                len(names[a] & names[b]) - 1, max(n_a, n_b), len(names[a]), len(names[b])
            )
            < RELATED_P
        ]
        out[a] = [
            sum(t.spec.describe(t.key) in names[b] for b in related) / max(1, len(related))
            for t in ties
        ]
    return out


def _argmax(xs: Sequence[float]) -> int:
    """The first index of the largest value (the shipped order breaks ties)."""
    return max(range(len(xs)), key=lambda i: (xs[i], -i))


def _variants(ties: Sequence[Any]) -> list[float]:
    """Per tie, how many ties share its primitive (a real signal has many tied variants)."""
    per = Counter(t.spec.primitive for t in ties)
    return [float(per[t.spec.primitive]) for t in ties]


def _centrality(preds: Sequence[Sequence[int]]) -> list[float]:
    """Per tie, its mean agreement with every tie on the questions both read (-1: abstains)."""
    p = np.asarray(preds)
    if p.size == 0 or p.shape[1] == 0:
        return [0.0] * len(preds)
    read = (p >= 0).astype(float)
    agree = sum(((p == o).astype(float) @ (p == o).T.astype(float)) for o in np.unique(p[p >= 0]))
    both = read @ read.T
    share = np.divide(agree, both, out=np.zeros_like(both), where=both > 0)
    return [float(x) for x in share.mean(axis=1)]


def _on_others(ties: Sequence[Any], kind_rows: Sequence[dict[str, Any]]) -> list[list[int]]:
    """Each tie's readings on every train series of the seed, as if asked the kind's question.

    Legitimate at planning time: the series are train inputs; no label of theirs is read.
    """
    first = kind_rows[0]
    rows = _STATE["train"][first["seed"]]
    others = rows[:: max(1, len(rows) // 60)]  # about 60 series: enough to tell readings apart
    return _readings(ties, others, asked=first)


def _stability(ties: Sequence[Any], ex: Sequence[Any], tag: str) -> list[float]:
    """Per tie, the share of noisy copies of the kind's train rows its rule reads right.

    Legitimate at planning time: the rows are train rows, their copies new inputs with the same
    answer (the noise is small against the series' own), and no eval question is read.
    """
    rng = np.random.default_rng(int(hashlib.sha256(tag.encode()).hexdigest()[:12], 16))
    copies = [(e.gold, noisy_copy(e.question, rng, NOISE)) for e in ex for _ in range(COPIES)]
    if _STATE.get("crop"):
        copies += [(e.gold, cropped_copy(e.question, CROP * k)) for e in ex for k in CROP_STEPS]
    return read_right(SpecCache(), ties, copies)  # ties share measurements: one memo


def _readings(
    ties: Sequence[Any], rows: Sequence[dict[str, Any]], asked: dict[str, Any] | None = None
) -> list[list[int]]:
    """Each tie's option on each row (-1: abstains), read as asked by ``asked`` (default: the row)."""
    out = []
    for t in ties:
        p = []
        for x in rows:
            q = asked or x
            rd = apply_rule(t.rule, x["vals"].get(t.spec), q["options"], q["cands"], q["text"])
            p.append(-1 if rd.option is None else int(rd.option))
        out.append(p)
    return out


def _cross(preds: Sequence[Sequence[int]], ev: Sequence[dict[str, Any]]) -> tuple[int, int]:
    """The tie that reads one half of the eval questions best, scored on the other half (both ways).

    The halves are the eval seeds of even and odd position; choosing on one and scoring on the
    other removes the optimism of ``best_on_eval`` (picking among many ties on a few questions).
    """
    seeds = sorted({r["seed"] for r in ev})
    half = [seeds.index(r["seed"]) % 2 for r in ev]
    gain = harmed = 0
    for pick_on in (0, 1):
        on = [i for i, h in enumerate(half) if h == pick_on]
        off = [i for i, h in enumerate(half) if h != pick_on]
        if not on or not off:
            continue
        best = max(
            preds,
            key=lambda p: _score([p[i] for i in on], [ev[i] for i in on]),
        )
        g, h = _score([best[i] for i in off], [ev[i] for i in off])
        gain, harmed = gain + g, harmed + h
    return gain, harmed


def _quartiles(xs: Sequence[float]) -> dict[str, float]:
    q = statistics.quantiles(xs, n=4) if len(xs) > 1 else [xs[0]] * 3
    return {"q1": q[0], "median": q[1], "q3": q[2]}


def measured_seeds(
    argv: list[str] | None,
    description: str,
    out: str,
    flags: Sequence[tuple[str, str]] = (),
    options: Sequence[tuple[str, str]] = (),
) -> tuple[argparse.Namespace, list[int], list[int], dict[int, list[dict[str, Any]]]]:
    """The command line a development diagnostic on cached measurements shares, and the measurements.

    Parses ``--fit-seeds``, ``--eval-seeds``, ``--cache``, ``--workers``, ``--out`` (default
    ``runs/bench/<out>``), the bench's own on/off ``flags`` and its own text ``options`` (name,
    help; default empty); measures every seed
    (:func:`_measured`, two workers by default) and attaches each fit seed's question to its rows
    (``"q"``). Returns the arguments, the fit and eval seeds, and the rows by seed.
    """
    ap = argparse.ArgumentParser(description=description)
    for flag, text in flags:
        ap.add_argument(flag, action="store_true", help=text)
    for flag, text in options:
        ap.add_argument(flag, default="", help=text)
    ap.add_argument("--fit-seeds", default=",".join(map(str, FIT_SEEDS)))
    ap.add_argument("--eval-seeds", default=",".join(map(str, EVAL_SEEDS)))
    ap.add_argument("--cache", default="", help="folder for the measurements (reused when present)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "runs" / "bench" / out))
    args = ap.parse_args(argv)
    fit = [int(s) for s in args.fit_seeds.split(",")]
    evs = [int(s) for s in args.eval_seeds.split(",")]
    if set(fit) & set(evs):
        ap.error("fit and eval seeds must differ")
    _STATE["cache"] = Path(args.cache) if args.cache else None
    with forked_pool(args.workers) as pool:
        parts = dict(zip([*fit, *evs], pool.map(_measured, [*fit, *evs]), strict=True))
    for s in fit:
        with_questions(s, parts[s])
    return args, fit, evs, parts


def split_state(
    parts: dict[int, list[dict[str, Any]]], fit: Sequence[int], evs: Sequence[int]
) -> dict[str, list[dict[str, Any]]]:
    """Set the fit seeds' train rows and the eval rows by kind for the workers; returns the latter."""
    ev = by_kind([r for s in evs for r in parts[s]])
    _STATE["ev"] = ev
    _STATE["train"] = {s: [r for r in parts[s] if r["split"] == "train"] for s in fit}
    return ev


def main(argv: list[str] | None = None) -> int:
    t0 = time.perf_counter()
    flags = (("--crop", f"stability also on end-cropped copies ({CROP})"), ("--planned", PLANNED))
    args, fit, evs, parts = measured_seeds(argv, __doc__.splitlines()[0], "mixed-ties.json", flags)
    _STATE.update(crop=args.crop, planned=args.planned)
    fit_by_kind = by_kind([r for s in fit for r in parts[s]])
    _STATE["picks"] = {
        k: p[0] for k, rs in fit_by_kind.items() if (p := _capacity_pick(rs)) is not None
    }
    ev = split_state(parts, fit, evs)
    with forked_pool(args.workers) as pool:
        results = list(pool.map(one_seed, fit))
    n_ev = sum(len(v) for v in ev.values())
    cases = [e for res in results for e in res["kinds"].values()]
    ranked = [e for e in cases if e["right_ranked"]]
    at_top = [e for e in ranked if e["right_at_top"]]
    levels: dict[str, dict[str, Any]] = {}

    def per_seed(field: str, point: str, i: int) -> list[float]:
        """Each fit seed's gain (``i`` 0) or harm (1) of one level or frontier point, pp of eval."""
        return [
            100 * sum(e[field][point][i] for e in res["kinds"].values() if field in e) / n_ev
            for res in results
        ]

    for level in LEVELS:
        levels[level] = {
            name: _ms(per_seed("levels", level, i), digits=2)
            for i, name in enumerate(("gain_pp", "harmed_pct"))
        }
        print(f"{level:13s} gain {levels[level]['gain_pp']} harmed {levels[level]['harmed_pct']}")
    frontiers = {
        field: {
            point: {
                name: round(statistics.fmean(per_seed(field, point, i)), 2)
                for i, name in enumerate(("gain_pp", "harmed_pct"))
            }
            for point in FRONTIER
        }
        for field in ("frontier", "frontier_stable")
    }
    for res in results:  # the frontiers are kept in aggregate only
        for e in res["kinds"].values():
            e.pop("frontier", None)
            e.pop("frontier_stable", None)
    doc = {
        "bench": "mixed_ties",
        "label": "development",
        "commit": git_commit(),
        "crop": CROP if args.crop else 0.0,
        "search": "planned" if args.planned else "whole catalog",
        "fit_seeds": fit,
        "eval_seeds": evs,
        "eval_questions": n_ev,
        "kind_seeds": len(cases),
        "served": sum(e["served"] for e in cases),
        "ties": _quartiles([e["ties"] for e in cases]),
        "ranked_measurements": _quartiles([e["ranked"] for e in cases]),
        "right_ranked": len(ranked),
        "right_at_top": len(at_top),
        "right_position_at_top": _quartiles([e["right_position"] for e in at_top] or [0]),
        "right_chosen": sum(e["right_position"] == 0 for e in ranked),
        "levels": levels,
        **frontiers,
        "seconds": round(time.perf_counter() - t0, 1),
        "per_seed": {str(r["seed"]): r["kinds"] for r in results},
    }
    print(
        f"ties per kind-seed: median {doc['ties']['median']}; right measurement at the top in "
        f"{len(at_top)} of {len(ranked)}, chosen in {doc['right_chosen']}"
    )
    write_doc(args.out, doc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

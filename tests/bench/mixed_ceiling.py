"""Where the ``mixed`` preset's gain is lost, as JSON: catalog capacity, few-shot ceilings, the round.

``python -m tests.bench.mixed_ceiling [--fit-seeds 104,105,106,107] [--eval-seeds 108,109,110,111]
[--out runs/bench/mixed-ceiling.json]``

A diagnostic for issue 11 (development seeds only; it claims nothing about held-out performance).
Every catalog measurement (:func:`tsevo.roles.builtin.specs.enumerate_specs`) is computed on every
question of ``make_suite("mixed", seed)`` for the fit and the eval seeds. Each level below reads
rules on fit-seed rows and is scored on the eval seeds' questions (all splits), so a level's number
is how well its rules transfer to new questions of the same kinds:

* ``base``: the builtin base answerer (the round's starting point);
* ``capacity``: per true question kind (the generator's label, which no role ever sees), every
  (measurement, output) read by a fitted rule on the kind's rows of *all* fit seeds (about 36), the
  one with the best train accuracy kept. What the catalog and the rule shapes can do with plenty of
  rows;
* ``right_measurement``: per fit seed and true kind, the capacity level's measurement (picked with
  hindsight) with its rule refitted on that seed's 3-6 train rows of the kind and always read
  (:func:`right_measurement`). What fitting a rule on a handful of rows costs;
* ``right_measurement_judged``: the same, read only when its few-row leave-one-out clears the
  search's bar and recovers ``min_gain`` more rows than the base answerer. What judging a rule on
  a handful of rows costs, with the measurement given;
* ``perfect_dispatch``: per fit seed and true kind, the shipped few-shot search
  (:func:`tsevo.roles.builtin.kindplan._search`: the rules options that name positions or
  directions fix, then concept groups, then the whole catalog), read as a branch reads it (the
  option the measurement and its peers agree on), on that
  seed's 3-6 train rows of the kind; the base answer stays where the rule does not recover more
  rows than the base answerer (the planner's ``min_gain``). The builtin learner with kinds given;
* ``unsupervised_kinds``: per fit seed, :func:`tsevo.roles.builtin.kindplan.plan_kinds` on one
  dossier holding *all* that seed's train rows (errors as support, the rest as background), kinds
  recovered from wording and dispatched by their words, as a composite tool would. The builtin
  learner with no bucket split, no held-out rows and no gate;
* ``kinds_given``: the same, with the generator's kinds given to ``plan_kinds``
  (:meth:`~tsevo.roles.builtin.kinds.KindIndex.from_groups`) and an eval question dispatched to
  its own kind's branch: what recovering kinds from wording costs (against
  ``unsupervised_kinds``), and what planning one dossier of many kinds costs against
  ``perfect_dispatch`` (errors only as support, the gain judged on the kind's rows);
* ``unsupervised_kinds_half``: the same on half of the errors (a seeded hash of the id keeps
  each), as the round's bucket split shows a planner (the other half is held out for the
  prefilter); the correct rows stay. What hiding half the errors costs the same learner;
* ``round``: one builtin round per fit seed (:func:`tests.bench.seeds.one_seed`), scored on its own
  test split (a different question sample of the same kinds): the learner as shipped.

Accuracies are over questions (mean over the fit seeds where a level is fitted per seed, with the
sample sd). Per kind, the JSON also lists each level's eval accuracy, so where a kind is lost shows.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from tests.bench import git_commit
from tests.bench.seeds import one_seed
from tsevo.data import QuestionView
from tsevo.data.synthetic import make_suite
from tsevo.fileio import atomic_write_text
from tsevo.library._scope import options_kind
from tsevo.library.reading import apply_rule
from tsevo.library.tool import Matcher, question_tokens
from tsevo.procs import forked_pool
from tsevo.roles.builtin.answerer import GlobalSummaryAnswerer
from tsevo.roles.builtin.composite import Branch, Peer, branch_rule, member_prefix
from tsevo.roles.builtin.kindplan import KindPlanSettings, _search, plan_kinds
from tsevo.roles.builtin.kinds import KindIndex
from tsevo.roles.builtin.measure import Spec, SpecCache
from tsevo.roles.builtin.planner import _RULE_FOR_OPTIONS, _SKIP_KEYS, MeasurementPlanner
from tsevo.roles.builtin.rules import Row, cross_validate, fit_rule, train_accuracy
from tsevo.roles.builtin.specs import enumerate_specs, modes_for, rows_kind
from tsevo.roles.protocols import Dossier, Example

ROOT = Path(__file__).resolve().parents[2]
FIT_SEEDS = (104, 105, 106, 107)
EVAL_SEEDS = (108, 109, 110, 111)


def measure_seed(seed: int) -> list[dict[str, Any]]:
    """Every question of one seed: kind, split, options, gold, base answer, every measurement."""
    suite = make_suite("mixed", seed=seed)
    cache, base = SpecCache(), GlobalSummaryAnswerer()
    out = []
    for q in suite:
        view = QuestionView.of(q, q.id)
        _, arity = rows_kind([view])
        vals: dict[Spec, dict[str, float]] = {}
        for spec in enumerate_specs(modes_for(arity, [view])):
            got = cache.get(spec, view)
            if got:
                vals[spec] = dict(got)
        out.append(
            {
                "seed": seed,
                "id": q.id,
                "kind": q.metadata["kind"],
                "split": suite.splits.get(q.id),
                "options": tuple(q.options),
                "cands": tuple(view.candidates),
                "text": q.question,
                "gold": int(q.gold),
                "base": base.answer(view).option,
                "vals": vals,
            }
        )
    return out


def _row(r: dict[str, Any], spec: Spec) -> Row:
    return Row(r["id"], r["vals"].get(spec), r["options"], r["cands"], r["gold"], None, r["text"])


def _rule_kind(rows: Sequence[dict[str, Any]]) -> str:
    shapes = Counter(options_kind(r["options"], r["cands"]) for r in rows)
    return _RULE_FOR_OPTIONS[shapes.most_common(1)[0][0]]


def _capacity_pick(fit: Sequence[dict[str, Any]]) -> tuple[str, Spec, str, Any, float] | None:
    """The train-accuracy-best (measurement, output) on plenty of rows: name, spec, key, rule, acc."""
    rk = _rule_kind(fit)
    best: tuple[str, Spec, str, Any, float] | None = None
    for spec in sorted({s for r in fit for s in r["vals"]}, key=lambda s: s.describe()):
        rows = [_row(r, spec) for r in fit]
        present = [x.values for x in rows if x.values]
        if len(present) < len(rows) // 2:
            continue
        if rk == "extremum":
            keys = sorted({k.rsplit("_", 1)[0] for v in present for k in v if "_" in k})
        else:
            keys = sorted({k for v in present for k in v})
        for key in keys:
            if _SKIP_KEYS.match(key):
                continue
            try:
                rule = fit_rule(rk, rows, key)
                acc = train_accuracy(rule, rows) if rule is not None else -1.0
            except (ValueError, ArithmeticError):
                continue
            if rule is not None and (best is None or acc > best[4]):
                best = (spec.describe(key), spec, key, rule, acc)
    return best


def capacity(fit: Sequence[dict[str, Any]], ev: Sequence[dict[str, Any]]) -> tuple[float, str]:
    """Eval accuracy of the train-accuracy-best (measurement, output) on plenty of rows."""
    best = _capacity_pick(fit)
    if best is None:
        return _base_acc(ev), "-"
    name, spec, _, rule, _ = best
    return train_accuracy(rule, [_row(r, spec) for r in ev]), name


def right_measurement(
    train: Sequence[dict[str, Any]],
    ev: Sequence[dict[str, Any]],
    pick: tuple[str, Spec, str, Any, float] | None,
    settings: KindPlanSettings,
) -> tuple[float, float]:
    """The capacity measurement (picked with hindsight) refitted on one seed's few train rows.

    Returns the eval accuracy when its rule is always read (the base answer where it abstains),
    and when it is read only if its few-row leave-one-out clears the search's bar and recovers
    ``min_gain`` more rows than the base answerer: what fitting a rule on a handful of rows costs,
    and what judging it there costs, with the measurement given.
    """
    base = _base_acc(ev)
    if pick is None or len(train) < settings.min_rows:
        return base, base
    _, spec, key, rule0, _ = pick
    rows = [_row(r, spec) for r in train]
    try:
        rule = fit_rule(rule0.kind, rows, key, few=True)
        cv = cross_validate(rule0.kind, rows, key, few=True)
    except (ValueError, ArithmeticError):
        return base, base
    if rule is None:
        return base, base
    hits = 0
    for r in ev:
        o = apply_rule(rule, r["vals"].get(spec), r["options"], r["cands"], r["text"]).option
        hits += (o if o is not None else r["base"]) == r["gold"]
    current = sum(r["base"] == r["gold"] for r in train)
    served = cv >= settings.bar and round(cv * len(rows)) - current >= settings.min_gain
    return hits / len(ev), hits / len(ev) if served else base


def _base_acc(rows: Sequence[dict[str, Any]]) -> float:
    return sum(r["base"] == r["gold"] for r in rows) / len(rows)


def _examples(rows: Sequence[dict[str, Any]]) -> list[Example]:
    out = []
    for r in rows:
        view = QuestionView.of(r["q"], r["id"])
        rec = SimpleNamespace(final_answer=r["base"], correct=r["base"] == r["gold"])
        out.append(Example(view, r["gold"], rec))
    return out


def perfect_dispatch(
    train: Sequence[dict[str, Any]], ev: Sequence[dict[str, Any]], settings: KindPlanSettings
) -> tuple[float, str]:
    """The shipped few-shot search on one kind's train rows of one seed; eval accuracy."""
    ex = _examples(train)
    if len(ex) < settings.min_rows:
        return _base_acc(ev), "too few rows"
    index = KindIndex(e.question for e in ex)
    words = frozenset().union(*(k.anchor for k in index.kinds))
    got = _search(MeasurementPlanner(), ex, words, settings, {})
    if got is None:
        return _base_acc(ev), "no rule clears the bar"
    best, _, peers = got
    current = sum(bool(e.record.correct) for e in ex)
    if round(best.cv_acc * len(ex)) - current < settings.min_gain:
        return _base_acc(ev), "kept base"
    branch = Branch(
        (), (), (), best.spec, (best.key,), best.rule,
        peers=tuple(Peer(p.spec, (p.key,), p.rule) for p in peers),
        quorum=settings.quorum if peers else 1.0,
    )  # fmt: skip
    hits = 0
    for r in ev:
        o = _branch_option(branch, r)
        hits += (o if o is not None else r["base"]) == r["gold"]
    return hits / len(ev), branch.describe()


def _branch_option(b: Branch, r: dict[str, Any]) -> int | None:
    """The option a composite branch reads on a measured question (its peers' consensus)."""
    outputs = {
        member_prefix(1, j) + k: v
        for j, m in enumerate(b.members())
        for k, v in (r["vals"].get(m.spec) or {}).items()
    }
    rule = branch_rule([b])
    return apply_rule(rule, outputs, r["options"], r["cands"], r["text"]).option


def _kept(qid: str) -> bool:
    return int(hashlib.sha256(f"half\x00{qid}".encode()).hexdigest(), 16) % 2 == 0


def plan_all(
    train: Sequence[dict[str, Any]], half: bool = False, given: bool = False
) -> tuple[list[Branch], KindIndex, dict[str, Any]]:
    """plan_kinds on one dossier of every train row: the branches, the kind index and the report.

    ``half``: only the errors :func:`_kept` keeps are in the dossier (the correct rows all are).
    ``given``: the generator's kinds are planned for instead of kinds recovered from wording.
    """
    ex = _examples(train)
    dossier = Dossier(
        bucket_id="all",
        side="no_tool",
        label="",
        criteria="",
        support=tuple(e for e in ex if not e.record.correct and (not half or _kept(e.question.id))),
        background=tuple(e for e in ex if e.record.correct),
        catalog="",
        library_tools=(),
        library=None,
    )
    settings = KindPlanSettings(max_branches=10_000, max_kind_share=1.0)
    group = {r["id"]: r["kind"] for r in train}

    built: list[KindIndex] = []

    def index_of(qs: Any) -> KindIndex:
        built.append(KindIndex.from_groups(qs, group) if given else KindIndex(qs))
        return built[-1]

    branches, report = plan_kinds(MeasurementPlanner(), dossier, settings, index_of)
    return branches, built[-1], report


def dispatched(branches: Sequence[Branch], r: dict[str, Any], given: bool = False) -> Branch | None:
    """The branch a measured question goes to: its own kind's (``given``) or the first whose words it holds."""
    toks = question_tokens(r["text"])
    for b in branches:
        if (
            b.kinds == (r["kind"],)
            if given
            else Matcher(require=b.require, forbid=b.forbid).matches(toks)
        ):
            return b
    return None


def answer(branches: Sequence[Branch], r: dict[str, Any], given: bool = False) -> int:
    """The option a composite of ``branches`` leaves on a measured question (the base one where none reads)."""
    b = dispatched(branches, r, given)
    o = _branch_option(b, r) if b is not None else None
    return int(o) if o is not None else int(r["base"])


def unsupervised_kinds(
    train: Sequence[dict[str, Any]],
    ev: Sequence[dict[str, Any]],
    half: bool = False,
    given: bool = False,
) -> tuple[dict[str, list[int]], int]:
    """:func:`plan_all` on one seed's train rows; per true kind [n, right, harmed] on the eval rows.

    ``given``: each eval question goes to its own kind's branch (no wording involved).
    """
    branches, _, _ = plan_all(train, half=half, given=given)
    per: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for r in ev:
        ans = answer(branches, r, given)
        per[r["kind"]][0] += 1
        per[r["kind"]][1] += int(ans == r["gold"])
        per[r["kind"]][2] += int(r["base"] == r["gold"] and ans != r["gold"])
    return per, len(branches)


def _ms(xs: Sequence[float], digits: int = 4) -> dict[str, float]:
    """Mean and sample sd of ``xs``, rounded (sd 0 for one value)."""
    return {
        "mean": round(statistics.fmean(xs), digits),
        "sd": round(statistics.stdev(xs), digits) if len(xs) > 1 else 0.0,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fit-seeds", default=",".join(map(str, FIT_SEEDS)))
    ap.add_argument("--eval-seeds", default=",".join(map(str, EVAL_SEEDS)))
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "runs" / "bench" / "mixed-ceiling.json"))
    args = ap.parse_args(argv)
    fit_seeds = [int(s) for s in args.fit_seeds.split(",")]
    eval_seeds = [int(s) for s in args.eval_seeds.split(",")]
    if set(fit_seeds) & set(eval_seeds):
        ap.error("fit and eval seeds must differ")
    t0 = time.perf_counter()
    with forked_pool(args.workers) as pool:
        parts = list(pool.map(measure_seed, [*fit_seeds, *eval_seeds]))
    questions = {q.id: q for s in fit_seeds for q in make_suite("mixed", seed=s)}
    rows = [r for part in parts for r in part]
    for r in rows:
        r["q"] = questions.get(r["id"])
    measure_s = time.perf_counter() - t0
    print(f"measured {len(rows)} questions in {measure_s:.0f} s", flush=True)

    by_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_kind[r["kind"]].append(r)
    ev_all = [r for r in rows if r["seed"] in eval_seeds]
    n_ev = len(ev_all)
    settings = KindPlanSettings()
    kinds: dict[str, dict[str, Any]] = {}
    cap_hits = 0.0
    pd_hits: dict[int, float] = defaultdict(float)
    rm_hits: dict[int, float] = defaultdict(float)
    rj_hits: dict[int, float] = defaultdict(float)
    for kind, rs in sorted(by_kind.items()):
        fit = [r for r in rs if r["seed"] in fit_seeds]
        ev = [r for r in rs if r["seed"] in eval_seeds]
        pick = _capacity_pick(fit)
        cap, cap_name = capacity(fit, ev)
        cap_hits += cap * len(ev)
        entry: dict[str, Any] = {
            "eval_questions": len(ev),
            "train_rows_per_seed": [
                sum(r["seed"] == s and r["split"] == "train" for r in fit) for s in fit_seeds
            ],
            "base": round(_base_acc(ev), 4),
            "capacity": round(cap, 4),
            "capacity_measurement": cap_name,
            "perfect_dispatch": {},
        }
        for s in fit_seeds:
            tr = [r for r in fit if r["seed"] == s and r["split"] == "train"]
            acc, what = perfect_dispatch(tr, ev, settings)
            pd_hits[s] += acc * len(ev)
            entry["perfect_dispatch"][str(s)] = {"acc": round(acc, 4), "measurement": what}
            always, judged = right_measurement(tr, ev, pick, settings)
            rm_hits[s] += always * len(ev)
            rj_hits[s] += judged * len(ev)
            entry.setdefault("right_measurement", {})[str(s)] = round(always, 4)
            entry.setdefault("right_measurement_judged", {})[str(s)] = round(judged, 4)
        kinds[kind] = entry
        print(f"{kind:30s} base {entry['base']:.2f} capacity {cap:.2f}", flush=True)

    planned = (
        ("kinds_given", False, True),
        ("unsupervised_kinds", False, False),
        ("unsupervised_kinds_half", True, False),
    )
    uk: dict[str, dict[int, float]] = {level: {} for level, _, _ in planned}
    uk_harm: dict[str, dict[int, float]] = {level: {} for level, _, _ in planned}
    uk_branches: dict[str, dict[str, int]] = {level: {} for level, _, _ in planned}
    for s in fit_seeds:
        tr = [r for r in rows if r["seed"] == s and r["split"] == "train"]
        for level, half, given in planned:
            per, nb = unsupervised_kinds(tr, ev_all, half=half, given=given)
            uk[level][s] = sum(v[1] for v in per.values()) / n_ev
            uk_harm[level][s] = sum(v[2] for v in per.values()) / n_ev
            uk_branches[level][str(s)] = nb
            for kind, (n, right, _) in per.items():
                kinds[kind].setdefault(level, {})[str(s)] = round(right / n, 4)
            print(f"{level}, seed {s}: {uk[level][s]:.3f} ({nb} branches)", flush=True)

    rounds: dict[int, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for s in fit_seeds:
            r = one_seed("mixed", s, Path(tmp) / str(s))
            rounds[s] = {k: r[k] for k in ("base", "final", "gain", "harmed_pct", "status")}
            print(f"round, seed {s}: {r['base']:.3f} -> {r['final']:.3f}", flush=True)

    base = _base_acc(ev_all)
    levels = {
        "base": {"mean": round(base, 4), "sd": 0.0},
        "capacity": {"mean": round(cap_hits / n_ev, 4), "sd": 0.0},
        "right_measurement": _ms([rm_hits[s] / n_ev for s in fit_seeds]),
        "right_measurement_judged": _ms([rj_hits[s] / n_ev for s in fit_seeds]),
        "perfect_dispatch": _ms([pd_hits[s] / n_ev for s in fit_seeds]),
        **{level: _ms([uk[level][s] for s in fit_seeds]) for level, _, _ in planned},
    }
    gains = {k: round(100 * (v["mean"] - base), 2) for k, v in levels.items()}
    gains["round"] = round(100 * statistics.fmean(r["gain"] for r in rounds.values()), 2)
    doc = {
        "bench": "mixed_ceiling",
        "label": "development",
        "commit": git_commit(),
        "fit_seeds": fit_seeds,
        "eval_seeds": eval_seeds,
        "eval_questions": n_ev,
        "levels": levels,
        "gain_pp_over_base": gains,
        "round": {str(s): v for s, v in rounds.items()},
        "round_gain_pp": _ms([100 * r["gain"] for r in rounds.values()]),
        "planned_branches": uk_branches,
        "planned_harmed_pct": {
            level: _ms([100 * uk_harm[level][s] for s in fit_seeds]) for level, _, _ in planned
        },
        "kinds": kinds,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, json.dumps(doc, indent=1, sort_keys=True) + "\n")
    for k, v in levels.items():
        print(f"{k:20s} {100 * v['mean']:.1f} ± {100 * v['sd']:.1f}% ({gains[k]:+.1f} pp)")
    print(f"{'round':20s} {gains['round']:+.1f} pp on its own test split -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

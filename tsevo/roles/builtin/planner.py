"""The builtin local planner: measure which catalog primitives recover a bucket's gold answers.

For one bucket it sees the dossier's train rows (support errors plus similar background rows, gold
known, train split only). It enumerates measurement specs that fit the rows' input shape (each
catalog primitive with its default parameters and each alternative of its declared grid, fed from the
primary series, from windows written in the question, from two primaries, from a mentioned
covariate, or per candidate series), fits the reading rule the option shape calls for (``label``,
``nearest_number`` or ``extremum``) and ranks measurements by grouped cross-validated accuracy. The
winner becomes the contract; the runners-up travel in the card's ``plan`` so the synthesizer can vary
its attempts, and a two-feature calibration tree is requested when it clearly beats one feature.
The scope is learned from the bucket: its tasks, input shape, option shape, and a matcher over the
question words its members share.
"""

from __future__ import annotations

import concurrent.futures as cf
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace as _replace
from typing import Any

import numpy as np
from sklearn.model_selection import StratifiedKFold
from sklearn.tree import DecisionTreeClassifier

from tsevo.data import QuestionView
from tsevo.library.primitives import CATALOG
from tsevo.library.tool import Contract, Scope, question_tokens
from tsevo.procs import forked_map

from ..protocols import ContractCard, Dossier, Example
from .composite import composite_card
from .concepts import relevance
from .kindplan import KindPlanSettings, plan_kinds, support_request
from .lifecycle import coded_prior, lifecycle_card
from .measure import RankedMeasurement, Spec, SpecCache
from .rules import Row, cross_validate, fit_scored, separation, tune_margin
from .specs import (
    MODE_SIGNATURE,
    compute_pairs,
    enumerate_specs,
    fit_matcher,
    kind_keys,
    modes_for,
    new_tool_card,
    rows_kind,
    with_words,
    words_ok,
)

__all__ = ["MeasurementPlanner", "RankedMeasurement", "fit_matcher"]

#: Composite planning (one branch per question kind) for buckets that mix many kinds; ``None`` plans
#: one measurement per bucket everywhere. On: on the development seeds it lifts ``mixed`` and leaves
#: the default preset where it was (``python -m tests.bench.seeds --kinds on|off``).
DEFAULT_KINDS: KindPlanSettings | None = KindPlanSettings()
_RULE_FOR_OPTIONS = {"candidate": "extremum", "numeric": "nearest_number", "label": "label"}
_SKIP_KEYS = re.compile(r"^(n|n_bins|h|chronos|df|used_lag|used_lags|period_used)$")


_Screened = tuple[float, float, int, str, Spec, str, Any, list[Row]]


def _top(screened: Sequence[_Screened], k: int) -> list[tuple[Any, ...]]:
    """The ``k`` best screened measurements by train accuracy, then class separation, then cover.

    Separations are computed only for the accuracy levels the first ``k`` come from; one that
    cannot be computed passes the measurement over, as if it had never been screened.
    """
    out: list[tuple[Any, ...]] = []
    for acc, cover, n, name, spec, key, rule, rows in sorted(screened, key=lambda s: -s[0]):
        if len(out) >= k and acc != out[-1][0]:
            break  # a lower accuracy level than the k-th: none of these can enter
        try:
            sep = separation(rule, rows)
        except (ValueError, ArithmeticError, np.linalg.LinAlgError):
            continue
        out.append((acc, sep, cover, n, name, spec, key, rule, rows))
    out.sort(key=lambda s: (-s[0], -s[1], -s[2], s[3], s[4]))
    return out[:k]


class MeasurementPlanner:
    """Builtin local planner (deterministic; train rows only).

    Args:
        cache: Shared measurement cache (pass one to reuse measurements across buckets and rounds).
        top_k: Measurements kept for cross-validation after the train-accuracy screen.
        few_top_k: The same in the few-examples regime (a kind's handful of rows), where chance
            fits may outrank the asked-for measurement; leave-one-out on a few rows is cheap.
        keep: Measurements listed in the card for the synthesizer.
        combo_gain: Minimum CV gain for requesting a calibration tree.
        combo_partners: Ranked measurements tried as the tree's second feature.
        kinds: Planning per question kind (:class:`.kindplan.KindPlanSettings`); None: per bucket.
    """

    name = "builtin-measurement-planner"
    #: Buckets are planned in forked processes (:func:`tsevo.evolve.plan.local_plans`); a plan reads
    #: its dossier and the cache :meth:`prepare` warmed alone, so cards do not depend on the order.
    parallel = "process"

    def __init__(
        self,
        cache: SpecCache | None = None,
        top_k: int = 16,
        few_top_k: int = 48,
        keep: int = 6,
        combo_gain: float = 0.05,
        combo_partners: int = 4,
        kinds: KindPlanSettings | None = DEFAULT_KINDS,
    ) -> None:
        self.cache = cache if cache is not None else SpecCache()
        self.top_k = top_k
        self.few_top_k = few_top_k
        self.keep = keep
        self.combo_gain = combo_gain
        self.combo_partners = combo_partners
        self.kinds = kinds

    def recorded_settings(self) -> dict[str, Any]:
        """What a run records beside its protocol (:meth:`.kindplan.KindPlanSettings.recorded`)."""
        return self.kinds.recorded() if self.kinds is not None else {}

    # ------------------------------------------------------------------ search
    def support_request(
        self, members: Sequence[QuestionView], train: Sequence[QuestionView] = ()
    ) -> tuple[float, int] | None:
        """Most of a bucket as support when it mixes many question kinds (:func:`.support_request`)."""
        return None if self.kinds is None else support_request(self.kinds, members, train)

    def prepare(self, dossiers: Sequence[Dossier], workers: int = 1) -> int:
        """Warm the measurement cache for every row the dossiers show, in parallel processes.

        The primitive computations, the bulk of planning's time, are spread over forked workers
        here, once for all buckets (the buckets are then planned in workers of their own, which
        inherit this cache; the result depends on neither). Returns the number of (measurement,
        question) pairs computed.
        """
        qs: dict[str, QuestionView] = {}
        for d in dossiers:
            for e in (*d.support, *d.background):
                qs.setdefault(e.question.id, e.question)
        todo: list[tuple[Spec, QuestionView]] = []
        seen: set[tuple[Any, ...]] = set()  # a spec at its primitive's defaults is computed once
        for q in qs.values():
            _, arity = rows_kind([q])
            for spec in enumerate_specs(modes_for(arity, [q])):
                same = (spec.computes, q.fingerprint)
                if spec.per is None and same not in seen and same not in self.cache.computed:
                    seen.add(same)
                    todo.append((spec, q))
        if not todo:
            return 0
        if workers <= 1 or len(todo) < 200:
            for spec, q in todo:
                self.cache.get(spec, q)
            return len(todo)

        chunks = [todo[i::workers] for i in range(workers)]
        try:  # workers inherit the rows (forked_map): only the values come back
            for part in forked_map(lambda i: compute_pairs(chunks[i]), workers, workers):
                for (spec, fp), vals in part:
                    self.cache.put(spec, fp, vals)
        except (OSError, RuntimeError, cf.process.BrokenProcessPool):
            for spec, q in todo:
                self.cache.get(spec, q)
        return len(todo)

    def rank(
        self,
        examples: Sequence[Example],
        exclude: Sequence[str] = (),
        groups: frozenset[str] | None = None,
        few: bool = False,
        words: frozenset[str] = frozenset(),
    ) -> tuple[str, str, list[RankedMeasurement]]:
        """Rank measurements on the examples; returns (option kind, arity, ranking).

        ``groups`` restricts the search to primitives of those catalog groups (``None``: all);
        ``few`` fits and cross-validates in the few-examples regime (leave-one-out); ``words``
        (the question kind's words) break ties among equally cross-validated measurements in favour
        of those whose names speak of them (:func:`~.concepts.relevance`).
        """
        labeled = [e for e in examples if e.gold is not None]
        qs = [e.question for e in labeled]
        gold = {e.question.id: int(e.gold) for e in labeled if e.gold is not None}
        current = {
            e.question.id: e.record.final_answer
            for e in examples
            if getattr(e.record, "final_answer", None) is not None
        }
        if len(qs) < 3:
            return "label", "single", []
        okind, arity = rows_kind(qs)
        rule_kind = _RULE_FOR_OPTIONS[okind]
        screened: list[_Screened] = []
        for spec in enumerate_specs(modes_for(arity, qs)):
            if groups is not None and CATALOG[spec.primitive].group not in groups:
                continue
            vals = [self.cache.get(spec, q) for q in qs]
            present = [v for v in vals if v]
            if len(present) < max(3, len(qs) // 2):
                continue
            if rule_kind == "extremum":
                keys = sorted({k.rsplit("_", 1)[0] for v in present for k in v if "_" in k})
                keys = [
                    k
                    for k in keys
                    if all(f"{k}_{c}" in v for v in present for c in qs[0].candidates[:1])
                ]
            else:
                keys = sorted({k for v in present for k in v})
            rows = [
                Row(q.id, v, q.options, q.candidates, gold[q.id], current.get(q.id), q.question)
                for q, v in zip(qs, vals, strict=True)
            ]
            for key in keys:
                if _SKIP_KEYS.match(key) or spec.describe(key) in exclude:
                    continue
                if rule_kind != "extremum":
                    col = [v[key] for v in present if key in v]
                    if len(col) < 3 or float(np.ptp(col)) == 0.0:
                        continue
                try:
                    rule, acc = fit_scored(rule_kind, rows, key, few=few)
                    if rule is None:
                        continue
                except (ValueError, ArithmeticError, np.linalg.LinAlgError):
                    continue
                cover = len(present) / len(qs)
                screened.append(
                    (acc, cover, len(spec.params), spec.describe(key), spec, key, rule, rows)
                )
        ranked: list[RankedMeasurement] = []
        for acc, sep, cover, _, _, spec, key, rule, rows in _top(
            screened, self.few_top_k if few else self.top_k
        ):
            try:
                cv = cross_validate(rule_kind, rows, key, few=few)
            except (ValueError, ArithmeticError, np.linalg.LinAlgError):
                continue
            conf = round(min(0.99, max(0.05, cv)), 4)
            tuned = tune_margin(_replace(rule, confidence=conf), rows)
            ranked.append(RankedMeasurement(spec, key, tuned, cv, acc, cover, sep))
        # equal cross-validated readings: the one whose name speaks of the question's words, then
        # the widest class separation, is the least likely fluke
        ranked.sort(
            key=lambda r: (
                -r.cv_acc,
                -relevance(words, r.spec.describe(r.key), CATALOG[r.spec.primitive].summary),
                -r.separation,
                -r.train_acc,
                len(r.spec.params),
                r.spec.describe(r.key),
            )
        )
        # parameter variants that measure exactly the same values are one measurement: keep the
        # first, so later synthesis attempts try something genuinely different
        seen_values: set[tuple[object, ...]] = set()
        unique = []
        for r in ranked:
            sig = tuple(
                (k, round(val, 9))
                for q in qs
                for k, val in sorted((self.cache.get(r.spec, q) or {}).items())
                if k == r.key or k.startswith(f"{r.key}_")
            )
            if (r.key, sig) in seen_values:
                continue
            seen_values.add((r.key, sig))
            unique.append(r)
        return okind, arity, unique

    def _combo(
        self, examples: Sequence[Example], ranked: Sequence[RankedMeasurement]
    ) -> dict[str, Any] | None:
        """A calibration-tree request when a shallow tree reads the best measurement clearly better.

        Candidates: a tree on the best measurement alone (it can read a non-monotone relation,
        e.g. "higher" at both ends and "lower" in between, that a cut-point label rule cannot),
        and a tree on it with each other ranked measurement that has its own output name (a
        second measurement can tell apart question kinds the first reads differently). The best
        by cross-validated accuracy (the earlier candidate on ties, so the single feature first)
        is requested when it beats the best label rule by at least ``combo_gain``.
        """
        if not ranked or ranked[0].rule.kind != "label":
            return None
        first = ranked[0]
        # partners: later measurements with their own output name (a tool returns one flat dict)
        partners = [r for r in ranked[1:] if r.key != first.key][: self.combo_partners]
        best: tuple[float, list[RankedMeasurement]] | None = None
        for feats in ([first], *([first, r] for r in partners)):
            X, y = [], []
            for e in examples:
                q = e.question
                vs = [self.cache.get(f.spec, q) or {} for f in feats]
                if e.gold is not None and all(f.key in v for f, v in zip(feats, vs, strict=True)):
                    X.append([v[f.key] for f, v in zip(feats, vs, strict=True)])
                    y.append(q.options[e.gold].strip().lower())
            if len(X) < 10 or len(set(y)) < 2:
                continue
            folds = min(5, min(Counter(y).values()))
            if folds < 2:
                continue
            Xa, ya = np.asarray(X), np.asarray(y)
            scores = []
            for tr, te in StratifiedKFold(folds).split(Xa, ya):
                tree = DecisionTreeClassifier(max_depth=2, random_state=0).fit(Xa[tr], ya[tr])
                scores.append(float(np.mean(tree.predict(Xa[te]) == ya[te])))
            cv = float(np.mean(scores))
            if best is None or cv > best[0] + 1e-12:
                best = (cv, feats)
        if best is None or best[0] < first.cv_acc + self.combo_gain:
            return None
        return {
            "features": [{"spec": f.spec.to_dict(), "key": f.key} for f in best[1]],
            "cv_acc": round(best[0], 6),
        }

    def _narrow(
        self,
        rows: Sequence[Example],
        support: Sequence[Example],
        ranked: Sequence[RankedMeasurement],
        min_gain: float = 0.08,
    ) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
        """Words that carve out a sub-population the best measurements read much better.

        Greedy, at most two steps: for the top measurements and every word present in 10-90% of the
        rows, refit on the rows with (``require``) or without (``forbid``) the word and keep the
        split whose cross-validated accuracy rises by at least ``min_gain`` while keeping a third of
        the support errors and at least ten rows.
        """
        best_acc = ranked[0].cv_acc
        if best_acc >= 0.95:
            return None
        require: list[str] = []
        forbid: list[str] = []
        cur = list(rows)
        for _ in range(2):
            toks = {e.question.id: question_tokens(e.question.question) for e in cur}
            df = Counter(t for ts in toks.values() for t in ts)
            n = len(cur)
            words = sorted(t for t, c in df.items() if 0.1 <= c / n <= 0.9 and len(t) > 2)
            found: tuple[float, int, str, str] | None = None
            for r in ranked[:3]:
                for w in words:
                    for side in ("require", "forbid"):
                        sub = [e for e in cur if (w in toks[e.question.id]) == (side == "require")]
                        n_sup = sum(1 for e in support if e in sub)
                        if len(sub) < 10 or n_sup < max(2, len(support) // 3):
                            continue
                        acc = self._cv_on(r, sub)
                        cand = (acc, len(sub), side, w)
                        if acc >= best_acc + min_gain and (found is None or cand[:2] > found[:2]):
                            found = cand
            if found is None:
                break
            best_acc, _, side, w = found
            (require if side == "require" else forbid).append(w)
            cur = [e for e in cur if (w in toks[e.question.id]) == (side == "require")]
            if best_acc >= 0.95:
                break
        if not require and not forbid:
            return None
        return tuple(require), tuple(forbid)

    def _cv_on(self, r: RankedMeasurement, examples: Sequence[Example]) -> float:
        rows = []
        for e in examples:
            q = e.question
            if e.gold is None:
                continue
            rows.append(
                Row(
                    q.id,
                    self.cache.get(r.spec, q),
                    q.options,
                    q.candidates,
                    e.gold,
                    None,
                    q.question,
                )
            )
        try:
            return cross_validate(r.rule.kind, rows, r.key)
        except (ValueError, ArithmeticError, np.linalg.LinAlgError):
            return 0.0

    def plan(self, dossier: Dossier, feedback: Sequence[str] = ()) -> ContractCard | None:
        """Return a contract card for the bucket, or None when no measurement recovers its answers.

        With a coded diagnosis the card's ``plan`` records the action prior it set (``coded``;
        :func:`~.lifecycle.coded_prior`, a mechanism test).
        """
        prior = coded_prior(dossier)
        card = self._plan(dossier, feedback, prior)
        if card is None or prior is None:
            return card
        return _replace(card, plan={**card.plan, "coded": prior}, codes=dossier.codes)

    def _plan(
        self, dossier: Dossier, feedback: Sequence[str], prior: dict[str, str] | None
    ) -> ContractCard | None:
        """The card without the coded record (see :meth:`plan`).

        A bucket may mix question kinds (the define step never sees tasks, and it has at most eight
        categories). The planner then focuses on the kind with the most support errors: the rows
        sharing its task and option shape. The rest of the bucket is left to later rounds.
        """
        lifecycle = prior is None or prior["prior"] != "create"
        if dossier.side == "tool_fired" and dossier.library is not None and lifecycle:
            card = lifecycle_card(dossier)
            if card is not None:
                return card
        if self.kinds is not None:
            branches, report = plan_kinds(self, dossier, self.kinds)
            if branches and len(report) >= 2:
                return composite_card(dossier, branches, report)
        seen: set[str] = set()
        uniq = []
        for e in [*dossier.support, *dossier.background]:
            if e.question.id not in seen:
                seen.add(e.question.id)
                uniq.append(e)
        keys = kind_keys([e.question for e in uniq])
        kinds = Counter(keys[e.question.id] for e in dossier.support)
        if not kinds:
            return None
        focus_key = max(kinds, key=lambda k: (kinds[k], k))
        support_focus = [e for e in dossier.support if keys[e.question.id] == focus_key]
        uniq = [e for e in uniq if keys[e.question.id] == focus_key]
        exclude = [
            f.split("measurement ", 1)[1].split(" ", 1)[0] for f in feedback if "measurement " in f
        ]
        okind, arity, ranked = self.rank(uniq, exclude)
        if not ranked:
            return None
        require: tuple[str, ...] = ()
        forbid: tuple[str, ...] = ()
        narrowed = self._narrow(uniq, support_focus, ranked)
        if narrowed is not None:
            require, forbid = narrowed
            uniq = [e for e in uniq if words_ok(e.question, require, forbid)]
            support_focus = [e for e in support_focus if words_ok(e.question, require, forbid)]
            okind, arity, ranked2 = self.rank(uniq, exclude)
            if ranked2:
                ranked = ranked2
        best = ranked[0]
        base_acc = float(np.mean([bool(e.record.correct) for e in uniq])) if uniq else 0.0
        combo = self._combo(uniq, ranked)
        support_qs = [e.question for e in support_focus]
        scope = Scope(
            tasks=tuple(sorted({q.task for q in support_qs})),
            evidence=(best.spec.primitive,),
            arity=arity,  # type: ignore[arg-type]
            options_kind=okind,
            matcher=with_words(fit_matcher(support_qs), require, forbid),
        )
        sig = MODE_SIGNATURE[best.spec.mode]
        calibration = None
        if combo is not None:
            calibration = {
                "kind": "binary_decision_tree_v1",
                "features": [f["key"] for f in combo["features"]],
            }
        contract = Contract(
            measurement=best.spec.describe(best.key),
            signature=sig,
            success_criterion=(
                f"reading {best.key} with a {best.rule.kind} rule recovers gold on held-out bucket errors "
                f"(cv accuracy {best.cv_acc:.2f} on {len(uniq)} train rows vs base {base_acc:.2f})"
            ),
            calibration=calibration,
            params=dict(best.spec.params),
        )
        return new_tool_card(
            dossier,
            root_cause=(
                f"the agent answers from a global summary; the answer depends on {best.spec.describe(best.key)}"
            ),
            focus=f"measure {best.spec.describe(best.key)} and read it with a {best.rule.kind} rule",
            contract=contract,
            scope=scope,
            plan={
                "focus": {
                    "task": focus_key[0],
                    "kind": focus_key[1],
                    "support": len(support_focus),
                    "of_support": len(dossier.support),
                },
                "rule_kind": best.rule.kind,
                "ranked": [r.to_dict() for r in ranked[: self.keep]],
                "combo": combo,
                "base_acc": round(base_acc, 6),
                "n_rows": len(uniq),
            },
        )

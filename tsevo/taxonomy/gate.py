"""The builtin agreement gate: four different readers label gate-pool errors (design §4).

The panel (``builtin-4view``) holds four pure readers, each of its own view, the taxonomy and a
shared base (the induction pool's failures, labelled by the codes' detectors):

* *Alpha, rules*: codes whose detector holds on the trace's features;
* *Beta, exemplars*: codes held by ≥ 2 of the 3 nearest base traces in feature space (at event
  level also the shared base's anchors: earlier rounds' errors every reader coded alike);
* *Gamma, text*: TF-IDF cosine of the question and rendered trace against each code's profile
  (its prose and its evidence traces' renderings), threshold fitted on the base (best F1);
* *Delta, sequences*: per-code logistic regression on event-token 1–3-grams, fitted on the base.

Rounds (≤ ``max_rounds`` × ``per_round`` traces) sample the gate pool by strata (wrong with
evidence, wrong without, tool error or incomplete, right): max(1, n/4) per stratum, then a seeded
fill, no repeats. ``unit="event"`` (default): the readers discover, confirm and type errors at
events, then assign codes and deliberate (:mod:`~tsevo.taxonomy.builtin_phases`, design §4.2);
``unit="trace"``: the errors are the sampled failed traces, labelled once. κ (both metrics, on
the phase-4 labels) and coverage (on the consolidated ones) come from
:func:`~tsevo.taxonomy.agreement.agreement`;
``early_stop="paper"`` stops at the first round meeting both. After a failed round, bounded edits:
≤ 2 merges (codes co-assigned on ≥ 2 errors with firing Jaccard ≥ 0.5 on the base), ≤ 3 relabels
(used codes with per-code κ < 0.4 get ``when_not_to_use`` from the code most confused with them),
≤ 2 adds when ≥ 2 errors got no consolidated code (the miner, BH included, on the induction-pool
traces no code fires on; a mined code must fire on an uncovered error).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer
from sklearn.linear_model import LogisticRegression

from .agreement import COVERAGE_FLOOR, KAPPA_TARGET, agreement, consolidate
from .builtin_phases import EventViews, clause_share, event_round, event_token
from .edits import LineageEntry, Relabel, apply_edits
from .gate_edits import mined_adds, panel_edits
from .induce import fires, induction_pool
from .model import Taxonomy
from .phases import SharedBase, split_error_id
from .traces import FEATURES, Trace

__all__ = ["READERS", "GateConfig", "GateResult", "gate", "sample_round"]

READERS: tuple[str, ...] = ("alpha", "beta", "gamma", "delta")
STRATA: tuple[str, ...] = ("wrong_tool", "wrong_no_tool", "tool_error", "right")


@dataclass(frozen=True)
class GateConfig:
    """The gate's numbers.

    ``unit="event"`` (default) runs the five phases per trace (design §4.2,
    :mod:`~tsevo.taxonomy.builtin_phases`): errors are the events ≥ ``quorum_propose`` readers
    propose and ≥ ``quorum_confirm`` confirm; ≤ ``deliberation_rounds`` rounds of deliberation
    give the consolidated labels. ``unit="trace"``: each sampled failed trace is one error,
    labelled once (the gate before the phases, kept for comparison).
    """

    seed: int = 0
    max_rounds: int = 5
    per_round: int = 5
    metric: str = "cohen_area"
    kappa_target: float = KAPPA_TARGET
    coverage_floor: float = COVERAGE_FLOOR
    quorum: int = 2
    early_stop: str = "paper"
    max_base: int = 400
    max_merge: int = 2
    max_relabel: int = 3
    max_add: int = 2
    unit: str = "event"
    quorum_propose: int = 2
    quorum_confirm: int = 3
    deliberation_rounds: int = 2

    def __post_init__(self) -> None:
        if self.unit not in ("event", "trace"):
            raise ValueError(f"unit must be 'event' or 'trace', got {self.unit!r}")


@dataclass
class GateResult:
    """The gated taxonomy (status set), every round's record and the lineage of edits."""

    taxonomy: Taxonomy
    rounds: list[dict[str, Any]]
    lineage: list[LineageEntry] = field(default_factory=list)

    @property
    def metric(self) -> str:
        """The metric that gated."""
        return str(self.rounds[-1]["metric"]) if self.rounds else "cohen_area"


def _h(*parts: Any) -> str:
    return hashlib.sha256("\x00".join(map(str, parts)).encode()).hexdigest()


def _stratum(t: Trace) -> str:
    f = t.features
    if f.get("tool.any_error") or f.get("chain.incomplete"):
        return "tool_error"
    if not t.failed:
        return "right"
    return "wrong_tool" if f.get("tool.evidence") else "wrong_no_tool"


def sample_round(pool: Sequence[Trace], used: set[str], k: int, n: int, seed: int) -> list[Trace]:
    """Round ``k``'s traces: max(1, n/4) per stratum, then a seeded fill; none of ``used``."""
    left = [t for t in pool if t.problem_id not in used]
    by: dict[str, list[Trace]] = {s: [] for s in STRATA}
    for t in left:
        by[_stratum(t)].append(t)
    for s in STRATA:
        by[s].sort(key=lambda t, s=s: _h("gate-sample", seed, k, s, t.problem_id))  # type: ignore[misc]
    take: list[Trace] = []
    for s in STRATA:
        take += by[s][: max(1, n // 4)]
    rest = sorted(
        (t for t in left if t not in take), key=lambda t: _h("gate-fill", seed, k, t.problem_id)
    )
    take = (take + rest)[:n] if len(take) < n else take[:n]
    return sorted(take, key=lambda t: t.problem_id)


# -- views ------------------------------------------------------------------------------------


def _vector(t: Trace, keys: Sequence[tuple[str, Any]]) -> np.ndarray:
    f = t.features
    return np.array(
        [float(f.get(n) == v) if v is not None else float(f.get(n) or 0) for n, v in keys]
    )


def _keys(base: Sequence[Trace]) -> list[tuple[str, Any]]:
    keys: list[tuple[str, Any]] = []
    for name, feat in FEATURES.items():
        if not feat.outcome_blind:
            continue
        if feat.kind == "str":
            vals = sorted({str(t.features.get(name)) for t in base})
            keys += [(name, v) for v in vals]
        else:
            keys.append((name, None))
    return keys


def _text(t: Trace) -> str:
    return re.sub(r"\d+(\.\d+)?", "0", f"{t.task}\n{t.raw_trajectory}")


def _tokens(t: Trace) -> str:
    f = t.features
    toks = [
        f"q_opts{f.get('domain.n_options')}",
        f"q_len_{f.get('domain.question_len')}",
        f"q_series_{f.get('domain.series_len')}",
    ]
    return " ".join([*toks, *(event_token(e) for e in t.events)])


class Panel:
    """The four readers, fitted once per taxonomy version on the shared base."""

    def __init__(self, tax: Taxonomy, base: Sequence[Trace], by_id: Mapping[str, Trace]) -> None:
        self.tax = tax
        self.ids = list(tax.ids)
        self.base = list(base)
        self.labels = np.array(
            [[fires(c.detector, t.features) for c in tax.codes] for t in self.base], dtype=bool
        ).reshape(len(self.base), len(self.ids))
        self.keys = _keys(self.base)
        vecs = np.array([_vector(t, self.keys) for t in self.base])
        self.scale = np.maximum(np.abs(vecs).max(axis=0), 1.0) if len(vecs) else None
        self.vecs = vecs / self.scale if len(vecs) else vecs
        self.exemplars = (self.vecs, self.labels, [t.problem_id for t in self.base])
        # gamma: TF-IDF profiles (prose + evidence renderings), thresholds fitted on the base
        self.tfidf = TfidfVectorizer(token_pattern=r"[a-z]+", sublinear_tf=True)
        docs = [_text(t) for t in self.base]
        profiles = []
        for c in tax.codes:
            ev = [_text(by_id[i]) for i in c.evidence_trace_ids if i in by_id]
            prose = " ".join(
                [c.name.replace("_", " "), c.description, c.when_to_use, *c.detection_heuristics]
            )
            profiles.append(prose.replace(".", " ").replace("_", " ") + "\n" + "\n".join(ev))
        self.tfidf.fit(docs + profiles)
        self.prof = self.tfidf.transform(profiles)
        sims = (self.tfidf.transform(docs) @ self.prof.T).toarray()
        self.theta = [_best_threshold(sims[:, j], self.labels[:, j]) for j in range(len(self.ids))]
        # delta: event-token n-grams, one logistic regression per code
        self.count = CountVectorizer(token_pattern=r"\S+", ngram_range=(1, 3), binary=True)
        x = self.count.fit_transform([_tokens(t) for t in self.base])
        self.models: list[Any] = []
        for j in range(len(self.ids)):
            y = self.labels[:, j]
            if y.all() or not y.any():
                self.models.append(bool(y.all()))
            else:
                self.models.append(LogisticRegression(C=1.0, solver="liblinear").fit(x, y))

    def alpha(self, t: Trace) -> set[str]:
        return {c.id for c in self.tax.codes if fires(c.detector, t.features)}

    def anchor(self, anchors: Mapping[str, Sequence[str]], by_id: Mapping[str, Trace]) -> None:
        """Beta's exemplars grow by the shared base's anchors (design §4.2, §4.4).

        An anchor is an error of an earlier round every reader coded alike; its trace joins the
        exemplars with those codes (codes no longer in the taxonomy dropped). Only Beta reads them.
        """
        rows, labs, names = [], [], []
        for eid, codes in sorted(anchors.items()):
            tid = split_error_id(eid)[0]
            known = set(codes) & set(self.ids)
            if known and tid in by_id and self.scale is not None:
                rows.append(_vector(by_id[tid], self.keys) / self.scale)
                labs.append([i in known for i in self.ids])
                names.append(eid)
        self.exemplars = (
            np.vstack([self.vecs, *rows]) if rows else self.vecs,
            np.vstack([self.labels, np.array(labs, dtype=bool)]) if rows else self.labels,
            [t.problem_id for t in self.base] + names,
        )

    def _votes(self, t: Trace) -> np.ndarray:
        vecs, labels, names = self.exemplars
        d = np.linalg.norm(vecs - _vector(t, self.keys) / self.scale, axis=1)
        order = sorted(range(len(names)), key=lambda i: (round(float(d[i]), 9), names[i]))
        return labels[order[:3]].sum(axis=0)

    def _sims(self, t: Trace) -> np.ndarray:
        return (self.tfidf.transform([_text(t)]) @ self.prof.T).toarray()[0]

    def _probs(self, t: Trace) -> list[Any]:
        x = self.count.transform([_tokens(t)])
        return [m if isinstance(m, bool) else m.predict_proba(x)[0, 1] for m in self.models]

    def beta(self, t: Trace) -> set[str]:
        if not len(self.base):
            return set()
        votes = self._votes(t)
        return {self.ids[j] for j in range(len(self.ids)) if votes[j] >= 2}

    def gamma(self, t: Trace) -> set[str]:
        sims = self._sims(t)
        return {self.ids[j] for j, th in enumerate(self.theta) if th is not None and sims[j] >= th}

    def delta(self, t: Trace) -> set[str]:
        return {self.ids[j] for j, p in enumerate(self._probs(t)) if p is True or p >= 0.5}

    def readers(self) -> list[Callable[[Trace], set[str]]]:
        return [self.alpha, self.beta, self.gamma, self.delta]

    def scores(self, r: int, t: Trace) -> dict[str, float]:
        """Reader ``r``'s score per code, normalized so that 1 is its assignment threshold."""
        if r == 0:
            return {c.id: clause_share(c, t.features) for c in self.tax.codes}
        if r == 1:
            votes = self._votes(t) if len(self.base) else np.zeros(len(self.ids))
            return {c: float(votes[j]) / 2 for j, c in enumerate(self.ids)}
        if r == 2:
            sims, th = self._sims(t), self.theta
            return {c: 0.0 if th[j] is None else sims[j] / th[j] if th[j] else 2.0
                    for j, c in enumerate(self.ids)}  # fmt: skip
        return {c: float(p) / 0.5 for c, p in zip(self.ids, self._probs(t), strict=True)}


def _best_threshold(sim: np.ndarray, y: np.ndarray) -> float | None:
    if not y.any():
        return None
    best, best_f1 = None, -1.0
    for th in sorted(set(np.round(sim[y], 9).tolist())):
        pred = sim >= th
        tp = int((pred & y).sum())
        f1 = 2 * tp / (int(pred.sum()) + int(y.sum()))
        if f1 > best_f1:
            best, best_f1 = th, f1
    return best


def gate_pool(traces: Sequence[Trace]) -> list[Trace]:
    """The gate pool's traces (the 30% induction did not read), by id."""
    return sorted(
        (t for t in traces if t.metadata.get("pool") == "gate"), key=lambda t: t.problem_id
    )


def round_errors(batch: Sequence[Trace]) -> tuple[list[Trace], list[str]]:
    """A round's failed traces and their error ids (``<trace id>#<last event>``)."""
    errs = [t for t in batch if t.failed]
    return errs, [f"{t.problem_id}#{t.events[-1]['seq']}" for t in errs]


def round_record(
    k: int,
    tax: Taxonomy,
    batch: Sequence[Trace],
    errors: Sequence[str],
    labels: Mapping[str, Mapping[str, set[str]]],
    res: Any,
    **extra: Any,
) -> dict[str, Any]:
    """One gate round's agreement record (``labels`` by annotator name; ``extra`` fields added)."""
    return {
        "round": k,
        "fingerprint": tax.fingerprint,
        **extra,
        "traces": [t.problem_id for t in batch],
        "errors": list(errors),
        "labels": {name: {e: sorted(v) for e, v in lab.items()} for name, lab in labels.items()},
        "metric": res.metric,
        "cohen_area": res.cohen_area,
        "fleiss_code_macro": res.fleiss_code_macro,
        "fleiss_per_code": dict(sorted(res.fleiss_per_code.items())),
        "coverage": res.coverage,
        "passed": res.status == "accepted",
        "reason": res.decision.reason,
        "gated_by": res.metric,
    }


def gated(
    tax: Taxonomy, decision: Any, rounds: int, metric: str, panel: str, *, panel_if_empty: bool
) -> Taxonomy:
    """The taxonomy with the last round's status (``review_required`` when no round could run)."""
    if decision is None:
        agreement = {
            "final_kappa": None,
            "final_coverage": None,
            "rounds_completed": 0,
            "metric": metric,
            "reason": "gate pool too small for one round",
        }
        if panel_if_empty:
            agreement["panel"] = panel
        return tax.with_status("review_required", agreement=agreement)
    record = decision.as_generation(rounds)
    record["panel"] = panel
    return tax.with_status(decision.status, agreement=record)


def _passes(traces: Sequence[Trace], cfg: GateConfig) -> list[Trace]:
    """The shared base's passing traces (induction pool, at most ``max_base``, by id)."""
    passes = sorted(
        (t for t in traces if t.metadata.get("pool") == "induction" and not t.failed),
        key=lambda t: _h("gate-base-pass", cfg.seed, t.problem_id),
    )[: cfg.max_base]
    return sorted(passes, key=lambda t: t.problem_id)


def gate(draft: Taxonomy, traces: Sequence[Trace], cfg: GateConfig | None = None) -> GateResult:
    """Run the builtin gate on the draft's gate pool; the result's taxonomy carries the status."""
    cfg = cfg or GateConfig()
    by_id = {t.problem_id: t for t in traces}
    pool = gate_pool(traces)
    base = sorted(
        (t for t in traces if t.metadata.get("pool") == "induction" and t.failed),
        key=lambda t: _h("gate-base", cfg.seed, t.problem_id),
    )[: cfg.max_base]
    base.sort(key=lambda t: t.problem_id)
    ind_pool = induction_pool(traces, cfg.seed)
    max_rounds = min(cfg.max_rounds, len(pool) // max(cfg.per_round, 1))
    tax, rounds, lineage = draft, [], []
    used: set[str] = set()
    panel = Panel(tax, base, by_id) if tax.codes else None
    views, shared = EventViews(_passes(traces, cfg)) if cfg.unit == "event" else None, SharedBase()
    decision = None
    for k in range(1, max_rounds + 1):
        batch = sample_round(pool, used, k, cfg.per_round, cfg.seed)
        used |= {t.problem_id for t in batch}
        extra: dict[str, Any] = {}
        cons: dict[str, set[str]] | None = None
        if views is None:
            errs, errors = round_errors(batch)
            labels: list[dict[str, set[str]]] = [{} for _ in READERS]
            if panel is not None:
                for r, reader in enumerate(panel.readers()):
                    labels[r] = {e: reader(t) for e, t in zip(errors, errs, strict=True)}
        else:
            if panel is not None:
                panel.anchor(shared.anchors, by_id)
            ph = event_round(
                views,
                tax,
                batch,
                panel.readers() if panel is not None else None,
                panel.scores if panel is not None else None,
                quorum_propose=cfg.quorum_propose,
                quorum_confirm=cfg.quorum_confirm,
                deliberation_rounds=cfg.deliberation_rounds,
                quorum=cfg.quorum,
            )
            errors, labels = ph.errors, ph.labels
            cons = {e: set(v) for e, v in ph.deliberation.consolidated.items()}
            errs = [by_id[split_error_id(e)[0]] for e in errors]
            extra = ph.record(READERS, shared)
        res = agreement(
            labels,
            errors,
            tax,
            consolidated=cons,
            metric=cfg.metric,
            kappa_target=cfg.kappa_target,
            coverage_floor=cfg.coverage_floor,
            quorum=cfg.quorum,
        )
        decision = res
        passed = res.status == "accepted"
        rounds.append(
            round_record(
                k, tax, batch, errors, dict(zip(READERS, labels, strict=True)), res, **extra
            )
        )
        if passed and cfg.early_stop == "paper":
            break
        if k < max_rounds:
            edits = []
            if panel is not None:
                edits = panel_edits(tax, panel, labels, errors, res.fleiss_per_code, cfg)
            if cons is None:
                cons = consolidate(labels, errors, quorum=cfg.quorum)
            uncovered = [t for t, e in zip(errs, errors, strict=True) if not cons[e]]
            if len(uncovered) >= 2:
                edits += mined_adds(
                    tax, ind_pool, list({t.problem_id: t for t in uncovered}.values()), cfg
                )
            shared.grow([], [], [str(e.changes.get("when_not_to_use")) for e in edits
                                 if isinstance(e, Relabel)])  # fmt: skip
            if edits:
                batch_ = apply_edits(tax, edits, trigger=f"gate round {k}")
                tax = batch_.taxonomy
                lineage.append(batch_.entry)
                panel = Panel(tax, base, by_id) if tax.codes else None
    final = gated(tax, decision, len(rounds), cfg.metric, "builtin-4view", panel_if_empty=False)
    return GateResult(final, rounds, lineage)

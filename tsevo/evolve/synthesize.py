"""Synthesis and the prefilter: up to ``max_synthesis_attempts`` sequential attempts per work group.

Each attempt's draft goes through mechanical checks before it is ever scored:

1. the sandbox's AST gate (a single zero-argument function, allowlisted syntax);
2. a smoke call on synthetic inputs built from the contract's signature;
3. a context-selection check on the bucket's support rows (runs twice for determinism; no covariate
   read that the question does not mention; the outputs the reading rule needs are present);
4. calibration on request: a ``binary_decision_tree_v1`` fitted on in-scope TRAIN rows only (never a
   bucket's held-out rows) and compiled into the source.

A violation gets one targeted repair from the synthesizer. A draft that passes is prefiltered: the
candidate library (current chain plus this one artifact) answers the bucket's held-out errors (at most
``prefilter_errors``, members of a merged group interleaved) and a harm probe of in-scope train
questions the current library gets right. It survives with at least ``prefilter_min_repairs``
*attributable* repairs (fixed, with the draft bound, executed and responsible for the replacement in
the trace), harm within ``max(prefilter_harm_cap_abs, prefilter_harm_cap_frac * probe)`` and execution
errors within ``prefilter_exec_error_cap``. A repair rate of at least ``prefilter_early_stop`` stops the
search; otherwise the best passing attempt goes on. Two consecutive zero-repair attempts trigger a
replan. The strongest attempt so far is kept apart, so a weaker retry never displaces it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from tsevo.agent import AnswerRecord
from tsevo.data import Question
from tsevo.library.calibration import attach_tree, fit_calibration
from tsevo.library.context import ToolInput
from tsevo.library.library import Library, Stage, scope_matches
from tsevo.library.reading import norm_label
from tsevo.library.tool import Guidance, ReadingRule, Tool
from tsevo.roles.protocols import (
    AttemptFeedback,
    Dossier,
    Example,
    LocalPlanner,
    Synthesizer,
    WorkGroup,
)

from .config import ProtocolConfig
from .evaluate import Evaluator
from .views import ViewIds

__all__ = ["AttemptRecord", "GroupOutcome", "check_draft", "run_group", "smoke_inputs"]


def _h(seed: int, qid: str) -> str:
    return hashlib.sha256(f"{seed}\x02{qid}".encode()).hexdigest()


@dataclass
class AttemptRecord:
    """One synthesis attempt with its checks and prefilter numbers."""

    attempt: int
    tool_id: str
    measurement: str
    violations: list[str] = field(default_factory=list)
    repaired: bool = False
    calibration: dict[str, Any] | None = None
    checked: bool = False
    n_held_out: int = 0
    n_probe: int = 0
    repairs: list[str] = field(default_factory=list)
    harms: list[str] = field(default_factory=list)
    exec_errors: int = 0
    tool_runs: int = 0
    passed: bool = False
    outcome: str = ""

    @property
    def repair_rate(self) -> float:
        """Attributable repairs per held-out error."""
        return len(self.repairs) / self.n_held_out if self.n_held_out else 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict."""
        d = dict(self.__dict__)
        d["repair_rate"] = round(self.repair_rate, 6)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> AttemptRecord:
        """Inverse of :meth:`to_dict`."""
        return cls(**{k: v for k, v in d.items() if k != "repair_rate"})


@dataclass
class GroupOutcome:
    """What synthesis produced for one work group."""

    group_id: str
    attempts: list[AttemptRecord] = field(default_factory=list)
    survivor: Tool | None = None
    replans: int = 0
    stopped: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict (the survivor by id; its files live in candidates/)."""
        return {
            "group_id": self.group_id,
            "attempts": [a.to_dict() for a in self.attempts],
            "survivor": self.survivor.id if self.survivor else None,
            "replans": self.replans,
            "stopped": self.stopped,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], survivor: Tool | None = None) -> GroupOutcome:
        """Inverse of :meth:`to_dict`, given the survivor read back from its candidate folder."""
        if (survivor.id if survivor else None) != d.get("survivor"):
            raise ValueError(f"group {d['group_id']}: survivor {d.get('survivor')!r} not given")
        return cls(
            d["group_id"],
            [AttemptRecord.from_dict(a) for a in d["attempts"]],
            survivor,
            int(d.get("replans", 0)),
            d.get("stopped", ""),
        )


def smoke_inputs(signature: Sequence[str]) -> list[ToolInput]:
    """Synthetic inputs built from a contract signature (a smoke call must not error on them)."""
    rng = np.random.default_rng(0)
    n = 160
    t = np.arange(n)
    y = np.sin(2 * np.pi * t / 16) + 0.05 * t + 0.3 * rng.standard_normal(n)
    series: dict[str, np.ndarray] = {"series": y}
    primary: tuple[str, ...] = ("series",)
    cands: tuple[str, ...] = ()
    covs: tuple[str, ...] = ()
    text = "Smoke test question about the series from t=10 to t=50 and from t=60 to t=100."
    sig = set(signature)
    if list(signature).count("primary") >= 2:
        series["second"] = np.roll(y, 3) + 0.2 * rng.standard_normal(n)
        primary = ("series", "second")
    if "candidates" in sig or "reference" in sig:
        for c in "ABC":
            series[c] = (
                y[::-1] + rng.standard_normal(n) if c != "B" else y + 0.1 * rng.standard_normal(n)
            )
        cands = ("A", "B", "C")
    if "covariate" in sig:
        series["driver"] = np.roll(y, 5)
        covs = ("driver",)
        text += " Does driver lead the series?"
    return [ToolInput("smoke", "smoke", text, series, primary, covs, cands)]


def _rule_keys_present(
    rule: ReadingRule | None, outputs: Mapping[str, Any], candidates: Sequence[str]
) -> bool:
    return rule is None or rule.applies(outputs, candidates)


def check_draft(draft: Tool, sandbox: Any, support: Sequence[Question]) -> list[str]:
    """Mechanical checks before execution and on support rows; returns violations (empty = clean)."""
    if draft.kind != "tool":
        return []
    gate = sandbox.check(draft.source)
    if not gate.ok:
        return [f"gate: {'; '.join(gate.reasons)}"]
    for r in sandbox.run(draft.source, smoke_inputs(draft.contract.signature)):
        if r.status == "error":
            return [f"smoke call failed ({r.error_kind}): {r.error}"]
    if not support:
        return []
    res = sandbox.run(
        draft.source, [ToolInput.from_question(q) for q in support], check_determinism=True
    )
    problems = []
    kinds = {r.error_kind for r in res if r.status == "error"}
    if "covariate" in kinds:
        problems.append("context selection: reads a covariate the question does not mention")
    if "nondeterministic" in kinds:
        problems.append("determinism: two runs on the same question disagree")
    ok = [(q, r) for q, r in zip(support, res, strict=True) if r.status == "ok"]
    if not ok:
        errs = sorted({f"{r.error_kind}: {r.error[:80]}" for r in res if r.status == "error"})
        problems.append(
            f"no evidence on the bucket's support rows ({'; '.join(errs[:2]) or 'all abstained'})"
        )
    elif draft.contract.calibration is None and not any(
        _rule_keys_present(draft.guidance.rule, r.outputs or {}, q.candidates) for q, r in ok
    ):
        problems.append("outputs lack the key the reading rule reads")
    return problems


def calibrate(
    draft: Tool,
    rows: Sequence[Question],
    sandbox: Any,
    cfg: ProtocolConfig,
    split_guard: Callable[[str], str] | None,
) -> tuple[Tool | None, dict[str, Any], str]:
    """Fit and attach the requested calibration tree on train rows; returns (tool or None, record, reason)."""
    cal = draft.contract.calibration or {}
    feats = list(cal.get("features") or draft.outputs)
    res = sandbox.run(draft.source, [ToolInput.from_question(q) for q in rows])
    X, y, groups, ids = [], [], [], []
    for q, r in zip(rows, res, strict=True):
        if (
            r.status != "ok"
            or q.gold is None
            or not r.outputs
            or any(f not in r.outputs for f in feats)
        ):
            continue
        X.append([float(r.outputs[f]) for f in feats])
        y.append(norm_label(q.options[q.gold]))
        groups.append(q.fingerprint)
        ids.append(q.id)
    if len(X) < 2:
        return (
            None,
            {"accepted": False, "reason": "too few rows with evidence"},
            "calibration refused: too few rows",
        )
    if len(set(feats)) != len(feats):
        return (
            None,
            {"accepted": False, "reason": "duplicate feature names"},
            "calibration refused: duplicate feature names",
        )
    try:
        result = fit_calibration(
            np.asarray(X),
            y,
            groups,
            feature_names=feats,
            ids=ids,
            min_per_class=cfg.calibration_min_per_class,
            holdout=cfg.calibration_holdout,
            min_balanced_accuracy=cfg.calibration_min_bal_acc,
            seed=cfg.seed,
            split_guard=split_guard,
        )
    except ValueError as exc:  # a malformed request is a contract violation, not a crash
        return None, {"accepted": False, "reason": str(exc)}, f"calibration refused: {exc}"
    record = result.to_dict()
    if not result.accepted:
        return None, record, f"calibration refused: {result.reason}"
    source = attach_tree(draft.source, result, output_key="class_id")
    k = len(result.classes)
    rule = ReadingRule(
        "label",
        "class_id",
        tuple(i + 0.5 for i in range(k - 1)),
        tuple(str(c) for c in result.classes),
        confidence=round(float(result.balanced_accuracy or 0.0), 4),
    )
    text = draft.guidance.text
    tool = replace(
        draft,
        source=source,
        outputs=(*draft.outputs, "class_id"),
        guidance=Guidance(text, rule),
        calibration=record,
    )
    return tool, record, ""


def interleave(lists: Sequence[Sequence[str]], limit: int) -> list[str]:
    """Round-robin merge of member buckets' held-out lists (so a screen does not see only the largest)."""
    out: list[str] = []
    seen: set[str] = set()
    i = 0
    while len(out) < limit and any(i < len(x) for x in lists):
        for x in lists:
            if i < len(x) and x[i] not in seen and len(out) < limit:
                out.append(x[i])
                seen.add(x[i])
        i += 1
    return out


def prefilter(
    draft: Tool,
    round_: int,
    library: Library,
    held_out: Sequence[Question],
    probe: Sequence[Question],
    base: Mapping[str, AnswerRecord],
    evaluator: Evaluator,
    cfg: ProtocolConfig,
    rec: AttemptRecord,
) -> None:
    """Score one draft on held-out errors and the harm probe; fills ``rec``."""
    cand = library.append_stage(Stage(round_, (draft,), f"candidate {draft.id}"))
    qs = [*held_out, *probe]
    recs = evaluator.answer("train", cand, qs)
    rec.n_held_out, rec.n_probe = len(held_out), len(probe)
    for q in held_out:
        r = recs[q.id]
        if not base[q.id].correct and r.correct and _attributable(draft, base[q.id], r):
            rec.repairs.append(q.id)
    for q in probe:
        if base[q.id].correct and not recs[q.id].correct:
            rec.harms.append(q.id)
    for q in qs:
        for s in recs[q.id].steps:
            for run in s.runs:
                if run.tool_id == draft.id:
                    rec.tool_runs += 1
                    rec.exec_errors += run.status == "error"
    harm_cap = max(cfg.prefilter_harm_cap_abs, cfg.prefilter_harm_cap_frac * len(probe))
    err_rate = rec.exec_errors / rec.tool_runs if rec.tool_runs else 0.0
    if len(rec.repairs) < cfg.prefilter_min_repairs:
        rec.outcome = "no_repair"
    elif len(rec.harms) > harm_cap:
        rec.outcome = "harmful"
    elif err_rate > cfg.prefilter_exec_error_cap:
        rec.outcome = "exec_errors"
    else:
        rec.outcome = "passed"
        rec.passed = True


def _attributable(draft: Tool, before: AnswerRecord, after: AnswerRecord) -> bool:
    """Did this artifact cause the new answer?

    Tools and guidance: it is credited with the replacement. Overrides and tombstones: the earlier
    tool it targets decided the old answer and no longer fires.
    """
    if draft.kind in ("scope_override", "tombstone"):
        return draft.target in before.replaced_by and draft.target not in after.tools_ok
    return draft.id in after.replaced_by


def _score(a: AttemptRecord) -> tuple[int, int, str]:
    return (len(a.repairs) - len(a.harms), len(a.repairs), a.tool_id)


def run_group(
    group: WorkGroup,
    round_: int,
    library: Library,
    *,
    dossiers: Mapping[str, Dossier],
    held_out: Mapping[str, Sequence[str]],
    train: Mapping[str, Question],
    base: Mapping[str, AnswerRecord],
    synthesizer: Synthesizer,
    planner: LocalPlanner,
    sandbox: Any,
    evaluator: Evaluator,
    cfg: ProtocolConfig,
    exclude: set[str],
    ids: ViewIds,
    split_guard: Callable[[str], str] | None = None,
    on_candidate: Callable[[Tool, AttemptRecord], None] | None = None,
) -> GroupOutcome:
    """Synthesize, check, calibrate and prefilter up to ``max_synthesis_attempts`` drafts for one group.

    The synthesizer sees the group's support rows as views (``ids``); the engine's checks and
    calibration run on the questions behind them.
    """
    out = GroupOutcome(group.id)
    support = [e for b in group.bucket_ids for e in dossiers[b].support]
    support_qs = [train[ids.real(e.question.id)] for e in support]
    examples: list[Example] = support
    held_ids = interleave([held_out.get(b, ()) for b in group.bucket_ids], cfg.prefilter_errors)
    held_qs = [train[q] for q in held_ids]
    history: list[AttemptFeedback] = []
    best: tuple[Tool, AttemptRecord] | None = None
    zero_streak = 0
    for attempt in range(1, cfg.max_synthesis_attempts + 1):
        try:
            draft = synthesizer.synthesize(group, attempt, history, examples)
        except Exception as exc:  # a synthesizer failure ends the group's search, not the round
            out.stopped = f"synthesizer failed: {exc}"
            break
        if draft is None:
            out.stopped = "synthesizer has no further idea"
            break
        draft = replace(draft, id=f"r{round_}.{group.id}.a{attempt}", round=round_)
        rec = AttemptRecord(attempt, draft.id, draft.contract.measurement)
        violations = check_draft(draft, sandbox, support_qs)
        cal_rows = [
            q for q in train.values() if q.id not in exclude and scope_matches(draft.scope, q)
        ]
        if not violations and draft.contract.calibration is not None:
            tool, record, why = calibrate(draft, cal_rows, sandbox, cfg, split_guard)
            rec.calibration = record
            if tool is None:
                violations = [why]
            else:
                draft = tool
        if violations:
            rec.violations = list(violations)
            try:
                fixed = synthesizer.repair(group, draft, violations[0], examples)
            except Exception:  # a failed repair leaves the violation standing
                fixed = None
            if fixed is not None:
                fixed = replace(fixed, id=f"r{round_}.{group.id}.a{attempt}r", round=round_)
                rec.repaired = True
                rec.tool_id = fixed.id
                rec.measurement = fixed.contract.measurement
                v2 = check_draft(fixed, sandbox, support_qs)
                if not v2 and fixed.contract.calibration is not None:
                    tool, record, why = calibrate(fixed, cal_rows, sandbox, cfg, split_guard)
                    rec.calibration = record
                    v2 = [why] if tool is None else []
                    fixed = tool or fixed
                if not v2:
                    draft, violations = fixed, []
                else:
                    rec.violations += v2
        if violations:
            rec.outcome = "rejected_check"
            out.attempts.append(rec)
            history.append(
                AttemptFeedback(
                    attempt,
                    rec.tool_id,
                    rec.measurement,
                    "rejected_check",
                    detail="; ".join(rec.violations),
                )
            )
            if on_candidate is not None:
                on_candidate(draft, rec)
            continue
        rec.checked = True
        probe = _probe(draft, train, base, exclude, support_qs, cfg, ids)
        prefilter(draft, round_, library, held_qs, probe, base, evaluator, cfg, rec)
        out.attempts.append(rec)
        if on_candidate is not None:
            on_candidate(draft, rec)
        history.append(
            AttemptFeedback(
                attempt,
                draft.id,
                rec.measurement,
                rec.outcome,
                len(rec.repairs),
                len(rec.harms),
                f"repair rate {rec.repair_rate:.2f} on {rec.n_held_out}; harms {len(rec.harms)} of {rec.n_probe}"
                + (f"; repaired after: {'; '.join(rec.violations)}" if rec.violations else ""),
            )
        )
        if rec.passed and (best is None or _score(rec) > _score(best[1])):
            best = (draft, rec)
        if rec.passed and rec.repair_rate >= cfg.prefilter_early_stop:
            out.stopped = f"early stop at repair rate {rec.repair_rate:.2f}"
            break
        zero_streak = zero_streak + 1 if not rec.repairs else 0
        if zero_streak >= cfg.replan_after_zero_repair and attempt < cfg.max_synthesis_attempts:
            feedback = [f"measurement {h.measurement} gave {h.outcome}" for h in history]
            new_cards = []
            for c in group.cards:
                try:
                    nc = planner.plan(dossiers[c.bucket_id], feedback)
                except Exception:  # keep the old card when replanning fails
                    nc = None
                new_cards.append(nc or c)
            group = replace(group, cards=tuple(new_cards), contract=new_cards[0].contract)
            out.replans += 1
            zero_streak = 0
    if best is not None:
        out.survivor = best[0]
    if not out.stopped:
        out.stopped = "attempts exhausted" if best is None else "best passing attempt kept"
    return out


def _probe(
    draft: Tool,
    train: Mapping[str, Question],
    base: Mapping[str, AnswerRecord],
    exclude: set[str],
    support: Sequence[Question],
    cfg: ProtocolConfig,
    ids: ViewIds,
) -> list[Question]:
    sup = {q.id for q in support}
    pool = [
        q
        for q in train.values()
        if q.id not in exclude
        and q.id not in sup
        and base[q.id].correct
        and scope_matches(draft.scope, q)
    ]
    pool.sort(key=lambda q: _h(cfg.seed, ids.key(q.id)))
    return pool[: cfg.prefilter_harm_probe]

"""Synthesis and the prefilter: up to ``max_synthesis_attempts`` sequential attempts per work group.

Each attempt's draft goes through the mechanical checks of :mod:`tsevo.evolve.checks` before it is
ever scored (the sandbox's AST gate, a smoke call, context selection on the bucket's support rows,
calibration on request, fitted on train rows only).

Retry policy. Before every attempt the contract's input signature is checked against the group's
held-out errors and, when none of them can deliver it, adapted to what they carry (recorded in
:attr:`GroupOutcome.adaptations`). A violation gets one targeted repair from the synthesizer. A
draft that passes is prefiltered: the candidate library (current chain plus this one artifact)
answers the bucket's held-out errors (at most ``prefilter_errors``, members of a merged group
interleaved) and a harm probe of in-scope train questions the current library gets right. It
survives with at least ``prefilter_min_repairs`` *attributable* repairs (fixed, with the draft
bound, executed and responsible for the replacement in the trace; asked only where at least
``support.min_held_out`` of its held-out errors lie inside its contract, a composite's being those of
kinds it has a branch for, since one or two missed errors, or errors of kinds it does not serve, say
nothing of a tool that serves many question kinds), harm within
``max(prefilter_harm_cap_abs, prefilter_harm_cap_frac * probe)`` and execution errors within
``prefilter_exec_error_cap``. A repair rate of at least ``prefilter_early_stop`` stops the search;
otherwise the best passing attempt goes on. Consecutive zero-repair outcomes (an attempt rejected
by the checks is one) trigger a replan after ``replan_after_zero_repair`` of them. The strongest
attempt so far is kept apart, so a weaker retry never displaces it, and the synthesizer is shown
it apart from the other attempts (with its source), next to the current library (a synthesizer
with ``for_library`` is bound to it). Retire cards need no synthesis: their tombstone is built
from the card.

Ablations (``cfg.ablation``): without calibration a requested tree is refused (the synthesizer
repairs the draft into an uncalibrated reading) and no group contract asks for one; without scopes
every draft is given the empty scope (it applies everywhere) before its checks.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from tsevo.agent import AnswerRecord
from tsevo.data import Question
from tsevo.library.library import Library, Stage, scope_matches
from tsevo.library.tool import Provenance, Scope, Tool
from tsevo.marachain import Bar, ChainLedger
from tsevo.marachain.moves import held_in_contract
from tsevo.roles.protocols import (
    AttemptFeedback,
    Dossier,
    Example,
    LocalPlanner,
    Synthesizer,
    WorkGroup,
)

from .chain import run_chain
from .chain_llm import LLMProposer
from .chain_types import BuiltinProposer, ChainInputs
from .checks import calibrate, check_draft, deliverable_signature, smoke_inputs
from .config import ProtocolConfig
from .evaluate import Evaluator
from .outcome import AttemptRecord, GroupOutcome
from .views import ViewIds

__all__ = ["AttemptRecord", "GroupOutcome", "check_draft", "run_group", "smoke_inputs"]


def _h(seed: int, qid: str) -> str:
    return hashlib.sha256(f"{seed}\x02{qid}".encode()).hexdigest()


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
) -> dict[str, AnswerRecord]:
    """Score one draft on held-out errors and the harm probe; fills ``rec``, returns the records."""
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
    rec.n_in_contract = held_in_contract(draft, held_out)
    err_rate = rec.exec_errors / rec.tool_runs if rec.tool_runs else 0.0
    rec.outcome = Bar.of(cfg).outcome(
        len(rec.repairs), len(rec.harms), len(held_out), len(probe), err_rate, rec.n_in_contract
    )
    rec.passed = rec.outcome == "passed"
    return recs


def _attributable(draft: Tool, before: AnswerRecord, after: AnswerRecord) -> bool:
    """Did this artifact cause the new answer?

    Tools and guidance: it is credited with the replacement. Overrides and tombstones: the earlier
    tool it targets decided the old answer and no longer fires.
    """
    if draft.kind in ("scope_override", "tombstone"):
        return draft.target in before.replaced_by and draft.target not in after.tools_ok
    return draft.id in after.replaced_by


def _score(a: AttemptRecord) -> tuple[int, int]:
    """Net repairs, then repairs: a later attempt replaces the best so far only by doing better."""
    return (len(a.repairs) - len(a.harms), len(a.repairs))


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
    ledger: ChainLedger | None = None,
    on_step_text: Callable[[str, str, str], None] | None = None,
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
    bind = getattr(synthesizer, "for_library", None)
    if callable(bind):  # a synthesizer that renders the current library sees this round's
        synthesizer = bind(library)
    group = _ablated(group, cfg)
    tries: list[tuple[AttemptRecord, Tool]] = []
    best: tuple[Tool, AttemptRecord] | None = None
    zero_streak = 0
    for attempt in range(1, cfg.max_synthesis_attempts + 1):
        group = _deliverable(group, held_qs, attempt, out)
        try:
            draft = _draft(synthesizer, group, attempt, _feedback(tries), examples)
        except Exception as exc:  # a synthesizer failure ends the group's search, not the round
            out.stopped = f"synthesizer failed: {exc}"
            break
        if draft is None:
            out.stopped = "synthesizer has no further idea"
            break
        draft = _stamp(draft, round_, group, f"a{attempt}", cfg)
        rec = AttemptRecord(attempt, draft.id, draft.contract.measurement)
        cal_rows = [
            q for q in train.values() if q.id not in exclude and scope_matches(draft.scope, q)
        ]

        def checked(d: Tool, rec: AttemptRecord = rec, rows: list[Question] = cal_rows) -> Any:
            return _checked(d, rec, support_qs, rows, sandbox, cfg, split_guard)

        draft, violations = checked(draft)
        if violations:
            rec.violations = list(violations)
            try:
                fixed = synthesizer.repair(group, draft, violations[0], examples)
            except Exception:  # a failed repair leaves the violation standing
                fixed = None
            if fixed is not None:
                fixed = _stamp(fixed, round_, group, f"a{attempt}r", cfg)
                rec.repaired = True
                rec.tool_id = fixed.id
                rec.measurement = fixed.contract.measurement
                fixed, v2 = checked(fixed)
                if not v2:
                    draft, violations = fixed, []
                else:
                    rec.violations += v2
        if violations:
            rec.outcome = "rejected_check"
            out.attempts.append(rec)
            tries.append((rec, draft))
            if on_candidate is not None:
                on_candidate(draft, rec)
        else:
            rec.checked = True
            probe = _probe(draft, train, base, exclude, support_qs, cfg, ids)
            prefilter(draft, round_, library, held_qs, probe, base, evaluator, cfg, rec)
            out.attempts.append(rec)
            tries.append((rec, draft))
            if on_candidate is not None:
                on_candidate(draft, rec)
            if rec.passed and (best is None or _score(rec) > _score(best[1])):
                best = (draft, rec)
            if rec.passed and rec.repair_rate >= cfg.prefilter_early_stop:
                out.stopped = f"early stop at repair rate {rec.repair_rate:.2f}"
                break
        zero_streak = zero_streak + 1 if not rec.repairs else 0
        if zero_streak >= cfg.replan_after_zero_repair and attempt < cfg.max_synthesis_attempts:
            group = _replan(group, planner, dossiers, _feedback(tries), out)
            zero_streak = 0
    if best is None and cfg.marachain.enabled:
        best, out.chain = _chain(
            group, round_, library, held_qs, train, base, synthesizer, examples, tries,
            support_qs, exclude, sandbox, evaluator, cfg, ids, split_guard, on_candidate,
            ledger if ledger is not None else ChainLedger(), on_step_text,
        )  # fmt: skip
        if out.chain is not None:
            out.stopped = f"{out.chain['label']}: {out.chain['stopped']}"
    if best is not None:
        out.survivor = best[0]
    if not out.stopped:
        out.stopped = "attempts exhausted" if best is None else "best passing attempt kept"
    return out


def _chain(
    group: WorkGroup,
    round_: int,
    library: Library,
    held_qs: Sequence[Question],
    train: Mapping[str, Question],
    base: Mapping[str, AnswerRecord],
    synthesizer: Synthesizer,
    examples: Sequence[Example],
    tries: Sequence[tuple[AttemptRecord, Tool]],
    support_qs: Sequence[Question],
    exclude: set[str],
    sandbox: Any,
    evaluator: Evaluator,
    cfg: ProtocolConfig,
    ids: ViewIds,
    split_guard: Callable[[str], str] | None,
    on_candidate: Callable[[Tool, AttemptRecord], None] | None,
    ledger: ChainLedger,
    on_step_text: Callable[[str, str, str], None] | None = None,
) -> tuple[tuple[Tool, AttemptRecord] | None, dict[str, Any] | None]:
    """The Mara chain of a group whose direct attempts all missed the bar.

    The step is the LLM's (two calls) when the synthesizer offers ``chain_stepper()``, else the
    builtin delta-guided search.
    """

    def check(d: Tool, rec: AttemptRecord) -> tuple[Tool, list[str]]:
        rows = [q for q in train.values() if q.id not in exclude and scope_matches(d.scope, q)]
        return _checked(d, rec, support_qs, rows, sandbox, cfg, split_guard)

    def score(
        d: Tool, probe: Sequence[Question], ev: Any, rec: AttemptRecord
    ) -> dict[str, AnswerRecord]:
        return prefilter(d, round_, library, held_qs, probe, base, ev, cfg, rec)

    inputs = ChainInputs(
        group=group,
        round_=round_,
        library=library,
        held_qs=held_qs,
        base=base,
        train=train,
        synthesizer=synthesizer,
        examples=examples,
        tries=tries,
        probe_of=lambda d: _probe(d, train, base, exclude, support_qs, cfg, ids),
        stamp=lambda d, suffix: _stamp(d, round_, group, suffix, cfg),
        check=check,
        score=score,
        new_record=lambda nid, measurement: AttemptRecord(0, nid, measurement),
        evaluator=evaluator,
        cfg=cfg,
        ledger=ledger,
        on_candidate=on_candidate,
        on_step_text=on_step_text,
        label=ids.opaque,
        real=ids.real,
    )
    stepper = getattr(synthesizer, "chain_stepper", None)
    if callable(stepper):  # an LLM synthesizer refines along an LLM chain
        return run_chain(inputs, LLMProposer(inputs, stepper()))
    return run_chain(inputs, BuiltinProposer(inputs))


def _ablated(group: WorkGroup, cfg: ProtocolConfig) -> WorkGroup:
    """The group as an ablated protocol synthesizes it: no calibration request, no scope."""
    if not cfg.ablation.calibration and group.contract.calibration is not None:
        group = replace(group, contract=replace(group.contract, calibration=None))
    if not cfg.ablation.scope:
        group = replace(group, scope=Scope())
    return group


def _deliverable(
    group: WorkGroup, held: Sequence[Question], attempt: int, out: GroupOutcome
) -> WorkGroup:
    """Adapt the group's signature when none of its held-out errors can deliver it."""
    sig = group.contract.signature
    adapted = deliverable_signature(sig, held)
    if adapted is None:
        return group
    out.adaptations.append(
        {
            "attempt": attempt,
            "from": list(sig),
            "to": list(adapted),
            "reason": f"no held-out error of the group carries {list(sig)}",
        }
    )
    return replace(group, contract=replace(group.contract, signature=adapted))


def _draft(
    synthesizer: Synthesizer,
    group: WorkGroup,
    attempt: int,
    history: Sequence[AttemptFeedback],
    examples: Sequence[Example],
) -> Tool | None:
    """The attempt's draft; a retire card's tombstone is built from the card (nothing to write)."""
    card = group.cards[0] if group.cards else None
    if card is not None and card.artifact_kind == "tombstone" and card.target_tool:
        if history:
            return None
        return Tool(
            id=f"draft.{group.id}.a{attempt}",
            kind="tombstone",
            name="retire_" + card.target_tool.replace(".", "_")[:40],
            description=f"retires {card.target_tool}: {card.root_cause}"[:300],
            contract=group.contract,
            scope=group.scope,
            provenance=Provenance(
                bucket=",".join(group.bucket_ids),
                attempt=attempt,
                action="retire",
                target=card.target_tool,
            ),
        )
    draft: Tool | None = synthesizer.synthesize(group, attempt, history, examples)
    return draft


def _stamp(draft: Tool, round_: int, group: WorkGroup, suffix: str, cfg: ProtocolConfig) -> Tool:
    """Give a draft its candidate id and round, record its work group; drop its scope when ablated."""
    draft = replace(
        draft,
        id=f"r{round_}.{group.id}.{suffix}",
        round=round_,
        provenance=replace(draft.provenance, group=group.id),
    )
    if not cfg.ablation.scope and draft.kind == "tool":
        draft = replace(draft, scope=Scope())
    return draft


def _checked(
    draft: Tool,
    rec: AttemptRecord,
    support: Sequence[Question],
    cal_rows: Sequence[Question],
    sandbox: Any,
    cfg: ProtocolConfig,
    split_guard: Callable[[str], str] | None,
) -> tuple[Tool, list[str]]:
    """Run the checks and, on request, calibration; returns the (calibrated) draft and violations."""
    violations = check_draft(draft, sandbox, support)
    if violations or draft.contract.calibration is None:
        return draft, violations
    if not cfg.ablation.calibration:
        rec.calibration = {"accepted": False, "reason": "no calibration trees (w/o cali. ablation)"}
        return draft, ["calibration refused: no calibration trees in this run (w/o cali.)"]
    tool, record, why = calibrate(draft, cal_rows, sandbox, cfg, split_guard)
    rec.calibration = record
    return (draft, [why]) if tool is None else (tool, [])


def _feedback(tries: Sequence[tuple[AttemptRecord, Tool]]) -> list[AttemptFeedback]:
    """What the synthesizer learns of earlier attempts; the strongest one is marked and kept apart."""
    strongest = max(
        (t for t in tries if t[0].checked),
        key=lambda t: (t[0].passed, *_score(t[0]), -t[0].attempt),
        default=None,
    )
    out = []
    for rec, draft in tries:
        top = strongest is not None and rec is strongest[0]
        if rec.checked:
            detail = (
                f"repair rate {rec.repair_rate:.2f} on {rec.n_held_out}; harms {len(rec.harms)} of "
                f"{rec.n_probe}"
            ) + (f"; repaired after: {'; '.join(rec.violations)}" if rec.violations else "")
            tool_id = draft.id
        else:
            detail, tool_id = "; ".join(rec.violations), rec.tool_id
        out.append(
            AttemptFeedback(
                rec.attempt,
                tool_id,
                rec.measurement,
                rec.outcome,
                len(rec.repairs),
                len(rec.harms),
                detail,
                strongest=top,
                source=draft.source if top else "",
            )
        )
    return out


def _replan(
    group: WorkGroup,
    planner: LocalPlanner,
    dossiers: Mapping[str, Dossier],
    history: Sequence[AttemptFeedback],
    out: GroupOutcome,
) -> WorkGroup:
    """Replan every card of the group after consecutive zero-repair attempts (old card kept on failure)."""
    feedback = [f"measurement {h.measurement} gave {h.outcome}" for h in history]
    new_cards = []
    for c in group.cards:
        try:
            nc = planner.plan(dossiers[c.bucket_id], feedback)
        except Exception:  # keep the old card when replanning fails
            nc = None
        new_cards.append(nc or c)
    out.replans += 1
    return replace(group, cards=tuple(new_cards), contract=new_cards[0].contract)


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

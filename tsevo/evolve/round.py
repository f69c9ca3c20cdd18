"""One evolution round and multi-round runs, persisted step by step in the run store.

Round ``r`` (DESIGN.md §2): base pass on train → failure partition and clustering → local planning per
bucket → global coordination → synthesis with checks, calibration and the prefilter → whole-library
gate on val → one-shot prune on a failed gate → scope reconciliation and the same gate once more →
chain write. The report-only test step runs after the round, through a separate evaluator; the round
itself is handed only the train and val splits and its evaluator refuses test questions.

Every step writes its artifacts under ``rounds/r<r>/`` and a ``step_done`` event; evaluations are
stored per arm as they are produced. Rerunning the same command resumes: finished rounds are read
back, a round in progress recomputes only what it had not stored (deterministically), and no stored
evaluation is spent again.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tsevo.agent import AnswerRecord
from tsevo.library.library import Library, Stage
from tsevo.roles.protocols import (
    Answerer,
    GlobalPlanner,
    LocalPlanner,
    Reviewer,
    Synthesizer,
    Triage,
)

from .cluster import ClusteringError, cluster_errors, error_item
from .evaluate import Evaluator, outcomes
from .gate import GateDecision, decide_gate, paired_counts, paired_flips
from .plan import build_dossier, coordinate, local_plans, split_bucket
from .prune import Attribution, PruneRecord, accept_pruned, attribute, plan_prune
from .reconcile import reconcile_scopes
from .synthesize import AttemptRecord, GroupOutcome, run_group

if TYPE_CHECKING:
    from tsevo.data import Question, Suite
    from tsevo.library.tool import Tool
    from tsevo.store import RunStore

    from .config import ProtocolConfig

__all__ = ["RoleSet", "RoundResult", "run_round"]


@dataclass
class RoleSet:
    """The roles a round uses (all builtin by default)."""

    answerer: Answerer
    reviewer: Reviewer
    triage: Triage
    local_planner: LocalPlanner
    global_planner: GlobalPlanner
    synthesizer: Synthesizer
    workers: int = 1
    """Questions answered concurrently by the agent (>1 for network-bound answering roles)."""

    @classmethod
    def builtin(cls) -> RoleSet:
        """The embedded default: deterministic, offline builtin roles."""
        from tsevo.roles.builtin import (
            ClusterTriage,
            GlobalSummaryAnswerer,
            MeasurementPlanner,
            MergeCoordinator,
            RuleReviewer,
            TemplateSynthesizer,
        )

        return cls(
            GlobalSummaryAnswerer(),
            RuleReviewer(),
            ClusterTriage(),
            MeasurementPlanner(),
            MergeCoordinator(),
            TemplateSynthesizer(),
        )

    def names(self) -> dict[str, str]:
        """Role names (for the manifest)."""
        return {
            k: getattr(v, "name", type(v).__name__)
            for k, v in self.__dict__.items()
            if k != "workers"
        }


@dataclass
class RoundResult:
    """The outcome of one round.

    Attributes:
        round: Round number.
        status: ``accepted`` | ``rejected`` | ``invalid``.
        reason: One line.
        library: The library after the round (unchanged unless accepted).
        gate: The first gate decision (``None`` when the round stopped earlier).
        final_gate: The gate decision that admitted the library (after prune / reconcile).
        prune: The prune record, if a prune ran.
        deployed: Ids of the artifacts the round appended.
        candidate: The best candidate library (for the diagnostic test run of a rejected round).
        funnel: Counts through the stages.
        timings: Seconds per step.
    """

    round: int
    status: str
    reason: str
    library: Library
    gate: GateDecision | None = None
    final_gate: GateDecision | None = None
    prune: PruneRecord | None = None
    deployed: tuple[str, ...] = ()
    candidate: Library | None = None
    funnel: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    arms: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly summary (``round.json``)."""
        return {
            "round": self.round,
            "status": self.status,
            "reason": self.reason,
            "gate": self.gate.to_dict() if self.gate else None,
            "final_gate": self.final_gate.to_dict() if self.final_gate else None,
            "pruned": self.prune.to_dict() if self.prune else None,
            "deployed": list(self.deployed),
            "library_fingerprint": self.library.fingerprint(),
            "funnel": self.funnel,
            "arms": self.arms,
        }


class _Steps:
    def __init__(self, store: RunStore | None, r: int) -> None:
        self.store = store
        self.r = r
        self.t: dict[str, float] = {}

    def rel(self, name: str) -> str:
        return f"rounds/r{self.r}/{name}"

    def done(self, step: str) -> bool:
        return self.store is not None and self.store.step_done(self.r, step) is not None

    def mark(self, step: str, t0: float, **kw: Any) -> None:
        self.t[step] = round(time.perf_counter() - t0, 3)
        if self.store is not None:
            self.store.mark_done(self.r, step, **kw)

    def json(self, name: str, obj: Any) -> None:
        if self.store is not None:
            self.store.write_json(self.rel(name), obj)

    def read(self, name: str) -> Any:
        assert self.store is not None
        return self.store.read_json(self.rel(name))


def records_frame(records: Mapping[str, AnswerRecord]) -> Any:
    """A parquet-ready frame of answer records (no timings: tables are compared byte for byte)."""
    import pandas as pd

    return pd.DataFrame([records[k].to_row(timings=False) for k in sorted(records)])


def _paired_frame(base: Mapping[str, AnswerRecord], cand: Mapping[str, AnswerRecord]) -> Any:
    import pandas as pd

    flips = paired_flips(outcomes(base), outcomes(cand))
    rows = []
    for qid in sorted(base):
        b, c = base[qid], cand[qid]
        rows.append(
            {
                "qid": qid,
                "task": b.task,
                "base_answer": b.final_answer,
                "cand_answer": c.final_answer,
                "base_correct": b.correct,
                "cand_correct": c.correct,
                "flip": flips.get(qid),
                "tools_ok": list(c.tools_ok),
                "replaced_by": list(c.replaced_by),
                "tool_errors": c.tool_errors,
            }
        )
    return pd.DataFrame(rows)


def _gate(
    base: Mapping[str, AnswerRecord], cand: Mapping[str, AnswerRecord], cfg: ProtocolConfig
) -> GateDecision:
    return decide_gate(paired_counts(outcomes(base), outcomes(cand)), config=cfg, rounds=cfg.rounds)


def run_round(
    r: int,
    library: Library,
    train: Suite,
    val: Suite,
    *,
    roles: RoleSet,
    cfg: ProtocolConfig,
    evaluator: Evaluator,
    sandbox: Any,
    store: RunStore | None = None,
    log: Callable[[str], None] = lambda s: None,
    plan_workers: int | None = None,
) -> RoundResult:
    """Run round ``r`` on train and val only. Returns the round's result (library changed iff accepted)."""
    steps = _Steps(store, r)
    if steps.done("round"):
        return _read_round(steps, library)
    if plan_workers is None:
        plan_workers = min(4, os.cpu_count() or 1)
    # each round draws its own samples (define sample, bucket splits, probes): a round that follows
    # a rejected one sees the same errors, and must not replay the same draw
    cfg = cfg.replace(seed=cfg.seed + 1000 * (r - 1))
    tq: dict[str, Question] = {q.id: q for q in train}
    funnel: dict[str, Any] = {}

    # 1. base pass ------------------------------------------------------------------------------
    t0 = time.perf_counter()
    base = evaluator.answer("train", library, list(train))
    arms = {"train_base": evaluator.arm_name("train", library)}

    def done(res: RoundResult) -> RoundResult:
        res.arms = dict(arms)
        return _finish(steps, res)

    if store is not None and not steps.done("base_pass"):
        store.write_parquet(steps.rel("base_pass.parquet"), records_frame(base))
    errors = [q.id for q in train if base[q.id].completed and base[q.id].correct is False]
    funnel["train_questions"] = len(train)
    funnel["train_accuracy"] = round(
        sum(bool(x.correct) for x in base.values()) / max(len(base), 1), 6
    )
    funnel["errors"] = len(errors)
    funnel["errors_tool_fired"] = sum(base[q].tool_fired for q in errors)
    steps.mark("base_pass", t0, errors=len(errors))
    log(
        f"round {r}: base pass {funnel['train_accuracy']:.3f} on {len(train)} train questions, {len(errors)} errors"
    )

    # 2. clustering -------------------------------------------------------------------------------
    t0 = time.perf_counter()
    try:
        clustering = cluster_errors([error_item(tq[q], base[q]) for q in errors], roles.triage, cfg)
    except ClusteringError as exc:
        steps.json("clustering_error.json", {"error": str(exc)})
        return done(RoundResult(r, "invalid", f"clustering failed: {exc}", library, funnel=funnel))
    steps.json("buckets.json", clustering.to_dict())
    steps.mark("cluster", t0, buckets=len(clustering.buckets))
    funnel["buckets"] = len(clustering.buckets)
    funnel["unassigned"] = len(clustering.unassigned)
    funnel["dropped_small"] = len(clustering.dropped_small)
    log(
        f"round {r}: {len(clustering.buckets)} buckets ({len(clustering.unassigned)} unassigned, {len(clustering.dropped_small)} in tiny buckets)"
    )

    # 3. planning ---------------------------------------------------------------------------------
    t0 = time.perf_counter()
    splits = {b.id: split_bucket(b, cfg) for b in clustering.buckets}
    exclude = {q for s in splits.values() for q in s.held_out}
    catalog = library.scope_catalog()
    tool_ids = [t.id for t in library.all_artifacts()]
    dossiers = {
        b.id: build_dossier(
            b,
            splits[b.id],
            tq,
            base,
            cfg,
            exclude=exclude,
            catalog=catalog,
            library_tools=tool_ids,
            library=library,
        )
        for b in clustering.buckets
    }
    prepare = getattr(roles.local_planner, "prepare", None)
    if callable(prepare):
        prepare(list(dossiers.values()), workers=plan_workers)
    cards, skipped = local_plans(list(dossiers.values()), roles.local_planner, workers=plan_workers)
    support_texts = {b: [e.question.question for e in d.support] for b, d in dossiers.items()}
    groups, coord_log = coordinate(cards, roles.global_planner, cfg, support_texts)
    steps.json("splits.json", [splits[b].to_dict() for b in sorted(splits)])
    steps.json("contracts.json", {"cards": [c.to_dict() for c in cards], "skipped": skipped})
    steps.json("groups.json", {"groups": [g.to_dict() for g in groups], "coordination": coord_log})
    steps.mark("plan", t0, cards=len(cards), groups=len(groups))
    funnel["contracts"] = len(cards)
    funnel["groups"] = len(groups)
    log(f"round {r}: {len(cards)} contracts in {len(groups)} work groups")

    # 4-5. synthesis and prefilter ----------------------------------------------------------------
    t0 = time.perf_counter()
    outcomes_by_group: list[GroupOutcome] = []
    held = {b: s.held_out for b, s in splits.items()}
    guard = _train_guard(train)

    def save_candidate(tool: Tool, rec: AttemptRecord) -> None:
        if store is None:
            return
        d = f"rounds/r{r}/candidates/{tool.id}"
        if tool.source:
            store.write_text(f"{d}/tool.py", tool.source)
        store.write_json(f"{d}/meta.json", {"tool": tool.meta_dict(), "attempt": rec.to_dict()})

    for g in groups:
        outcomes_by_group.append(
            run_group(
                g,
                r,
                library,
                dossiers=dossiers,
                held_out=held,
                train=tq,
                base=base,
                synthesizer=roles.synthesizer,
                planner=roles.local_planner,
                sandbox=sandbox,
                evaluator=evaluator,
                cfg=cfg,
                exclude=exclude,
                split_guard=guard,
                on_candidate=save_candidate,
            )
        )
    survivors = [o.survivor for o in outcomes_by_group if o.survivor is not None]
    steps.json("synthesis.json", [o.to_dict() for o in outcomes_by_group])
    if store is not None:
        store.write_parquet(steps.rel("prefilter.parquet"), _prefilter_frame(outcomes_by_group))
    steps.mark("synthesize", t0, survivors=len(survivors))
    funnel["attempts"] = sum(len(o.attempts) for o in outcomes_by_group)
    funnel["checked"] = sum(a.checked for o in outcomes_by_group for a in o.attempts)
    funnel["prefilter_passed"] = sum(a.passed for o in outcomes_by_group for a in o.attempts)
    funnel["survivors"] = len(survivors)
    log(
        f"round {r}: {funnel['attempts']} attempts, {len(survivors)} candidates survive the prefilter"
    )
    if not survivors:
        return done(
            RoundResult(
                r, "rejected", "no candidate survived the prefilter", library, funnel=funnel
            ),
        )

    # 6. gate -------------------------------------------------------------------------------------
    t0 = time.perf_counter()
    candidate = library.append_stage(Stage(r, tuple(survivors), f"round {r}"))
    val_qs = list(val)
    base_val = evaluator.answer("val", library, val_qs)
    cand_val = evaluator.answer("val", candidate, val_qs)
    gate = _gate(base_val, cand_val, cfg)
    arms["val_base"] = evaluator.arm_name("val", library)
    arms["val_candidate"] = evaluator.arm_name("val", candidate)
    steps.json("gate.json", gate.to_dict())
    if store is not None:
        store.write_parquet(steps.rel("val_paired.parquet"), _paired_frame(base_val, cand_val))
    steps.mark("gate", t0, path=gate.path)
    funnel["gate_path"] = gate.path
    log(
        f"round {r}: gate {gate.path} (h={gate.h}, m={gate.m}, n={gate.n}, delta={gate.delta:+.4f}, lb={gate.delta_lb})"
    )
    if gate.invalid:
        return done(
            RoundResult(
                r,
                "invalid",
                "measurement invalid: " + gate.reasons[0],
                library,
                gate,
                candidate=candidate,
                funnel=funnel,
            ),
        )

    accepted_lib, accepted_val, decision, prune_rec = candidate, cand_val, gate, None
    # 7. one-shot prune -----------------------------------------------------------------------------
    if not gate.passed:
        t0 = time.perf_counter()
        attr = attribute(
            outcomes(base_val),
            outcomes(cand_val),
            _attributions(survivors, base_val, cand_val),
            updates=[t.id for t in survivors],
        )
        plan = plan_prune(attr.by_update, _dependents(survivors), cfg, already_pruned=False)
        retest: GateDecision | None = None
        pruned_lib = None
        if not plan.empty and not plan.removes_all:
            pruned_lib = candidate.without(plan.removed)
            pruned_val = evaluator.answer("val", pruned_lib, val_qs)
            retest = _gate(base_val, pruned_val, cfg)
        prune_rec = PruneRecord.build(gate, attr, plan, retest)
        steps.json("prune.json", prune_rec.to_dict())
        steps.mark("prune", t0, accepted=prune_rec.accepted)
        funnel["pruned"] = len(plan.removed)
        if pruned_lib is not None and retest is not None and accept_pruned(gate, retest):
            accepted_lib, accepted_val, decision = (
                pruned_lib,
                evaluator.answer("val", pruned_lib, val_qs),
                retest,
            )
            log(f"round {r}: prune removed {list(plan.removed)}; retest {retest.path}")
        else:
            log(f"round {r}: rejected ({prune_rec.outcome})")
            return done(
                RoundResult(
                    r,
                    "rejected",
                    prune_rec.outcome,
                    library,
                    gate,
                    prune=prune_rec,
                    candidate=candidate,
                    funnel=funnel,
                ),
            )

    # 8. reconcile, final gate, chain write ------------------------------------------------------
    t0 = time.perf_counter()
    reconciled, edits = reconcile_scopes(accepted_lib, base_val, accepted_val)
    final = decision
    if edits:
        rec_val = evaluator.answer("val", reconciled, val_qs)
        final_try = _gate(base_val, rec_val, cfg)
        if final_try.passed:
            accepted_lib, final = reconciled, final_try
        else:
            edits = [{**e, "discarded": True} for e in edits]
    else:
        final = _gate(base_val, accepted_val, cfg)
    steps.json("reconcile.json", {"edits": edits, "final_gate": final.to_dict()})
    steps.mark("reconcile", t0, edits=len(edits))
    deployed = tuple(t.id for t in accepted_lib.stages[-1].tools)
    funnel["deployed"] = len(deployed)
    funnel["deployed_kinds"] = sorted({t.kind for t in accepted_lib.stages[-1].tools})
    res = RoundResult(
        r,
        "accepted",
        f"admitted by the {final.path} path",
        accepted_lib,
        gate,
        final,
        prune_rec,
        deployed,
        candidate,
        funnel,
    )
    if store is not None:
        accepted_lib.save(store.path(f"rounds/r{r}/library"))
    log(f"round {r}: accepted {len(deployed)} artifact(s) via {final.path}")
    return done(res)


def _attributions(
    survivors: Sequence[Tool], base: Mapping[str, AnswerRecord], cand: Mapping[str, AnswerRecord]
) -> list[Attribution]:
    """Which of this round's updates were responsible for each candidate answer.

    Tools and usage guidance: credited when they drove a replacement (the trace's ``replaced_by``).
    Scope overrides and tombstones: credited when the earlier tool they target decided the current
    library's answer and no longer fires (they help or harm by preventing a fire).
    """
    new_ids = {t.id for t in survivors}
    overrides = [t for t in survivors if t.kind in ("scope_override", "tombstone")]
    out = []
    for q, rec in cand.items():
        resp = set(rec.replaced_by) & new_ids
        b = base.get(q)
        if b is not None:
            for t in overrides:
                if t.target in b.replaced_by and t.target not in rec.tools_ok:
                    resp.add(t.id)
        if resp:
            out.append(Attribution(q, tuple(sorted(resp))))
    return out


def _dependents(tools: Sequence[Tool]) -> dict[str, set[str]]:
    deps: dict[str, set[str]] = {t.id: set() for t in tools}
    for t in tools:
        if t.target in deps:
            deps[t.target].add(t.id)
    by_measure: dict[str, list[str]] = {}
    for t in tools:
        by_measure.setdefault(t.contract.measurement, []).append(t.id)
    for ids in by_measure.values():
        for i in ids:
            deps[i] |= {j for j in ids if j != i}
    return deps


def _train_guard(train: Suite) -> Callable[[str], str]:
    ids = {q.id for q in train}

    def guard(qid: str) -> str:
        return "train" if qid in ids else "not-train"

    return guard


def _prefilter_frame(outs: Sequence[GroupOutcome]) -> Any:
    import pandas as pd

    rows = []
    for o in outs:
        for a in o.attempts:
            rows.append(
                {
                    "group": o.group_id,
                    "attempt": a.attempt,
                    "tool_id": a.tool_id,
                    "measurement": a.measurement,
                    "checked": a.checked,
                    "violations": "; ".join(a.violations),
                    "n_held_out": a.n_held_out,
                    "n_probe": a.n_probe,
                    "repairs": len(a.repairs),
                    "harms": len(a.harms),
                    "repair_rate": round(a.repair_rate, 6),
                    "exec_errors": a.exec_errors,
                    "tool_runs": a.tool_runs,
                    "outcome": a.outcome,
                    "passed": a.passed,
                    "survivor": o.survivor is not None and o.survivor.id == a.tool_id,
                }
            )
    return pd.DataFrame(rows)


def _finish(steps: _Steps, res: RoundResult) -> RoundResult:
    res.timings = dict(steps.t)
    if steps.store is not None:
        steps.json("round.json", res.to_dict())
        if res.candidate is not None and res.status != "accepted":
            res.candidate.save(steps.store.path(f"rounds/r{steps.r}/candidate_library"))
        steps.store.write_json(f"rounds/r{steps.r}/timings.json", res.timings)
        steps.store.mark_done(steps.r, "round", status=res.status)
    return res


def _read_round(steps: _Steps, library: Library) -> RoundResult:
    d = steps.read("round.json")
    store = steps.store
    assert store is not None
    lib = library
    if d["status"] == "accepted":
        lib = Library.load(store.path(f"rounds/r{steps.r}/library"))
    cand = None
    if store.exists(f"rounds/r{steps.r}/candidate_library"):
        cand = Library.load(store.path(f"rounds/r{steps.r}/candidate_library"))
    elif d["status"] == "accepted":
        cand = lib
    timings = (
        store.read_json(f"rounds/r{steps.r}/timings.json")
        if store.exists(f"rounds/r{steps.r}/timings.json")
        else {}
    )
    return RoundResult(
        d["round"],
        d["status"],
        d["reason"],
        lib,
        GateDecision.from_dict(d["gate"]) if d.get("gate") else None,
        GateDecision.from_dict(d["final_gate"]) if d.get("final_gate") else None,
        PruneRecord.from_dict(d["pruned"]) if d.get("pruned") else None,
        tuple(d.get("deployed", ())),
        cand,
        dict(d.get("funnel", {})),
        timings,
        dict(d.get("arms", {})),
    )

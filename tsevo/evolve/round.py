"""One evolution round as the method reads (DESIGN.md §2): a list of steps.

1. :func:`base_pass` — the current chain answers train; errors are the completed, wrong answers.
2. :func:`cluster` — errors split into ``tool_fired`` / ``no_tool`` and clustered (define, assign).
3. :func:`plan` — bucket splits, dossiers, a local plan per bucket, global coordination.
4-5. :func:`synthesize` — per work group: attempts with checks, calibration and the prefilter.
6. :func:`gate` — current and candidate libraries answer val in one paired run.
7. :func:`prune` — on a failed gate, the one-shot attribution prune and its retest.
8. :func:`reconcile` — scopes reconciled with how tools behaved, the same gate once more, the chain
   write.

Ablations (``cfg.ablation``): without the gate, step 6 deploys the candidate whatever it measured
(steps 7-8 do not run); without scopes, step 8 reconciles nothing; the other switches act inside
synthesis and the agent.

The round is handed only the train and val splits, and its evaluator refuses test questions; the
report-only test step runs after the round (:mod:`tsevo.evolve.run`). Every step writes its
artifacts in its round folder (:class:`~tsevo.store.RoundPaths`) through the context; the step runner
(:mod:`tsevo.evolve.steps`) persists and resumes them.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd

from tsevo.data import Suite
from tsevo.library.library import Library, Stage
from tsevo.library.tool import Tool
from tsevo.marachain import ChainLedger, Spend
from tsevo.roles import ContractCard, RoleSet, WorkGroup

from .cluster import ClusteringError, ClusteringResult, cluster_errors, coded_triage, error_item
from .config import ProtocolConfig
from .evaluate import Evaluator, gate_between, outcomes, paired_frame, records_frame
from .gate import GateDecision
from .plan import (
    BucketSplit,
    build_dossier,
    coded_dossiers,
    coded_groups,
    coordinate,
    local_plans,
    split_buckets,
)
from .prune import (
    PruneRecord,
    accept_pruned,
    attribute,
    dependents,
    plan_prune,
    update_attributions,
)
from .reconcile import narrow_branches, reconcile_scopes
from .result import RoundResult
from .steps import RoundContext, Step, StepResult, run_steps
from .synthesize import AttemptRecord, GroupOutcome, run_group
from .views import ViewIds

__all__ = ["ROUND_STEPS", "run_round"]


# 1. base pass ------------------------------------------------------------------------------------
def base_pass(ctx: RoundContext) -> StepResult:
    """The current chain answers the whole train split (stored records are reused)."""
    base = ctx.evaluator.answer("train", ctx.library, list(ctx.train))
    ctx.base = base
    ctx.arms["train_base"] = ctx.evaluator.arm_name("train", ctx.library)
    if ctx.paths is not None and not ctx.paths.base_pass.exists():
        ctx.write_parquet("base_pass", records_frame(base))
    ctx.errors = [q.id for q in ctx.train if base[q.id].completed and base[q.id].correct is False]
    f = ctx.funnel
    f.train_questions = len(ctx.train)
    f.train_accuracy = round(sum(bool(x.correct) for x in base.values()) / max(len(base), 1), 6)
    f.errors = len(ctx.errors)
    f.errors_tool_fired = sum(base[q].tool_fired for q in ctx.errors)
    ctx.log(
        f"round {ctx.r}: base pass {f.train_accuracy:.3f} on {len(ctx.train)} train questions, "
        f"{len(ctx.errors)} errors"
    )
    return StepResult({"errors": len(ctx.errors)})


# 2. clustering -----------------------------------------------------------------------------------
def cluster(ctx: RoundContext) -> StepResult:
    """Cluster the errors; a failed define, assign or re-split invalidates the round (a rollback)."""
    items = [error_item(ctx.tq[q], ctx.base[q]) for q in ctx.errors]
    triage, coded = coded_triage(ctx.roles.triage, ctx.cfg, ctx.tq, ctx.base, ctx.errors, ctx.ids)
    try:
        clustering = cluster_errors(items, triage, ctx.cfg, ids=ctx.ids)
    except ClusteringError as exc:
        ctx.write_json("clustering_error", {"error": str(exc)})
        return StepResult(stop=ctx.result("invalid", f"clustering failed: {exc}"))
    ctx.write_json("buckets", {**clustering.to_dict(), **coded})
    return _clustered(ctx, clustering)


def _restore_cluster(ctx: RoundContext) -> StepResult:
    assert ctx.store is not None and ctx.paths is not None
    return _clustered(ctx, ClusteringResult.from_dict(ctx.store.read_json(ctx.paths.buckets)))


def _clustered(ctx: RoundContext, clustering: ClusteringResult) -> StepResult:
    ctx.clustering = clustering
    ctx.funnel.buckets = len(clustering.buckets)
    ctx.funnel.unassigned = len(clustering.unassigned)
    ctx.funnel.dropped_small = len(clustering.dropped_small)
    ctx.log(
        f"round {ctx.r}: {len(clustering.buckets)} buckets ({len(clustering.unassigned)} "
        f"unassigned, {len(clustering.dropped_small)} in tiny buckets)"
    )
    return StepResult({"buckets": len(clustering.buckets)})


# 3. planning -------------------------------------------------------------------------------------
def plan(ctx: RoundContext) -> StepResult:
    """Split each bucket, build dossiers, plan every bucket, coordinate the plans."""
    assert ctx.clustering is not None
    buckets = ctx.clustering.buckets
    ctx.splits = split_buckets(buckets, ctx.cfg, ctx.ids, ctx.roles.local_planner, ctx.tq)
    _build_dossiers(ctx)
    diagnoses = coded_dossiers(ctx.dossiers, ctx.cfg, ctx.tq, ctx.base, ctx.ids)
    prepare = getattr(ctx.roles.local_planner, "prepare", None)
    if callable(prepare):
        prepare(list(ctx.dossiers.values()), workers=ctx.plan_workers)
    cards, skipped = local_plans(
        list(ctx.dossiers.values()), ctx.roles.local_planner, workers=ctx.plan_workers
    )
    support_texts = {b: [e.question.question for e in d.support] for b, d in ctx.dossiers.items()}
    groups, coord_log = coordinate(cards, ctx.roles.global_planner, ctx.cfg, support_texts)
    ctx.write_json("splits", [ctx.splits[b].to_dict() for b in sorted(ctx.splits)])
    ctx.write_json(
        "contracts", {"cards": [c.to_dict() for c in cards], "skipped": skipped, **diagnoses}
    )
    ctx.write_json("groups", {"groups": [g.to_dict() for g in groups], "coordination": coord_log})
    return _planned(ctx, cards, groups)


def _restore_plan(ctx: RoundContext) -> StepResult:
    assert ctx.store is not None and ctx.paths is not None
    p = ctx.paths
    ctx.splits = {d["bucket_id"]: BucketSplit.from_dict(d) for d in ctx.store.read_json(p.splits)}
    _build_dossiers(ctx)
    coded_dossiers(ctx.dossiers, ctx.cfg, ctx.tq, ctx.base, ctx.ids)
    cards = [ContractCard.from_dict(c) for c in ctx.store.read_json(p.contracts)["cards"]]
    groups = [WorkGroup.from_dict(g) for g in ctx.store.read_json(p.groups)["groups"]]
    return _planned(ctx, cards, groups)


def _build_dossiers(ctx: RoundContext) -> None:
    assert ctx.clustering is not None
    exclude = _held_out_ids(ctx)
    catalog = ctx.library.scope_catalog()
    tool_ids = [t.id for t in ctx.library.all_artifacts()]
    ctx.dossiers = {
        b.id: build_dossier(
            b,
            ctx.splits[b.id],
            ctx.tq,
            ctx.base,
            ctx.cfg,
            exclude=exclude,
            ids=ctx.ids,
            catalog=catalog,
            library_tools=tool_ids,
            library=ctx.library,
        )
        for b in ctx.clustering.buckets
    }


def _held_out_ids(ctx: RoundContext) -> set[str]:
    return {q for s in ctx.splits.values() for q in s.held_out}


def _planned(ctx: RoundContext, cards: list[ContractCard], groups: list[WorkGroup]) -> StepResult:
    ctx.cards, ctx.groups = cards, coded_groups(groups, ctx.dossiers, ctx.cfg)
    ctx.funnel.contracts = len(cards)
    ctx.funnel.groups = len(groups)
    ctx.log(f"round {ctx.r}: {len(cards)} contracts in {len(groups)} work groups")
    return StepResult({"cards": len(cards), "groups": len(groups)})


# 4-5. synthesis and prefilter --------------------------------------------------------------------
def synthesize(ctx: RoundContext) -> StepResult:
    """Per work group: up to the protocol's attempts, each checked, calibrated and prefiltered."""
    held = {b: s.held_out for b, s in ctx.splits.items()}
    exclude = _held_out_ids(ctx)
    train_ids = set(ctx.tq)

    def guard(qid: str) -> str:
        return "train" if qid in train_ids else "not-train"

    def save_candidate(tool: Tool, rec: AttemptRecord) -> None:
        if ctx.store is None or ctx.paths is None:
            return
        c = ctx.paths.candidate(tool.id)
        if tool.source:
            ctx.store.write_text(c.source, tool.source)
        ctx.store.write_json(c.meta, {"tool": tool.meta_dict(), "attempt": rec.to_dict()})

    def save_step_text(node_id: str, what: str, text: str) -> None:
        if ctx.store is not None and ctx.paths is not None:
            c = ctx.paths.candidate(node_id)
            ctx.store.write_text(c.context if what == "context" else c.analysis, text)

    ledger = None
    if ctx.cfg.marachain.enabled:  # one ledger for every chain of the round
        path = ctx.paths.chain_ledger if ctx.store is not None and ctx.paths is not None else None
        earlier = Spend()  # the run caps count earlier rounds' chains too
        if ctx.store is not None:
            for r in range(1, ctx.r):
                earlier = earlier + ChainLedger(ctx.store.layout.round(r).chain_ledger).total()
        ledger = ChainLedger(path, earlier_rounds=earlier)
    outs = [
        run_group(
            g,
            ctx.r,
            ctx.library,
            dossiers=ctx.dossiers,
            held_out=held,
            train=ctx.tq,
            base=ctx.base,
            synthesizer=ctx.roles.synthesizer,
            planner=ctx.roles.local_planner,
            sandbox=ctx.sandbox,
            evaluator=ctx.evaluator,
            cfg=ctx.cfg,
            exclude=exclude,
            ids=ctx.ids,
            split_guard=guard,
            on_candidate=save_candidate,
            ledger=ledger,
            on_step_text=save_step_text,
        )
        for g in ctx.groups
    ]
    ctx.write_json("synthesis", [o.to_dict() for o in outs])
    ctx.write_parquet("prefilter", prefilter_frame(outs))
    return _synthesized(ctx, outs)


def _restore_synthesize(ctx: RoundContext) -> StepResult:
    assert ctx.store is not None and ctx.paths is not None
    outs = []
    for d in ctx.store.read_json(ctx.paths.synthesis):
        survivor = None
        if d["survivor"]:
            c = ctx.paths.candidate(d["survivor"])
            meta = ctx.store.read_json(c.meta)["tool"]
            src = ctx.store.read_text(c.source) if c.source.exists() else ""
            survivor = Tool.from_dict(meta, source=src)
        outs.append(GroupOutcome.from_dict(d, survivor))
    return _synthesized(ctx, outs)


def _synthesized(ctx: RoundContext, outs: list[GroupOutcome]) -> StepResult:
    ctx.outcomes = outs
    ctx.survivors = [o.survivor for o in outs if o.survivor is not None]
    f = ctx.funnel
    f.attempts = sum(len(o.attempts) for o in outs)
    f.checked = sum(a.checked for o in outs for a in o.attempts)
    f.prefilter_passed = sum(a.passed for o in outs for a in o.attempts)
    f.survivors = len(ctx.survivors)
    ctx.log(
        f"round {ctx.r}: {f.attempts} attempts, {len(ctx.survivors)} candidates survive the prefilter"
    )
    stop = None
    if not ctx.survivors:
        stop = ctx.result("rejected", "no candidate survived the prefilter")
    return StepResult({"survivors": len(ctx.survivors)}, stop)


def prefilter_frame(outs: Sequence[GroupOutcome]) -> pd.DataFrame:
    """Every synthesis attempt with its checks and prefilter numbers (``prefilter.parquet``)."""
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
                    "n_in_contract": a.n_held_out if a.n_in_contract is None else a.n_in_contract,
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


# 6. gate -----------------------------------------------------------------------------------------
def gate(ctx: RoundContext) -> StepResult:
    """Current and candidate libraries answer val in one paired run; the gate decides."""
    ev, val_qs = ctx.evaluator, list(ctx.val)
    ctx.candidate = ctx.library.append_stage(Stage(ctx.r, tuple(ctx.survivors), f"round {ctx.r}"))
    ctx.base_val = ev.answer("val", ctx.library, val_qs)
    ctx.cand_val = ev.answer("val", ctx.candidate, val_qs)
    g = ctx.gate = gate_between(ctx.base_val, ctx.cand_val, ctx.cfg)
    ctx.arms["val_base"] = ev.arm_name("val", ctx.library)
    ctx.arms["val_candidate"] = ev.arm_name("val", ctx.candidate)
    ctx.write_json("gate", g.to_dict())
    ctx.write_parquet("val_paired", paired_frame(ctx.base_val, ctx.cand_val))
    ctx.funnel.gate_path = g.path
    ctx.log(
        f"round {ctx.r}: gate {g.path} (h={g.h}, m={g.m}, n={g.n}, delta={g.delta:+.4f}, "
        f"lb={g.delta_lb})"
    )
    ctx.accepted, ctx.accepted_val, ctx.decision = ctx.candidate, ctx.cand_val, g
    if not ctx.cfg.ablation.gate:  # w/o gate: the measurement is recorded, never obeyed
        return StepResult({"path": g.path, "forced": True}, _deploy(ctx, g, "force-accepted"))
    stop = None
    if g.invalid:
        stop = ctx.result(
            "invalid", "measurement invalid: " + g.reasons[0], gate=g, candidate=ctx.candidate
        )
    return StepResult({"path": g.path}, stop)


# 7. one-shot prune -------------------------------------------------------------------------------
def prune(ctx: RoundContext) -> StepResult:
    """On a failed gate: remove clearly harmful updates once, retest, deploy only if strictly better."""
    g = ctx.gate
    assert g is not None and ctx.candidate is not None
    if g.passed:
        return StepResult(ran=False)
    attr = attribute(
        outcomes(ctx.base_val),
        outcomes(ctx.cand_val),
        update_attributions(ctx.survivors, ctx.base_val, ctx.cand_val),
        updates=[t.id for t in ctx.survivors],
    )
    pplan = plan_prune(attr.by_update, dependents(ctx.survivors), ctx.cfg, already_pruned=False)
    retest = None
    pruned_lib = None
    val_qs = list(ctx.val)
    branches: list[dict[str, Any]] = []
    if not pplan.removes_all:
        pruned_lib = ctx.candidate.without(pplan.removed)
        if ctx.cfg.ablation.scope:  # and composite tools' harmful branches (w/o scope: no kinds)
            pruned_lib, branches = narrow_branches(pruned_lib, ctx.base_val, ctx.cand_val)
        if pplan.empty and not branches:
            pruned_lib = None
        else:
            retest = gate_between(
                ctx.base_val, ctx.evaluator.answer("val", pruned_lib, val_qs), ctx.cfg
            )
    rec = ctx.prune = PruneRecord.build(g, attr, pplan, retest, branches)
    ctx.write_json("prune", rec.to_dict())
    ctx.funnel.pruned = len(pplan.removed)
    if pruned_lib is not None and retest is not None and accept_pruned(g, retest):
        ctx.accepted = pruned_lib
        ctx.accepted_val = ctx.evaluator.answer("val", pruned_lib, val_qs)
        ctx.decision = retest
        ctx.log(f"round {ctx.r}: prune removed {list(pplan.removed)}; retest {retest.path}")
        return StepResult({"accepted": True})
    ctx.log(f"round {ctx.r}: rejected ({rec.outcome})")
    # the best rejected candidate (for the diagnostic test run): the pruned library when its
    # retest measured a strictly better lower bound than the full candidate, else the full one
    best = ctx.candidate
    if pruned_lib is not None and retest is not None and _lb(retest) > _lb(g):
        best = pruned_lib
    stop = ctx.result("rejected", rec.outcome, gate=g, prune=rec, candidate=best)
    return StepResult({"accepted": False}, stop)


def _lb(d: GateDecision) -> float:
    return -math.inf if d.delta_lb is None else d.delta_lb


# 8. reconcile, final gate, chain write -----------------------------------------------------------
def reconcile(ctx: RoundContext) -> StepResult:
    """Reconcile scope fields with behaviour, pass the same gate once more, write the stage."""
    assert ctx.accepted is not None and ctx.decision is not None
    if ctx.cfg.ablation.scope:
        reconciled, edits = reconcile_scopes(ctx.accepted, ctx.base_val, ctx.accepted_val)
    else:  # w/o scope: tools carry no scope fields to reconcile
        reconciled, edits = ctx.accepted, []
    final = ctx.decision
    if edits:
        rec_val = ctx.evaluator.answer("val", reconciled, list(ctx.val))
        final_try = gate_between(ctx.base_val, rec_val, ctx.cfg)
        if final_try.passed:
            ctx.accepted, final = reconciled, final_try
        else:
            edits = [{**e, "discarded": True} for e in edits]
    else:
        final = gate_between(ctx.base_val, ctx.accepted_val, ctx.cfg)
    ctx.write_json("reconcile", {"edits": edits, "final_gate": final.to_dict()})
    return StepResult({"edits": len(edits)}, _deploy(ctx, final, "admitted"))


def _deploy(ctx: RoundContext, final: GateDecision, how: str) -> RoundResult:
    """Write the accepted library as the round's stage (``how``: admitted or force-accepted)."""
    assert ctx.accepted is not None
    lib = ctx.accepted
    deployed = tuple(t.id for t in lib.stages[-1].tools)
    ctx.funnel.deployed = len(deployed)
    ctx.funnel.deployed_kinds = sorted({t.kind for t in lib.stages[-1].tools})
    if ctx.store is not None and ctx.paths is not None:
        ctx.store.save(ctx.paths.library, lib)
    if how == "admitted":
        reason = f"admitted by the {final.path} path"
        ctx.log(f"round {ctx.r}: accepted {len(deployed)} artifact(s) via {final.path}")
    else:
        reason = f"force-accepted without the gate (w/o gate ablation; it measured {final.path})"
        ctx.log(f"round {ctx.r}: {reason}; {len(deployed)} artifact(s)")
    return ctx.result(
        "accepted",
        reason,
        library=lib,
        gate=ctx.gate,
        final_gate=final,
        prune=ctx.prune,
        deployed=deployed,
        candidate=ctx.candidate,
    )


#: The steps of a round, in the order the method runs them.
ROUND_STEPS: tuple[Step, ...] = (
    Step("base_pass", base_pass),
    Step("cluster", cluster, _restore_cluster),
    Step("plan", plan, _restore_plan),
    Step("synthesize", synthesize, _restore_synthesize),
    Step("gate", gate),
    Step("prune", prune),
    Step("reconcile", reconcile),
)


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
    store: Any = None,
    ids: ViewIds | None = None,
    log: Callable[[str], None] = lambda s: None,
    plan_workers: int | None = None,
    steps: Sequence[Step] = ROUND_STEPS,
) -> RoundResult:
    """Run (or resume) round ``r`` on train and val only; the library changes iff it is accepted.

    Each round draws its own samples (define sample, bucket splits, probes): a round that follows a
    rejected one sees the same errors and must not replay the same draw, so the protocol seed is
    offset by the round number. Roles see train rows under the run's opaque ids (``ids``; by
    default assigned from the train and val questions with the protocol seed as the salt).
    """
    if ids is None:
        ids = ViewIds([*train, *val], str(cfg.seed))
    ctx = RoundContext(
        r,
        library,
        train,
        val,
        roles,
        cfg.replace(seed=cfg.seed + 1000 * (r - 1)),
        evaluator,
        sandbox,
        store,
        log,
        plan_workers if plan_workers is not None else min(4, os.cpu_count() or 1),
        ids,
    )
    return run_steps(ctx, steps)

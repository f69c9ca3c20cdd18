"""The LLM agreement gate: four LLM annotators label gate-pool errors (design §4.3).

The panel (``llm-4annotators``) is four conversations, *alpha* ... *delta*, each with its own
persona prompt (``persona_<name>`` asset: systems engineer, reasoning reviewer, domain expert,
sceptical auditor), its own seed and, optionally, its own model (``annotator_models``); the
annotator's name is in its messages, so cache keys differ. Four identical requests would make the
panel degenerate, which blocks ``accepted``.

Rounds sample the gate pool exactly as the builtin gate does
(:func:`~tsevo.taxonomy.gate.sample_round`). With ``GateConfig.unit == "event"`` (the default) a
round runs design §4.2's five phases (:func:`~tsevo.taxonomy.llm_phases.event_round`): discovery
per trace, vote and typing, assignment per confirmed error, deliberation on split errors; the
items are the confirmed errors (``<trace id>#<event seq>``), κ is computed on the phase-4 labels
and the coverage on the consolidated ones, and the record adds ``consolidated`` and ``phases``.
With ``unit == "trace"`` (the earlier gate, kept as it was) the errors are the sampled failed
traces, one call per annotator per round labels all of them (``{labels[{trace_id, codes[{id,
event_seq, quote}]}]}``; every trace exactly once, events that exist, quotes copied from the
trace, checked in code and re-asked). Either way, ids not in the taxonomy are dropped with a
warning and recorded; an annotator whose call fails gives no code (recorded), which lowers κ
rather than hiding it. The labels go to :func:`~tsevo.taxonomy.agreement.agreement` (both κ,
coverage, status).

After a failed round one call proposes edits ``{merge[], add[], relabel[]}`` (≤ 2, ≤ 2, ≤ 3):
merges on one axis (and role), relabels of existing ids, adds grounded in induction-pool failures
no code's evidence covers (never in gate traces). The edits are checked, applied as one batch with
lineage, and the next round labels the new version.
"""

from __future__ import annotations

import hashlib
import warnings
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field

from tsevo.roles.llm import LLMClient

from .agreement import agreement
from .codes import TaxonomyError, id_sort_key
from .edits import Add, Edit, LineageEntry, Merge, Relabel, apply_edits
from .gate import (
    GateConfig,
    GateResult,
    gate_pool,
    gated,
    round_errors,
    round_record,
    sample_round,
)
from .induce import InduceConfig, active_roles, fires, induction_pool
from .llm import (
    ANNOTATOR_ROLE,
    INDUCE_ROLE,
    CodeDraft,
    LLMOptions,
    ask,
    draft_problems,
    draft_to_code,
    dumps,
    quote_in,
    rules_text,
    spread,
    system_groups,
    trace_view,
    validation_text,
)
from .llm_phases import ANNOTATORS, annotator_head, codes_view, event_round
from .model import Taxonomy
from .phases import SharedBase
from .prompts import load
from .traces import Trace

__all__ = ["ANNOTATORS", "PANEL", "annotator_messages", "llm_gate"]

#: The panel's name in records and the manifest.
PANEL = "llm-4annotators"


class CodeLabel(BaseModel):
    """One assigned code."""

    id: str
    event_seq: int
    quote: str = ""


class TraceLabels(BaseModel):
    """One trace's codes."""

    trace_id: str
    codes: list[CodeLabel] = Field(default_factory=list)


class AnnotateReply(BaseModel):
    """An annotator's round."""

    labels: list[TraceLabels]


class MergeModel(BaseModel):
    """Merge two codes."""

    keep: str
    absorb: str


class RelabelModel(BaseModel):
    """Sharper text for one code."""

    id: str
    description: str | None = None
    when_to_use: str | None = None
    when_not_to_use: str | None = None


class EditsReply(BaseModel):
    """The edits after a failed round."""

    merge: list[MergeModel] = Field(default_factory=list)
    add: list[CodeDraft] = Field(default_factory=list)
    relabel: list[RelabelModel] = Field(default_factory=list)


def annotator_messages(
    name: str, tax: Taxonomy, errs: Sequence[Trace], opts: LLMOptions
) -> list[dict[str, str]]:
    """One annotator's request for a round (its persona, the taxonomy, the failed traces)."""
    text = load("gate_annotate").render(
        **annotator_head(name),
        codes=dumps(codes_view(tax.codes)),
        ids=", ".join(t.problem_id for t in errs),
        traces=dumps([trace_view(t, opts.annotate_chars) for t in errs]),
    )
    return [{"role": "user", "content": text}]


def _check_labels(errs: Sequence[Trace]) -> Any:
    by_id = {t.problem_id: t for t in errs}

    def check(r: AnnotateReply) -> str | None:
        got = [x.trace_id for x in r.labels]
        problems = []
        if len(got) != len(set(got)) or set(got) != set(by_id):
            problems.append(f"label every trace exactly once: {sorted(by_id)}")
        for i, x in enumerate(r.labels):
            t = by_id.get(x.trace_id)
            for j, c in enumerate(x.codes):
                if t is None:
                    continue
                if not 1 <= c.event_seq <= len(t.events):
                    problems.append(f"labels[{i}].codes[{j}].event_seq: 1..{len(t.events)}")
                if c.quote and not quote_in(c.quote, t):
                    problems.append(f"labels[{i}].codes[{j}].quote: not copied from the trace")
        return validation_text(problems)

    return check


def _annotate(
    client: LLMClient,
    tax: Taxonomy,
    errs: Sequence[Trace],
    errors: Sequence[str],
    k: int,
    cfg: GateConfig,
    opts: LLMOptions,
) -> tuple[list[dict[str, set[str]]], dict[str, Any], bool]:
    labels: list[dict[str, set[str]]] = [{e: set() for e in errors} for _ in ANNOTATORS]
    records: dict[str, Any] = {}
    requests = []
    known = set(tax.ids)
    key_of = {t.problem_id: e for t, e in zip(errs, errors, strict=True)}
    for i, name in enumerate(ANNOTATORS):
        msgs = annotator_messages(name, tax, errs, opts)
        params: dict[str, Any] = {"temperature": opts.annotator_temperature, "seed": cfg.seed + i}
        if opts.annotator_models:
            params["model"] = opts.annotator_models[i]
        requests.append(hashlib.sha256(dumps([msgs, params]).encode()).hexdigest())
        call = ask(
            client,
            ANNOTATOR_ROLE,
            f"gate_r{k}",
            msgs,
            AnnotateReply,
            retries=opts.retries,
            validate=_check_labels(errs),
            **params,
        )
        dropped = []
        for x in call.reply.labels if call.reply else []:
            ids = {c.id for c in x.codes}
            labels[i][key_of[x.trace_id]] = ids & known
            dropped += sorted(ids - known)
        if dropped:
            warnings.warn(
                f"annotator {name}, round {k}: dropped unknown code ids {sorted(set(dropped))}",
                stacklevel=2,
            )
        records[name] = {**call.record(), "dropped": dropped}
    return labels, records, len(set(requests)) < len(requests)


def _edits(
    client: LLMClient,
    tax: Taxonomy,
    labels: Sequence[Mapping[str, set[str]]],
    errors: Sequence[str],
    res: Any,
    pool: Sequence[Trace],
    k: int,
    cfg: GateConfig,
    opts: LLMOptions,
    consolidated: Mapping[str, set[str]] | None = None,
) -> tuple[list[Edit], dict[str, Any]]:
    co: Counter[tuple[str, str]] = Counter()
    uncovered = 0
    for e in errors:
        if consolidated is None:
            votes = Counter(i for lab in labels for i in lab.get(e, ()))
            cons = sorted(i for i, n in votes.items() if n >= cfg.quorum)
        else:  # the event unit's labels after deliberation
            cons = sorted(consolidated.get(e, ()))
        uncovered += not cons
        co.update((a, b) for a in cons for b in cons if a < b)
    covered = {i for c in tax.codes for i in c.evidence_trace_ids}
    shown = spread(
        [t for t in pool if t.failed and t.problem_id not in covered],
        opts.failures_shown,
        cfg.seed,
        f"edits{k}",
    )
    by_id = {t.problem_id: t for t in shown}
    roles = [r for r, v in active_roles(pool, InduceConfig()).items() if v["active"]]
    areas = [*system_groups(), *sorted({str(t.features.get("domain.subdomain")) for t in pool})]

    def check(r: EditsReply) -> str | None:
        p: list[str] = []
        if len(r.merge) > cfg.max_merge or len(r.add) > cfg.max_add:
            p.append(f"at most {cfg.max_merge} merges and {cfg.max_add} adds")
        if len(r.relabel) > cfg.max_relabel:
            p.append(f"at most {cfg.max_relabel} relabels")
        for i, m in enumerate(r.merge):
            if m.keep not in tax or m.absorb not in tax or m.keep == m.absorb:
                p.append(f"merge[{i}]: two different ids of the taxonomy")
                continue
            a, b = tax[m.keep], tax[m.absorb]
            if (a.category, a.applies_to_role) != (b.category, b.applies_to_role):
                p.append(f"merge[{i}]: codes on one axis (and one role for B)")
        for i, x in enumerate(r.relabel):
            if x.id not in tax:
                p.append(f"relabel[{i}].id: {x.id!r} is not in the taxonomy")
        for i, d in enumerate(r.add):
            p += draft_problems(d, f"add[{i}]", shown=by_id, axis=("A", "B", "C"), areas=areas)
            if d.axis == "B" and d.applies_to_role not in roles:
                p.append(f"add[{i}].applies_to_role: one of {roles}")
        return validation_text(p)

    text = load("gate_edits").render(
        round=k,
        reason=res.decision.reason,
        codes=dumps(codes_view(tax.codes)),
        agreement=dumps(
            {
                "per_code_kappa": dict(sorted(res.fleiss_per_code.items())),
                "co_assigned": [{"codes": [a, b], "errors": n} for (a, b), n in sorted(co.items())],
            }
        ),
        uncovered=uncovered,
        traces=dumps([trace_view(t, opts.trace_chars) for t in shown]),
        max_merge=cfg.max_merge,
        max_add=cfg.max_add,
        max_relabel=cfg.max_relabel,
        rules=rules_text(cfg.max_add),
    )
    call = ask(
        client,
        INDUCE_ROLE,
        f"gate_edits_r{k}",
        [{"role": "user", "content": text}],
        EditsReply,
        retries=opts.retries,
        validate=check,
        temperature=opts.temperature,
    )
    edits: list[Edit] = []
    r = call.reply
    if r is not None:
        merged: set[str] = set()
        for m in r.merge:
            keep, absorb = sorted([m.keep, m.absorb], key=id_sort_key)
            if not {keep, absorb} & merged:
                edits.append(Merge(keep, (absorb,)))
                merged |= {keep, absorb}
        for x in r.relabel:
            change = {
                f: v.strip()
                for f, v in x.model_dump().items()
                if f != "id" and isinstance(v, str) and v.strip()
            }
            if x.id not in merged and change:
                edits.append(Relabel(x.id, change))
        fails = [t for t in pool if t.failed]
        for d in r.add:
            det = d.detector.model_dump() if d.detector else None
            sup = sum(fires(det, t.features) for t in fails) if det else len(d.evidence)
            edits.append(Add(draft_to_code(d, support=sup, origin="added")))
    return edits, {**call.record(), "uncovered": uncovered}


def llm_gate(
    draft: Taxonomy,
    traces: Sequence[Trace],
    client: LLMClient,
    cfg: GateConfig | None = None,
    opts: LLMOptions | None = None,
) -> GateResult:
    """Gate a draft with the LLM panel on its gate pool; the taxonomy carries the status."""
    cfg, opts = cfg or GateConfig(), opts or LLMOptions()
    pool = gate_pool(traces)
    ind_pool = induction_pool(traces, cfg.seed)
    max_rounds = min(cfg.max_rounds, len(pool) // max(cfg.per_round, 1))
    tax, rounds, lineage = draft, [], []
    used: set[str] = set()
    decision = None
    base, rules = SharedBase(), list[str]()
    by_id = {t.problem_id: t for t in pool}
    for k in range(1, max_rounds + 1):
        batch = sample_round(pool, used, k, cfg.per_round, cfg.seed)
        used |= {t.problem_id for t in batch}
        labels: list[dict[str, set[str]]] = [{} for _ in ANNOTATORS]
        records: dict[str, Any] = {}
        degenerate = False
        cons: dict[str, set[str]] | None = None
        extra: dict[str, Any] = {}
        if cfg.unit == "trace":
            errs, errors = round_errors(batch)
            if tax.codes and errs:
                labels, records, degenerate = _annotate(client, tax, errs, errors, k, cfg, opts)
        else:
            errors, cons, phases = [], {}, None
            if tax.codes and batch:
                ev = event_round(client, tax, batch, k, cfg, opts, base, rules=rules, pool=by_id)
                errors, labels, cons, phases = ev.errors, ev.labels, ev.consolidated, ev.phases
                records, degenerate = ev.annotators, ev.degenerate
            extra = {
                "unit": "event",
                "consolidated": {e: sorted(cons.get(e, ())) for e in errors},
                "phases": phases,
            }
        res = agreement(
            labels,
            errors,
            tax,
            consolidated=cons,
            metric=cfg.metric,
            kappa_target=cfg.kappa_target,
            coverage_floor=cfg.coverage_floor,
            quorum=cfg.quorum,
            degenerate=degenerate,
        )
        decision = res
        passed = res.status == "accepted"
        rnd = round_record(
            k,
            tax,
            batch,
            errors,
            dict(zip(ANNOTATORS, labels, strict=True)),
            res,
            panel=PANEL,
            annotators=records,
            degenerate=degenerate,
            **extra,
        )
        rounds.append(rnd)
        if passed and cfg.early_stop == "paper":
            break
        if k < max_rounds:
            edits, rnd["edits"] = _edits(
                client, tax, labels, errors, res, ind_pool, k, cfg, opts, consolidated=cons
            )
            rules = []
            if edits:
                try:
                    batch_ = apply_edits(tax, edits, trigger=f"gate round {k} (llm)")
                except TaxonomyError as e:
                    rnd["edits"]["error"] = f"edits not applied: {e}"
                else:
                    tax = batch_.taxonomy
                    lineage.append(batch_.entry)
                    rules = [
                        f"{x.id}: {v}"
                        for x in edits
                        if isinstance(x, Relabel)
                        for v in x.changes.values()
                    ]
    final = gated(tax, decision, len(rounds), cfg.metric, PANEL, panel_if_empty=True)
    lineage_out: list[LineageEntry] = lineage
    return GateResult(final, rounds, lineage_out)

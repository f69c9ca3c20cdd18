"""The LLM panel's event-level round: the five phases of design §4.2 asked of four annotators.

One round (``GateConfig.unit == "event"``) runs on the round's sampled traces. Every request
carries the annotator's name, persona and seed (``annotator_models`` too), so the four never share
a cache key; each annotator's requests show only its own earlier answers (its proposals in the
vote, its labels in deliberation) and, after reconciliation, what the panel made public. Each
phase is a strict JSON contract, checked in code and re-asked with the reasons
(:func:`~tsevo.taxonomy.llm.ask`):

1. *discovery*, per trace: ``{errors[{event_seq, role, description, quote}]}``; the event must
   exist, the role be the one on its line and the quote be verbatim in that event's rendered line
   (:func:`~tsevo.taxonomy.phases.check_proposal`);
2. *vote* and 3. *typing*, one call per trace with voted keys: ``{votes[{error_id, confirm}],
   types[{error_id, axis}]}``, every voted id exactly once in each; keys go to the vote and are
   confirmed by :func:`~tsevo.taxonomy.phases.reconcile` (a failed call votes nothing: rejects);
   the type is :func:`~tsevo.taxonomy.phases.type_of` of the four answers;
4. *assignment*, per confirmed error: ``{codes[{id, quote}]}`` among the codes of the error's
   type (:func:`eligible_codes`, the builtin panel's rule; none: no call and no label); other ids
   are dropped with a warning and recorded. κ is computed on these labels;
5. *deliberation*, per non-unanimous error and deliberation round: ``{revisions[{error_id,
   codes[]}]}`` showing the annotator's own codes and the others' (unnamed);
   :func:`~tsevo.taxonomy.phases.deliberate` applies them; the consolidated labels (codes ≥
   ``quorum`` annotators hold) give the coverage.

The four requests of one item and phase are hashed; identical ones mark the panel degenerate. A
:class:`~tsevo.taxonomy.phases.SharedBase` (anchors, rules, confusion pairs) grows over the
rounds and is shown in the assignment prompt.
"""

from __future__ import annotations

import hashlib
import warnings
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field

from tsevo.roles.llm import LLMClient

from .builtin_phases import eligible_codes
from .codes import Code
from .gate import GateConfig
from .llm import ANNOTATOR_ROLE, LLMOptions, StepCall, ask, dumps, quote_in, validation_text
from .llm import trace_view as _trace_view
from .model import Taxonomy
from .phases import (
    Proposal,
    SharedBase,
    check_proposal,
    deliberate,
    event_line,
    event_role,
    phase_record,
    reconcile,
    split_error_id,
    type_of,
)
from .prompts import load
from .traces import Trace

__all__ = [
    "ANNOTATORS",
    "AssignReply",
    "DeliberateReply",
    "DiscoverReply",
    "EventRound",
    "VoteReply",
    "annotator_head",
    "codes_view",
    "eligible_codes",
    "event_round",
]

#: The four annotators, in order.
ANNOTATORS: tuple[str, ...] = ("alpha", "beta", "gamma", "delta")


class ProposedError(BaseModel):
    """One error an annotator sees in a trace."""

    event_seq: int
    role: str
    description: str = Field(min_length=1)
    quote: str = Field(min_length=1)


class DiscoverReply(BaseModel):
    """Phase 1: the errors of one trace (an empty list: none)."""

    errors: list[ProposedError]


class VoteItem(BaseModel):
    """One vote."""

    error_id: str
    confirm: bool


class TypeItem(BaseModel):
    """One error's type."""

    error_id: str
    axis: Literal["A", "B", "C"]


class VoteReply(BaseModel):
    """Phases 2 and 3: a vote and a type for every proposed error of one trace."""

    votes: list[VoteItem]
    types: list[TypeItem]


class AssignedCode(BaseModel):
    """One code for a confirmed error."""

    id: str
    quote: str = ""


class AssignReply(BaseModel):
    """Phase 4: one confirmed error's codes."""

    codes: list[AssignedCode]


class Revision(BaseModel):
    """One error's codes after deliberation."""

    error_id: str
    codes: list[str]


class DeliberateReply(BaseModel):
    """Phase 5: the annotator's codes again."""

    revisions: list[Revision]


def codes_view(codes: Sequence[Code]) -> list[dict[str, Any]]:
    """What a prompt shows of codes (prose, heuristics, two example quotes)."""
    return [
        {
            "id": c.id,
            "axis": c.category,
            "area": c.area,
            "role": c.applies_to_role,
            "name": c.name,
            "description": c.description,
            "when_to_use": c.when_to_use,
            "when_not_to_use": c.when_not_to_use,
            "detection_heuristics": list(c.detection_heuristics),
            "examples": [e.get("quote") for e in c.examples[:2] if isinstance(e, Mapping)],
        }
        for c in codes
    ]


@dataclass
class EventRound:
    """One event-level round's outcome.

    Attributes:
        errors: The confirmed error ids (the agreement items).
        labels: Phase-4 labels per annotator (κ is computed on these).
        final: The labels after deliberation.
        consolidated: Per error, the codes ≥ ``quorum`` annotators hold after deliberation.
        phases: The round's ``phases`` record (:func:`~tsevo.taxonomy.phases.phase_record`).
        annotators: Per annotator, every call's record by phase and item, and dropped ids.
        degenerate: Some item's four requests of one phase were identical.
    """

    errors: list[str]
    labels: list[dict[str, set[str]]]
    final: list[dict[str, set[str]]]
    consolidated: dict[str, set[str]]
    phases: dict[str, Any]
    annotators: dict[str, Any]
    degenerate: bool


class _Calls:
    """One round's annotator calls: the same parameters per annotator, recorded and hashed."""

    def __init__(self, client: LLMClient, k: int, cfg: GateConfig, opts: LLMOptions) -> None:
        self.client, self.k, self.cfg, self.opts = client, k, cfg, opts
        self.requests: dict[tuple[str, str], list[str]] = {}
        self.records: dict[str, dict[str, Any]] = {
            n: {"discover": {}, "vote": {}, "assign": {}, "deliberate": {}, "dropped": []}
            for n in ANNOTATORS
        }

    def __call__(
        self,
        i: int,
        phase: str,
        item: str,
        text: str,
        model: type[BaseModel],
        validate: Callable[[Any], str | None],
    ) -> StepCall:
        msgs = [{"role": "user", "content": text}]
        params: dict[str, Any] = {
            "temperature": self.opts.annotator_temperature,
            "seed": self.cfg.seed + i,
        }
        if self.opts.annotator_models:
            params["model"] = self.opts.annotator_models[i]
        digest = hashlib.sha256(dumps([msgs, params]).encode()).hexdigest()
        self.requests.setdefault((phase, item), []).append(digest)
        call = ask(
            self.client,
            ANNOTATOR_ROLE,
            f"gate_r{self.k}_{phase}",
            msgs,
            model,
            retries=self.opts.retries,
            validate=validate,
            **params,
        )
        self.records[ANNOTATORS[i]][phase][item] = call.record()
        return call

    def drop(self, i: int, where: str, ids: set[str]) -> None:
        """Record (and warn about) ids an annotator gave that the call did not offer."""
        if not ids:
            return
        name = ANNOTATORS[i]
        self.records[name]["dropped"].append({"item": where, "ids": sorted(ids)})
        warnings.warn(
            f"annotator {name}, round {self.k}, {where}: dropped unknown code ids {sorted(ids)}",
            stacklevel=3,
        )

    @property
    def degenerate(self) -> bool:
        return any(len(set(v)) < len(v) for v in self.requests.values())


def annotator_head(name: str) -> dict[str, str]:
    """An annotator's name and persona, as every gate prompt opens."""
    return {"annotator": name.capitalize(), "persona": load(f"persona_{name}").text}


def _check_discovery(t: Trace) -> Callable[[DiscoverReply], str | None]:
    def check(r: DiscoverReply) -> str | None:
        problems = []
        for j, x in enumerate(r.errors):
            p = Proposal(t.problem_id, x.event_seq, x.role.strip().lower(), x.description, x.quote)
            problems += [
                f"errors[{j}]: {why}" for why in check_proposal(t.events, p, t.raw_trajectory)
            ]
        return validation_text(problems)

    return check


def _check_votes(keys: Sequence[str]) -> Callable[[VoteReply], str | None]:
    def check(r: VoteReply) -> str | None:
        got = {"votes": [x.error_id for x in r.votes], "types": [x.error_id for x in r.types]}
        bad = [f for f, ids in got.items() if sorted(ids) != sorted(keys)]
        return validation_text([f"{f}: every id exactly once: {list(keys)}" for f in bad])

    return check


def _check_assign(t: Trace) -> Callable[[AssignReply], str | None]:
    def check(r: AssignReply) -> str | None:
        bad = [j for j, c in enumerate(r.codes) if c.quote and not quote_in(c.quote, t)]
        return validation_text([f"codes[{j}].quote: not copied from the trace" for j in bad])

    return check


def _check_revisions(eid: str) -> Callable[[DeliberateReply], str | None]:
    def check(r: DeliberateReply) -> str | None:
        if [x.error_id for x in r.revisions] != [eid]:
            return f"revisions: exactly one entry, for error id {eid}"
        return None

    return check


def event_round(
    client: LLMClient,
    tax: Taxonomy,
    batch: Sequence[Trace],
    k: int,
    cfg: GateConfig,
    opts: LLMOptions,
    base: SharedBase,
    *,
    rules: Sequence[str] = (),
    pool: Mapping[str, Trace] | None = None,
) -> EventRound:
    """Run round ``k``'s five phases on ``batch`` with the four annotators.

    Args:
        client: The LLM client.
        tax: The taxonomy version labelled.
        batch: The round's sampled traces (discovery reads every one).
        k: The gate round.
        cfg: The gate's numbers (quorums, deliberation rounds, seed).
        opts: What the annotators see and how they ask.
        base: The shared base; ``rules`` join it first, the round's anchors and confusion pairs
            after deliberation.
        rules: Rules the panel added since the last round (the relabels' texts).
        pool: Traces by id, to show the base's anchors (their event lines) from earlier rounds.
    """
    call = _Calls(client, k, cfg, opts)
    new_rules = base.grow([], [], rules)["rules"]
    n = len(ANNOTATORS)
    by_id = {t.problem_id: t for t in batch}

    def view(t: Trace) -> str:
        return dumps(_trace_view(t, opts.annotate_chars, outcome=True))

    # phase 1: discovery, per trace
    proposals: list[list[Proposal]] = [[] for _ in ANNOTATORS]
    for t in batch:
        for i, name in enumerate(ANNOTATORS):
            text = load("gate_discover").render(
                **annotator_head(name), trace_id=t.problem_id, trace=view(t)
            )
            got = call(i, "discover", t.problem_id, text, DiscoverReply, _check_discovery(t))
            seen: set[str] = set()
            for x in got.reply.errors if got.reply else []:
                p = Proposal(t.problem_id, x.event_seq, x.role.strip().lower(),
                             x.description.strip(), x.quote)  # fmt: skip
                if p.key not in seen:
                    seen.add(p.key)
                    proposals[i].append(p)
    said: dict[str, list[str]] = {}
    for props in proposals:
        for p in props:
            said.setdefault(p.key, []).append(p.description)

    def about(eid: str) -> dict[str, Any]:
        tid, seq = split_error_id(eid)
        t = by_id[tid]
        return {
            "error_id": eid,
            "event_seq": seq,
            "role": event_role(t.events, seq),
            "line": _line(t, seq),
            "descriptions": sorted(said.get(eid, [])),
        }

    # phases 2 and 3: vote and type, per trace with voted keys
    voted = reconcile(
        proposals,
        lambda r, e: False,
        quorum_propose=cfg.quorum_propose,
        quorum_confirm=cfg.quorum_confirm,
    ).proposers
    votes: list[dict[str, bool]] = [{} for _ in ANNOTATORS]
    types: dict[str, list[str | None]] = {e: [None] * n for e in voted}
    for t in batch:
        keys = [e for e in voted if split_error_id(e)[0] == t.problem_id]
        if not keys:
            continue
        for i, name in enumerate(ANNOTATORS):
            cands = [{**about(e), "yours": i in voted[e]} for e in keys]
            text = load("gate_vote").render(
                **annotator_head(name), candidates=dumps(cands), ids=", ".join(keys), trace=view(t)
            )
            got = call(i, "vote", t.problem_id, text, VoteReply, _check_votes(keys))
            if got.reply is not None:
                votes[i].update({v.error_id: v.confirm for v in got.reply.votes})
                for x in got.reply.types:
                    types[x.error_id][i] = x.axis
    rec = reconcile(
        proposals, votes, quorum_propose=cfg.quorum_propose, quorum_confirm=cfg.quorum_confirm
    )
    errors = list(rec.confirmed)
    etype = {e: type_of(types[e]) for e in errors}

    # phase 4: assignment, per confirmed error, among the codes of its type
    shown: dict[str, list[Code]] = {}
    info: dict[str, dict[str, Any]] = {}
    for e in errors:
        tid, seq = split_error_id(e)
        shown[e] = eligible_codes(tax, etype[e], by_id[tid], seq)
        info[e] = {**about(e), "trace_id": tid, "type": etype[e]}
    panel_base = dumps(_base_view(base, {**(pool or {}), **by_id}))
    labels: list[dict[str, set[str]]] = [{e: set() for e in errors} for _ in ANNOTATORS]
    for e in errors:
        t, offered = by_id[split_error_id(e)[0]], {c.id for c in shown[e]}
        if not offered:
            continue
        for i, name in enumerate(ANNOTATORS):
            text = load("gate_assign").render(
                **annotator_head(name),
                error=dumps(info[e]),
                codes=dumps(codes_view(shown[e])),
                base=panel_base,
                error_id=e,
                trace=view(t),
            )
            got = call(i, "assign", e, text, AssignReply, _check_assign(t))
            ids = {c.id for c in got.reply.codes} if got.reply else set()
            labels[i][e] = ids & offered
            call.drop(i, e, ids - offered)

    # phase 5: deliberation on the non-unanimous errors
    mine = [{e: set(lab[e]) for e in errors} for lab in labels]
    asked: Counter[tuple[int, str]] = Counter()

    def revise(i: int, e: str, others: list[set[str]]) -> set[str]:
        asked[i, e] += 1
        t, offered = by_id[split_error_id(e)[0]], {c.id for c in shown[e]}
        text = load("gate_deliberate").render(
            **annotator_head(ANNOTATORS[i]),
            error=dumps(info[e]),
            codes=dumps(codes_view(shown[e])),
            round=asked[i, e],
            labels=dumps({"yours": sorted(mine[i][e]), "others": [sorted(o) for o in others]}),
            error_id=e,
            trace=view(t),
        )
        item = f"{e}@{asked[i, e]}"
        got = call(i, "deliberate", item, text, DeliberateReply, _check_revisions(e))
        if got.reply is not None:
            ids = set(got.reply.revisions[0].codes)
            mine[i][e] = ids & offered
            call.drop(i, item, ids - offered)
        return set(mine[i][e])

    final, delib = deliberate(
        labels, errors, revise, rounds=cfg.deliberation_rounds, quorum=cfg.quorum
    )
    added = {**base.grow(final, errors), "rules": new_rules}
    phases = phase_record(
        ANNOTATORS,
        proposals,
        rec,
        {e: types[e] for e in errors},
        delib,
        final,
        base={**base.to_dict(), "added": added},
    )
    return EventRound(
        errors,
        labels,
        final,
        {e: set(v) for e, v in delib.consolidated.items()},
        phases,
        call.records,
        call.degenerate,
    )


def _line(t: Trace, seq: int) -> str | None:
    """Event ``seq``'s line as the trace's rendering shows it."""
    return event_line(t.events, seq, t.raw_trajectory)


def _base_view(base: SharedBase, traces: Mapping[str, Trace]) -> dict[str, Any]:
    """What the assignment prompt shows of the shared base (at most 12 anchors, 8 of the rest)."""
    anchors: list[dict[str, Any]] = []
    for e, codes in sorted(base.anchors.items()):
        tid, seq = split_error_id(e)
        if tid in traces and len(anchors) < 12:
            anchors.append({"line": _line(traces[tid], seq), "codes": codes})
    pairs = sorted(base.confusions.items(), key=lambda kv: (-kv[1], kv[0]))
    return {
        "anchors": anchors,
        "confusions": [{"codes": k.split("|"), "errors": v} for k, v in pairs[:8]],
        "rules": base.rules[-8:],
    }

"""Planning on an LLM: the local planner (one contract card per bucket) and the global planner.

The local planner sees one bucket's dossier (train rows only: question text, task, options, the
correct option, the agent's answer and trace, series summaries), the current library's catalog and
the primitives catalog, and replies with a contract card (every field required). The reply is
validated into a :class:`~tsevo.roles.protocols.ContractCard` with a
:class:`~tsevo.library.tool.Contract` and a :class:`~tsevo.library.tool.Scope`; problems a model can
fix are fed back (a scope that matches none of the bucket's support rows, unknown tasks, a target
tool that does not exist, a signature the sandbox cannot deliver). The scope's matcher is built
mechanically from the model's match terms: every term weighs 1 and the threshold is the lowest
score among the support rows, so every support row stays in scope.

The global planner groups cards (merge same-measurement cards, narrow overlapping scopes with
forbidden words); the engine then checks the groups mechanically (:func:`tsevo.evolve.plan.validate_groups`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal

import pydantic

from tsevo.data import QuestionView
from tsevo.library.library import scope_matches
from tsevo.library.tool import (
    Contract,
    Matcher,
    Scope,
    merge_scopes,
    options_kind,
    question_tokens,
)

from ...protocols import ContractCard, Dossier, Example, WorkGroup
from ..render import option_letter
from ._common import RoleContext, question_series_brief, render_rows, trim_to_budget
from .catalog import render_primitives

__all__ = [
    "CardReply",
    "GlobalReply",
    "LLMGlobalPlanner",
    "LLMLocalPlanner",
    "ScopeReply",
    "card_from_reply",
    "dossier_row",
    "render_codes",
]

Signature = Literal["primary", "covariate", "reference", "candidates", "question_numbers"]
MAX_TEXT_CHARS = 300


class ScopeReply(pydantic.BaseModel):
    """Where the planned artifact applies."""

    tasks: list[str] = pydantic.Field(description="task names from the rows; [] for any task")
    arity: Literal["any", "single", "dual", "candidates", "covariate"]
    options_kind: Literal["any", "label", "numeric", "candidate"]
    match_terms: list[str] = pydantic.Field(description="words the in-scope questions share")
    forbid_terms: list[str] = pydantic.Field(description="words of questions it must not touch")
    anti_tasks: list[str] = pydantic.Field(description="tasks it must never touch")


class CardReply(pydantic.BaseModel):
    """The local planner's JSON contract: a contract card with every field."""

    action: Literal["create", "refine", "rescope", "retire", "skip"]
    artifact_kind: Literal["tool", "usage_guidance", "scope_override", "tombstone"]
    target_tool: str = pydantic.Field(description="earlier tool id (refine/rescope/retire) or ''")
    failure_type: str = pydantic.Field(max_length=120)
    root_cause: str = pydantic.Field(max_length=600)
    focus: str = pydantic.Field(max_length=400)
    measurement: str = pydantic.Field(min_length=1, max_length=160)
    signature: list[Signature] = pydantic.Field(min_length=1, max_length=4)
    success_criterion: str = pydantic.Field(max_length=400)
    reading: Literal["label", "nearest_number", "extremum"] | None
    calibration: bool
    params: dict[str, float | int | str | bool]
    scope: ScopeReply


class GroupReply(pydantic.BaseModel):
    """One work group of the global planner."""

    buckets: list[str] = pydantic.Field(min_length=1)
    forbid: list[str] = pydantic.Field(default_factory=list)
    reason: str = pydantic.Field(default="", max_length=400)


class GlobalReply(pydantic.BaseModel):
    """The global planner's JSON contract."""

    groups: list[GroupReply] = pydantic.Field(min_length=1)


def _clip(s: str, n: int = MAX_TEXT_CHARS) -> str:
    s = " ".join(s.split())
    return s if len(s) <= n else s[:n] + " ..."


def dossier_row(e: Example, *, series: bool = True) -> dict[str, Any]:
    """What a planner sees of one train row: text, task, options, gold, the agent's answer, trace."""
    q = e.question
    rec = e.record
    final = getattr(rec, "final_answer", None)
    row: dict[str, Any] = {
        "id": q.id,
        "task": q.task,
        "question": _clip(q.question if not q.context else f"{q.question} {q.context}"),
        "options": [f"{option_letter(i)}) {o}" for i, o in enumerate(q.options)],
        "correct": option_letter(e.gold) if e.gold is not None else None,
        "agent_answer": option_letter(final) if isinstance(final, int) else None,
        "agent_correct": bool(getattr(rec, "correct", False)),
        "tools_fired": list(getattr(rec, "tools_ok", ()) or ()),
    }
    if series:
        row["series"] = question_series_brief(q)
    return row


def render_codes(codes: Sequence[Mapping[str, Any]], indent: str = "") -> str:
    """A coded diagnosis (``taxonomy.diagnoses``) as prompt lines: one code, then its evidence.

    Each code: id, name, axis, severity, how many support rows it fires on, its definition, the
    verbatim trace lines quoted per row, and the codes it co-fires with; every line after
    ``indent``.
    """
    lines = []
    for c in codes:
        sev = f", {c['severity']}" if c.get("severity") else ""
        head = f"- {c['id']} {c['name']} (axis {c['axis']}{sev}; fires on {c['n']} of {c['of']})"
        lines.append(
            head + (f": {_clip(str(c['definition']), 200)}" if c.get("definition") else "")
        )
        lines += [f'    row {e["row"]}: "{e["quote"]}"' for e in c.get("evidence", ())]
        if c.get("with"):
            lines.append(f"    co-fires with {', '.join(c['with'])}")
    return "\n".join(indent + ln for ln in lines)


def _diagnosis(dossier: Dossier) -> str:
    """The bucket's diagnosis: the category's criteria, the coded diagnosis, or both."""
    instead = any(c.get("mode") == "instead" for c in dossier.codes)
    parts = [
        "Criteria: (the coded diagnosis below)" if instead else f"Criteria: {dossier.criteria}"
    ]
    if dossier.codes:
        parts.append(
            "Coded diagnosis (failure codes of a pinned taxonomy that fire on the support rows, "
            "with the trace lines they rest on):\n" + render_codes(dossier.codes)
        )
    return "\n".join(parts)


def _build_matcher(
    terms: Sequence[str], forbid: Sequence[str], support: Sequence[QuestionView]
) -> Matcher:
    toks = [question_tokens(q.question) for q in support]
    words = sorted({t for term in terms for t in question_tokens(term)})
    if toks:
        words = [w for w in words if any(w in ts for ts in toks)]
    forbid_w = sorted({t for term in forbid for t in question_tokens(term)})
    if toks:
        forbid_w = [w for w in forbid_w if not any(w in ts for ts in toks)]
    if not words:
        return Matcher(forbid=tuple(forbid_w))
    m = Matcher({w: 1.0 for w in words}, 0.0)
    thr = min((m.score(ts) for ts in toks), default=0.0)
    return Matcher({w: 1.0 for w in words}, round(max(0.0, thr - 1e-6), 6), (), tuple(forbid_w))


def card_from_reply(
    r: CardReply, dossier: Dossier, *, author: str = ""
) -> tuple[ContractCard | None, str | None]:
    """Validate a card reply against the dossier and build the card.

    Returns:
        ``(card, None)``, ``(None, None)`` for a ``skip``, or ``(None, problem)`` with a problem the
        model can fix.
    """
    if r.action == "skip":
        return None, None
    support = [e.question for e in dossier.support]
    row_tasks = {e.question.task for e in (*dossier.support, *dossier.background)}
    unknown = sorted(set(r.scope.tasks) - row_tasks)
    if unknown:
        return None, (
            f"scope.tasks names tasks that no row has: {unknown}; use tasks from the rows "
            f"({sorted(row_tasks)}) or []"
        )
    want_kind = {"create": "tool", "refine": "usage_guidance", "rescope": "scope_override"}
    want_kind["retire"] = "tombstone"
    if r.artifact_kind != want_kind[r.action]:
        return None, f"action {r.action!r} needs artifact_kind {want_kind[r.action]!r}"
    if r.action != "create" and r.target_tool not in dossier.library_tools:
        return None, (
            f"target_tool {r.target_tool!r} is not a tool of the library "
            f"({', '.join(dossier.library_tools) or 'the library is empty: use create'})"
        )
    sig = tuple(r.signature)
    if "candidates" in sig and not all(q.candidates for q in support):
        return None, "signature asks for candidates but some support rows have no candidate series"
    if "covariate" in sig and not any(q.covariates for q in support):
        return None, "signature asks for a covariate but no support row has covariate series"
    scope = Scope(
        tasks=tuple(sorted(set(r.scope.tasks))),
        evidence=(r.measurement.split(".", 1)[0],),
        arity=r.scope.arity,
        anti_tasks=tuple(sorted(set(r.scope.anti_tasks) - set(r.scope.tasks))),
        matcher=_build_matcher(r.scope.match_terms, r.scope.forbid_terms, support),
        options_kind=r.scope.options_kind,
    )

    covered = [q.id for q in support if scope_matches(scope, q)]
    if support and not covered:
        kinds = sorted({options_kind(q.options, q.candidates) for q in support})
        return None, (
            "the scope matches none of the bucket's support rows (check tasks, arity "
            f"{r.scope.arity!r}, options_kind {r.scope.options_kind!r}; the rows' option kinds "
            f"are {kinds}, their tasks {sorted({q.task for q in support})})"
        )
    calibration = None
    if r.calibration:
        calibration = {"kind": "binary_decision_tree_v1", "features": []}
    contract = Contract(
        measurement=r.measurement.strip(),
        signature=sig,
        success_criterion=r.success_criterion.strip(),
        calibration=calibration,
        params={k: v for k, v in sorted(r.params.items())},
    )
    card = ContractCard(
        bucket_id=dossier.bucket_id,
        action=r.action,
        artifact_kind=r.artifact_kind,
        target_tool=r.target_tool if r.action != "create" else "",
        failure_type=r.failure_type.strip(),
        root_cause=r.root_cause.strip(),
        focus=r.focus.strip(),
        contract=contract,
        scope=scope,
        plan={
            "rule_kind": r.reading or "",
            "author": author,
            "support_in_scope": len(covered),
            "of_support": len(support),
        },
        codes=dossier.codes,
    )
    return card, None


class LLMLocalPlanner:
    """Local planner on an LLM: a dossier in, a contract card out (or None for ``skip``).

    Args:
        ctx: Shared role context.
        compact_catalog: Show the compact primitives catalog (names, inputs, outputs) only.
    """

    role = "local_planner"

    def __init__(self, ctx: RoleContext, *, compact_catalog: bool = True) -> None:
        self.ctx = ctx
        self.compact_catalog = compact_catalog
        self.name = f"llm-local-planner:{ctx.model(self.role)}"

    def prompt(self, dossier: Dossier, feedback: Sequence[str] = ()) -> str:
        """The planning prompt (background rows dropped first, then support rows, to fit the budget)."""
        fb = (
            self.ctx.render("planner_feedback", feedback="\n".join(f"- {f}" for f in feedback))
            if feedback
            else ""
        )
        support = [dossier_row(e) for e in dossier.support]
        background = [dossier_row(e, series=False) for e in dossier.background]
        prims = render_primitives(self.compact_catalog)

        def build(k_bg: int, k_sup: int) -> str:
            return self.ctx.render(
                "planner_local",
                bucket_id=dossier.bucket_id,
                side=dossier.side,
                label=dossier.label,
                diagnosis=_diagnosis(dossier),
                catalog=dossier.catalog.strip() or "(empty)",
                feedback=fb,
                primitives=prims,
                support=render_rows(support[:k_sup]),
                background=render_rows(background[:k_bg]),
            )

        text, _ = trim_to_budget(
            self.ctx,
            self.role,
            lambda k: build(k, len(support)),
            len(background),
            minimum=0,
            reply=CardReply,
        )
        if not self.ctx.fits(self.role, text, CardReply):
            text, _ = trim_to_budget(
                self.ctx, self.role, lambda k: build(0, k), len(support), minimum=1, reply=CardReply
            )
        return text

    def plan(self, dossier: Dossier, feedback: Sequence[str] = ()) -> ContractCard | None:
        """Return a card for the bucket, or None when the model says ``skip``.

        Raises:
            InvalidReply: No valid card within the retries (the engine skips the bucket).
        """
        author = self.ctx.model(self.role)
        built: dict[str, ContractCard | None] = {}

        def validate(r: CardReply) -> str | None:
            card, problem = card_from_reply(r, dossier, author=author)
            built["card"] = card
            return problem

        self.ctx.call(
            self.role, "plan", self.prompt(dossier, feedback), CardReply, validate=validate
        )
        return built.get("card")


def card_row(c: ContractCard, support_texts: Sequence[str]) -> dict[str, Any]:
    """What the global planner sees of one card."""
    return {
        "bucket": c.bucket_id,
        "action": c.action,
        "artifact_kind": c.artifact_kind,
        "measurement": c.contract.measurement,
        "signature": list(c.contract.signature),
        "reading": c.plan.get("rule_kind") or None,
        "arity": c.scope.arity,
        "options_kind": c.scope.options_kind,
        "tasks": list(c.scope.tasks),
        "match_terms": sorted(c.scope.matcher.terms),
        "forbid_terms": list(c.scope.matcher.forbid),
        "support_questions": [_clip(t, 160) for t in support_texts[:3]],
    }


class LLMGlobalPlanner:
    """Global planner on an LLM: groups cards and narrows overlapping scopes.

    A merged group's contract is its first member's; its scope is the members' union (tasks,
    evidence; the matcher keeps the shared terms at the lowest threshold), narrowed by the
    forbidden words the model gives (words that appear in the group's own support questions are
    ignored, so narrowing never drops the group's own rows).
    """

    role = "global_planner"

    def __init__(self, ctx: RoleContext) -> None:
        self.ctx = ctx
        self.name = f"llm-global-planner:{ctx.model(self.role)}"

    def prompt(
        self, cards: Sequence[ContractCard], support_texts: Mapping[str, Sequence[str]]
    ) -> str:
        """The coordination prompt."""
        rows = [card_row(c, support_texts.get(c.bucket_id, ())) for c in cards]
        return self.ctx.render(
            "planner_global",
            cards=render_rows(rows),
            ids=", ".join(c.bucket_id for c in cards),
        )

    def coordinate(
        self, cards: Sequence[ContractCard], support_texts: Mapping[str, Sequence[str]]
    ) -> list[WorkGroup]:
        """Return work groups covering every card exactly once.

        Raises:
            InvalidReply: No valid grouping within the retries (the engine retries, then falls
                back to singleton groups).
        """
        if not cards:
            return []
        by_id = {c.bucket_id: c for c in cards}
        ids = [c.bucket_id for c in cards]

        def validate(r: GlobalReply) -> str | None:
            seen = [b for g in r.groups for b in g.buckets]
            missing = [b for b in ids if b not in seen]
            unknown = sorted({b for b in seen if b not in by_id})
            dup = sorted({b for b in seen if seen.count(b) > 1})
            problems = []
            if missing:
                problems.append(f"buckets missing from every group: {', '.join(missing)}")
            if unknown:
                problems.append(f"unknown buckets: {', '.join(unknown)}")
            if dup:
                problems.append(f"buckets in more than one group: {', '.join(dup)}")
            for i, g in enumerate(r.groups, 1):
                keys = {by_id[b].merge_key() for b in g.buckets if b in by_id}
                if len(keys) > 1:
                    problems.append(
                        f"group {i} merges cards with different measurements, signatures, "
                        f"readings or shapes ({', '.join(g.buckets)}); keep them apart"
                    )
            return "; ".join(problems) or None

        reply, _meta = self.ctx.call(
            self.role,
            "coordinate",
            self.prompt(cards, support_texts),
            GlobalReply,
            validate=validate,
        )

        groups = []
        for i, g in enumerate(reply.groups, 1):
            members = tuple(by_id[b] for b in g.buckets)
            scope = (
                members[0].scope if len(members) == 1 else merge_scopes([m.scope for m in members])
            )
            own = [question_tokens(t) for b in g.buckets for t in support_texts.get(b, ())]
            words = sorted(
                {w for f in g.forbid for w in question_tokens(f) if not any(w in ts for ts in own)}
                | set(scope.matcher.forbid)
            )
            if tuple(words) != scope.matcher.forbid:
                scope = replace(scope, matcher=replace(scope.matcher, forbid=tuple(words)))
            groups.append(WorkGroup(f"g{i}", members, members[0].contract, scope))
        return groups

"""One step of the builtin Mara chain: the parent it edits and the move it makes.

:func:`choose_move` reads the parent's per-row facts and the lineage's score history
(:func:`~tsevo.marachain.moves.categories`, :func:`~tsevo.marachain.moves.family_order`) and
returns the first unseen move of the families they ask for; among the families that change what
is measured (window, normalization, primitive, another measurement) it takes the one whose best
unseen move recovers gold best on the group's support rows. The moves themselves come from
:mod:`tsevo.marachain.moves` (template genomes) and from the reading rule's abstain band
(:func:`rule_variant`). ``inp`` is the engine's chain inputs (``tsevo.evolve.chain.ChainInputs``:
the group, its support examples, the direct attempts, the synthesizer and the held-out errors).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from tsevo.agent import AnswerRecord
from tsevo.data import Question
from tsevo.library.library import scope_matches
from tsevo.library.tool import Matcher, Tool
from tsevo.roles.builtin.composite import Branch
from tsevo.roles.builtin.measure import SpecCache
from tsevo.roles.protocols import AttemptFeedback, WorkGroup

from .genome import Genome, evidence_right, genome_draft, genome_of, support_cv, with_rule
from .history import ChangeEntry, ScoreHistory
from .moves import (
    blame_order,
    categories,
    family_order,
    refit_moves,
    revert_genome,
    scope_variants,
    spec_moves,
)
from .score import Bar, NodeScore

__all__ = [
    "Move",
    "Parent",
    "artifact_key",
    "choose_move",
    "outputs_of",
    "plan_of",
    "rule_variant",
]

#: The families that change what is measured (compared by support-row recovery within a step).
_DIMENSIONS = frozenset({"window", "normalization", "primitive", "measurement"})
#: Families that edit a branch's measurement spec (window, normalization, primitive).
_SPEC_FAMILIES = ("window", "normalization", "primitive")
#: How much better (support-row cross-validated accuracy) a spec edit must recover gold than the
#: parent's own measurement to lead a step whatever the batch categories ask for.
SUPPORT_LEAD = 0.10
#: Measurements of support rows for the chain's fits (deterministic values, shared by groups).
_CACHE = SpecCache()


def _margin(rule: Any, wider: bool) -> float | None:
    """A reading rule's next abstain band (``None`` when there is none to move to)."""
    m = float(rule.margin)
    if wider:
        if m > 0:
            return m * 2
        if rule.kind == "label" and rule.bins:
            spread = max(abs(b) for b in rule.bins) or 1.0
            return round(0.1 * spread, 6)
        return 0.1
    return round(m / 2, 6) if m > 1e-6 else None


def rule_variant(rule: Any, wider: bool) -> Any:
    """The reading rule with its abstain band widened or narrowed (``None``: nothing to move).

    A composite tool's ``branches`` rule moves every branch's band together (and a
    ``consensus`` rule every one of its rules' bands).
    """
    if rule is None:
        return None
    if rule.branches:  # only ``branches`` and ``consensus`` rules hold sub-rules
        moved = [rule_variant(b, wider) for b in rule.branches]
        if all(b is None for b in moved):
            return None
        return replace(
            rule,
            branches=tuple(
                b if n is None else n for b, n in zip(rule.branches, moved, strict=True)
            ),
        )
    m = _margin(rule, wider)
    return None if m is None else replace(rule, margin=m)


@dataclass(frozen=True)
class Move:
    """One chain step's edit: its family (``axis``), changelog subject, draft and genome.

    ``change`` is the changelog entry tsevo wrote for it when the step has more to say than its
    subject (an LLM step's actions, fields and diff); the engine renumbers its ``seq``.
    """

    axis: str
    subject: str
    draft: Tool
    genome: Genome | None = None
    change: ChangeEntry | None = None


@dataclass
class Parent:
    """The node a step edits, with what the step needs to know of it."""

    draft: Tool
    score: NodeScore
    genome: Genome | None
    outputs: dict[str, dict[str, Any]]


def outputs_of(draft: Tool, recs: Mapping[str, AnswerRecord]) -> dict[str, dict[str, Any]]:
    """The draft's tool outputs per question (for blaming a composite tool's branches)."""
    out: dict[str, dict[str, Any]] = {}
    for q, r in recs.items():
        for s in r.steps:
            for run in s.runs:
                if run.tool_id == draft.id and run.outputs:
                    out.setdefault(q, {}).update(run.outputs)
    return out


def _same_reach(draft: Tool, scope: Any, batch_qs: Sequence[Question]) -> bool:
    """Whether ``draft`` under ``scope`` would match exactly the batch questions it matches now.

    Such a scope edit can only score what its parent scored (the tool runs on the same batch
    questions, with the same matcher scores), so it is skipped like a repeated artifact: no step,
    no rollout. Drafts that ask for calibration keep every edit (their fit is not judged here).
    """
    if not batch_qs or draft.contract.calibration is not None:
        return False
    return all(scope_matches(scope, q) == scope_matches(draft.scope, q) for q in batch_qs)


def _family_moves(
    family: str,
    par: Parent,
    check_outcome: str,
    inp: Any,
    tried: list[str],
    history: ScoreHistory,
    genomes: Mapping[str, Genome | None],
    batch_qs: Sequence[Question] = (),
) -> Iterator[Move]:
    """The moves of one family from ``par``, best first (generated lazily).

    ``batch_qs``, the chain's batch questions, drop scope edits that reach the same ones.
    """
    g = par.genome
    harmful = check_outcome == "harmful"
    if family == "revert":
        yield from _revert_moves(par, history, genomes)
    elif family in ("window", "normalization", "primitive"):
        if g is None:
            return
        order = blame_order(g, par.score, par.outputs)
        for sg, what, _cv in spec_moves(g, family, inp.examples, _CACHE, order):
            yield Move(family, f"{family}: {what}"[:72], genome_draft(par.draft, sg), sg)
    elif family == "measurement":
        # the K-loop's other measurements first (they were scored under their own scope), then
        # the plan's next one; each inherits the lineage's matcher edits
        others = sorted(
            ((rec, d) for rec, d in inp.tries if rec.checked and d.id != par.draft.id),
            key=lambda t: (-(len(t[0].repairs) - len(t[0].harms)), -t[0].attempt),
        )
        for _rec, d in others:
            yield _measurement_move(d, par.draft, inp.group)
        history_fb = [
            AttemptFeedback(i + 1, f"chain.{i}", t, "no_repair", 0, 0, "")
            for i, t in enumerate(tried)
        ]
        try:
            nxt = inp.synthesizer.synthesize(inp.group, len(tried) + 1, history_fb, inp.examples)
        except Exception:  # a synthesizer failure leaves the other families
            nxt = None
        if nxt is not None and nxt.contract.measurement not in tried:
            yield _measurement_move(nxt, par.draft, inp.group)
    elif family == "scope":
        support = [e for e in inp.examples if e.gold is not None]
        for wider in (not harmful, harmful):
            for sc, what in scope_variants(par.draft.scope, support, wider):
                if _same_reach(par.draft, sc, batch_qs):
                    continue
                ng: Genome | None = (
                    replace(g, scope=replace(sc, kinds=())) if g is not None else None
                )
                yield Move("scope", f"scope: {what}"[:72], replace(par.draft, scope=sc), ng)
    elif family == "reading_rule":
        if g is not None:  # I: refit the rule on support rows first
            order = blame_order(g, par.score, par.outputs)
            for ng, what in refit_moves(g, inp.examples, _CACHE, order):
                yield Move("reading_rule", what[:72], genome_draft(par.draft, ng), ng)
        rule = par.draft.guidance.rule if par.draft.guidance is not None else None
        for wider in (harmful, not harmful):
            new_rule = rule_variant(rule, wider)
            if new_rule is None:
                continue
            gd = par.draft.guidance
            assert gd is not None
            d = replace(par.draft, guidance=replace(gd, rule=new_rule))
            what = "widen" if wider else "narrow"
            ngr = with_rule(g, new_rule) if g is not None else None
            yield Move("reading_rule", f"{what} the reading rule's abstain band", d, ngr)


def _measurement_move(draft: Tool, parent: Tool, group: WorkGroup) -> Move:
    """A move to another measurement's draft, with the lineage's matcher edits inherited."""
    moved = _inherit_scope(draft, parent)
    g = genome_of(draft, *plan_of(group))
    if g is not None:
        g = replace(g, scope=replace(moved.scope, kinds=()))
    return Move("measurement", f"measure {draft.contract.measurement}"[:72], moved, g)


def _inherit_scope(draft: Tool, parent: Tool) -> Tool:
    """``draft`` with the parent's matcher (the lineage's scope edits) when both read one kind.

    Composite tools dispatch on their own kind matchers, and another task set is another
    contract: those keep their own scope.
    """
    a, b = draft.scope, parent.scope
    if (
        a.kinds
        or b.kinds
        or (a.tasks, a.arity, a.options_kind) != (b.tasks, b.arity, b.options_kind)
    ):
        return draft
    return replace(draft, scope=replace(a, matcher=b.matcher))


def _revert_moves(
    par: Parent, history: ScoreHistory, genomes: Mapping[str, Genome | None]
) -> Iterator[Move]:
    """H: revert the field whose change lost a win (:func:`~tsevo.marachain.moves.revert_genome`)."""
    if par.genome is None:
        return
    found = revert_genome(par.genome, history, genomes)
    if found is not None:
        ng, family, undone = found
        subject = f"revert the {family} change of {undone}"
        yield Move("revert", subject[:72], genome_draft(par.draft, ng), ng)


def _unreachable(draft: Tool, held: Sequence[Question]) -> list[str]:
    """Held-out errors outside the draft's contract scope (every part of it but the matcher)."""
    fixed = replace(draft.scope, matcher=Matcher())
    return [q.id for q in held if not scope_matches(fixed, q)]


def choose_move(
    par: Parent,
    bar: Bar,
    inp: Any,
    tried: list[str],
    seen: set[str],
    history: ScoreHistory,
    record: list[tuple[str, int]],
    genomes: Mapping[str, Genome | None],
    batch_qs: Sequence[Question] = (),
) -> tuple[Move | None, str, dict[str, int], list[str]]:
    """The step's move: the first unseen move of the families the score history asks for.

    A scope edit that matches exactly the batch questions (``batch_qs``) the parent matches is
    not a move (:func:`_same_reach`). Returns the move (``None``: every live family is
    exhausted), the leading category, the category counts and the family order.
    """
    check = bar.check(par.score)
    right = (
        evidence_right(
            par.genome, inp.examples, _CACHE, blame_order(par.genome, par.score, par.outputs)
        )
        if par.genome is not None
        else True
    )
    cats = categories(par.score, history.lost_wins(), _unreachable(par.draft, inp.held_qs), right)
    order, lead = family_order(cats, record, harmful=check.outcome == "harmful")

    firsts: dict[str, Move | None] = {}
    cvs: dict[str, float] = {}

    def first(fam: str) -> Move | None:
        if fam not in firsts:
            moves = _family_moves(fam, par, check.outcome, inp, tried, history, genomes, batch_qs)
            firsts[fam] = next((m for m in moves if artifact_key(m.draft) not in seen), None)
        return firsts[fam]

    def best_of(fams: Sequence[str]) -> tuple[float, Move] | None:
        """The first move of ``fams`` that recovers gold best on support rows (earlier on ties)."""
        best: tuple[float, Move] | None = None
        for f in fams:
            m = first(f)
            if m is None:
                continue
            if f not in cvs:
                cvs[f] = support_cv(m.genome, inp.examples, _CACHE) if m.genome is not None else 0.0
            if best is None or cvs[f] > best[0]:
                best = (cvs[f], m)
        return best

    if check.outcome == "harmful" and par.genome is not None:
        lifted = _support_lead(par, inp, best_of([f for f in order if f in _SPEC_FAMILIES]))
        if lifted is not None:
            return lifted, lead, cats, [lifted.axis, *(f for f in order if f != lifted.axis)]
    i = 0
    while i < len(order):
        fam = order[i]
        if fam not in _DIMENSIONS:
            m = first(fam)
            if m is not None:
                return m, lead, cats, order
            i += 1
            continue
        # a run of measurement dimensions (B advances the next live one): the one whose best
        # unseen move recovers gold best on support rows, the earlier family on ties
        j = i
        while j < len(order) and order[j] in _DIMENSIONS:
            j += 1
        got = best_of(order[i:j])
        if got is not None:
            return got[1], lead, cats, order
        i = j
    return None, lead, cats, order


def _support_lead(par: Parent, inp: Any, best: tuple[float, Move] | None) -> Move | None:
    """For a harmful parent: a spec edit that recovers gold on support rows clearly better.

    The batch categories say which rows a node gets wrong; the support rows (train, never the
    batch) say whether the measurement itself is improvable one edit away. A harmful parent
    repairs but replaces right answers with wrong ones; when ``best``, the best first move of the
    live window, normalization and primitive families, cross-validates at least
    :data:`SUPPORT_LEAD` above the parent's own measurement, the evidence is what is wrong and
    that edit leads (narrowing the scope or widening the band would trade repairs for harms on a
    half-right measurement). Other parents keep the categories' order.
    """
    if best is None or par.genome is None or best[1].genome is None:
        return None
    base = support_cv(par.genome, inp.examples, _CACHE)
    return best[1] if best[0] >= base + SUPPORT_LEAD - 1e-9 else None


def artifact_key(d: Tool) -> str:
    """What makes two drafts the same artifact (source, measurement, rule, scope)."""
    rule = d.guidance.rule.to_dict() if d.guidance is not None and d.guidance.rule else None
    return f"{d.source}\x00{d.contract.measurement}\x00{rule}\x00{d.scope.to_dict()}"


def plan_of(group: WorkGroup) -> tuple[list[dict[str, Any]], list[Branch]]:
    """The group's ranked measurements and composite branches (what its synthesizer drew on)."""
    rows = [r for c in group.cards for r in c.plan.get("ranked", [])]
    branches = [Branch.from_dict(b) for c in group.cards for b in c.plan.get("branches", ())]
    return rows, branches

"""Template genomes: the fields a builtin draft was written from, and their fit on support rows.

A builtin tool is generated from templates (:mod:`tsevo.roles.builtin.measure` for one measurement,
:mod:`tsevo.roles.builtin.composite` for one branch per question kind). A :class:`Genome` holds
those fields of a draft (each branch's spec, output key and reading rule, the scope), so a chain
step can edit one of them and write the source again (:func:`genome_draft`). :func:`genome_of`
recovers the genome of a draft and accepts it only when it writes the draft's exact source.

Values are chosen by cross-validated gold recovery on the group's *support* rows only
(:func:`fit_on_support`, the builtin planner's arithmetic), never on the batch a chain is scored
on.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from tsevo.library.library import scope_matches
from tsevo.library.primitives import CATALOG
from tsevo.library.tool import Guidance, Matcher, ReadingRule, Scope, Tool
from tsevo.roles.builtin.composite import (
    Branch,
    branch_rule,
    composite_doc,
    composite_measurement,
    composite_source,
    member_prefix,
)
from tsevo.roles.builtin.measure import MODES, Spec, SpecCache
from tsevo.roles.builtin.rules import Row, cross_validate, fit_rule, train_accuracy, tune_margin
from tsevo.roles.builtin.specs import words_ok
from tsevo.roles.builtin.specsource import spec_source

__all__ = [
    "EVIDENCE_CV",
    "Candidate",
    "Genome",
    "evidence_right",
    "fit_on_support",
    "genome_draft",
    "genome_of",
    "parse_measurement",
    "support_cv",
    "support_rows",
    "with_rule",
]

_SKIP_KEYS = frozenset(
    {"n", "n_bins", "h", "chronos", "df", "used_lag", "used_lags", "period_used"}
)


@dataclass(frozen=True)
class Genome:
    """The template fields a builtin draft was written from.

    Attributes:
        branches: The measurements (one for a single-measurement tool), each with its reading rule
            and, for a composite tool, the words that dispatch to it.
        composite: Whether the source is a composite tool's (one branch per question kind).
        scope: The artifact's scope.
    """

    branches: tuple[Branch, ...]
    composite: bool
    scope: Scope

    @property
    def measurement(self) -> str:
        """The contract measurement this genome computes."""
        if self.composite:
            return composite_measurement(self.branches)
        b = self.branches[0]
        return b.spec.describe(b.keys[0])

    @property
    def rule(self) -> ReadingRule:
        """The tool's reading rule."""
        return branch_rule(self.branches) if self.composite else self.branches[0].rule


def _single(spec: Spec, key: str, rule: ReadingRule) -> Branch:
    return Branch((), (), (), spec, (key,), rule)


def genome_draft(parent: Tool, g: Genome) -> Tool:
    """``parent`` rewritten from genome ``g``: same kind, signature and name, new source and rule."""
    measurement = g.measurement
    if g.composite:
        source = composite_source(g.branches, name=parent.name, doc=composite_doc(g.branches))
        scope = replace(
            g.scope, kinds=tuple(Matcher(require=b.require, forbid=b.forbid) for b in g.branches)
        )
        outputs: tuple[str, ...] = ()
        text = "Computes one measurement per question kind (branch); how to read each: "
        text += g.rule.describe()
    else:
        b = g.branches[0]
        source = spec_source(
            [(b.spec, list(b.keys))], name=parent.name, doc=f"Evidence: {measurement}."
        )
        scope = g.scope
        outputs = tuple(b.keys) if b.rule.kind != "extremum" else ()
        text = f"Computes {measurement}. How to read it: {g.rule.describe()}."
    return replace(
        parent,
        source=source,
        description=f"measures {measurement}"[:400],
        scope=scope,
        contract=replace(parent.contract, measurement=measurement),
        guidance=Guidance(text, g.rule),
        outputs=outputs,
    )


def genome_of(
    draft: Tool, plan_rows: Sequence[Mapping[str, Any]], branches: Sequence[Branch]
) -> Genome | None:
    """The genome a builtin synthesizer wrote ``draft`` from, or ``None`` when it cannot be told.

    ``plan_rows`` are the group's ranked measurements (``card.plan["ranked"]``), ``branches`` its
    composite branches; the genome is accepted only when it writes ``draft``'s exact source.
    """
    if draft.kind != "tool" or not draft.source or draft.contract.calibration is not None:
        return None
    m = draft.contract.measurement
    found: Genome | None = None
    if m.startswith("composite(") and branches:
        keep = _composite_subset(m, branches)
        if keep is not None:
            rule = draft.guidance.rule if draft.guidance is not None else None
            if rule is not None and rule.kind == "branches" and len(rule.branches) == len(keep):
                keep = [
                    _with_branch_rule(b, r, i)
                    for i, (b, r) in enumerate(zip(keep, rule.branches, strict=True), 1)
                ]
            found = Genome(tuple(keep), True, replace(draft.scope, kinds=()))
    elif draft.guidance is not None and draft.guidance.rule is not None:
        parsed = next(
            (
                (Spec.from_dict(row["spec"]), str(row["key"]))
                for row in plan_rows
                if row.get("measurement") == m
            ),
            None,
        )
        parsed = parsed or parse_measurement(m)  # an attempt of an earlier plan (a replan)
        if parsed is not None:
            found = Genome((_single(*parsed, draft.guidance.rule),), False, draft.scope)
    if found is None:
        return None
    try:
        again = genome_draft(draft, found)
    except (ValueError, KeyError):
        return None
    return found if again.source == draft.source and again.scope == draft.scope else None


def _value(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def parse_measurement(m: str) -> tuple[Spec, str] | None:
    """The spec and output key a single measurement's name describes (inverse of ``describe``).

    ``forecast.delta_noise[qnum; h=#0,level_window=#1]`` gives ``Spec("forecast", "qnum",
    (("h", "#0"), ("level_window", "#1")))`` and ``delta_noise``; ``None`` when it does not parse
    or names no catalog primitive. :func:`genome_of` accepts the result only when it writes the
    draft's exact source.
    """
    head, _, rest = m.partition("[")
    prim, dot, key = head.partition(".")
    if not dot or prim not in CATALOG or not key or (rest and not rest.endswith("]")):
        return None
    mode, params = "primary", ""
    if rest:
        parts = rest[:-1].split("; ")
        if parts[0] in MODES and "=" not in parts[0]:
            mode = parts.pop(0)
        if len(parts) > 1:
            return None
        params = parts[0] if parts else ""
    kv: list[tuple[str, Any]] = []
    for item in filter(None, params.split(",")):
        k, eq, v = item.partition("=")
        if not eq:
            return None
        kv.append((k, _value(v)))
    return Spec(prim, mode, tuple(sorted(kv))), key


def _composite_subset(measurement: str, branches: Sequence[Branch]) -> list[Branch] | None:
    """The branches (in order) whose composite measurement is ``measurement``."""
    bars = sorted({float(b.stats.get("cv_acc", 0.0)) for b in branches} | {0.0})
    for bar in bars:
        keep = [b for b in branches if float(b.stats.get("cv_acc", 0.0)) >= bar]
        if keep and composite_measurement(keep) == measurement:
            return keep
    return None


def with_rule(g: Genome, rule: ReadingRule | None) -> Genome:
    """``g`` with the tool's reading rule ``rule`` (a composite's ``branches`` rule split back)."""
    if rule is None:
        return g
    if not g.composite:
        return replace(g, branches=(replace(g.branches[0], rule=rule),))
    if rule.kind != "branches" or len(rule.branches) != len(g.branches):
        return g
    return replace(
        g,
        branches=tuple(
            _with_branch_rule(b, r, i)
            for i, (b, r) in enumerate(zip(g.branches, rule.branches, strict=True), 1)
        ),
    )


def _with_branch_rule(b: Branch, rule: ReadingRule, i: int) -> Branch:
    """Branch ``i`` with its part of a tool's ``branches`` rule (a consensus: its peers' too)."""
    if rule.kind != "consensus" or len(rule.branches) != 1 + len(b.peers):
        return replace(b, rule=_unprefixed(rule, member_prefix(i, 0)))
    own, *rest = (_unprefixed(r, member_prefix(i, j)) for j, r in enumerate(rule.branches))
    peers = tuple(replace(p, rule=r) for p, r in zip(b.peers, rest, strict=True))
    return replace(
        b,
        rule=own,
        peers=peers,
        quorum=rule.quorum,
        weights=rule.weights,
        lead_quorum=rule.lead_quorum,
    )


def _unprefixed(rule: ReadingRule, p: str) -> ReadingRule:
    if rule.kind == "extremum" and rule.prefix.startswith(p):
        return replace(rule, prefix=rule.prefix[len(p) :])
    if rule.kind in ("label", "nearest_number") and rule.key.startswith(p):
        return replace(rule, key=rule.key[len(p) :])
    return rule


# --------------------------------------------------------------------------- support fitting
@dataclass(frozen=True)
class Candidate:
    """A measurement fitted on support rows: its cross-validated and train accuracy."""

    spec: Spec
    key: str
    rule: ReadingRule
    cv: float
    train: float


def support_rows(examples: Sequence[Any], g: Genome, b: Branch) -> list[Any]:
    """The labelled support rows a branch reads: in the genome's scope, with the branch's words."""
    return [
        e
        for e in examples
        if e.gold is not None
        and scope_matches(g.scope, e.question)
        and words_ok(e.question, b.require, b.forbid)
    ]


def fit_on_support(
    spec: Spec, key: str | None, kind: str, examples: Sequence[Any], cache: SpecCache
) -> list[Candidate]:
    """Fit ``kind`` rules reading ``spec`` on the support rows (``key``: that output only).

    The same arithmetic as the builtin planner (fit, grouped cross-validation, margin tuning), on
    train rows the batch never holds (the few-examples regime below twelve rows, as a question
    kind's branch often has). Returns candidates best first; none when the measurement does not
    cover at least half of the rows (and two) or is constant.
    """
    rows_e = [e for e in examples if e.gold is not None]
    if len(rows_e) < 2:
        return []
    vals = [cache.get(spec, e.question) for e in rows_e]
    present = [v for v in vals if v]
    if len(present) < max(2, len(rows_e) // 2):
        return []
    if kind == "extremum":
        keys = sorted({k.rsplit("_", 1)[0] for v in present for k in v if "_" in k})
    else:
        keys = sorted({k for v in present for k in v})
    if key is not None:
        keys = [k for k in keys if k == key]
    rows = [
        Row(
            e.question.id,
            v,
            e.question.options,
            e.question.candidates,
            int(e.gold),
            getattr(e.record, "final_answer", None),
            e.question.question,
        )
        for e, v in zip(rows_e, vals, strict=True)
    ]
    few = len(rows) < 12
    out = []
    for k in keys:
        if k in _SKIP_KEYS:
            continue
        if kind != "extremum":
            col = [v[k] for v in present if k in v]
            if len(col) < 2 or float(np.ptp(col)) == 0.0:
                continue
        try:
            rule = fit_rule(kind, rows, k, few=few)
            if rule is None:
                continue
            acc = train_accuracy(rule, rows)
            cv = cross_validate(kind, rows, k, few=few)
            rule = tune_margin(replace(rule, confidence=round(min(0.99, max(0.05, cv)), 4)), rows)
        except (ValueError, ArithmeticError, np.linalg.LinAlgError):
            continue
        out.append(Candidate(spec, k, rule, float(cv), float(acc)))
    out.sort(key=lambda c: (-c.cv, -c.train, c.spec.describe(c.key)))
    return out


#: Cross-validated accuracy on support rows from which a measurement's evidence counts as right.
EVIDENCE_CV = 2 / 3


def evidence_right(
    g: Genome | None, examples: Sequence[Any], cache: SpecCache, order: Sequence[int]
) -> bool:
    """Whether the blamed branch's measurement recovers gold on its support rows (design §3.2 I).

    The precondition of ``I`` ("a rule on the stored evidence picks gold") checked where the
    chain may look: a rule refit on the support rows cross-validates at :data:`EVIDENCE_CV` or
    better. Without a genome the evidence is taken as right (the design's default reading).
    """
    if g is None or not order:
        return True
    b = g.branches[order[0]]
    if len(b.keys) != 1 or b.rule.kind not in ("label", "nearest_number", "extremum"):
        return True
    fits = fit_on_support(b.spec, b.keys[0], b.rule.kind, support_rows(examples, g, b), cache)
    return bool(fits) and fits[0].cv >= EVIDENCE_CV - 1e-9


def support_cv(g: Genome, examples: Sequence[Any], cache: SpecCache) -> float:
    """How well a genome's measurements recover gold on support rows (values for a step's choice).

    The mean over branches of the best cross-validated accuracy of a rule refit on each branch's
    support rows (0 for a branch that cannot be read).
    """
    vals = []
    for b in g.branches:
        if len(b.keys) != 1 or b.rule.kind not in ("label", "nearest_number", "extremum"):
            vals.append(0.0)
            continue
        fits = fit_on_support(b.spec, b.keys[0], b.rule.kind, support_rows(examples, g, b), cache)
        vals.append(fits[0].cv if fits else 0.0)
    return float(np.mean(vals)) if vals else 0.0
